"""rhetoric_textcat: masking, hierarchy-consistent decoding on real
sentences, serialisation and bad input."""
from __future__ import annotations

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.training import Example

from rhetoric_helpers import examples_for, pse_docs, simile_docs, tiny_pipeline, train
from spacy_rhetoric.annotation import ALL_LEVEL_LABELS
from spacy_rhetoric.taxonomy import LITERAL, LEVELS, is_consistent, parent


@pytest.fixture(scope="module")
def mixed_refs(simile_dir, pse_dir):
    return list(simile_docs(simile_dir)[:40]) + pse_docs(pse_dir, 10)


@pytest.fixture(scope="module")
def trained(mixed_refs):
    nlp = tiny_pipeline("textcat_cpu.cfg")
    return train(nlp, examples_for(nlp, mixed_refs), steps=4)


def test_gradient_masks_unannotated_labels(trained, mixed_refs):
    """Simile docs annotate only coarse/metaphor and form/simile; PSE-I docs
    only coarse/parallelism. Every other column must get zero gradient, and
    the annotated ones must not."""
    textcat = trained.get_pipe("rhetoric_textcat")
    col = {k: i for i, k in enumerate(textcat.labels)}
    for ref, known in [(mixed_refs[0], {"coarse/metaphor", "form/simile"}), (mixed_refs[-1], {"coarse/parallelism"})]:
        eg = examples_for(trained, [ref])[0]
        indices, target, mask, _ = textcat._targets([eg])
        scores = textcat.model.ops.asarray2f(numpy.full(target.shape, 0.5, dtype="f"))
        _, d_scores = textcat.get_loss([eg], scores, target=target, mask=mask)
        d_scores = textcat.model.ops.to_numpy(d_scores)
        for key in ALL_LEVEL_LABELS:
            column = d_scores[:, col[key]]
            if key in known:
                assert numpy.abs(column).sum() > 0, key
            else:
                assert not column.any(), f"{key} is unannotated but got gradient"
        # default mask/target path gives the same gradient
        _, again = textcat.get_loss([eg], scores)
        assert numpy.array_equal(textcat.model.ops.to_numpy(again), d_scores)


def test_unannotated_labels_are_not_trained_towards_zero(simile_dir):
    """Training on simile docs only must leave the personification output
    untouched by the loss: its weights do not move (fails without masking)."""
    nlp = tiny_pipeline("textcat_cpu.cfg")
    refs = simile_docs(simile_dir)[:30]
    examples = examples_for(nlp, refs)
    optimizer = nlp.initialize(lambda: examples)
    textcat = nlp.get_pipe("rhetoric_textcat")
    linear = textcat.model.get_ref("scorer").layers[0]
    col = textcat.labels.index("coarse/personification")
    before = linear.get_param("W")[col].copy(), linear.get_param("b")[col].copy()
    learned = textcat.labels.index("coarse/metaphor")
    before_learned = linear.get_param("W")[learned].copy()
    optimizer.L2 = 0.0  # weight decay would move every row
    for _ in range(3):
        nlp.update(examples, sgd=optimizer)
    assert numpy.array_equal(linear.get_param("W")[col], before[0])
    assert numpy.array_equal(linear.get_param("b")[col], before[1])
    assert not numpy.array_equal(linear.get_param("W")[learned], before_learned)
    assert textcat.cfg["trained_labels"] == ["coarse/metaphor", "form/simile"]


def _check_consistent(doc: Doc, trained_labels):
    seen = 0
    for sent in doc.sents:
        r = sent._.rhetoric
        assert set(r) == {*LEVELS, "scores"}
        coarse = set(r["coarse"])
        assert coarse, "every sentence gets a coarse decision"
        if LITERAL in coarse:
            assert all(set(r[lv]) == {LITERAL} for lv in LEVELS)
        for level in ("form", "content"):
            for label in r[level]:
                assert parent(level, label) in coarse
                if label != LITERAL:
                    assert f"{level}/{label}" in trained_labels
        for level in LEVELS:
            assert all(0.0 <= v <= 1.0 for v in r[level].values())
        spans = {s.label_ for s in doc.spans["rhetoric"] if s.start == sent.start and s.end == sent.end}
        assert spans == coarse - {LITERAL}
        seen += 1
    return seen


