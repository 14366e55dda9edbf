"""``rhetoric benchmark ...``: speed of the clause segmenter, the pipelines, the linker and its scorer, generation and verified suggestions."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import _fail_on, _print_table, _write_json, benchmark_app
from .generate import (
    ADAPTER_PATH,
    ANALYSER,
    KENLM,
    K_CONTEXT,
    LEAD,
    LOCAL_MODEL,
    MAX_NEW_TOKENS,
    NS,
    N_SHOTS,
    PER_DEVICE,
    REPETITION_PENALTY,
    SAMPLE_TEMPERATURE,
    SAMPLING_SEED,
    TOP_P,
    _counts,
    _suggestion_generator,
)

# options shared by the pipeline commands
PSE_DIR = typer.Option(Path("../shared/data/pse-i"), "--pse-dir", exists=True, file_okay=False, help="PSE-I folder (splits.json, xml/)")
SPLIT = typer.Option("test", "--split", help="PSE-I split to run on (42 test essays)")
N_PROCESS = typer.Option([1, 2], "--n-process", help="Settings to time (repeatable)")
BATCH_SIZE = typer.Option(4, "--batch-size", min=1)


@benchmark_app.command("clauses")
def benchmark_clauses_cmd(
    data: Path = typer.Argument(..., exists=True, help="DocBin with gold sentences (e.g. corpus/pse-i/test.spacy)"),
    repeat: int = typer.Option(5, help="Timed passes over the data"),
    sentence_punct: Optional[str] = typer.Option(None, help="Override the sentence punctuation set"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the results as JSON here"),
) -> None:
    """Clause segmenter speed (characters/second, one process) and its sentence
    boundary P/R/F against the gold sentences of a DocBin."""
    import time

    import spacy
    import srsly
    from spacy.training import Example

    from ..corpora.docbin import read_docbin

    nlp = spacy.blank("zh")
    config = {"sentence_punct": sentence_punct} if sentence_punct else {}
    segmenter = nlp.add_pipe("clause_segmenter", config=config)
    gold = list(read_docbin(data, nlp.vocab))
    texts = [d.text for d in gold]
    docs = [nlp.make_doc(t) for t in texts]  # character tokens, as without a word segmenter
    start = time.perf_counter()
    for _ in range(repeat):
        for doc in docs:
            segmenter(doc)
    seconds = time.perf_counter() - start
    n_chars = sum(len(t) for t in texts) * repeat
    scores = segmenter.score([Example(p, g) for p, g in zip(docs, gold)])
    result = {"docs": len(docs), "chars_per_second": n_chars / seconds, "seconds": seconds, "repeat": repeat,
              **{k: v for k, v in scores.items() if v is not None}}
    _print_table(f"clause_segmenter on {data}", {"result": result})
    if output:
        srsly.write_json(output, result)


@benchmark_app.command("pipeline")
def benchmark_pipeline_cmd(
    model: List[str] = typer.Option(["zh_rhetoric"], "--model", "-m", help="Installed pipeline name or pipeline folder (repeatable: timed side by side, in turn)"),
    pse_dir: Path = PSE_DIR,
    split: str = SPLIT,
    n_process: List[int] = N_PROCESS,
    batch_size: int = BATCH_SIZE,
    repeat: int = typer.Option(5, "--repeat", min=1, help="Rounds; each round times every model once per setting, in turn (best and median are reported)"),
    limit: int = typer.Option(0, "--limit", min=0, help="Only the first N essays of the split (0: all)"),
    competing_load: int = typer.Option(0, "--competing-load", min=0, help="Busy processes (python -c 'while True: pass') started for the timed rounds and stopped after them"),
    competing_pin: Optional[int] = typer.Option(None, "--competing-pin", min=0, help="Pin the busy processes to this CPU (default: not pinned)"),
    components: bool = typer.Option(True, "--components/--no-components", help="Also time each component on its own"),
    threads: Optional[str] = typer.Option(None, "--threads", help="Threads per process: a number or auto (default: as analyze, RHETORIC_THREADS or auto)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the results as JSON here"),
) -> None:
    """Whole-pipeline speed on PSE-I essays: words/s and characters/s with 1
    and N processes (best and median), the tokenizer alone (the limit),
    each component's share, peak RSS and load time; several models are
    timed in turn and compared with the first. With --competing-load, the
    timed rounds share the machine with that many busy processes."""
    import srsly
    from wasabi import msg

    from ..evaluation.benchmark import benchmark_pipelines, pse_test_texts

    with _fail_on(ValueError, OSError):
        data = pse_test_texts(pse_dir, split)
        texts = data["texts"][:limit] if limit else data["texts"]
        gold_words = data["gold_words"] if not limit else None
        result = benchmark_pipelines(model, texts, n_processes=n_process, batch_size=batch_size,
                                     repeat=repeat, gold_words=gold_words, competing_load=competing_load,
                                     competing_pin=competing_pin, components=components, threads=threads)
    runs = result["results"]
    rows = []
    for run in runs:
        for row, first in zip(run["rows"], runs[0]["rows"]):
            rows.append((run["model"], row["n_process"], f"{row['seconds_best']:.2f} / {row['seconds_median']:.2f}",
                         f"{row['words_per_second_best']:.0f} / {row['words_per_second_median']:.0f}",
                         f"{row['chars_per_second_best']:.0f} / {row['chars_per_second_median']:.0f}",
                         f"{first['seconds_best'] / row['seconds_best']:.2f}x",
                         f"{row['speedup_vs_fewest_processes_best']:.2f}x / {row['speedup_vs_fewest_processes_median']:.2f}x",
                         f"{row['peak_rss_mib_self']:.0f} / {row['peak_rss_mib_children']:.0f}"))
    msg.table(rows, header=("model", "n_process", "seconds best / median", "words/s", "chars/s", "speed vs first",
                            "vs fewest processes best / median", "peak RSS MiB self / child"), divider=True,
              title=f"{result['docs']} PSE-I {split} essays ({result['chars']} chars, {gold_words or '-'} gold words), {repeat} rounds, "
                    f"threads {result.get('threads')}, {competing_load} competing busy process(es), load average {result['load_average']['before']} -> "
                    f"{result['load_average']['after']}")
    limits = [(run["model"], f"{run['load_seconds']:.1f}", f"{run['tokenizer']['chars_per_second_best']:.0f}",
               "  ".join(f"{name} {c['share']:.0%}" for name, c in run["components"].items()) or "-") for run in runs]
    msg.table(limits, header=("model", "load s", "tokenizer alone chars/s (best)", "share of one-process time (median)"),
              divider=True)
    if output:
        srsly.write_json(output, result)
        msg.good(f"wrote {output}")


@benchmark_app.command("memory")
def benchmark_memory_cmd(
    model: str = typer.Option("zh_rhetoric", "--model", "-m", help="Installed pipeline name or pipeline folder"),
    pse_dir: Path = PSE_DIR,
    chars: List[int] = typer.Option([100_000, 500_000, 1_000_000], "--chars", min=1, help="Characters of the long document (repeatable)"),
    n_process: int = typer.Option(1, "--n-process", min=1, help="--n-process of the analyze runs"),
    max_length: Optional[int] = typer.Option(None, "--max-length", min=1, help="--max-length of the analyze runs"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the results as JSON here"),
) -> None:
    """Peak RSS of `rhetoric analyze` on one long document (real PSE-I essays
    joined) per size: each run in its own process, its peak resident set
    and its workers' as the kernel reports them (wait4), in MiB."""
    import tempfile

    import srsly
    from wasabi import msg

    from ..evaluation.benchmark import benchmark_memory

    with tempfile.TemporaryDirectory() as workdir:
        with _fail_on(ValueError, OSError):
            result = benchmark_memory(model, pse_dir, sizes=chars, n_process=n_process, max_length=max_length,
                                      workdir=workdir)
    rows = [(r["chars"], f"{r['peak_rss_mib']:.0f}", f"{r['seconds']:.1f}", r["returncode"],
             r["sentences"] if r["error"] is None else r["error"]) for r in result["rows"]]
    msg.table(rows, header=("characters", "peak RSS MiB", "seconds", "exit code", "sentences / error"), divider=True,
              title=f"rhetoric analyze -m {model} --n-process {n_process}, one long document, load average "
                    f"{result['load_average_before']} -> {result['load_average_after']}")
    if output:
        srsly.write_json(output, result)
        msg.good(f"wrote {output}")


