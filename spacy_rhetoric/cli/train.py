"""Training and shipping: the word segmenter, finalizing and assembling pipelines, threshold tuning."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import app, _vocab


@app.command("train-segmenter")
def train_segmenter_cmd(
    train: List[Path] = typer.Option(..., "--train", help="Training DocBins (gold words), repeatable"),
    dev: Path = typer.Option(..., "--dev", help="DocBin pkuseg reports its own score on while training"),
    output_dir: Path = typer.Option(..., "--output", "-o", help="Folder for the pkuseg model"),
    iterations: int = typer.Option(10, help="pkuseg training iterations"),
    feature_trim: int = typer.Option(0, help="Drop features seen at most this many times (smaller model)"),
) -> None:
    """Train a spacy-pkuseg word segmenter on the gold words of DocBins."""
    import tempfile

    from ..corpora.docbin import read_docbin
    from ..tokenizer.chinese import sentence_words, train_pkuseg, write_segmentation_file

    vocab = _vocab()
    with tempfile.TemporaryDirectory() as tmp:
        train_txt, dev_txt = Path(tmp) / "train.txt", Path(tmp) / "dev.txt"
        n = write_segmentation_file((w for p in train for w in sentence_words(read_docbin(p, vocab))), train_txt)
        write_segmentation_file(sentence_words(read_docbin(dev, vocab)), dev_txt)
        typer.echo(f"Training pkuseg on {n} sentences for {iterations} iterations")
        train_pkuseg(train_txt, dev_txt, output_dir, iterations, feature_trim)
    typer.echo(f"Saved pkuseg model to {output_dir}")


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

    from ..packaging import finalize_trained

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

    from ..packaging import assemble_to_disk

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


@app.command("tune-thresholds")
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

    from ..evaluation.rhetoric import tune_label_thresholds, tune_thresholds

    if per_label:
        for label, r in tune_label_thresholds(model, [dev, *extra_dev], output, min_support=min_support).items():
            msg.info(f"coarse/{label}: threshold {r['threshold']:.2f} -> dev F1 {r['f']:.4f} ({r['support']} dev sentences)")
        return
    for name, r in tune_thresholds(model, dev, output).items():
        msg.info(f"{name}: threshold {r['threshold']:.2f} -> dev F1 {r['score']:.4f}")


@app.command("tune-thresholds-raw")
def tune_thresholds_raw_cmd(
    model: Path = typer.Argument(..., exists=True, file_okay=False, help="Trained pipeline folder"),
    output: Path = typer.Argument(..., help="Folder for the pipeline with the chosen thresholds (may be MODEL)"),
    corpus: List[str] = typer.Option(["pse-i-cerd", "simile"], "--corpus", "-c", help="Dev corpora read as raw text (their dev split; never test)"),
    shared: Path = typer.Option(Path("../shared/data"), "--shared", help="Folder with pse-i/, simile/, cmc/"),
    annotations: Path = typer.Option(Path("annotations/pse-i-cerd"), "--annotations", help="Folder with the team annotation"),
    min_support: int = typer.Option(10, "--min-support", help="Tune only devices with this many dev units"),
    tolerance: float = typer.Option(0.01, "--tolerance", help="Take the threshold nearest 0.5 whose dev F1 is within this of the best"),
    components: bool = typer.Option(True, "--components/--no-components", help="Also tune rhetoric_components per label"),
    linker_bias: bool = typer.Option(True, "--linker-bias/--no-linker-bias", help="First tune parallelism_linker's o_bias (EPM and MBAWO F1 on the dev essays)"),
) -> None:
    """parallelism_linker's o_bias, then one rhetoric_textcat threshold per
    coarse device, then one rhetoric_components threshold per component
    label, chosen on the dev splits read as raw text (the user's path,
    linker rule included)."""
    from wasabi import msg

    from ..evaluation.raw_path import read_gold, tune_component_thresholds_raw, tune_linker_bias_raw, tune_thresholds_raw
    from ..packaging import load_pipeline, write_component

    nlp = load_pipeline(model)
    devs = [read_gold(c, shared, annotations, "dev") for c in corpus]
    names = []
    if linker_bias and "parallelism_linker" in nlp.pipe_names:
        r = tune_linker_bias_raw(nlp, devs)
        grid = ", ".join(f"{b:.2f}: {f:.4f}" for b, f in r["grid"].items())
        msg.info(f"parallelism_linker: o_bias {r['o_bias']:.2f} -> dev (EPM F1 + MBAWO F1) / 2 = {r['f']:.4f} ({r['texts']} dev texts; {grid})")
        names.append("parallelism_linker")
    for label, r in tune_thresholds_raw(nlp, devs, min_support=min_support, tolerance=tolerance).items():
        msg.info(f"coarse/{label}: threshold {r['threshold']:.2f} -> dev F1 {r['f']:.4f} ({r['support']} dev units)")
    names.append("rhetoric_textcat")
    if components and "rhetoric_components" in nlp.pipe_names:
        for label, r in tune_component_thresholds_raw(nlp, devs, min_support=min_support, tolerance=tolerance).items():
            msg.info(f"component {label}: threshold {r['threshold']:.2f} -> dev F1 {r['f']:.4f} ({r['support']} dev spans)")
        names.append("rhetoric_components")
    # only these components' settings change: every other file stays as it is
    for name in names:
        write_component(model, output, nlp, name)
        model = output
    msg.good(f"wrote {output}")


@app.command("average-classifiers")
def average_classifiers_cmd(
    target: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline whose classifier is the first member, e.g. training/zh_rhetoric_trf_final"),
    second: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline with the second classifier, e.g. pipelines/zh_rhetoric"),
    output: Path = typer.Argument(..., help="Folder for the pipeline with the averaged classifier (may be TARGET)"),
    second_weight: float = typer.Option(0.3, "--second-weight", help="The second classifier's share of the averaged probabilities, in [0, 1]"),
    name: str = typer.Option("rhetoric_textcat", "--name", help="The classifier in both pipelines"),
    version: Optional[str] = typer.Option(None, "--version", help="Version for the output's meta"),
) -> None:
    """Average two pipelines' sentence classifiers (spacy_rhetoric.ProbabilityAverage.v1):
    TARGET with its classifier's probabilities mixed with SECOND's. SECOND's
    tok2vec joins TARGET's pipeline once, shared by every second member that
    listens to it (TARGET's own tok2vec when it has the same weights); any
    other encoder is copied into the second member. Tune the thresholds
    again afterwards (tune-thresholds-raw)."""
    from wasabi import msg

    from ..packaging import average_classifiers

    try:
        nlp = average_classifiers(target, second, output, second_weight=second_weight, name=name, version=version)
    except (OSError, ValueError) as err:
        msg.fail(str(err), exits=1)
    msg.good(f"wrote {output}: {', '.join(nlp.pipe_names)}")


@app.command("add-component")
def add_component_cmd(
    target: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline folder to add to, e.g. pipelines/zh_rhetoric"),
    source: Path = typer.Argument(..., exists=True, file_okay=False, help="Trained pipeline holding the component, e.g. training/cross_paragraph/model-best"),
    name: str = typer.Option("cross_paragraph_linker", "--name", help="The component to source"),
    before: Optional[str] = typer.Option("rhetoric_textcat", "--before", help="Place it before this component (its own name: where the one it replaces was)"),
    corpus: List[str] = typer.Option([], "--corpus", help="Corpus the component was trained on, for the meta's sources (repeatable), e.g. pse-original"),
) -> None:
    """Source a separately trained component into a shipped pipeline,
    writing only its folder, config.cfg and meta.json."""
    from wasabi import msg

    from ..packaging import add_component

    try:
        nlp = add_component(target, source, name, before=before, corpora=corpus)
    except (OSError, ValueError) as err:
        msg.fail(str(err), exits=1)
    msg.good(f"{target}: {', '.join(nlp.pipe_names)}")


@app.command("swap-component")
def swap_component_cmd(
    target: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline folder, e.g. pipelines/zh_rhetoric"),
    source: Path = typer.Argument(..., exists=True, file_okay=False, help="Trained pipeline holding the component, e.g. training/zh_rhetoric_linker/model-best"),
    name: str = typer.Option("parallelism_linker", "--name", help="The component to replace"),
    cfg: List[str] = typer.Option([], "--cfg", help="KEY=JSON value set in the component's cfg (repeatable), e.g. o_bias=0.2"),
    lock: Optional[Path] = typer.Option(None, "--lock", help="Folder created with mkdir and held while the pipeline is rewritten (retried until free)"),
    average: Optional[float] = typer.Option(None, "--average", min=0.0, max=1.0, help="Combine the component with the source's instead of replacing it, the source's share (average-classifiers)"),
) -> None:
    """Replace one component of a pipeline folder with a trained one (or
    combine the two), reading the pipeline as it is now, and bump its patch
    version; the new folder is written beside it and swapped in."""
    import json

    from wasabi import msg

    from ..packaging import swap_component

    values = {}
    for item in cfg:
        key, sep, value = item.partition("=")
        if not sep:
            msg.fail(f"--cfg {item!r}: expected KEY=VALUE", exits=1)
        try:
            values[key] = json.loads(value)
        except json.JSONDecodeError:
            msg.fail(f"--cfg {item!r}: the value is not JSON", exits=1)
    try:
        version = swap_component(target, source, name, cfg=values, lock=lock, average_weight=average)
    except (OSError, ValueError) as err:
        msg.fail(str(err), exits=1)
    msg.good(f"{target}: {name} from {source}, version {version}")
