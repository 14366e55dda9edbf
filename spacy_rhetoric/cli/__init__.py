"""The ``rhetoric`` command line (also ``python -m spacy_rhetoric``).

Each command is a thin Typer wrapper over a library function, so that every
workflow is also usable from Python. One module per kind of work (as
``spacy/cli/``); importing them registers their commands on ``app``.
"""
from . import analyze, assets, benchmark, corpora, evaluate, figurative, generate, train  # noqa: F401
from ._util import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``rhetoric`` console script."""
    app()
