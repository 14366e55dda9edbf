"""``analyze`` used carelessly or with hostile inputs: an output path that is
one of the inputs, an unreadable subfolder, control characters in file
names. Nothing may be lost, skipped in silence, or forged on the terminal.

The pipeline is a small real one (the clause segmenter on character tokens,
saved to disk and loaded by path as users do): these checks are about the
driver, not the models.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import spacy
from typer.testing import CliRunner

from spacy_rhetoric.cli import app

runner = CliRunner()
ESSAY = "温暖是一双手。\n温暖是一句话，温暖是一个家！\n"


@pytest.fixture(scope="module")
def model(tmp_path_factory) -> str:
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    path = tmp_path_factory.mktemp("pipeline") / "segmenter"
    nlp.to_disk(path)
    return str(path)


def read_jsonl(path: Path):
    # split on \n alone: a record may hold U+0085 or U+2028, which splitlines() also breaks on
    return [json.loads(line) for line in path.read_text(encoding="utf8").split("\n") if line]


@pytest.mark.parametrize("fmt,how", [("jsonl", "same"), ("jsonl", "hardlink"), ("html", "same"), ("html", "symlink")])
def test_an_output_that_is_an_input_is_refused(model, tmp_path, fmt, how):
    mine = tmp_path / "mine.txt"
    mine.write_text(ESSAY, encoding="utf8")
    before = mine.read_bytes()
    output = mine
    if how == "hardlink":
        output = tmp_path / "other.txt"
        os.link(mine, output)
    elif how == "symlink":
        output = tmp_path / "report.html"
        output.symlink_to(mine)
    result = runner.invoke(app, ["analyze", str(mine), "--model", model, "--format", fmt, "-o", str(output),
                                 "--no-progress"])
    assert result.exit_code == 1
    assert f"error: the output {output} is the input {mine}" in result.stderr
    assert mine.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted({"mine.txt", output.name})


def test_an_unreadable_subfolder_is_an_error_record(model, tmp_path, monkeypatch):
    folder = tmp_path / "essays"
    (folder / "locked").mkdir(parents=True)
    (folder / "a.txt").write_text(ESSAY, encoding="utf8")
    (folder / "locked" / "b.txt").write_text(ESSAY, encoding="utf8")
    locked = folder / "locked"
    locked.chmod(0)
    try:
        if os.access(locked, os.R_OK):  # root reads it anyway: the listing fails as it would for a user
            real_scandir = os.scandir

            def scandir(path="."):
                if Path(path) == locked:
                    raise PermissionError(13, "Permission denied", str(path))
                return real_scandir(path)

            monkeypatch.setattr(os, "scandir", scandir)
        out = tmp_path / "out.jsonl"
        result = runner.invoke(app, ["analyze", str(folder), "--model", model, "-o", str(out), "--no-progress"])
    finally:
        locked.chmod(0o755)
    assert result.exit_code == 1, result.output
    records = read_jsonl(out)
    assert [r["id"] for r in records] == ["a", "locked"]
    assert "error" not in records[0] and records[0]["sentences"]
    assert records[1]["path"] == str(locked)
    assert records[1]["error"]["type"] == "read_error"
    assert records[1]["error"]["message"] == f"{locked}: folder cannot be listed: Permission denied"
    lines = result.stderr.splitlines()
    assert f"failed: locked: read_error: {locked}: folder cannot be listed: Permission denied" in lines
    assert any(line.startswith("documents: 1 ok, 1 failed -> ") for line in lines)


def test_control_characters_in_a_file_name_are_escaped(model, tmp_path):
    name = "x\x1b[2K\rfailed: forged\x85\u202e\nfailed: forged too.txt"
    (tmp_path / name).write_bytes(b"\x00\x01binary")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["analyze", str(tmp_path), "--model", model, "-o", str(out), "--no-progress"])
    assert result.exit_code == 1
    for char in "\x1b\r\x85\u202e":
        assert char not in result.stderr
    lines = result.stderr.splitlines()
    failed = [line for line in lines if line.startswith("failed:")]
    assert len(failed) == 1 and "\\x1b[2K\\rfailed: forged\\x85\\u202e\\nfailed: forged too" in failed[0]
    assert len(lines) == 2  # that line and the summary
    [record] = read_jsonl(out)
    assert record["path"] == str(tmp_path / name)  # the record keeps the name as it is


def test_printable_escapes_what_moves_the_cursor_and_keeps_the_rest():
    from spacy_rhetoric.analysis.io import printable

    assert printable("作文 12.txt") == "作文 12.txt"
    assert printable("a\tb\nc\x7f\x9b\u2028\u2066") == "a\\tb\\nc\\x7f\\x9b\\u2028\\u2066"


@pytest.mark.parametrize("how", ["SIGTERM", "SIGKILL"])
def test_workers_die_with_their_parent(model, tmp_path, how):
    """`analyze --n-process 2`, its parent killed while the workers wait for
    more text (the last input is standard input, left open): the workers
    must not outlive it."""
    import signal
    import subprocess
    import sys
    import time

    import psutil

    for i in range(4):
        (tmp_path / f"{i}.txt").write_text(ESSAY * (i + 1), encoding="utf8")
    paths = sorted(str(p) for p in tmp_path.glob("*.txt"))
    cmd = [sys.executable, "-m", "spacy_rhetoric", "analyze", *paths, "-", "--model", model, "-o",
           str(tmp_path / "out.jsonl"), "--no-progress", "--n-process", "2", "--batch-size", "1"]
    run = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                           start_new_session=True)
    workers = []
    try:
        parent = psutil.Process(run.pid)
        deadline = time.monotonic() + 300
        while len(parent.children()) < 2 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        workers = parent.children()
        assert len(workers) == 2, "the workers did not start"
        os.kill(run.pid, getattr(signal, how))
        run.wait()
        deadline = time.monotonic() + 60  # bounded wait for the kernel, not a speed requirement
        alive = workers
        while alive and time.monotonic() < deadline:
            time.sleep(0.2)
            alive = [w for w in alive if _running(w)]
        assert not alive, f"workers {[w.pid for w in alive]} outlived their parent"
    finally:
        for worker in workers:
            if _running(worker):
                worker.kill()
        if run.poll() is None:
            run.kill()
        run.stdin.close()
        run.wait()


def _running(process) -> bool:
    import psutil

    try:
        return process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
