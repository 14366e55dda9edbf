"""CMRE (Chinese Metaphorical Relation Extraction) -> partial CERD labels:
reading, the mapping, malformed records (file and line named), conversion
and the raw-path gold of its dev split. Real-data tests read
``../shared/data/cmre`` (or a temporary copy of its first lines) and skip
without it."""
from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
import spacy

from spacy_rhetoric.annotation import ANNOTATED_KEY, annotated_components, annotated_labels
from spacy_rhetoric.corpora.cmre import SPLIT_FILES, convert_cmre, mapping_of, read_cmre, tenor_vehicle_spans
from spacy_rhetoric.corpora.jsonio import text_sha1
from spacy_rhetoric.corpora.docbin import read_docbin
from spacy_rhetoric.errors import CorpusFormatError

N_REAL = 120


@pytest.fixture(scope="module")
def cmre_dir(shared_data: Path) -> Path:
    return shared_data / "cmre"


@pytest.fixture(scope="module")
def cmre_head(cmre_dir: Path, tmp_path_factory) -> Path:
    """A temporary folder with the first N_REAL lines of each real split."""
    out = tmp_path_factory.mktemp("cmre")
    for name in SPLIT_FILES.values():
        lines = (cmre_dir / name).read_text(encoding="utf8").splitlines(keepends=True)[:N_REAL]
        (out / name).write_text("".join(lines), encoding="utf8")
    return out


def test_real_dev_split_maps_as_documented(cmre_dir):
    counts = Counter(mapping_of(s) for s in read_cmre(cmre_dir / "dev.jsonlines"))
    assert counts == {"literal": 425, "metaphor": 220, "relation_only": 205}


def test_a_simile_gives_its_tenor_and_vehicle(cmre_dir):
    sent = next(s for s in read_cmre(cmre_dir / "train.jsonlines") if s.line == 3)
    assert sent.text == "将深色的窗帘吹得像旗子一般飘舞起来。"
    assert mapping_of(sent) == "metaphor"
    assert [(lab, sent.text[a:b]) for lab, a, b in tenor_vehicle_spans(sent)] == [("tenor", "深色的窗帘"), ("vehicle", "旗子")]


def test_a_verb_metaphor_is_left_out(cmre_dir):
    """冻结…存款 (本体 + 喻体动作): CERD would call it literal, CMRE metaphor."""
    sent = next(s for s in read_cmre(cmre_dir / "train.jsonlines") if s.line == 2)
    assert sent.text.startswith("冻结犯罪嫌疑人的存款")
    assert mapping_of(sent) == "relation_only" and tenor_vehicle_spans(sent) == []


def test_word_pieces_and_unknown_tokens_keep_offsets(tmp_path):
    rec = {"sentences": [["[CLS]", "他", "像", "mp3", "##4", "[UNK]", "[SEP]"]], "clusters": [[[1, 1], [3, 5]]],
           "spans_type": [[[1, 1], "本体"], [[3, 5], "喻体"]], "label": "1"}
    path = tmp_path / "train.jsonlines"
    path.write_text(json.dumps(rec, ensure_ascii=False) + "\n", encoding="utf8")
    (sent,) = read_cmre(path)
    assert sent.text == "他像mp34\u25a1"
    assert [(lab, sent.text[a:b]) for lab, a, b in tenor_vehicle_spans(sent)] == [("tenor", "他"), ("vehicle", "mp34\u25a1")]


@pytest.mark.parametrize("line, message", [
    ("{not json", "invalid JSON"),
    (json.dumps({"sentences": [["[CLS]", "我", "[SEP]"]], "clusters": [], "spans_type": [], "label": 1}), "'label'"),
    (json.dumps({"sentences": [["[CLS]", "我", "[SEP]"]], "clusters": [[[1, 9], [1, 1]]],
                 "spans_type": [[[1, 1], "本体"]], "label": "1"}), "outside the sentence"),
    (json.dumps({"sentences": [["[CLS]", "我", "[SEP]"]], "clusters": [], "spans_type": [[[1, 1], "主语"]], "label": "1"}), "unknown span type"),
])
def test_malformed_records_name_file_and_line(tmp_path, line, message):
    good = json.dumps({"sentences": [["[CLS]", "好", "[SEP]"]], "clusters": [], "spans_type": [], "label": "0"})
    path = tmp_path / "bad.jsonlines"
    path.write_text(good + "\n" + line + "\n", encoding="utf8")
    with pytest.raises(CorpusFormatError) as err:
        list(read_cmre(path))
    assert "bad.jsonlines" in str(err.value) and "2" in str(err.value) and message in str(err.value)


