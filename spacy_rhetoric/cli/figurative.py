"""Figurative unit commands: train the ``figurative_units`` component, add it
to a shipped pipeline, and score a pipeline on a ConFiguRe-format file."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Optional

import typer

from ._util import app

DATA = Path("../shared/data/configure/valid.json")
SPLIT = Path("configs/configure_split.json")


@app.command("train-figurative-units")
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
        metrics.parent.mkdir(parents=True, exist_ok=True)
        metrics.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf8")


@app.command("add-figurative-units")
def add_figurative_units_cmd(
    source: Path = typer.Argument(..., exists=True, file_okay=False, help="A pipeline holding the trained figurative_units"),
    target: Path = typer.Argument(..., exists=True, file_okay=False, help="The shipped pipeline to add it to (read from disk now)"),
) -> None:
    """Add (or replace) figurative_units in TARGET, sourced from SOURCE; the
    other components are left as they are on disk. Saves to a temporary
    folder beside TARGET, then swaps it in, and bumps the patch version."""
    from ..ml.figurative_training import add_to_pipeline

    version = add_to_pipeline(source, target)
    typer.echo(f"{target}: figurative_units added, version {version}")


@app.command("evaluate-configure")
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
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(scores, ensure_ascii=False, indent=1), encoding="utf8")
