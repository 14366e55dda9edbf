"""Architecture of the ``parallelism_linker``: an encoder-CRF tagger.

``spacy_rhetoric.ParallelismTagger.v1`` (Bothwell et al. 2023, §6.2, Fig. 6):
word vectors from a tok2vec or transformer listener, optionally concatenated
with :func:`RepetitionFeatures` and :func:`ClauseFeatures`, a packed BiLSTM, a linear layer to tag space
and a linear-chain CRF (:mod:`spacy_rhetoric.ml.crf`). The component is
:mod:`spacy_rhetoric.components.parallelism_linker`.
"""
from __future__ import annotations

import unicodedata
from typing import Dict, List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Dropout, Linear, Model, chain, concatenate, with_array
from thinc.types import Floats2d

from ..annotation import CLAUSE_PUNCT, SENTENCE_PUNCT
from .crf import CRF
from .lstm import PackedBiLSTM


#: Upper bounds of the word-distance buckets of :func:`RepetitionFeatures`.
REPETITION_BUCKETS = (1, 2, 3, 4, 5, 6, 8, 10, 12, 16, 20, 24, 32, 48, 64)


def _distance_buckets(norms: numpy.ndarray) -> numpy.ndarray:
    """For each word, the bucket of the distance (in words) to the previous
    and to the next occurrence of the same word; ``len(REPETITION_BUCKETS)``
    means none within 64 words. Ints2d (n_words, 2)."""
    n = len(norms)
    prev = numpy.full(n, numpy.inf)
    nxt = numpy.full(n, numpy.inf)
    last: Dict[int, int] = {}
    for i, w in enumerate(norms.tolist()):
        if w in last:
            prev[i] = i - last[w]
            nxt[last[w]] = i - last[w]
        last[w] = i
    return numpy.stack([numpy.searchsorted(REPETITION_BUCKETS, prev), numpy.searchsorted(REPETITION_BUCKETS, nxt)], axis=1)


@registry.layers("spacy_rhetoric.RepetitionFeatures.v1")
def RepetitionFeatures() -> Model[List[Doc], List[Floats2d]]:
    """One-hot buckets of the distance to the previous and next occurrence of
    each word's NORM in its doc: List[Floats2d] (n_words, 2 * 16), no
    parameters. Parallel branches repeat words (the markers of 排比 such as
    如果...那么, 是..., 让...), a cue a from-scratch encoder finds hard to
    learn from word identities alone."""
    return Model("repetition_features", _repetition_forward, dims={"nO": 2 * (len(REPETITION_BUCKETS) + 1)},
                 attrs={"piece_features": _repetition_piece})


def _repetition_piece(doc: Doc, start: int, end: int) -> numpy.ndarray:
    return repetition_features(doc.to_array("NORM")[start:end])


def repetition_features(norms: numpy.ndarray) -> numpy.ndarray:
    """Floats2d (n_words, 2 * 16): the one-hot distance buckets of
    :func:`RepetitionFeatures` for a sequence of NORM ids."""
    n_buckets = len(REPETITION_BUCKETS) + 1
    buckets = _distance_buckets(norms)
    feats = numpy.zeros((len(norms), 2 * n_buckets), dtype="float32")
    rows = numpy.arange(len(norms))
    feats[rows, buckets[:, 0]] = 1.0
    feats[rows, n_buckets + buckets[:, 1]] = 1.0
    return feats


class NoGradient(list):
    """The input gradient of a layer without inputs to learn: empty, and
    neutral when thinc's ``concatenate`` adds it to the gradient of the
    layer beside it, a list (tok2vec listener) or None (a transformer
    listener, which hands its gradient to the transformer itself)."""

    def __radd__(self, other):
        return other


def _repetition_forward(model: Model, docs: List[Doc], is_train: bool):
    out = [model.ops.asarray2f(repetition_features(doc.to_array("NORM"))) for doc in docs]
    return out, lambda dY: NoGradient()


