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
