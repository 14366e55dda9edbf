"""Speed and memory of the whole pipeline on the PSE-I test essays.

One document per essay (its paragraphs joined by ``\\n``, as ``analyze``
reads an XML essay). Each pipeline is loaded (timed) and warmed up on two
documents, then ``repeat`` rounds time every pipeline in turn: the tokenizer
alone, each component on its own, and ``nlp.pipe`` with each ``n_process``
setting; the timed wall clock includes starting the worker processes, as a
user running ``analyze --n-process N`` sees it. torch runs one thread per
process in every setting.

Units: words/second counts the non-space tokens the pipeline's own tokenizer
produces (pkuseg words, or characters without a pkuseg model); the gold LTP
word count of the essays is reported beside it. Peak RSS is
``resource.getrusage(...).ru_maxrss`` (KiB on Linux) of this process and of
its largest finished child process, in MiB.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from ..analysis.loading import load_pipeline
from ..corpora.readers import gold_word_example


def pse_test_texts(pse_dir: Union[str, Path], split: str = "test") -> Dict[str, Any]:
    """``{"ids": [...], "texts": [...], "gold_words": n}`` for the essays of
    one PSE-I split. Raises CorpusFormatError for malformed files."""
    import spacy

    from ..corpora.pse_i import iter_split, read_splits

    pse_dir = Path(pse_dir)
    ids, texts, gold_words = [], [], 0
    for name, docs in iter_split(pse_dir, read_splits(pse_dir)[split], spacy.blank("zh").vocab):
        ids.append(Path(name).stem)
        texts.append("\n".join(d.text for d in docs))
        gold_words += sum(len(d) for d in docs)
    return {"ids": ids, "texts": texts, "gold_words": gold_words}


def peak_rss_mib() -> Dict[str, float]:
    """Peak resident set size so far: this process and its largest finished
    child, MiB (``ru_maxrss`` is KiB on Linux)."""
    return {
        "self": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "children": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024,
    }


def _count_words(docs: Iterable[Doc]) -> int:
    return sum(sum(1 for t in doc if not t.is_space) for doc in docs)


def time_pipe(nlp: Language, texts: Sequence[str], n_process: int, batch_size: int) -> Tuple[float, int]:
    """One timed pass of ``nlp.pipe`` over ``texts``: ``(seconds, words)``.
    Every process runs torch on one thread
    (:func:`spacy_rhetoric.analysis.records.single_torch_thread`), so 1 and N
    processes compare like for like."""
    from ..analysis.records import single_torch_thread

    start = time.perf_counter()
    with single_torch_thread():
        words = _count_words(nlp.pipe(texts, n_process=n_process, batch_size=batch_size))
    return time.perf_counter() - start, words


def time_tokenizer(nlp: Language, texts: Sequence[str]) -> float:
    """Seconds of the tokenizer alone over ``texts`` (the pipeline's limit)."""
    start = time.perf_counter()
    for text in texts:
        nlp.make_doc(text)
    return time.perf_counter() - start


def time_components(nlp: Language, texts: Sequence[str], batch_size: int) -> Dict[str, float]:
    """Seconds of the tokenizer and of each component in one process, each
    run over all docs in pipeline order (``nlp.pipe``'s work, split up)."""
    from .util import apply_component
    from ..analysis.records import single_torch_thread

    out: Dict[str, float] = {}
    with single_torch_thread():
        start = time.perf_counter()
        docs = [nlp.make_doc(t) for t in texts]
        out["tokenizer"] = time.perf_counter() - start
        for name, proc in nlp.pipeline:
            start = time.perf_counter()
            docs = apply_component(proc, docs, batch_size)
            out[name] = time.perf_counter() - start
    return out


def _summary(seconds: Sequence[float], words: int, chars: int) -> Dict[str, float]:
    best, median = min(seconds), statistics.median(seconds)
    return {"seconds_best": best, "seconds_median": median, "seconds_all": list(seconds),
            "words_per_second_best": words / best, "words_per_second_median": words / median,
            "chars_per_second_best": chars / best, "chars_per_second_median": chars / median}


def add_process_speedups(rows: List[Dict[str, Any]]) -> List[Dict[str, Any]]:
    """Give each row of one model (sorted by ``n_process``) its speed-up over
    the first row, the fewest processes: ``speedup_vs_fewest_processes_best``
    and ``_median``, ratios of seconds (``2.0``: twice as fast). Returns
    ``rows``."""
    first = rows[0]
    for row in rows:
        for stat in ("best", "median"):
            row[f"speedup_vs_fewest_processes_{stat}"] = first[f"seconds_{stat}"] / row[f"seconds_{stat}"]
    return rows


def benchmark_pipelines(
    models: Sequence[Union[str, Path]],
    texts: Sequence[str],
    *,
    n_processes: Sequence[int] = (1, 2),
    batch_size: int = 4,
    repeat: int = 5,
    gold_words: Optional[int] = None,
    competing_load: int = 0,
    competing_pin: Optional[int] = None,
    components: bool = True,
    threads: Optional[Union[int, str]] = None,
) -> Dict[str, Any]:
    """Speed of each pipeline in ``models`` over ``texts``, timed in turn
    (every round times each model once per setting, so machine drift hits
    them alike).

    ``competing_load``: that many busy processes (:class:`CompetingLoad`,
    pinned to CPU ``competing_pin`` if given) run during the timed rounds,
    not during loading and warm-up; the result records them and the load
    average before and after the rounds. ``components=False`` skips the
    per-component timing (one pass fewer per round). ``threads``: the
    process's threads (:func:`spacy_rhetoric.runtime.threads.set_threads`; None:
    the default, as ``analyze`` has it).

    Per model: the load time (s); per ``n_process`` setting the best and
    median of ``repeat`` passes in seconds, words/s and characters/s, and
    the peak RSS so far (MiB, this process and its largest child); the
    tokenizer alone (best and median, characters/s: the limit of the
    pipeline); each component's seconds and share of their sum (median
    over the rounds, one process). Raises ValueError for no texts,
    ``n_process < 1`` or ``repeat < 1``.
    """
    if not texts:
        raise ValueError("no documents to benchmark")
    if any(n < 1 for n in n_processes) or repeat < 1:
        raise ValueError(f"n_process and repeat must be >= 1, got {list(n_processes)}, {repeat}")
    settings = sorted(set(n_processes))
    chars = sum(len(t) for t in texts)
    pipelines, results = [], []
    try:
        from ..runtime.threads import set_threads
    except ImportError:  # pragma: no cover - a release without thread settings (benchmark versus)
        set_threads = None
    chosen = set_threads(threads) if set_threads is not None else None
    for model in models:
        start = time.perf_counter()
        nlp = load_pipeline(model)
        load = time.perf_counter() - start
        list(nlp.pipe(texts[:2], batch_size=batch_size))  # warm-up: lazy allocations, first-call overheads
        pipelines.append(nlp)
        results.append({"model": str(model), "name": f"{nlp.lang}_{nlp.meta.get('name', '')}",
                        "version": nlp.meta.get("version"), "pipeline": list(nlp.pipe_names),
                        "load_seconds": load, "_runs": {n: [] for n in settings}, "_tok": [], "_comp": []})
    load_before = _load_average()
    with CompetingLoad(competing_load, competing_pin):
        for _ in range(repeat):
            for nlp, result in zip(pipelines, results):
                result["_tok"].append(time_tokenizer(nlp, texts))
                if components:
                    result["_comp"].append(time_components(nlp, texts, batch_size))
                for n in settings:
                    seconds, result["words"] = time_pipe(nlp, texts, n, batch_size)
                    result["_runs"][n].append(seconds)
                    rss = peak_rss_mib()
                    result.setdefault("_rss", {})[n] = (rss["self"], rss["children"])
        load_after = _load_average()
    for result in results:
        n_words = result["words"]
        result["rows"] = add_process_speedups(
            [{"n_process": n, **_summary(result["_runs"][n], n_words, chars),
              "peak_rss_mib_self": result["_rss"][n][0], "peak_rss_mib_children": result["_rss"][n][1]}
             for n in settings])
        result["tokenizer"] = _summary(result.pop("_tok"), n_words, chars)
        comp = {name: statistics.median(run[name] for run in result["_comp"]) for name in result["_comp"][0]} \
            if result["_comp"] else {}
        total = sum(comp.values())
        result["components"] = {name: {"seconds_median": sec, "share": sec / total} for name, sec in comp.items()}
        del result["_runs"], result["_rss"], result["_comp"]
    return {
        "docs": len(texts), "chars": chars, "gold_words": gold_words, "batch_size": batch_size, "repeat": repeat,
        "competing_load": {"processes": competing_load, "pinned_to_cpu": competing_pin}, "threads": chosen,
        "load_average": {"before": load_before, "after": load_after},
        "machine": {"python": platform.python_version(), "processor": platform.machine(), "cpu_count": _cpu_count()},
        "results": results,
    }


def run_seconds(result: Dict[str, Any]) -> Dict[int, float]:
    """``{n_process: seconds}`` of one ``benchmark pipeline`` JSON output (its
    first model's best pass), in this version's layout (``results[0].rows``)
    or that of releases up to 0.3.0 (``rows`` at the top). Raises ValueError
    for anything else."""
    run = result["results"][0] if isinstance(result.get("results"), list) and result["results"] else result
    rows = run.get("rows")
    if not isinstance(rows, list) or not rows:
        raise ValueError("not the output of `benchmark pipeline`: no rows")
    return {int(row["n_process"]): float(row["seconds_best"]) for row in rows}


def _interpreter(python: str) -> str:
    """``python`` usable from another working folder: a bare name as found on
    PATH, a path made absolute (not resolved: a virtual environment's
    interpreter is a link to the base one, and only the link's location
    selects the environment)."""
    import shutil

    if Path(python).name == python:
        return shutil.which(python) or python
    return str(Path(python).absolute())


def _model_arg(model: Union[str, Path]) -> str:
    """A pipeline folder as an absolute path; an installed package's name as it is."""
    return str(Path(model).resolve()) if Path(model).exists() else str(model)


def benchmark_versus(
    sides: Sequence[Tuple[str, Union[str, Path]]],
    *,
    pse_dir: Union[str, Path],
    split: str = "test",
    n_processes: Sequence[int] = (1, 2),
    batch_size: int = 4,
    rounds: int = 5,
    workdir: Union[str, Path],
) -> Dict[str, Any]:
    """Speed of pipelines that need different code, side by side: ``sides``
    is ``[(python, model), ...]``, each ``python`` an interpreter whose
    environment has the spacy-rhetoric to time ``model`` with (an older
    release in its own virtual environment, say). Each of ``rounds`` rounds
    runs ``python -m spacy_rhetoric benchmark pipeline -m model --repeat 1``
    once per side, in turn, each as its own process started in ``workdir``
    (outside any checkout, so that no ``spacy_rhetoric`` folder shadows the
    installed one). Returns every run's JSON and, per side and setting, the
    seconds of each round, their best and median, characters/s at the
    median and the first side's median over this side's (the speed-up).
    Raises ValueError for fewer than two sides or ``rounds < 1``, and
    RuntimeError, naming the side and its last line of stderr, when a run
    fails."""
    import subprocess

    if len(sides) < 2 or rounds < 1:
        raise ValueError(f"benchmark versus needs two sides or more and rounds >= 1, got {len(sides)} and {rounds}")
    workdir = Path(workdir)
    runs: List[List[Dict[str, Any]]] = [[] for _ in sides]
    for r in range(rounds):
        for k, (python, model) in enumerate(sides):
            out = workdir / f"side{k}_round{r}.json"
            cmd = [_interpreter(python), "-m", "spacy_rhetoric", "benchmark", "pipeline", "-m", _model_arg(model),
                   "--pse-dir", str(Path(pse_dir).resolve()), "--split", split, "--batch-size", str(batch_size),
                   "--repeat", "1", "-o", str(out), *[a for n in n_processes for a in ("--n-process", str(n))]]
            done = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True)
            if done.returncode != 0 or not out.exists():
                last = (done.stderr.strip().splitlines() or ["no output"])[-1]
                raise RuntimeError(f"benchmark versus: side {k} ({python}, {model}) failed: {last}")
            runs[k].append(json.loads(out.read_text(encoding="utf8")))
    chars = runs[0][0].get("chars")
    summary = []
    for k, (python, model) in enumerate(sides):
        per_n = {}
        for n in n_processes:
            secs = [run_seconds(run)[n] for run in runs[k]]
            median = statistics.median(secs)
            per_n[str(n)] = {"seconds": secs, "seconds_best": min(secs), "seconds_median": median,
                             "chars_per_second_median": chars / median if chars else None}
        summary.append({"python": str(python), "model": str(model), "by_n_process": per_n})
    for side in summary:
        side["speedup_vs_first_median"] = {
            n: summary[0]["by_n_process"][n]["seconds_median"] / side["by_n_process"][n]["seconds_median"]
            for n in side["by_n_process"]}
    return {"docs": runs[0][0].get("docs"), "chars": chars, "split": split, "rounds": rounds,
            "batch_size": batch_size, "machine": {"python": platform.python_version(), "processor": platform.machine(),
                                                  "cpu_count": _cpu_count()},
            "sides": summary, "runs": runs}


