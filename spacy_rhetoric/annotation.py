"""Reading sentence-level rhetoric annotation off a Doc, for training and scoring.

Conventions shared by the converters, ``rhetoric_textcat``,
``rhetoric_components`` and the scorers:

- sentence labels live in sentence spans: ``doc.spans["rhetoric"]`` (coarse),
  ``doc.spans["rhetoric_form"]`` and ``doc.spans["rhetoric_content"]``;
- components live in ``doc.spans["rhetoric_components"]``;
- ``doc.user_data["rhetoric_annotated"]`` = ``{"coarse": [...], "form": [...],
  "content": [...], "components": [...]}`` names the labels a corpus annotates;
  ``doc.cats`` keys ``"level/label"`` add to it. Labels outside this set are
  *unknown* for the doc (masked in training, ignored in scoring), never
  negative. A doc that declares nothing is taken as fully annotated.
"""
from __future__ import annotations

import re
from bisect import bisect_left
from typing import TYPE_CHECKING, Dict, FrozenSet, Iterable, List, Optional, Set, Tuple

import numpy
from spacy.tokens import Doc, Span

if TYPE_CHECKING:
    from spacy.training import Example

from .taxonomy import COMPONENT_LABELS, LEVEL_LABELS, LEVELS, LITERAL

_LINE_BREAK = re.compile("[\r\n]")
#: Clause-ending characters that do not end a sentence (ConFiguRe's clause
#: punctuation, Zhu et al. 2022 §3.1, with ASCII and full-width variants).
CLAUSE_PUNCT = "，,：:—"
#: Sentence-ending characters (they also end a clause): PSE-I's ``<sent>`` unit.
SENTENCE_PUNCT = "。．.？?！!；;…"
ANNOTATED_KEY = "rhetoric_annotated"
#: ``doc.user_data`` key of label disjunctions known to hold for every
#: sentence of the doc: a list of ``"level/label"`` lists, each meaning "at
#: least one of these labels is true" (e.g. CMC's "metaphorical", which is
#: metaphor OR personification). The labels of a disjunction are unknown
#: individually; ``rhetoric_textcat`` trains the most probable one of each.
DISJUNCTIONS_KEY = "rhetoric_disjunctions"
LEVEL_SPAN_KEYS: Dict[str, str] = {
    "coarse": "rhetoric",
    "form": "rhetoric_form",
    "content": "rhetoric_content",
}
COMPONENTS_KEY = "rhetoric_components"
#: Every output of the sentence classifier, as ``"level/label"``.
ALL_LEVEL_LABELS: Tuple[str, ...] = tuple(
    f"{level}/{label}" for level in LEVELS for label in LEVEL_LABELS[level]
)


def split_key(key: str) -> Tuple[str, str]:
    """``"form/simile"`` -> ``("form", "simile")``; raises ValueError if the
    level or label is not in the taxonomy."""
    level, _, label = key.partition("/")
    if level not in LEVEL_LABELS or label not in LEVEL_LABELS[level]:
        raise ValueError(f"{key!r} is not a 'level/label' of the taxonomy")
    return level, label


def declares_annotation(doc: Doc) -> bool:
    """Whether the doc says which labels it annotates (user data or cats)."""
    return ANNOTATED_KEY in doc.user_data or any("/" in k for k in doc.cats)


def annotated_labels(doc: Doc) -> FrozenSet[str]:
    """The ``"level/label"`` keys annotated in ``doc`` (see module doc).

    Positive gold spans always count as annotated. A doc without any
    declaration is fully annotated (all of :data:`ALL_LEVEL_LABELS`).
    """
    if not declares_annotation(doc):
        return frozenset(ALL_LEVEL_LABELS)
    declared = doc.user_data.get(ANNOTATED_KEY, {}) or {}
    keys: Set[str] = {f"{lv}/{lab}" for lv in LEVELS for lab in declared.get(lv, ())}
    keys.update(k for k in doc.cats if "/" in k)
    for level, span_key in LEVEL_SPAN_KEYS.items():
        keys.update(f"{level}/{s.label_}" for s in doc.spans.get(span_key, []))
    return frozenset(k for k in keys if k in ALL_LEVEL_LABELS)


def annotated_components(doc: Doc, spans_key: str = COMPONENTS_KEY) -> FrozenSet[str]:
    """Component labels annotated in ``doc`` (all of them without a
    declaration), plus the labels present in ``doc.spans[spans_key]``."""
    if ANNOTATED_KEY not in doc.user_data:
        return frozenset(COMPONENT_LABELS)
    declared = set(doc.user_data[ANNOTATED_KEY].get("components", ()) or ())
    declared.update(s.label_ for s in doc.spans.get(spans_key, []))
    return frozenset(declared)


def sentence_spans(doc: Doc) -> List[Span]:
    """The sentences of ``doc``: ``doc.sents`` when sentence starts are set,
    else the whole doc as one sentence; an empty doc has none."""
    if len(doc) == 0:
        return []
    if doc.has_annotation("SENT_START"):
        return list(doc.sents)
    return [doc[:]]


