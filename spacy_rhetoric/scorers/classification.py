"""Scorer of sentence-level rhetoric classification (CERD RC / FC / CC).

Metrics (Liu et al. 2024, ``papers/000``, §4.2 "Evaluation Metrics" and
§5.1), per level (coarse, form, content), over the gold sentences:

- exact match (EM): share of sentences whose predicted label set equals the
  gold set;
- micro P/R/F1: true/false positives and false negatives summed over labels;
- macro P/R/F1: unweighted mean of the per-label P, R, F1 over the labels
  that occur in the gold or the prediction (seqeval's and scikit-learn's
  convention with zero division -> 0);
- correct mapping rate (§5.1): share of sentences for which every predicted
  coarse label has a predicted label of that fine level under it
  (``literal`` maps to ``literal``). A property of the prediction alone.

Only labels the reference doc annotates are scored
(:func:`spacy_rhetoric.annotation.annotated_labels`); a level with no
annotated label in the data scores ``None`` (spaCy then ignores it).
Predicted labels are read from the same span groups as the gold:
``doc.spans["rhetoric"]``, ``["rhetoric_form"]``, ``["rhetoric_content"]``;
a predicted sentence with no coarse span is ``literal`` at every level.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from typing import Any, Callable, Dict, Hashable, Iterable, List, Set, Tuple

from spacy.scorer import PRFScore
from spacy.training import Example
from spacy.util import registry

from ..annotation import LEVEL_SPAN_KEYS, annotated_labels, gold_sentence_labels, labels_in, sentence_spans
from ..taxonomy import LEVELS, LITERAL, parent


def prf_zero_division_one(score: PRFScore) -> Tuple[float, float, float]:
    """P, R, F1 with scikit-learn's ``zero_division=1.0``, the convention of
    CERD's released evaluation code: an undefined P or R is 1.0, and F1 is
    1.0 only when the label occurs neither in gold nor in predictions.
    (``PRFScore`` itself counts an undefined P or R as 0.0.)"""
    tp, fp, fn = score.tp, score.fp, score.fn
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    if tp + fp + fn == 0:
        return 1.0, 1.0, 1.0
    return p, r, (2 * p * r / (p + r) if p + r else 0.0)


def label_scores(pairs: Iterable[Tuple[Set[Hashable], Set[Hashable]]], label_of: Callable[[Any], str] = str) -> Dict[str, PRFScore]:
    """One spaCy ``PRFScore`` per label, counted over ``(gold, predicted)``
    sets of items; ``label_of`` gives an item's label (the item itself for
    label sets, the first field of a ``(label, start, end)`` span tuple)."""
    scores: Dict[str, PRFScore] = defaultdict(PRFScore)
    for gold, pred in pairs:
        for lab in {label_of(x) for x in gold | pred}:
            scores[lab].score_set({x for x in pred if label_of(x) == lab}, {x for x in gold if label_of(x) == lab})
    return dict(sorted(scores.items()))


def micro_macro(per_label: Dict[str, PRFScore]) -> Tuple[Dict[str, float], Dict[str, float], Dict[str, Dict[str, float]]]:
    """Micro scores (counts summed), macro scores (mean of the per-label
    P, R, F over the labels present) and the per-label ``{"p", "r", "f"}``;
    P or R of a label without predictions or gold is 0.0 (``PRFScore``)."""
    micro = PRFScore()
    for score in per_label.values():
        micro += score
    per_type = {lab: {"p": s.precision, "r": s.recall, "f": s.fscore} for lab, s in per_label.items()}
    n = len(per_type)
    macro = {m: (sum(v[m] for v in per_type.values()) / n if n else 0.0) for m in "prf"}
    return {"p": micro.precision, "r": micro.recall, "f": micro.fscore}, macro, per_type


def set_scores(pairs: List[Tuple[Set[str], Set[str]]], prefix: str) -> Dict[str, Any]:
    """EM, micro and macro P/R/F1 and per-label scores of multi-label sets.

    pairs: one ``(gold labels, predicted labels)`` per instance.
    Returns keys ``{prefix}_em``, ``_micro_p/r/f``, ``_macro_p/r/f``,
    ``_per_type`` (label -> {"p", "r", "f"}), with undefined P/R counted as
    0.0, and ``_macro_zd1`` ({"p", "r", "f"}): the macro averages with
    ``zero_division=1.0`` (:func:`prf_zero_division_one`); all ``None``
    without instances.
    """
    keys = ["em", "micro_p", "micro_r", "micro_f", "macro_p", "macro_r", "macro_f", "per_type", "macro_zd1"]
    if not pairs:
        return {f"{prefix}_{k}": None for k in keys}
    per_label = label_scores(pairs)
    micro, macro, per_type = micro_macro(per_label)
    n = len(per_label)
    zd1 = [prf_zero_division_one(s) for s in per_label.values()]
    return {
        f"{prefix}_em": sum(gold == pred for gold, pred in pairs) / len(pairs),
        f"{prefix}_micro_p": micro["p"],
        f"{prefix}_micro_r": micro["r"],
        f"{prefix}_micro_f": micro["f"],
        f"{prefix}_macro_p": macro["p"],
        f"{prefix}_macro_r": macro["r"],
        f"{prefix}_macro_f": macro["f"],
        f"{prefix}_per_type": per_type,
        f"{prefix}_macro_zd1": {m: (sum(v[i] for v in zd1) / n if n else 1.0) for i, m in enumerate("prf")},
    }


def predicted_sentence_labels(eg: Example, start_char: int, end_char: int) -> Dict[str, Set[str]]:
    """Predicted labels per level of the reference sentence at the given
    character range, read from the predicted doc's span groups."""
    pred = {
        level: labels_in(eg.predicted.spans.get(key, []), start_char, end_char)
        for level, key in LEVEL_SPAN_KEYS.items()
    }
    pred = {level: labs - {LITERAL} for level, labs in pred.items()}
    if not pred["coarse"]:
        pred = {level: {LITERAL} for level in LEVELS}
    return pred


