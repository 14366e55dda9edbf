"""``rhetoric_analysis_record``: records made in the workers of
``analyze --n-process N`` are the records the parent made before, from docs
that carry far less across."""
from __future__ import annotations

from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc

from spacy_rhetoric.analysis.io import InputDoc
from spacy_rhetoric.components.analysis_record import AnalysisRecord
from spacy_rhetoric.analysis.engines import RECORD_COMPONENT, local_results
from spacy_rhetoric.analysis.records import RECORD_BODY_KEY, doc_sections, doc_to_record

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "zh_rhetoric"


@pytest.fixture(scope="module")
def nlp():
    return spacy.load(PIPELINE)


@pytest.fixture(scope="module")
def texts(pse_dir: Path):
    from spacy_rhetoric.analysis.io import iter_inputs

    return [item.text for item in iter_inputs([pse_dir], split="test")][:6]


def test_slim_doc_gives_the_same_record_and_carries_less(nlp, texts):
    doc = nlp(texts[0])
    expected = doc_to_record(doc, "e1", "e1.txt", {"name": "x"}, "utf-8")
    html = doc_sections(doc)
    full_bytes = len(doc.to_bytes())
    AnalysisRecord()(doc)
    assert not doc.spans and doc.tensor.size == 0 and list(doc.user_data) == [RECORD_BODY_KEY]
    assert doc_to_record(doc, "e1", "e1.txt", {"name": "x"}, "utf-8") == expected
    assert doc_sections(doc) == html
    slim_bytes = doc.to_bytes()
    assert len(slim_bytes) * 3 < full_bytes
    # what the parent receives from a worker
    back = Doc(nlp.vocab).from_bytes(slim_bytes)
    assert back.text == doc.text
    assert doc_to_record(back, "e1", "e1.txt", {"name": "x"}, "utf-8") == expected


def test_without_slim_the_doc_keeps_its_annotations(nlp, texts):
    doc = nlp(texts[1])
    groups = {k: len(v) for k, v in doc.spans.items()}
    AnalysisRecord(slim=False)(doc)
    assert {k: len(v) for k, v in doc.spans.items()} == groups and doc.tensor.size > 0
    assert doc.user_data[RECORD_BODY_KEY]["text"] == doc.text


def test_two_processes_after_use_in_parent_give_the_one_process_records(nlp, texts, monkeypatch):
    """The real sequence: the parent analyses one text, then a folder with
    two workers; records and HTML sections equal one process's, the parent
    built none of them (the workers did), and the pipeline is as it was."""
    from spacy_rhetoric.analysis import records

    nlp(texts[0])
    names = list(nlp.pipe_names)
    items = [InputDoc(id=f"e{i}", path=None, text=t) for i, t in enumerate(texts)]
    one = list(local_results(nlp, items, n_process=1, batch_size=2, with_sections=True))

    def parent_builds(doc):
        raise AssertionError("the parent built a record body")

    # the component keeps its own reference, so only the parent's doc_to_record would call this
    monkeypatch.setattr(records, "record_body", parent_builds)
    two = list(local_results(nlp, items, n_process=2, batch_size=2, with_sections=True))
    assert two == one
    assert [r["id"] for _, r, _ in two] == [item.id for item in items]
    assert list(nlp.pipe_names) == names and RECORD_COMPONENT not in nlp.pipe_names


def test_doc_to_record_is_exported_from_the_package_root():
    import spacy_rhetoric
    from spacy_rhetoric.analysis.records import doc_to_record

    assert spacy_rhetoric.doc_to_record is doc_to_record and "doc_to_record" in spacy_rhetoric.__all__
