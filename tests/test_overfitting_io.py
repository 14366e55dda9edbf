"""Over-fitting and I/O tests for the three trainable components, after
spaCy's ``spacy/tests/pipeline/test_spancat.py::test_overfitting_IO`` and
spacy-experimental's coref tests.

A handful of Chinese sentences and paragraphs written below (no corpus files,
so these tests run without ``../shared/data``) are learnt by a tiny pipeline
built from the project's CPU config. The trained pipeline must then

- reproduce the training annotation and score 1.0 on it;
- give identical predictions and scores after ``to_disk`` / ``spacy.load``;
- give the same output from ``nlp.pipe`` with batch size 1 and with one batch;
- process an empty doc (alone and inside a batch).
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

import pytest
import spacy
from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.training import Example
from spacy.util import fix_random_seed

from rhetoric_helpers import tiny_pipeline
from spacy_rhetoric.annotation import (
    ANNOTATED_KEY,
    COMPONENTS_KEY,
    LEVEL_SPAN_KEYS,
    gold_sentence_labels,
    sentence_spans,
)
from spacy_rhetoric.corpora.readers import gold_word_example
from spacy_rhetoric.runtime.threads import torch_threads
from spacy_rhetoric.spangroups import PARALLELISM_KEY, parallelism_offsets, parallelisms, set_parallelisms
from spacy_rhetoric.taxonomy import LEVEL_LABELS, LEVELS

# (coarse, form, content) of a sentence; None: a literal sentence
SIMILE = ("metaphor", "simile", "concrete")
PERSONIFICATION = ("personification", "verb", "personification")
HYPERBOLE = ("hyperbole", "direct_hyperbole", "amplification")
PARALLELISM = ("parallelism", "sentence_parallelism", "coordination")
LITERAL = None

#: The docs annotate every sentence label and five component types: hyperbole
#: and parallelism-marker components are unknown (masked), never negative.
COMPONENTS = ["comparator", "tenor", "vehicle", "personification_object", "personification_content"]
ANNOTATED = {**{level: list(LEVEL_LABELS[level]) for level in LEVELS}, "components": COMPONENTS}

#: One doc per entry: its sentences (words separated by spaces, with their
#: labels), its components (label, words) and its parallelisms (the words of
#: each branch, in document order).
TRAIN_DATA: List[Dict[str, Any]] = [
    {
        "sents": [("她 的 笑容 像 春天 的 阳光 。", SIMILE)],
        "components": [("tenor", "她 的 笑容"), ("comparator", "像"), ("vehicle", "春天 的 阳光")],
    },
    {
        "sents": [("弯弯 的 月亮 像 一 只 小船 。", SIMILE)],
        "components": [("tenor", "弯弯 的 月亮"), ("comparator", "像"), ("vehicle", "一 只 小船")],
    },
    {
        "sents": [("孩子们 的 笑声 好像 清脆 的 银铃 。", SIMILE)],
        "components": [("tenor", "孩子们 的 笑声"), ("comparator", "好像"), ("vehicle", "清脆 的 银铃")],
    },
    {
        "sents": [("春风 轻轻 地 抚摸 着 我 的 脸 。", PERSONIFICATION)],
        "components": [("personification_object", "春风"), ("personification_content", "抚摸")],
    },
    {"sents": [("他 的 声音 大 得 能 把 屋顶 掀 翻 。", HYPERBOLE)]},
    {"sents": [("今天 我们 去 公园 散步 。", LITERAL)]},
    {"sents": [("爸爸 每天 早上 七 点 起床 。", LITERAL)]},
    {
        "sents": [
            ("我们 爱 春天 的 花 ， 我们 爱 夏天 的 雨 ， 我们 爱 秋天 的 叶 。", PARALLELISM),
            ("冬天 也 很 美 。", LITERAL),
        ],
        "parallelisms": [["我们 爱 春天 的 花", "我们 爱 夏天 的 雨", "我们 爱 秋天 的 叶"]],
    },
    {
        "sents": [
            ("放学 后 我 回到 家 。", LITERAL),
            ("读书 使 人 充实 ， 思考 使 人 深刻 ， 交流 使 人 开阔 。", PARALLELISM),
        ],
        "parallelisms": [["读书 使 人 充实", "思考 使 人 深刻", "交流 使 人 开阔"]],
    },
]


#: Updates on the whole data: the losses fall below 1% of their first value
#: well before this (Adam, learn rate 1e-3 as in the configs, no dropout).
N_ITER = 100


def _find(words: Sequence[str], phrase: str, start: int = 0) -> Tuple[int, int]:
    """Token offsets of the first occurrence of ``phrase``'s words at or after ``start``."""
    target = phrase.split()
    for i in range(start, len(words) - len(target) + 1):
        if list(words[i : i + len(target)]) == target:
            return i, i + len(target)
    raise ValueError(f"{phrase!r} not found in {' '.join(words)!r}")