@pytest.mark.parametrize("threshold", [0.0, 0.5, 1.0])
def test_hierarchy_consistent_on_real_sentences(trained, mixed_refs, threshold):
    textcat = trained.get_pipe("rhetoric_textcat")
    textcat.cfg["threshold"] = threshold
    try:
        docs = [Doc(trained.vocab, words=[t.text for t in r], sent_starts=[t.is_sent_start for t in r]) for r in mixed_refs]
        n = sum(_check_consistent(d, textcat.cfg["trained_labels"]) for d in trained.pipe(docs))
    finally:
        textcat.cfg["threshold"] = 0.5
    assert n > len(mixed_refs)  # PSE-I paragraphs have several sentences


def test_decoder_consistent_for_any_scores(trained):
    """With every label trained, fallback decoding gives a hierarchy-consistent
    label set (taxonomy.is_consistent) for random probability vectors."""
    textcat = trained.get_pipe("rhetoric_textcat")
    saved = textcat.cfg["trained_labels"]
    textcat.cfg["trained_labels"] = list(ALL_LEVEL_LABELS)
    rng = numpy.random.default_rng(0)
    try:
        for _ in range(300):
            probs = rng.random(len(textcat.labels)) ** rng.uniform(0.3, 3.0)
            r = textcat.decode(probs)
            for level in ("form", "content"):
                assert is_consistent(set(r["coarse"]), set(r[level]), level), r
    finally:
        textcat.cfg["trained_labels"] = saved


def test_thresholds_per_label(trained, mixed_refs):
    textcat = trained.get_pipe("rhetoric_textcat")
    probs = numpy.zeros(len(textcat.labels), dtype="f")
    probs[textcat.labels.index("coarse/metaphor")] = 0.6
    assert "metaphor" in textcat.decode(probs)["coarse"]
    textcat.cfg["thresholds"] = {"coarse/metaphor": 0.7}
    try:
        assert textcat.decode(probs)["coarse"] == {LITERAL: pytest.approx(0.4)}
    finally:
        textcat.cfg["thresholds"] = {}


def test_serialisation_round_trip(trained, mixed_refs, tmp_path):
    trained.to_disk(tmp_path / "m")
    nlp2 = spacy.load(tmp_path / "m")
    words = [t.text for t in mixed_refs[-1]]
    a = trained(Doc(trained.vocab, words=words))
    b = nlp2(Doc(nlp2.vocab, words=words))
    assert [s._.rhetoric for s in a.sents] == [s._.rhetoric for s in b.sents]
    assert nlp2.get_pipe("rhetoric_textcat").cfg["trained_labels"] == trained.get_pipe("rhetoric_textcat").cfg["trained_labels"]


def test_bad_input(trained):
    empty = trained(Doc(trained.vocab, words=[]))
    assert len(empty.spans["rhetoric"]) == 0
    english = trained("This is not Chinese at all, just English words.")
    assert len(list(english.sents)) >= 1 and all(s._.rhetoric for s in english.sents)
    long_doc = trained(Doc(trained.vocab, words=["像", "风", "。"] * 3000))
    assert len(list(long_doc.sents)) == 1  # no sentence starts set: one sentence
    with pytest.raises(ValueError, match=r"\[R104\]"):
        trained.add_pipe("rhetoric_textcat", name="bad", config={"threshold": 1.5})
    with pytest.raises(ValueError, match=r"\[R110\]"):
        trained.add_pipe("rhetoric_textcat", name="bad2", config={"thresholds": {"metaphor": 0.3}})


