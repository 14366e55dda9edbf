"""spacy-pkuseg's CRF node scores computed with arrays, for a whole text at
once.

Why: spacy-pkuseg builds the features of each character by concatenating
and hashing some 70 strings (``feature_extractor.pyx``,
``__get_node_features_idx``): 80% of its segmentation time, and a third of
``zh_rhetoric``'s time per essay. Here each string is looked up
once per text: the characters get integer ids, every substring of 2 to 6
characters is hashed with arrays and only those whose hash is a word's
(about 7% in essays) are looked up in the word list, and the feature of a pair
(a character pair, a word pair) is found by ``numpy.searchsorted`` in a
table of integer keys. The model, the Viterbi decoding
(``spacy_pkuseg.inference.run_viterbi``) and the user dictionary stay
spacy-pkuseg's own; its post-processing (merging listed runs of words) is
reproduced for a whole text at once by
:class:`~spacy_rhetoric.tokenizer.pkuseg_merges.WordMerges`.

The result is exactly spacy-pkuseg's: each character gets the same feature
indices in the same order (a missing feature adds 0.0 in its place), and
the node scores are summed in that order, so the tags are identical, not
merely close. ``tests/test_pkuseg_features.py`` checks both on the PSE-I
essays.

The features (Zhang et al. 2018, pkuseg; the code is the reference): for
character ``c_i`` of a piece of ``n`` characters, in this order,

- ``$$`` (always), ``c.c_i``, ``c-1.c_{i-1}``, ``c-1c.c_{i-1}.c_i``,
  ``c1.c_{i+1}``, ``cc1.c_i.c_{i+1}``, ``c-2.c_{i-2}``,
  ``c-2c-1.c_{i-2}.c_{i-1}``, ``c2.c_{i+2}``;
- for each length ``l`` from ``wordMax`` down to ``wordMin``: ``w-1.w``
  where ``w`` (a word of the list) ends at ``i``; then ``w1.w`` where ``w``
  starts at ``i``;
- ``ww.l.a*b`` for every word ``a`` ending at ``i - 1`` and ``b`` starting
  at ``i`` (``**noWord`` where there is none), and ``ww.r.a*b`` for ``a``
  ending at ``i`` and ``b`` starting at ``i + 1``.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Sequence, Tuple

import numpy

from .pkuseg_merges import WordMerges
from .substring_hashes import BATCH_CHARS, SubstringHashes, batches, contains_sorted, find_sorted, hashes_of

NO_WORD = "**noWord"
# A character no word of the list contains: it stands for multi-character
# nodes (**Num, **Letter) and fills the gap between pieces, so that no
# substring across it is a word.
_FILLER = "*"
_UNIGRAM = ("c.", "c-1.", "c1.", "c-2.", "c2.")
_BIGRAM = ("c-1c.", "cc1.", "c-2c-1.")


class PkusegFeatures:
    """Lookup tables of one spacy-pkuseg model (``pkuseg`` object) and the
    node scores and tags of texts.

    Build with :meth:`from_segmenter`, which returns None where the model
    or the global spacy-pkuseg ``config`` is outside what the tables
    reproduce exactly; the caller then uses spacy-pkuseg's own ``cut``.
    """

    def __init__(self, segmenter, lengths: Sequence[int], word_features: bool) -> None:
        extractor, model = segmenter.feature_extractor, segmenter.model
        self.segmenter = segmenter
        self.lengths = tuple(lengths)
        self.word_features = word_features
        self.n_tag = int(model.n_tag)
        unigram, bigram, words, pairs = _parse_features(extractor.feature_to_idx)
        nodes = set().union(*unigram.values())
        for table in bigram.values():
            nodes.update(a for a, _ in table)
            nodes.update(b for _, b in table)
        nodes = sorted(nodes)
        self.node_id: Dict[str, int] = {c: i + 1 for i, c in enumerate(nodes)}
        self.n_nodes = len(nodes) + 1
        self.unigram = {p: _id_array(d, self.node_id, self.n_nodes) for p, d in unigram.items()}
        self.bigram = {p: _key_table(d, self.node_id, self.n_nodes) for p, d in bigram.items()}
        self.word_id: Dict[str, int] = {w: i + 1 for i, w in enumerate(sorted(extractor.unigram))}
        self.n_words = len(self.word_id) + 1
        self.words = {p: _id_array(d, self.word_id, self.n_words) for p, d in words.items()}
        self.word_hashes = numpy.sort(hashes_of(list(self.word_id)))
        # spacy-pkuseg's post-processing, for all pieces at once
        self.merges = WordMerges(segmenter.postprocesser)
        word_or_none = dict(self.word_id, **{NO_WORD: 0})
        self.pairs = {p: _key_table(_split_pairs(d, word_or_none), word_or_none, self.n_words) for p, d in pairs.items()}
        weights = numpy.asarray(model.w, dtype=numpy.float64).reshape(-1, self.n_tag)
        # one extra row of zeros: the index of an absent feature
        self.weights = numpy.vstack([weights, numpy.zeros((1, self.n_tag))])
        self.absent = weights.shape[0]
        self.edge_scores = _edge_scores(model)

    @classmethod
    def from_segmenter(cls, segmenter) -> Optional["PkusegFeatures"]:
        """Tables for ``segmenter`` (a ``spacy_pkuseg.pkuseg``), or None
        where they would not reproduce it exactly: part-of-speech tagging
        on, a word list holding the filler character or the empty string,
        or a ``config`` without number and letter normalisation."""
        from spacy_pkuseg.config import config

        words = segmenter.feature_extractor.unigram
        if (
            segmenter.postag
            or not config.numLetterNorm
            or config.wordMin < 1
            or "" in words
            or any(_FILLER in w for w in words)
        ):
            return None
        lengths = range(config.wordMax, config.wordMin - 1, -1)
        return cls(segmenter, lengths, bool(config.wordFeature))

    def cut(self, text: str) -> List[str]:
        """The words of ``text``, as ``segmenter.cut(text)`` returns them."""
        seg = self.segmenter
        text = text.strip()
        # (piece, is it a user-dictionary word) in text order
        pieces: List[Tuple[str, bool]] = []
        for chunk in text.split():
            words, is_word, _ = seg.preprocesser.solve(chunk)
            pieces.extend(zip(words, is_word))
        to_tag = [p for p, is_word in pieces if not is_word]
        tagged = [_words(p, t, seg.idx_to_tag) for p, t in zip(to_tag, self.tags(to_tag))]
        merged = iter(self.merges(tagged))
        out: List[str] = []
        for piece, is_word in pieces:
            if is_word:
                out.append(piece)
            else:
                out.extend(next(merged))
        return out

    def tags(self, pieces: Sequence[str]) -> List[List[int]]:
        """The Viterbi tag indices of each piece (a text without whitespace),
        as spacy-pkuseg's ``decodeViterbi_fast`` gives them. Pieces are
        scored in batches of about ``BATCH_CHARS`` characters, so memory
        stays that of a batch (a longer piece is a batch of its own)."""
        from spacy_pkuseg.inference import run_viterbi

        out: List[List[int]] = []
        for batch in batches(pieces, BATCH_CHARS):
            scores, starts = self.node_scores(batch)
            out.extend(
                list(run_viterbi(scores[s : s + len(p)], self.edge_scores)[1]) if p else []
                for p, s in zip(batch, starts)
            )
        return out

    def node_scores(self, pieces: Sequence[str]) -> Tuple[numpy.ndarray, List[int]]:
        """Node scores of the pieces laid end to end with gaps between them.

        Returns ``(scores, starts)``: scores is Floats2d (n_positions,
        n_tags), starts the row of each piece's first character. The rows of
        a piece equal spacy-pkuseg's ``getLogYY`` node scores bit for bit.
        """
        columns, starts = self.feature_indices(pieces)
        scores = numpy.zeros((len(columns[0]), self.n_tag))
        for column in columns:
            # one column at a time, in spacy-pkuseg's order of features
            scores += self.weights[column]
        return scores, starts

    def feature_indices(self, pieces: Sequence[str]) -> Tuple[List[numpy.ndarray], List[int]]:
        """``(columns, starts)``: the columns are Ints1d (n_positions,) of
        feature indices in spacy-pkuseg's order, with ``self.absent`` where a
        character lacks that feature; starts as in :meth:`node_scores`."""
        gap = max(self.lengths) + 1
        normalize = self.segmenter.feature_extractor.normalize_text
        ids: List[int] = []
        chars: List[str] = []
        starts: List[int] = []
        node_id = self.node_id
        for piece in pieces:
            starts.append(len(ids))
            nodes = list(normalize(piece))
            ids.extend(node_id.get(c, 0) for c in nodes)
            chars.extend(c if len(c) == 1 else _FILLER for c in nodes)
            ids.extend([0] * gap)
            chars.append(_FILLER * gap)
        node = numpy.asarray(ids, dtype=numpy.int64)
        columns = self._character_columns(node)
        if self.word_features:
            columns.extend(self._word_columns("".join(chars), len(node)))
        return [numpy.where(c < 0, self.absent, c) for c in columns], starts

    def _character_columns(self, node: numpy.ndarray) -> List[numpy.ndarray]:
        n, nn = len(node), self.n_nodes
        uni, bi = self.unigram, self.bigram
        pair = node[:-1] * nn + node[1:]  # (c_i, c_i+1) from row 0
        skip = node[:-2] * nn + node[1:-1]  # (c_i, c_i+1) before c_i+2
        return [
            numpy.zeros(n, dtype=numpy.int64),  # $$
            uni["c."][node],
            _pad(uni["c-1."][node[:-1]], n, 1),
            _pad(_lookup(bi["c-1c."], pair), n, 1),
            _pad(uni["c1."][node[1:]], n, 0),
            _pad(_lookup(bi["cc1."], pair), n, 0),
            _pad(uni["c-2."][node[:-2]], n, 2),
            _pad(_lookup(bi["c-2c-1."], skip), n, 2),
            _pad(uni["c2."][node[2:]], n, 0),
        ]

    def _word_columns(self, text: str, n: int) -> List[numpy.ndarray]:
        lengths = self.lengths
        get = self.word_id.get
        # starting[j, k]: id of the word of length lengths[k] starting at j
        starting = numpy.zeros((n + max(lengths) + 1, len(lengths)), dtype=numpy.int64)
        hashes = SubstringHashes(text)
        for k, length in enumerate(lengths):
            if n >= length:
                # a substring whose hash no word has is no word: look up the rest
                starts = numpy.arange(n - length + 1)
                starts = starts[contains_sorted(self.word_hashes, hashes.of(starts, starts + length))]
                starting[starts, k] = [get(text[j : j + length], 0) for j in starts.tolist()]
        span = numpy.asarray(lengths)
        rows = numpy.arange(n)[:, None]
        cols = numpy.arange(len(lengths))[None, :]

        def ending(at: numpy.ndarray) -> numpy.ndarray:
            start = at - span[None, :] + 1
            return numpy.where(start >= 0, starting[numpy.maximum(start, 0), cols], 0)

        end_in, start_in = ending(rows), starting[:n]
        end_ex, start_ex = ending(rows - 1), starting[1 : n + 1]
        nw = self.n_words
        left = _lookup(self.pairs["ww.l."], (end_ex[:, :, None] * nw + start_in[:, None, :]).reshape(n, -1))
        right = _lookup(self.pairs["ww.r."], (end_in[:, :, None] * nw + start_ex[:, None, :]).reshape(n, -1))
        blocks = [self.words["w-1."][end_in], self.words["w1."][start_in], left, right]
        return [column for block in blocks for column in block.T]


def _words(piece: str, tags: Sequence[int], idx_to_tag: Dict[int, str]) -> List[str]:
    """The words of a tagged piece, as spacy-pkuseg's ``_cut`` builds them:
    a tag holding "B" starts a word."""
    words: List[str] = []
    for i, (tag, char) in enumerate(zip(tags, piece)):
        if i and "B" in idx_to_tag[tag]:
            words.append(char)
        elif words:
            words[-1] += char
        else:
            words.append(char)
    return words


def _parse_features(feature_to_idx: Dict[str, int]):
    """Split the model's feature names by template. Returns
    ``(unigram, bigram, words, pairs)``: dicts from template prefix to
    ``{node: idx}``, ``{(node, node): idx}``, ``{word: idx}`` and
    ``{"a*b": idx}`` (word pairs, split later against the word list).

    A node never holds "." (spacy-pkuseg renames it), so a bigram name has
    exactly one separator.
    """
    by_head: Dict[str, Dict[str, int]] = {}
    for name, idx in feature_to_idx.items():
        head, _, rest = name.partition(".")
        table = by_head.get(head)
        if table is None:
            table = by_head[head] = {}
        table[rest] = idx
    unigram = {p: by_head.get(p[:-1], {}) for p in _UNIGRAM}
    bigram = {
        p: {tuple(rest.split(".")): idx for rest, idx in by_head.get(p[:-1], {}).items() if rest.count(".") == 1}
        for p in _BIGRAM
    }
    words = {p: by_head.get(p[:-1], {}) for p in ("w-1.", "w1.")}
    pairs: Dict[str, Dict[str, int]] = {"ww.l.": {}, "ww.r.": {}}
    for rest, idx in by_head.get("ww", {}).items():
        side = "ww." + rest[:2]
        if side in pairs:
            pairs[side][rest[2:]] = idx
    return unigram, bigram, words, pairs


def _split_pairs(names: Dict[str, int], vocab: Dict[str, int]) -> Dict[Tuple[str, str], int]:
    """``{"a*b": idx}`` as ``{(a, b): idx}`` for every split whose sides are
    both in ``vocab``."""
    out: Dict[Tuple[str, str], int] = {}
    for rest, idx in names.items():
        pos = rest.find("*")
        while pos >= 0:
            a, b = rest[:pos], rest[pos + 1 :]
            if a in vocab and b in vocab:
                out[(a, b)] = idx
            pos = rest.find("*", pos + 1)
    return out


def _id_array(table: Dict[str, int], ids: Dict[str, int], size: int) -> numpy.ndarray:
    """Ints1d (size,): the feature index of each id, -1 where none."""
    out = numpy.full(size, -1, dtype=numpy.int64)
    for key, idx in table.items():
        if key in ids:
            out[ids[key]] = idx
    return out


def _key_table(
    table: Dict[Tuple[str, str], int], ids: Dict[str, int], size: int
) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Sorted Ints1d keys ``id(a) * size + id(b)`` and their feature indices."""
    items = [(ids[a] * size + ids[b], idx) for (a, b), idx in table.items() if a in ids and b in ids]
    keys = numpy.asarray([k for k, _ in items], dtype=numpy.int64)
    values = numpy.asarray([v for _, v in items], dtype=numpy.int64)
    order = numpy.argsort(keys, kind="stable")
    return keys[order], values[order]


def _lookup(table: Tuple[numpy.ndarray, numpy.ndarray], keys: numpy.ndarray) -> numpy.ndarray:
    """The feature index of each key, -1 where the table lacks it."""
    known, values = table
    if not len(known) or not keys.size:
        return numpy.full(keys.shape, -1, dtype=numpy.int64)
    pos, found = find_sorted(known, keys)
    return numpy.where(found, values[pos], -1)


def _pad(values: numpy.ndarray, n: int, offset: int) -> numpy.ndarray:
    """values placed from row ``offset`` on, in a column of n rows of -1."""
    out = numpy.full(n, -1, dtype=numpy.int64)
    out[offset : offset + len(values)] = values
    return out


def _edge_scores(model) -> numpy.ndarray:
    """Floats2d (n_tags, n_tags): the transition scores, from
    spacy-pkuseg's own ``getLogYY``."""
    from spacy_pkuseg.inference import getLogYY

    _, edges = getLogYY([], model.n_tag, model.n_feature * model.n_tag, model.w, 1.0)
    return edges
