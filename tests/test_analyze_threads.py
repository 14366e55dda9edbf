"""Threads that never oversubscribe the machine (``spacy_rhetoric.runtime.threads``):
a transformer encoder's default leaves the cores that other processes use,
and ``--threads`` sets every pool the pipelines touch."""
from __future__ import annotations

import pytest

from spacy_rhetoric.runtime import threads


@pytest.fixture()
def default_threads(monkeypatch):
    """The process's default setting, as a user who chose nothing has it."""
    monkeypatch.setattr(threads, "_worker", False)
    monkeypatch.setattr(threads, "_chosen", None, raising=False)
    monkeypatch.delenv("RHETORIC_THREADS", raising=False)
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)


def fake_machine(monkeypatch, others_busy: float, cores: int = 4):
    """``/proc/stat`` of a machine with ``cores`` cores on which other
    processes use ``others_busy`` cores and this one runs one thread."""
    clock = {"t": 100.0}

    def sample():
        t = clock["t"]
        clock["t"] += 1.0
        return t, t * (others_busy + 1.0), t * 1.0  # (wall, busy of all processes, this process's CPU)

    monkeypatch.setattr(threads, "free_cores", threads._FreeCores())
    monkeypatch.setattr(threads.free_cores, "_sample", sample)
    monkeypatch.setattr(threads.time, "sleep", lambda s: None)
    monkeypatch.setattr(threads, "machine_threads", lambda: cores)


@pytest.mark.parametrize("others_busy,expected", [(0.0, 4), (1.0, 3), (2.6, 1), (9.0, 1)])
def test_the_encoder_default_leaves_the_cores_others_use(default_threads, monkeypatch, others_busy, expected):
    fake_machine(monkeypatch, others_busy)
    assert threads.encoder_threads(-1) == expected
    assert threads.encoder_threads(-1) == expected  # and again, from the time since the last look


def test_a_busy_process_takes_a_core_from_the_encoder(default_threads):
    from spacy_rhetoric.evaluation.benchmark import CompetingLoad

    cap = threads.machine_threads()
    with CompetingLoad(1):
        threads.encoder_threads(-1)  # the first look
        import time

        time.sleep(0.5)  # the busy process has the cores to itself meanwhile
        assert threads.encoder_threads(-1) <= max(1, cap - 1)


def test_the_user_chooses_the_threads_of_every_pool(default_threads, monkeypatch):
    import torch
    from threadpoolctl import threadpool_info

    before = torch.get_num_threads()
    try:
        assert threads.set_threads(2) == 2
        assert torch.get_num_threads() == 2
        assert threads.encoder_threads(-1) == 2 and threads.encoder_threads(3) == 3
        assert all(pool["num_threads"] <= 2 for pool in threadpool_info() if pool["user_api"] == "blas")
        assert threads.set_threads(1) == 1 and torch.get_num_threads() == 1
        assert all(pool["num_threads"] == 1 for pool in threadpool_info() if pool["user_api"] == "blas")
        monkeypatch.setenv("RHETORIC_THREADS", "3")
        assert threads.set_threads(None) == 3 and threads.encoder_threads(-1) == 3
        monkeypatch.setenv("RHETORIC_THREADS", "auto")
        assert threads.set_threads(None) == "auto" and torch.get_num_threads() == 1
        with pytest.raises(ValueError, match="at least 1"):
            threads.set_threads(0)
        monkeypatch.setenv("RHETORIC_THREADS", "many")
        with pytest.raises(ValueError, match="RHETORIC_THREADS must be a number of threads or auto"):
            threads.threads_setting()
    finally:
        threads._chosen = None
        torch.set_num_threads(before)