#: Characters that end a clause: those of the ``clause_segmenter``
#: (ConFiguRe's clause punctuation, Zhu et al. 2022 §3.1) and line breaks.
CLAUSE_END = frozenset(CLAUSE_PUNCT + SENTENCE_PUNCT + "\n")
#: Bucket upper bounds of a clause's length in characters.
CLAUSE_LENGTHS = (3, 6, 10, 15, 25)
#: Bucket upper bounds of the length difference of two clauses (characters).
LENGTH_DIFFS = (0, 1, 2, 4)
#: Bucket upper bounds of the share of a clause's characters found in another.
SHARED_SHARES = (0.2, 0.4, 0.6)
#: Width of :func:`clause_features`' output.
CLAUSE_FEATURES_WIDTH = 4 * 5 + 2 * (3 + 6 + 4 + 2) + 6 + 4 + 3


def _is_punct(word: str) -> bool:
    return all(unicodedata.category(c)[0] in "PZSC" for c in word)


def clauses_of(words: Sequence[str]) -> List[Tuple[int, int]]:
    """Word ranges ``[(start, end), ...]`` of the clauses of a word
    sequence, covering every word once: a clause ends after a word made of
    punctuation (or whitespace) that holds a character of
    :data:`CLAUSE_END`, together with the punctuation words right after it."""
    bounds, start, i, n = [], 0, 0, len(words)
    while i < n:
        if _is_punct(words[i]) and any(c in CLAUSE_END for c in words[i]):
            while i + 1 < n and _is_punct(words[i + 1]):
                i += 1
            bounds.append((start, i + 1))
            start = i + 1
        i += 1
    if start < n:
        bounds.append((start, n))
    return bounds


def _bucket(value: float, bounds: Sequence[float]) -> int:
    return int(numpy.searchsorted(bounds, value, side="left"))


def _common_prefix(a: str, b: str) -> int:
    k = 0
    while k < min(len(a), len(b)) and a[k] == b[k]:
        k += 1
    return k