def test_convert_writes_partial_labels(cmre_head, tmp_path):
    nlp = spacy.blank("zh")
    stats = convert_cmre(cmre_head, tmp_path, nlp)
    docs = list(read_docbin(tmp_path / "train.spacy", nlp.vocab))
    assert stats["train"]["docs"] == len(docs) == stats["train"]["metaphor"] + stats["train"]["literal"]
    metaphors = [d for d in docs if d.user_data["cmre_label"] == 1]
    literals = [d for d in docs if d.user_data["cmre_label"] == 0]
    assert metaphors and literals
    for doc in metaphors:
        assert [s.label_ for s in doc.spans["rhetoric"]] == ["metaphor"]
        assert {s.label_ for s in doc.spans["rhetoric_components"]} <= {"tenor", "vehicle"}
        assert annotated_labels(doc) == {"coarse/metaphor"}
        assert annotated_components(doc) >= {"tenor", "vehicle"} and "comparator" not in annotated_components(doc)
    for doc in literals:
        assert not doc.spans.get("rhetoric") and not doc.spans.get("rhetoric_components")
        assert set(doc.user_data[ANNOTATED_KEY]["coarse"]) == {"metaphor", "personification"}


def test_missing_file_is_named(tmp_path):
    with pytest.raises(FileNotFoundError, match="train.jsonlines"):
        convert_cmre(tmp_path, tmp_path / "out", spacy.blank("zh"))


def test_raw_path_gold_of_the_dev_split(shared_data):
    from spacy_rhetoric.evaluation.raw_path import read_gold

    gold = read_gold("cmre", shared_data, Path("annotations/pse-i-cerd"))
    assert len(gold) == 645
    positives = [g for g in gold if g.units[0].labels["coarse"] == {"metaphor"}]
    assert len(positives) == 220 and all(g.components for g in positives)
    assert all(g.component_labels == {"tenor", "vehicle"} for g in gold)


ANNOTATIONS = Path(__file__).resolve().parents[1] / "annotations" / "cmre-relation-only"


def _relation_only(cmre_head: Path, split: str = "train"):
    return [s for s in read_cmre(cmre_head / SPLIT_FILES[split]) if mapping_of(s) == "relation_only"]