def test_initialize_without_annotation_fails():
    nlp = tiny_pipeline("textcat_cpu.cfg")
    ref = Doc(nlp.vocab, words=["天", "很", "蓝"])
    ref.user_data["rhetoric_annotated"] = {"coarse": [], "form": [], "content": []}
    with pytest.raises(ValueError, match=r"\[R103\]"):
        nlp.initialize(lambda: [Example(Doc(nlp.vocab, words=["天", "很", "蓝"]), ref)])


def test_disjunction_trains_the_most_probable_label(trained):
    """A CMC-style positive ("metaphor OR personification", label unknown):
    the more probable of the two is trained towards 1, the other gets no
    gradient, and literal is trained towards 0."""
    from spacy.tokens import Doc

    from spacy_rhetoric.annotation import ANNOTATED_KEY, DISJUNCTIONS_KEY
    from spacy_rhetoric.corpora.docbin import mark_single_sentence

    textcat = trained.get_pipe("rhetoric_textcat")
    col = {k: i for i, k in enumerate(textcat.labels)}
    ref = mark_single_sentence(Doc(trained.vocab, words=["石榴", "娃娃", "急切", "地", "张望"]))
    ref.user_data[ANNOTATED_KEY] = {"coarse": ["literal"], "form": [], "content": [], "components": []}
    ref.user_data[DISJUNCTIONS_KEY] = [["coarse/metaphor", "coarse/personification"]]
    eg = examples_for(trained, [ref])[0]
    _, target, mask, disjunctions = textcat._targets([eg])
    assert disjunctions == [(0, [col["coarse/metaphor"], col["coarse/personification"]])]
    scores = numpy.full(target.shape, 0.5, dtype="f")
    scores[0, col["coarse/personification"]] = 0.7
    _, d = textcat.get_loss([eg], textcat.model.ops.asarray2f(scores), target=target, mask=mask, disjunctions=disjunctions)
    d = textcat.model.ops.to_numpy(d)
    assert d[0, col["coarse/personification"]] == pytest.approx(0.7 - 1.0)
    assert d[0, col["coarse/metaphor"]] == 0.0
    assert d[0, col["coarse/literal"]] == pytest.approx(0.5)
    assert d[0, col["coarse/hyperbole"]] == 0.0


def test_positive_weights_scale_only_positive_targets(trained, mixed_refs):
    """positive_weights multiplies the gradient where the target is 1 and
    leaves negatives and unannotated labels as they were."""
    textcat = trained.get_pipe("rhetoric_textcat")
    col = {k: i for i, k in enumerate(textcat.labels)}
    m = col["coarse/metaphor"]
    egs = examples_for(trained, mixed_refs[:40])  # simile sentences: similes and literal ones
    _, target, mask, _ = textcat._targets(egs)
    eg = egs
    scores = textcat.model.ops.asarray2f(numpy.full(target.shape, 0.5, dtype="f"))
    loss, plain = textcat.get_loss(eg, scores, target=target, mask=mask)
    textcat.positive_weights = {"coarse/metaphor": 4.0, "coarse/hyperbole": 4.0}
    try:
        weighted_loss, weighted = textcat.get_loss(eg, scores, target=target, mask=mask)
    finally:
        textcat.positive_weights = {}
    plain, weighted = textcat.model.ops.to_numpy(plain), textcat.model.ops.to_numpy(weighted)
    positive = target[:, col["coarse/metaphor"]] > 0.5
    assert positive.any() and (~positive).any()
    assert numpy.allclose(weighted[positive, m], 4.0 * plain[positive, m])
    assert numpy.allclose(weighted[~positive, m], plain[~positive, m])
    other = [c for c in range(target.shape[1]) if c != m]
    assert numpy.array_equal(weighted[:, other], plain[:, other])  # hyperbole: unannotated, still 0
    assert weighted_loss > loss
    with pytest.raises(ValueError, match=r"\[R111\]"):
        trained.add_pipe("rhetoric_textcat", name="bad3", config={"positive_weights": {"coarse/hyperbole": 0}})
    with pytest.raises(ValueError, match=r"\[R110\].*positive_weights"):
        trained.add_pipe("rhetoric_textcat", name="bad4", config={"positive_weights": {"hyperbole": 2.0}})
