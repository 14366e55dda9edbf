"""Figurative unit scores: ConFiguRe's tasks 1 and 3 (Zhu et al. 2022,
``papers/001`` §4 and §5, Table 3), plus an overlap match.

A unit is compared by its character offsets without punctuation and
whitespace at its edges (:func:`unit_key`), so a unit that ends in ``，``
and one that stops before it are the same unit, and the tokenisation and the
clause segmentation of the two sides do not matter.

- extraction (task 1): exact unit match, labels ignored; P, R, micro-F1;
- recognition (task 3): exact unit and type; P, R, micro-F1, and macro-F1,
  the mean of the per-type F1 over the types that occur in the gold or the
  predictions of the data scored (as scikit-learn's ``f1_score(average=
  "macro")``; the paper's code averages over its label list);
- overlap: a predicted unit is correct when it shares a character with a gold
  unit of its type, a gold unit is found when a predicted unit of its type
  shares a character with it.

Task 2 (type classification given the gold units) needs the model and is in
:mod:`spacy_rhetoric.evaluation.configure`.
"""
from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, Dict, Iterable, List, Optional, Sequence, Tuple

from spacy.scorer import PRFScore
from spacy.training import Example
from spacy.util import registry

if TYPE_CHECKING:
    from spacy.tokens import Doc

    from ..corpora.configure import Passage

Unit = Tuple[int, int, str]

_LEAD = re.compile(r"^[\s\W_]+")
_TRAIL = re.compile(r"[\s\W_]+$")


def unit_key(text: str, begin: int, end: int) -> Tuple[int, int]:
    """``begin..end`` (characters of ``text``, end exclusive) without
    punctuation and whitespace at its edges; unchanged when nothing else is
    left."""
    piece = text[begin:end]
    lead = _LEAD.match(piece)
    trail = _TRAIL.search(piece)
    b = begin + (lead.end() if lead else 0)
    e = end - (len(trail.group()) if trail else 0)
    return (b, e) if b < e else (begin, end)


def score_unit_sets(docs: Iterable[Tuple[Sequence[Unit], Sequence[Unit]]]) -> Dict[str, object]:
    """Scores of ``(gold units, predicted units)`` per doc, units
    ``(begin, end, label)`` already passed through :func:`unit_key`.

    Returns ``extraction_{p,r,f}``, ``recognition_{p,r,f}``,
    ``recognition_macro_f``, ``overlap_{p,r,f}``, ``per_type`` (label ->
    ``{p, r, f, gold, predicted}``), ``gold`` and ``predicted`` (counts).
    """
    extraction, recognition, overlap_p, overlap_r = PRFScore(), PRFScore(), PRFScore(), PRFScore()
    per_type: Dict[str, PRFScore] = {}
    counts: Dict[str, List[int]] = {}
    n_gold = n_pred = 0
    for gold, pred in docs:
        gold, pred = set(gold), set(pred)
        n_gold += len(gold)
        n_pred += len(pred)
        extraction.score_set({(b, e) for b, e, _ in pred}, {(b, e) for b, e, _ in gold})
        recognition.score_set(pred, gold)
        for label in {u[2] for u in gold | pred}:
            per_type.setdefault(label, PRFScore()).score_set({u for u in pred if u[2] == label}, {u for u in gold if u[2] == label})
            c = counts.setdefault(label, [0, 0])
            c[0] += sum(1 for u in gold if u[2] == label)
            c[1] += sum(1 for u in pred if u[2] == label)
        for b, e, label in pred:
            hit = any(label == gl and b < ge and gb < e for gb, ge, gl in gold)
            overlap_p.tp += hit
            overlap_p.fp += not hit
        for b, e, label in gold:
            hit = any(label == pl and b < pe and pb < e for pb, pe, pl in pred)
            overlap_r.tp += hit
            overlap_r.fn += not hit
    out: Dict[str, object] = {
        "extraction_p": extraction.precision, "extraction_r": extraction.recall, "extraction_f": extraction.fscore,
        "recognition_p": recognition.precision, "recognition_r": recognition.recall, "recognition_f": recognition.fscore,
        "recognition_macro_f": (sum(s.fscore for s in per_type.values()) / len(per_type)) if per_type else 0.0,
    }
    p, r = overlap_p.precision, overlap_r.recall
    out.update({"overlap_p": p, "overlap_r": r, "overlap_f": 2 * p * r / (p + r) if p + r else 0.0})
    out["per_type"] = {
        label: {"p": s.precision, "r": s.recall, "f": s.fscore, "gold": counts[label][0], "predicted": counts[label][1]}
        for label, s in sorted(per_type.items())
    }
    out["gold"], out["predicted"] = n_gold, n_pred
    return out