def test_annotated_relation_only_sentences_become_docs(cmre_head, tmp_path):
    """With our reading of the relation-only sentences (the real annotation
    file), each becomes a doc that annotates metaphor and personification
    and the personification components, and nothing else."""
    nlp = spacy.blank("zh")
    head_lines = {s.line for s in _relation_only(cmre_head)}
    records = {rec["line"]: rec for rec in map(json.loads, (ANNOTATIONS / "train.jsonl").read_text(encoding="utf8").splitlines())
               if rec["line"] in head_lines}
    ann = tmp_path / "ann"
    ann.mkdir()
    (ann / "train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records.values()), encoding="utf8")
    stats = convert_cmre(cmre_head, tmp_path, nlp, ann)
    assert stats["train"]["relation_only/annotated"] == len(head_lines) > 0
    assert "relation_only/annotated" not in stats["dev"]  # no dev file there: left out as before
    relation_docs = [d for d in read_docbin(tmp_path / "train.spacy", nlp.vocab) if d.user_data["line"] in head_lines]
    assert len(relation_docs) == len(head_lines)
    assert any("personification" in rec["coarse"] for rec in records.values())
    for doc in relation_docs:
        rec = records[doc.user_data["line"]]
        assert sorted(s.label_ for s in doc.spans["rhetoric"]) == sorted(rec["coarse"])
        assert {s.label_ for s in doc.spans["rhetoric_components"]} == {c["label"] for c in rec["components"]}
        assert annotated_labels(doc) == {"coarse/metaphor", "coarse/personification"}
        known = annotated_components(doc)
        assert {"personification_object", "personification_content"} <= known
        assert ("tenor" in known) == ("metaphor" not in rec["coarse"])
        assert "hyperbole_object" not in known


def test_the_annotation_covers_every_relation_only_sentence(cmre_dir):
    for split in SPLIT_FILES:
        lines = {s.line for s in read_cmre(cmre_dir / SPLIT_FILES[split]) if mapping_of(s) == "relation_only"}
        annotated = [json.loads(line)["line"] for line in (ANNOTATIONS / f"{split}.jsonl").read_text(encoding="utf8").splitlines()]
        assert sorted(annotated) == sorted(lines)


@pytest.mark.parametrize("change, message", [
    ({"line": 3}, "not a relation-only sentence"),
    ({"text_sha1": text_sha1("别的句子")}, "is not that of CMRE line"),
    ({"coarse": ["hyperbole"]}, "'coarse' must be"),
    ({"coarse": [], "components": [{"label": "personification_content", "start": 0, "end": 1}]}, "not a personification"),
    ({"coarse": ["personification"], "components": [{"label": "personification_content", "start": 0, "end": 1, "text": "不"}]},
     "is not text[0:1]"),
    ({"coarse": ["personification"], "components": [{"label": "tenor", "start": 0, "end": 1}]}, "only personification_object"),
    ({"same_line": True}, "annotated twice"),
])
def test_malformed_annotation_names_file_and_line(cmre_head, tmp_path, change, message):
    first, second = _relation_only(cmre_head)[:2]
    good = {"split": "train", "line": first.line, "text_sha1": text_sha1(first.text), "coarse": [], "components": []}
    target = first if change.pop("same_line", False) else second
    bad = {"split": "train", "line": target.line, "text_sha1": text_sha1(target.text), "coarse": [], "components": [], **change}
    for comp in bad["components"]:
        comp.setdefault("text", target.text[comp["start"]:comp["end"]])
    ann = tmp_path / "ann"
    ann.mkdir()
    (ann / "train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in (good, bad)), encoding="utf8")
    with pytest.raises(CorpusFormatError) as err:
        convert_cmre(cmre_head, tmp_path / "out", spacy.blank("zh"), ann)
    assert "train.jsonl, line 2" in str(err.value) and message in str(err.value)


def test_agreement_of_sentences_without_essays(tmp_path):
    """annotation-agreement keys CMRE records by split and line."""
    from spacy_rhetoric.research.annotation_agreement import annotation_agreement

    first = [{"split": "train", "line": 5, "text_sha1": text_sha1("河水在唱歌"), "coarse": ["personification"], "components": []},
             {"split": "dev", "line": 5, "text_sha1": text_sha1("别的句子"), "coarse": [], "components": []}]
    second = [{"split": "train", "line": 5, "text_sha1": text_sha1("河水在唱歌"), "coarse": ["personification"], "components": []},
              {"split": "dev", "line": 5, "text_sha1": text_sha1("别的句子"), "coarse": ["metaphor"], "components": []}]
    for name, rows in (("a.jsonl", first), ("b.jsonl", second)):
        (tmp_path / name).write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf8")
    result = annotation_agreement(tmp_path / "a.jsonl", tmp_path / "b.jsonl")
    assert result["sentences"] == 2
    assert result["coarse"]["labels"]["personification"]["kappa"] == 1.0
    assert result["coarse"]["labels"]["metaphor"] == {"kappa": 0.0, "first": 0, "second": 1, "both": 0}


def test_raw_path_gold_of_the_relation_only_dev_sentences(shared_data):
    from spacy_rhetoric.evaluation.raw_path import read_gold

    gold = read_gold("cmre-relation-only", shared_data, ANNOTATIONS.parent / "pse-i-cerd")
    assert len(gold) == 205
    assert all(doc.scored == {"coarse": frozenset({"metaphor", "personification"})} for doc in gold)
    personified = [doc for doc in gold if "personification" in doc.units[0].labels["coarse"]]
    assert personified and all(label.startswith("personification_") for doc in personified for label, _, _ in doc.components)
