"""Engines of ``analyze``: where the pipeline runs.

Both turn :class:`~spacy_rhetoric.analysis.io.InputDoc` s into
``(index, record, sections)`` results (``index``: position in the input
order; ``record``: the analysis or error record; ``sections``: the HTML
renderings when asked for, else None). A document that cannot be read or
analysed becomes an error record; the others are analysed. Every document
is analysed in pieces of bounded size, with its line endings normalised
(:mod:`spacy_rhetoric.analysis.pieces`), and gets one record.

``local``
    ``nlp.pipe`` in this process (``n_process=1``, batch by batch) or in
    ``n_process`` forked workers. A batch that raises is re-run one document
    at a time, so only the document that fails gets an error record
    (batch-independent pipelines give every other document the record it
    would get in any batch; tests/test_same_answer.py). Results come in
    input order.

``ray``
    Ray Data: the driver reads and decodes the inputs (error records for
    those it cannot read are written at once), the texts go to an actor
    pool (``ray.data.ActorPoolStrategy(size=num_actors)``) whose actors
    each load the pipeline once (:class:`RayAnalyzer`, a callable class for
    ``map_batches``) and return JSON records, which the driver writes as
    they arrive (completion order). Without an address, a new Ray instance
    starts on this machine (``ray.init(address="local", num_cpus=...,
    include_dashboard=False)``) and stops afterwards; with one (``auto`` on a node of a cluster started with
    ``ray start``, or ``host:6379``) it joins that cluster, whose nodes need
    spacy-rhetoric and the pipeline installed (a pipeline folder must exist
    at the same absolute path on every node). Ray Client addresses
    (``ray://host:10001``) connect, but Ray Data 2.60 cannot execute through
    them (``'Worker' object has no attribute 'core_worker'``): run the
    command on a cluster node, or submit it with ``ray job submit``.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import threading
from collections import deque
from pathlib import Path
from typing import Any, Deque, Dict, Iterable, Iterator, List, Optional, Tuple

from spacy.language import Language
from spacy.tokens import Doc

from ..errors import Errors
from .io import InputDoc
from .pieces import PIECE_CHARS, Normalized, merge_bodies, normalize_line_endings, piece_bounds
from .records import RECORD_BODY_KEY, body_to_record, error_record, model_info, record_body, single_torch_thread, too_long_message

Result = Tuple[int, Dict[str, Any], Optional[Dict[str, str]]]
#: Name of the record component the multiprocess engine adds for a run.
RECORD_COMPONENT = "rhetoric_analysis_record"


# --- one document, one batch ------------------------------------------------------


def run_single(nlp: Language, text: str) -> Doc:
    """``nlp(text)`` with every component called directly, so that a
    component's error raises whatever error handler ``nlp`` has."""
    doc = nlp.make_doc(text)
    for _, proc in nlp.pipeline:
        doc = proc(doc)
    return doc


def _analysis_error(index: int, item: InputDoc, err: BaseException) -> Result:
    message = f"{item.path or item.id}: the pipeline failed: {type(err).__name__}: {err}"
    return index, error_record(item.id, item.path, "analysis_error", message), None


def _precheck(nlp: Language, index: int, item: InputDoc) -> Optional[Result]:
    """The error result of an item that must not reach the pipeline."""
    if item.error is not None:
        return index, error_record(item.id, item.path, item.error["type"], item.error["message"]), None
    if len(item.text) > nlp.max_length:
        return index, error_record(item.id, item.path, "too_long", too_long_message(item, nlp.max_length)), None
    return None


class Pieces:
    """The pieces an input is analysed in (:mod:`spacy_rhetoric.analysis.pieces`):
    its text with ``\\n`` line endings, the pieces' bounds in it, and their
    texts."""

    __slots__ = ("normalized", "bounds", "texts")

    def __init__(self, text: str, piece_chars: int = PIECE_CHARS) -> None:
        self.normalized: Normalized = normalize_line_endings(text)
        self.bounds = piece_bounds(self.normalized.text, piece_chars)
        self.texts = [self.normalized.text[s:e] for s, e in self.bounds]


def _body(doc: Doc) -> Dict[str, Any]:
    """The record body of one piece: the one a worker's
    ``rhetoric_analysis_record`` left, or made here."""
    body = doc.user_data.get(RECORD_BODY_KEY)
    return body if body is not None else record_body(doc)


