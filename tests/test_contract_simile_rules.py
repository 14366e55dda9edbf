"""Contract of ``rhetoric_simile_rules`` on inline examples (no corpus needed).

The rule baseline reads words (its rules name words such as 像 and 一样),
so the inputs are Docs of given words, as the corpora's gold words are; a
``clause_segmenter`` before it gives the sentences. It writes the outputs
of ``rhetoric_textcat`` (``sent._.rhetoric``, ``doc.spans["rhetoric"]``,
``["rhetoric_form"]``, ``["rhetoric_content"]``) and of
``rhetoric_components`` (``doc.spans["rhetoric_components"]``), and is
scored by both of their registered scorers.
"""
from __future__ import annotations

from typing import List, Tuple

import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import registry
from thinc.api import ConfigValidationError

from contract_helpers import assert_initialize_changes_nothing, assert_round_trips

NAME = "rhetoric_simile_rules"
COMPONENTS = "rhetoric_components"
LEVEL_KEYS = {"coarse": "rhetoric", "form": "rhetoric_form"}

#: One doc per entry: its sentences (words separated by spaces), whether
#: each is a simile, and the doc's components (label, word).
DATA: List[Tuple[List[Tuple[str, bool]], List[Tuple[str, str]]]] = [
    ([("她 的 眼睛 像 星星 。", True)], [("tenor", "眼睛"), ("comparator", "像"), ("vehicle", "星星")]),
    (
        [("孩子们 的 笑声 好像 清脆 的 银铃 一样 。", True)],
        [("tenor", "笑声"), ("comparator", "好像"), ("vehicle", "银铃")],
    ),
    ([("今天 我们 去 公园 散步 。", False)], []),
    (
        [("爸爸 七 点 起床 。", False), ("落叶 像 蝴蝶 。", True)],
        [("tenor", "落叶"), ("comparator", "像"), ("vehicle", "蝴蝶")],
    ),
]


def make_nlp():
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe(NAME)
    return nlp


def words_doc(vocab, sents) -> Doc:
    words = [w for text, _ in sents for w in text.split()]
    return Doc(vocab, words=words, spaces=[False] * len(words))


def inputs(nlp) -> List[Doc]:
    return [words_doc(nlp.vocab, sents) for sents, _ in DATA]


def reference(vocab, sents, components) -> Doc:
    words, starts, similes = [], [], []
    for text, simile in sents:
        sent = text.split()
        if simile:
            similes.append((len(words), len(words) + len(sent)))
        starts += [True] + [False] * (len(sent) - 1)
        words += sent
    doc = Doc(vocab, words=words, spaces=[False] * len(words), sent_starts=starts)
    for key, label in (("rhetoric", "metaphor"), ("rhetoric_form", "simile")):
        doc.spans[key] = [Span(doc, s, e, label=label) for s, e in similes]
    doc.spans[COMPONENTS] = sorted(
        (Span(doc, words.index(word), words.index(word) + 1, label=label) for label, word in components),
        key=lambda s: s.start,
    )
    return doc


def make_examples(nlp) -> List[Example]:
    return [Example(doc, reference(nlp.vocab, sents, comps)) for doc, (sents, comps) in zip(inputs(nlp), DATA)]


def output(doc: Doc):
    return (
        [sent._.rhetoric for sent in doc.sents],
        {key: [(s.start, s.end, s.label_) for s in doc.spans[key]] for key in (*LEVEL_KEYS.values(), COMPONENTS)},
    )


def test_simile_rules_initialize_needs_no_examples_and_changes_nothing():
    assert_initialize_changes_nothing(make_nlp(), inputs, output)


def test_simile_rules_find_the_gold_sentences_and_components():
    nlp = make_nlp()
    for doc, (sents, comps) in zip(nlp.pipe(inputs(nlp)), DATA):
        assert [s.text for s in doc.sents] == [text.replace(" ", "") for text, _ in sents]
        for sent, (_, simile) in zip(doc.sents, sents):
            if simile:
                assert sent._.rhetoric["coarse"] == {"metaphor": 1.0} and sent._.rhetoric["form"] == {"simile": 1.0}
            else:
                assert all(sent._.rhetoric[level] == {"literal": 1.0} for level in ("coarse", "form", "content"))
        assert sorted((s.label_, s.text) for s in doc.spans[COMPONENTS]) == sorted(comps)
        assert all(float(x) == 1.0 for x in doc.spans[COMPONENTS].attrs["scores"])


def test_simile_rules_round_trip_to_disk_and_bytes(tmp_path):
    assert_round_trips(make_nlp(), inputs, output, tmp_path)


def test_simile_rules_score_with_both_registered_scorers():
    nlp = make_nlp()
    examples = make_examples(nlp)
    for eg in examples:
        nlp(eg.predicted)
    classification = registry.scorers.get("spacy_rhetoric.rhetoric_classification_scorer.v1")()(examples)
    components = registry.scorers.get("spacy_rhetoric.rhetoric_components_scorer.v1")()(examples)
    scores = nlp.get_pipe(NAME).score(examples)
    assert scores == {**classification, **components}
    assert scores["rhetoric_coarse_micro_f"] == scores["rhetoric_form_micro_f"] == 1.0
    assert scores["rhetoric_components_f"] == 1.0


def test_simile_rules_refuse_settings_they_do_not_have():
    with pytest.raises(ConfigValidationError):
        spacy.blank("zh").add_pipe(NAME, config={"comparator": "如"})