def make_reference(vocab, entry: Dict[str, Any]) -> Doc:
    """A gold Doc of one ``TRAIN_DATA`` entry, annotated as the corpus
    converters do: sentence spans per level, ``rhetoric_components``,
    parallelism span groups and the ``rhetoric_annotated`` declaration."""
    words: List[str] = []
    sent_starts: List[bool] = []
    labelled = []
    for text, labels in entry["sents"]:
        sent = text.split()
        sent_starts += [True] + [False] * (len(sent) - 1)
        if labels:
            labelled.append((len(words), len(words) + len(sent), labels))
        words += sent
    doc = Doc(vocab, words=words, spaces=[False] * len(words), sent_starts=sent_starts)
    for i, level in enumerate(LEVELS):
        doc.spans[LEVEL_SPAN_KEYS[level]] = [Span(doc, s, e, label=labels[i]) for s, e, labels in labelled]
    doc.spans[COMPONENTS_KEY] = sorted(
        (Span(doc, *_find(words, phrase), label=label) for label, phrase in entry.get("components", ())),
        key=lambda s: (s.start, s.end),
    )
    groups = []
    for branches in entry.get("parallelisms", ()):
        offsets, cursor = [], 0
        for branch in branches:
            offsets.append(_find(words, branch, cursor))
            cursor = offsets[-1][1]
        groups.append(offsets)
    set_parallelisms(doc, groups)
    doc.user_data[ANNOTATED_KEY] = ANNOTATED
    return doc


def make_examples(nlp: Language) -> List[Example]:
    """Examples with the reference's words and sentence starts."""
    return [gold_word_example(nlp, make_reference(nlp.vocab, entry), gold_sents=True) for entry in TRAIN_DATA]


def inputs(nlp: Language) -> List[Doc]:
    """Fresh unannotated docs of the training texts (gold words and sentences)."""
    return [eg.predicted for eg in make_examples(nlp)]


def overfit(nlp: Language, name: str, n_iter: int) -> Tuple[List[Example], List[float]]:
    """Initialise ``nlp`` on the inline data and update it ``n_iter`` times
    on all of it (no dropout); returns the examples and the loss per update."""
    examples = make_examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    history = []
    for _ in range(n_iter):
        losses: Dict[str, float] = {}
        nlp.update(examples, sgd=optimizer, losses=losses)
        history.append(losses[name])
    return examples, history


def evaluate(nlp: Language) -> Dict[str, Any]:
    scores = nlp.evaluate(make_examples(nlp))
    scores.pop("speed")
    return scores


def check_io_and_batching(nlp: Language, tmp_path, output) -> None:
    """Predictions and scores survive ``to_disk``/``spacy.load``; ``nlp.pipe``
    gives the same output with batch size 1 and with one batch; an empty doc
    gives empty output alone and inside a batch.

    output: Doc -> a summary of the component's output (spans, labels and
    probabilities), compared with :func:`approx_equal`.
    """
    before = [output(doc) for doc in nlp.pipe(inputs(nlp))]
    scores = evaluate(nlp)
    nlp.to_disk(tmp_path / "model")
    nlp2 = spacy.load(tmp_path / "model")
    assert nlp2.pipe_names == nlp.pipe_names
    after = [output(doc) for doc in nlp2.pipe(inputs(nlp2))]
    assert approx_equal(after, before)
    assert evaluate(nlp2) == scores

    one_by_one = [output(doc) for doc in nlp.pipe(inputs(nlp), batch_size=1)]
    together = [output(doc) for doc in nlp.pipe(inputs(nlp), batch_size=len(TRAIN_DATA) + 1)]
    assert approx_equal(one_by_one, together)
    assert approx_equal(together, before)

    empty = nlp("")
    assert len(empty) == 0
    with_empty = [output(doc) for doc in nlp.pipe([nlp.make_doc(""), *inputs(nlp), nlp.make_doc("")])]
    assert with_empty[0] == with_empty[-1] == output(empty)
    assert approx_equal(with_empty[1:-1], before)


