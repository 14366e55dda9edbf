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

    rows = [(split, *values.values()) for split, values in stats.items()]
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


def main() -> None:
    """Entry point of the ``rhetoric`` console script."""
    app()