class CompetingLoad:
    """``n`` processes busy on the CPU (``python -c "while True: pass"``)
    for the duration of a ``with`` block: the other work of a shared
    machine, a server or a browser beside the pipeline. Each process is
    started at ``__enter__`` and killed at ``__exit__``; ``pin`` (a CPU
    number) pins them all to that core (``taskset``-like, Linux only),
    None leaves them to the scheduler."""

    def __init__(self, n: int = 1, pin: Optional[int] = None) -> None:
        if n < 0:
            raise ValueError(f"competing load must be >= 0 processes, got {n}")
        self.n, self.pin = n, pin
        self._procs: List[Any] = []

    def __enter__(self) -> "CompetingLoad":
        import subprocess
        import sys

        for _ in range(self.n):
            proc = subprocess.Popen([sys.executable, "-c", "while True: pass"])
            self._procs.append(proc)
            if self.pin is not None and hasattr(os, "sched_setaffinity"):
                os.sched_setaffinity(proc.pid, {self.pin})
        return self

    def __exit__(self, *exc: Any) -> None:
        for proc in self._procs:
            proc.kill()
        for proc in self._procs:
            proc.wait()
        self._procs = []


def _load_average() -> Optional[List[float]]:
    try:
        return [round(x, 2) for x in os.getloadavg()]
    except (AttributeError, OSError):  # pragma: no cover - not on Unix
        return None


