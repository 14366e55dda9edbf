"""Contract of ``clause_segmenter`` on inline examples (no corpus needed).

A rule component: nothing to train, so the contract is that
``nlp.initialize`` leaves it as it is, that it writes the gold clauses and
sentences of hand-segmented text, that its settings survive the pipeline's
disk and bytes round trips, that its registered scorer returns the keys its
factory declares, and that a bad setting is refused.

Gold format (``scorers/clauses.py``): the reference doc's
``doc.spans["clauses"]`` and its sentence starts.
"""
from __future__ import annotations

from typing import List

import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import ConfigValidationError

from contract_helpers import assert_initialize_changes_nothing, assert_round_trips, assert_scorer_keys

NAME = "clause_segmenter"

#: One text per entry: its clauses, grouped by sentence.
GOLD: List[List[List[str]]] = [
    [["春天来了，", "花开了。"], ["我们去公园吧！"]],
    # a decimal point between digits ends nothing
    [["圆周率是3.14，", "很有名。"]],
    # a closing quote stays with the clause before it
    [["他说：", "“你好。”"], ["然后走了。"]],
    # a semicolon ends a sentence (PSE-I's unit)
    [["人生是一条路；"], ["人生是一首歌。"]],
]
TEXTS = ["".join(c for sent in sents for c in sent) for sents in GOLD]


def make_nlp(**config):
    nlp = spacy.blank("zh")
    nlp.add_pipe(NAME, config=config)
    return nlp


def reference(nlp, sents: List[List[str]], key: str = "clauses") -> Doc:
    text = "".join(c for sent in sents for c in sent)
    doc = nlp.make_doc(text)
    starts = [False] * len(doc)
    spans, pos = [], 0
    for sent in sents:
        starts[doc.char_span(pos, pos + 1).start] = True
        for clause in sent:
            spans.append(doc.char_span(pos, pos + len(clause), label="clause"))
            pos += len(clause)
    for token, start in zip(doc, starts):
        token.is_sent_start = start
    doc.spans[key] = spans
    return doc


def output(doc: Doc):
    key = next(k for k in doc.spans)
    return key, [c.text for c in doc.spans[key]], [s.text for s in doc.sents]


def test_clause_segmenter_initialize_needs_no_examples_and_changes_nothing():
    assert_initialize_changes_nothing(make_nlp(), TEXTS, output)


def test_clause_segmenter_finds_the_gold_clauses_and_sentences():
    nlp = make_nlp()
    for doc, sents in zip(nlp.pipe(TEXTS), GOLD):
        assert [c.text for c in doc.spans["clauses"]] == [c for sent in sents for c in sent]
        assert [s.text for s in doc.sents] == ["".join(sent) for sent in sents]
        assert {c.label_ for c in doc.spans["clauses"]} == {"clause"}
    assert list(nlp("").spans["clauses"]) == []


def test_clause_segmenter_settings_round_trip_to_disk_and_bytes(tmp_path):
    nlp = make_nlp(spans_key="my_clauses", sentence_punct="。！")
    docs = list(nlp.pipe(TEXTS))
    # the settings are in effect: another key, and ； no longer ends a sentence
    assert "my_clauses" in docs[0].spans and "clauses" not in docs[0].spans
    assert [s.text for s in docs[3].sents] == [TEXTS[3]]
    assert_round_trips(nlp, TEXTS, output, tmp_path)


def test_clause_segmenter_scorer_returns_its_documented_keys():
    nlp = make_nlp()
    examples = [Example(nlp.make_doc(text), reference(nlp, sents)) for text, sents in zip(TEXTS, GOLD)]
    scores = assert_scorer_keys(nlp, NAME, examples, "spacy_rhetoric.clause_scorer.v1")
    assert scores["clause_boundary_f"] == scores["sent_boundary_f"] == 1.0
    # with the spans key set, the scorer reads that group
    other = make_nlp(spans_key="my_clauses")
    examples = [Example(other.make_doc(text), reference(other, sents, "my_clauses")) for text, sents in zip(TEXTS, GOLD)]
    assert other.evaluate(examples)["clause_boundary_f"] == 1.0


def test_clause_segmenter_refuses_unknown_and_mistyped_settings():
    with pytest.raises(ConfigValidationError):
        make_nlp(spans_keys="clauses")
    with pytest.raises(ConfigValidationError):
        make_nlp(split_on_newline="sometimes")