@benchmark_app.command("versus")
def benchmark_versus_cmd(
    side: List[str] = typer.Option(..., "--side", help="PYTHON=MODEL: an interpreter whose environment has the spacy-rhetoric to time MODEL with (repeatable, two or more; the first is the reference)"),
    pse_dir: Path = PSE_DIR,
    split: str = SPLIT,
    n_process: List[int] = N_PROCESS,
    batch_size: int = BATCH_SIZE,
    rounds: int = typer.Option(5, "--rounds", min=1, help="Rounds; each runs every side once, in turn"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the results as JSON here"),
) -> None:
    """Pipelines that need different code (an older release in its own
    environment), timed alternately: every round runs `benchmark pipeline
    --repeat 1` once per side, each in its own process; best and median
    seconds per side and the speed-up over the first side."""
    import tempfile

    import srsly
    from wasabi import msg

    from ..evaluation.benchmark import benchmark_versus

    sides = []
    for item in side:
        python, sep, model = item.partition("=")
        if not sep or not python or not model:
            msg.fail(f"--side takes PYTHON=MODEL, got {item!r}", exits=1)
        sides.append((python, model))
    with tempfile.TemporaryDirectory() as workdir:
        with _fail_on(ValueError, RuntimeError, OSError):
            result = benchmark_versus(sides, pse_dir=pse_dir, split=split, n_processes=n_process,
                                      batch_size=batch_size, rounds=rounds, workdir=workdir)
    rows = [(f"{s['python']} {s['model']}", n, f"{v['seconds_best']:.2f} / {v['seconds_median']:.2f}",
             f"{v['chars_per_second_median']:.0f}" if v["chars_per_second_median"] else "-",
             f"{s['speedup_vs_first_median'][n]:.2f}x")
            for s in result["sides"] for n, v in s["by_n_process"].items()]
    msg.table(rows, header=("side", "n_process", "seconds best / median", "chars/s (median)", "speed vs first"),
              divider=True, title=f"{result['docs']} PSE-I {split} essays, {rounds} alternating rounds")
    if output:
        srsly.write_json(output, result)
        msg.good(f"wrote {output}")


@benchmark_app.command("latency")
def benchmark_latency_cmd(
    model: List[str] = typer.Option(["zh_rhetoric"], "--model", "-m", help="Installed pipeline name or pipeline folder (repeatable)"),
    pse_dir: Path = PSE_DIR,
    chars: int = typer.Option(1000, "--chars", min=1, help="Characters per request: essays at least this long, cut to it"),
    n: int = typer.Option(20, "--n", min=1, help="Essays (test split first, then dev, optimization, train)"),
    repeat: int = typer.Option(3, "--repeat", min=1, help="Times each essay is sent"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the results as JSON here"),
) -> None:
    """Latency of the page's and the service's POST /analyze for one essay of
    --chars characters, one request at a time (p50, p95, mean, max)."""
    import srsly
    from wasabi import msg

    from ..evaluation.benchmark import benchmark_latency, long_essays

    with _fail_on(ValueError):
        essays = long_essays(pse_dir, chars, n)
    with _fail_on(OSError):
        result = benchmark_latency(model, essays["texts"], repeat=repeat)
    result["ids"] = essays["ids"]
    rows = [(r["model"], r["version"], f"{r['load_seconds']:.1f}", r["requests"], f"{r['p50_seconds']:.3f}",
             f"{r['p95_seconds']:.3f}", f"{r['mean_seconds']:.3f}", f"{r['max_seconds']:.3f}", f"{r['peak_rss_mib']:.0f}")
            for r in result["results"]]
    msg.table(rows, header=("model", "version", "load s", "requests", "p50 s", "p95 s", "mean s", "max s", "peak RSS MiB"),
              divider=True, title=f"POST /analyze, one essay of {chars} characters per request, {n} essays x {repeat}")
    if output:
        srsly.write_json(output, result)
        msg.good(f"wrote {output}")


@benchmark_app.command("parallelism")
def benchmark_parallelism_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline with a parallelism_linker"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold DocBin, e.g. corpus/pse-i/test.spacy"),
    repeats: int = typer.Option(3, "--repeats", help="Timed passes (best is reported)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the numbers as JSON"),
) -> None:
    """Linker words/second on one CPU core and peak memory (run under `taskset -c 0` to pin one core)."""
    import srsly
    from wasabi import msg

    from ..evaluation.parallelism import benchmark_linker

    result = benchmark_linker(model, data, repeats=repeats)
    msg.table([(k, f"{v:.2f}" if isinstance(v, float) else v) for k, v in result.items()], divider=True,
              title="parallelism linker, one CPU thread")
    if output:
        srsly.write_json(output, result)


