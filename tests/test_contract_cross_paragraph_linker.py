"""Contract of ``cross_paragraph_linker`` on inline examples (no corpus needed).

Gold format (``spacy_rhetoric.set_parallelisms`` with kind
``"cross_paragraph"``): each parallelism of the reference doc is a list of
its branches' ``(start, end)`` token offsets, a branch being a paragraph's
first sentence. Paragraphs are lines. The component reads the sentences the
``clause_segmenter`` sets, so it runs after it and ``nlp.update`` is told
that the segmenter annotates (``annotates=["clause_segmenter"]``).
"""
from __future__ import annotations

from typing import List, Tuple

import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from contract_helpers import (
    assert_initialize_checks_get_examples,
    assert_loss_falls,
    assert_overfits,
    assert_round_trips,
    assert_scorer_keys,
    overfit,
)
from spacy_rhetoric import parallelisms, set_parallelisms

NAME = "cross_paragraph_linker"
KIND = "cross_paragraph"

#: One essay per entry: its paragraphs and its cross-paragraph parallelisms
#: (indices of the paragraphs whose first sentences are the branches).
TRAIN_DATA: List[Tuple[List[str], List[List[int]]]] = [
    (["温暖", "温暖是妈妈的手。她每天为我做饭。", "今天下雨，我们在家。", "温暖是老师的话。他教我写字。", "温暖是朋友的笑。"], [[1, 3, 4]]),
    (["我的老师", "他教我写字。", "老师的手很暖。", "下课了。"], []),
    (["春天是花。", "春天是草。", "夏天很热，我们去游泳。"], [[0, 1]]),
]
TEXTS = ["\n".join(paragraphs) for paragraphs, _ in TRAIN_DATA]
SMALL = {"model": {"hidden_width": 16}, "threshold": 0.5}


def make_nlp(**config):
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe(NAME, config={**SMALL, **config})
    return nlp


def reference(nlp, paragraphs: List[str], groups: List[List[int]]) -> Doc:
    doc = nlp.make_doc("\n".join(paragraphs))
    bounds, pos = [], 0
    for paragraph in paragraphs:
        first = next((i + 1 for i, c in enumerate(paragraph) if c in "。！？"), len(paragraph))
        span = doc.char_span(pos, pos + first)
        bounds.append((span.start, span.end))
        pos += len(paragraph) + 1
    set_parallelisms(doc, [[bounds[i] for i in g] for g in groups], kinds=[KIND] * len(groups))
    return doc


def make_examples(nlp) -> List[Example]:
    return [Example(nlp.make_doc(text), reference(nlp, p, g)) for text, (p, g) in zip(TEXTS, TRAIN_DATA)]


def branch_texts(doc: Doc):
    return [[span.text for span in group] for group in parallelisms(doc, kind=KIND)]


def gold_texts(paragraphs, groups):
    return [[paragraphs[i].split("。")[0] + ("。" if "。" in paragraphs[i] else "") for i in g] for g in groups]


def output(doc: Doc):
    return [[(s.start, s.end, s.id_) for s in group] for group in parallelisms(doc, kind=KIND)]


@pytest.fixture(scope="module")
def trained():
    return overfit(make_nlp, make_examples, NAME, 100, learn_rate=0.01, annotates=["clause_segmenter"])


def test_cross_paragraph_linker_update_lowers_the_loss(trained):
    _, history = trained
    assert_loss_falls(history)


def test_cross_paragraph_linker_overfits_the_inline_examples(trained):
    nlp, _ = trained
    gold = [gold_texts(paragraphs, groups) for paragraphs, groups in TRAIN_DATA]
    keys = ["cross_paragraph_link_f", "cross_paragraph_group_f"]
    assert_overfits(nlp, TEXTS, branch_texts, gold, make_examples(nlp), keys)


def test_cross_paragraph_linker_round_trips_to_disk_and_bytes(trained, tmp_path):
    nlp, _ = trained
    assert_round_trips(nlp, TEXTS, output, tmp_path)


def test_cross_paragraph_linker_scorer_returns_its_documented_keys(trained):
    nlp, _ = trained
    scores = assert_scorer_keys(nlp, NAME, make_examples(nlp), "spacy_rhetoric.cross_paragraph_scorer.v1")
    assert scores["cross_paragraph_n_gold"] == 2


def test_cross_paragraph_linker_refuses_bad_settings_and_examples():
    with pytest.raises(ValueError, match="window"):
        make_nlp(window=0)
    with pytest.raises(ValueError, match="threshold"):
        make_nlp(threshold=1.5)
    nlp = make_nlp()
    assert_initialize_checks_get_examples(nlp.get_pipe(NAME), nlp)
