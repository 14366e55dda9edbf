"""The ``rhetoric`` command line as a user meets it: ``--help`` shows the
three commands a user runs first and the six groups, and help texts keep
their brackets (Rich markup would read ``[ray]`` as a style tag and drop it).

Help is checked with whitespace collapsed and the terminal width fixed in
the environment, so line wrapping never decides a result."""
from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from spacy_rhetoric.cli import app

TOP_LEVEL = {"analyze", "serve", "generate"}
GROUPS = {"convert", "evaluate", "tune", "pipeline", "benchmark", "research"}


def _help(*args: str, columns: int = 80) -> str:
    result = CliRunner().invoke(app, [*args, "--help"], env={"COLUMNS": str(columns), "TERMINAL_WIDTH": str(columns)})
    assert result.exit_code == 0, result.output
    return " ".join(result.output.split())


def _listed_commands(help_text: str) -> set:
    """The names in the ``Commands:`` section of click's plain help."""
    section = help_text.split("Commands:", 1)[1]
    return {m.group(1) for m in re.finditer(r"^  ([a-z][a-z0-9-]*)\s", section, flags=re.M)}


def test_python_m_help_lists_exactly_the_user_commands_and_the_groups():
    env = {**os.environ, "COLUMNS": "100", "TERMINAL_WIDTH": "100"}
    proc = subprocess.run([sys.executable, "-m", "spacy_rhetoric", "--help"], capture_output=True, text=True,
                          timeout=300, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert _listed_commands(proc.stdout) == TOP_LEVEL | GROUPS


@pytest.mark.parametrize("columns", [60, 200])
def test_help_keeps_bracketed_text(columns):
    assert "pip install 'spacy-rhetoric[ray]'" in _help("analyze", columns=columns)
    assert "Config with [components.rhetoric_generator] naming an LLM backend" in _help("serve", columns=columns)
    assert "Config with [components.rhetoric_generator]; adds the generator" in _help("pipeline", "assemble", columns=columns)


@pytest.mark.parametrize("group,commands", [
    ("evaluate", {"raw", "records", "linker", "configure", "segmenter", "suggestions", "suggestion-samples"}),
    ("tune", {"thresholds", "object-thresholds"}),
    ("pipeline", {"finalize", "assemble", "add-component", "swap-component", "average", "train-segmenter",
                  "train-figurative-units", "add-figurative-units", "finetune-generator"}),
])
def test_groups_list_their_commands(group, commands):
    result = CliRunner().invoke(app, [group, "--help"], env={"COLUMNS": "100"})
    assert result.exit_code == 0, result.output
    assert _listed_commands(result.output) == commands


@pytest.mark.parametrize("old", ["evaluate-raw", "tune-thresholds-raw", "finalize-pipeline", "convert-encoder"])
def test_flat_names_are_gone(old):
    """One name per command: the flat names of the old command line are not
    kept as aliases."""
    result = CliRunner().invoke(app, [old, "--help"])
    assert result.exit_code != 0 and "No such command" in result.output
