"""Evaluation commands: segmentation, rhetoric classification and components, parallelism, whole essays, CMC, generated text."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import app, _print_table


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


@app.command("hauser-cmdag")
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


@app.command("evaluate-segmenter")
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


@app.command("evaluate-parallelism")
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

    from ..research.whole_essays import evaluate_whole_essays, headline_rows

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


@app.command("evaluate-rhetoric")
def evaluate_rhetoric_cmd(
    model: str = typer.Argument(..., help="Pipeline folder/name with rhetoric_textcat and/or rhetoric_components, or 'rules' for the rule baseline"),
    data: Path = typer.Argument(..., exists=True, dir_okay=False, help="Gold DocBin, e.g. corpus/simile/test.spacy"),
    output: Optional[Path] = typer.Option(None, "--output", "-o", help="Write all scores as JSON here"),
    gold_sents: bool = typer.Option(True, "--gold-sents/--no-gold-sents", help="Give the pipeline the gold sentence starts"),
) -> None:
    """Sentence classification (EM, micro/macro P/R/F1, mapping rates) and component scores on gold words."""
    from wasabi import msg

    from ..evaluation.rhetoric import evaluate_rhetoric, summary_rows

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

    from ..research.cmc import evaluate_cmc

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


@app.command("evaluate-raw")
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

    try:
        config = {"components": {"rhetoric_textcat": {"parallelism_kinds": ["in_paragraph"]}}} if in_paragraph_labels else None
        r = evaluate_raw(model, corpus, shared=shared, annotations=annotations, split=split,
                         gold_units=gold_units, batch_size=batch_size, config=config, output=output)
    except (OSError, ValueError) as err:
        msg.fail(str(err), exits=1)
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


@app.command("score-records")
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

    try:
        gold, aligned, missing = align_records(read_gold(corpus, shared, annotations, split),
                                               (rec for _, rec in iter_jsonl_objects(records)))
    except (OSError, ValueError) as err:
        msg.fail(str(err), exits=1)
    if missing:
        msg.warn(f"{len(missing)} {corpus} {split} texts have no record and are not scored: {', '.join(missing[:10])}")
    msg.table(device_counts(gold, aligned), header=("", "analysed", "gold"), divider=True,
              title=f"{records}: {len(gold)} {corpus} {split} texts")
    rows = [r[:4] for r in headline_rows({"raw": score_records(gold, aligned)})
            if "coarse/" in r[0] and r[0].startswith("all ") or "micro" in r[0] or "EPM" in r[0]]
    msg.table(rows, header=("score", "P", "R", "F1"), divider=True)


@app.command("evaluate-linker-raw")
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

    try:
        r = evaluate_linker_raw(model, corpus=corpus, split=split, shared=shared, annotations=annotations,
                                biases=o_bias or [None], batch_size=batch_size, output=output)
    except (OSError, ValueError) as err:
        msg.fail(str(err), exits=1)
    msg.table(score_rows(r), header=("o_bias", "EPM F1", "MPBM F1", "MBAWO F1", "MWO F1", "EPM P", "EPM R"), divider=True,
              title=f"{model} {r['version']} linker on {corpus} {split} as raw text: {r['texts']} texts, {r['seconds']} s")
    if output is not None:
        msg.good(f"wrote {output}")
