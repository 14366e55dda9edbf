"""``analyze`` at batch scale: encodings, error records, exit code
and summary line, ``--resume``, crash-safe output, unique ids.

Texts come from real PSE-I test essays; the pipeline is the small
assembled one of ``tests/tiny_pipeline.py`` (the library tests of failing
components use a blank pipeline). Nothing here depends on the terminal
width, the checkout or temporary path, the user, the clock or test order:
records are compared as sets, messages as whole stderr lines (the CLI never
wraps them).
"""
from __future__ import annotations

import codecs
import json
from pathlib import Path
from typing import Dict, List

import pytest
import spacy
from spacy.language import Language
from typer.testing import CliRunner

from spacy_rhetoric.analysis import engines
from spacy_rhetoric.analysis import io as analysis_io
from spacy_rhetoric.analysis.io import DocumentError, decode_text, expand_inputs, read_pse_essay, scan_jsonl
from spacy_rhetoric.analysis.driver import analyze
from spacy_rhetoric.analysis.records import SCHEMA
from spacy_rhetoric.cli import app
from spacy_rhetoric.corpora.pse_i import read_splits

from tiny_pipeline import build

runner = CliRunner()
BINARY = b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\x00\x00\x01\x00"


@pytest.fixture(scope="module")
def model(shared_data: Path) -> str:
    return str(build(shared_data))


@pytest.fixture(scope="module")
def essays(pse_dir: Path) -> Dict[str, str]:
    """Name -> text of the first five PSE-I test essays."""
    names = read_splits(pse_dir)["test"][:5]
    return {name: read_pse_essay(pse_dir / "xml" / name) for name in names}


def read_jsonl(path: Path) -> List[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf8").splitlines()]


def as_set(records: List[dict]) -> List[str]:
    """Records in a canonical, order-free form."""
    return sorted(json.dumps(r, ensure_ascii=False, sort_keys=True) for r in records)


def lines(result) -> List[str]:
    return result.stderr.splitlines()


def write_encodings_folder(folder: Path, text: str) -> Path:
    """The same real essay as UTF-8, UTF-8 with BOM, GBK, UTF-16 with BOM,
    and a binary file that starts like a PNG."""
    folder.mkdir()
    (folder / "utf8.txt").write_bytes(text.encode("utf-8"))
    (folder / "utf8_bom.txt").write_bytes(codecs.BOM_UTF8 + text.encode("utf-8"))
    (folder / "gbk.txt").write_bytes(text.encode("gbk"))
    (folder / "utf16.txt").write_bytes(text.encode("utf-16"))  # BOM + native order
    (folder / "binary.txt").write_bytes(BINARY + text.encode("utf-8")[:60])
    return folder


# --- encodings ----------------------------------------------------------------------


def test_encodings_error_record_exit_code_and_summary(model, essays, tmp_path):
    text = next(iter(essays.values()))
    folder = write_encodings_folder(tmp_path / "in", text)
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["analyze", str(folder), "--model", model, "-o", str(out), "--no-progress",
                                 "--batch-size", "2"], env={"COLUMNS": "20"})
    assert result.exit_code == 1, result.output
    records = {r["id"]: r for r in read_jsonl(out)}
    assert sorted(records) == ["binary", "gbk", "utf16", "utf8", "utf8_bom"]
    failed = records.pop("binary")
    assert set(failed) == {"schema", "id", "path", "error"} and failed["schema"] == SCHEMA
    assert failed["path"] == str(folder / "binary.txt")
    assert failed["error"]["type"] == "not_text" and "NUL byte" in failed["error"]["message"]
    assert {k: r["encoding"] for k, r in records.items()} == {
        "utf8": "utf-8", "utf8_bom": "utf-8-sig", "gbk": "gb18030", "utf16": "utf-16"}
    # the same essay, whatever its encoding: the same text and the same analysis
    strip = lambda r: {k: v for k, v in r.items() if k not in ("id", "path", "encoding")}  # noqa: E731
    assert all(r["text"] == text for r in records.values())
    assert all(strip(r) == strip(records["utf8"]) for r in records.values())
    assert any(line.startswith(f"documents: 4 ok, 1 failed -> {out}; ") for line in lines(result)), result.stderr
    assert any(line.startswith(f"failed: binary: not_text: {folder / 'binary.txt'}: not text") for line in lines(result))