def _result(index: int, item: InputDoc, pieces: Pieces, bodies: List[Dict[str, Any]], info: Dict[str, str],
            with_sections: bool) -> Result:
    from .render import render_essay

    try:
        if len(bodies) == 1 and pieces.normalized.text is item.text:  # one piece, no \r: the body as it is
            body = bodies[0]
        else:
            body = merge_bodies(pieces.normalized, pieces.bounds, bodies)
        record = body_to_record(body, item.id, item.path, info, item.encoding)
        return index, record, {"essay": render_essay(record)} if with_sections else None
    except Exception as err:  # noqa: BLE001 - reported as the document's error record
        return _analysis_error(index, item, err)


def _single(nlp: Language, index: int, item: InputDoc, info: Dict[str, str], with_sections: bool,
            piece_chars: int = PIECE_CHARS, pieces: Optional[Pieces] = None) -> Result:
    pieces = pieces or Pieces(item.text, piece_chars)
    try:
        bodies = [_body(run_single(nlp, text)) for text in pieces.texts]
    except Exception as err:  # noqa: BLE001
        return _analysis_error(index, item, err)
    return _result(index, item, pieces, bodies, info, with_sections)


def analyze_batch(
    nlp: Language, batch: List[Tuple[int, InputDoc]], info: Dict[str, str], with_sections: bool = False,
    piece_chars: int = PIECE_CHARS,
) -> List[Result]:
    """Results of one batch, in its order: ``nlp.pipe`` over the pieces of
    the batch's documents (at most as many pieces at a time as the batch
    has documents; each doc is reduced to its record body at once), or,
    when that raises, one document at a time."""
    results: Dict[int, Result] = {}
    runnable = []
    for index, item in batch:
        failed = _precheck(nlp, index, item)
        if failed is not None:
            results[index] = failed
        else:
            runnable.append((index, item, Pieces(item.text, piece_chars)))
    bodies: Optional[List[Dict[str, Any]]]
    try:
        texts = (text for _, _, pieces in runnable for text in pieces.texts)
        bodies = [_body(doc) for doc in nlp.pipe(texts, batch_size=max(1, len(runnable)))]
    except Exception:  # noqa: BLE001 - find the document that fails
        bodies = None
    start = 0
    for index, item, pieces in runnable:
        if bodies is None:
            results[index] = _single(nlp, index, item, info, with_sections, pieces=pieces)
        else:
            n = len(pieces.texts)
            results[index] = _result(index, item, pieces, bodies[start:start + n], info, with_sections)
            start += n
    return [results[index] for index, _ in batch]


# --- local engine ---------------------------------------------------------------


def local_results(
    nlp: Language,
    docs: Iterable[InputDoc],
    *,
    n_process: int = 1,
    batch_size: int = 8,
    with_sections: bool = False,
    piece_chars: int = PIECE_CHARS,
) -> Iterator[Result]:
    """Results of ``docs`` in input order (module docstring), each document
    analysed in pieces of at most ``piece_chars`` characters
    (:mod:`spacy_rhetoric.analysis.pieces`); torch on one thread per process."""
    from spacy.util import minibatch

    info = model_info(nlp)
    numbered = enumerate(docs)
    with single_torch_thread():
        if n_process <= 1:
            for batch in minibatch(numbered, batch_size):
                yield from analyze_batch(nlp, list(batch), info, with_sections, piece_chars)
        else:
            yield from _multiprocess_results(nlp, numbered, info, n_process, batch_size, with_sections, piece_chars)


def _drop_failed(proc_name, proc, docs, err) -> None:
    """spaCy error handler: drop the documents of a failing batch (the
    parent re-runs them one by one)."""
    return None


@contextlib.contextmanager
def _dropping_errors(nlp: Language) -> Iterator[None]:
    saved = nlp.default_error_handler
    pipes = {name: proc.get_error_handler() for name, proc in nlp.pipeline if hasattr(proc, "get_error_handler")}
    nlp.set_error_handler(_drop_failed)
    try:
        yield
    finally:
        nlp.default_error_handler = saved
        for name, proc in nlp.pipeline:
            if name in pipes:
                proc.set_error_handler(pipes[name])


