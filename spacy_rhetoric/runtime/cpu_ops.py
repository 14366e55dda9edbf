"""Matrix products on the CPU through numpy's BLAS, one thread per call.

thinc's ``NumpyOps`` multiplies with blis. On this project's 2-core x86
machine (AVX-512) blis took 8.6 ms for the tok2vec's CNN product,
(2200, 288) x (288, 288), where numpy's OpenBLAS took 2.8 ms on one thread.
Each call is limited to one BLAS thread: OpenBLAS's idle threads spin
between calls and took the cores from torch's LSTM and the tokenizer (the
42 PSE-I test essays: 1.63 s with two BLAS threads, 1.42 s with one), and
``nlp.pipe(..., n_process=N)`` already gives each core a process.

The products are numpy's, so results equal blis's up to float rounding; the
shipped pipelines' spans were identical on the 42 test essays.

Enable it in a pipeline's config::

    [nlp.after_pipeline_creation]
    @callbacks = "spacy_rhetoric.one_thread_blas_ops.v1"
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from functools import lru_cache
from typing import Callable, Iterator, Optional

from spacy.language import Language
from spacy.util import registry
from thinc.api import NumpyOps
from thinc.types import Floats2d

#: Products running now in this process, and the limiter that set one
#: thread when the first of them began: the user's setting comes back when
#: the last one ends, whatever threads (a service's workers) run them.
_running = 0
_limiter = None
_lock = threading.Lock()


def _reset_after_fork() -> None:
    """A forked child starts with no product running: a lock held by another
    thread of the parent at the fork would otherwise never be released."""
    global _running, _limiter, _lock
    _running, _limiter, _lock = 0, None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@lru_cache(maxsize=None)
def _blas():
    """threadpoolctl's handle on the BLAS libraries numpy loaded (made once:
    finding them scans the process's shared libraries)."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController().select(user_api="blas")


@contextmanager
def one_blas_thread() -> Iterator[None]:
    """The BLAS on one thread inside the block; the setting before the first
    of several overlapping blocks is restored when the last one ends."""
    global _running, _limiter
    with _lock:
        if _running == 0:
            _limiter = _blas().limit(limits=1)
        _running += 1
    try:
        yield
    finally:
        with _lock:
            _running -= 1
            if _running == 0:
                _limiter.restore_original_limits()
                _limiter = None


class OneThreadBLASOps(NumpyOps):
    """``NumpyOps`` whose ``gemm`` is ``numpy.dot`` on one BLAS thread; every
    other operation is ``NumpyOps``'s. The thread limit holds only during
    the call, so the user's own numpy keeps its setting."""

    def __init__(self) -> None:
        super().__init__(use_blis=False)

    def gemm(self, x: Floats2d, y: Floats2d, out: Optional[Floats2d] = None, trans1: bool = False,
             trans2: bool = False) -> Floats2d:
        """``x @ y`` with either transposed first: x Floats2d (m, k), or
        (k, m) with ``trans1``; y (k, n), or (n, k) with ``trans2``; returns
        (or writes into ``out``) Floats2d (m, n)."""
        with one_blas_thread():
            return super().gemm(x, y, out=out, trans1=trans1, trans2=trans2)

    def __reduce__(self):
        # a spawned worker (n_process on macOS / Windows) rebuilds it
        return (OneThreadBLASOps, ())


def use_one_thread_blas(nlp: Language) -> Language:
    """Give every node of every component's model :class:`OneThreadBLASOps`
    where it has ``NumpyOps`` (models on a GPU keep theirs). Returns ``nlp``."""
    ops = OneThreadBLASOps()
    for _, component in nlp.components:
        model = getattr(component, "model", None)
        if model is None or not hasattr(model, "walk"):
            continue
        for node in model.walk():
            if type(node.ops) is NumpyOps:
                node.ops = ops
    return nlp


@registry.callbacks("spacy_rhetoric.one_thread_blas_ops.v1")
def make_one_thread_blas_ops() -> Callable[[Language], Language]:
    """An ``[nlp.after_pipeline_creation]`` callback: :func:`use_one_thread_blas`."""
    return use_one_thread_blas
