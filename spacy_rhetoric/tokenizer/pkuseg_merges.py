"""spacy-pkuseg's post-processing (``Postprocesser``), exactly, for the
word lists of a whole text at once.

After the Viterbi, spacy-pkuseg merges runs of 7, 6, ... 2 consecutive
words whose concatenation is in its word lists (``common_words``, and
``other_words`` unless every part is listed itself). Its
``post_process`` builds and looks up every run of every length, pass by
pass: a sixth of the tokenizer's time on essays, though few runs are
listed (498 of 133,711 in the 42 PSE-I test essays).

Here the runs of 2 to 7 words of all the word lists of a batch are hashed
with arrays (:class:`~spacy_rhetoric.tokenizer.substring_hashes.SubstringHashes`),
and only those whose hash is a listed word's are looked up. A list with
none is returned as it is: no pass can merge anything in it. The others
are merged pass by pass as spacy-pkuseg does, visiting only the runs that
are listed: runs of unmerged words are known from the hashes, and runs
that hold a word merged by an earlier pass are looked up. Within a pass
spacy-pkuseg scans left to right and, after a merge, goes on with the
word after the merged one, so a pass merges the listed runs (that pass
the parts test) greedily from the left, never overlapping.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Set, Tuple

import numpy

from .substring_hashes import BATCH_CHARS, SubstringHashes, batches, hashes_of

#: spacy-pkuseg's run lengths, longest first (``post_process``)
RUN_LENGTHS = (7, 6, 5, 4, 3, 2)
#: the hash filter's size: 2**23 flags (8 MiB) for some 390k listed words
FILTER_BITS = 23


class WordMerges:
    """spacy-pkuseg's ``Postprocesser`` (``check_seperated=True``, as its
    ``__call__`` runs it) for many word lists at once.

    ``postprocesser`` is a ``spacy_pkuseg.Postprocesser``; its word sets are
    read at construction, and again if their sizes change.
    """

    def __init__(self, postprocesser) -> None:
        self.postprocesser = postprocesser
        self._sizes: Optional[Tuple[int, int]] = None
        self._flags = numpy.zeros(0, dtype=bool)
        if postprocesser.do_process:
            self._filter()  # built now, at load: fork workers of nlp.pipe inherit it

    def _filter(self) -> numpy.ndarray:
        """The flag table of the listed words' slots, built again when the
        word sets' sizes change."""
        common, other = self.postprocesser.common_words, self.postprocesser.other_words
        if self._sizes != (len(common), len(other)):
            self._flags = numpy.zeros(2**FILTER_BITS, dtype=bool)
            self._flags[_slot(hashes_of([*common, *other]))] = True
            self._sizes = (len(common), len(other))
        return self._flags

    def _listed(self, text: str) -> bool:
        return text in self.postprocesser.common_words or text in self.postprocesser.other_words

    def _merges(self, parts: List[str]) -> bool:
        """spacy-pkuseg's ``do_seg`` for a run whose concatenation is listed:
        always for ``common_words``; for ``other_words`` unless every part
        is listed itself."""
        if "".join(parts) in self.postprocesser.common_words:
            return True
        return not all(self._listed(w) for w in parts)

    def _maybe_listed(self, hashes: numpy.ndarray) -> numpy.ndarray:
        """Bool array: False where a hash is no listed word's. A table of
        2**FILTER_BITS flags (8 MiB) indexed by Fibonacci hashing (Knuth,
        TAOCP 3, 6.4): one lookup each (the merges of the 42 PSE-I test
        essays took 0.016 s so, 0.032 s with a search of the 390k sorted
        hashes). A True may be wrong (4.6% of unlisted substrings there);
        the caller looks the string up."""
        return self._filter()[_slot(hashes)]

    def __call__(self, sents: Sequence[List[str]]) -> List[List[str]]:
        """The word lists after spacy-pkuseg's merges (each list is its own
        sentence; runs never cross lists). Lists are hashed in batches of
        about ``BATCH_CHARS`` characters."""
        if not self.postprocesser.do_process:
            return [list(sent) for sent in sents]
        out: List[List[str]] = []
        for batch in batches(sents, BATCH_CHARS, lambda sent: sum(map(len, sent))):
            for sent, runs in zip(batch, self._listed_runs(batch)):
                out.append(self._merge(list(sent), runs) if runs else list(sent))
        return out

    def _listed_runs(self, sents: Sequence[List[str]]) -> List[Set[Tuple[int, int]]]:
        """Per list: the runs ``(first word, length)`` of 2 to 7 words whose
        concatenation is listed (in ``common_words`` or ``other_words``)."""
        words = [w for sent in sents for w in sent]
        lengths = numpy.fromiter(map(len, words), dtype=numpy.int64, count=len(words))
        bounds = numpy.concatenate([[0], numpy.cumsum(lengths)])
        sizes = [len(s) for s in sents]
        sent_of = numpy.repeat(numpy.arange(len(sents)), sizes)
        first = numpy.concatenate([[0], numpy.cumsum(sizes)])
        text = "".join(words)
        hashes = SubstringHashes(text)
        runs: List[Set[Tuple[int, int]]] = [set() for _ in sents]
        for m in RUN_LENGTHS:
            starts = numpy.arange(max(len(words) - m + 1, 0))
            starts = starts[sent_of[starts] == sent_of[starts + m - 1]]  # within one list
            starts = starts[self._maybe_listed(hashes.of(bounds[starts], bounds[starts + m]))]
            for i in starts.tolist():
                if self._listed(text[bounds[i] : bounds[i + m]]):
                    k = int(sent_of[i])
                    runs[k].add((i - int(first[k]), m))
        return runs

    def _merge(self, sent: List[str], runs: Set[Tuple[int, int]]) -> List[str]:
        """spacy-pkuseg's passes over one list, visiting only listed runs;
        ``runs`` as :meth:`_listed_runs` gives them."""
        # spans[j]: the first and end word (of the list as tagged) of word j now
        spans = [(i, i + 1) for i in range(len(sent))]
        at: Dict[int, int] = {}  # first word -> index now, where a merge moved it
        merged: List[int] = []  # indices now of merged words
        for m in RUN_LENGTHS:
            if len(sent) < m:
                continue
            candidates = set()
            for a, length in runs:
                j = at.get(a, a) if at else a
                # unmerged words a .. a+m-1 stand at j .. j+m-1
                if length == m and j + m <= len(sent) and spans[j][0] == a and spans[j + m - 1][1] == a + m:
                    candidates.add(j)
            for q in merged:  # runs holding a merged word: looked up
                for j in range(max(q - m + 1, 0), min(q, len(sent) - m) + 1):
                    if self._listed("".join(sent[j : j + m])):
                        candidates.add(j)
            merges, free = [], 0
            for j in sorted(candidates):
                if j >= free and self._merges(sent[j : j + m]):
                    merges.append(j)
                    free = j + m
            if merges:
                for j in reversed(merges):
                    sent[j : j + m] = ["".join(sent[j : j + m])]
                    spans[j : j + m] = [(spans[j][0], spans[j + m - 1][1])]
                at = {a: j for j, (a, _) in enumerate(spans)}
                merged = [j for j, (a, b) in enumerate(spans) if b - a > 1]
        return sent


def _slot(hashes: numpy.ndarray) -> numpy.ndarray:
    """The filter's slot of each hash: the top FILTER_BITS bits of its
    product with 2**64 / golden ratio."""
    return (hashes * numpy.uint64(0x9E3779B97F4A7C15)) >> numpy.uint64(64 - FILTER_BITS)
