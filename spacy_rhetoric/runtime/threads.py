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
import sys
import threading
import time
from contextlib import contextmanager
from typing import Iterator, Optional, Tuple, Union

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


#: pid of the process whose forked children must die with it, while
#: :func:`children_die_with_parent` is active in it
_dying_parent: Optional[int] = None
_PR_SET_PDEATHSIG = 1


@contextmanager
def children_die_with_parent() -> Iterator[None]:
    """Every child forked (``os.fork``, so multiprocessing's ``fork`` start
    method) by this process inside the block is killed (SIGKILL) when this
    process ends, however it ends (a signal, SIGKILL included).

    Why: spaCy's ``nlp.pipe(n_process=N)`` workers wait on a queue whose
    write ends they hold themselves, so when the parent is killed they wait
    forever (about 750 MB each). On Linux the child asks the kernel for
    ``prctl(PR_SET_PDEATHSIG, SIGKILL)`` right after the fork, then checks
    that its parent is still the process that forked it (the parent may
    have ended in between). Elsewhere it does nothing. The signal follows
    the forking thread: fork inside the block from a thread that outlives
    the children (``nlp.pipe`` forks from the calling thread)."""
    global _dying_parent
    before = _dying_parent
    _dying_parent = os.getpid()
    try:
        yield
    finally:
        _dying_parent = before


def _die_with_parent() -> None:
    """In a child just forked: :func:`children_die_with_parent`'s request."""
    parent = _dying_parent
    if parent is None or not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.prctl(_PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0) != 0:
            return
    except (OSError, AttributeError):  # no prctl in this C library
        return
    if os.getppid() != parent:  # the parent ended before the request
        os._exit(1)


def _after_fork_in_child() -> None:
    _die_with_parent()
    mark_worker()


def register_fork_handler() -> None:
    """Make every process forked from this one run torch on one thread, and
    the fast tokenizers without their thread pool unless the user chose
    (module docstring; idempotent; a no-op where ``os.register_at_fork``
    does not exist)."""
    global _registered
    if _registered or not hasattr(os, "register_at_fork"):
        return
    os.register_at_fork(before=_no_tokenizer_threads, after_in_child=_after_fork_in_child)
    _registered = True


