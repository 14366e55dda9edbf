"""The Typer apps of the ``rhetoric`` command line and the helpers that its
command modules share."""
from __future__ import annotations

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

    def fmt(value):
        return f"{value:.4f}" if isinstance(value, float) else value

    rows = [(split, *map(fmt, values.values())) for split, values in stats.items()]
    header = ("split", *next(iter(stats.values())).keys())
    msg.table(rows, header=header, title=title, divider=True)
