"""Architecture of the ``parallelism_linker``: an encoder-CRF tagger.

``spacy_rhetoric.ParallelismTagger.v1`` (Bothwell et al. 2023, §6.2, Fig. 6):
word vectors from a tok2vec or transformer listener, optionally concatenated
with :func:`RepetitionFeatures`, a packed BiLSTM, a linear layer to tag space
and a linear-chain CRF (:mod:`spacy_rhetoric.crf`). The component is
:mod:`spacy_rhetoric.components.parallelism_linker`.
"""
from __future__ import annotations

from typing import Dict, List, Optional, Tuple

import numpy
from spacy.tokens import Doc
from spacy.util import registry
from thinc.api import Dropout, Linear, Model, chain, concatenate, with_array
from thinc.types import Floats2d

from ..crf import CRF
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
    return Model("repetition_features", _repetition_forward, dims={"nO": 2 * (len(REPETITION_BUCKETS) + 1)})


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


@registry.architectures("spacy_rhetoric.ParallelismTagger.v1")
def build_parallelism_tagger(
    tok2vec: Model[List[Doc], List[Floats2d]],
    hidden_width: int = 128,
    lstm_depth: int = 1,
    dropout: float = 0.0,
    nO: Optional[int] = None,
    repetition_features: bool = False,
) -> Model[List[Doc], List[Floats2d]]:
    """Encoder-CRF tagger (Bothwell et al. 2023 §6.2, Fig. 6).

    tok2vec: word vectors, List[Floats2d] each (n_words, width).
    hidden_width: BiLSTM output width (two directions of hidden_width / 2).
    lstm_depth: BiLSTM layers; 0 leaves the tok2vec output as the encoding.
    dropout: dropout between BiLSTM layers and on the encoder output.
    nO: number of tags (set by the component's ``initialize``).
    repetition_features: concatenate :func:`RepetitionFeatures` to the
    word vectors (distance to the same word before / after).
    Returns a model mapping docs to CRF emissions, List[Floats2d] each
    (n_words, nO), with refs ``tok2vec``, ``output_layer`` and ``crf``.
    When the tok2vec width is unknown at construction (a transformer
    listener), a linear projection to ``hidden_width`` precedes the BiLSTM.
    """
    width = tok2vec.get_dim("nO") if tok2vec.has_dim("nO") else None
    layers: List[Model] = [tok2vec]
    if repetition_features:
        repetition = RepetitionFeatures()
        layers = [concatenate(tok2vec, repetition)]
        width = width + repetition.get_dim("nO") if width else None
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
    paragraph bounds when the caller has them already."""
    from .paragraphs import cut, join, paragraph_bounds

    tok2vec = model.get_ref("tok2vec")
    first, rest = model.layers[0], model.layers[1:]
    with_repetition = first is not tok2vec
    if with_repetition and [layer.name for layer in first.layers[1:]] != ["repetition_features"]:
        raise ValueError(f"unexpected first layer of a parallelism tagger: {first.name}")
    if bounds is None:
        bounds = [paragraph_bounds(doc) for doc in docs]
    inputs = tok2vec.predict(docs)
    if with_repetition:
        # the repetition features of each paragraph, beside its word vectors
        features = [model.ops.asarray2f(repetition_features(norms)) for norms in cut([d.to_array("NORM") for d in docs], bounds)]
        pieces = [model.ops.xp.hstack([x, f]) for x, f in zip(cut(inputs, bounds), features)]
    else:
        pieces = cut(inputs, bounds)
    for layer in rest:
        pieces = layer.predict(pieces)
    return join(pieces, bounds, model.ops.xp)