def clause_features(words: Sequence[str]) -> numpy.ndarray:
    """Branch-aware features of each word, from its clause
    (:func:`clauses_of`) and the clauses around it in the same word
    sequence, Floats2d (n_words, :data:`CLAUSE_FEATURES_WIDTH`), one-hot
    blocks, characters counted without punctuation:

    - clause-initial repetition: the characters the clause's start shares
      with the start of the clause 2 and 1 before and 1 and 2 after
      (none / 0 / 1 / 2 / 3 or more);
    - with the clause just before and just after: the characters the ends
      share (0 / 1 / 2 or more), the length difference (none, 0, 1, 2,
      3-4, 5 or more), the share of the clause's characters found in the
      other (below 0.2 / 0.4 / 0.6 / above), and the shared function-word
      skeleton at the word: whether the word occurs in the other clause, and
      whether it occurs there at the same character offset from the clause
      start;
    - the clause's length (1-3, 4-6, 7-10, 11-15, 16-25, 26+ characters);
    - how many clauses in a row, this one among them, start with the same
      character (1, 2, 3, 4 or more);
    - the word is the clause's first, its last (before punctuation), or
      punctuation.

    These are cues of parallel branches that Bothwell et al. 2023's
    baselines leave to the encoder; the tagger learns their weights, they
    label nothing on their own. Computed on characters, so a word
    segmentation that differs from training's changes little.
    """
    n = len(words)
    out = numpy.zeros((n, CLAUSE_FEATURES_WIDTH), dtype="float32")
    if not n:
        return out
    punct = [_is_punct(w) for w in words]
    bounds = clauses_of(words)
    texts = ["".join(w for w, p in zip(words[s:e], punct[s:e]) if not p) for s, e in bounds]
    runs = [1] * len(bounds)
    for c in range(1, len(bounds)):  # forward then backward: the run through each clause
        if texts[c] and texts[c - 1] and texts[c][0] == texts[c - 1][0]:
            runs[c] = runs[c - 1] + 1
    for c in range(len(bounds) - 2, -1, -1):
        if texts[c] and texts[c + 1] and texts[c][0] == texts[c + 1][0]:
            runs[c] = max(runs[c], runs[c + 1])
    for c, (s, e) in enumerate(bounds):
        text, row, col = texts[c], numpy.zeros(CLAUSE_FEATURES_WIDTH, dtype="float32"), 0
        for d in (-2, -1, 1, 2):
            other = texts[c + d] if 0 <= c + d < len(bounds) else None
            row[col + (0 if other is None else 1 + min(_common_prefix(text, other), 3))] = 1.0
            col += 5
        skeleton = []
        for d in (-1, 1):
            other = texts[c + d] if 0 <= c + d < len(bounds) else None
            if other is not None:
                row[col + min(_common_prefix(text[::-1], other[::-1]), 2)] = 1.0
                row[col + 3 + 1 + _bucket(abs(len(text) - len(other)), LENGTH_DIFFS)] = 1.0
                share = len(set(text) & set(other)) / max(1, len(set(text)))
                row[col + 9 + _bucket(share, SHARED_SHARES)] = 1.0
            else:
                row[col + 3] = 1.0
            skeleton.append((col + 13, other))
            col += 15
        row[col + _bucket(max(len(text), 1), CLAUSE_LENGTHS)] = 1.0
        col += 6
        row[col + min(runs[c], 4) - 1] = 1.0
        col += 4
        content = [i for i in range(s, e) if not punct[i]]
        offset = 0
        for i in range(s, e):
            out[i] = row
            if punct[i]:
                out[i, col + 2] = 1.0
                continue
            if i == content[0]:
                out[i, col] = 1.0
            if i == content[-1]:
                out[i, col + 1] = 1.0
            for k, other in skeleton:
                if other is not None and words[i] in other:
                    out[i, k] = 1.0
                    if other.find(words[i], offset) == offset:
                        out[i, k + 1] = 1.0
            offset += len(words[i])
    return out


@registry.layers("spacy_rhetoric.ClauseFeatures.v1")
def ClauseFeatures() -> Model[List[Doc], List[Floats2d]]:
    """:func:`clause_features` of each paragraph of each doc
    (:func:`spacy_rhetoric.ml.paragraphs.paragraph_bounds`: no clause has a
    neighbour across a line break): List[Floats2d] (n_words,
    :data:`CLAUSE_FEATURES_WIDTH`), no parameters."""
    return Model("clause_features", _clause_forward, dims={"nO": CLAUSE_FEATURES_WIDTH},
                 attrs={"piece_features": _clause_piece})


def _clause_piece(doc: Doc, start: int, end: int) -> numpy.ndarray:
    return clause_features([t.text for t in doc[start:end]])


def _clause_forward(model: Model, docs: List[Doc], is_train: bool):
    from .paragraphs import paragraph_bounds

    out = []
    for doc in docs:
        pieces = [_clause_piece(doc, s, e) for s, e in paragraph_bounds(doc)]
        feats = numpy.vstack(pieces) if pieces else numpy.zeros((0, CLAUSE_FEATURES_WIDTH), dtype="float32")
        out.append(model.ops.asarray2f(feats))
    return out, lambda dY: NoGradient()


