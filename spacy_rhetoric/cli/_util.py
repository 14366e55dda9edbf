"""The Typer apps of the ``rhetoric`` command line and the helpers that its
command modules share.

``analyze``, ``serve`` and ``generate`` are top-level commands; everything
else sits in a group (a ``typer.Typer`` added with ``app.add_typer``, one
module per group, as ``spacy/cli/``). Every app sets
``rich_markup_mode=None``: help texts hold literal brackets
(``spacy-rhetoric[ray]``, ``[components.rhetoric_generator]``) that Rich
markup would drop.
"""
from __future__ import annotations

import json
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator, Type

import typer


def _group(help: str) -> typer.Typer:
    return typer.Typer(help=help, no_args_is_help=True, rich_markup_mode=None)


app = typer.Typer(
    name="rhetoric",
    help="Find, explain and generate rhetorical devices in Chinese prose.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)
convert_app = _group("Convert corpora, annotation sheets and pretrained assets (DocBins, JSONL, model folders).")
evaluate_app = _group("Evaluate pipelines on raw text, analysis records and suggestions.")
tune_app = _group("Choose decision thresholds on dev (never on test).")
pipeline_app = _group("Build and change pipeline folders; train their separately trained parts.")
benchmark_app = _group("Measure speed (words/second, latency, peak memory).")
research_app = _group("Studies and experiment records (gold-unit figures are upper bounds).")
for _name, _sub in [("convert", convert_app), ("evaluate", evaluate_app), ("tune", tune_app),
                    ("pipeline", pipeline_app), ("benchmark", benchmark_app), ("research", research_app)]:
    app.add_typer(_sub, name=_name)


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


@contextmanager
def _fail_on(*errors: Type[BaseException]) -> Iterator[None]:
    """Inside the block, any of ``errors`` ends the command as a clear error:
    its message through wasabi's ``msg.fail`` and exit code 1 (no
    traceback)."""
    from wasabi import msg

    try:
        yield
    except errors as err:
        msg.fail(str(err), exits=1)


def _write_json(path: Path, data: Any) -> None:
    """Write ``data`` to ``path`` as UTF-8 JSON (indent 1, characters kept,
    not escaped), creating the folder."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf8")