@benchmark_app.command("parallelism-scorer")
def benchmark_parallelism_scorer_cmd(
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold DocBin, e.g. corpus/pse-i/test.spacy"),
    model: Optional[Path] = typer.Option(None, "--model", "-m", exists=True, file_okay=False, help="Also score this pipeline's predictions"),
    repeats: int = typer.Option(5, "--repeats", help="Timed passes (best is reported)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the numbers as JSON"),
) -> None:
    """Time EPM/MPBM/MBAWO/MWO with spacy_rhetoric's scorer vs pyrallelism on the same inputs."""
    import srsly
    from wasabi import msg

    from ..evaluation.parallelism import benchmark_scorer

    result = benchmark_scorer(data, model, repeats=repeats)
    msg.table([(k, v["documents"], f"{v['ours_seconds']:.4f}", f"{v['pyrallelism_seconds']:.4f}", f"{v['speedup']:.2f}x")
               for k, v in result.items()], header=("input", "docs", "ours s", "pyrallelism s", "speed-up"), divider=True,
              title="scorer vs pyrallelism (all four metrics; scores equal to 1e-9)")
    if output:
        srsly.write_json(output, result)


@benchmark_app.command("rhetoric")
def benchmark_rhetoric_cmd(
    model: str = typer.Argument(..., help="Pipeline folder/name, or 'rules' for the rule baseline"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="DocBin with gold words, e.g. corpus/simile/test.spacy"),
    limit: int = typer.Option(0, help="Use at most this many docs (0 = all)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the timings as JSON here"),
) -> None:
    """Words/second of each pipeline component on one CPU core (gold words and sentences)."""
    from wasabi import msg

    from ..evaluation.benchmark import benchmark_components

    result = benchmark_components(model, data, limit=limit, output=output)
    stats = {**result["components"], "pipeline": result["pipeline"]}
    rows = [(name, f"{v['seconds']:.2f}", f"{v['wps']:.0f}", f"{v['cpu_seconds']:.2f}", f"{v['cpu_wps']:.0f}") for name, v in stats.items()]
    msg.table(rows, header=("component", "wall s", "words/s", "CPU s", "words/CPU s"), divider=True,
              title=f"{result['n_words']} words, {result['n_docs']} docs, 1 thread")