@registry.architectures("spacy_rhetoric.ParallelismTagger.v1")
def build_parallelism_tagger(
    tok2vec: Model[List[Doc], List[Floats2d]],
    hidden_width: int = 128,
    lstm_depth: int = 1,
    dropout: float = 0.0,
    nO: Optional[int] = None,
    repetition_features: bool = False,
    clause_features: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """Encoder-CRF tagger (Bothwell et al. 2023 §6.2, Fig. 6).

    tok2vec: word vectors, List[Floats2d] each (n_words, width).
    hidden_width: BiLSTM output width (two directions of hidden_width / 2).
    lstm_depth: BiLSTM layers; 0 leaves the tok2vec output as the encoding.
    dropout: dropout between BiLSTM layers and on the encoder output.
    nO: number of tags (set by the component's ``initialize``).
    repetition_features: concatenate :func:`RepetitionFeatures` to the
    word vectors (distance to the same word before / after).
    clause_features: concatenate :func:`ClauseFeatures` (clause-initial
    repetition, clause lengths, shared skeleton with the clauses around).
    Returns a model mapping docs to CRF emissions, List[Floats2d] each
    (n_words, nO), with refs ``tok2vec``, ``output_layer`` and ``crf``.
    When the tok2vec width is unknown at construction (a transformer
    listener), a linear projection to ``hidden_width`` precedes the BiLSTM.
    """
    width = tok2vec.get_dim("nO") if tok2vec.has_dim("nO") else None
    layers: List[Model] = [tok2vec]
    features = ([RepetitionFeatures()] if repetition_features else []) + ([ClauseFeatures()] if clause_features else [])
    if features:
        layers = [concatenate(tok2vec, *features)]
        width = width + sum(f.get_dim("nO") for f in features) if width else None
    if lstm_depth > 0:
        if not width:
            layers.append(with_array(Linear(hidden_width)))
            width = hidden_width
        layers.append(PackedBiLSTM(hidden_width, width, depth=lstm_depth, dropout=dropout))
    if dropout > 0:
        # dropout on the encoder output (Lample et al. 2016); no layer at 0
        # so that models trained without it keep their layer structure
        layers.append(Dropout(dropout))
    output_layer = Linear(nO)
    crf = CRF(nO)
    model = chain(*layers, with_array(output_layer), crf)
    model.set_ref("tok2vec", tok2vec)
    model.set_ref("output_layer", output_layer)
    model.set_ref("crf", crf)
    return model


@registry.architectures("spacy_rhetoric.ParallelismAverage.v1")
def build_parallelism_average(first: Model, second: Model, second_weight: float) -> Model[List[Doc], List[Floats2d]]:
    """Two trained taggers of :func:`build_parallelism_tagger` with the same
    tag set (in the same order), combined into one CRF: the emissions and
    the CRF's start, transition and end scores are the weighted means
    ``(1 - w) * first + w * second`` of the members', so the combined CRF
    scores a tag sequence with the weighted mean of the two members'
    log-potentials (a logarithmic opinion pool of the two CRFs: Smith,
    Cohn and Osborne 2005, "Logarithmic Opinion Pools for Conditional
    Random Fields", ACL, §2).

    first, second: docs -> List[Floats2d] (n_words, n_tags) each, with refs
        ``tok2vec`` and ``crf``.
    second_weight: ``w`` in [0, 1], the second member's share.
    Returns a model with the same input and output and refs ``crf`` (the
    combined scores, set from the members' when initialised: call
    :func:`average_crf` after loading members trained apart), ``tok2vec``
    (the first member's) and ``output_layer`` (the first member's); in
    training each member gets its share of the gradient. Raises ValueError
    for a weight outside [0, 1].
    """
    weight = float(second_weight)
    if not 0.0 <= weight <= 1.0:
        raise ValueError(f"second_weight must be in [0, 1], got {second_weight}")
    crf = CRF(first.get_ref("crf").maybe_get_dim("nO"))
    model = Model("parallelism_average", _average_forward, layers=[first, second, crf], init=_average_init,
                  attrs={"second_weight": weight}, dims={"nO": crf.maybe_get_dim("nO")})
    model.set_ref("crf", crf)
    model.set_ref("tok2vec", first.get_ref("tok2vec"))
    model.set_ref("output_layer", first.get_ref("output_layer"))
    return model


def average_crf(model: Model) -> None:
    """Set the ``crf`` scores of a :func:`build_parallelism_average` model to
    the weighted means of its members' (``start`` Floats1d (nO,), ``trans``
    Floats2d (nO, nO), ``end`` Floats1d (nO,)). Raises ValueError when the
    members' tag counts differ."""
    first, second, crf = model.layers
    weight = model.attrs["second_weight"]
    a, b = first.get_ref("crf"), second.get_ref("crf")
    if a.get_dim("nO") != b.get_dim("nO"):
        raise ValueError(f"the two taggers have {a.get_dim('nO')} and {b.get_dim('nO')} tags")
    if not crf.has_dim("nO"):
        crf.set_dim("nO", a.get_dim("nO"))
    if not model.has_dim("nO"):
        model.set_dim("nO", a.get_dim("nO"))
    for name in ("start", "trans", "end"):
        crf.set_param(name, (1.0 - weight) * a.get_param(name) + weight * b.get_param(name))


def _average_init(model: Model, X=None, Y=None) -> None:
    first, second, _ = model.layers
    first.initialize(X=X, Y=Y)
    second.initialize(X=X, Y=Y)
    average_crf(model)


def _average_forward(model: Model, docs: List[Doc], is_train: bool):
    weight = model.attrs["second_weight"]
    first, second, _ = model.layers
    Y1, backprop1 = first(docs, is_train)
    Y2, backprop2 = second(docs, is_train)
    Y = [(1.0 - weight) * a + weight * b for a, b in zip(Y1, Y2)]

    def backprop(dY: List[Floats2d]):
        backprop2([weight * d for d in dY])
        return backprop1([(1.0 - weight) * d for d in dY])

    return Y, backprop


def predict_by_paragraph(
    model: Model, docs: List[Doc], bounds: Optional[List[List[Tuple[int, int]]]] = None
) -> List[Floats2d]:
    """CRF emissions of a :func:`build_parallelism_tagger` model, List[Floats2d]
    each (n_words, nO), with everything after the word vectors (repetition
    features, BiLSTM, output layer) run on each piece of
    :func:`spacy_rhetoric.ml.paragraphs.paragraph_bounds` on its own, as on
    the one-paragraph training docs: no BiLSTM state and no repetition
    distance crosses a line break. The word vectors come from one call on the
    whole docs (a listener accepts only its upstream's batch). A doc of one
    paragraph gets ``model.predict``'s emissions. ``bounds``: the docs'
    paragraph bounds when the caller has them already. A
    :func:`build_parallelism_average` model gives the weighted mean of its
    members' emissions, each computed so."""
    from .paragraphs import cut, join, paragraph_bounds

    if model.name == "parallelism_average":
        weight = model.attrs["second_weight"]
        if bounds is None:
            bounds = [paragraph_bounds(doc) for doc in docs]
        first = predict_by_paragraph(model.layers[0], docs, bounds)
        second = predict_by_paragraph(model.layers[1], docs, bounds)
        return [(1.0 - weight) * a + weight * b for a, b in zip(first, second)]
    tok2vec = model.get_ref("tok2vec")
    first, rest = model.layers[0], model.layers[1:]
    feature_layers = first.layers[1:] if first is not tok2vec else []
    if any("piece_features" not in layer.attrs for layer in feature_layers):
        raise ValueError(f"unexpected first layer of a parallelism tagger: {first.name}")
    if bounds is None:
        bounds = [paragraph_bounds(doc) for doc in docs]
    inputs = tok2vec.predict(docs)
    pieces = cut(inputs, bounds)
    if feature_layers:
        # the features of each paragraph (repetition, clauses), beside its word vectors
        spans = [(doc, s, e) for doc, doc_bounds in zip(docs, bounds) for s, e in doc_bounds]
        pieces = [model.ops.xp.hstack([x] + [model.ops.asarray2f(layer.attrs["piece_features"](doc, s, e))
                                             for layer in feature_layers])
                  for x, (doc, s, e) in zip(pieces, spans)]
    for layer in rest:
        pieces = layer.predict(pieces)
    return join(pieces, bounds, model.ops.xp)
