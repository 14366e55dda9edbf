"""The ``analyze`` command and library on real PSE-I essays,
with the small assembled pipeline of ``tests/tiny_pipeline.py``."""
from __future__ import annotations

import html
import io
import json
import re
from pathlib import Path

import pytest
import spacy
from typer.testing import CliRunner

from spacy_rhetoric.analysis.io import DocumentError
from spacy_rhetoric.analysis.driver import analyze
from spacy_rhetoric.analysis.io import expand_paths, iter_inputs, read_pse_essay
from spacy_rhetoric.analysis.records import SCHEMA, doc_sections, doc_to_record
from spacy_rhetoric.cli import app
from spacy_rhetoric.corpora.pse_i import read_essay, read_splits
from spacy_rhetoric.errors import CorpusFormatError

from tiny_pipeline import build

runner = CliRunner()


@pytest.fixture(scope="module")
def model(shared_data: Path) -> str:
    return str(build(shared_data))


@pytest.fixture(scope="module")
def test_essays(pse_dir: Path):
    return [pse_dir / "xml" / name for name in read_splits(pse_dir)["test"][:3]]


def read_jsonl(path: Path):
    return [json.loads(line) for line in path.read_text(encoding="utf8").splitlines()]


def test_jsonl_on_real_essays(model, test_essays, tmp_path):
    out = tmp_path / "a.jsonl"
    result = runner.invoke(app, ["analyze", *map(str, test_essays), "--model", model, "--output", str(out),
                                 "--no-progress", "--batch-size", "2"])
    assert result.exit_code == 0, result.output
    records = read_jsonl(out)
    assert [r["id"] for r in records] == [p.stem for p in test_essays]
    for record, path in zip(records, test_essays):
        assert record["schema"] == SCHEMA
        assert record["text"] == read_pse_essay(path)
        assert record["model"]["name"] == "zh_rhetoric"
        text = record["text"]
        # sentences tile the non-space text in order; the clauses lie inside them
        assert record["sentences"] and all(text[s["start"]:s["end"]] == s["text"] for s in record["sentences"])
        starts = [s["start"] for s in record["sentences"]]
        assert starts == sorted(starts)
        assert len(record["clauses"]) >= len(record["sentences"])
        for s in record["sentences"]:
            assert set(s["coarse"]) <= {"metaphor", "personification", "hyperbole", "parallelism", "literal"}
            assert all(0.0 <= v <= 1.0 for v in s["coarse"].values())
        for c in record["components"]:
            assert text[c["start"]:c["end"]] == c["text"] and 0.0 <= c["score"] <= 1.0
        for g in record["parallelisms"]:
            assert re.fullmatch(r"parallelism_\d+", g["id"]) and g["branches"]
            assert all(text[b["start"]:b["end"]] == b["text"] for b in g["branches"])
        summary = record["summary"]
        assert summary["parallelisms"] == len(record["parallelisms"])
        assert summary["branches"] == sum(len(g["branches"]) for g in record["parallelisms"])
        assert sum(summary["components"].values()) == len(record["components"])
        assert summary["sentences"] == len(record["sentences"])


def test_record_matches_doc(model, test_essays):
    nlp = spacy.load(model)
    text = read_pse_essay(test_essays[0])
    doc = nlp(text)
    record = doc_to_record(doc, "x")
    # a record's sentence leaves out the whitespace at the edges of its span (a paragraph's line break)
    coarse_spans = {(s.start_char + len(s.text) - len(s.text.lstrip()), s.end_char - len(s.text) + len(s.text.rstrip()), s.label_)
                    for s in doc.spans["rhetoric"]}
    from_record = {(s["start"], s["end"], lab) for s in record["sentences"] for lab in s["coarse"] if lab != "literal"}
    assert from_record == coarse_spans
    assert len(record["parallelisms"]) == len([k for k in doc.spans if re.fullmatch(r"parallelism_\d+", k) and len(doc.spans[k])])
    assert json.loads(json.dumps(record, ensure_ascii=False)) == record


def test_stdin_folder_and_split(model, pse_dir, tmp_path):
    folder = tmp_path / "in"
    folder.mkdir()
    (folder / "a.txt").write_text("他的笑容像阳光一样温暖。", encoding="utf8")
    (folder / "b.xml").write_bytes((pse_dir / "xml" / "12.xml").read_bytes())
    (folder / "skip.json").write_text("{}", encoding="utf8")
    out = tmp_path / "b.jsonl"
    result = runner.invoke(app, ["analyze", str(folder), "-", "--model", model, "-o", str(out), "--no-progress"],
                           input="我们要学会坚强，学会勇敢，学会宽容。")
    assert result.exit_code == 0, result.output
    records = read_jsonl(out)
    assert [r["id"] for r in records] == ["a", "b", "-"]
    assert records[2]["path"] is None
    # a text file and stdin bytes are decoded (UTF-8 here); PSE-I XML declares its own encoding
    assert [r["encoding"] for r in records] == ["utf-8", None, "utf-8"]
    assert len(expand_paths([pse_dir], split="test")) == 42


