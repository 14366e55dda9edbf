"""``rhetoric evaluate ...``: the raw-path evaluation (raw text in, scored by characters), analysis records, the linker, ConFiguRe figurative units, the segmenter, and verified suggestions."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import _fail_on, _print_table, _write_json, evaluate_app
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

DATA = Path("../shared/data/configure/valid.json")
SPLIT = Path("configs/configure_split.json")


@evaluate_app.command("raw")
def evaluate_raw_cmd(
    model: str = typer.Argument(..., help="Pipeline folder or installed package name"),
    corpus: List[str] = typer.Option(["pse-i-cerd", "pse-i", "simile", "cmc", "pse-original", "cmre", "cmre-relation-only"], "--corpus", "-c", help="pse-i-cerd, pse-i, simile, cmc, pse-original, cmre or cmre-relation-only (CMRE's dev split, held out; relation-only: its verb, attribute and part metaphors as our annotators read them), hypo-cn (HYPO-cn's valid split: hyperbole P/R/F1 and accuracy) or configure (the dev works of ConFiguRe's validation split: metaphor, personification, hyperbole and parallelism P/R/F1 by character overlap with its units) (repeatable)"),
    shared: Path = typer.Option(Path("../shared/data"), "--shared", help="Folder with pse-i/, simile/, cmc/"),
    annotations: Path = typer.Option(Path("annotations/pse-i-cerd"), "--annotations", help="Folder with the team annotation (train.jsonl, test.jsonl)"),
    split: str = typer.Option("test", "--split", help="test, dev (model selection) or optimization (PSE-I)"),
    gold_units: bool = typer.Option(False, "--gold-units", help="Also score the pipeline on gold words and gold sentence units (the upper bound, labelled as such)"),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Texts per nlp.pipe batch"),
    in_paragraph_labels: bool = typer.Option(False, "--in-paragraph-labels", help="Label a sentence parallelism for in-paragraph branches only (the team annotation's convention), not for cross-paragraph ones"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write all scores as JSON here"),
) -> None:
    """The evaluation of record: each corpus read as raw text (essays as
    paragraphs joined by line breaks, single sentences alone), the whole
    pipeline with its own tokenizer and sentences, scored by characters."""
    from wasabi import msg

    from ..evaluation.raw_path import evaluate_raw, headline_rows

    with _fail_on(OSError, ValueError):
        config = {"components": {"rhetoric_textcat": {"parallelism_kinds": ["in_paragraph"]}}} if in_paragraph_labels else None
        r = evaluate_raw(model, corpus, shared=shared, annotations=annotations, split=split,
                         gold_units=gold_units, batch_size=batch_size, config=config, output=output)
    for name, entry in r["corpora"].items():
        header = ("score", "P", "R", "F1", "gold units F1" if gold_units else "")
        msg.table(headline_rows(entry), header=header, divider=True,
                  title=f"{r['name']} {r['version']} on {name} {entry.get('split', split)} as raw text: {entry['raw']['n_texts']} texts, {entry['seconds']} s")
        msg.info("consistency: " + ", ".join(f"{k} {v}" for k, v in entry["raw"]["consistency"].items()))
        units = entry["raw"].get("figurative_units")
        if units:
            msg.info("figurative units predicted per type: " + ", ".join(f"{k} {v}" for k, v in units["predicted_per_type"].items()))
        only = entry["raw"].get("cross_paragraph_only_units")
        if only:
            msg.info(f"units whose sentences hold a cross-paragraph branch and no in-paragraph one: {only['units']}, "
                     f"of them gold parallelism: {only['gold_parallelism']}")
    if output is not None:
        msg.good(f"wrote {output}")


@evaluate_app.command("records")
def score_records_cmd(
    records: Path = typer.Argument(..., exists=True, dir_okay=False, help="analysis/v1 JSONL written by `rhetoric analyze`"),
    corpus: str = typer.Option("pse-i-cerd", "--corpus", "-c", help="pse-i-cerd or pse-i (records' ids are the essay ids)"),
    shared: Path = typer.Option(Path("../shared/data"), "--shared", help="Folder with pse-i/"),
    annotations: Path = typer.Option(Path("annotations/pse-i-cerd"), "--annotations", help="Folder with the team annotation"),
    split: str = typer.Option("test", "--split", help="The split the records analysed"),
) -> None:
    """Score what `rhetoric analyze` wrote against the gold of the same
    essays (by characters), and count each device next to the gold."""
    from wasabi import msg

    from ..corpora.jsonio import iter_jsonl_objects
    from ..evaluation.raw_path import align_records, device_counts, headline_rows, read_gold, score_records

    with _fail_on(OSError, ValueError):
        gold, aligned, missing = align_records(read_gold(corpus, shared, annotations, split),
                                               (rec for _, rec in iter_jsonl_objects(records)))
    if missing:
        msg.warn(f"{len(missing)} {corpus} {split} texts have no record and are not scored: {', '.join(missing[:10])}")
    msg.table(device_counts(gold, aligned), header=("", "analysed", "gold"), divider=True,
              title=f"{records}: {len(gold)} {corpus} {split} texts")
    rows = [r[:4] for r in headline_rows({"raw": score_records(gold, aligned)})
            if "coarse/" in r[0] and r[0].startswith("all ") or "micro" in r[0] or "EPM" in r[0]]
    msg.table(rows, header=("score", "P", "R", "F1"), divider=True)


@evaluate_app.command("linker")
def evaluate_linker_raw_cmd(
    model: str = typer.Argument(..., help="Pipeline folder or installed package name"),
    corpus: str = typer.Option("pse-i-cerd", "--corpus", "-c", help="pse-i-cerd or pse-i"),
    split: str = typer.Option("dev", "--split", help="dev (model selection), test or optimization (PSE-I)"),
    o_bias: List[float] = typer.Option([], "--o-bias", help="Decode with this o_bias (repeatable; default: the pipeline's own)"),
    shared: Path = typer.Option(Path("../shared/data"), "--shared", help="Folder with pse-i/"),
    annotations: Path = typer.Option(Path("annotations/pse-i-cerd"), "--annotations", help="Folder with the team annotation"),
    batch_size: int = typer.Option(8, "--batch-size", min=1, help="Texts per nlp.pipe batch"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON here"),
) -> None:
    """The parallelism linker alone on the raw path: the components up to
    it run once on the essays read as raw text, then it decodes once per
    --o-bias; EPM/MPBM/MBAWO/MWO as `evaluate-raw` reports them."""
    from wasabi import msg

    from ..evaluation.linker_raw import evaluate_linker_raw, score_rows

    with _fail_on(OSError, ValueError):
        r = evaluate_linker_raw(model, corpus=corpus, split=split, shared=shared, annotations=annotations,
                                biases=o_bias or [None], batch_size=batch_size, output=output)
    msg.table(score_rows(r), header=("o_bias", "EPM F1", "MPBM F1", "MBAWO F1", "MWO F1", "EPM P", "EPM R"), divider=True,
              title=f"{model} {r['version']} linker on {corpus} {split} as raw text: {r['texts']} texts, {r['seconds']} s")
    if output is not None:
        msg.good(f"wrote {output}")


@evaluate_app.command("configure")
def evaluate_configure_cmd(
    path: Path = typer.Argument(DATA, exists=True, dir_okay=False, help="A ConFiguRe-format JSON file"),
    model: Path = typer.Option(Path("pipelines/zh_rhetoric"), "--model", "-m", exists=True, file_okay=False, help="Pipeline with figurative_units"),
    split: Optional[str] = typer.Option(None, "--split", help="Only this part (train/dev) of --split-file; default the whole file"),
    split_file: Path = typer.Option(SPLIT, "--split-file", exists=True, dir_okay=False),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the figures as JSON"),
) -> None:
    """ConFiguRe's tasks on the raw path: fragments in, the pipeline's
    figurative units scored (extraction, classification given the gold units,
    recognition, overlap), beside the paper's figures."""
    import spacy
    from wasabi import msg

    from ..evaluation.configure import evaluate_configure, headline, load_passages

    passages = load_passages(path, split, split_file if split else None)
    scores = evaluate_configure(spacy.load(model), passages)
    msg.table(headline(scores), header=("figure", "ours (%)", "paper model", "paper (%)"), divider=True,
              title=f"{path.name}{' ' + split if split else ''}: {len(passages)} passages, {scores['gold']} units, model {model}")
    align = scores["clause_alignment"]
    msg.info(f"gold units on clause boundaries: {align['aligned']} of {align['units']}")
    if output:
        _write_json(output, scores)


@evaluate_app.command("segmenter")
def evaluate_segmenter_cmd(
    data: List[Path] = typer.Argument(..., help="DocBins with gold words"),
    model: Optional[Path] = typer.Option(None, "--pkuseg-model", help="pkuseg model folder; none = character segmentation"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write the scores as JSON here"),
) -> None:
    """Word-level P/R/F of the tokenizer against the gold words of DocBins."""
    import srsly

    from ..corpora.docbin import read_docbin
    from ..tokenizer.chinese import make_nlp, segment, segmentation_prf, sentence_words

    nlp = make_nlp(model)
    scores = {}
    for path in data:
        gold, pred = segment(nlp, sentence_words(read_docbin(path, nlp.vocab)))
        scores[str(path)] = segmentation_prf(gold, pred)
    _print_table(f"Word segmentation ({model or 'characters'})", scores)
    if output:
        srsly.write_json(output, scores)


@evaluate_app.command("suggestions")
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
    _write_json(summary_path, result)
    typer.echo(json.dumps(result, ensure_ascii=False, indent=1))


@evaluate_app.command("suggestion-samples")
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
