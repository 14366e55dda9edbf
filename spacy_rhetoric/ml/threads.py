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
"""
from __future__ import annotations

import os

_registered = False


def _one_torch_thread() -> None:
    import torch

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
    os.register_at_fork(before=_no_tokenizer_threads, after_in_child=_one_torch_thread)
    _registered = True
