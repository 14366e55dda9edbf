"""Evaluation and speed benchmark of the rhetoric classifiers on DocBins.

Both run the pipeline on docs with the gold words (and, by default, gold
sentence starts), as CERD and the PSE-I baselines are evaluated on gold
tokenisation (DESIGN §2).
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Union

import spacy
from spacy.language import Language
from spacy.tokens import Doc, DocBin
from spacy.training import Example

from ..readers import gold_word_example
from .classification import score_rhetoric_classification
from .components import score_rhetoric_components

RULES = "rules"


def load_pipeline(model: Union[str, Path]) -> Language:
    """``spacy.load(model)``, or the rule baseline pipeline for ``"rules"``
    (blank ``zh`` + ``rhetoric_simile_rules``)."""
    if str(model) == RULES:
        nlp = spacy.blank("zh")
        nlp.add_pipe("rhetoric_simile_rules")
        return nlp
    return spacy.load(model)


def read_references(data: Path, nlp: Language, limit: int = 0) -> List[Doc]:
    """Non-empty reference docs of a DocBin (at most ``limit`` if > 0).
    Raises ValueError naming the file when it has no docs."""
    docs = [d for d in DocBin().from_disk(data).get_docs(nlp.vocab) if len(d)]
    if limit:
        docs = docs[:limit]
    if not docs:
        raise ValueError(f"{data}: no non-empty docs")
    return docs


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


def benchmark_pipeline(
    model: Union[str, Path], data: Path, *, limit: int = 0, batch_size: int = 256, output: Optional[Path] = None
) -> Dict[str, Any]:
    """Words per second of each pipeline component on one CPU core.

    Docs with gold words and sentences are passed through the components in
    order; each component is timed on its own (``pipe`` over all docs after
    one warm-up batch). Returns ``{"components": {name: {"seconds", "wps"}},
    "pipeline": {...}, "n_words", "n_docs", "threads": 1}``.
    """
    import torch
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    nlp = load_pipeline(model)
    refs = read_references(Path(data), nlp, limit)
    docs = [gold_word_example(nlp, ref, True).predicted for ref in refs]
    n_words = sum(len(d) for d in docs)
    result: Dict[str, Any] = {"model": str(model), "data": str(data), "n_docs": len(docs)}
    result.update({"n_words": n_words, "threads": 1, "components": {}})
    total = 0.0
    with threadpool_limits(limits=1):
        for name, proc in nlp.pipeline:
            list(proc.pipe([d.copy() for d in docs[:batch_size]], batch_size=batch_size)) if hasattr(proc, "pipe") else None
            start = time.perf_counter()
            if hasattr(proc, "pipe"):
                docs = list(proc.pipe(docs, batch_size=batch_size))
            else:
                docs = [proc(d) for d in docs]
            seconds = time.perf_counter() - start
            total += seconds
            result["components"][name] = {"seconds": seconds, "wps": n_words / seconds if seconds else None}
    result["pipeline"] = {"seconds": total, "wps": n_words / total if total else None}
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2), encoding="utf8")
    return result