def test_forced_encoding_and_stdin_bytes(model, essays, tmp_path):
    text = list(essays.values())[1]
    out = tmp_path / "stdin.jsonl"
    result = runner.invoke(app, ["analyze", "-", "--model", model, "-o", str(out), "--no-progress"],
                           input=text.encode("gb18030"))
    assert result.exit_code == 0, result.output
    [record] = read_jsonl(out)
    assert record["id"] == "-" and record["path"] is None and record["encoding"] == "gb18030" and record["text"] == text
    # forcing a wrong encoding is a decode error naming the line, not garbage
    gbk = tmp_path / "gbk.txt"
    gbk.write_bytes(text.encode("gbk"))
    result = runner.invoke(app, ["analyze", str(gbk), "--model", model, "-o", str(out), "--no-progress",
                                 "--encoding", "utf-8"])
    assert result.exit_code == 1
    [record] = read_jsonl(out)
    assert record["error"]["type"] == "decode_error"
    assert record["error"]["message"].startswith(f"{gbk}, line 1: not utf-8 text")
    result = runner.invoke(app, ["analyze", str(gbk), "--model", model, "-o", str(out), "--no-progress",
                                 "--encoding", "GBK"])
    assert result.exit_code == 0
    assert read_jsonl(out)[0]["encoding"] == "gbk" and read_jsonl(out)[0]["text"] == text


def test_jsonl_to_stdout_stays_clean(model, essays, tmp_path):
    folder = write_encodings_folder(tmp_path / "in", next(iter(essays.values())))
    result = runner.invoke(app, ["analyze", str(folder / "utf8.txt"), str(folder / "binary.txt"), "--model", model,
                                 "--no-progress"])
    assert result.exit_code == 1
    records = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in records] == ["utf8", "binary"] and "error" in records[1]
    assert any(line.startswith("documents: 1 ok, 1 failed -> stdout; ") for line in lines(result))


@pytest.mark.parametrize("bom,codec,expected", [
    (codecs.BOM_UTF8, "utf-8", "utf-8-sig"),
    (b"", "utf-16", "utf-16"),  # Python writes the BOM
    (b"", "utf-32", "utf-32"),
    (codecs.BOM_UTF16_BE, "utf-16-be", "utf-16"),
    (b"", "utf-8", "utf-8"),
    (b"", "gbk", "gb18030"),
    (b"", "gb2312", "gb18030"),
])
def test_decode_text_auto(essays, bom, codec, expected):
    def encodable(text: str) -> bool:
        try:
            return bool(text.encode(codec))
        except UnicodeEncodeError:
            return False

    # a whole essay, or else its longest paragraph the codec can encode (GB2312 lacks some characters)
    candidates = list(essays.values()) + sorted((p for t in essays.values() for p in t.split("\n")), key=len, reverse=True)
    text = next(t for t in candidates if encodable(t))
    assert decode_text(bom + text.encode(codec)) == (text, expected)


def test_decode_text_short_gbk_and_big5(essays, pse_dir):
    """Short texts are where detectors guess wrong (cp949 for GBK): every
    test essay's first 10 and 20 characters in GBK decode back exactly."""
    texts = [read_pse_essay(pse_dir / "xml" / n) for n in read_splits(pse_dir)["test"]]
    for text in texts:
        for n in (10, 20):
            assert decode_text(text[:n].encode("gbk")) == (text[:n], "gb18030")
    traditional = "我的心像一隻小鳥，飛向藍天。時間就像流水，一去不復返。"
    assert decode_text(traditional.encode("big5")) == (traditional, "big5")


