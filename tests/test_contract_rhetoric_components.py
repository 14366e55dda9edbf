"""Contract of ``rhetoric_components`` on inline examples (no corpus needed).

Gold format (``spacy_rhetoric.annotation``): the reference doc's
``doc.spans["rhetoric_components"]``, one span per component labelled with
its type (``comparator``, ``tenor``, ``vehicle``,
``personification_object``, ...). ``user_data["rhetoric_annotated"]
["components"]`` declares which types the doc annotates; the others are
masked in the loss, never taught as absent.
"""
from __future__ import annotations

from typing import List, Tuple

import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from contract_helpers import (
    SMALL_TOK2VEC,
    assert_loss_falls,
    assert_needs_initialize,
    assert_overfits,
    assert_round_trips,
    assert_scorer_keys,
    initialized,
    overfit,
)

NAME = "rhetoric_components"
KEY = "rhetoric_components"
LABELS = ["comparator", "tenor", "vehicle", "personification_object", "personification_content"]

#: One doc per entry: its text and its components (label, text); each
#: component text occurs once in its doc.
TRAIN_DATA: List[Tuple[str, List[Tuple[str, str]]]] = [
    ("弯弯的月亮像小船。", [("tenor", "月亮"), ("comparator", "像"), ("vehicle", "小船")]),
    ("她的眼睛像星星。", [("tenor", "眼睛"), ("comparator", "像"), ("vehicle", "星星")]),
    ("秋天的树叶好像蝴蝶。", [("tenor", "树叶"), ("comparator", "好像"), ("vehicle", "蝴蝶")]),
    ("春风抚摸着我的脸。", [("personification_object", "春风"), ("personification_content", "抚摸")]),
    ("小花向我点头。", [("personification_object", "小花"), ("personification_content", "点头")]),
    ("我们今天去公园散步。", []),
]
TEXTS = [text for text, _ in TRAIN_DATA]
SMALL = {"model": {"reducer": {"hidden_size": 32}, "tok2vec": SMALL_TOK2VEC}}


def make_nlp():
    nlp = spacy.blank("zh")
    nlp.add_pipe(NAME, config=SMALL)
    return nlp


def reference(nlp, text: str, components, declared=LABELS) -> Doc:
    doc = nlp.make_doc(text)
    spans = []
    for label, part in components:
        start = text.index(part)
        spans.append(doc.char_span(start, start + len(part), label=label))
    doc.spans[KEY] = sorted(spans, key=lambda s: (s.start, s.end))
    doc.user_data["rhetoric_annotated"] = {"components": list(declared)}
    return doc


def make_examples(nlp) -> List[Example]:
    return [Example(nlp.make_doc(text), reference(nlp, text, comps)) for text, comps in TRAIN_DATA]


def triples(doc: Doc):
    return sorted((s.start_char, s.end_char, s.label_) for s in doc.spans[KEY])


def output(doc: Doc):
    group = doc.spans[KEY]
    return sorted(((s.start, s.end, s.label_), float(score)) for s, score in zip(group, group.attrs["scores"]))


@pytest.fixture(scope="module")
def trained():
    return overfit(make_nlp, make_examples, NAME, 60)


def test_rhetoric_components_initialize_takes_the_declared_labels():
    assert list(initialized(make_nlp(), NAME, make_examples).labels) == LABELS


def test_rhetoric_components_update_lowers_the_loss(trained):
    _, history = trained
    assert_loss_falls(history)


def test_rhetoric_components_overfits_the_inline_examples(trained):
    nlp, _ = trained
    gold = [triples(eg.reference) for eg in make_examples(nlp)]
    assert_overfits(nlp, TEXTS, triples, gold, make_examples(nlp), ["rhetoric_components_f"])


def test_rhetoric_components_round_trips_to_disk_and_bytes(trained, tmp_path):
    nlp, _ = trained
    assert_round_trips(nlp, TEXTS, output, tmp_path)


def test_rhetoric_components_scorer_returns_its_documented_keys(trained):
    nlp, _ = trained
    scores = assert_scorer_keys(nlp, NAME, make_examples(nlp), "spacy_rhetoric.rhetoric_components_scorer.v1")
    assert set(scores["rhetoric_components_per_type"]) == set(LABELS)


def test_rhetoric_components_needs_initialize_and_labels():
    nlp = make_nlp()
    assert_needs_initialize(nlp, NAME, "弯弯的月亮像小船。")
    # no example declares or holds any component: no label to learn
    examples = [Example(nlp.make_doc(text), reference(nlp, text, [], declared=[])) for text in TEXTS]
    with pytest.raises(ValueError, match="E143"):
        nlp.get_pipe(NAME).initialize(lambda: examples, nlp=nlp)
