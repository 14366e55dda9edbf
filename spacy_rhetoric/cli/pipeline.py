"""``rhetoric pipeline ...``: build and change pipeline folders: finalize, assemble, add, swap and average components, train the separately trained parts (segmenter, figurative units, the generator's LoRA)."""
from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from ._util import _fail_on, _vocab, _write_json, pipeline_app

DATA = Path("../shared/data/configure/valid.json")
SPLIT = Path("configs/configure_split.json")


@pipeline_app.command("finalize")
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


@pipeline_app.command("assemble")
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


@pipeline_app.command("add-component")
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

    with _fail_on(OSError, ValueError):
        nlp = add_component(target, source, name, before=before, corpora=corpus)
    msg.good(f"{target}: {', '.join(nlp.pipe_names)}")


@pipeline_app.command("swap-component")
def swap_component_cmd(
    target: Path = typer.Argument(..., exists=True, file_okay=False, help="Pipeline folder, e.g. pipelines/zh_rhetoric"),
    source: Path = typer.Argument(..., exists=True, file_okay=False, help="Trained pipeline holding the component, e.g. training/zh_rhetoric_linker/model-best"),
    name: str = typer.Option("parallelism_linker", "--name", help="The component to replace"),
    cfg: List[str] = typer.Option([], "--cfg", help="KEY=JSON value set in the component's cfg (repeatable), e.g. o_bias=0.2"),
    lock: Optional[Path] = typer.Option(None, "--lock", help="Folder created with mkdir and held while the pipeline is rewritten (retried until free)"),
    average: Optional[float] = typer.Option(None, "--average", min=0.0, max=1.0, help="Combine the component with the source's instead of replacing it, the source's share (average-classifiers)"),
    version: Optional[str] = typer.Option(None, "--version", help="Write this version to the meta instead of bumping the patch"),
) -> None:
    """Replace one component of a pipeline folder with a trained one (or
    combine the two), reading the pipeline as it is now, and bump its patch
    version (or set --version); the new folder is written beside it and
    swapped in."""
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
    with _fail_on(OSError, ValueError):
        version = swap_component(target, source, name, cfg=values, lock=lock, average_weight=average, version=version)
    msg.good(f"{target}: {name} from {source}, version {version}")


@pipeline_app.command("average")
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

    with _fail_on(OSError, ValueError):
        nlp = average_classifiers(target, second, output, second_weight=second_weight, name=name, version=version)
    msg.good(f"wrote {output}: {', '.join(nlp.pipe_names)}")


@pipeline_app.command("train-segmenter")
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


@pipeline_app.command("train-figurative-units")
def train_figurative_units_cmd(
    base: Path = typer.Argument(..., exists=True, file_okay=False, help="The pipeline to train on top of (frozen): pipelines/zh_rhetoric"),
    output: Path = typer.Argument(..., help="Writes the pipeline with the trained component here"),
    data: Path = typer.Option(DATA, "--data", exists=True, dir_okay=False, help="ConFiguRe file with the train and dev works"),
    split: Path = typer.Option(SPLIT, "--split", exists=True, dir_okay=False, help="The works of train and dev"),
    config: Path = typer.Option(Path("configs/figurative_units.cfg"), "--config", "-c", exists=True, dir_okay=False),
    metrics: Optional[Path] = typer.Option(None, "--metrics", help="Write the history and dev figures as JSON"),
) -> None:
    """Train figurative_units on the train works of a ConFiguRe file over a
    frozen pipeline; epoch and o_bias are chosen on the dev works."""
    from thinc.api import Config

    from ..evaluation.configure import load_passages
    from ..ml.figurative_training import train_figurative_units

    cfg = Config().from_disk(config)
    component = dict(cfg["components"]["figurative_units"])
    component.pop("factory", None)
    training = dict(cfg["training"])
    result = train_figurative_units(
        base, load_passages(data, "train", split), load_passages(data, "dev", split), output,
        component_config=component, **training,
    )
    dev = result["dev"]
    typer.echo(f"best epoch {result['best_epoch']}, o_bias {result['o_bias']}, b_bias {result['b_bias']}")
    for key in ("extraction_f", "classification_micro_f", "classification_macro_f", "recognition_f", "recognition_macro_f", "overlap_f"):
        typer.echo(f"dev {key}: {dev[key]:.4f}")
    if metrics:
        _write_json(metrics, result)


@pipeline_app.command("add-figurative-units")
def add_figurative_units_cmd(
    source: Path = typer.Argument(..., exists=True, file_okay=False, help="A pipeline holding the trained figurative_units"),
    target: Path = typer.Argument(..., exists=True, file_okay=False, help="The shipped pipeline to add it to (read from disk now)"),
    version: Optional[str] = typer.Option(None, "--version", help="Write this version to the meta instead of bumping the patch"),
) -> None:
    """Add (or replace) figurative_units in TARGET, sourced from SOURCE; the
    other components are left as they are on disk. Saves to a temporary
    folder beside TARGET, then swaps it in, and bumps the patch version (or
    sets --version)."""
    from ..ml.figurative_training import add_to_pipeline

    version = add_to_pipeline(source, target, version=version)
    typer.echo(f"{target}: figurative_units added, version {version}")


@pipeline_app.command("finetune-generator")
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