def long_text(pse_dir: Union[str, Path], chars: int, splits: Optional[Sequence[str]] = None) -> str:
    """A text of exactly ``chars`` characters made of real PSE-I essays
    (each one's paragraphs joined by ``\\n``, essays joined by ``\\n``),
    taken from ``splits`` in order and repeated from the first one if the
    corpus is shorter; the last essay is cut. Raises ValueError when the
    splits hold no text."""
    parts: List[str] = []
    total = 0
    for split in splits or SPLIT_ORDER:
        for text in pse_test_texts(pse_dir, split)["texts"]:
            parts.append(text)
            total += len(text) + 1
            if total >= chars:
                return "\n".join(parts)[:chars]
    if not parts:
        raise ValueError(f"no PSE-I essays in {pse_dir}")
    whole = "\n".join(parts)
    return ((whole + "\n") * (chars // (len(whole) + 1) + 1))[:chars]


def benchmark_memory(
    model: Union[str, Path],
    pse_dir: Union[str, Path],
    *,
    sizes: Sequence[int] = (100_000, 500_000, 1_000_000),
    n_process: int = 1,
    max_length: Optional[int] = None,
    workdir: Union[str, Path],
    extra_args: Sequence[str] = (),
) -> Dict[str, Any]:
    """Peak memory of ``rhetoric analyze`` on one long document per size in
    ``sizes`` (characters; :func:`long_text`, real PSE-I essays joined):
    each size is written to a UTF-8 file in ``workdir`` and analysed by
    ``python -m spacy_rhetoric analyze FILE -m MODEL -o OUT --no-progress
    [--n-process N] [--max-length L] [extra_args]`` in its own process.

    Peak RSS is the ``ru_maxrss`` that ``os.wait4`` reports for that
    process: the largest resident set of the process and of each of its
    worker processes (MiB), measured by the kernel, not sampled. Also per
    size: wall seconds, exit code, the record's sentence count (or its
    error type) and the last line of stderr. Raises ValueError for no
    sizes; a run that fails is reported (``returncode``), not raised.
    """
    import subprocess
    import sys

    if not sizes:
        raise ValueError("no sizes to measure")
    workdir = Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    rows = []
    load_before = _load_average()
    for chars in sizes:
        text = long_text(pse_dir, chars)
        src, out = workdir / f"long_{chars}.txt", workdir / f"long_{chars}.jsonl"
        src.write_text(text, encoding="utf8")
        cmd = [sys.executable, "-m", "spacy_rhetoric", "analyze", str(src), "-m", _model_arg(model), "-o", str(out),
               "--no-progress", "--n-process", str(n_process), *(["--max-length", str(max_length)] if max_length else []),
               *extra_args]
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=workdir)
        assert proc.stderr is not None
        stderr = proc.stderr.read().decode("utf8", "replace")
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        seconds = time.perf_counter() - start
        record: Dict[str, Any] = {}
        if out.exists() and out.stat().st_size:
            with out.open(encoding="utf8") as fh:
                record = json.loads(fh.readline())
        rows.append({"chars": chars, "returncode": proc.returncode, "seconds": seconds,
                     "peak_rss_mib": usage.ru_maxrss / 1024,
                     "sentences": len(record.get("sentences", [])) if "error" not in record else None,
                     "error": (record.get("error") or {}).get("type"),
                     "stderr_last": (stderr.strip().splitlines() or [""])[-1]})
        src.unlink()
        out.unlink(missing_ok=True)
    return {"model": str(model), "n_process": n_process, "max_length": max_length, "extra_args": list(extra_args),
            "load_average_before": load_before, "load_average_after": _load_average(), "machine": {"python": platform.python_version(),
                                                    "processor": platform.machine(), "cpu_count": _cpu_count(),
                                                    "memory_gib": _memory_gib()},
            "rows": rows}


def _memory_gib() -> Optional[float]:
    try:
        return round(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30, 1)
    except (AttributeError, ValueError, OSError):  # pragma: no cover - not on Unix
        return None


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


#: PSE-I splits in the order ``long_essays`` takes essays from.
SPLIT_ORDER = ("test", "dev", "optimization", "train")


def long_essays(pse_dir: Union[str, Path], chars: int = 1000, n: int = 20,
                splits: Sequence[str] = SPLIT_ORDER) -> Dict[str, List[str]]:
    """``{"ids", "texts"}``: the first ``n`` PSE-I essays of at least
    ``chars`` characters (paragraphs joined by ``\\n``), each cut to its
    first ``chars`` characters, taken from ``splits`` in order (the test
    split has only 5 such essays; a speed benchmark reads no labels, so the
    other splits may serve). Raises ValueError when fewer than ``n`` exist.
    """
    ids: List[str] = []
    texts: List[str] = []
    for split in splits:
        data = pse_test_texts(pse_dir, split)
        for doc_id, text in zip(data["ids"], data["texts"]):
            if len(text) >= chars and len(texts) < n:
                ids.append(f"{split}/{doc_id}")
                texts.append(text[:chars])
    if len(texts) < n:
        raise ValueError(f"only {len(texts)} PSE-I essays have {chars} characters or more, {n} asked for")
    return {"ids": ids, "texts": texts}


def _percentile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile (0-1) by linear interpolation (numpy's default)."""
    import numpy

    return float(numpy.quantile(numpy.asarray(values, dtype=float), q))


def benchmark_latency(models: Sequence[Union[str, Path]], texts: Sequence[str], *, repeat: int = 3) -> Dict[str, Any]:
    """Seconds per ``POST /analyze`` request of one text, as the page and
    the service answer it (:func:`spacy_rhetoric.serve.app.create_app`,
    called in-process through FastAPI's TestClient: validation, analysis,
    record and JSON included, no network). Each model is loaded, warmed up
    on one request, then every text is sent ``repeat`` times, one request
    at a time. Returns per model the load time and the latency p50, p95,
    mean and max in seconds, and the peak RSS so far (MiB, this process:
    all models loaded so far). Raises ValueError for no texts or
    ``repeat < 1``, RuntimeError (status and body) for a request not
    answered with 200.
    """
    import warnings

    from ..serve.app import create_app

    with warnings.catch_warnings():
        # starlette asks for httpx2 in place of httpx; both answer the same here
        warnings.filterwarnings("ignore", message=".*httpx.*")
        from fastapi.testclient import TestClient

    if not texts or repeat < 1:
        raise ValueError(f"need texts and repeat >= 1, got {len(texts)} texts, repeat {repeat}")
    results = []
    for model in models:
        start = time.perf_counter()
        app = create_app(str(model), max_chars=max(len(t) for t in texts), rate_limit=0)  # one client, every request timed
        load = time.perf_counter() - start
        seconds: List[float] = []
        with TestClient(app) as client:
            for i, text in enumerate([texts[0], *texts * repeat]):
                begin = time.perf_counter()
                answer = client.post("/analyze", json={"text": text})
                elapsed = time.perf_counter() - begin
                if answer.status_code != 200:
                    raise RuntimeError(f"/analyze answered {answer.status_code}: {answer.text[:300]}")
                if i:  # the first request is the warm-up
                    seconds.append(elapsed)
        info = app.state.analyzer.info
        results.append({"model": str(model), "name": info["name"], "version": info["version"], "load_seconds": load,
                        "requests": len(seconds), "p50_seconds": _percentile(seconds, 0.5),
                        "p95_seconds": _percentile(seconds, 0.95), "mean_seconds": statistics.fmean(seconds),
                        "max_seconds": max(seconds), "peak_rss_mib": peak_rss_mib()["self"]})
    return {"texts": len(texts), "chars_per_text": [len(t) for t in texts], "repeat": repeat,
            "machine": {"python": platform.python_version(), "processor": platform.machine(), "cpu_count": _cpu_count()},
            "results": results}


def _rates(n_words: int, seconds: float, cpu: float) -> Dict[str, Optional[float]]:
    return {
        "seconds": seconds,
        "wps": n_words / seconds if seconds else None,
        "cpu_seconds": cpu,
        "cpu_wps": n_words / cpu if cpu else None,
    }


def benchmark_components(
    model: Union[str, Path], data: Path, *, limit: int = 0, batch_size: int = 256, output: Optional[Path] = None
) -> Dict[str, Any]:
    """Words per second of each pipeline component on one CPU core.

    Docs with gold words and sentences are passed through the components in
    order; each component is timed on its own (``pipe`` over all docs after
    one warm-up batch). ``wps`` is words per wall-clock second, ``cpu_wps``
    words per second of this process's CPU time (less sensitive to other
    load on a shared machine). Returns ``{"components": {name: {"seconds",
    "wps", "cpu_seconds", "cpu_wps"}}, "pipeline": {...}, "n_words",
    "n_docs", "threads": 1}``.
    """
    import torch
    from threadpoolctl import threadpool_limits

    from .util import apply_component, read_references

    torch.set_num_threads(1)
    nlp = load_pipeline(model)
    refs = read_references(Path(data), nlp, limit)
    docs = [gold_word_example(nlp, ref, True).predicted for ref in refs]
    n_words = sum(len(d) for d in docs)
    result: Dict[str, Any] = {"model": str(model), "data": str(data), "n_docs": len(docs)}
    result.update({"n_words": n_words, "threads": 1, "components": {}})
    total = total_cpu = 0.0
    with threadpool_limits(limits=1):
        for name, proc in nlp.pipeline:
            apply_component(proc, [d.copy() for d in docs[:batch_size]], batch_size)  # warm-up, not timed
            start, cpu_start = time.perf_counter(), time.process_time()
            docs = apply_component(proc, docs, batch_size)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu_start
            total += seconds
            total_cpu += cpu
            result["components"][name] = _rates(n_words, seconds, cpu)
    result["pipeline"] = _rates(n_words, total, total_cpu)
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2), encoding="utf8")
    return result


