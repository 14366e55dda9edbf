"""Choices made on dev on the raw path: the rhetoric classifiers' thresholds
(:func:`tune_thresholds_raw`), the component thresholds
(:func:`tune_component_thresholds_raw`) and the parallelism linker's
``o_bias`` (:func:`tune_linker_bias_raw`), each scored as
:func:`~spacy_rhetoric.evaluation.raw_path.scoring.score_records` scores.
"""
from __future__ import annotations

from collections import Counter
from typing import Any, Dict, List, Optional, Sequence

from spacy.language import Language

from ...taxonomy import LITERAL
from .gold import GoldDoc
from .scoring import coarse_counts, score_components, score_parallelism


def nearest_half(curve: Dict[float, float], tolerance: float) -> float:
    """The threshold nearest 0.5 whose F1 in ``curve`` ({threshold: F1}) is
    within ``tolerance`` of the best (the higher F1 on a tie of distance)."""
    top = max(curve.values())
    return min((t for t in curve if curve[t] >= top - tolerance), key=lambda t: (abs(t - 0.5), -curve[t]))


def _predict_last(nlp: Language, name: str, devs: Sequence[Sequence[GoldDoc]], batch_size: int):
    """``(gold, component, docs, predictions)``: the pooled gold docs of
    ``devs``, every other component run once on their texts, then
    ``name``'s raw predictions, which its tuner re-decodes per threshold.
    Raises ValueError without ``name``."""
    from ...analysis.records import single_torch_thread

    gold = [g for dev in devs for g in dev]
    if name not in nlp.pipe_names:
        raise ValueError(f"the pipeline has no {name}")
    pipe = nlp.get_pipe(name)
    with single_torch_thread():
        docs = list(nlp.pipe((g.text for g in gold), batch_size=batch_size, disable=[name]))
        return gold, pipe, docs, pipe.predict(docs)


def _tune_per_label(pipe, docs, predictions, gold, keys: Dict[str, str], support: Counter, f_of,
                    grid: Optional[Sequence[float]], min_support: int, tolerance: float) -> Dict[str, Any]:
    """The grid search shared by the two tuners: for each ``cfg["thresholds"]``
    key (mapped to its gold label) with enough support, re-decode ``docs``
    from the one ``predictions`` at every grid value (``THRESHOLD_GRID``
    when ``grid`` is None), score the records with ``f_of(records, label)``
    and keep :func:`nearest_half`; the thresholds are left set in
    ``pipe.cfg``."""
    from ...analysis.records import doc_to_record
    from ..util import THRESHOLD_GRID

    grid = THRESHOLD_GRID if grid is None else grid
    thresholds = dict(pipe.cfg.get("thresholds") or {})
    result: Dict[str, Any] = {}
    for key, label in keys.items():
        if support[label] < min_support:
            continue
        curve = {}
        for t in grid:
            pipe.cfg["thresholds"] = {**thresholds, key: float(t)}
            pipe.set_annotations(docs, predictions)
            curve[float(t)] = f_of([doc_to_record(d, g.id) for d, g in zip(docs, gold)], label)
        best = nearest_half(curve, tolerance)
        thresholds[key] = best
        result[label] = {"threshold": best, "f": curve[best], "support": support[label], "grid": curve}
    pipe.cfg["thresholds"] = thresholds
    return result


#: ``o_bias`` values :func:`tune_linker_bias_raw` tries (log-potential units).
O_BIAS_GRID = tuple(round(0.05 * i, 2) for i in range(13))


