"""Scorer of rhetorical component extraction (CERD CE).

Metrics (Liu et al. 2024, ``papers/000``, §4.2 and §5.2):

- strict span P/R/F1: a predicted span is correct when its label, start and
  end equal a gold span's; micro (counts summed), macro (unweighted mean over
  the types occurring in gold or prediction, zero division -> 0) and per
  type. On non-overlapping spans this equals seqeval's default (CoNLL)
  scoring of the BIO encoding of the same spans (tested against seqeval);
- form mapping rate (§5.2): among gold sentences with a non-literal form
  label whose required components (``taxonomy.REQUIRED_COMPONENTS``) are all
  annotated types, the share whose predicted components include every
  required type.

Only component types the reference doc annotates
(:func:`spacy_rhetoric.annotation.annotated_components`) are scored.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry

from ..annotation import COMPONENTS_KEY, LEVEL_SPAN_KEYS, annotated_components, labels_in, sentence_spans
from ..taxonomy import LITERAL, REQUIRED_COMPONENTS
from .classification import label_scores, micro_macro

PREFIX = "rhetoric_components"


def span_set(spans: Iterable[Span], labels: Set[str]) -> Set[Tuple[str, int, int]]:
    """``(label, start_char, end_char)`` of the spans whose label is in ``labels``."""
    return {(s.label_, s.start_char, s.end_char) for s in spans if s.label_ in labels}


def strict_span_scores(pairs: Sequence[Tuple[Set[tuple], Set[tuple]]], prefix: str = PREFIX) -> Dict[str, Any]:
    """Strict P/R/F1 of ``(gold, predicted)`` span-tuple sets (first item = type).

    Returns ``{prefix}_p/_r/_f`` (micro), ``_macro_p/_r/_f`` and
    ``_per_type`` (type -> {"p", "r", "f"}); ``None`` values without any
    gold or predicted span.
    """
    per_label = label_scores(pairs, label_of=lambda t: t[0])
    keys = ["p", "r", "f", "macro_p", "macro_r", "macro_f", "per_type"]
    if not per_label:
        return {f"{prefix}_{k}": None for k in keys}
    micro, macro, per_type = micro_macro(per_label)
    return {
        f"{prefix}_p": micro["p"],
        f"{prefix}_r": micro["r"],
        f"{prefix}_f": micro["f"],
        f"{prefix}_macro_p": macro["p"],
        f"{prefix}_macro_r": macro["r"],
        f"{prefix}_macro_f": macro["f"],
        f"{prefix}_per_type": per_type,
    }


def spans_to_bio(doc: Doc, spans: Iterable[Span]) -> List[str]:
    """BIO tags (``B-type``/``I-type``/``O``) of non-overlapping spans, one per
    token. Raises ValueError if two spans overlap."""
    tags = ["O"] * len(doc)
    for span in sorted(spans, key=lambda s: s.start):
        if any(t != "O" for t in tags[span.start : span.end]):
            raise ValueError(f"Overlapping spans cannot be BIO-encoded: {span.text!r}")
        tags[span.start] = f"B-{span.label_}"
        for i in range(span.start + 1, span.end):
            tags[i] = f"I-{span.label_}"
    return tags


def form_mapping_counts(eg: Example, known: Set[str], spans_key: str = COMPONENTS_KEY) -> Tuple[int, int]:
    """(satisfied, considered) sentences of one example for the §5.2 rate."""
    satisfied = considered = 0
    form_spans = eg.reference.spans.get(LEVEL_SPAN_KEYS["form"], [])
    pred_spans = eg.predicted.spans.get(spans_key, [])
    for sent in sentence_spans(eg.reference):
        forms = labels_in(form_spans, sent.start_char, sent.end_char) - {LITERAL}
        required: Set[str] = set()
        for form in forms:
            required |= REQUIRED_COMPONENTS.get(form, frozenset())
        if not required or not required <= known:
            continue
        considered += 1
        found = {s.label_ for s in pred_spans if s.start_char >= sent.start_char and s.end_char <= sent.end_char}
        satisfied += required <= found
    return satisfied, considered


def score_rhetoric_components(
    examples: Iterable[Example], labels: Optional[Iterable[str]] = None, prefix: str = PREFIX, **kwargs
) -> Dict[str, Any]:
    """Score ``doc.spans[spans_key]`` against the reference.

    labels: score only these component types (default: all annotated).
    spans_key (keyword, as ``Pipe.score`` passes the component's
    ``cfg["spans_key"]``): the span group of both docs; default
    ``"rhetoric_components"``.
    Returns the keys of :func:`strict_span_scores` with ``prefix`` plus
    ``{prefix}_form_mapping`` (``None`` when no sentence qualifies), and the
    ``spans_{spans_key}_p/r/f/per_type`` keys ``spacy evaluate`` prints.
    """
    key = kwargs.get("spans_key", COMPONENTS_KEY)
    pairs = []
    satisfied = considered = 0
    for eg in examples:
        known = set(annotated_components(eg.reference, key))
        if labels is not None:
            known &= set(labels)
        gold = span_set(eg.reference.spans.get(key, []), known)
        pred = span_set(eg.predicted.spans.get(key, []), known)
        pairs.append((gold, pred))
        s, c = form_mapping_counts(eg, known, key)
        satisfied += s
        considered += c
    scores = strict_span_scores(pairs, prefix)
    scores[f"{prefix}_form_mapping"] = satisfied / considered if considered else None
    # the keys `spacy evaluate --spans-key rhetoric_components` prints
    scores.update({f"spans_{key}_{k}": scores[f"{prefix}_{k}"] for k in ("p", "r", "f", "per_type")})
    return scores


@registry.scorers("spacy_rhetoric.rhetoric_components_scorer.v1")
def make_rhetoric_components_scorer() -> Callable:
    """Registered scorer for ``rhetoric_components`` (see
    :func:`score_rhetoric_components`)."""
    return score_rhetoric_components
