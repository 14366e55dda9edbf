"""``Span._.rhetoric`` and the sentence span groups as a user reads them:
every label's probability beside the accepted labels, and spans of
``doc.spans["rhetoric"]`` that are sentences of ``doc.sents`` (same start
and end, line breaks included), on inline text with line breaks."""
from __future__ import annotations

from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_rhetoric import doc_to_record
from spacy_rhetoric.components.rhetoric_textcat import merge_decisions

ROOT = Path(__file__).resolve().parents[1]
LEVELS = ("coarse", "form", "content")
SPAN_KEYS = ("rhetoric", "rhetoric_form", "rhetoric_content")
DEVICES = ("metaphor", "personification", "hyperbole", "parallelism")

# Written for these tests: an indented first paragraph, a simile and a
# personification that end their paragraphs (with "\n" and "\n\n"), a
# hyperbole and a literal sentence.
TEXT = "　　弯弯的月亮像一只小船。\n春风轻轻地抚摸着我的脸，小花向我点头微笑。\n\n他的声音大得能把屋顶掀翻。我们今天去公园散步。\n"
SPRING = "一切都像刚睡醒的样子，欣欣然张开了眼。"


def offsets(spans):
    return {(s.start, s.end) for s in spans}


# --- the component on inline examples (no trained pipeline needed) ----------------


@pytest.fixture(scope="module")
def inline():
    """A blank Chinese pipeline with ``clause_segmenter`` and an initialised
    ``rhetoric_textcat`` (every label annotated by the inline examples)."""
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    textcat = nlp.add_pipe("rhetoric_textcat", config={"thresholds": {"coarse/personification": 0.4}})
    examples = []
    for text, labels in [("弯弯的月亮像小船。", ("metaphor", "simile", "concrete")), ("我们今天去公园散步。", None)]:
        ref = Doc(nlp.vocab, words=list(text), spaces=[False] * len(text))
        for level, key in zip(LEVELS, SPAN_KEYS):
            ref.spans[key] = [Span(ref, 0, len(ref), label=labels[LEVELS.index(level)])] if labels else []
        examples.append(Example(nlp.make_doc(text), ref))
    nlp.initialize(lambda: examples)
    return nlp, textcat


def annotate(nlp, textcat, text, rows):
    """``text`` through the pipeline up to ``rhetoric_textcat``, which then
    writes the given probabilities: one ``{"level/label": p}`` per sentence,
    every other output 0.01."""
    doc = nlp.make_doc(text)
    for name, proc in nlp.pipeline:
        if name != "rhetoric_textcat":
            doc = proc(doc)
    indices = textcat.suggester([doc], ops=textcat.model.ops)
    probs = numpy.full((len(rows), len(textcat.labels)), 0.01, dtype="f")
    for i, row in enumerate(rows):
        for key, p in row.items():
            probs[i, textcat.labels.index(key)] = p
    textcat.set_annotations([doc], (indices, textcat.model.ops.asarray2f(probs)))
    return doc


def test_rhetoric_gives_every_labels_probability_and_the_accepted_labels(inline):
    nlp, textcat = inline
    doc = annotate(nlp, textcat, "弯弯的月亮像小船。\n我们今天去公园散步。", [
        {"coarse/metaphor": 0.9, "coarse/personification": 0.35, "coarse/literal": 0.05,
         "form/simile": 0.8, "form/verb": 0.6, "content/concrete": 0.7},
        {"coarse/literal": 0.95, "coarse/personification": 0.3, "form/literal": 0.9, "content/literal": 0.85},
    ])
    simile, literal = [sent._.rhetoric for sent in doc.sents]
    approx = pytest.approx
    # accepted: metaphor, and fine labels only under it (verb is personification's)
    assert simile["coarse"] == approx({"metaphor": 0.9})
    assert simile["form"] == approx({"simile": 0.8})
    assert simile["content"] == approx({"concrete": 0.7})
    assert literal["coarse"] == approx({"literal": 0.95})
    assert literal["form"] == approx({"literal": 0.9})
    # every label of each level, accepted or not, in the component's column order
    assert simile["scores"]["coarse"] == approx(
        {"metaphor": 0.9, "personification": 0.35, "hyperbole": 0.01, "parallelism": 0.01, "literal": 0.05})
    assert list(simile["scores"]["coarse"]) == [*DEVICES, "literal"]
    assert simile["scores"]["form"]["verb"] == approx(0.6)
    assert len(simile["scores"]["form"]) == 13 and len(simile["scores"]["content"]) == 12
    assert literal["scores"]["coarse"]["personification"] == approx(0.3)
    for value in (simile, literal):
        for level in LEVELS:
            assert {k: value["scores"][level][k] for k in value[level]} == value[level]


def test_literal_score_is_derived_when_literal_was_not_trained(inline):
    nlp, textcat = inline
    trained = list(textcat.cfg["trained_labels"])
    textcat.cfg["trained_labels"] = [k for k in trained if not k.endswith("/literal")]
    try:
        doc = annotate(nlp, textcat, "我们今天去公园散步。", [{"coarse/hyperbole": 0.2, "coarse/literal": 0.5}])
    finally:
        textcat.cfg["trained_labels"] = trained
    value = list(doc.sents)[0]._.rhetoric
    for level in LEVELS:
        assert value[level] == pytest.approx({"literal": 0.8})
        assert value["scores"][level]["literal"] == pytest.approx(0.8)


