"""Contract of ``figurative_units`` on inline examples (no corpus needed).

Gold format (ConFiguRe as ``rhetoric convert configure`` writes it): the
reference doc's ``doc.spans["figurative_units"]``, each unit a run of whole
clauses labelled with one of the 12 figure types
(``spacy_rhetoric.taxonomy.CONFIGURE_FIGURES``). The component tags the
``clause_segmenter``'s clauses, so it runs after it, and the predicted
docs of the training examples carry the clauses.
"""
from __future__ import annotations

from typing import List, Tuple

import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from contract_helpers import (
    assert_loss_falls,
    assert_needs_initialize,
    assert_overfits,
    assert_round_trips,
    assert_scorer_keys,
    initialized,
    overfit,
)

NAME = "figurative_units"
KEY = "figurative_units"

#: One passage per entry: its text and its units (label, text of the unit:
#: whole clauses, each occurring once in the passage).
TRAIN_DATA: List[Tuple[str, List[Tuple[str, str]]]] = [
    ("月亮像一只小船，挂在天上。我们慢慢地走回家。", [("metaphor", "月亮像一只小船，")]),
    ("你难道不知道吗？他笑着说。", [("rhetorical_question", "你难道不知道吗？")]),
    ("谢谢，谢谢，真是太感谢了。", [("repetition", "谢谢，谢谢，真是太感谢了。")]),
    ("他的声音大得能把屋顶掀翻。大家都笑了。", [("hyperbole", "他的声音大得能把屋顶掀翻。")]),
    ("今天天气很好，我们去公园。", []),
]
TEXTS = [text for text, _ in TRAIN_DATA]
SMALL = {"model": {"hidden_width": 32, "dropout": 0.0}}


def make_nlp():
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe(NAME, config=SMALL)
    return nlp


def reference(nlp, text: str, units) -> Doc:
    doc = nlp.make_doc(text)
    spans = []
    for label, part in units:
        start = text.index(part)
        spans.append(doc.char_span(start, start + len(part), label=label))
    doc.spans[KEY] = spans
    return doc


def make_examples(nlp) -> List[Example]:
    """Examples whose predicted docs carry the clauses (``nlp.initialize``
    runs no component on them)."""
    segment = nlp.get_pipe("clause_segmenter")
    return [Example(segment(nlp.make_doc(text)), reference(nlp, text, units)) for text, units in TRAIN_DATA]


def units(doc: Doc):
    return [(s.label_, s.text) for s in doc.spans[KEY]]


def output(doc: Doc):
    return [(s.start, s.end, s.label_) for s in doc.spans[KEY]]


@pytest.fixture(scope="module")
def trained():
    return overfit(make_nlp, make_examples, NAME, 60, learn_rate=0.01)


def test_figurative_units_initialize_takes_the_typed_bio_tags():
    labels = initialized(make_nlp(), NAME, make_examples).labels
    # O, then B-X and I-X for each of the 12 figure types
    assert len(labels) == 25 and labels[0] == "O"
    assert {"B-metaphor", "I-metaphor", "B-repetition", "I-quote"} <= set(labels)


def test_figurative_units_update_lowers_the_loss(trained):
    _, history = trained
    assert_loss_falls(history)


def test_figurative_units_overfits_the_inline_examples(trained):
    nlp, _ = trained
    gold = [expected for _, expected in TRAIN_DATA]
    keys = ["figurative_units_recognition_f", "figurative_units_extraction_f"]
    assert_overfits(nlp, TEXTS, units, gold, make_examples(nlp), keys)


def test_figurative_units_round_trips_to_disk_and_bytes(trained, tmp_path):
    nlp, _ = trained
    assert_round_trips(nlp, TEXTS, output, tmp_path)


def test_figurative_units_scorer_returns_its_documented_keys(trained):
    nlp, _ = trained
    scores = assert_scorer_keys(nlp, NAME, make_examples(nlp), "spacy_rhetoric.figurative_units_scorer.v1")
    assert set(scores["figurative_units_per_type"]) == {"metaphor", "rhetorical_question", "repetition", "hyperbole"}


def test_figurative_units_needs_initialize_and_a_doc_with_clauses():
    nlp = make_nlp()
    # no E109 here: the clause features need the model's widths first
    pipe = assert_needs_initialize(nlp, NAME, "月亮像一只小船，挂在天上。", match=None)
    # docs the clause_segmenter has not run on have no clauses to tag
    with pytest.raises(ValueError, match="clause_segmenter"):
        pipe.initialize(lambda: [Example(nlp.make_doc(t), nlp.make_doc(t)) for t in TEXTS], nlp=nlp)
    with pytest.raises(ValueError, match="E923"):
        pipe.initialize(lambda: [Example(nlp(""), nlp.make_doc(""))], nlp=nlp)