def machine_threads() -> int:
    """The cores this process may run on (its CPU affinity), at most the
    machine's physical cores: the most threads worth giving one process."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - not on Linux
        cores = os.cpu_count() or 1
    try:
        import psutil

        physical = psutil.cpu_count(logical=False)
    except ImportError:  # pragma: no cover - psutil is a dependency
        physical = None
    return max(1, min(cores, physical or cores))


#: What :func:`set_threads` chose for this process (None: not chosen).
_chosen: Optional[Union[int, str]] = None
#: The environment variable that chooses when no one called set_threads.
THREADS_ENV = "RHETORIC_THREADS"


def _parse_threads(value: Union[int, str, None], source: str) -> Union[int, str, None]:
    if value is None or value == "":
        return None
    if isinstance(value, str):
        if value.strip().lower() == "auto":
            return "auto"
        if not value.strip().isdigit():
            raise ValueError(f"{source} must be a number of threads or auto, got {value!r}")
        value = int(value)
    if value < 1:
        raise ValueError(f"{source} must be at least 1 (or auto), got {value}")
    return value


def threads_setting() -> Union[int, str]:
    """Threads per process: what :func:`set_threads` chose, else
    ``RHETORIC_THREADS``, else ``OMP_NUM_THREADS`` (a number the user set),
    else ``"auto"``. ``"auto"`` gives a transformer encoder the physical
    cores that other processes leave free (:func:`free_cores`) and
    everything else one thread."""
    if _chosen is not None:
        return _chosen
    env = _parse_threads(os.environ.get(THREADS_ENV), THREADS_ENV)
    if env is not None:
        return env
    omp = os.environ.get("OMP_NUM_THREADS", "")
    if omp.isdigit() and int(omp) > 0:
        return int(omp)
    return "auto"


def set_threads(n: Union[int, str, None] = None) -> Union[int, str]:
    """Choose this process's threads and apply them to every pool the
    pipelines use: torch's intra-op threads (:func:`torch_threads` blocks
    and :func:`encoder_threads` read the choice), torch's inter-op pool
    (where it has not started yet) and the BLAS libraries numpy loaded
    (``threadpoolctl``). ``n``: a number, ``"auto"`` (:func:`threads_setting`)
    or None (keep the environment's choice). Returns the choice. Raises
    ValueError for a number below 1.

    Why: a pool per core in each of several processes, or beside a busy
    process, oversubscribes the cores, and OpenMP's waiting threads then
    spin on the cores the work needs: ``zh_rhetoric_trf`` ran at 187
    characters/s with its encoder on both cores of a machine at load 4,
    against 705 on one thread (docs/reliability.md).
    """
    global _chosen
    _chosen = _parse_threads(n, "threads") if n is not None else None
    setting = threads_setting()
    fixed = setting if isinstance(setting, int) else 1
    if "torch" in sys.modules or isinstance(setting, int):
        import torch

        torch.set_num_threads(fixed)
        try:
            torch.set_num_interop_threads(fixed)
        except RuntimeError:  # the inter-op pool has started: its size is fixed now
            pass
    try:
        from threadpoolctl import threadpool_limits

        threadpool_limits(limits=fixed, user_api="blas")
    except ImportError:  # pragma: no cover - threadpoolctl is a dependency
        pass
    return setting


class _FreeCores:
    """Physical cores that other processes leave free, from the machine's
    CPU time (``/proc/stat``) less this process's own, over the time since
    the last look (a fresh 0.1 s look when that is under 0.05 s or over
    10 s ago)."""

    def __init__(self) -> None:
        self._last: Optional[Tuple[float, float, float]] = None
        self._lock = threading.Lock()

    @staticmethod
    def _sample() -> Optional[Tuple[float, float, float]]:
        try:
            with open("/proc/stat", encoding="ascii") as fh:
                fields = [int(x) for x in fh.readline().split()[1:]]
        except (OSError, ValueError):
            return None
        # user nice system idle iowait irq softirq steal ...: busy is all but idle and iowait
        busy = (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")
        return time.monotonic(), busy, time.process_time()

    def __call__(self, cap: int) -> int:
        import math

        with self._lock:
            now = self._sample()
            if now is None:
                return 1
            last = self._last
            if last is None or not 0.05 <= now[0] - last[0] <= 10.0:
                last = now
                time.sleep(0.1)
                now = self._sample() or now
            self._last = now
            wall = now[0] - last[0]
            others = max(0.0, (now[1] - last[1]) - (now[2] - last[2])) / wall if wall > 0 else 0.0
        return max(1, min(cap, math.floor(cap - others + 0.5)))


free_cores = _FreeCores()


def encoder_threads(cpu_threads: int) -> Optional[int]:
    """torch threads for a transformer encoder's prediction on a CPU, or
    None to leave torch's current setting: ``cpu_threads`` 0, always in a
    worker (:func:`mark_worker`; one thread there: the pool does not
    survive a fork, and N workers already share the cores), and outside the
    main thread (a web server's request threads). -1 is the process's
    setting (:func:`threads_setting`): a number the user chose, or by
    default the physical cores that other processes leave free at this
    call (:func:`free_cores`, at least 1), so the encoder never
    oversubscribes the machine; a positive ``cpu_threads`` is that many.

    Why: ``rhetoric analyze``, the service and the benchmark run torch on one
    thread (:func:`spacy_rhetoric.analysis.records.single_torch_thread`), which suits
    the small BiLSTMs, while the encoder's large products gain from the
    cores no one else uses (docs/reliability.md, "Threads").
    """
    if cpu_threads == 0 or _worker or threading.current_thread() is not threading.main_thread():
        # OpenMP starts a team of threads for every thread that asks for more
        # than one: a server's request threads would each start their own
        # (measured: /analyze p50 0.46 s instead of 0.41 s)
        return None
    if cpu_threads > 0:
        return cpu_threads
    setting = threads_setting()
    return setting if isinstance(setting, int) else free_cores(machine_threads())


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
    :func:`spacy_rhetoric.analysis.records.single_torch_thread`.
    """
    import torch

    if torch.is_grad_enabled() or torch.get_num_threads() == 1:
        yield
        return
    with torch_threads(1):
        yield