def mark_one_sentence(doc: Doc) -> None:
    """Mark a doc without sentence starts as one sentence, so that
    ``doc.sents`` works on output classified as a whole."""
    if len(doc) and not doc.has_annotation("SENT_START"):
        for token in doc[1:]:
            token.is_sent_start = False


def _overlaps(a_start: int, a_end: int, b_start: int, b_end: int) -> bool:
    return a_start < b_end and b_start < a_end


def labels_in(spans: Iterable[Span], start_char: int, end_char: int) -> Set[str]:
    """Labels of ``spans`` that cover the character range: a span counts when
    it overlaps the range by at least half of the shorter of the two, so that
    sentence labels survive slightly different sentence segmentations."""
    found = set()
    for span in spans:
        lo, hi = max(span.start_char, start_char), min(span.end_char, end_char)
        if hi <= lo:
            continue
        shorter = min(span.end_char - span.start_char, end_char - start_char)
        if 2 * (hi - lo) >= shorter:
            found.add(span.label_)
    return found


def gold_sentence_labels(doc: Doc, sent: Span, annotated: Optional[FrozenSet[str]] = None) -> Set[str]:
    """Gold ``"level/label"`` keys of one sentence of a reference ``doc``.

    A label is positive when a span of its level's group covers the sentence
    (:func:`labels_in`); for a one-sentence doc ``doc.cats`` values >= 0.5
    count too. ``level/literal`` is positive when it is annotated and no
    device of that level is.
    """
    if annotated is None:
        annotated = annotated_labels(doc)
    keys: Set[str] = set()
    for level, span_key in LEVEL_SPAN_KEYS.items():
        for label in labels_in(doc.spans.get(span_key, []), sent.start_char, sent.end_char):
            keys.add(f"{level}/{label}")
    if sent.start == 0 and sent.end == len(doc):
        keys.update(k for k, v in doc.cats.items() if v >= 0.5 and k in ALL_LEVEL_LABELS)
    for level in LEVELS:
        lit = f"{level}/{LITERAL}"
        has_device = any(k.startswith(level + "/") and k != lit for k in keys)
        if lit in annotated and not has_device:
            keys.add(lit)
        elif has_device:
            keys.discard(lit)
    return keys


class ParagraphClipper:
    """:func:`clip_to_paragraph` for many spans of one doc: the doc's line
    breaks and whitespace tokens are read once (a token array), and each
    call only looks at the line breaks inside its span.

    The tokens holding a line break are those whose text holds ``\\n`` or
    ``\\r``: a token's trailing whitespace is at most one space, so every
    character of ``doc.text`` is in one token's text or that space. Each
    distinct token string is looked at once (``doc.text`` would build a
    Token object per token).
    """

    __slots__ = ("space", "breaks")

    def __init__(self, doc: Doc) -> None:
        n = len(doc)
        self.space: List[bool] = doc.to_array("IS_SPACE").astype(bool).tolist() if n else []
        self.breaks: List[int] = _line_break_tokens(doc) if n else []

    def __call__(self, start: int, end: int) -> Optional[Tuple[int, int]]:
        """The clipped ``(start, end)`` of the token span ``[start, end)``,
        or None (see :func:`clip_to_paragraph`)."""
        space = self.space
        cuts = self.breaks[bisect_left(self.breaks, start):bisect_left(self.breaks, end)]
        best: Optional[Tuple[int, int]] = None
        piece_start = start
        for i in (*cuts, end):
            s, e = piece_start, i
            while s < e and space[s]:
                s += 1
            while e > s and space[e - 1]:
                e -= 1
            # the longest piece, the first on ties
            if s < e and (best is None or e - s > best[1] - best[0]):
                best = (s, e)
            piece_start = i + 1
        return best


def _line_break_tokens(doc: Doc) -> List[int]:
    """Indices of the tokens whose text holds a line break, ascending."""
    orth = doc.to_array("ORTH")
    strings = doc.vocab.strings
    breaking = [h for h in numpy.unique(orth).tolist() if _LINE_BREAK.search(strings[h])]
    return numpy.flatnonzero(numpy.isin(orth, breaking)).tolist() if breaking else []


def clip_to_paragraph(doc: Doc, start: int, end: int) -> Optional[Tuple[int, int]]:
    """The part of the token span ``[start, end)`` that a predicted span may
    cover: a line break ends a paragraph, so no span crosses one, and no
    span starts or ends with whitespace.

    The span is cut at every token holding a line break; each piece loses
    its whitespace tokens at both edges; the piece with the most tokens is
    returned (the first on ties), as ``(start, end)`` token offsets, or None
    when nothing but whitespace is left. Each call reads the whole doc
    (O(len(doc))): for several spans of one doc make one
    :class:`ParagraphClipper`, which reads it once.
    """
    return ParagraphClipper(doc)(start, end)


def same_tokens(example: "Example") -> bool:
    """Whether predicted and reference docs have identical tokens (fast path
    that skips alignment)."""
    x, y = example.predicted, example.reference
    return len(x) == len(y) and x.text == y.text and bool((x.to_array("ORTH") == y.to_array("ORTH")).all())
