"""Registered layers of the rhetoric classifiers.

``spacy_rhetoric.CNNBiLSTMEncoder.v1``: a tok2vec encoder for
``spacy.Tok2Vec.v2`` that adds a bidirectional LSTM over the whole doc on top
of spaCy's CNN (``spacy.MaxoutWindowEncoder.v2``). Why: the tenor of a simile
is often further from the comparator 像 than the CNN's receptive field
(``depth * window_size`` words on each side), and the LSTM sees the whole
sentence.

The LSTM packs its batch (:func:`spacy_rhetoric.ml.lstm.PackedPyTorchLSTM`):
the same doc gets the same vectors in any batch.
"""
from __future__ import annotations

from typing import List

from spacy.ml.models.tok2vec import MaxoutWindowEncoder
from spacy.util import registry
from thinc.api import Model, chain, residual
from thinc.types import Floats2d

from .lstm import PackedPyTorchLSTM


@registry.architectures("spacy_rhetoric.CNNBiLSTMEncoder.v1")
def build_cnn_bilstm_encoder(
    width: int, cnn_depth: int, window_size: int, maxout_pieces: int, lstm_depth: int, dropout: float
) -> Model[List[Floats2d], List[Floats2d]]:
    """CNN then a residual BiLSTM, one Floats2d (n_tokens, width) per doc in
    and out.

    width: even (each LSTM direction has width // 2 units).
    dropout: between stacked LSTM layers (PyTorch's meaning; unused when
        ``lstm_depth`` is 1).
    Raises ValueError for an odd width or a depth < 1.
    """
    if width % 2:
        raise ValueError(f"width must be even for a BiLSTM, got {width}")
    if cnn_depth < 1 or lstm_depth < 1:
        raise ValueError("cnn_depth and lstm_depth must be >= 1")
    cnn = MaxoutWindowEncoder(width=width, window_size=window_size, maxout_pieces=maxout_pieces, depth=cnn_depth)
    # packed, so a doc's vectors never depend on the docs batched with it
    lstm = PackedPyTorchLSTM(nO=width, nI=width, bi=True, depth=lstm_depth, dropout=dropout)
    return chain(cnn, residual(lstm))
