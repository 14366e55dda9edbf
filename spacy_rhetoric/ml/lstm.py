"""Bidirectional LSTM layers whose output for a sequence depends on that
sequence only.

thinc's ``PyTorchLSTM`` runs ``torch.nn.LSTM`` on a zero-padded batch: the
backward direction of a short sequence starts on the padding, so a document's
vectors change with the length of the longest document batched with it (up to
0.36 in a coarse score on the PSE-I test essays). Both layers here pack the
batch (``torch.nn.utils.rnn.pack_padded_sequence``) so every direction starts
and stops on a sequence's own first and last element.

Both follow thinc's layer conventions (``thinc/layers/residual.py``): a
module-level ``forward`` that reaches its sublayer through ``model.layers``,
so ``Model.copy()`` and serialisation act on the real weights.
"""
from __future__ import annotations

from typing import Callable, List, Tuple

import torch
from spacy.util import registry
from thinc.api import ArgsKwargs, Model, PyTorchWrapper, PyTorchWrapper_v2, torch2xp, with_padded, xp2torch
from thinc.types import Floats2d, Floats3d, Padded

from ..runtime.threads import one_thread_prediction


class PackedLSTMModule(torch.nn.LSTM):
    """``torch.nn.LSTM`` (time-major) that packs its zero-padded input.

    Same parameters (and ``state_dict`` keys) as ``torch.nn.LSTM``, so weights
    trained with thinc's ``PyTorchLSTM`` load unchanged.
    """

    def forward(self, X: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:  # type: ignore[override]
        """X: (max_len, batch, nI) zero-padded; lengths: (batch,) int64 on CPU.
        Returns (max_len, batch, nO), zero at padded positions."""
        lengths = lengths.clamp(min=1)
        packed = torch.nn.utils.rnn.pack_padded_sequence(X, lengths, enforce_sorted=_longest_first(lengths))
        with one_thread_prediction():
            out, _ = super().forward(packed)
        Y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, total_length=X.shape[0])
        return Y


def _longest_first(lengths: torch.Tensor) -> bool:
    """Whether ``lengths`` (batch,) never increase: thinc's ``Padded`` sorts
    its sequences so, and torch then packs without copying the batch into
    sorted order and back (each sequence's output is the same either way)."""
    return bool((lengths[:-1] >= lengths[1:]).all())