@contextlib.contextmanager
def _records_made_in_workers(nlp: Language) -> Iterator[None]:
    """``rhetoric_analysis_record`` last in ``nlp`` inside the block: each
    worker makes its docs' records and sends back slim docs
    (:mod:`spacy_rhetoric.components.analysis_record`, found through its
    ``spacy_factories`` entry point); a pipeline that has the component
    already is left as it is."""
    if RECORD_COMPONENT in nlp.pipe_names:
        yield
        return
    nlp.add_pipe("rhetoric_analysis_record", name=RECORD_COMPONENT, last=True)
    try:
        yield
    finally:
        nlp.remove_pipe(RECORD_COMPONENT)


class _Pending:
    """An input of the multiprocess engine on its way: its pieces' bodies as
    they come back, how many are still out, whether one was dropped."""

    __slots__ = ("index", "item", "failed", "pieces", "bodies", "missing", "dropped")

    def __init__(self, index: int, item: InputDoc, failed: Optional[Result], pieces: Optional[Pieces]) -> None:
        self.index, self.item, self.failed, self.pieces = index, item, failed, pieces
        n = len(pieces.texts) if pieces is not None else 0
        self.bodies: List[Optional[Dict[str, Any]]] = [None] * n
        self.missing, self.dropped = n, False

    @property
    def done(self) -> bool:
        return self.failed is not None or self.missing == 0


def _multiprocess_results(
    nlp: Language, numbered: Iterator[Tuple[int, InputDoc]], info: Dict[str, str], n_process: int, batch_size: int,
    with_sections: bool, piece_chars: int = PIECE_CHARS,
) -> Iterator[Result]:
    """``nlp.pipe(pieces, n_process=N)``: the workers tokenize and analyse
    the pieces of every input (those of one input may go to different
    workers), make each piece's record body, and drop a failing batch
    (:func:`_drop_failed`). Pieces come back in order, so each returned doc
    is matched to the oldest piece still out with its text; pieces passed
    over were dropped, and their input is re-run here, one piece at a time,
    where a document that fails gets its error record. Results are yielded
    in input order, each once all its pieces are back; the workers die with
    this process (:func:`spacy_rhetoric.runtime.threads.children_die_with_parent`)."""
    from ..runtime.threads import children_die_with_parent

    entries: Deque[_Pending] = deque()
    out: Deque[Tuple[_Pending, int]] = deque()  # pieces sent and not yet back, in order

    def feed() -> Iterator[str]:
        for index, item in numbered:
            failed = _precheck(nlp, index, item)
            entry = _Pending(index, item, failed, None if failed is not None else Pieces(item.text, piece_chars))
            entries.append(entry)
            if entry.pieces is not None:
                for k, text in enumerate(entry.pieces.texts):
                    out.append((entry, k))
                    yield text

    def settle(entry: _Pending) -> Result:
        if entry.failed is not None:
            return entry.failed
        assert entry.pieces is not None
        if entry.dropped:
            return _single(nlp, entry.index, entry.item, info, with_sections, pieces=entry.pieces)
        return _result(entry.index, entry.item, entry.pieces, entry.bodies, info, with_sections)  # type: ignore[arg-type]

    def drop_oldest() -> None:
        entry, _ = out.popleft()
        entry.dropped = True
        entry.missing -= 1

    with _dropping_errors(nlp), _records_made_in_workers(nlp), children_die_with_parent(), WorkerWatch() as watch:
        try:
            for doc in nlp.pipe(feed(), n_process=n_process, batch_size=batch_size):
                while out and out[0][0].pieces.texts[out[0][1]] != doc.text:  # type: ignore[union-attr]
                    drop_oldest()
                if not out:
                    raise RuntimeError("nlp.pipe returned a document that was not sent")
                entry, k = out.popleft()
                entry.bodies[k] = _body(doc)
                entry.missing -= 1
                while entries and entries[0].done:
                    yield settle(entries.popleft())
        except EOFError as err:
            if watch.ended is None:
                raise
            raise RuntimeError(Errors.R029.format(n_process=n_process, how=watch.ended)) from err
    while out:
        drop_oldest()
    while entries:
        yield settle(entries.popleft())


