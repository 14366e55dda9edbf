"""The rhetoric classifiers on gold units: evaluated on DocBins and their
thresholds tuned there, through the registered scorers.

The pipeline runs on docs with the gold words (and, by default, gold
sentence starts), as CERD and the PSE-I baselines are evaluated on gold
tokenisation (DESIGN §2): figures of this module are upper bounds, labelled
so; the evaluation of record is the raw path
(:mod:`spacy_rhetoric.evaluation.raw_path`), whose tuning chooses the
shipped thresholds. The scorers themselves (:mod:`spacy_rhetoric.scorers`)
only take examples and return dicts.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from spacy.training import Example

from ..analysis.loading import load_pipeline
from ..corpora.readers import gold_word_example
from ..evaluation.util import THRESHOLD_GRID, apply_component, read_references
from ..scorers.classification import score_rhetoric_classification
from ..scorers.components import score_rhetoric_components



def evaluate_rhetoric(
    model: Union[str, Path], data: Path, *, gold_sents: bool = True, output: Optional[Path] = None
) -> Dict[str, Any]:
    """Run ``model`` (a pipeline path or ``"rules"``) on ``data`` and score
    its rhetoric outputs with the registered scorers.

    Returns the keys of :func:`score_rhetoric_classification` and
    :func:`score_rhetoric_components`, plus ``rhetoric_tenor_vehicle_*``
    (the component scores restricted to tenor and vehicle), ``model``,
    ``data``, ``n_docs`` and ``n_words``. Writes them as JSON to ``output``.
    """
    nlp = load_pipeline(model)
    refs = read_references(Path(data), nlp)
    examples = [gold_word_example(nlp, ref, gold_sents) for ref in refs]
    predicted = list(nlp.pipe([eg.predicted for eg in examples]))
    examples = [Example(pred, eg.reference) for pred, eg in zip(predicted, examples)]
    scores: Dict[str, Any] = {"model": str(model), "data": str(data), "n_docs": len(refs)}
    scores["n_words"] = sum(len(d) for d in refs)
    scores.update(score_rhetoric_classification(examples))
    scores.update(score_rhetoric_components(examples))
    scores.update(score_rhetoric_components(examples, labels={"tenor", "vehicle"}, prefix="rhetoric_tenor_vehicle"))
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(scores, indent=2, ensure_ascii=False), encoding="utf8")
    return scores


def tune_thresholds(
    model: Union[str, Path], dev: Path, output: Path, *, grid: Sequence[float] = THRESHOLD_GRID
) -> Dict[str, Any]:
    """Choose the decision thresholds of ``rhetoric_textcat`` (maximising
    coarse micro F1) and ``rhetoric_components`` (maximising strict micro F1)
    on ``dev``, and save the pipeline with them to ``output``.

    Each component predicts once; only the decoding is repeated per grid
    value. Returns ``{component: {"threshold", "score", "grid": {t: score}}}``.
    Raises ValueError if the pipeline has neither component.
    """
    nlp = load_pipeline(model)
    refs = read_references(Path(dev), nlp)
    docs = [gold_word_example(nlp, ref, True).predicted for ref in refs]
    targets = {"rhetoric_textcat": ("rhetoric_coarse_micro_f", score_rhetoric_classification),
               "rhetoric_components": ("rhetoric_components_f", score_rhetoric_components)}
    if not any(name in nlp.pipe_names for name in targets):
        raise ValueError(f"{model} has neither rhetoric_textcat nor rhetoric_components")
    result: Dict[str, Any] = {}
    for name, proc in nlp.pipeline:
        if name not in targets:
            docs = apply_component(proc, docs)
            continue
        key, scorer = targets[name]
        predictions = proc.predict(docs)
        curve = {}
        for t in grid:
            proc.cfg["threshold"] = float(t)
            proc.set_annotations(docs, predictions)
            curve[float(t)] = scorer([Example(d, r) for d, r in zip(docs, refs)])[key]
        best = max(curve, key=lambda t: (curve[t] or 0.0, -abs(t - 0.5)))
        proc.cfg["threshold"] = best
        proc.set_annotations(docs, predictions)
        result[name] = {"threshold": best, "score": curve[best], "grid": curve}
    nlp.to_disk(output)
    return result


def tune_label_thresholds(
    model: Union[str, Path],
    devs: Sequence[Path],
    output: Path,
    *,
    min_support: int = 10,
    grid: Sequence[float] = THRESHOLD_GRID,
) -> Dict[str, Any]:
    """Choose one ``rhetoric_textcat`` threshold per coarse device on the dev
    sets ``devs`` (each device's own F1 on the sentences that annotate it),
    keeping the global threshold for the others, and save the pipeline with
    them (``cfg["thresholds"]``) to ``output``.

    Only devices with at least ``min_support`` gold sentences in the dev
    sets are tuned: a threshold chosen on a handful of sentences would fit
    noise. The textcat predicts once; only the decoding is repeated. Returns
    ``{label: {"threshold", "f", "support", "grid"}}``. Raises ValueError if
    the pipeline has no ``rhetoric_textcat``.
    """
    from ..annotation import gold_sentence_labels, sentence_spans

    nlp = load_pipeline(model)
    if "rhetoric_textcat" not in nlp.pipe_names:
        raise ValueError(f"{model} has no rhetoric_textcat")
    refs = [ref for dev in devs for ref in read_references(Path(dev), nlp)]
    docs = [gold_word_example(nlp, ref, True).predicted for ref in refs]
    support: Dict[str, int] = {}
    for ref in refs:
        for sent in sentence_spans(ref):
            for key in gold_sentence_labels(ref, sent):
                support[key] = support.get(key, 0) + 1
    textcat = nlp.get_pipe("rhetoric_textcat")
    for name, proc in nlp.pipeline:
        if name == "rhetoric_textcat":
            break
        docs = apply_component(proc, docs)
    predictions = textcat.predict(docs)
    thresholds = dict(textcat.cfg.get("thresholds") or {})
    result: Dict[str, Any] = {}
    for key in [k for k in textcat.labels if k.startswith("coarse/") and not k.endswith("/literal")]:
        label = key.split("/", 1)[1]
        if support.get(key, 0) < min_support:
            continue
        curve = {}
        for t in grid:
            textcat.cfg["thresholds"] = {**thresholds, key: float(t)}
            textcat.set_annotations(docs, predictions)
            per_type = score_rhetoric_classification([Example(d, r) for d, r in zip(docs, refs)])["rhetoric_coarse_per_type"]
            curve[float(t)] = (per_type.get(label) or {}).get("f") or 0.0
        best = max(curve, key=lambda t: (curve[t], -abs(t - 0.5)))
        thresholds[key] = best
        result[label] = {"threshold": best, "f": curve[best], "support": support[key], "grid": curve}
    textcat.cfg["thresholds"] = thresholds
    nlp.to_disk(output)
    return result


def summary_rows(scores: Dict[str, Any]) -> List[tuple]:
    """``(name, P, R, F1)`` rows of the headline scores present in ``scores``."""
    rows = []

    def add(name: str, p, r, f) -> None:
        if f is not None:
            rows.append((name, f"{p:.4f}", f"{r:.4f}", f"{f:.4f}"))

    for level in ("coarse", "form", "content"):
        pre = f"rhetoric_{level}"
        add(f"{level} micro", scores.get(f"{pre}_micro_p"), scores.get(f"{pre}_micro_r"), scores.get(f"{pre}_micro_f"))
        add(f"{level} macro", scores.get(f"{pre}_macro_p"), scores.get(f"{pre}_macro_r"), scores.get(f"{pre}_macro_f"))
        zd1 = scores.get(f"{pre}_macro_zd1")
        if zd1:
            add(f"{level} macro, zero_division=1", zd1["p"], zd1["r"], zd1["f"])
        for label, v in (scores.get(f"{pre}_per_type") or {}).items():
            add(f"{level}/{label}", v["p"], v["r"], v["f"])
        if scores.get(f"{pre}_em") is not None:
            rows.append((f"{level} exact match", "", "", f"{scores[f'{pre}_em']:.4f}"))
    for pre, name in (("rhetoric_components", "components"), ("rhetoric_tenor_vehicle", "tenor+vehicle")):
        add(f"{name} micro", scores.get(f"{pre}_p"), scores.get(f"{pre}_r"), scores.get(f"{pre}_f"))
    for label, v in (scores.get("rhetoric_components_per_type") or {}).items():
        add(f"component/{label}", v["p"], v["r"], v["f"])
    for key in ("rhetoric_form_mapping", "rhetoric_content_mapping", "rhetoric_components_form_mapping"):
        if scores.get(key) is not None:
            rows.append((key, "", "", f"{scores[key]:.4f}"))
    return rows
