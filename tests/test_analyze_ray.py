"""``analyze --engine ray`` gives the records of the local engine.

Runs the shipped pipeline ``pipelines/zh_rhetoric`` on four real PSE-I test
essays (three as XML, one as GBK text), a binary file (an error record
written by the driver) and a text over ``--max-length`` (an error record
written by an actor), with both engines, and compares the records as sorted
sets; then interrupts the Ray output mid-line and resumes it with Ray.
Ray starts on this machine with one actor (about 30 s in all). Skipped when
Ray is not installed (``pip install -e '.[ray]'``; ``make test`` installs it).
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import List

import pytest
from typer.testing import CliRunner

from spacy_rhetoric.analysis.io import read_pse_essay
from spacy_rhetoric.cli import app
from spacy_rhetoric.corpora.pse_i import read_splits

pytest.importorskip("ray.data", reason="the ray engine needs Ray: pip install -e '.[ray]'")

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "zh_rhetoric"
runner = CliRunner()


def read_jsonl(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf8").splitlines()]


def as_set(records: List[dict]) -> List[str]:
    return sorted(json.dumps(r, ensure_ascii=False, sort_keys=True) for r in records)


@pytest.fixture(scope="module")
def inputs(pse_dir: Path, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("ray") / "in"
    folder.mkdir()
    names = read_splits(pse_dir)["test"][:4]
    for name in names[:3]:
        (folder / name).write_bytes((pse_dir / "xml" / name).read_bytes())
    text = read_pse_essay(pse_dir / "xml" / names[3])
    (folder / "gbk.txt").write_bytes(text.encode("gbk"))
    (folder / "long.txt").write_text(text * 4, encoding="utf8")
    (folder / "binary.txt").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + text.encode("utf8")[:30])
    return folder


def run(inputs: Path, out: Path, *extra: str):
    # every essay is under 1,500 characters; long.txt is four essays
    args = ["analyze", str(inputs), "--model", str(PIPELINE), "-o", str(out), "--no-progress", "--batch-size", "2",
            "--max-length", "3000", *extra]
    return runner.invoke(app, args)


def test_ray_engine_matches_local_and_resumes(inputs, tmp_path):
    local, ray_out = tmp_path / "local.jsonl", tmp_path / "ray.jsonl"
    result = run(inputs, local, "--engine", "local")
    assert result.exit_code == 1, result.output
    expected = read_jsonl(local)
    errors = {r["id"]: r["error"]["type"] for r in expected if "error" in r}
    assert errors == {"binary": "not_text", "long": "too_long"}
    assert len(expected) == 6 and sum(len(r["sentences"]) for r in expected if "error" not in r) > 50

    result = run(inputs, ray_out, "--engine", "ray", "--num-actors", "1")
    assert result.exit_code == 1, result.output
    assert any(line.startswith("documents: 4 ok, 2 failed -> ") for line in result.stderr.splitlines()), result.stderr
    assert as_set(read_jsonl(ray_out)) == as_set(expected)

    # interrupted in the middle of the fourth line, resumed with Ray
    data = ray_out.read_bytes()
    ends = [i + 1 for i, byte in enumerate(data) if byte == ord("\n")]
    ray_out.write_bytes(data[:ends[2] + 50])
    result = run(inputs, ray_out, "--engine", "ray", "--num-actors", "1", "--resume")
    assert result.exit_code == 1, result.output
    assert any(line.startswith("documents: ") and ", 3 skipped (" in line for line in result.stderr.splitlines())
    assert as_set(read_jsonl(ray_out)) == as_set(expected)
