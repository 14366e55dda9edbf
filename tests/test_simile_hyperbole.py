"""Our hyperbole reading of the simile corpus's training split
(``annotations/simile-hyperbole``) and its converter."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy

from spacy_rhetoric.annotation import ANNOTATED_KEY
from spacy_rhetoric.corpora.jsonio import text_sha1
from spacy_rhetoric.corpora.simile import (ANNOTATED, HYPERBOLE_ANNOTATED, convert_simile, read_simile,
                                           sentence_text, split_path)
from spacy_rhetoric.errors import CorpusFormatError

from rhetoric_helpers import write_annotation_dir

ANNOTATIONS = Path(__file__).resolve().parent.parent / "annotations" / "simile-hyperbole"

# label line 1: 汗水像下雨一样流 (a hyperbole), label line 9: 他像他爸爸 (not), line 14: unannotated
TRAIN = (
    "simile\n汗水\tts\n像\tO\n下\tvb\n雨\tve\n一样\tO\n流\tO\n\n"
    "literal\n他\tO\n像\tO\n他爸爸\tO\n\n"
    "literal\n我\tO\n像\tO\n你\tO\n\n")


def _corpus(tmp_path: Path) -> Path:
    folder = tmp_path / "simile"
    folder.mkdir()
    for split in ("Train", "Dev", "Test"):
        (folder / f"Chinese-Simile-Recognition-Dataset-{split}.tsv").write_text(TRAIN, encoding="utf8")
    return folder


def _records(folder: Path):
    sents = list(read_simile(split_path(folder, "train")))
    hyp, lit = sents[0], sents[1]
    text = sentence_text(hyp)
    assert text == "汗水像下雨一样流"
    return [
        {"split": "train", "line": hyp.line, "text_sha1": text_sha1(text), "coarse": ["hyperbole"],
         "form": ["mixed_hyperbole"], "content": ["amplification"],
         "components": [{"label": "hyperbole_object", "start": 0, "end": 2, "text": "汗水"},
                        {"label": "hyperbole_content", "start": 3, "end": 8, "text": "下雨一样流"}]},
        {"split": "train", "line": lit.line, "text_sha1": text_sha1(sentence_text(lit)), "coarse": [],
         "form": [], "content": [], "components": [], "note": "like-with-like"},
    ]


def _read_docs(path: Path):
    from spacy.tokens import DocBin

    return list(DocBin().from_disk(path).get_docs(spacy.blank("zh").vocab))


def _declared(doc):
    return {level: list(labels) for level, labels in doc.user_data[ANNOTATED_KEY].items()}


def test_hyperbole_records_become_gold_and_declare_what_they_decided(tmp_path):
    corpus = _corpus(tmp_path)
    stats = convert_simile(corpus, tmp_path / "out", spacy.blank("zh").vocab, write_annotation_dir(tmp_path, _records(corpus)))
    assert stats["train"]["hyperbole_annotated"] == 2 and stats["train"]["hyperboles"] == 1
    assert stats["dev"]["hyperbole_annotated"] == 0  # only the training split was read
    hyp, lit, unread = _read_docs(tmp_path / "out" / "train.spacy")
    assert sorted(s.label_ for s in hyp.spans["rhetoric"]) == ["hyperbole", "metaphor"]
    assert [s.label_ for s in hyp.spans["rhetoric_form"]] == ["simile", "mixed_hyperbole"]
    assert [s.label_ for s in hyp.spans["rhetoric_content"]] == ["amplification"]
    comps = {(s.label_, s.text) for s in hyp.spans["rhetoric_components"]}
    # 下雨一样流 starts inside no word but 一样 and 流 are words of their own: the span is exact
    assert {("hyperbole_object", "汗水"), ("hyperbole_content", "下雨一样流"), ("tenor", "汗水"), ("vehicle", "下雨")} <= comps
    assert hyp.cats["coarse/hyperbole"] == 1.0 and lit.cats["coarse/hyperbole"] == 0.0
    assert _declared(hyp) == HYPERBOLE_ANNOTATED == _declared(lit)
    assert not lit.spans["rhetoric"] and not lit.spans["rhetoric_components"]
    # a sentence without a record says nothing about hyperbole
    assert _declared(unread) == ANNOTATED and "hyperbole" not in ANNOTATED["coarse"]
    assert "coarse/hyperbole" not in unread.cats


def test_a_span_that_cuts_a_word_is_widened_to_the_word(tmp_path):
    corpus = _corpus(tmp_path)
    records = _records(corpus)
    records[0]["components"][1] = {"label": "hyperbole_content", "start": 4, "end": 8, "text": "雨一样流"}
    convert_simile(corpus, tmp_path / "out", spacy.blank("zh").vocab, write_annotation_dir(tmp_path, records))
    hyp = _read_docs(tmp_path / "out" / "train.spacy")[0]
    assert ("hyperbole_content", "雨一样流") in {(s.label_, s.text) for s in hyp.spans["rhetoric_components"]}
    records[0]["components"][1] = {"label": "hyperbole_content", "start": 2, "end": 4, "text": "像下"}
    convert_simile(corpus, tmp_path / "out", spacy.blank("zh").vocab, write_annotation_dir(tmp_path, records))
    hyp = _read_docs(tmp_path / "out" / "train.spacy")[0]
    assert ("hyperbole_content", "像下") in {(s.label_, s.text) for s in hyp.spans["rhetoric_components"]}


@pytest.mark.parametrize("change, message", [
    ({"line": 2}, "is not the label line of a sentence"),
    ({"text_sha1": text_sha1("别的句子")}, "is not that of the sentence at line 9"),
    ({"coarse": ["metaphor"]}, "'coarse' must be a list of hyperbole"),
    ({"form": ["simile"]}, "'form' must list one or more of"),
    ({"content": ["amplification"]}, "'content' must list one or more of"),
    ({"components": [{"label": "hyperbole_content", "start": 0, "end": 1, "text": "他"}]}, "on a sentence that is not a hyperbole"),
    ({"coarse": ["hyperbole"], "form": ["direct_hyperbole"], "content": ["amplification"],
      "components": [{"label": "tenor", "start": 0, "end": 1, "text": "他"}]}, "only hyperbole_object, hyperbole_content"),
    ({"coarse": ["hyperbole"], "form": ["direct_hyperbole"], "content": ["amplification"],
      "components": [{"label": "hyperbole_content", "start": 0, "end": 1, "text": "你"}]}, "is not text[0:1]"),
    ({"same_line": True}, "annotated twice"),
])
def test_malformed_hyperbole_record_names_file_and_line(tmp_path, change, message):
    corpus = _corpus(tmp_path)
    good, bad = _records(corpus)
    if change.pop("same_line", False):
        bad = dict(good)
    bad.update(change)
    with pytest.raises(CorpusFormatError) as err:
        convert_simile(corpus, tmp_path / "out", spacy.blank("zh").vocab, write_annotation_dir(tmp_path, [good, bad]))
    assert "train.jsonl, line 2" in str(err.value) and message in str(err.value)


def test_the_annotation_covers_every_training_sentence(simile_dir):
    sents = {s.line: sentence_text(s) for s in read_simile(split_path(simile_dir, "train"))}
    records = [json.loads(line) for line in (ANNOTATIONS / "train.jsonl").read_text(encoding="utf8").splitlines()]
    assert sorted(r["line"] for r in records) == sorted(sents)
    assert all(r["text_sha1"] == text_sha1(sents[r["line"]]) for r in records)


def test_the_second_pass_is_a_sample_of_the_first_and_agreement_is_computed(tmp_path):
    from spacy_rhetoric.research.annotation_agreement import annotation_agreement

    result = annotation_agreement(ANNOTATIONS / "train.jsonl", ANNOTATIONS / "second_pass.jsonl")
    second = (ANNOTATIONS / "second_pass.jsonl").read_text(encoding="utf8").splitlines()
    assert result["sentences"] == len(second)
    hyperbole = result["coarse"]["labels"]["hyperbole"]
    assert hyperbole["first"] > 0 and hyperbole["second"] > 0 and hyperbole["kappa"] is not None
