"""``rhetoric research ...``: studies behind docs/experiments.md and the reference pages (gold-unit figures are upper bounds), the generator studies and annotation agreement; not part of the product's workflow."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import _fail_on, _write_json, research_app
from .generate import (
    ADAPTER_PATH,
    API_KEY_ENV,
    BASE_URL,
    K_CONTEXT,
    MAX_NEW_TOKENS,
    MODEL_PATH,
    NS,
    N_SHOTS,
    REPETITION_PENALTY,
    SAMPLE_TEMPERATURE,
    SAMPLING_SEED,
    SERVER_MODEL,
    TIMEOUT,
    TOP_P,
    _cli_generator,
    _counts,
)


@research_app.command("gold-thresholds")
def tune_thresholds_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Trained pipeline folder"),
    dev: Path = typer.Argument(..., exists=True, dir_okay=False, help="Dev DocBin (never the test split)"),
    output: Path = typer.Argument(..., help="Folder for the pipeline with the chosen thresholds"),
    per_label: bool = typer.Option(False, "--per-label", help="One textcat threshold per coarse device instead of one global threshold per component"),
    extra_dev: List[Path] = typer.Option([], "--dev", help="With --per-label: more dev DocBins (repeatable)"),
    min_support: int = typer.Option(10, "--min-support", help="With --per-label: tune only devices with this many dev sentences"),
) -> None:
    """Pick rhetoric_textcat / rhetoric_components thresholds on dev DocBins (gold words and units) and save the pipeline."""
    from wasabi import msg

    from ..research.gold_units import tune_label_thresholds, tune_thresholds

    if per_label:
        for label, r in tune_label_thresholds(model, [dev, *extra_dev], output, min_support=min_support).items():
            msg.info(f"coarse/{label}: threshold {r['threshold']:.2f} -> dev F1 {r['f']:.4f} ({r['support']} dev sentences)")
        return
    for name, r in tune_thresholds(model, dev, output).items():
        msg.info(f"{name}: threshold {r['threshold']:.2f} -> dev F1 {r['score']:.4f}")


@research_app.command("gold-parallelism")
def evaluate_parallelism_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline with a parallelism_linker"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold DocBin, e.g. corpus/pse-i/test.spacy"),
    output: Path = typer.Option(Path("metrics/parallelism.json"), "--output", "-o", help="JSON report (a .md is written beside it)"),
) -> None:
    """EPM/MPBM/MBAWO/MWO P/R/F and Appendix-G error counts of the parallelism linker on gold words."""
    from wasabi import msg

    from ..evaluation.parallelism import CATEGORIES, PUBLISHED_F1, evaluate_linker

    result = evaluate_linker(model, data, output)
    rows = [(m.upper(), f"{v['p']:.3f}", f"{v['r']:.3f}", f"{v['f']:.3f}", f"{PUBLISHED_F1[m]:.3f}") for m, v in result["metrics"].items()]
    msg.table(rows, header=("metric", "P", "R", "F1", "published F1"), divider=True,
              title=f"{result['linker']} on {result['essays']} essays / {result['documents']} paragraphs / {result['words']} words")
    msg.table([[result["errors"][k] for k in (*CATEGORIES, "correct")]], header=(*CATEGORIES, "correct"), divider=True,
              title="Appendix G error categories")
    msg.good(f"wrote {output} and {output.with_suffix('.md')}")


@research_app.command("gold-rhetoric")
def evaluate_rhetoric_cmd(
    model: str = typer.Argument(..., help="Pipeline folder/name with rhetoric_textcat and/or rhetoric_components, or 'rules' for the rule baseline"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold DocBin, e.g. corpus/simile/test.spacy"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write all scores as JSON here"),
    gold_sents: bool = typer.Option(True, "--gold-sents/--no-gold-sents", help="Give the pipeline the gold sentence starts"),
) -> None:
    """Sentence classification (EM, micro/macro P/R/F1, mapping rates) and component scores on gold words."""
    from wasabi import msg

    from ..research.gold_units import evaluate_rhetoric, summary_rows

    scores = evaluate_rhetoric(model, data, gold_sents=gold_sents, output=output)
    msg.table(summary_rows(scores), header=("score", "P", "R", "F1"), title=f"{model} on {data}", divider=True)


@research_app.command("essays")
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

    from ..research.whole_essays import evaluate_whole_essays, headline_rows

    torch.set_num_threads(threads)
    with _fail_on(OSError, ValueError):
        r = evaluate_whole_essays(model, data, before=before, gold_sents=gold_sents, output=output)
    msg.table(headline_rows(r), header=("score", "paragraphs", "whole essays"), divider=True,
              title=f"{model} ({', '.join(r['encoders']) or 'no paragraph-wise encoder'}) on {data}: {r['cut']['essays']} essays, {r['n_paragraphs']} paragraphs")
    msg.info("cut: " + ", ".join(f"{k} {v}" for k, v in r["cut"].items()))
    msg.info("paragraphs predicted differently in the essay: " + ", ".join(f"{k} {v}" for k, v in r["changed"].items()))
    if output is not None:
        msg.good(f"wrote {output}")


@research_app.command("cmc")
def evaluate_cmc_cmd(
    model: str = typer.Argument(..., help="Pipeline folder or installed package name"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="CMC DocBin, e.g. corpus/cmc/test.spacy"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the figures as JSON here"),
    batch_size: int = typer.Option(64, "--batch-size", min=1, help="Texts per nlp.pipe batch"),
) -> None:
    """Metaphor detection on CMC sentences (raw text, the pipeline's own
    tokenizer): positive = any sentence labelled metaphor or personification."""
    from wasabi import msg

    from ..research.cmc import evaluate_cmc

    with _fail_on(OSError, ValueError):
        r = evaluate_cmc(model, data, output=output, batch_size=batch_size)
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


@research_app.command("hauser-cmdag")
def hauser_cmdag_cmd(
    kb_path: Path = typer.Argument(..., exists=True, dir_okay=False, help="KB JSON from build-kb"),
    cmdag_file: Path = typer.Argument(..., exists=True, dir_okay=False, help="CMDAG JSON to score (test.json)"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write per-record scores (JSONL) and <output>.summary.json"),
    nlp_path: Optional[str] = typer.Option(None, "--nlp", help="spaCy pipeline whose tokenizer counts vehicle words (default: blank zh, characters)"),
    examples: int = typer.Option(3, "--examples", help="Highest/lowest examples to print per score"),
) -> None:
    """HAUSER relevance / creativity / informativeness of CMDAG metaphors against a KB."""
    from ..research.cmdag_hauser import print_report, score_file

    print_report(*score_file(kb_path, cmdag_file, output=output, nlp_path=nlp_path), examples=examples)


@research_app.command("evaluate-generation")
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
    model: Optional[str] = typer.Option(None, "--judge-model", help="Judge model name on that server"),
    api_key_env: Optional[str] = typer.Option(None, "--api-key-env", help="Environment variable holding the API key"),
    timeout: float = typer.Option(60.0, "--timeout", help="Seconds per judge request"),
) -> None:
    """Score generated candidates: BLEU-2/4, ROUGE-L, perplexity (causal LM, KenLM), BERTScore, HAUSER, rhetoric success, LLM judges."""
    from wasabi import msg

    from ..research.generation import evaluate_generation, summary_table

    backend = None
    if judge:
        from ..llm.openai_compatible import OpenAICompatibleBackend

        if not (base_url and model):
            raise typer.BadParameter("--judge needs --base-url and --model")
        backend = OpenAICompatibleBackend(base_url, model, api_key_env=api_key_env, timeout=timeout)
    result = evaluate_generation(input_path, output, kb_path=kb, lm_path=lm, encoder_path=encoder, kenlm_path=kenlm,
                                 sentiment=sentiment, rhetoric_model=rhetoric_model, backend=backend, judges=judge)
    msg.table(summary_table(result["summary"]), header=("metric", "key", "value"), divider=True, max_col=80)
    for notice in result["notices"]:
        msg.warn(notice)
    msg.good(f"Wrote {output} and {output.with_suffix('.md')}")


@research_app.command("generate-records")
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


@research_app.command("generation-samples")
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


@research_app.command("reverify-suggestions")
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
    from ..analysis.loading import load_pipeline

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
    _write_json(summary_path, result)
    typer.echo(json.dumps(result, ensure_ascii=False, indent=1))


@research_app.command("suggestion-sheet")
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


@research_app.command("score-blind-read")
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


@research_app.command("annotation-agreement")
def annotation_agreement_cmd(
    first: Path = typer.Argument(..., exists=True, dir_okay=False, help="First annotation pass (JSONL)"),
    second: Path = typer.Argument(..., exists=True, dir_okay=False, help="Second, independent pass of some of the same sentences"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the figures as JSON"),
    also_first: List[Path] = typer.Option([], "--also-first", exists=True, dir_okay=False, help="More files of the first pass (repeatable)"),
) -> None:
    """Cohen's kappa per coarse label and for the form and content levels,
    and exact component matches, between two annotation passes."""
    import json

    from wasabi import msg

    from ..research.annotation_agreement import annotation_agreement

    result = annotation_agreement([first, *also_first], second)
    rows = [(f"coarse/{label}", v["kappa"], v["first"], v["second"], v["both"]) for label, v in result["coarse"]["labels"].items()]
    rows += [(f"{level} (pooled)", result[level]["pooled_kappa"], "", "", "") for level in ("coarse", "form", "content")]
    msg.table(rows, header=("decision", "kappa", "first", "second", "both"), divider=True,
              title=f"{result['sentences']} sentences" + (f" of {result['essays']} essays" if result["essays"] else "")
              + f"; coarse exact match {result['coarse_exact_match']}")
    comp = result["components"]
    msg.info(f"components: {comp['exact_matches']} exact matches of {comp['first']} (first) / {comp['second']} (second): P {comp['p']} R {comp['r']} F1 {comp['f']}")
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, ensure_ascii=False, indent=2) + "\n", encoding="utf8")
