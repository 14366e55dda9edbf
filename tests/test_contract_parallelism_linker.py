"""Contract of ``parallelism_linker`` on inline examples (no corpus needed).

Gold format (``spacy_rhetoric.set_parallelisms``): each parallelism of the
reference doc is a list of its branches' ``(start, end)`` token offsets,
stored as the span groups ``doc.spans["parallelism"]`` (every branch) and
``["parallelism_N"]`` (one group per parallelism); a doc without any is
annotated as having none.
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
from spacy_rhetoric import parallelisms, set_parallelisms
from spacy_rhetoric.runtime.threads import torch_threads

NAME = "parallelism_linker"

#: One doc per entry: its text and its parallelisms, each the texts of its
#: branches in document order.
TRAIN_DATA: List[Tuple[str, List[List[str]]]] = [
    ("我们爱春天的花，我们爱夏天的雨，我们爱秋天的叶。", [["我们爱春天的花", "我们爱夏天的雨", "我们爱秋天的叶"]]),
    ("读书使人充实，思考使人深刻，交流使人开阔。", [["读书使人充实", "思考使人深刻", "交流使人开阔"]]),
    ("今天我们去公园散步。", []),
    ("他是一个好学生，大家都喜欢他。", []),
]
TEXTS = [text for text, _ in TRAIN_DATA]
SMALL = {"model": {"hidden_width": 32, "dropout": 0.0, "tok2vec": SMALL_TOK2VEC}}


@pytest.fixture(autouse=True)
def one_torch_thread():
    """The BiLSTM on one thread (the machine may be shared)."""
    with torch_threads(1):
        yield


def make_nlp():
    nlp = spacy.blank("zh")
    nlp.add_pipe(NAME, config=SMALL)
    return nlp


def reference(nlp, text: str, groups) -> Doc:
    doc = nlp.make_doc(text)
    offsets = []
    for branches in groups:
        found, cursor = [], 0
        for branch in branches:
            start = text.index(branch, cursor)
            span = doc.char_span(start, start + len(branch))
            found.append((span.start, span.end))
            cursor = start + len(branch)
        offsets.append(found)
    set_parallelisms(doc, offsets)
    return doc


def make_examples(nlp) -> List[Example]:
    return [Example(nlp.make_doc(text), reference(nlp, text, groups)) for text, groups in TRAIN_DATA]


def branch_texts(doc: Doc):
    return [[span.text for span in group] for group in parallelisms(doc)]


def output(doc: Doc):
    return [[(s.start, s.end, s.label_, s.id_) for s in group] for group in parallelisms(doc)]


@pytest.fixture(scope="module")
def trained():
    return overfit(make_nlp, make_examples, NAME, 60)


def test_parallelism_linker_initialize_takes_the_tags_of_the_examples():
    labels = initialized(make_nlp(), NAME, make_examples).labels
    assert {"O", "B", "I"} <= set(labels)
    # the two later branches of each parallelism link back to the branch before
    assert any(tag.startswith("J") for tag in labels), labels


def test_parallelism_linker_update_lowers_the_loss(trained):
    _, history = trained
    assert_loss_falls(history)


def test_parallelism_linker_overfits_the_inline_examples(trained):
    nlp, _ = trained
    gold = [groups for _, groups in TRAIN_DATA]
    metrics = ("epm", "mpbm", "mbawo", "mwo")
    assert_overfits(nlp, TEXTS, branch_texts, gold, make_examples(nlp), [f"parallelism_{m}_f" for m in metrics])


def test_parallelism_linker_round_trips_to_disk_and_bytes(trained, tmp_path):
    nlp, _ = trained
    assert_round_trips(nlp, TEXTS, output, tmp_path)


def test_parallelism_linker_scorer_returns_its_documented_keys(trained):
    nlp, _ = trained
    assert_scorer_keys(nlp, NAME, make_examples(nlp), "spacy_rhetoric.parallelism_scorer.v1")


def test_parallelism_linker_needs_initialize_and_a_document():
    nlp = make_nlp()
    linker = assert_needs_initialize(nlp, NAME, "读书使人充实，思考使人深刻。")
    empty = [Example(nlp.make_doc(""), nlp.make_doc(""))]
    with pytest.raises(ValueError, match="R101"):
        linker.initialize(lambda: empty, nlp=nlp)
