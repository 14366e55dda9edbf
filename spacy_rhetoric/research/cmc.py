"""Metaphor detection on held-out CMC sentences (``corpora/cmc.py``).

CMC's label 1 ("metaphorical") covers metaphor *and* personification, so a
sentence counts as predicted positive when the pipeline gives any of its
sentences (``doc.sents`` of the pipeline's own segmentation) the coarse label
``metaphor`` or ``personification`` in ``sent._.rhetoric``. Reported, with
true/false positives and negatives:

- ``overall``, ``with_xiang`` and ``without_xiang`` (text contains 像 or 象,
  or not): P/R/F1 of that decision;
- ``metaphor_only``: the same three subsets, predicting positive from coarse
  ``metaphor`` alone (gold unchanged, so its recall is bounded by the share
  of CMC positives that are metaphors rather than personifications);
- ``distinct``: ``overall`` over distinct texts (the first line of each
  text), because the corpus repeats some sentences up to 14 times;
- ``predicted_labels``: how many sentences got each coarse label.

P = TP / (TP + FP), R = TP / (TP + FN), F1 = 2PR / (P + R); 0.0 when a
denominator is 0.
"""
from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Collection, Dict, List, Optional, Sequence, Set, Union

from ..corpora.cmc import has_comparator

DEVICE_LABELS = ("metaphor", "personification")


def prf(gold: Sequence[int], pred: Sequence[bool]) -> Dict[str, float]:
    """Counts and P/R/F1 of binary predictions ``pred`` against ``gold``
    (0/1), aligned sequences of equal length."""
    tp = sum(1 for g, p in zip(gold, pred) if g and p)
    fp = sum(1 for g, p in zip(gold, pred) if not g and p)
    fn = sum(1 for g, p in zip(gold, pred) if g and not p)
    tn = len(gold) - tp - fp - fn
    p = tp / (tp + fp) if tp + fp else 0.0
    r = tp / (tp + fn) if tp + fn else 0.0
    f = 2 * p * r / (p + r) if p + r else 0.0
    return {"sentences": len(gold), "positives": tp + fn, "predicted": tp + fp,
            "tp": tp, "fp": fp, "fn": fn, "tn": tn, "p": p, "r": r, "f": f}


def _subsets(gold: Sequence[int], pred: Sequence[bool], texts: Sequence[str]) -> Dict[str, Dict[str, float]]:
    xiang = [has_comparator(t) for t in texts]
    out = {"overall": prf(gold, pred)}
    for name, want in (("with_xiang", True), ("without_xiang", False)):
        idx = [i for i, x in enumerate(xiang) if x == want]
        out[name] = prf([gold[i] for i in idx], [pred[i] for i in idx])
    return out


def score_cmc(
    gold: Sequence[int], predictions: Sequence[Collection[str]], texts: Sequence[str]
) -> Dict[str, object]:
    """Pure counting (see the module docstring).

    gold: CMC labels (0/1), one per sentence; predictions: the coarse labels
    the pipeline gave the sentence (union over its ``doc.sents``; ``literal``
    may appear and counts as nothing); texts: the sentences, for the 像/象
    subsets and the distinct-text figure. Raises ValueError if the three
    lengths differ or a gold label is not 0/1.
    """
    if not len(gold) == len(predictions) == len(texts):
        raise ValueError(f"lengths differ: {len(gold)} gold, {len(predictions)} predictions, {len(texts)} texts")
    if any(g not in (0, 1) for g in gold):
        raise ValueError("gold labels must be 0 or 1")
    gold = [int(g) for g in gold]
    device = [any(lab in DEVICE_LABELS for lab in p) for p in predictions]
    metaphor = ["metaphor" in p for p in predictions]
    first: Dict[str, int] = {}
    for i, t in enumerate(texts):
        first.setdefault(t, i)
    keep = sorted(first.values())
    counts: Dict[str, int] = {}
    for labels in predictions:
        for lab in set(labels):
            counts[lab] = counts.get(lab, 0) + 1
    return {
        **_subsets(gold, device, texts),
        "metaphor_only": _subsets(gold, metaphor, texts),
        "distinct": prf([gold[i] for i in keep], [device[i] for i in keep]),
        "predicted_labels": dict(sorted(counts.items())),
    }


def predict_coarse(nlp, texts: Sequence[str], batch_size: int = 64) -> List[Set[str]]:
    """Coarse labels per text: the union over ``doc.sents`` of the keys of
    ``sent._.rhetoric["coarse"]`` after ``nlp.pipe(texts)`` (empty sets when
    the pipeline sets no ``Span._.rhetoric``)."""
    from spacy.tokens import Span

    has_ext = Span.has_extension("rhetoric")
    out: List[Set[str]] = []
    for doc in nlp.pipe(texts, batch_size=batch_size):
        labels: Set[str] = set()
        if has_ext and len(doc):
            sents = doc.sents if doc.has_annotation("SENT_START") else [doc[:]]
            for sent in sents:
                labels.update((sent._.rhetoric or {}).get("coarse", {}))
        out.append(labels)
    return out


def evaluate_cmc(
    model: Union[str, Path],
    data: Union[str, Path],
    output: Optional[Union[str, Path]] = None,
    batch_size: int = 64,
) -> Dict[str, object]:
    """Load ``model`` (pipeline folder or package name, via
    ``pipeline.load_pipeline``), run it over the raw texts of the CMC DocBin
    ``data`` (written by ``convert_cmc``) and score with :func:`score_cmc`.

    Adds ``model``, ``model_name``, ``model_version``, ``data``, ``seconds``.
    Writes the result as JSON to ``output`` when given. Raises OSError when
    the pipeline cannot be loaded and ValueError when a doc has no
    ``user_data["cmc_label"]``.
    """
    from ..analysis.loading import load_pipeline
    from ..corpora.docbin import read_docbin

    nlp = load_pipeline(str(model))
    gold, texts = [], []
    for i, doc in enumerate(read_docbin(Path(data), nlp.vocab)):
        if doc.user_data.get("cmc_label") not in (0, 1):
            raise ValueError(f"{data}: doc {i} has no user_data['cmc_label'] (not a CMC DocBin?)")
        gold.append(doc.user_data["cmc_label"])
        texts.append(doc.text)
    start = time.perf_counter()
    predictions = predict_coarse(nlp, texts, batch_size=batch_size)
    seconds = time.perf_counter() - start
    result = {
        "model": str(model),
        "model_name": f"{nlp.lang}_{nlp.meta.get('name', '')}",
        "model_version": nlp.meta.get("version", ""),
        "data": str(data),
        "seconds": round(seconds, 2),
        **score_cmc(gold, predictions, texts),
    }
    if output is not None:
        output = Path(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf8")
    return result