def doc_units(doc, spans_key: str) -> List[Unit]:
    """The units of ``doc.spans[spans_key]`` as :func:`unit_key` offsets."""
    return [(*unit_key(doc.text, s.start_char, s.end_char), s.label_) for s in doc.spans.get(spans_key, [])]


def score_figurative_units(
    examples: Iterable[Example], spans_key: str = "figurative_units", **_
) -> Dict[str, Optional[object]]:
    """``figurative_units_`` + the keys of :func:`score_unit_sets` (``gold``
    and ``predicted`` left out) over the examples whose reference has
    ``doc.spans[spans_key]``, and the recognition figures again as
    ``spans_<spans_key>_{p,r,f,per_type}`` (what ``spacy evaluate
    --spans-key`` prints); all None when no reference has the group."""
    pairs = [(doc_units(eg.reference, spans_key), doc_units(eg.predicted, spans_key))
             for eg in examples if spans_key in eg.reference.spans]
    keys = ("extraction_p", "extraction_r", "extraction_f", "recognition_p", "recognition_r", "recognition_f",
            "recognition_macro_f", "overlap_p", "overlap_r", "overlap_f", "per_type")
    scores = score_unit_sets(pairs) if pairs else {}
    out: Dict[str, Optional[object]] = {f"figurative_units_{k}": scores.get(k) for k in keys}
    # the keys `spacy evaluate --spans-key <spans_key>` prints: recognition
    for k in ("p", "r", "f"):
        out[f"spans_{spans_key}_{k}"] = scores.get(f"recognition_{k}")
    out[f"spans_{spans_key}_per_type"] = scores.get("per_type")
    return out


@registry.scorers("spacy_rhetoric.figurative_units_scorer.v1")
def make_figurative_units_scorer():
    return score_figurative_units


def gold_units(passage: Passage) -> List[tuple]:
    """``(begin, end, label)`` of each gold unit of a ConFiguRe passage
    (:class:`spacy_rhetoric.corpora.configure.Passage`), its offsets trimmed
    as :func:`unit_key` trims them."""
    return [(*unit_key(passage.fragment, u.begin, u.end), u.label) for u in passage.units]


def classification_given_units(pipe, docs: Sequence[Doc], passages: Sequence[Passage]) -> Dict[str, Any]:
    """Task 2 with the ``figurative_units`` component ``pipe`` on processed
    ``docs``: micro-F1, macro-F1 and per-type P/R/F of the type it gives
    each gold unit."""
    per_type: Dict[str, PRFScore] = {}
    correct = total = 0
    for doc, passage in zip(docs, passages):
        if not passage.units:
            continue
        predicted = pipe.classify_units(doc, [(u.begin, u.end) for u in passage.units])
        for unit, label in zip(passage.units, predicted):
            total += 1
            correct += label == unit.label
            gold_prf = per_type.setdefault(unit.label, PRFScore())
            if label == unit.label:
                gold_prf.tp += 1
            else:
                gold_prf.fn += 1
                if label:
                    per_type.setdefault(label, PRFScore()).fp += 1
    micro = correct / total if total else 0.0
    return {
        "classification_micro_f": micro,
        "classification_macro_f": sum(s.fscore for s in per_type.values()) / len(per_type) if per_type else 0.0,
        "classification_per_type": {k: {"p": s.precision, "r": s.recall, "f": s.fscore} for k, s in sorted(per_type.items())},
        "classification_units": total,
    }
