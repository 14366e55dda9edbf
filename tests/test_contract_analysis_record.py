"""Contract of ``rhetoric_analysis_record`` on inline text (no corpus needed).

Added last to a pipeline, the component stores the doc's record body in
``doc.user_data`` and (``slim``, the default) drops the doc's span groups,
tensor and other ``user_data``: :func:`spacy_rhetoric.doc_to_record` must
then give the record the full doc gives, also after the slim doc travelled
as ``Doc.to_bytes`` (what ``analyze --n-process`` workers send). The
pipeline before it here is the clause segmenter and the simile rules, so
the records hold sentences, labels, components and clauses.
"""
from __future__ import annotations

import pytest
import spacy
from spacy.tokens import Doc
from thinc.api import ConfigValidationError

from contract_helpers import assert_initialize_changes_nothing, assert_round_trips
from spacy_rhetoric import doc_to_record

NAME = "rhetoric_analysis_record"
TEXTS = [
    "弯弯的月亮像小船。我们今天去公园散步。",
    "她的眼睛像星星，亮晶晶的。\n爸爸七点起床。",
    "",
]


def make_nlp(**config):
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe("rhetoric_simile_rules")
    nlp.add_pipe(NAME, config=config)
    return nlp


def record(doc: Doc):
    return doc_to_record(doc, "d1", "d1.txt", {"name": "contract"}, "utf-8")


def test_analysis_record_initialize_changes_nothing():
    assert_initialize_changes_nothing(make_nlp(), TEXTS, record)


def test_slim_docs_give_the_full_docs_records_and_carry_less():
    nlp = make_nlp()
    for text in TEXTS:
        full = nlp(text, disable=[NAME])
        slim = nlp(text)
        assert record(slim) == record(full)
        assert not slim.spans and slim.tensor.size == 0 and len(slim.user_data) == 1
        # what the parent process receives from a worker
        back = Doc(nlp.vocab).from_bytes(slim.to_bytes())
        assert back.text == text and record(back) == record(full)
    doc = nlp(TEXTS[0])
    body = record(doc)
    assert [s["text"] for s in body["sentences"]] == ["弯弯的月亮像小船。", "我们今天去公园散步。"]


def test_without_slim_the_doc_keeps_its_annotations():
    nlp = make_nlp(slim=False)
    full = nlp(TEXTS[1], disable=[NAME])
    doc = nlp(TEXTS[1])
    assert {k: len(v) for k, v in doc.spans.items()} == {k: len(v) for k, v in full.spans.items()}
    assert record(doc) == record(full)


def test_analysis_record_setting_round_trips_to_disk_and_bytes(tmp_path):
    def output(doc: Doc):
        return record(doc), sorted(doc.spans)

    nlp = make_nlp(slim=False)
    assert_round_trips(nlp, TEXTS, output, tmp_path)
    assert spacy.load(tmp_path / "pipeline").get_pipe(NAME).slim is False


def test_analysis_record_refuses_unknown_and_mistyped_settings():
    with pytest.raises(ConfigValidationError):
        make_nlp(slimm=True)
    with pytest.raises(ConfigValidationError):
        make_nlp(slim="sometimes")
