"""Candidates, pair features and the pair scorer of ``cross_paragraph_linker``.

A parallelism across paragraphs (the original PSE annotation's ``outPara``
chains) has sentences of different paragraphs as branches. In the 406
training-usable essays, 536 of 578 such branches (93%) are the first
sentence of their paragraph: a heading line (温暖是手 / 温暖是爱 / 温暖是家)
or a paragraph's opening sentence (当…的时候，温暖就是…). The candidates are
therefore the paragraph-opening sentences; every pair of candidates at most
``window`` candidates apart is scored.

The features describe what makes two openings parallel: the same beginning
(longest common prefix), the same frame further in (longest common
substring, matching characters), the same ending, similar length and shape
(both headings, both ending a sentence), shared character bigrams, and how
far apart they are. They are computed from the characters alone, so the
component works after any tokenizer and any encoder.
"""
from __future__ import annotations

from difflib import SequenceMatcher
from typing import List, Tuple

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Logistic, Model, Relu, chain, Linear
from thinc.types import Floats2d

from ..annotation import ParagraphClipper, sentence_spans

#: Characters that end a sentence; a candidate ending in none is heading-like.
SENTENCE_END = set("。．.？?！!；;…")
#: Punctuation stripped before comparing endings.
PUNCT = set("，,。．.？?！!；;：:…—“”‘’「」『』（）()《》、 \u3000")
N_FEATURES = 14
#: Characters compared at each end of a candidate.
HEAD = 64

#: A candidate: ``(start, end)`` token offsets of the sentence (edge
#: whitespace left out) and its text.
Candidate = Tuple[int, int, str]


def paragraph_openings(doc: Doc) -> List[Candidate]:
    """The first sentence of every paragraph of ``doc`` (paragraphs end at
    line breaks), without edge whitespace, in document order."""
    text = doc.text
    clip = ParagraphClipper(doc)
    out: List[Candidate] = []
    for sent in sentence_spans(doc):
        clipped = clip(sent.start, sent.end)
        if clipped is None:
            continue
        start = doc[clipped[0]].idx
        k = start - 1
        while k >= 0 and text[k] in " \t\u3000":
            k -= 1
        if k < 0 or text[k] in "\n\r":
            span = doc[clipped[0]:clipped[1]]
            out.append((span.start, span.end, span.text))
    return out


def candidate_pairs(n: int, window: int) -> List[Tuple[int, int]]:
    """``(i, j)`` with ``i < j <= i + window``, in order of ``j`` then ``i``."""
    return [(i, j) for j in range(n) for i in range(max(0, j - window), j)]


def _core(text: str) -> str:
    return "".join(c for c in text if c not in PUNCT)


def _common_prefix(a: str, b: str) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _bigrams(text: str) -> set:
    return {text[i:i + 2] for i in range(len(text) - 1)}


class _Text:
    """What :func:`pair_features` reads of one candidate text, computed once
    per candidate (a candidate is in up to ``2 * window`` pairs)."""

    __slots__ = ("full", "head", "tail", "bigrams", "heading", "commas")

    def __init__(self, text: str) -> None:
        self.full = _core(text)
        self.head = self.full[:HEAD]
        self.tail = self.full[::-1][:HEAD]
        self.bigrams = _bigrams(self.head)
        self.heading = text.strip()[-1:] not in SENTENCE_END
        self.commas = text.count("，")


def _features(a: _Text, b: _Text, distance: int, matcher: SequenceMatcher) -> List[float]:
    """:func:`pair_features` of two prepared texts; ``matcher`` has ``b.head``
    as its second sequence (difflib caches what it learns of that one)."""
    ca, cb = a.head, b.head
    shorter = max(1, min(len(ca), len(cb)))
    prefix = _common_prefix(ca, cb)
    suffix = _common_prefix(a.tail, b.tail)
    matcher.set_seq1(ca)
    longest = matcher.find_longest_match(0, len(ca), 0, len(cb)).size if ca and cb else 0
    ga, gb = a.bigrams, b.bigrams
    dice = 2 * len(ga & gb) / (len(ga) + len(gb)) if ga and gb else 0.0
    head_a, head_b = a.heading, b.heading
    return [
        min(prefix, 6) / 6,
        prefix / shorter,
        min(suffix, 4) / 4,
        min(longest, 8) / 8,
        longest / shorter,
        matcher.ratio(),
        dice,
        min(len(a.full), len(b.full)) / max(1, len(a.full), len(b.full)),
        float(head_a and head_b),
        float(head_a != head_b),
        float(len(a.full) <= 12 and len(b.full) <= 12),
        1.0 / distance,
        float(bool(ca) and bool(cb) and ca[0] == cb[0]),
        float(a.commas == b.commas),
    ]


def pair_features(a: str, b: str, distance: int) -> List[float]:
    """The :data:`N_FEATURES` features of two candidate texts ``a`` (earlier)
    and ``b``, ``distance`` candidates apart; all in [0, 1]. Only the first
    :data:`HEAD` and last :data:`HEAD` characters are compared (the matching
    is quadratic, and a pasted text may hold a line of a million characters
    without punctuation)."""
    b_text = _Text(b)
    return _features(_Text(a), b_text, distance, SequenceMatcher(None, "", b_text.head, autojunk=False))


def doc_features(doc: Doc, window: int) -> Tuple[List[Candidate], List[Tuple[int, int]], numpy.ndarray]:
    """Candidates of ``doc``, their pairs and the features:
    Floats2d (n_pairs, N_FEATURES)."""
    cands = paragraph_openings(doc)
    pairs = candidate_pairs(len(cands), window)
    texts = [_Text(text) for _, _, text in cands]
    rows: List[List[float]] = []
    matcher, current = SequenceMatcher(None, "", "", autojunk=False), None
    for i, j in pairs:  # grouped by j: one matcher per later candidate
        if j != current:
            matcher.set_seq2(texts[j].head)
            current = j
        rows.append(_features(texts[i], texts[j], j - i, matcher))
    feats = numpy.asarray(rows, dtype="f")
    return cands, pairs, feats.reshape((len(pairs), N_FEATURES))


@registry.architectures("spacy_rhetoric.PairScorer.v1")
def build_pair_scorer(hidden_width: int = 32) -> Model[Floats2d, Floats2d]:
    """Pair features Floats2d (n_pairs, N_FEATURES) -> probability that the
    two candidates are branches of one parallelism, Floats2d (n_pairs, 1):
    a ReLU layer and a logistic output (thinc)."""
    return chain(Relu(hidden_width, N_FEATURES), Linear(1, hidden_width), Logistic())