def _padded_to_torch(model: Model, Xp: Padded, is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    device = model.shims[0].device
    lengths = torch.tensor(Xp.lengths, dtype=torch.int64)
    args = ArgsKwargs(args=(xp2torch(Xp.data, requires_grad=is_train, device=device), lengths), kwargs={})

    def backprop(d_inputs: ArgsKwargs) -> Padded:
        return Padded(torch2xp(d_inputs.args[0]), Xp.size_at_t, Xp.lengths, Xp.indices)

    return args, backprop


def _torch_to_padded(model: Model, inputs_outputs: Tuple, is_train: bool) -> Tuple[Padded, Callable]:
    Xp, Ytorch = inputs_outputs
    device = model.shims[0].device

    def backprop(dYp: Padded) -> ArgsKwargs:
        return ArgsKwargs(args=(Ytorch,), kwargs={"grad_tensors": xp2torch(dYp.data, device=device)})

    Y: Floats3d = torch2xp(Ytorch)
    return Padded(Y, Xp.size_at_t, Xp.lengths, Xp.indices), backprop


@registry.layers("spacy_rhetoric.PackedPyTorchLSTM.v1")
def PackedPyTorchLSTM(nO: int, nI: int, *, bi: bool = True, depth: int = 1, dropout: float = 0.0) -> Model[List[Floats2d], List[Floats2d]]:
    """Drop-in replacement for thinc's ``PyTorchLSTM`` that packs sequences.

    List[Floats2d] (n_i, nI) -> List[Floats2d] (n_i, nO); with ``bi`` each
    direction has nO // 2 units. The layer tree (``with_padded`` around
    ``with_padded`` around the torch wrapper) and the torch parameters are
    those of ``with_padded(PyTorchLSTM(...))``, so pipelines trained with the
    padded LSTM load into this layer and give, for every document, the
    output the padded LSTM gave that document alone.
    """
    n_hidden = nO // 2 if bi else nO
    lstm = PackedLSTMModule(nI, n_hidden, depth, bidirectional=bi, dropout=dropout if depth > 1 else 0.0)
    wrapped = PyTorchWrapper(lstm, convert_inputs=_padded_to_torch, convert_outputs=_torch_to_padded)
    wrapped.set_dim("nO", nO)
    wrapped.set_dim("nI", nI)
    return with_padded(with_padded(wrapped))


class _BatchFirstPackedLSTM(torch.nn.Module):
    """Batch-major packed BiLSTM; the LSTM is the submodule ``lstm`` (the
    ``state_dict`` layout of shipped ``parallelism_linker`` models)."""

    def __init__(self, nI: int, nO: int, depth: int, dropout: float) -> None:
        super().__init__()
        self.lstm = torch.nn.LSTM(nI, nO // 2, depth, batch_first=True, bidirectional=True,
                                  dropout=dropout if depth > 1 else 0.0)

    def forward(self, X: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        """X: (batch, max_len, nI); lengths: (batch,). Returns (batch, max_len, nO)."""
        lengths = lengths.clamp(min=1)
        packed = torch.nn.utils.rnn.pack_padded_sequence(X, lengths, batch_first=True, enforce_sorted=_longest_first(lengths))
        with one_thread_prediction():
            out, _ = self.lstm(packed)
        Y, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=X.shape[1])
        return Y


def _pad_to_torch(model: Model, X: Tuple[Floats3d, List[int]], is_train: bool) -> Tuple[ArgsKwargs, Callable]:
    padded, lengths = X
    args = ArgsKwargs(args=(xp2torch(padded, requires_grad=is_train), torch.tensor(lengths, dtype=torch.int64)), kwargs={})
    return args, lambda dX: torch2xp(dX.args[0])


def _packed_bilstm_forward(model: Model, Xs: List[Floats2d], is_train: bool) -> Tuple[List[Floats2d], Callable]:
    if not Xs:
        return [], lambda dYs: []
    inner = model.layers[0]
    # longest first, so torch packs the batch without reordering it
    order = sorted(range(len(Xs)), key=lambda i: -len(Xs[i]))
    lengths = [len(Xs[i]) for i in order]
    Y, backprop_inner = inner((model.ops.pad([Xs[i] for i in order]), lengths), is_train)
    Ys = _unsort(model.ops.unpad(model.ops.asarray3f(Y), lengths), order)

    def backprop(dYs: List[Floats2d]) -> List[Floats2d]:
        return _unsort(model.ops.unpad(backprop_inner(model.ops.pad([dYs[i] for i in order])), lengths), order)

    return Ys, backprop


def _unsort(items: List, order: List[int]) -> List:
    """``items`` given in ``order`` (``items[k]`` belongs at ``order[k]``), back in input order."""
    out: List = [None] * len(items)
    for k, i in enumerate(order):
        out[i] = items[k]
    return out


@registry.layers("spacy_rhetoric.PackedBiLSTM.v1")
def PackedBiLSTM(nO: int, nI: int, *, depth: int = 1, dropout: float = 0.0) -> Model[List[Floats2d], List[Floats2d]]:
    """Bidirectional LSTM over a list of sequences, List[Floats2d] (n_i, nI)
    -> List[Floats2d] (n_i, nO) (nO / 2 units per direction), packed so that
    each output depends on its own sequence only."""
    inner = PyTorchWrapper_v2(_BatchFirstPackedLSTM(nI, nO, depth, dropout), convert_inputs=_pad_to_torch)
    return Model("packed_bilstm", _packed_bilstm_forward, layers=[inner], dims={"nO": nO, "nI": nI})
