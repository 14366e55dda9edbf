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


def test_benchmark_memory_reports_the_peak_rss_of_each_analyze_run(pse_dir: Path, tmp_path: Path):
    import json

    import spacy

    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.to_disk(tmp_path / "segmenter")
    out = tmp_path / "memory.json"
    result = runner.invoke(app, ["benchmark", "memory", "-m", str(tmp_path / "segmenter"), "--pse-dir", str(pse_dir),
                                 "--chars", "3000", "--chars", "12000", "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(out.read_text(encoding="utf8"))["rows"]
    assert [r["chars"] for r in rows] == [3000, 12000]
    for row in rows:
        assert row["returncode"] == 0 and row["error"] is None and row["sentences"] > 0
        assert row["peak_rss_mib"] > 10  # a Python process with spaCy loaded
    assert rows[1]["sentences"] > rows[0]["sentences"]


def test_competing_load_runs_busy_processes_only_inside_the_block():
    import psutil

    from spacy_rhetoric.evaluation.benchmark import CompetingLoad

    with CompetingLoad(2) as load:
        procs = [psutil.Process(p.pid) for p in load._procs]
        assert len(procs) == 2 and all(p.is_running() and p.status() != psutil.STATUS_ZOMBIE for p in procs)
    assert not any(p.is_running() for p in procs)
    with pytest.raises(ValueError):
        CompetingLoad(-1)
