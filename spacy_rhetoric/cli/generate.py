"""Generation: ``generate``, ``generate-records`` (for evaluate-generation) and LoRA ``finetune``."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ..errors import Errors
from ._util import app


# Backend options shared by `generate` and `generate-records` (Typer
# options are plain default values, so one object serves both commands).
MODEL_PATH = typer.Option(None, "--model-path", help="Local transformers model (Transformers.v1)")
ADAPTER_PATH = typer.Option(None, "--adapter-path", help="peft LoRA adapter for --model-path")
BASE_URL = typer.Option(None, "--base-url", help="OpenAI-compatible server (OpenAICompatible.v1)")
SERVER_MODEL = typer.Option("default", "--server-model", help="Model name on the --base-url server")
API_KEY_ENV = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Env var holding the API key")
TIMEOUT = typer.Option(60.0, "--timeout", help="Seconds per HTTP request")
TOP_P = typer.Option(0.9, "--top-p", help="Nucleus sampling mass (--model-path)")
REPETITION_PENALTY = typer.Option(1.1, "--repetition-penalty", help="Penalty on repeated tokens (--model-path; 1 = off)")
# ... and by the two batch commands, `generate-records` and `evaluate-suggestions`
N_SHOTS = typer.Option(4, "--n-shots", help="Shots per completion prompt (0 for a LoRA model trained without)")
SAMPLE_TEMPERATURE = typer.Option(0.8, "--temperature")
MAX_NEW_TOKENS = typer.Option(64, "--max-new-tokens")
K_CONTEXT = typer.Option(3, "--k", help="Preceding sentences used as context")
SAMPLING_SEED = typer.Option(0, "--seed", help="Sampling seed")
LEAD = typer.Option("none", "--lead", help="Begin answers for the model (completion prompts): none, or device (a metaphor begins with its tenor and 像/仿佛/是/如同 in turn; a personification with its object and 悄悄地/向我们/微笑着/温柔地 in turn; a parallelism's first three clauses with its marker)")
LOCAL_MODEL = typer.Option(..., "--model-path", help="Local transformers model")
ANALYSER = typer.Option("pipelines/zh_rhetoric", "--analyser", help="Pipeline that verifies (name or folder)")
KENLM = typer.Option(None, "--kenlm", exists=True, dir_okay=False, help="KenLM model: fluency term of the ranking (and evaluate-suggestions' fluency report)")
NS = typer.Option("1,4,8", "--ns", help="Candidates per request to measure at (comma-separated N)")
PER_DEVICE = typer.Option(50, "--per-device", help="Requests per device")


@app.command("generate")
def generate_cmd(
    rhetoric: str = typer.Option(..., "--rhetoric", "-r", help="metaphor, personification, hyperbole or parallelism"),
    obj: str = typer.Option(..., "--object", help="Tenor / personification object / hyperbole object / parallelism marker"),
    context: str = typer.Option("", "--context", "-c", help="Preceding text (its last k sentences are used)"),
    context_file: Optional[Path] = typer.Option(None, "--context-file", exists=True, dir_okay=False, help="Read the preceding text from this file"),
    n: int = typer.Option(3, "--n", help="Candidates to generate"),
    model_path: Optional[str] = MODEL_PATH,
    adapter_path: Optional[str] = ADAPTER_PATH,
    base_url: Optional[str] = BASE_URL,
    model: str = SERVER_MODEL,
    api_key_env: Optional[str] = API_KEY_ENV,
    timeout: float = TIMEOUT,
    temperature: float = typer.Option(0.7, "--temperature", help="0 = greedy / deterministic"),
    max_new_tokens: int = typer.Option(96, "--max-new-tokens"),
    k: int = typer.Option(3, "--k", help="Preceding sentences used as context"),
    language: str = typer.Option("zh", "--language", help="Prompt language: zh (CERD) or en"),
    prompt_style: str = typer.Option("auto", "--prompt-style", help="auto (a local model without a chat template takes completion prompts, any other model instruction), instruction (chat model, CERD prompt) or completion (base LM, few-shot)"),
    shots: Optional[Path] = typer.Option(None, "--shots", exists=True, dir_okay=False, help="RG records (rg-records JSONL) to draw completion shots from (default: the built-in shots)"),
    n_shots: int = typer.Option(4, "--n-shots", help="Shots per completion prompt"),
    top_p: float = TOP_P,
    repetition_penalty: float = REPETITION_PENALTY,
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for sampling (--model-path)"),
    analyser: str = typer.Option("zh_rhetoric", "--analyser", help="Pipeline (package or folder) that verifies each candidate in its context"),
    no_verify: bool = typer.Option(False, "--no-verify", help="Return the candidates unverified"),
    weights: str = typer.Option("", "--weights", help="Ranking weights, e.g. analyser=1,fluency=0.1,reranker=0.1 (missing ones keep their defaults)"),
    time_budget: float = typer.Option(0.0, "--time-budget", help="Seconds for drawing candidates (0 = none); drawn in rounds of --round-size"),
    round_size: int = typer.Option(0, "--round-size", help="Candidates per round (0 = all N at once)"),
    kenlm: Optional[Path] = typer.Option(None, "--kenlm", exists=True, dir_okay=False, help="KenLM model for the fluency term (spacy project run kenlm-model)"),
    lead: str = LEAD,
) -> None:
    """Generate sentences using a rhetorical device on an object (CERD RG), verify each with the analyser;
    prints JSON lines, verified ones first, and a summary line on stderr.
    A bad setting or a model that cannot be used is one line on stderr and exit code 1."""
    import json

    text = context_file.read_text(encoding="utf8") if context_file else context
    try:
        style = resolve_prompt_style(prompt_style, model_path)
        gen = _cli_generator(model_path, adapter_path, base_url, model, api_key_env, timeout, top_p, repetition_penalty,
                             seed, n_context=k, n_candidates=n, temperature=temperature, max_new_tokens=max_new_tokens,
                             language=language, prompt_style=style, shots_path=str(shots) if shots else None,
                             n_shots=n_shots, verify=not no_verify, analyser=None if no_verify else analyser,
                             weights=parse_weights(weights), kenlm_path=str(kenlm) if kenlm else None,
                             time_budget=time_budget, round_size=round_size, lead=lead)
        gen.check_ready()
        result = gen.suggest(text, rhetoric, obj, n)
        if result.candidates and all(not c.ok and not c.raw for c in result.candidates):
            # the backend answered nothing at all: its error, not the analyser's verdict
            raise OSError(Errors.R022.format(reason=result.candidates[0].error))
    except (ValueError, OSError) as err:
        typer.echo(f"rhetoric generate: {' '.join(str(err).split())}", err=True)
        raise typer.Exit(1)
    for cand in result.candidates:
        typer.echo(json.dumps(cand.to_dict(), ensure_ascii=False))
    typer.echo(f"rhetoric generate: {result.message(analyser)}", err=True)


def parse_weights(text: str) -> dict:
    """``"analyser=1,fluency=0.1"`` -> ``{"analyser": 1.0, "fluency": 0.1}``.
    Raises ValueError for an item without ``=`` or a value that is not a
    number (names are checked by the generator)."""
    out = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        name, sep, value = item.partition("=")
        if not sep:
            raise ValueError(f"--weights: {item!r} is not name=value")
        try:
            out[name.strip()] = float(value)
        except ValueError:
            raise ValueError(f"--weights: {value!r} is not a number") from None
    return out


def resolve_prompt_style(style: str, model_path: Optional[str]) -> str:
    """``style`` itself, or for ``"auto"``: ``"completion"`` for a local
    model whose tokenizer has no chat template (a base LM, e.g. the Gemma 3
    270M asset), else ``"instruction"``. Raises OSError when the local
    tokenizer cannot be loaded."""
    if style != "auto":
        return style
    if model_path is None:
        return "instruction"
    from ..llm.transformers_backend import load_local_tokenizer

    return "instruction" if getattr(load_local_tokenizer(model_path), "chat_template", None) else "completion"


def _cli_generator(model_path, adapter_path, base_url, model, api_key_env, timeout, top_p, repetition_penalty, seed, **settings):
    """A RhetoricGenerator on a local model (--model-path) or a server (--base-url). ``settings``: the
    commands' flat settings (``n_candidates``, ``prompt_style``, ``analyser``, ...), each put in its block of
    the component (``MOVED_SETTINGS``: task, sampling or verifier)."""
    from ..components.rhetoric_generator import MOVED_SETTINGS, RhetoricGenerator
    from ..llm.openai_compatible import OpenAICompatibleBackend
    from ..llm.sampling import make_sampling
    from ..llm.tasks import make_rhetoric_generation_task
    from ..llm.transformers_backend import TransformersBackend
    from ..llm.verify import make_verifier

    if (model_path is None) == (base_url is None):
        raise typer.BadParameter("give exactly one of --model-path or --base-url")
    if model_path is not None:
        backend = TransformersBackend(model_path, adapter_path, top_p=top_p, repetition_penalty=repetition_penalty, seed=seed)
    else:
        backend = OpenAICompatibleBackend(base_url, model, api_key_env=api_key_env, timeout=timeout)
    blocks: dict = {"task": {}, "sampling": {}, "verifier": {}}
    for key, value in settings.items():
        blocks[MOVED_SETTINGS[key]][key] = value
    return RhetoricGenerator(None, backend, task=make_rhetoric_generation_task(**blocks["task"]),
                             sampling=make_sampling(**blocks["sampling"]), verifier=make_verifier(**blocks["verifier"]))


@app.command("generate-records")
def generate_records_cmd(
    records: Path = typer.Argument(..., exists=True, dir_okay=False, help="Held-out RG records (rg-records JSONL)"),
    output: Path = typer.Argument(..., help="JSONL for evaluate-generation (one line per record)"),
    system: str = typer.Option(..., "--system", help="Name of the system; 'human' copies the references"),
    sample: int = typer.Option(300, "--sample", help="Seeded random sample of this many records (0 = all)"),
    sample_seed: int = typer.Option(0, "--sample-seed", help="Seed of the sample (keep it for every system)"),
    model_path: Optional[str] = MODEL_PATH,
    adapter_path: Optional[str] = ADAPTER_PATH,
    base_url: Optional[str] = BASE_URL,
    model: str = SERVER_MODEL,
    api_key_env: Optional[str] = API_KEY_ENV,
    timeout: float = TIMEOUT,
    prompt_style: str = typer.Option("completion", "--prompt-style", help="instruction or completion"),
    shots: Optional[Path] = typer.Option(None, "--shots", exists=True, dir_okay=False, help="RG training records for the completion shots"),
    n_shots: int = N_SHOTS,
    n: int = typer.Option(1, "--n", help="Candidates per record"),
    temperature: float = SAMPLE_TEMPERATURE,
    top_p: float = TOP_P,
    repetition_penalty: float = REPETITION_PENALTY,
    max_new_tokens: int = MAX_NEW_TOKENS,
    k: int = K_CONTEXT,
    seed: int = SAMPLING_SEED,
    batch_size: int = typer.Option(8, "--batch-size", help="Records per generation batch"),
    resume: bool = typer.Option(False, "--resume", help="Keep the records already in OUTPUT and add the rest"),
) -> None:
    """Generate for a fixed sample of held-out RG records (or copy the human references) for evaluate-generation."""
    import time

    from ..llm.records import read_jsonl
    from ..llm.rg_batch import HUMAN, generate_records, sample_records

    pairs = sample_records(list(read_jsonl(records)), sample, sample_seed)
    generator = None
    if system != HUMAN:
        generator = _cli_generator(model_path, adapter_path, base_url, model, api_key_env, timeout, top_p, repetition_penalty,
                                   seed, n_context=k, n_candidates=n, temperature=temperature, max_new_tokens=max_new_tokens,
                                   prompt_style=prompt_style, shots_path=str(shots) if shots else None, n_shots=n_shots)
        generator.backend.batch_size = batch_size
    start = time.perf_counter()
    written = generate_records(pairs, output, system=system, generator=generator, batch_size=batch_size, resume=resume)
    seconds = time.perf_counter() - start
    typer.echo(f"{system}: {written} records written to {output} in {seconds:.1f} s ({len(pairs)} in the sample, seed {sample_seed})", err=True)


@app.command("evaluate-suggestions")
def evaluate_suggestions_cmd(
    requests: List[Path] = typer.Argument(..., exists=True, dir_okay=False, help="Held-out RG records (rg-records --essays), test first; later files top up devices with too few"),
    output: Path = typer.Option(..., "--output", "-o", help="JSONL: one row per request (candidates, verdicts, success at each N)"),
    summary_path: Path = typer.Option(..., "--summary", help="JSON summary: success at each N per device, fluency, latency"),
    system: str = typer.Option(..., "--system", help="Name of the system (written into the summary)"),
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
    batch: int = typer.Option(4, "--batch", help="Requests generated together (throughput; latency is timed one request at a time)"),
    latency_sample: int = typer.Option(16, "--latency-sample", help="Requests timed one at a time at each N (0 = none)"),
    resume: bool = typer.Option(False, "--resume", help="Keep the rows already in OUTPUT and add the rest"),
    lead: str = LEAD,
) -> None:
    """Verified suggestions on held-out requests: success per request at N = 1, 4, 8 per device, latency, fluency."""
    import json

    from ..llm.ngram_lm import load_kenlm
    from ..evaluation.suggestions import held_out_requests, latency_requests, read_rows, request_rows, summarize, time_requests

    counts = _counts(ns)
    picked = held_out_requests(requests, per_device, sample_seed)
    gen = _suggestion_generator(model_path, adapter_path, analyser, kenlm, max(counts), n_shots, k, temperature, top_p,
                                repetition_penalty, max_new_tokens, seed, lead)
    gen.backend.batch_size = batch
    rows = read_rows(output) if resume else []
    output.parent.mkdir(parents=True, exist_ok=True)
    with output.open("a" if resume else "w", encoding="utf8") as fh:
        for row in request_rows(gen, picked, counts, batch=batch, done={r["id"] for r in rows}):
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            fh.flush()
            rows.append(row)
    lm = load_kenlm(kenlm) if kenlm else None
    result = {"system": system, "model_path": model_path, "adapter_path": adapter_path, "analyser": analyser,
              "n_shots": n_shots, "k": k, "temperature": temperature, "per_device": per_device, "lead": lead,
              "requests": [str(p) for p in requests], "summary": summarize(rows, counts, lm)}
    if latency_sample:
        gen.backend.batch_size = max(counts)
        result["latency"] = time_requests(gen, latency_requests(picked, latency_sample), counts)
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf8")
    typer.echo(json.dumps(result, ensure_ascii=False, indent=1))


def _counts(ns: str) -> List[int]:
    return sorted({int(x) for x in ns.split(",") if x.strip()})


def _suggestion_generator(model_path, adapter_path, analyser, kenlm, n, n_shots, k, temperature, top_p,
                          repetition_penalty, max_new_tokens, seed, lead):
    """The generator evaluate-suggestions and time-suggestions measure: a
    local model with completion prompts, verified by ``analyser``."""
    from ..llm.verify import pipeline_analyser
    from ..packaging import load_pipeline

    gen = _cli_generator(model_path, adapter_path, None, "default", None, 60.0, top_p, repetition_penalty, seed,
                         n_context=k, n_candidates=n, temperature=temperature, max_new_tokens=max_new_tokens,
                         prompt_style="completion", n_shots=n_shots, analyser=None,
                         kenlm_path=str(kenlm) if kenlm else None, lead=lead)
    gen.set_analyser(pipeline_analyser(load_pipeline(analyser)))
    return gen


@app.command("time-suggestions")
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
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf8")
    typer.echo(json.dumps(result, ensure_ascii=False, indent=1))


@app.command("reverify-suggestions")
def reverify_suggestions_cmd(
    rows: Path = typer.Argument(..., exists=True, dir_okay=False, help="evaluate-suggestions results (JSONL)"),
    output: Path = typer.Option(..., "--output", "-o", help="JSONL: one row per request, judged by ANALYSER"),
    summary_path: Path = typer.Option(..., "--summary", help="JSON summary: success at each N per device"),
    analyser: str = typer.Option(..., "--analyser", help="Pipeline that verifies (name or folder)"),
    ns: str = NS,
) -> None:
    """The draws of an evaluate-suggestions run judged again by another analyser (no generation)."""
    import json

    from ..evaluation.suggestions import read_rows, reverify_rows, summarize
    from ..llm.verify import pipeline_analyser
    from ..packaging import load_pipeline

    counts = _counts(ns)
    before = read_rows(rows)
    if not before:
        typer.echo(f"{rows}: no rows", err=True)
        raise typer.Exit(1)
    too_few = [r["id"] for r in before if len(r["drawn"]) < max(counts)]
    if too_few:
        typer.echo(f"{rows}: {len(too_few)} rows drew fewer than {max(counts)} answers (first id {too_few[0]}); lower --ns", err=True)
        raise typer.Exit(1)
    analyse = pipeline_analyser(load_pipeline(analyser))
    output.parent.mkdir(parents=True, exist_ok=True)
    after = []
    with output.open("w", encoding="utf8") as fh:
        for row in reverify_rows(before, analyse, counts):
            fh.write(json.dumps(row, ensure_ascii=False) + "\n")
            after.append(row)
    result = {"rows": str(rows), "analyser": analyser, "summary": summarize(after, counts),
              "summary_before": summarize(before, counts)}
    summary_path.parent.mkdir(parents=True, exist_ok=True)
    summary_path.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf8")
    typer.echo(json.dumps(result, ensure_ascii=False, indent=1))


@app.command("tune-object-thresholds")
def tune_object_thresholds_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline folder that verifies"),
    output: Path = typer.Argument(..., help="Folder for the pipeline with the chosen threshold (may be MODEL)"),
    requests: Path = typer.Option(Path("corpus/rg/essays_dev.jsonl"), "--requests", exists=True, dir_okay=False, help="Dev requests with their human sentences (never test)"),
    device: str = typer.Option("personification", "--device", help="Device whose object threshold is chosen"),
    min_precision: float = typer.Option(0.8, "--min-precision", help="Take the lowest threshold whose precision on the dev pairs reaches this"),
    n_context: int = typer.Option(2, "--n-context", help="Context sentences before each human sentence (the generator config's n_context)"),
    report: Optional[Path] = typer.Option(None, "--report", help="JSON file for the table of every threshold tried"),
) -> None:
    """Choose rhetoric_components' object threshold for DEVICE: the
    threshold a span named by a suggestion request must reach to count as
    the device's object, chosen on the dev essays' human sentences
    (spacy_rhetoric.research.object_thresholds)."""
    import json

    from wasabi import msg

    from ..research.object_thresholds import COMPONENTS_ALONE, choose, labelled_pairs, score_pairs, sweep
    from ..llm.records import read_jsonl
    from ..packaging import load_pipeline, write_component
    from ..taxonomy import OBJECT_COMPONENT

    if not 0.0 < min_precision <= 1.0:
        msg.fail(f"--min-precision must be in (0, 1], got {min_precision}", exits=1)
    try:
        pairs = labelled_pairs(list(read_jsonl(requests)), device)
    except ValueError as err:
        msg.fail(str(err), exits=1)
    nlp = load_pipeline(model)
    label = OBJECT_COMPONENT[device]
    table = sweep(score_pairs(nlp, pairs, device, n_context))
    chosen = choose(table, min_precision)
    names = {t: "components_alone" if t == COMPONENTS_ALONE else f"{t:.2f}" for t in table}
    for t, row in table.items():
        msg.text(f"{names[t]}: P {row['p']:.3f} R {row['r']:.3f} F1 {row['f']:.3f} (tp {row['tp']}, fp {row['fp']}, fn {row['fn']})")
    comp = nlp.get_pipe("rhetoric_components")
    kept = {k: v for k, v in comp.cfg.get("object_thresholds", {}).items() if k != label}
    if chosen == COMPONENTS_ALONE:
        msg.warn(f"no threshold reaches precision {min_precision}; {label} keeps its components alone")
    else:
        kept[label] = chosen
    comp.cfg["object_thresholds"] = kept
    write_component(model, output, nlp, "rhetoric_components")
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps({"model": str(model), "requests": str(requests), "device": device, "label": label,
                                      "pairs": len(pairs), "positives": sum(g for _, g in pairs), "min_precision": min_precision,
                                      "chosen": None if chosen == COMPONENTS_ALONE else chosen,
                                      "table": {names[t]: row for t, row in table.items()}},
                                     indent=1), encoding="utf8")
    msg.good(f"{label}: object threshold {'none' if chosen == COMPONENTS_ALONE else f'{chosen:.2f}'} -> wrote {output}")


@app.command("suggestion-sheet")
def suggestion_sheet_cmd(
    rows: Path = typer.Argument(..., exists=True, dir_okay=False, help="evaluate-suggestions results (JSONL)"),
    sheet: Path = typer.Option(..., "--sheet", help="Blind sheet for the annotator (JSONL; answers filled in place)"),
    key: Path = typer.Option(..., "--key", help="Key: system group of each item (not shown to the annotator)"),
    per_device: int = typer.Option(40, "--per-device", help="Returned suggestions per device"),
    human_per_device: int = typer.Option(10, "--human-per-device", help="Human sentences per device (control)"),
    seed: int = typer.Option(0, "--seed"),
    device: List[str] = typer.Option([], "--device", help="Only the requests of this device (repeatable; default: all)"),
) -> None:
    """A blind-read sheet of returned suggestions (and human controls), shuffled, with its key apart."""
    from ..research.blind_read import make_sheet, write_jsonl
    from ..evaluation.suggestions import read_rows
    from ..llm.prompts import RG_DEVICES

    unknown = sorted(set(device) - set(RG_DEVICES))
    if unknown:
        typer.echo(f"unknown --device {', '.join(unknown)}: one of {', '.join(RG_DEVICES)}", err=True)
        raise typer.Exit(1)
    picked = [r for r in read_rows(rows) if not device or r["rhetoric"] in device]
    items, secret = make_sheet(picked, per_device, human_per_device, seed)
    write_jsonl(items, sheet)
    write_jsonl(secret, key)
    typer.echo(f"wrote {len(items)} items to {sheet} and their key to {key}")


@app.command("suggestion-samples")
def suggestion_samples_cmd(
    rows: Path = typer.Argument(..., exists=True, dir_okay=False, help="evaluate-suggestions results (JSONL)"),
    output: Path = typer.Option(..., "--output", "-o", help="Markdown table to write"),
    n: int = typer.Option(10, "--n", help="Requests per device"),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw"),
) -> None:
    """N returned suggestions per device with their evidence, requests drawn by a seed (not by hand)."""
    from ..evaluation.suggestions import read_rows, samples_markdown

    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(samples_markdown(read_rows(rows), n, seed), encoding="utf8")
    typer.echo(f"wrote {output}", err=True)


@app.command("score-blind-read")
def score_blind_read_cmd(
    answers: Path = typer.Argument(..., exists=True, dir_okay=False, help="The annotated sheet"),
    key: Path = typer.Argument(..., exists=True, dir_okay=False, help="Its key (suggestion-sheet --key)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON here"),
    second: Optional[Path] = typer.Option(None, "--second", exists=True, dir_okay=False, help="A second reader's independent answers to the same sheet: agreement and Cohen's kappa per question"),
) -> None:
    """Share of yes (device right, fluent, fits the context) per device and group of a blind read."""
    import json

    from ..research.blind_read import agreement, read_answers, score
    from ..evaluation.suggestions import read_rows

    first = read_answers(answers)
    result = score(first, read_rows(key))
    if second:
        result["second_reader"] = agreement(first, read_answers(second))
    text = json.dumps(result, ensure_ascii=False, indent=1)
    typer.echo(text)
    if output:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(text, encoding="utf8")


@app.command("finetune")
def finetune_cmd(
    model_path: str = typer.Argument(..., help="Local base model (path or cached name; never downloaded)"),
    output_dir: Path = typer.Argument(..., help="Checkpoints, adapter/, train_log.jsonl, summary.json"),
    records: List[Path] = typer.Option([], "--records", exists=True, dir_okay=False, help="RG records: .jsonl (rg-records) or .json (CERD); repeatable"),
    simile_dir: Optional[Path] = typer.Option(None, "--simile-dir", exists=True, file_okay=False, help="Derive records from the simile corpus (Train split)"),
    cmdag_dir: Optional[Path] = typer.Option(None, "--cmdag-dir", exists=True, file_okay=False, help="Derive records from CMDAG (val part)"),
    max_records: int = typer.Option(0, "--max-records", help="Use only the first N records (0 = all)"),
    steps: int = typer.Option(50, "--steps", help="Optimizer steps (CERD: 50 single-task)"),
    batch_size: int = typer.Option(32, "--batch-size"),
    micro_batch_size: int = typer.Option(4, "--micro-batch-size"),
    lr: float = typer.Option(2e-4, "--lr"),
    r: int = typer.Option(32, "--r", help="LoRA rank"),
    alpha: int = typer.Option(32, "--alpha", help="LoRA alpha"),
    save_every: int = typer.Option(25, "--save-every"),
    max_length: int = typer.Option(1024, "--max-length", help="Skip longer examples (tokens)"),
    k: int = typer.Option(3, "--k", help="Preceding sentences used as context"),
    language: str = typer.Option("zh", "--language", help="Prompt language: zh or en"),
    seed: int = typer.Option(0, "--seed"),
    threads: int = typer.Option(0, "--threads", help="torch CPU threads (0 = default)"),
    device: str = typer.Option("auto", "--device", help="auto (CUDA when present), cpu, cuda:0, ..."),
    resume: bool = typer.Option(False, "--resume", help="Continue from the latest checkpoint in OUTPUT_DIR"),
    prompt_style: str = typer.Option("chat", "--prompt-style", help="chat (instruction model, CERD prompt) or completion (base LM)"),
    max_target_chars: int = typer.Option(0, "--max-target-chars", help="Use only records whose target has at most this many characters (0 = all)"),
    stop_after: int = typer.Option(0, "--stop-after", help="Stop (with a checkpoint) after this step; --resume continues (0 = run to --steps)"),
) -> None:
    """LoRA fine-tuning for rhetorical generation (CERD settings: r=32, alpha=32, lr 2e-4, cosine, AdamW)."""
    from ..llm.finetune import FinetuneConfig, finetune
    from ..llm.records import derive_rg_records, load_records

    recs = load_records(records, k=k)
    derived, stats = derive_rg_records(simile_dir, cmdag_dir, k=k)
    recs.extend(derived)
    for source, counts in stats.items():
        typer.echo(f"{source}: {counts['records']} records")
    if max_target_chars:
        recs = [rec for rec in recs if len(rec.target) <= max_target_chars]
    if max_records:
        recs = recs[:max_records]
    if not recs:
        raise typer.BadParameter("no RG records: give --records, --simile-dir or --cmdag-dir")
    cfg = FinetuneConfig(r=r, alpha=alpha, lr=lr, batch_size=batch_size, micro_batch_size=micro_batch_size,
                         max_steps=steps, save_every=save_every, max_length=max_length, k=k,
                         language=language, seed=seed, threads=threads, device=device, prompt_style=prompt_style)
    s = finetune(model_path, recs, output_dir, cfg, resume=resume, stop_after=stop_after or None)
    typer.echo(f"records {s['n_records']} (skipped too long {s['n_skipped_too_long']}), steps {s['start_step']}->{s['steps']}, "
               f"loss {s['first_loss']:.4f} -> {s['last_loss']:.4f}")
    typer.echo(f"throughput {s['tokens_per_second']:.1f} tokens/s ({s['tokens']} tokens in {s['train_seconds']:.2f} s) on {s['device']}")
    typer.echo(f"adapter saved to {s['adapter']}")


@app.command("generation-samples")
def generation_samples_cmd(
    files: List[Path] = typer.Argument(..., exists=True, dir_okay=False, help="generate-records files, one per system"),
    output: Path = typer.Option(..., "--output", "-o", help="Markdown page to write"),
    n: int = typer.Option(10, "--n", help="Records to show"),
    seed: int = typer.Option(0, "--seed", help="Seed of the draw"),
) -> None:
    """N generations per system with their prompts, records drawn by a seed (not by hand)."""
    from ..llm.rg_batch import samples_markdown

    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(samples_markdown(files, n, seed), encoding="utf8")
    typer.echo(f"wrote {output}", err=True)
