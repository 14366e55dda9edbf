"""Rule-based clause and sentence segmentation for Chinese prose.

A clause is a text span ended by clause punctuation (ConFiguRe, Zhu et al.
2022, ``papers/001`` §3.1: ``， ； 。 ？ ！ …… —— ：``), here with the ASCII and
full-width variants real essays use, and by line breaks. Closing quotes and
brackets that follow the punctuation stay with their clause.

A sentence ends at ``。 ？ ！ ； …`` (and their ASCII and full-width
variants) or at a line break: the unit of PSE-I's ``<sent>`` elements, which
the team annotation labels (``annotations/pse-i-cerd``) and the sentence
classifier is trained on. In all 409 PSE-I essays a ``<sent>`` ends at
``。``, ``；``, ``？``, ``！`` or ``…`` (closing quotes joined) and holds none of
them inside (``…`` 4 times), so ``人生是…；人生是…；人生亦是…。`` is three
sentences, each labelled on its own: one unit from training to report.

The component works on tokens, so it runs after any tokenizer (characters,
pkuseg words, gold LTP words): a token ends a clause when it consists only of
punctuation characters and contains at least one clause-ending character;
following closing quotes/brackets and further punctuation join that clause.

Output:
- ``doc.spans[spans_key]`` (default ``"clauses"``): the clauses, label
  ``clause``, never empty and never starting or ending with whitespace;
- ``token.is_sent_start`` for every token (the doc's sentences).

Edge cases (documented results): text without punctuation is one clause per
line; text with no character other than punctuation and whitespace yields no
clauses (and one sentence per line); whitespace-only and empty docs get no
clauses. ASCII ``. , :`` between two digits (``3.14``, ``1,000``, ``12:30``)
do not end a clause.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Optional, Tuple

import numpy
from spacy.attrs import SENT_START
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example

from ..annotation import CLAUSE_PUNCT, SENTENCE_PUNCT

#: Closing quotes and brackets: they stay with the clause before them.
CLOSING_PUNCT = "”’」』）)】》〉」］]}\"'"
#: ASCII characters that do not end anything between two digits.
NUMERIC_SEPARATORS = ".,:"


class ClauseSegmenter:
    """Splits a Doc into clauses and sentences by punctuation (see module doc).

    clause_punct / sentence_punct / closing_punct: character sets (strings).
    split_on_newline: whether a line break ends a clause and a sentence.
    spans_key: the span group written; label: the clauses' label.
    """

    def __init__(
        self,
        nlp: Language,
        name: str = "clause_segmenter",
        *,
        clause_punct: str = CLAUSE_PUNCT,
        sentence_punct: str = SENTENCE_PUNCT,
        closing_punct: str = CLOSING_PUNCT,
        split_on_newline: bool = True,
        spans_key: str = "clauses",
        label: str = "clause",
        overwrite: bool = True,
        scorer: Optional[Callable] = None,
    ) -> None:
        """overwrite: replace sentence starts a doc already has (False keeps
        them, as spaCy's ``Sentencizer``: gold sentences of an evaluation
        doc survive; raw text still gets sentences)."""
        self.name = name
        self.overwrite = overwrite
        self.clause_punct = set(clause_punct) | set(sentence_punct)
        self.sentence_punct = set(sentence_punct)
        self.closing_punct = set(closing_punct)
        self._all_punct = self.clause_punct | self.closing_punct
        self.split_on_newline = split_on_newline
        self.spans_key = spans_key
        self.label = label
        self.scorer = scorer

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, Optional[float]]:
        """Clause and sentence boundary P/R/F (see ``scorers/clauses.py``)."""
        return self.scorer(examples, spans_key=self.spans_key, **kwargs) if self.scorer else {}

    # -- token classes -------------------------------------------------------
    def _is_punct(self, text: str) -> bool:
        return bool(text) and all(c in self._all_punct for c in text)

    def _ends_clause(self, texts: List[str], spaces: List[str], i: int) -> bool:
        text = texts[i]
        if not self._is_punct(text) or not any(c in self.clause_punct for c in text):
            return False
        if text in NUMERIC_SEPARATORS and 0 < i < len(texts) - 1:
            # 3.14, 1,000, 12:30: the separator sits between digits
            return not (texts[i - 1][-1:].isdigit() and texts[i + 1][:1].isdigit() and not spaces[i - 1])
        return True

    def _newlines(self, texts: List[str], spaces: List[str]) -> List[bool]:
        """Per token: whether it (or its trailing whitespace) holds a line break."""
        if not self.split_on_newline:
            return [False] * len(texts)
        return ["\n" in t or "\n" in w for t, w in zip(texts, spaces)]

    # -- segmentation ----------------------------------------------------------
    def boundaries(self, doc: Doc) -> List[Tuple[int, int, bool]]:
        """Raw segments ``(start, end, ends_sentence)`` covering the doc."""
        return self._segments([t.text for t in doc], [t.whitespace_ for t in doc])

    def _segments(self, texts: List[str], spaces: List[str]) -> List[Tuple[int, int, bool]]:
        """:meth:`boundaries` from the tokens' texts and trailing whitespace
        (read once per doc: a Token object per access costs more than the
        segmentation itself)."""
        newline = self._newlines(texts, spaces)
        segments, start, i, n = [], 0, 0, len(texts)
        while i < n:
            if newline[i]:
                segments.append((start, i + 1, True))
                start = i + 1
            elif self._ends_clause(texts, spaces, i):
                j = i + 1
                while j < n and self._is_punct(texts[j]) and not newline[j - 1]:
                    j += 1
                ends_sent = any(c in self.sentence_punct for t in texts[i:j] for c in t)
                if j < n and newline[j - 1]:
                    ends_sent = True
                segments.append((start, j, ends_sent))
                start, i = j, j
                continue
            i += 1
        if start < n:
            segments.append((start, n, True))
        return segments

    def __call__(self, doc: Doc) -> Doc:
        clauses: List[Span] = []
        texts = [t.text for t in doc]
        segments = self._segments(texts, [t.whitespace_ for t in doc])
        is_space = doc.to_array("IS_SPACE").astype(bool).tolist() if len(doc) else []
        pending_start: Optional[int] = None  # punctuation-only run before content
        for start, end, _ in segments:
            s, e = start, end
            while s < e and is_space[s]:
                s += 1
            while e > s and is_space[e - 1]:
                e -= 1
            if s >= e:
                continue
            if not any(not is_space[k] and not self._is_punct(texts[k]) for k in range(s, e)):
                if clauses and clauses[-1].end == s:
                    clauses[-1] = Span(doc, clauses[-1].start, e, label=self.label)
                elif pending_start is None:
                    pending_start = s
                continue
            if pending_start is not None:
                s, pending_start = pending_start, None
            clauses.append(Span(doc, s, e, label=self.label))
        doc.spans[self.spans_key] = clauses
        if self.overwrite or not doc.has_annotation("SENT_START"):
            self._set_sentences(doc, segments, is_space)
        return doc

    def _set_sentences(self, doc: Doc, segments: Iterable[Tuple[int, int, bool]], is_space: List[bool]) -> None:
        if not len(doc):
            return
        starts = {0}
        for _, end, ends_sent in segments:
            if ends_sent and end < len(doc):
                starts.add(end)
        # whitespace and line breaks after a sentence end belong to it
        for i in sorted(starts - {0}):
            j = i
            while j < len(doc) and is_space[j]:
                j += 1
            if j != i:
                starts.discard(i)
                if j < len(doc):
                    starts.add(j)
        # one array write: Token.is_sent_start's setter costs O(len(doc)) a call
        values = numpy.full((len(doc), 1), -1, dtype="int64")
        values[sorted(starts), 0] = 1
        doc.from_array([SENT_START], values.astype("uint64"))


@Language.factory(
    "clause_segmenter",
    default_config={
        "clause_punct": CLAUSE_PUNCT,
        "sentence_punct": SENTENCE_PUNCT,
        "closing_punct": CLOSING_PUNCT,
        "split_on_newline": True,
        "spans_key": "clauses",
        "label": "clause",
        "overwrite": True,
        "scorer": {"@scorers": "spacy_rhetoric.clause_scorer.v1"},
    },
    assigns=["token.is_sent_start", "doc.spans"],
    default_score_weights={"clause_boundary_f": 0.5, "sent_boundary_f": 0.5, "clause_boundary_p": None,
                           "clause_boundary_r": None, "sent_boundary_p": None, "sent_boundary_r": None},
)
def make_clause_segmenter(
    nlp: Language,
    name: str,
    clause_punct: str,
    sentence_punct: str,
    closing_punct: str,
    split_on_newline: bool,
    spans_key: str,
    label: str,
    overwrite: bool,
    scorer: Optional[Callable],
) -> ClauseSegmenter:
    return ClauseSegmenter(
        nlp,
        name,
        clause_punct=clause_punct,
        sentence_punct=sentence_punct,
        closing_punct=closing_punct,
        split_on_newline=split_on_newline,
        spans_key=spans_key,
        label=label,
        overwrite=overwrite,
        scorer=scorer,
    )
