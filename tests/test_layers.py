"""The packed LSTM layers: a sequence's output depends on that sequence
only, and ``Model.copy()`` / serialisation act on the real weights."""
from __future__ import annotations

import numpy
import pytest
from thinc.api import fix_random_seed

from spacy_rhetoric.ml.cnn_bilstm import build_cnn_bilstm_encoder
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


@pytest.fixture
def lstm_threads(monkeypatch):
    """torch on 2 threads for the test (restored after); returns the thread
    counts each ``torch.nn.LSTM.forward`` call ran with."""
    import torch

    seen = []
    forward = torch.nn.LSTM.forward

    def recording(self, *args, **kwargs):
        seen.append(torch.get_num_threads())
        return forward(self, *args, **kwargs)

    monkeypatch.setattr(torch.nn.LSTM, "forward", recording)
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    yield seen
    torch.set_num_threads(before)


@pytest.mark.parametrize("make", [lambda: PackedBiLSTM(8, 6), lambda: PackedPyTorchLSTM(8, 6)], ids=["PackedBiLSTM", "PackedPyTorchLSTM"])
def test_predicts_on_one_thread_and_trains_on_the_callers(make, lstm_threads):
    import torch

    model, Xs = _initialized(make)
    lstm_threads.clear()
    model.predict(Xs)
    assert lstm_threads == [1] and torch.get_num_threads() == 2
    model.begin_update(Xs)
    assert lstm_threads == [1, 2] and torch.get_num_threads() == 2


def test_threads_predicting_at_once_keep_their_own_settings(lstm_threads):
    """torch's thread count is per thread: a service's worker predicting
    sets and restores its own, and the main thread's 2 stay."""
    import threading

    import torch

    from spacy_rhetoric.runtime.threads import one_thread_prediction

    seen = {}
    inside, release = threading.Event(), threading.Event()

    def predict():
        torch.set_num_threads(2)
        with torch.no_grad(), one_thread_prediction():
            seen["inside"] = torch.get_num_threads()
            inside.set()
            release.wait(30)
        seen["after"] = torch.get_num_threads()

    worker = threading.Thread(target=predict, daemon=True)
    worker.start()
    try:
        assert inside.wait(30)
        assert torch.get_num_threads() == 2
    finally:
        release.set()
        worker.join(30)
    assert seen == {"inside": 1, "after": 2}