@benchmark_app.command("generation")
def benchmark_generation_cmd(
    records: Path = typer.Argument(..., exists=True, dir_okay=False, help="RG records (rg-records JSONL)"),
    model_path: str = typer.Option(..., "--model-path", help="Local transformers model"),
    adapter_path: Optional[str] = typer.Option(None, "--adapter-path", help="peft LoRA adapter"),
    prompt_style: str = typer.Option("completion", "--prompt-style", help="instruction or completion"),
    shots: Optional[Path] = typer.Option(None, "--shots", exists=True, dir_okay=False, help="RG records for the completion shots"),
    n_shots: int = typer.Option(4, "--n-shots"),
    sample: int = typer.Option(32, "--sample", help="Seeded random sample of this many records"),
    batch_size: int = typer.Option(8, "--batch-size"),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens"),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when present), cpu, cuda:0, ..."),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the result as JSON here"),
) -> None:
    """Generated tokens per second of a local model on RG records (sampling, T 0.8, top-p 0.9)."""
    import json

    from ..evaluation.benchmark import benchmark_generation
    from ..components.rhetoric_generator import RhetoricGenerator
    from ..llm.records import read_jsonl
    from ..llm.rg_batch import sample_records
    from ..llm.sampling import Sampling
    from ..llm.tasks import make_rhetoric_generation_task
    from ..llm.transformers_backend import TransformersBackend

    backend = TransformersBackend(model_path, adapter_path, device=device, batch_size=batch_size, seed=0,
                                  top_p=0.9, repetition_penalty=1.1)
    task = make_rhetoric_generation_task(prompt_style=prompt_style, shots_path=str(shots) if shots else None, n_shots=n_shots)
    generator = RhetoricGenerator(None, backend, task=task,
                                  sampling=Sampling(n_candidates=1, temperature=0.8, max_new_tokens=max_new_tokens))
    picked = [r for _, r in sample_records(list(read_jsonl(records)), sample, 0)]
    result = benchmark_generation(generator, picked, batch_size=batch_size)
    result.update({"model_path": model_path, "adapter_path": adapter_path, "prompt_style": prompt_style, "device": device})
    typer.echo(json.dumps(result, ensure_ascii=False, indent=1))
    if output:
        _write_json(output, result)


