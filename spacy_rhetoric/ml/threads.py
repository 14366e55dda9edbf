"""Fork safety of torch inside ``nlp.pipe(..., n_process=N)``.

spaCy starts its worker processes with ``fork``. Once the parent has run a
torch operation (``nlp(text)`` before ``nlp.pipe``), torch's OpenMP thread
pool exists in the parent but its threads do not survive ``fork``: a child
that enters a parallel region waits for them forever (workers idle at 0 %
CPU). A forked child therefore runs torch on one thread, which never touches
the pool; this is also the right setting when N processes share the cores.

Hugging Face's fast tokenizers (the transformer pipeline) have the same
problem with their own thread pool: after the parent has used it, each
forked child disables it and prints a four-line warning on stderr, once per
worker. Before a fork, ``TOKENIZERS_PARALLELISM`` is therefore set to
``false`` unless the user has set it: the tokenizers then run on one thread
(a small share of the transformer pipeline's time) and fork silently.

A transformer encoder with ``cpu_threads`` runs its prediction on more
threads than the caller set, but only in the main thread of a process that
is not a worker (:func:`encoder_threads`).
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from typing import Iterator, Optional

_registered = False
#: set in a worker that shares the cores with others: a child forked from
#: this process (spaCy's n_process workers) or a Ray actor
_worker = False


def mark_worker() -> None:
    """This process is one of several workers sharing the cores: torch on
    one thread, also in a transformer encoder with ``cpu_threads``."""
    global _worker
    import torch

    _worker = True
    torch.set_num_threads(1)


def _no_tokenizer_threads() -> None:
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def register_fork_handler() -> None:
    """Make every process forked from this one run torch on one thread, and
    the fast tokenizers without their thread pool unless the user chose
    (module docstring; idempotent; a no-op where ``os.register_at_fork``
    does not exist)."""
    global _registered
    if _registered or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(before=_no_tokenizer_threads, after_in_child=mark_worker)
    _registered = True


def machine_threads() -> int:
    """Threads for "all of this machine": ``OMP_NUM_THREADS`` when the user
    set it, else the cores this process may run on."""
    env = os.environ.get("OMP_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        return os.cpu_count() or 1


def encoder_threads(cpu_threads: int) -> Optional[int]:
    """torch threads for a transformer encoder's prediction on a CPU, or
    None to leave torch's current setting: ``cpu_threads`` 0, always in a
    worker (:func:`mark_worker`; one thread there: the pool does not
    survive a fork, and N workers already share the cores), and outside the
    main thread (a web server's request threads). -1 is
    :func:`machine_threads`.

    Why: ``rhetoric analyze``, the service and the benchmark run torch on one
    thread (:func:`spacy_rhetoric.records.single_torch_thread`), which suits
    the small BiLSTMs, while the encoder's large products gain from every
    core (``docs/service.md``).
    """
    if cpu_threads == 0 or _worker or threading.current_thread() is not threading.main_thread():
        # OpenMP starts a team of threads for every thread that asks for more
        # than one: a server's request threads would each start their own
        # (measured: /analyze p50 0.46 s instead of 0.41 s)
        return None
    return machine_threads() if cpu_threads < 0 else cpu_threads


@contextmanager
def torch_threads(n: Optional[int]) -> Iterator[None]:
    """Run the block with torch on ``n`` threads (None: unchanged), then
    restore the caller's setting."""
    if n is None:
        yield
        return
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)


@contextmanager
def one_thread_prediction() -> Iterator[None]:
    """torch on one thread inside the block when no gradient is being
    recorded (prediction); training keeps the caller's setting. The setting
    is the calling thread's own (torch's OpenMP thread count is per
    thread), so threads predicting at once do not change each other's.

    Why: the BiLSTMs are small (a few hundred units, batches of a few
    docs), and torch's default of one thread per core made one process
    burn more CPU than it saved. On the 42 PSE-I test essays, ``nlp.pipe``
    with torch's default 2 threads took a median 1.91 s of wall time and
    2.43 s of CPU; with the LSTMs on one thread, 1.62 s and 1.62 s (an ad
    hoc script, 5 alternating rounds). A user who calls ``spacy.load`` and
    ``nlp.pipe`` now gets what ``rhetoric analyze`` got with
    :func:`spacy_rhetoric.records.single_torch_thread`.
    """
    import torch

    if torch.is_grad_enabled() or torch.get_num_threads() == 1:
        yield
        return
    with torch_threads(1):
        yield