def mapping_correct(coarse: Set[str], fine: Set[str], level: str) -> bool:
    """CERD §5.1: every predicted coarse label has a fine label of ``level``
    under it (``literal`` under ``literal``)."""
    parents = {parent(level, lab) for lab in fine}
    return all(c in parents for c in coarse)


def score_rhetoric_classification(examples: Iterable[Example], **kwargs) -> Dict[str, Any]:
    """Score ``rhetoric_textcat`` output against the reference docs.

    Returns, for each level L in coarse/form/content, ``rhetoric_L_em``,
    ``rhetoric_L_micro_p/r/f``, ``rhetoric_L_macro_p/r/f``,
    ``rhetoric_L_per_type`` (see :func:`set_scores`), plus
    ``rhetoric_form_mapping`` and ``rhetoric_content_mapping`` (correct
    mapping rates) and ``rhetoric_n_sents``.
    """
    pairs: Dict[str, List[Tuple[Set[str], Set[str]]]] = {lv: [] for lv in LEVELS}
    mapped = Counter()
    n_sents = 0
    for eg in examples:
        annotated = annotated_labels(eg.reference)
        for sent in sentence_spans(eg.reference):
            n_sents += 1
            gold = gold_sentence_labels(eg.reference, sent, annotated)
            pred = predicted_sentence_labels(eg, sent.start_char, sent.end_char)
            for level in ("form", "content"):
                mapped[level] += mapping_correct(pred["coarse"], pred[level], level)
            for level in LEVELS:
                scored = {k.split("/", 1)[1] for k in annotated if k.startswith(level + "/")}
                if not scored:
                    continue
                g = {k.split("/", 1)[1] for k in gold if k.startswith(level + "/")} & scored
                pairs[level].append((g, pred[level] & scored))
    scores: Dict[str, Any] = {"rhetoric_n_sents": n_sents}
    for level in LEVELS:
        scores.update(set_scores(pairs[level], f"rhetoric_{level}"))
    for level in ("form", "content"):
        scores[f"rhetoric_{level}_mapping"] = mapped[level] / n_sents if n_sents else None
    # the keys `spacy evaluate` prints as TEXTCAT and per type
    scores["cats_score"] = scores.get("rhetoric_coarse_micro_f")
    scores["cats_score_desc"] = "coarse micro F (sentences)"
    per_type = scores.get("rhetoric_coarse_per_type")
    if per_type:
        scores["cats_f_per_type"] = per_type
    return scores


@registry.scorers("spacy_rhetoric.rhetoric_classification_scorer.v1")
def make_rhetoric_classification_scorer() -> Callable:
    """Registered scorer for ``rhetoric_textcat`` (see
    :func:`score_rhetoric_classification`)."""
    return score_rhetoric_classification