def test_html_report(model, test_essays, tmp_path):
    out = tmp_path / "report.html"
    result = runner.invoke(app, ["analyze", *map(str, test_essays[:2]), "--model", model, "--format", "html",
                                 "--output", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    page = out.read_text(encoding="utf8")
    assert page.startswith("<!DOCTYPE html>") and page.count("<h2 id=\"doc-") == 2
    for path in test_essays[:2]:
        assert f'<a href="#doc-' in page and f">{path.stem}</a>" in page  # summary table row
    # each essay as the page of `rhetoric serve` shows it: the text as written (no
    # space added between words, as displaCy did), sentences, branches, components marked
    assert page.count('<div class="rh-essay"') == 2 and 'id="rh-panel"' in page and "RhetoricView.bind" in page
    for path in test_essays[:2]:
        text = read_pse_essay(path)
        fragment = page[page.index(f'data-doc-id="{path.stem}"'):]
        fragment = fragment[fragment.index('<div class="rh-essay"'):]
        fragment = fragment[:fragment.index("</div>")]
        assert html.unescape(re.sub(r"<[^>]+>", "", fragment)) == text
    assert "data-rhetoric=" in page and "data-parallelism=" in page
    assert page.count('class="rh-legend"') == 1  # one legend for the page, not one per essay


def test_branches_of_one_parallelism_share_a_colour(pse_dir):
    """Gold PSE-I paragraphs with several parallelisms: one colour per group."""
    docs = [d for d in read_essay(pse_dir / "xml" / "12.xml", spacy.blank("zh").vocab)]
    docs += [d for name in read_splits(pse_dir)["test"] for d in read_essay(pse_dir / "xml" / name, spacy.blank("zh").vocab)]
    doc = next(d for d in docs if len([k for k in d.spans if re.fullmatch(r"parallelism_\d+", k)]) >= 2)
    fragment = doc_sections(doc)["essay"]
    colours = {}
    for label, colour in re.findall(r'data-parallelism="(\d+)"[^>]*?style="--rh-group: (#[0-9a-f]{6})"', fragment):
        colours.setdefault(label, set()).add(colour)
    assert len(colours) >= 2
    assert all(len(c) == 1 for c in colours.values())
    assert len({next(iter(c)) for c in colours.values()}) == len(colours)


def stderr_lines(result):
    """The command's stderr, one message per line (the CLI never wraps)."""
    return result.stderr.splitlines()


def test_bad_inputs_give_clear_errors(model, tmp_path):
    # a folder name longer than any terminal: a wrapped message would split it
    folder = tmp_path / ("long_folder_name_" * 8)
    folder.mkdir()
    bad_xml = folder / "bad.xml"
    bad_xml.write_text("<doc>\n<para id='0'>\n<sent id='0'><word id='0'>好</word>\n</doc>", encoding="utf8")
    with pytest.raises(CorpusFormatError, match=r"bad\.xml, line \d"):
        list(iter_inputs([bad_xml]))
    latin = folder / "latin.txt"
    latin.write_bytes("第一行\n".encode("utf8") + "caf\xe9".encode("latin-1"))
    with pytest.raises(ValueError, match=r"latin\.txt, line 2: not utf-8 text"):
        list(iter_inputs([latin], encoding="utf-8"))
    with pytest.raises(DocumentError, match=r"latin\.txt: not text: .*not UTF-8 from line 2") as err:
        list(iter_inputs([latin]))
    assert err.value.type == "not_text"
    (folder / "x.json").write_text("{}", encoding="utf8")
    with pytest.raises(ValueError, match="unsupported input"):
        expand_paths([folder / "x.json"])
    with pytest.raises(FileNotFoundError):
        expand_paths([folder / "missing.txt"])

    out = tmp_path / "bad.jsonl"
    # COLUMNS=20: a width-dependent printer would wrap every message
    result = runner.invoke(app, ["analyze", str(bad_xml), "--model", model, "--no-progress", "-o", str(out)],
                           env={"COLUMNS": "20"})
    assert result.exit_code == 1, result.output
    lines = stderr_lines(result)
    assert f"failed: bad: format_error: {bad_xml}, line 4: malformed XML: Opening and ending tag mismatch: " \
           "sent line 3 and doc, line 4, column 7" in lines
    assert any(line.startswith("documents: 0 ok, 1 failed -> ") for line in lines)
    [record] = read_jsonl(out)
    assert record["error"]["type"] == "format_error" and record["id"] == "bad"

    result = runner.invoke(app, ["analyze", str(latin), "--model", str(tmp_path / "no_model"), "--no-progress"],
                           env={"COLUMNS": "20"})
    assert result.exit_code == 1
    assert any(line.startswith("error: cannot load pipeline") and line.endswith("or pass --model PATH)")
               for line in stderr_lines(result))
    for args, message in [
        (["--format", "pdf"], "error: unknown format 'pdf'; use jsonl or html"),
        (["--encoding", "klingon"], "error: unknown encoding 'klingon'"),
        (["--engine", "spark"], "error: unknown engine 'spark'; use local or ray"),
        (["--resume"], "error: --resume needs --format jsonl and an --output file"),
    ]:
        result = runner.invoke(app, ["analyze", "-", "--model", model, "--no-progress", *args], input="好")
        assert result.exit_code == 1 and any(line.startswith(message) for line in stderr_lines(result)), result.output
        assert result.stdout == ""


def test_library_writes_to_open_file(model, test_essays):
    buf = io.StringIO()
    totals = analyze([test_essays[0]], buf, model=spacy.load(model), progress=False)
    assert totals["documents"] == 1 and buf.getvalue().count("\n") == 1