def test_decode_text_refuses_what_is_not_text(essays):
    text = list(essays.values())[0]
    cases = {
        "png": BINARY + text.encode("utf-8"),
        "utf-16 without BOM": text.encode("utf-16-le") + "\nabc".encode("utf-16-le"),
        "no NUL, no encoding": bytes(range(128, 256)) * 4,
        "UTF-8 with one Latin-1 byte": "第一行\n".encode("utf8") + "caf\xe9".encode("latin-1"),
        "truncated UTF-8": text.encode("utf-8")[:-1],
    }
    for name, data in cases.items():
        with pytest.raises(DocumentError) as err:
            decode_text(data, name=name)
        assert err.value.type == "not_text", name
        assert str(err.value).startswith(f"{name}: not text"), name
    with pytest.raises(DocumentError, match=r"^x: not text \(NUL characters after decoding as utf-8\)"):
        decode_text(b"\x00\x00", "utf-8", "x")
    # a named encoding is used strictly; utf-8 drops a UTF-8 BOM
    assert decode_text(text.encode("utf-16-le"), "utf-16-le") == (text, "utf-16-le")
    assert decode_text(codecs.BOM_UTF8 + b"abc", "utf8") == ("abc", "utf-8-sig")
    with pytest.raises(ValueError, match="unknown encoding 'nope'"):
        decode_text(b"abc", "nope")


# --- ids ------------------------------------------------------------------------------


