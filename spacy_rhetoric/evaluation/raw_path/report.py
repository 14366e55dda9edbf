"""The raw-path evaluation of a pipeline on each corpus
(:func:`evaluate_raw`) and the rows of its headline table
(:func:`headline_rows`).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

from spacy.language import Language

from ...taxonomy import LEVELS, LITERAL
from .gold import FIXED_SPLITS, read_gold
from .scoring import predict_gold_units, predict_raw, score_records


def evaluate_raw(
    model: Union[str, Path, Language],
    corpora: Sequence[str],
    *,
    shared: Path,
    annotations: Path,
    split: str = "test",
    gold_units: bool = False,
    batch_size: int = 8,
    config: Optional[Dict[str, Any]] = None,
    output: Optional[Path] = None,
) -> Dict[str, Any]:
    """Run ``model`` on each corpus as raw text (and, with ``gold_units``, on
    its gold units too) and score by characters.

    Returns ``{"model", "version", "split", "corpora": {name: {"raw": scores,
    "gold_units": scores?, "seconds"}}}`` (scores of :func:`score_records`)
    and writes it as JSON to ``output``; the raw scores hold
    ``"figurative_units"`` when the pipeline has that component.
    ``config``: overrides for loading
    ``model`` (a nested dict). Raises ValueError for an unknown corpus,
    OSError for missing data.
    """
    from ...analysis.loading import load_pipeline

    nlp = model if isinstance(model, Language) else load_pipeline(model, config)
    result: Dict[str, Any] = {"model": str(model) if not isinstance(model, Language) else f"{nlp.lang}_{nlp.meta.get('name')}",
                              "name": f"{nlp.lang}_{nlp.meta.get('name', '')}", "version": nlp.meta.get("version"),
                              "split": split, "config": config or {}, "corpora": {}}
    units = any(nlp.get_pipe_meta(name).factory == "figurative_units" for name in nlp.pipe_names)
    for corpus in corpora:
        gold = read_gold(corpus, shared, annotations, split)
        t0 = time.perf_counter()
        entry = {"raw": score_records(gold, predict_raw(nlp, gold, batch_size), figurative_units=units)}
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        entry["split"] = FIXED_SPLITS.get(corpus, split)
        if gold_units:
            entry["gold_units"] = score_records(gold, predict_gold_units(nlp, gold, batch_size))
        result["corpora"][corpus] = entry
    if output is not None:
        output = Path(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf8")
    return result


def _fmt(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.3f}"


def headline_rows(entry: Dict[str, Any]) -> List[Tuple[str, ...]]:
    """Rows ``(score, raw P, R, F1, gold-unit F1)`` of one corpus entry."""
    raw, gold = entry["raw"], entry.get("gold_units")
    rows: List[Tuple[str, ...]] = []

    def f_of(scores: Optional[Dict[str, Any]], path: Sequence[str]) -> Optional[float]:
        node: Any = scores
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    for sub in ("all", "body", "headings"):
        block = raw["sentences"].get(sub, {})
        if not block.get("n_units"):
            continue
        for level in LEVELS:
            per = block.get(f"sents_{level}_per_type")
            if per is None:
                continue
            micro = (block.get(f"sents_{level}_micro_p"), block.get(f"sents_{level}_micro_r"), block.get(f"sents_{level}_micro_f"))
            gf = f_of(gold, ("sentences", sub, f"sents_{level}_micro_f"))
            rows.append((f"{sub} ({block['n_units']}) {level} micro", *map(_fmt, micro), _fmt(gf)))
            if sub == "all" or level == "coarse":
                for label, v in per.items():
                    if label == LITERAL:
                        continue
                    gv = f_of(gold, ("sentences", sub, f"sents_{level}_per_type", label, "f"))
                    rows.append((f"{sub} {level}/{label}", _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]), _fmt(gv)))
    comps = raw.get("components")
    if comps:
        for kind in ("strict", "overlap"):
            c = comps[kind]
            rows.append((f"components {kind} micro", _fmt(c["p"]), _fmt(c["r"]), _fmt(c["f"]),
                         _fmt(f_of(gold, ("components", kind, "f")))))
            for label, v in c["per_type"].items():
                rows.append((f"components {kind} {label}", _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]),
                             _fmt(f_of(gold, ("components", kind, "per_type", label, "f")))))
    par = raw.get("parallelism")
    if par:
        for metric, v in par.items():
            rows.append((f"parallelism {metric.upper()}", _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]),
                         _fmt(f_of(gold, ("parallelism", metric, "f")))))
    cross = raw.get("cross_paragraph")
    if cross:
        for sub, title in (("with_gold", f"texts with one ({cross['texts_with_gold']})"), ("all", "all texts")):
            c, gc = cross[sub], f_of(gold, ("cross_paragraph", sub)) or {}
            for what in ("link", "group"):
                rows.append((f"cross-paragraph {what}s, {title}", _fmt(c[f"cross_{what}_p"]), _fmt(c[f"cross_{what}_r"]),
                             _fmt(c[f"cross_{what}_f"]), _fmt(gc.get(f"cross_{what}_f"))))
        rows.append((f"cross-paragraph groups on the {cross['texts_without_gold']} texts without one", "", "",
                     str(cross["groups_on_texts_without_gold"]), ""))
    for label, v in (raw.get("accuracy") or {}).items():
        rows.append((f"{label} sentence accuracy ({v['n_units']})", "", "", _fmt(v["accuracy"]),
                     _fmt(f_of(gold, ("accuracy", label, "accuracy")))))
    figures = raw.get("figures")
    if figures:
        for device, v in [*figures["per_device"].items(), ("micro", figures["micro"])]:
            rows.append((f"figurative units {device} ({v['support']} gold, {v['predicted']} predicted sentences)",
                         _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]),
                         _fmt(f_of(gold, ("figures", "per_device", device, "f")) if device != "micro"
                              else f_of(gold, ("figures", "micro", "f")))))
    units = raw.get("figurative_units")
    if units:
        for device, v in [*units["per_device"].items(), ("micro", units["micro"])]:
            rows.append((f"figurative_units component {device} ({v['support']} gold sentences, {v['predicted']} predicted units)",
                         _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]), ""))
    u = raw["units"]
    if not u["n_units"]:  # no gold sentence units (ConFiguRe)
        return rows
    if u["boundary_f"] is not None:
        rows.append(("sentence units: boundary", _fmt(u["boundary_p"]), _fmt(u["boundary_r"]), _fmt(u["boundary_f"]), ""))
    rows.append(("sentence units: gold units matched exactly", "", "", _fmt(u["exact_units"]), ""))
    return rows
