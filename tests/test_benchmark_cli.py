"""``rhetoric benchmark pipeline|latency``: a folder that is not a pipeline is
one line on stderr and exit code 1, not a traceback."""
from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_rhetoric.cli import app

runner = CliRunner()


@pytest.mark.parametrize("command", [["pipeline", "--repeat", "1", "--n-process", "1"], ["latency", "--n", "1", "--repeat", "1"]])
def test_a_folder_that_is_not_a_pipeline_is_one_line(command, pse_dir: Path, tmp_path: Path):
    # e.g. a `spacy package` folder, whose pipeline is two levels down
    not_a_pipeline = tmp_path / "zh_rhetoric-0.3.0"
    (not_a_pipeline / "zh_rhetoric").mkdir(parents=True)
    result = runner.invoke(app, ["benchmark", *command, "-m", str(not_a_pipeline), "--pse-dir", str(pse_dir)])
    assert result.exit_code == 1
    assert "cannot load pipeline" in result.output
    assert "Traceback" not in result.output
    # an uncaught error would be the exception here
    assert result.exception is None or isinstance(result.exception, SystemExit)