class WorkerWatch:
    """Watches the worker processes that ``nlp.pipe(n_process=N)`` forks.

    spaCy's workers inherit each other's pipe ends, so when one dies (killed
    for memory, a crash in native code) the parent waits for its documents
    forever. A thread peeks every ``interval`` seconds at the children
    started since the watch began (``os.waitid`` with ``WNOWAIT``: the
    reaping stays multiprocessing's); when one has ended other than with
    exit code 0, it stops the others (SIGTERM), so the parent's read ends
    with EOFError, and ``ended`` says how the first one ended. Without
    ``os.waitid`` (Windows) it watches nothing.
    """

    def __init__(self, interval: float = 0.5) -> None:
        import psutil

        self.interval = interval
        self.ended: Optional[str] = None
        self._me = psutil.Process()
        self._before = {child.pid for child in self._me.children()}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-watch", daemon=True)

    def __enter__(self) -> "WorkerWatch":
        if hasattr(os, "waitid"):
            self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            workers = [child.pid for child in self._me.children() if child.pid not in self._before]
            for pid in workers:
                how = _abnormal_end(pid)
                if how:
                    self.ended = how
                    for other in workers:
                        with contextlib.suppress(ProcessLookupError):
                            if other != pid:
                                os.kill(other, signal.SIGTERM)
                    return


def _abnormal_end(pid: int) -> str:
    """How child ``pid`` ended, when not with exit code 0; "" while it runs,
    after a clean exit, or once it has been reaped."""
    try:
        info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return ""
    if info is None or (info.si_code == os.CLD_EXITED and info.si_status == 0):
        return ""
    if info.si_code == os.CLD_EXITED:
        return f"exit code {info.si_status}"
    return f"signal {signal.Signals(info.si_status).name}"


# --- Ray engine -------------------------------------------------------------------


class RayAnalyzer:
    """Callable class for ``Dataset.map_batches``: loads the pipeline once
    per actor; maps a batch ``{"index", "meta", "text"}`` (meta: JSON
    ``[id, path, encoding]``) to ``{"index", "record", "sections"}`` (JSON
    strings; ``sections`` empty unless asked for)."""

    def __init__(self, model: str, max_length: Optional[int] = None, with_sections: bool = False,
                 piece_chars: int = PIECE_CHARS) -> None:
        from .loading import load_pipeline  # spaCy finds the factories by their entry points

        from ..runtime.threads import mark_worker

        mark_worker()  # actors share the cores: torch on one thread, the encoder too
        self.nlp = load_pipeline(model)
        if max_length:
            self.nlp.max_length = max_length
        self.info = model_info(self.nlp)
        self.with_sections = with_sections
        self.piece_chars = piece_chars

    def __call__(self, batch: Dict[str, Any]) -> Dict[str, List[Any]]:
        items = []
        for index, meta, text in zip(batch["index"], batch["meta"], batch["text"]):
            doc_id, path, encoding = json.loads(str(meta))
            items.append((int(index), InputDoc(doc_id, path, str(text), encoding)))
        results = analyze_batch(self.nlp, items, self.info, self.with_sections, self.piece_chars)
        return {
            "index": [index for index, _, _ in results],
            "record": [json.dumps(record, ensure_ascii=False) for _, record, _ in results],
            "sections": [json.dumps(sections, ensure_ascii=False) if sections else "" for _, _, sections in results],
        }


def model_meta_info(model: str, require: bool = True) -> Optional[Dict[str, str]]:
    """``{"name", "version"}`` of a pipeline from its ``meta.json`` without
    loading it (a folder or an installed package). None when this machine
    does not have it and ``require`` is false (a Ray cluster may); OSError
    (as :func:`load_pipeline`) when it must."""
    import spacy.util

    meta_path = Path(model) / "meta.json"
    if not meta_path.is_file() and spacy.util.is_package(model):
        meta_path = spacy.util.get_package_path(model) / "meta.json"
        if not meta_path.is_file():  # packages nest the pipeline one level down
            meta_path = next(spacy.util.get_package_path(model).glob("*/meta.json"), meta_path)
    if not meta_path.is_file():
        if not require:
            return None
        raise OSError(f"cannot load pipeline {model!r}: not an installed package or a pipeline folder "
                      "(build one with `spacy project run train`, or pass --model PATH)")
    meta = json.loads(meta_path.read_text(encoding="utf8"))
    return {"name": f"{meta.get('lang', '')}_{meta.get('name', '')}", "version": str(meta.get("version", ""))}


def _portable_model(model: str) -> str:
    """A pipeline folder as an absolute path (Ray workers need not share the
    driver's working directory); a package name as it is."""
    path = Path(model)
    return str(path.resolve()) if path.is_dir() else model


