"""Contract of ``rhetoric_textcat`` on inline examples (no corpus needed).

Gold format (``spacy_rhetoric.annotation``): the reference doc's sentences
(sentence starts) and, per level, a span group of whole sentences labelled
with that level's label (``doc.spans["rhetoric"]``, ``["rhetoric_form"]``,
``["rhetoric_content"]``); a sentence in none of them is literal, and a doc
without a ``rhetoric_annotated`` declaration annotates every label.
"""
from __future__ import annotations

from typing import List, Optional, Tuple

import pytest
import spacy
from spacy.tokens import Doc, Span
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

NAME = "rhetoric_textcat"
LEVELS = ("coarse", "form", "content")
SPAN_KEYS = {"coarse": "rhetoric", "form": "rhetoric_form", "content": "rhetoric_content"}
SIMILE = ("metaphor", "simile", "concrete")
PERSONIFICATION = ("personification", "verb", "personification")
HYPERBOLE = ("hyperbole", "direct_hyperbole", "amplification")
LITERAL = None

#: One doc per entry, one (sentence, labels per level) pair per sentence.
TRAIN_DATA: List[List[Tuple[str, Optional[Tuple[str, str, str]]]]] = [
    [("弯弯的月亮像小船。", SIMILE)],
    [("她的眼睛像天上的星星。", SIMILE)],
    [("春风轻轻地抚摸着我的脸。", PERSONIFICATION)],
    [("他的声音大得能把屋顶掀翻。", HYPERBOLE)],
    [("我们今天去公园散步。", LITERAL)],
    [("小花向我点头微笑。", PERSONIFICATION), ("爸爸每天七点起床。", LITERAL)],
]
TEXTS = ["".join(s for s, _ in doc) for doc in TRAIN_DATA]
SMALL = {"model": {"reducer": {"hidden_size": 32}, "tok2vec": SMALL_TOK2VEC}}


def make_nlp():
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe(NAME, config=SMALL)
    return nlp


def reference(nlp, sents) -> Doc:
    words, starts, labelled = [], [], []
    for text, labels in sents:
        if labels:
            labelled.append((len(words), len(words) + len(text), labels))
        starts += [True] + [False] * (len(text) - 1)
        words += list(text)
    doc = Doc(nlp.vocab, words=words, spaces=[False] * len(words), sent_starts=starts)
    for i, level in enumerate(LEVELS):
        doc.spans[SPAN_KEYS[level]] = [Span(doc, s, e, label=labels[i]) for s, e, labels in labelled]
    return doc


def make_examples(nlp) -> List[Example]:
    return [Example(nlp.make_doc(text), reference(nlp, sents)) for text, sents in zip(TEXTS, TRAIN_DATA)]


def gold_labels(sents):
    return [
        {level: [labels[i]] if labels else ["literal"] for i, level in enumerate(LEVELS)} for _, labels in sents
    ]


def predicted_labels(doc: Doc):
    return [{level: sorted(sent._.rhetoric[level]) for level in LEVELS} for sent in doc.sents]


def output(doc: Doc):
    return (
        [sent._.rhetoric for sent in doc.sents],
        {key: [(s.start, s.end, s.label_) for s in doc.spans[key]] for key in SPAN_KEYS.values()},
        {key: [float(x) for x in doc.spans[key].attrs["scores"]] for key in SPAN_KEYS.values()},
    )


@pytest.fixture(scope="module")
def trained():
    """The pipeline overfitted on the inline examples, and its losses."""
    return overfit(make_nlp, make_examples, NAME, 80)


def test_rhetoric_textcat_initialize_takes_labels_from_the_examples():
    textcat = initialized(make_nlp(), NAME, make_examples)
    # 30 outputs, every "level/label" of the taxonomy; all of them annotated
    assert len(textcat.labels) == 30
    assert set(textcat.cfg["trained_labels"]) == set(textcat.labels)


def test_rhetoric_textcat_update_lowers_the_loss(trained):
    _, history = trained
    assert_loss_falls(history)


def test_rhetoric_textcat_overfits_the_inline_examples(trained):
    nlp, _ = trained
    assert_overfits(
        nlp,
        TEXTS,
        lambda doc: ([s.text for s in doc.sents], predicted_labels(doc)),
        [([s for s, _ in sents], gold_labels(sents)) for sents in TRAIN_DATA],
        make_examples(nlp),
        [f"rhetoric_{level}_micro_f" for level in LEVELS],
    )


def test_rhetoric_textcat_round_trips_to_disk_and_bytes(trained, tmp_path):
    nlp, _ = trained
    assert_round_trips(nlp, TEXTS, output, tmp_path)


def test_rhetoric_textcat_scorer_returns_its_documented_keys(trained):
    nlp, _ = trained
    scores = assert_scorer_keys(nlp, NAME, make_examples(nlp), "spacy_rhetoric.rhetoric_classification_scorer.v1")
    assert scores["rhetoric_coarse_micro_f"] == 1.0


def test_rhetoric_textcat_needs_initialize_and_usable_examples():
    nlp = make_nlp()
    textcat = assert_needs_initialize(nlp, NAME, "弯弯的月亮像小船。")
    # every label declared unannotated: nothing to learn from
    examples = make_examples(nlp)
    for eg in examples:
        eg.reference.user_data["rhetoric_annotated"] = {}
        for key in SPAN_KEYS.values():
            eg.reference.spans[key] = []
    with pytest.raises(ValueError, match="R103"):
        textcat.initialize(lambda: examples, nlp=nlp)