@benchmark_app.command("suggestions")
def time_suggestions_cmd(
    requests: List[Path] = typer.Argument(..., exists=True, dir_okay=False, help="Held-out RG records, as for evaluate-suggestions"),
    output: Path = typer.Option(..., "--output", "-o", help="JSON: latency per request at each N (p50, p95, mean, s)"),
    model_path: str = LOCAL_MODEL,
    adapter_path: Optional[str] = ADAPTER_PATH,
    analyser: str = ANALYSER,
    kenlm: Optional[Path] = KENLM,
    ns: str = NS,
    per_device: int = PER_DEVICE,
    sample_seed: int = typer.Option(0, "--sample-seed"),
    n_shots: int = N_SHOTS,
    k: int = K_CONTEXT,
    temperature: float = SAMPLE_TEMPERATURE,
    top_p: float = TOP_P,
    repetition_penalty: float = REPETITION_PENALTY,
    max_new_tokens: int = MAX_NEW_TOKENS,
    seed: int = SAMPLING_SEED,
    latency_sample: int = typer.Option(16, "--latency-sample", help="Requests timed one at a time at each N"),
    lead: str = LEAD,
) -> None:
    """Latency of verified suggestions, one request at a time, as /suggest serves them: the same requests and
    generator as evaluate-suggestions' latency, verified by ANALYSER (e.g. the transformer pipeline)."""
    import json
    import platform

    from ..evaluation.suggestions import held_out_requests, latency_requests, time_requests

    counts = _counts(ns)
    picked = held_out_requests(requests, per_device, sample_seed)
    gen = _suggestion_generator(model_path, adapter_path, analyser, kenlm, max(counts), n_shots, k, temperature, top_p,
                                repetition_penalty, max_new_tokens, seed, lead)
    gen.backend.batch_size = max(counts)
    timed = latency_requests(picked, latency_sample)
    result = {"model_path": model_path, "adapter_path": adapter_path, "analyser": analyser, "lead": lead,
              "n_shots": n_shots, "k": k, "requests": [str(p) for p in requests],
              "devices": {d: sum(r.rhetoric == d for r in timed) for d in dict.fromkeys(r.rhetoric for r in timed)},
              "cpu": platform.processor() or platform.machine(), "latency": time_requests(gen, timed, counts)}
    _write_json(output, result)
    typer.echo(json.dumps(result, ensure_ascii=False, indent=1))
