"""The ``rhetoric`` command line (also ``python -m spacy_rhetoric``).

Each command is a thin Typer wrapper over a library function, so that every
workflow is also usable from Python. ``analyze``, ``serve`` and ``generate``
are top-level commands; the others are in the groups ``convert``,
``evaluate``, ``tune``, ``pipeline``, ``benchmark`` and ``research``, one
module each (as ``spacy/cli/``); importing them registers their commands.
"""
from . import analyze, benchmark, convert, evaluate, generate, pipeline, research, tune  # noqa: F401
from ._util import app

__all__ = ["app", "main"]


def main() -> None:
    """Entry point of the ``rhetoric`` console script."""
    app()