def require_ray() -> None:
    """RuntimeError with the install hint when Ray Data cannot be imported."""
    try:
        import ray  # noqa: F401
        import ray.data  # noqa: F401
    except ImportError as err:
        raise RuntimeError(f"the ray engine needs Ray: pip install 'spacy-rhetoric[ray]' (or 'ray[data]') ({err})") from None


def ray_results(
    model: str,
    docs: Iterable[InputDoc],
    *,
    address: Optional[str] = None,
    num_actors: int = 1,
    batch_size: int = 8,
    max_length: Optional[int] = None,
    with_sections: bool = False,
    num_cpus: Optional[int] = None,
    piece_chars: int = PIECE_CHARS,
) -> Iterator[Result]:
    """Results of ``docs`` computed with Ray Data (module docstring), in
    completion order. ``num_cpus``: CPUs of a Ray started here (default:
    this machine's, at least ``num_actors``). Raises RuntimeError when Ray
    is missing or fails (records already yielded stay valid: ``--resume``
    continues)."""
    require_ray()
    import ray
    import ray.data

    if num_actors < 1:
        raise ValueError(f"--num-actors must be at least 1, got {num_actors}")
    rows: List[Dict[str, Any]] = []
    for index, item in enumerate(docs):
        if item.error is not None:
            yield index, error_record(item.id, item.path, item.error["type"], item.error["message"]), None
        else:
            rows.append({"index": index, "meta": json.dumps([item.id, item.path, item.encoding]), "text": item.text})
    if not rows:
        return
    started = False
    if not ray.is_initialized():
        options: Dict[str, Any] = {"include_dashboard": False, "log_to_driver": False, "logging_level": logging.WARNING}
        try:
            if address:
                ray.init(address=address, **options)
            else:
                # address="local": a new instance, even where `ray start` left one running
                ray.init(address="local", num_cpus=num_cpus or max(num_actors, os.cpu_count() or 1), **options)
        except Exception as err:  # noqa: BLE001
            raise RuntimeError(f"cannot start or join Ray ({address or 'local'}): {err}") from err
        started = True
    try:
        ctx = ray.data.DataContext.get_current()
        ctx.enable_progress_bars = False
        ctx.print_on_execution_start = False
        ctx.enable_auto_log_stats = False
        logging.getLogger("ray.data").setLevel(logging.WARNING)  # no per-run INFO lines on stderr
        logging.getLogger("ray.data._internal.progress").addFilter(_quiet_progress_notice)
        # small blocks (one document each, at most 1000 blocks): Ray Data bundles blocks into
        # tasks of at least batch_size rows, so records come back one batch at a time
        blocks = min(len(rows), 1000)
        dataset = ray.data.from_items(rows, override_num_blocks=blocks).map_batches(
            RayAnalyzer,
            fn_constructor_kwargs={"model": _portable_model(model), "max_length": max_length,
                                   "with_sections": with_sections, "piece_chars": piece_chars},
            batch_size=batch_size,
            batch_format="numpy",
            compute=ray.data.ActorPoolStrategy(size=num_actors),
        )
        del rows
        stream = iter(dataset.iter_rows())
        while True:
            try:
                row = next(stream)
            except StopIteration:
                break
            except Exception as err:  # noqa: BLE001 - Ray wraps worker errors in its own types
                hint = ""
                if address and address.startswith("ray://"):
                    hint = ("; Ray Data does not run through Ray Client (ray://) in Ray 2.60: run analyze on a "
                            "cluster node with --ray-address auto, or submit it there with `ray job submit`")
                raise RuntimeError(f"the ray engine failed: {type(err).__name__}: {_first_line(err)}{hint}") from err
            sections = json.loads(row["sections"]) if row["sections"] else None
            yield int(row["index"]), json.loads(row["record"]), sections
    finally:
        if started:
            ray.shutdown()


def _quiet_progress_notice(record: logging.LogRecord) -> bool:
    """Logging filter: drop Ray Data's notice that its progress bars are
    off (ours runs instead)."""
    return not str(record.msg).startswith("Progress bars disabled")


def _first_line(err: BaseException) -> str:
    lines = [line for line in str(err).splitlines() if line.strip()]
    return lines[-1] if lines else ""


__all__ = ["RayAnalyzer", "analyze_batch", "local_results", "model_meta_info", "ray_results", "require_ray", "run_single"]
