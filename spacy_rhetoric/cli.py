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


def main() -> None:
    """Entry point of the ``rhetoric`` console script."""
    app()