def test_rhetoric_spans_have_the_offsets_of_their_sentences(inline):
    nlp, textcat = inline
    doc = annotate(nlp, textcat, "弯弯的月亮像小船。\n\n春风抚摸着我的脸。\n", [
        {"coarse/metaphor": 0.9, "form/simile": 0.8},
        {"coarse/personification": 0.45, "form/verb": 0.7, "content/personification": 0.6},
    ])
    sents = list(doc.sents)
    assert [s.text for s in sents] == ["弯弯的月亮像小船。\n\n", "春风抚摸着我的脸。\n"]
    for key in SPAN_KEYS:
        assert offsets(doc.spans[key]) <= offsets(sents), key
    assert [(s.start, s.end, s.label_) for s in doc.spans["rhetoric"]] == [
        (sents[0].start, sents[0].end, "metaphor"), (sents[1].start, sents[1].end, "personification")]
    assert [s.sent == t for s, t in zip(doc.spans["rhetoric"], sents)] == [True, True]
    assert doc.spans["rhetoric"].attrs["scores"].tolist() == pytest.approx([0.9, 0.45])
    # the record's offsets still leave out the whitespace at a sentence's edges
    assert [(s["start"], s["end"]) for s in doc_to_record(doc, "d")["sentences"]] == [(0, 9), (11, 20)]


def test_a_sentence_of_whitespace_only_gets_no_span(inline):
    nlp, textcat = inline
    doc = annotate(nlp, textcat, "\n弯弯的月亮像小船。", [{"coarse/metaphor": 0.9}, {"coarse/metaphor": 0.8}])
    first, second = doc.sents
    assert first.text == "\n"
    assert offsets(doc.spans["rhetoric"]) == {(second.start, second.end)}


def test_merge_keeps_the_higher_device_probability_and_the_lower_literal_one():
    earlier = {"coarse": {"metaphor": 0.7}, "form": {"simile": 0.6}, "content": {},
               "scores": {"coarse": {"metaphor": 0.7, "literal": 0.2}, "form": {"simile": 0.6}, "content": {}}}
    later = {"coarse": {"literal": 0.9}, "form": {"literal": 0.9}, "content": {"literal": 0.9},
             "scores": {"coarse": {"metaphor": 0.1, "parallelism": 0.3, "literal": 0.9},
                        "form": {"literal": 0.9}, "content": {"literal": 0.9}}}
    merged = merge_decisions(earlier, later)
    assert merged["coarse"] == {"metaphor": 0.7}
    assert merged["scores"]["coarse"] == {"metaphor": 0.7, "parallelism": 0.3, "literal": 0.2}
    assert merged["scores"]["form"] == {"simile": 0.6, "literal": 0.9}
    # without scores on either side (the rule baseline), none are made up
    assert "scores" not in merge_decisions({k: earlier[k] for k in LEVELS}, {k: later[k] for k in LEVELS})


# --- the shipped pipelines -----------------------------------------------------------


@pytest.fixture(scope="module", params=["zh_rhetoric", "zh_rhetoric_trf"])
def shipped(request):
    path = ROOT / "pipelines" / request.param
    if not (path / "rhetoric_textcat").is_dir():
        pytest.skip(f"{path} has no rhetoric_textcat")
    return spacy.load(path)


def test_shipped_rhetoric_spans_are_sentences_of_doc_sents(shipped):
    doc = shipped(TEXT)
    sents = offsets(doc.sents)
    for key in SPAN_KEYS:
        assert offsets(doc.spans[key]) <= sents, key
    # not vacuous: labelled sentences that end their paragraphs with line breaks
    labelled = [s for s in doc.spans["rhetoric"] if s.text.endswith("\n")]
    assert {s.label_ for s in labelled} >= {"metaphor", "personification"}
    assert all(span.sent.start == span.start and span.sent.end == span.end for span in doc.spans["rhetoric"])


def test_shipped_rhetoric_scores_every_trained_label_and_accepts_by_threshold(shipped):
    textcat = shipped.get_pipe("rhetoric_textcat")
    trained = set(textcat.cfg["trained_labels"])
    doc = shipped(TEXT + SPRING)
    for sent in doc.sents:
        value = sent._.rhetoric
        for level in LEVELS:
            assert set(value["scores"][level]) == {k.split("/", 1)[1] for k in trained if k.startswith(level + "/")}
            assert {k: value["scores"][level][k] for k in value[level]} == value[level]
        for device in DEVICES:
            p = value["scores"]["coarse"][device]
            passed = p >= textcat.cfg["thresholds"].get(f"coarse/{device}", textcat.cfg["threshold"])
            if passed:
                assert device in value["coarse"], (sent.text, device, p)
            elif device != "parallelism":  # the linker rule may accept it below its threshold
                assert device not in value["coarse"], (sent.text, device, p)
    record = doc_to_record(doc, "d")
    assert [{lv: s[lv] for lv in LEVELS} for s in record["sentences"]] == [
        {lv: {k: round(v, 4) for k, v in sent._.rhetoric[lv].items()} for lv in LEVELS} for sent in doc.sents]
    assert all("scores" not in s for s in record["sentences"])


def test_shipped_literal_sentence_shows_what_each_device_scored(shipped):
    sent = list(shipped(SPRING).sents)[0]
    value = sent._.rhetoric
    assert set(value["coarse"]) == {"literal"}
    assert set(value["scores"]["coarse"]) == {*DEVICES, "literal"}
    assert value["coarse"]["literal"] == value["scores"]["coarse"]["literal"]
