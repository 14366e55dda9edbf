"""The packed LSTM layers: a sequence's output depends on that sequence
only, and ``Model.copy()`` / serialisation act on the real weights."""
from __future__ import annotations

import numpy
import pytest
from thinc.api import fix_random_seed

from spacy_rhetoric.architectures import build_cnn_bilstm_encoder
from spacy_rhetoric.ml.lstm import PackedBiLSTM, PackedPyTorchLSTM


def _inputs(n_in: int):
    rng = numpy.random.default_rng(0)
    return [rng.normal(size=(n, n_in)).astype("float32") for n in (3, 11, 1, 7)]


@pytest.mark.parametrize("make", [lambda: PackedBiLSTM(8, 6), lambda: PackedPyTorchLSTM(8, 6, bi=True, depth=2)])
def test_output_does_not_depend_on_the_batch(make):
    fix_random_seed(0)
    model = make()
    Xs = _inputs(6)
    model.initialize(X=Xs[:1])
    batched = model.predict(Xs)
    for X, Y in zip(Xs, batched):
        numpy.testing.assert_allclose(model.predict([X])[0], Y, atol=1e-6)


@pytest.mark.parametrize("make", [lambda: PackedBiLSTM(8, 6), lambda: PackedPyTorchLSTM(8, 6)])
def test_copy_runs_its_own_weights(make):
    fix_random_seed(0)
    model = make()
    Xs = _inputs(6)
    model.initialize(X=Xs[:1])
    before = model.predict(Xs)
    copy = model.copy()
    numpy.testing.assert_allclose(copy.predict(Xs)[1], before[1], atol=1e-6)
    shim = [node for node in copy.walk() if node.shims][0].shims[0]
    for param in shim._model.parameters():
        param.data.zero_()
    assert all(float(numpy.abs(y).max()) == 0.0 for y in copy.predict(Xs))
    numpy.testing.assert_allclose(model.predict(Xs)[1], before[1], atol=1e-6)
    restored = make().from_bytes(model.to_bytes())
    numpy.testing.assert_allclose(restored.predict(Xs)[1], before[1], atol=1e-6)


def test_encoder_is_batch_independent_with_the_cnn():
    fix_random_seed(0)
    encoder = build_cnn_bilstm_encoder(width=8, cnn_depth=1, window_size=1, maxout_pieces=2, lstm_depth=1, dropout=0.0)
    Xs = _inputs(8)
    encoder.initialize(X=Xs[:1])
    batched = encoder.predict(Xs)
    for X, Y in zip(Xs, batched):
        numpy.testing.assert_allclose(encoder.predict([X])[0], Y, atol=1e-6)
