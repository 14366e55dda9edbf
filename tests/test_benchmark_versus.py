"""``rhetoric benchmark versus``: pipelines run by different interpreters,
timed alternately, each run in its own process."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_rhetoric.evaluation.benchmark import benchmark_versus, run_seconds
from spacy_rhetoric.cli import app

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "zh_rhetoric"


def test_run_seconds_reads_both_layouts():
    now = {"results": [{"rows": [{"n_process": 1, "seconds_best": 1.5}, {"n_process": 2, "seconds_best": 1.2}]}]}
    old = {"model": {"name": "zh_rhetoric"}, "rows": [{"n_process": 1, "seconds_best": 2.0, "seconds_mean": 2.1}]}
    assert run_seconds(now) == {1: 1.5, 2: 1.2}
    assert run_seconds(old) == {1: 2.0}
    with pytest.raises(ValueError, match="no rows"):
        run_seconds({"results": []})


def test_two_sides_alternate_and_report_the_speedup(pse_dir: Path, tmp_path: Path):
    """The same interpreter on both sides (one through a relative link, as a
    virtual environment's is): every run kept, a speed-up per setting,
    computed from medians."""
    link = tmp_path / "py"
    link.symlink_to(sys.executable)
    result = benchmark_versus([(sys.executable, PIPELINE), (str(link), PIPELINE)], pse_dir=pse_dir,
                              n_processes=[1], rounds=1, workdir=tmp_path)
    assert result["docs"] == 42 and result["rounds"] == 1
    assert [len(r) for r in result["runs"]] == [1, 1]
    first, second = result["sides"]
    assert first["by_n_process"]["1"]["seconds"] == [run_seconds(result["runs"][0][0])[1]]
    assert first["speedup_vs_first_median"] == {"1": 1.0}
    ratio = first["by_n_process"]["1"]["seconds_median"] / second["by_n_process"]["1"]["seconds_median"]
    assert second["speedup_vs_first_median"]["1"] == pytest.approx(ratio)


def test_a_failing_side_is_one_line(pse_dir: Path, tmp_path: Path):
    out = tmp_path / "out.json"
    result = CliRunner().invoke(app, ["benchmark", "versus", "--side", f"{sys.executable}={tmp_path / 'missing'}",
                                      "--side", f"{sys.executable}={PIPELINE}", "--pse-dir", str(pse_dir),
                                      "--n-process", "1", "--rounds", "1", "-o", str(out)])
    assert result.exit_code == 1
    assert "side 0" in result.output and "Traceback" not in result.output
    assert not out.exists()
    bad = CliRunner().invoke(app, ["benchmark", "versus", "--side", "no-equals-sign", "--side", "x=y",
                                   "--pse-dir", str(pse_dir)])
    assert bad.exit_code == 1 and "PYTHON=MODEL" in bad.output
