"""Speed and memory of the whole pipeline on the PSE-I test essays.

One document per essay (its paragraphs joined by ``\\n``, as ``analyze``
reads an XML essay). For each ``n_process`` setting the documents go through
``nlp.pipe`` once untimed (warm-up, 1 process) and then ``repeat`` timed
passes; the timed wall clock includes starting the worker processes, as a
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
import platform
import resource
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Union

from spacy.language import Language

from .pipeline import load_pipeline
from .readers import gold_word_example


def pse_test_texts(pse_dir: Union[str, Path], split: str = "test") -> Dict[str, Any]:
    """``{"ids": [...], "texts": [...], "gold_words": n}`` for the essays of
    one PSE-I split. Raises CorpusFormatError for malformed files."""
    import spacy

    from .corpora.pse_i import iter_split, read_splits

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


def time_pipe(nlp: Language, texts: Sequence[str], n_process: int, batch_size: int, repeat: int) -> Dict[str, float]:
    """Timed passes of ``nlp.pipe`` over ``texts``; returns seconds (best
    and mean of ``repeat``), words/second and docs/second (from the best).
    Every process runs torch on one thread
    (:func:`spacy_rhetoric.records.single_torch_thread`), so 1 and N
    processes compare like for like."""
    from .records import single_torch_thread

    words, runs = 0, []
    for _ in range(repeat):
        start = time.perf_counter()
        with single_torch_thread():
            docs = nlp.pipe(texts, n_process=n_process, batch_size=batch_size)
            words = sum(sum(1 for t in doc if not t.is_space) for doc in docs)
        runs.append(time.perf_counter() - start)
    best = min(runs)
    return {
        "n_process": n_process,
        "seconds_best": best,
        "seconds_mean": sum(runs) / len(runs),
        "words": words,
        "words_per_second": words / best,
        "docs_per_second": len(texts) / best,
        "chars_per_second": sum(len(t) for t in texts) / best,
    }


def benchmark_pipeline(
    nlp: Language,
    texts: Sequence[str],
    *,
    n_processes: Sequence[int] = (1, 2),
    batch_size: int = 4,
    repeat: int = 1,
    gold_words: Optional[int] = None,
) -> Dict[str, Any]:
    """Run :func:`time_pipe` for each setting (ascending, so the peak RSS
    read after each row belongs to the settings run so far).

    Raises ValueError for an empty ``texts`` or ``n_process < 1``.
    """
    if not texts:
        raise ValueError("no documents to benchmark")
    if any(n < 1 for n in n_processes):
        raise ValueError(f"n_process must be >= 1, got {list(n_processes)}")
    list(nlp.pipe(texts[:2], batch_size=batch_size))  # warm-up: lazy allocations, first-call overheads
    rows: List[Dict[str, Any]] = []
    for n in sorted(set(n_processes)):
        row = time_pipe(nlp, texts, n, batch_size, repeat)
        rss = peak_rss_mib()
        row["peak_rss_mib_self"], row["peak_rss_mib_children"] = rss["self"], rss["children"]
        rows.append(row)
    return {
        "model": {"name": f"{nlp.lang}_{nlp.meta.get('name', '')}", "version": nlp.meta.get("version"),
                  "pipeline": list(nlp.pipe_names)},
        "docs": len(texts),
        "chars": sum(len(t) for t in texts),
        "gold_words": gold_words,
        "batch_size": batch_size,
        "repeat": repeat,
        "machine": {"python": platform.python_version(), "processor": platform.machine(),
                    "cpu_count": _cpu_count()},
        "rows": rows,
    }


def _cpu_count() -> int:
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1


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

    from .evaluation.rhetoric import apply_component, read_references

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
    from .llm.rg_batch import rg_request

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
