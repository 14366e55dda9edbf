"""The packed LSTM layers: a sequence's output depends on that sequence
only, and ``Model.copy()`` / serialisation act on the real weights."""
from __future__ import annotations

import numpy
import pytest
from thinc.api import fix_random_seed

from spacy_rhetoric.architectures import build_cnn_bilstm_encoder
from spacy_rhetoric.ml.lstm import PackedBiLSTM, PackedPyTorchLSTM


def _initialized(make, n_in: int = 6):
    """A freshly built, initialised layer and four sequences of different
    lengths, List[Floats2d] (n_i, n_in)."""
    fix_random_seed(0)
    model = make()
    rng = numpy.random.default_rng(0)
    Xs = [rng.normal(size=(n, n_in)).astype("float32") for n in (3, 11, 1, 7)]
    model.initialize(X=Xs[:1])
    return model, Xs


ENCODER = lambda: build_cnn_bilstm_encoder(width=8, cnn_depth=1, window_size=1, maxout_pieces=2, lstm_depth=1, dropout=0.0)  # noqa: E731


@pytest.mark.parametrize("make,n_in", [(lambda: PackedBiLSTM(8, 6), 6), (lambda: PackedPyTorchLSTM(8, 6, bi=True, depth=2), 6),
                                       (ENCODER, 8)], ids=["PackedBiLSTM", "PackedPyTorchLSTM", "CNNBiLSTMEncoder"])
def test_output_does_not_depend_on_the_batch(make, n_in):
    model, Xs = _initialized(make, n_in)
    batched = model.predict(Xs)
    for X, Y in zip(Xs, batched):
        numpy.testing.assert_allclose(model.predict([X])[0], Y, atol=1e-6)


@pytest.mark.parametrize("make", [lambda: PackedBiLSTM(8, 6), lambda: PackedPyTorchLSTM(8, 6)])
def test_copy_runs_its_own_weights(make):
    model, Xs = _initialized(make)
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


@pytest.mark.parametrize("make", [lambda: PackedBiLSTM(8, 6), lambda: PackedPyTorchLSTM(8, 6)], ids=["PackedBiLSTM", "PackedPyTorchLSTM"])
def test_gradients_come_back_in_input_order(make):
    """The batch is packed longest first; each sequence's input gradient is
    the one it gets alone, at its own position."""
    model, Xs = _initialized(make)
    Ys, backprop = model.begin_update(Xs)
    dXs = backprop([numpy.ones_like(y) for y in Ys])
    for X, dX in zip(Xs, dXs):
        Y_alone, backprop_alone = model.begin_update([X])
        numpy.testing.assert_allclose(backprop_alone([numpy.ones_like(Y_alone[0])])[0], dX, atol=1e-5)
