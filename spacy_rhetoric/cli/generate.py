"""``rhetoric generate``: rewrite suggestions from an LLM backend; the generation options and helpers the other command groups share."""
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


def _counts(ns: str) -> List[int]:
    return sorted({int(x) for x in ns.split(",") if x.strip()})


def _suggestion_generator(model_path, adapter_path, analyser, kenlm, n, n_shots, k, temperature, top_p,
                          repetition_penalty, max_new_tokens, seed, lead):
    """The generator evaluate-suggestions and time-suggestions measure: a
    local model with completion prompts, verified by ``analyser``."""
    from ..llm.verify import pipeline_analyser
    from ..analysis.loading import load_pipeline

    gen = _cli_generator(model_path, adapter_path, None, "default", None, 60.0, top_p, repetition_penalty, seed,
                         n_context=k, n_candidates=n, temperature=temperature, max_new_tokens=max_new_tokens,
                         prompt_style="completion", n_shots=n_shots, analyser=None,
                         kenlm_path=str(kenlm) if kenlm else None, lead=lead)
    gen.set_analyser(pipeline_analyser(load_pipeline(analyser)))
    return gen