def approx_equal(a, b, tol: float = 1e-5) -> bool:
    """Nested lists/tuples/dicts equal, floats within ``tol``."""
    if isinstance(a, float) or isinstance(b, float):
        return isinstance(a, (int, float)) and isinstance(b, (int, float)) and abs(a - b) <= tol
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(approx_equal(a[k], b[k], tol) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(approx_equal(x, y, tol) for x, y in zip(a, b))
    return a == b


def sentence_keys(decoded: Dict[str, Dict[str, float]]) -> set:
    return {f"{level}/{label}" for level in LEVELS for label in decoded[level]}


def span_triples(doc: Doc, key: str) -> List[Tuple[int, int, str]]:
    return sorted((s.start, s.end, s.label_) for s in doc.spans.get(key, []))


# --- rhetoric_textcat ----------------------------------------------------------


def textcat_output(doc: Doc):
    keys = LEVEL_SPAN_KEYS.values()
    return (
        [sent._.rhetoric for sent in sentence_spans(doc)],
        {key: span_triples(doc, key) for key in keys},
        {key: [float(x) for x in doc.spans[key].attrs["scores"]] for key in keys},
    )


def test_rhetoric_textcat_overfitting_IO(tmp_path):
    fix_random_seed(0)
    nlp = tiny_pipeline("textcat_cpu.cfg")
    examples, losses = overfit(nlp, "rhetoric_textcat", N_ITER)
    textcat = nlp.get_pipe("rhetoric_textcat")
    assert set(textcat.cfg["trained_labels"]) == {f"{lv}/{lab}" for lv in LEVELS for lab in LEVEL_LABELS[lv]}
    assert losses[-1] < 0.01 * losses[0]

    # every sentence gets exactly its gold labels at all three levels
    n_sents = 0
    for eg, doc in zip(examples, nlp.pipe(inputs(nlp))):
        ref_sents = sentence_spans(eg.reference)
        assert [(s.start, s.end) for s in doc.sents] == [(s.start, s.end) for s in ref_sents]
        for sent, ref_sent in zip(doc.sents, ref_sents):
            assert sentence_keys(sent._.rhetoric) == gold_sentence_labels(eg.reference, ref_sent), sent.text
            assert all(score >= 0.5 for level in LEVELS for score in sent._.rhetoric[level].values())
            n_sents += 1
        for key in LEVEL_SPAN_KEYS.values():
            assert span_triples(doc, key) == span_triples(eg.reference, key)
    assert n_sents == sum(len(entry["sents"]) for entry in TRAIN_DATA)

    scores = evaluate(nlp)
    for level in LEVELS:
        assert scores[f"rhetoric_{level}_micro_f"] == 1.0
        assert scores[f"rhetoric_{level}_em"] == 1.0
    assert scores["rhetoric_form_mapping"] == scores["rhetoric_content_mapping"] == 1.0

    check_io_and_batching(nlp, tmp_path, textcat_output)
    empty = nlp("")
    assert all(len(empty.spans[key]) == 0 for key in LEVEL_SPAN_KEYS.values())


# --- rhetoric_components -------------------------------------------------------


def components_output(doc: Doc):
    group = doc.spans[COMPONENTS_KEY]
    return span_triples(doc, COMPONENTS_KEY), sorted(
        ((s.start, s.end, s.label_), float(score)) for s, score in zip(group, group.attrs["scores"])
    )


def test_rhetoric_components_overfitting_IO(tmp_path):
    fix_random_seed(0)
    nlp = tiny_pipeline(
        "rhetoric_cpu.cfg",
        **{"nlp.pipeline": ["tok2vec", "rhetoric_components"]},
    )
    examples, losses = overfit(nlp, "rhetoric_components", N_ITER)
    comp = nlp.get_pipe("rhetoric_components")
    assert set(comp.labels) == set(COMPONENTS)
    assert losses[-1] < 0.01 * losses[0]

    for eg, doc in zip(examples, nlp.pipe(inputs(nlp))):
        assert span_triples(doc, COMPONENTS_KEY) == span_triples(eg.reference, COMPONENTS_KEY), doc.text
        assert all(score >= 0.5 for score in doc.spans[COMPONENTS_KEY].attrs["scores"])

    scores = evaluate(nlp)
    assert scores["rhetoric_components_p"] == scores["rhetoric_components_r"] == scores["rhetoric_components_f"] == 1.0
    assert set(scores["rhetoric_components_per_type"]) == set(COMPONENTS)

    check_io_and_batching(nlp, tmp_path, components_output)
    assert len(nlp("").spans[COMPONENTS_KEY]) == 0


# --- parallelism_linker --------------------------------------------------------


@pytest.fixture
def one_torch_thread():
    """The BiLSTM on one thread (the test machine may be shared)."""
    with torch_threads(1):
        yield


def linker_output(doc: Doc):
    return parallelism_offsets(doc), span_triples(doc, PARALLELISM_KEY)


def test_parallelism_linker_overfitting_IO(tmp_path, one_torch_thread):
    fix_random_seed(0)
    # a constant rate instead of the config's warm-up schedule (100 steps;
    # tiny_pipeline leaves its total_steps uninterpolated)
    overrides = {"components.parallelism_linker.model.hidden_width": 32, "training.optimizer.learn_rate": 0.001}
    nlp = tiny_pipeline("parallelism_cpu.cfg", **overrides)
    examples, losses = overfit(nlp, "parallelism_linker", N_ITER)
    assert losses[-1] < 0.01 * losses[0]

    for eg, doc in zip(examples, nlp.pipe(inputs(nlp))):
        assert parallelism_offsets(doc) == parallelism_offsets(eg.reference), doc.text
        assert span_triples(doc, PARALLELISM_KEY) == span_triples(eg.reference, PARALLELISM_KEY)
        for group in parallelisms(doc):
            assert len(group) == 3
            assert {s.label_ for s in group} == {"branch"}
            assert len({s.id_ for s in group}) == 1
    assert sum(len(parallelism_offsets(doc)) for doc in nlp.pipe(inputs(nlp))) == 2

    scores = evaluate(nlp)
    for metric in ("epm", "mpbm", "mbawo", "mwo"):
        assert scores[f"parallelism_{metric}_f"] == 1.0, metric

    check_io_and_batching(nlp, tmp_path, linker_output)
    assert list(nlp("").spans[PARALLELISM_KEY]) == []