def benchmark_generation(generator: Any, records: Sequence[Any], *, batch_size: int = 8) -> Dict[str, Any]:
    """Generation speed of a ``RhetoricGenerator`` on RG records (one
    process, the backend's own threads): ``tokens_per_second`` counts the
    generated answer tokens (``Completion.n_tokens``, stop token included)
    per wall-clock second of the whole call, prompt processing included;
    also ``records_per_second``, ``seconds``, ``tokens``, ``failures``.
    One untimed warm-up batch first. Raises ValueError without records."""
    from ..llm.rg_batch import rg_request

    if not records:
        raise ValueError("no RG records to generate for")
    task = generator.task
    cfg = generator.cfg
    decoding = {"n": cfg["n_candidates"], "temperature": cfg["temperature"], "max_new_tokens": cfg["max_new_tokens"]}

    def run(batch):
        requests = [rg_request(generator, r) for r in batch]
        return task.call(generator.backend, task.generate_prompts(requests), **decoding)

    run(records[:batch_size])
    tokens = failures = 0
    start = time.perf_counter()
    for i in range(0, len(records), batch_size):
        for comps in run(records[i : i + batch_size]):
            tokens += sum(c.n_tokens or 0 for c in comps)
            failures += sum(not c.ok for c in comps)
    seconds = time.perf_counter() - start
    return {"records": len(records), "tokens": tokens, "seconds": seconds, "failures": failures,
            "tokens_per_second": tokens / seconds, "records_per_second": len(records) / seconds,
            "batch_size": batch_size, "machine": {"cpu_count": _cpu_count()}}