def test_ids_are_unique_and_path_independent(tmp_path, monkeypatch):
    for rel in ("d1/a/x.txt", "d1/b/x.txt", "d1/y.txt", "d1/y.xml", "d1/z.txt", "d2/z.txt", "d2/w.txt"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text("好", encoding="utf8")
    monkeypatch.chdir(tmp_path)
    ids = [i for i, _ in expand_inputs(["d1", "d2", "d1/y.txt", "-"])]
    # stems where unique; else the path inside the folder; else the path as given
    assert ids == ["a/x.txt", "b/x.txt", "y.txt", "y.xml", "d1/z.txt", "w", "d2/z.txt", "-"]
    absolute = [i for i, _ in expand_inputs([tmp_path / "d1", tmp_path / "d2"])]
    assert absolute[:4] == ids[:4] and absolute[5] == "w"  # the same ids wherever the corpus lies


# --- --resume and crash safety --------------------------------------------------------


@pytest.fixture()
def batch_folder(essays, pse_dir, tmp_path) -> Path:
    """Three essays as UTF-8 / GBK text, one PSE-I XML essay, a binary file."""
    folder = tmp_path / "batch"
    folder.mkdir()
    names = list(essays)
    for i, name in enumerate(names[:3]):
        (folder / f"essay{i}.txt").write_bytes(essays[name].encode("gbk" if i == 1 else "utf-8"))
    (folder / "essay3.xml").write_bytes((pse_dir / "xml" / names[3]).read_bytes())
    (folder / "binary.txt").write_bytes(BINARY)
    return folder


def test_resume_after_interruption_gives_the_same_records(model, batch_folder, tmp_path):
    whole = tmp_path / "whole.jsonl"
    args = ["analyze", str(batch_folder), "--model", model, "--no-progress", "--batch-size", "2"]
    assert runner.invoke(app, [*args, "-o", str(whole)]).exit_code == 1  # the binary file failed
    expected = read_jsonl(whole)
    assert len(expected) == 5 and len({r["id"] for r in expected}) == 5

    # interrupted while writing the third line: two whole lines and a partial one
    cut = tmp_path / "cut.jsonl"
    data = whole.read_bytes()
    second_end = data.index(b"\n", data.index(b"\n") + 1) + 1
    cut.write_bytes(data[:second_end + 100])
    assert scan_jsonl(cut).valid_bytes == second_end and len(scan_jsonl(cut).done) == 2
    result = runner.invoke(app, [*args, "-o", str(cut), "--resume"])
    assert result.exit_code == 1, result.output
    assert "resume: dropped a partial last line (100 bytes) of " + str(cut) in lines(result)
    assert any(line.startswith("documents: 3 ok, 0 failed, 2 skipped (already in the output: 1 ok, 1 failed) -> ")
               for line in lines(result)), result.stderr
    assert as_set(read_jsonl(cut)) == as_set(expected)

    # nothing left to do: nothing written, still exit 1 (the output holds a failure)
    before = cut.read_bytes()
    result = runner.invoke(app, [*args, "-o", str(cut), "--resume"])
    assert result.exit_code == 1 and cut.read_bytes() == before
    assert any(line.startswith("documents: 0 ok, 0 failed, 5 skipped (already in the output: 4 ok, 1 failed)")
               for line in lines(result))
    # --resume without an output yet is a fresh run
    fresh = tmp_path / "fresh.jsonl"
    assert runner.invoke(app, [*args, "-o", str(fresh), "--resume"]).exit_code == 1
    assert as_set(read_jsonl(fresh)) == as_set(expected)


def test_resume_refuses_a_foreign_or_corrupt_file(model, batch_folder, tmp_path):
    args = ["analyze", str(batch_folder), "--model", model, "--no-progress", "--resume", "-o"]
    other = tmp_path / "other.jsonl"
    other.write_text(json.dumps({"schema": SCHEMA, "id": "essay0", "model": {"name": "zh_other", "version": "9"}}) + "\n",
                     encoding="utf8")
    result = runner.invoke(app, [*args, str(other)])
    assert result.exit_code == 1
    assert any(line.startswith("error: ") and "holds records of zh_other 9, this run uses zh_rhetoric" in line
               for line in lines(result))
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_text('{"id": "essay0"}\nnot json\n{"id": "essay1"}\n', encoding="utf8")
    result = runner.invoke(app, [*args, str(corrupt)])
    assert result.exit_code == 1
    assert f"error: {corrupt}, line 2: not an analysis record; cannot resume (remove the line or write to a new file)" \
        in lines(result)


def interrupt_after(n: int, monkeypatch) -> None:
    """Make the local engine raise KeyboardInterrupt after ``n`` results."""
    original = engines.local_results

    def interrupted(*args, **kwargs):
        for i, result in enumerate(original(*args, **kwargs)):
            if i == n:
                raise KeyboardInterrupt
            yield result

    monkeypatch.setattr(engines, "local_results", interrupted)


def test_interrupted_jsonl_holds_whole_lines(model, batch_folder, tmp_path, monkeypatch):
    out = tmp_path / "out.jsonl"
    interrupt_after(2, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        analyze([batch_folder], out, model=model, progress=False, batch_size=1)
    data = out.read_bytes()
    assert data.endswith(b"\n") and len(read_jsonl(out)) == 2


def test_html_is_never_half_written(model, batch_folder, tmp_path, monkeypatch):
    report = tmp_path / "report.html"
    totals = analyze([batch_folder], report, model=model, fmt="html", progress=False)
    assert (totals["ok"], totals["failed"]) == (4, 1)
    page = report.read_text(encoding="utf8")
    assert page.startswith("<!DOCTYPE html>") and page.rstrip().endswith("</html>")
    assert page.count('<h2 id="doc-') == 4 and "Failed documents" in page and "not_text" in page

    report.write_text("OLD", encoding="utf8")
    # a crash during the analysis leaves the old report
    interrupt_after(2, monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        analyze([batch_folder], report, model=model, fmt="html", progress=False)
    monkeypatch.undo()
    # a crash while writing (the disk fails before the rename) leaves it too, and no temporary file
    def failing_fsync(fd):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(analysis_io.os, "fsync", failing_fsync)
    with pytest.raises(OSError, match="No space left"):
        analyze([batch_folder], report, model=model, fmt="html", progress=False)
    monkeypatch.undo()
    assert report.read_text(encoding="utf8") == "OLD"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["batch", "report.html"]


# --- failing documents inside the pipeline ------------------------------------------------


@Language.component("test_fail_on_marker")
def fail_on_marker(doc):
    if "故障" in doc.text:
        raise ValueError("marker found")
    return doc


@pytest.mark.parametrize("n_process", [1, 2])
def test_a_failing_document_does_not_stop_the_others(essays, tmp_path, n_process):
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe("test_fail_on_marker")
    texts = list(essays.values())[:3]
    folder = tmp_path / "in"
    folder.mkdir()
    docs = {"a": texts[0], "b": "这里有" + "故障" + "。", "c": texts[1], "d": texts[2] * 3, "e": "好。"}
    for name, text in docs.items():
        (folder / f"{name}.txt").write_text(text, encoding="utf8")
    out = tmp_path / "out.jsonl"
    messages: List[str] = []
    max_length = len(texts[2]) * 2
    totals = analyze([folder], out, model=nlp, n_process=n_process, batch_size=2, progress=False,
                     max_length=max_length, on_message=messages.append)
    records = read_jsonl(out)
    assert [r["id"] for r in records] == ["a", "b", "c", "d", "e"]  # input order, failures in place
    assert (totals["ok"], totals["failed"]) == (3, 2)
    errors = {r["id"]: r["error"] for r in records if "error" in r}
    assert errors["b"] == {"type": "analysis_error",
                           "message": f"{folder / 'b.txt'}: the pipeline failed: ValueError: marker found"}
    assert errors["d"]["type"] == "too_long"
    assert errors["d"]["message"] == (f"{folder / 'd.txt'}: {len(docs['d'])} characters exceed the pipeline's "
                                      f"max_length {max_length}; split the text or raise --max-length")
    assert [r["text"] for r in records if "error" not in r] == [docs["a"], docs["c"], docs["e"]]
    assert len(messages) == 2 and messages[0].startswith("failed: b: analysis_error: ")
    # the error handlers of the pipeline are restored
    with pytest.raises(ValueError, match="marker found"):
        nlp("故障")


def test_ray_engine_without_ray_fails_before_writing(model, essays, tmp_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    (tmp_path / "a.txt").write_text(next(iter(essays.values())), encoding="utf8")
    out = tmp_path / "out.jsonl"
    result = runner.invoke(app, ["analyze", str(tmp_path / "a.txt"), "--model", model, "-o", str(out),
                                 "--no-progress", "--engine", "ray"])
    assert result.exit_code == 1
    assert any(line.startswith("error: the ray engine needs Ray: pip install 'spacy-rhetoric[ray]'")
               for line in lines(result))
    assert not out.exists()


def test_a_killed_worker_ends_the_run_with_an_error_not_a_hang(pse_dir: Path, tmp_path: Path):
    """`analyze --n-process 2` on 200 real essays, one worker killed as the
    OOM killer would (SIGKILL): spaCy's parent would wait for it forever;
    the run ends within a minute with one [R029] line and exit code 1, the
    records written before are valid, and --resume finishes the rest."""
    import os
    import signal
    import subprocess
    import sys
    import time

    import psutil

    ROOT = Path(__file__).resolve().parents[1]
    folder = tmp_path / "essays"
    folder.mkdir()
    for name in sorted(p.name for p in (pse_dir / "xml").glob("*.xml"))[:200]:
        (folder / name).write_bytes((pse_dir / "xml" / name).read_bytes())
    out = tmp_path / "out.jsonl"
    cmd = [sys.executable, "-m", "spacy_rhetoric", "analyze", str(folder), "-o", str(out),
           "--model", str(ROOT / "pipelines" / "zh_rhetoric"), "--n-process", "2"]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=str(ROOT),
                           start_new_session=True)
    try:
        parent = psutil.Process(run.pid)
        deadline = time.monotonic() + 120
        while len(parent.children()) < 2 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert len(parent.children()) >= 2, "the workers did not start"
        time.sleep(1.0)  # the workers are analysing
        os.kill(parent.children()[0].pid, signal.SIGKILL)
        _, stderr = run.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(run.pid, signal.SIGKILL)
        run.communicate()
        pytest.fail("analyze --n-process 2 hung after a worker was killed")
    assert run.returncode == 1
    assert "[R029]" in stderr and "signal SIGKILL" in stderr and "Traceback" not in stderr
    kept = read_jsonl(out)
    assert len(kept) < 200 and all(r["schema"] == SCHEMA for r in kept)
    resumed = subprocess.run(cmd[:-2] + ["--resume"], capture_output=True, text=True, cwd=str(ROOT), timeout=600)
    assert resumed.returncode == 0, resumed.stderr[-2000:]
    records = read_jsonl(out)
    assert len(records) == 200 and len({r["id"] for r in records}) == 200
