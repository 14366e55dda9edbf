"""HYPO-cn: the converter (hyperbole known, every other label unknown), our
annotation of its training hyperboles and the sheets it is built from."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy

from spacy_rhetoric.annotation import ANNOTATED_KEY, annotated_labels
from spacy_rhetoric.corpora.docbin import read_docbin
from spacy_rhetoric.corpora.hypo_cn import (build_annotations, convert_hypo_cn, locate, read_annotations,
                                            read_hypo_cn, read_split)
from spacy_rhetoric.corpora.jsonio import text_sha1
from spacy_rhetoric.errors import CorpusFormatError

ANNOTATIONS = Path(__file__).resolve().parent.parent / "annotations" / "hypo-cn"

# train.1 line 1 a hyperbole whose object occurs twice, line 2 judged not
# hyperbole by CERD's definition, line 3 without a record
TRAIN_1 = "他的声音大得能把屋顶掀翻，屋顶都在抖。\n今天累死了。\n书堆得比山还高。\n"
TRAIN_0 = "他的声音很大。\n"


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "hypo-cn"
    folder.mkdir()
    for split in ("train", "valid"):
        (folder / f"{split}.1").write_text(TRAIN_1, encoding="utf8")
        (folder / f"{split}.0").write_text(TRAIN_0, encoding="utf8")
    return folder


def _sheet_line(line, coarse=True, components=None, **extra):
    rec = {"line": line, "coarse": ["hyperbole"] if coarse else [],
           "form": ["indirect_hyperbole"] if coarse else [], "content": ["amplification"] if coarse else [],
           "components": components if components is not None else [], **extra}
    return json.dumps(rec, ensure_ascii=False) + "\n"


def _raw(tmp_path: Path, first: str, second: str = "") -> Path:
    raw = tmp_path / "raw"
    raw.mkdir(exist_ok=True)
    (raw / "first_pass_1.jsonl").write_text(first, encoding="utf8")
    if second:
        (raw / "second_pass.jsonl").write_text(second, encoding="utf8")
    return raw


GOOD_SHEET = (
    _sheet_line(1, components=[{"label": "hyperbole_object", "text": "屋顶", "occurrence": 2},
                               {"label": "hyperbole_content", "text": "能把屋顶掀翻", "occurrence": 1}], note="屋顶 twice")
    + _sheet_line(2, coarse=False, note="累死了 is a stock intensifier (§4.2)"))


def test_reading_names_file_and_line_of_a_blank_line(tmp_path):
    path = tmp_path / "train.1"
    path.write_text("一句。\n\n两句。\n", encoding="utf8")
    with pytest.raises(CorpusFormatError, match=r"train\.1, line 2: empty line"):
        list(read_hypo_cn(path, "train", 1))


def test_reading_names_file_and_line_of_bytes_that_are_not_utf8(tmp_path):
    path = tmp_path / "valid.0"
    path.write_bytes("一句。\n".encode("utf8") + b"\xff\xfe\n")
    with pytest.raises(CorpusFormatError, match=r"valid\.0, line 2: not UTF-8"):
        list(read_hypo_cn(path, "valid", 0))


def test_convert_marks_hyperbole_known_and_the_rest_unknown(tmp_path):
    stats = convert_hypo_cn(_corpus(tmp_path), tmp_path / "out", spacy.blank("zh"))
    assert stats["train"] == {"sentences": 4, "hyperbolic": 3, "literal": 1, "annotated": 0,
                              "judged_not_hyperbole": 0, "hyperbole_objects": 0, "hyperbole_contents": 0}
    docs = list(read_docbin(tmp_path / "out" / "valid.spacy", spacy.blank("zh").vocab))
    hyp, lit = docs[0], docs[3]
    assert [s.label_ for s in hyp.spans["rhetoric"]] == ["hyperbole"]
    assert (hyp.spans["rhetoric"][0].start, hyp.spans["rhetoric"][0].end) == (0, len(hyp))
    assert annotated_labels(hyp) == {"coarse/hyperbole", "coarse/literal"}
    assert lit.text == "他的声音很大。" and list(lit.spans["rhetoric"]) == []
    known = annotated_labels(lit)
    assert "coarse/hyperbole" in known and "form/direct_hyperbole" in known
    assert not {"coarse/literal", "coarse/metaphor", "coarse/personification", "coarse/parallelism"} & known
    assert lit.user_data[ANNOTATED_KEY]["components"] == ("hyperbole_object", "hyperbole_content")
    assert lit.user_data["hypo_label"] == 0 and lit.user_data["line"] == 1


def test_sheets_become_records_with_offsets_and_labels_unchanged(tmp_path):
    corpus = _corpus(tmp_path)
    stats = build_annotations(_raw(tmp_path, GOOD_SHEET, _sheet_line(1)), corpus, tmp_path / "ann")
    assert stats["first_pass_1.jsonl"] == {"records": 2, "hyperboles": 1, "covers": 3, "missing": 1}
    first = [json.loads(x) for x in (tmp_path / "ann" / "train.jsonl").read_text(encoding="utf8").splitlines()]
    text = TRAIN_1.splitlines()[0]
    assert first[0]["text_sha1"] == text_sha1(text) and "text" not in first[0]
    assert first[0]["components"] == [
        {"label": "hyperbole_content", "start": 6, "end": 12, "text": "能把屋顶掀翻"},
        {"label": "hyperbole_object", "start": 13, "end": 15, "text": "屋顶"}]
    assert first[0]["form"] == ["indirect_hyperbole"] and first[0]["note"] == "屋顶 twice"
    assert first[1]["coarse"] == [] and first[1]["components"] == []
    assert (tmp_path / "ann" / "second_pass.jsonl").is_file()


@pytest.mark.parametrize("sheet,message", [
    (_sheet_line(1, components=[{"label": "hyperbole_object", "text": "天花板"}]), "span '天花板'"),
    (_sheet_line(1, components=[{"label": "hyperbole_object", "text": "屋顶", "occurrence": 3}]), "does not occur 3 time"),
    (_sheet_line(3) + _sheet_line(3), "decided twice"),
    (_sheet_line(9), "'line' 9 is not a line of train.1"),
    (_sheet_line(1, form=["simile"]), "'form' must list"),
    (_sheet_line(1, components=[{"label": "tenor", "text": "屋顶"}]), "only hyperbole_object, hyperbole_content"),
    (_sheet_line(1, text="他的声音"), "unknown keys"),
])
def test_a_bad_sheet_line_is_an_error_naming_sheet_and_line(tmp_path, sheet, message):
    corpus = _corpus(tmp_path)
    with pytest.raises(CorpusFormatError, match=r"first_pass_1\.jsonl, line \d") as err:
        build_annotations(_raw(tmp_path, _sheet_line(2, coarse=False) + sheet), corpus, tmp_path / "ann")
    assert message in str(err.value)
    assert not (tmp_path / "ann" / "train.jsonl").exists()


def test_locate_counts_overlapping_occurrences():
    assert locate("哈哈哈", "哈哈", 2) == (1, 3)
    assert locate("哈哈哈", "哈哈", 3) is None


def test_convert_with_annotations_adds_forms_contents_and_components(tmp_path):
    corpus = _corpus(tmp_path)
    build_annotations(_raw(tmp_path, GOOD_SHEET), corpus, tmp_path / "ann")
    stats = convert_hypo_cn(corpus, tmp_path / "out", spacy.blank("zh"), tmp_path / "ann")
    assert stats["train"]["annotated"] == 2 and stats["train"]["judged_not_hyperbole"] == 1
    assert stats["valid"]["annotated"] == 0
    docs = list(read_docbin(tmp_path / "out" / "train.spacy", spacy.blank("zh").vocab))
    hyp, judged, plain = docs[:3]
    assert [s.label_ for s in hyp.spans["rhetoric_form"]] == ["indirect_hyperbole"]
    assert [(s.label_, s.text) for s in hyp.spans["rhetoric_components"]] == [
        ("hyperbole_content", "能把屋顶掀翻"), ("hyperbole_object", "屋顶")]
    assert hyp.spans["rhetoric_components"][1].start_char == 13
    assert {"form/indirect_hyperbole", "content/prolepsis"} <= annotated_labels(hyp)
    # judged not hyperbole by CERD's definition: a negative, literal unknown
    assert list(judged.spans["rhetoric"]) == [] and "coarse/hyperbole" in annotated_labels(judged)
    assert "coarse/literal" not in annotated_labels(judged)
    # no record: HYPO-cn's label only
    assert [s.label_ for s in plain.spans["rhetoric"]] == ["hyperbole"]
    assert not any(k.startswith("form/") for k in annotated_labels(plain))


def test_an_annotation_of_another_text_is_refused(tmp_path):
    corpus = _corpus(tmp_path)
    ann = tmp_path / "ann"
    ann.mkdir()
    rec = {"split": "train", "line": 3, "text_sha1": text_sha1("别的句子。"), "coarse": [], "form": [], "content": [],
           "components": []}
    (ann / "train.jsonl").write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf8")
    with pytest.raises(CorpusFormatError, match=r"train\.jsonl, line 1: 'text_sha1'"):
        convert_hypo_cn(corpus, tmp_path / "out", spacy.blank("zh"), ann)


def test_the_real_files_convert_as_documented(shared_data, tmp_path):
    hypo = shared_data / "hypo-cn"
    if not hypo.is_dir():
        pytest.skip("HYPO-cn not in ../shared/data")
    train = read_split(hypo, "train")
    assert sum(s.label for s in train) == 1880 and len(train) == 3760
    assert len(read_split(hypo, "valid")) == 600
    stats = convert_hypo_cn(hypo, tmp_path / "out", spacy.blank("zh"))
    assert stats["valid"]["hyperbolic"] == 300 and stats["valid"]["literal"] == 300


def test_our_annotation_fits_the_real_training_hyperboles(shared_data):
    hypo = shared_data / "hypo-cn"
    if not hypo.is_dir() or not (ANNOTATIONS / "train.jsonl").is_file():
        pytest.skip("HYPO-cn or annotations/hypo-cn not here")
    records = read_annotations(ANNOTATIONS / "train.jsonl", read_split(hypo, "train"))
    assert records and all(1 <= line <= 1880 for line in records)


def test_the_commands_convert_and_refuse_a_span_that_is_not_there(tmp_path):
    from typer.testing import CliRunner

    from spacy_rhetoric.cli import app

    corpus = _corpus(tmp_path)
    runner = CliRunner()
    ok = runner.invoke(app, ["convert", "hypo-cn-annotations", str(_raw(tmp_path, GOOD_SHEET)), str(corpus), str(tmp_path / "ann")])
    assert ok.exit_code == 0, ok.output
    # wasabi wraps messages to the terminal's width: compare without line breaks
    assert "1 of its 3 lines have no record yet" in " ".join(ok.output.split())
    conv = runner.invoke(app, ["convert", "hypo-cn", str(corpus), str(tmp_path / "out"), "--annotations", str(tmp_path / "ann")])
    assert conv.exit_code == 0, conv.output
    assert (tmp_path / "out" / "valid.spacy").is_file()
    (tmp_path / "raw" / "first_pass_1.jsonl").write_text(
        GOOD_SHEET + _sheet_line(3, components=[{"label": "hyperbole_content", "text": "比海还高"}]), encoding="utf8")
    bad = runner.invoke(app, ["convert", "hypo-cn-annotations", str(tmp_path / "raw"), str(corpus), str(tmp_path / "ann2")])
    assert bad.exit_code == 1
    said = " ".join(bad.output.split())
    assert "first_pass_1.jsonl, line 3" in said and "span '比海还高'" in said