def tune_linker_bias_raw(
    nlp: Language,
    devs: Sequence[Sequence[GoldDoc]],
    *,
    grid: Sequence[float] = O_BIAS_GRID,
    tolerance: float = 0.01,
    batch_size: int = 8,
) -> Dict[str, Any]:
    """Choose ``parallelism_linker``'s ``o_bias`` (the decision-rule bias
    against the ``O`` tag) on the dev texts that annotate parallelism, read
    as raw text, and set it in the component's ``cfg``.

    The components before the linker run once; the linker decodes once per
    grid value. The score is the mean of EPM F1 and MBAWO F1 (Bothwell et
    al. 2023 §5, weighted as in the linker's default score weights); the
    smallest bias within
    ``tolerance`` of the best wins, so the trained decoding (0) stays unless
    dev shows a gain. Run it before the classifier's thresholds: the
    classifier's parallelism rule reads the linker's branches. Returns
    ``{"o_bias", "f", "grid": {bias: score}, "texts"}``. Raises ValueError
    without a ``parallelism_linker`` or without parallelism gold in ``devs``.
    """
    from ...analysis.records import doc_to_record, single_torch_thread
    from ..util import apply_component

    name = "parallelism_linker"
    if name not in nlp.pipe_names:
        raise ValueError(f"the pipeline has no {name}")
    gold = [g for dev in devs for g in dev if g.parallelisms is not None and g.words is not None]
    if not gold:
        raise ValueError("no dev text annotates parallelism")
    linker = nlp.get_pipe(name)
    with single_torch_thread():
        before = list(nlp.pipe((g.text for g in gold), batch_size=batch_size,
                               disable=nlp.pipe_names[nlp.pipe_names.index(name):]))
        curve = {}
        for bias in grid:
            linker.cfg["o_bias"] = float(bias)
            # the linker replaces its own span groups: the same docs serve every grid value
            docs = apply_component(linker, before, batch_size)
            scores = score_parallelism(gold, [doc_to_record(d, g.id) for d, g in zip(docs, gold)])
            curve[float(bias)] = (scores["epm"]["f"] + scores["mbawo"]["f"]) / 2
    top = max(curve.values())
    best = min(b for b in curve if curve[b] >= top - tolerance)
    linker.cfg["o_bias"] = best
    return {"o_bias": best, "f": curve[best], "grid": curve, "texts": len(gold)}


def tune_thresholds_raw(
    nlp: Language,
    devs: Sequence[Sequence[GoldDoc]],
    *,
    grid: Optional[Sequence[float]] = None,
    min_support: int = 10,
    tolerance: float = 0.01,
    batch_size: int = 8,
) -> Dict[str, Any]:
    """Choose one ``rhetoric_textcat`` threshold per coarse device on dev
    texts read as raw text (the user's path), and set them in the
    component's ``cfg["thresholds"]``.

    Every other component runs once; the classifier predicts once and only
    its decoding (linker rule included) is repeated per grid value. A device
    is tuned on the pooled dev units that score it, when it has at least
    ``min_support`` of them (fewer would fit noise). The threshold nearest
    0.5 whose dev F1 is within ``tolerance`` of the best wins: a dev set of
    a few dozen units cannot tell such thresholds apart, and a low threshold
    chosen on essays labels that device on every kind of text (the
    transformer's parallelism at 0.15, best on 12 dev essays by 0.006, put
    parallelism on 787 of 2,262 simile test sentences). Returns ``{label: {"threshold", "f",
    "support", "grid"}}``. Raises ValueError without a ``rhetoric_textcat``.
    """
    gold, textcat, docs, predictions = _predict_last(nlp, "rhetoric_textcat", devs, batch_size)
    support = Counter(lab for g in gold for u in g.units
                      for lab in u.labels.get("coarse", ()) if lab in g.scored.get("coarse", ()))
    devices = [k.split("/", 1)[1] for k in textcat.labels
               if k.startswith("coarse/") and k != f"coarse/{LITERAL}" and k in textcat.cfg["trained_labels"]]

    def f_of(records: List[Dict[str, Any]], label: str) -> float:
        return coarse_counts(gold, records)[label].fscore

    return _tune_per_label(textcat, docs, predictions, gold, {f"coarse/{lab}": lab for lab in devices},
                           support, f_of, grid, min_support, tolerance)


def tune_component_thresholds_raw(
    nlp: Language,
    devs: Sequence[Sequence[GoldDoc]],
    *,
    grid: Optional[Sequence[float]] = None,
    min_support: int = 10,
    tolerance: float = 0.01,
    batch_size: int = 8,
) -> Dict[str, Any]:
    """Choose one ``rhetoric_components`` threshold per component label on
    dev texts read as raw text, by strict-span F1 (the rule of
    :func:`tune_thresholds_raw`: nearest 0.5 within ``tolerance`` of the
    best), and set them in the component's ``cfg["thresholds"]``. Run it
    after the classifier's thresholds are set: the component looks only in
    device sentences. Labels with fewer than ``min_support`` dev spans keep
    the default. Returns ``{label: {"threshold", "f", "support", "grid"}}``.
    Raises ValueError without a ``rhetoric_components``."""
    gold, pipe, docs, predictions = _predict_last(nlp, "rhetoric_components", devs, batch_size)
    support = Counter(lab for g in gold for lab, _, _ in (g.components or ()))

    def f_of(records: List[Dict[str, Any]], label: str) -> float:
        return score_components(gold, records)["strict"]["per_type"].get(label, {}).get("f", 0.0)

    return _tune_per_label(pipe, docs, predictions, gold, {lab: lab for lab in pipe.labels},
                           support, f_of, grid, min_support, tolerance)
