"""rhetoric_components (span categorizer), the rule baseline, CERD-format
data, the evaluate/benchmark functions and the transformer config wiring."""
from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from cerd_fixture import write_cerd_fixture
from rhetoric_helpers import ROOT, examples_for, simile_docs, tiny_pipeline, train
from spacy_rhetoric.components.simile_rules import SimileRules
from spacy_rhetoric.taxonomy import COMPONENT_LABELS


@pytest.fixture(scope="module")
def refs(simile_dir):
    return list(simile_docs(simile_dir, "Train", 80))


@pytest.fixture(scope="module")
def trained(refs):
    nlp = tiny_pipeline("rhetoric_cpu.cfg")
    return train(nlp, examples_for(nlp, refs), steps=4)


def test_labels_from_annotation(trained):
    assert trained.get_pipe("rhetoric_components").labels == ("comparator", "tenor", "vehicle")


def test_gradient_masks_unannotated_component_labels(refs):
    """A simile doc says nothing about hyperbole objects: that column gets
    zero gradient on every candidate span (fails without masking)."""
    nlp = tiny_pipeline("rhetoric_cpu.cfg")
    examples = examples_for(nlp, refs[:10])
    comp = nlp.get_pipe("rhetoric_components")
    nlp.config["initialize"]["components"]["rhetoric_components"] = {
        "labels": ["comparator", "tenor", "vehicle", "hyperbole_object"]
    }
    nlp.initialize(lambda: examples)
    docs = [eg.predicted for eg in examples]
    nlp.get_pipe("tok2vec").predict(docs)
    spans = comp.suggester(docs, ops=comp.model.ops)
    scores = comp.model.ops.alloc2f(int(spans.lengths.sum()), len(comp.labels)) + 0.5
    _, d_scores = comp.get_loss(examples, (spans, scores))
    d_scores = comp.model.ops.to_numpy(d_scores)
    assert not d_scores[:, comp.labels.index("hyperbole_object")].any()
    for label in ("comparator", "tenor", "vehicle"):
        assert numpy.abs(d_scores[:, comp.labels.index(label)]).sum() > 0


def test_predictions_well_formed(trained, simile_dir):
    comp = trained.get_pipe("rhetoric_components")
    comp.cfg["threshold"] = 0.3  # many candidates -> exercises the overlap filter
    try:
        docs = [Doc(trained.vocab, words=[t.text for t in r]) for r in simile_docs(simile_dir, "Test", 40)]
        for doc in trained.pipe(docs):
            group = doc.spans["rhetoric_components"]
            assert len(group.attrs["scores"]) == len(group)
            for label in COMPONENT_LABELS:
                covered = numpy.zeros(len(doc), dtype=int)
                for span in group:
                    if span.label_ == label:
                        covered[span.start : span.end] += 1
                assert covered.max(initial=0) <= 1, "same-label spans must not overlap"
            assert {s.label_ for s in group} <= {"comparator", "tenor", "vehicle"}
    finally:
        comp.cfg["threshold"] = 0.5


def test_serialisation_round_trip(trained, refs, tmp_path):
    trained.to_disk(tmp_path / "m")
    nlp2 = spacy.load(tmp_path / "m")
    words = [t.text for t in refs[3]]
    a, b = trained(Doc(trained.vocab, words=words)), nlp2(Doc(nlp2.vocab, words=words))
    key = "rhetoric_components"
    assert [(s.start, s.end, s.label_) for s in a.spans[key]] == [(s.start, s.end, s.label_) for s in b.spans[key]]
    assert numpy.allclose(a.spans[key].attrs["scores"], b.spans[key].attrs["scores"])


def test_bad_input(trained):
    assert len(trained(Doc(trained.vocab, words=[])).spans["rhetoric_components"]) == 0
    assert trained("Plain English text.").spans["rhetoric_components"] is not None
    with pytest.raises(ValueError, match=r"\[R106\]"):
        trained.get_pipe("rhetoric_components").add_label("metaphor")


def test_rule_baseline_on_real_sentences(simile_dir):
    rules = SimileRules()
    n_with_tenor = 0
    for ref in simile_docs(simile_dir, "Test", 60):
        doc = rules(Doc(ref.vocab, words=[t.text for t in ref]))
        parts = {s.label_: s for s in doc.spans["rhetoric_components"]}
        assert "像" in parts["comparator"].text
        assert [s.label_ for s in doc.spans["rhetoric_form"]] == ["simile"]
        if "tenor" in parts:
            n_with_tenor += 1
            assert parts["tenor"].end <= parts["comparator"].start
            assert not parts["tenor"][0].is_punct
        if "vehicle" in parts:
            assert parts["vehicle"].start > parts["comparator"].start
    assert n_with_tenor > 30
    literal = rules(Doc(ref.vocab, words=["今天", "天气", "很", "好", "。"]))
    assert len(literal.spans["rhetoric"]) == 0 and list(literal.sents)[0]._.rhetoric["coarse"] == {"literal": 1.0}


def test_cerd_fixture_all_labels(tmp_path):
    """CERD-format data annotates every level: converted with the project's
    CERD reader, it trains both components over the whole label space."""
    from spacy_rhetoric.corpora.cerd import read_cerd

    paths = write_cerd_fixture(tmp_path / "cerd")
    nlp = tiny_pipeline("rhetoric_cpu.cfg")
    refs = [d for task, p in paths.items() for d in read_cerd(p, task, spacy.blank("zh"))]
    nlp = train(nlp, examples_for(nlp, refs), steps=3)
    trained = set(nlp.get_pipe("rhetoric_textcat").cfg["trained_labels"])
    assert {"coarse/literal", "coarse/hyperbole", "form/verb", "content/prolepsis"} <= trained
    assert set(nlp.get_pipe("rhetoric_components").labels) == set(COMPONENT_LABELS)
    doc = nlp("她的笑容像春天的阳光一样温暖。")
    assert list(doc.sents)[0]._.rhetoric["coarse"]


def test_evaluate_and_benchmark(trained, tmp_path, simile_dir):
    from spacy.tokens import DocBin

    from spacy_rhetoric.evaluation.benchmark import benchmark_components
    from spacy_rhetoric.research.gold_units import evaluate_rhetoric

    db = DocBin(store_user_data=True, docs=simile_docs(simile_dir, "Test", 40))
    db.to_disk(tmp_path / "test.spacy")
    trained.to_disk(tmp_path / "m")
    scores = evaluate_rhetoric(tmp_path / "m", tmp_path / "test.spacy", output=tmp_path / "s.json")
    assert json.loads((tmp_path / "s.json").read_text())["n_docs"] == 40
    assert 0.0 <= scores["rhetoric_form_micro_f"] <= 1.0
    assert set(scores["rhetoric_tenor_vehicle_per_type"]) <= {"tenor", "vehicle"}
    rules = evaluate_rhetoric("rules", tmp_path / "test.spacy")
    assert rules["rhetoric_form_per_type"]["simile"]["r"] == 1.0
    bench = benchmark_components(tmp_path / "m", tmp_path / "test.spacy")
    assert set(bench["components"]) == {"tok2vec", "rhetoric_textcat", "rhetoric_components"}
    assert bench["n_words"] == sum(len(d) for d in simile_docs(simile_dir, "Test", 40))


def test_transformer_config_with_tiny_bert(tmp_path, refs):
    """configs/experiments/rhetoric_trf.cfg wired to a tiny random local BERT trains a
    few steps on CPU and predicts."""
    pytest.importorskip("spacy_transformers")
    from tiny_models import tiny_encoder

    bert = tiny_encoder(tmp_path / "bert")
    cfg = spacy.util.load_config(
        ROOT / "configs" / "experiments" / "rhetoric_trf.cfg",
        overrides={
            "paths.transformer": str(bert),
            "system.gpu_allocator": None,
            # the tiny BERT has 128 positions; words are 1-3 characters
            "components.transformer.model.get_spans.window": 32,
            "components.transformer.model.get_spans.stride": 24,
        },
        interpolate=False,
    )
    nlp = spacy.util.load_model_from_config(cfg, auto_fill=True, validate=True)
    nlp = train(nlp, examples_for(nlp, refs[:12]), steps=2)
    doc = nlp(Doc(nlp.vocab, words=[t.text for t in refs[0]]))
    assert list(doc.sents)[0]._.rhetoric["coarse"]
    assert "rhetoric_components" in doc.spans


def test_multi_corpus_config(tmp_path, simile_dir, pse_dir):
    """configs/experiments/rhetoric_multi_cpu.cfg reads the simile corpus and PSE-I
    together; each corpus trains only the labels it annotates."""
    from spacy.tokens import DocBin

    from rhetoric_helpers import pse_docs

    for name, docs in (("simile", simile_docs(simile_dir, "Train", 30)), ("pse", pse_docs(pse_dir, 6))):
        DocBin(store_user_data=True, docs=docs).to_disk(tmp_path / f"{name}.spacy")
    paths = {"paths.train": str(tmp_path / "simile.spacy"), "paths.train_pse": str(tmp_path / "pse.spacy"),
             "paths.dev": str(tmp_path / "simile.spacy"), "paths.dev_pse": str(tmp_path / "pse.spacy")}
    nlp = tiny_pipeline("rhetoric_multi_cpu.cfg", **paths)
    reader = spacy.util.resolve_dot_names(nlp.config.interpolate(), ["corpora.train"])[0]
    examples = list(reader(nlp))
    corpora = [eg.reference.user_data["corpus"] for eg in examples]
    assert corpora.count("simile") == 30 and corpora.count("pse-i") == 6
    train(nlp, examples, steps=2)
    assert nlp.get_pipe("rhetoric_textcat").cfg["trained_labels"] == ["coarse/metaphor", "coarse/parallelism", "form/simile"]
    assert nlp.get_pipe("rhetoric_components").labels == ("comparator", "tenor", "vehicle")


def test_bilstm_config_trains(refs):
    """configs/experiments/rhetoric_bilstm_cpu.cfg (CNN + BiLSTM tok2vec) trains and predicts."""
    import spacy as _spacy

    cfg = _spacy.util.load_config(
        ROOT / "configs" / "experiments" / "rhetoric_bilstm_cpu.cfg",
        overrides={"components.tok2vec.model.embed.width": 32, "components.tok2vec.model.embed.rows": [500, 200, 200],
                   "components.tok2vec.model.encode.width": 32, "components.tok2vec.model.encode.cnn_depth": 1},
        interpolate=False,
    )
    nlp = _spacy.util.load_model_from_config(cfg, auto_fill=True, validate=True)
    train(nlp, examples_for(nlp, refs[:20]), steps=2)
    doc = nlp(Doc(nlp.vocab, words=[t.text for t in refs[0]]))
    assert doc.tensor.shape == (len(doc), 32)
    assert list(doc.sents)[0]._.rhetoric["coarse"]
    from spacy_rhetoric.ml.cnn_bilstm import build_cnn_bilstm_encoder

    with pytest.raises(ValueError, match="even"):
        build_cnn_bilstm_encoder(31, 1, 1, 3, 1, 0.0)


def test_device_ngram_suggester_on_a_real_essay(pse_dir):
    """After `nlp(text)`, components are looked for only inside sentences
    labelled with a device, never with punctuation at a span's edge; a doc
    the classifier has not seen (training) gets every such n-gram."""
    from spacy_rhetoric.analysis.io import iter_inputs
    from spacy_rhetoric.components.rhetoric_components import build_device_ngram_suggester

    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric")
    (essay,) = iter_inputs([pse_dir / "xml" / "328.xml"])
    doc = nlp(essay.text)
    suggest = build_device_ngram_suggester([1, 2, 3])
    regions = {(s.start, s.end) for s in doc.spans["rhetoric"]}
    assert regions and len(regions) < len(list(doc.sents))
    spans = suggest([doc]).dataXd.tolist()
    assert spans
    for start, end in spans:
        assert any(a <= start and end <= b for a, b in regions)
        assert not (doc[start].is_punct or doc[end - 1].is_punct or doc[start].is_space or doc[end - 1].is_space)
    fresh = nlp.make_doc(essay.text)
    everywhere = suggest([fresh]).dataXd.tolist()
    assert len(everywhere) > len(spans)
    assert all(not fresh[s].is_punct and not fresh[e - 1].is_punct for s, e in everywhere)
    for comp in doc.spans["rhetoric_components"]:
        assert any(a <= comp.start and comp.end <= b for a, b in regions)
    empty = suggest([nlp("")])
    assert empty.dataXd.shape == (0, 2) and empty.lengths.tolist() == [0]


@pytest.mark.parametrize("sizes", [[], [0, 2]])
def test_device_ngram_suggester_rejects_bad_sizes(sizes):
    from spacy_rhetoric.components.rhetoric_components import build_device_ngram_suggester

    with pytest.raises(ValueError, match="sizes"):
        build_device_ngram_suggester(sizes)


def test_per_label_thresholds_filter_only_their_label(pse_dir):
    from spacy_rhetoric.analysis.io import iter_inputs

    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric")
    (essay,) = iter_inputs([pse_dir / "xml" / "328.xml"])
    pipe = nlp.get_pipe("rhetoric_components")
    first = nlp(essay.text)
    before = [(s.start, s.end, s.label_) for s in first.spans["rhetoric_components"]]
    assert "tenor" in {label for _, _, label in before}
    pipe.cfg["thresholds"] = {**pipe.cfg["thresholds"], "tenor": 1.0, "vehicle": 0.0}
    doc = nlp(essay.text)
    after = doc.spans["rhetoric_components"]
    assert not [s for s in after if s.label_ == "tenor"]
    assert len([s for s in after if s.label_ == "vehicle"]) > len([b for b in before if b[2] == "vehicle"])
    assert [b for b in before if b[2] not in ("tenor", "vehicle")] == \
        [(s.start, s.end, s.label_) for s in after if s.label_ not in ("tenor", "vehicle")]


@pytest.mark.parametrize("thresholds, match", [({"tenor": 1.5}, "tenor"), ({"simile": 0.5}, "simile")])
def test_bad_component_thresholds_are_refused(thresholds, match):
    nlp = spacy.blank("zh")
    with pytest.raises(ValueError, match=match):
        nlp.add_pipe("rhetoric_components", config={"thresholds": thresholds})


def _parallel_doc(words, branches):
    from spacy_rhetoric.spangroups import set_parallelisms

    doc = Doc(spacy.blank("zh").vocab, words=words, spaces=[False] * len(words))
    set_parallelisms(doc, [branches])
    return doc


def test_shared_marker_follows_the_guidelines():
    """GUIDELINES §5.3: start at the first word every item shares (爱, not
    the 我 only the first has), extend while identical (让我们在), one
    occurrence per item; a particle shared by all items starts nothing."""
    from spacy_rhetoric.components.parallelism_markers import shared_marker

    words = ["我", "爱", "春天", "的", "细雨", "，", "爱", "夏天", "的", "蝉鸣", "，", "爱", "秋天", "的", "落叶", "。"]
    doc = _parallel_doc(words, [(0, 5), (6, 10), (11, 15)])
    assert [doc[s:e].text for s, e in shared_marker(list(doc.spans["parallelism_1"]))] == ["爱", "爱", "爱"]
    words = ["让", "我们", "在", "喧嚣", "中", "看到", "，", "让", "我们", "在", "冷漠", "中", "坚守"]
    doc = _parallel_doc(words, [(0, 6), (7, 13)])
    assert shared_marker(list(doc.spans["parallelism_1"])) == [(0, 3), (7, 10)]
    words = ["春天", "的", "花", "，", "夏天", "的", "雨"]
    doc = _parallel_doc(words, [(0, 3), (4, 7)])
    assert shared_marker(list(doc.spans["parallelism_1"])) is None


def test_branch_markers_on_a_real_essay(pse_dir):
    """With ``branch_markers``, after ``nlp(text)`` every parallelism marker
    is the same words in each branch of a parallelism the linker found,
    inside a sentence labelled parallelism; the other labels are untouched."""
    from spacy_rhetoric.analysis.io import iter_inputs
    from spacy_rhetoric.spangroups import parallelisms

    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric")
    (essay,) = iter_inputs([pse_dir / "xml" / "328.xml"])
    pipe = nlp.get_pipe("rhetoric_components")
    model_only = nlp(essay.text)
    pipe.cfg["branch_markers"] = True
    doc = nlp(essay.text)
    markers = [s for s in doc.spans["rhetoric_components"] if s.label_ == "parallelism_marker"]
    assert markers
    regions = [(s.start, s.end) for s in doc.spans["rhetoric"] if s.label_ == "parallelism"]
    groups = parallelisms(doc)
    for m in markers:
        assert any(a <= m.start and m.end <= b for a, b in regions)
        (group,) = [g for g in groups if any(b.start <= m.start and m.end <= b.end for b in g)]
        assert all(m.text in b.text for b in group)
    others = lambda d: [(s.start, s.end, s.label_) for s in d.spans["rhetoric_components"] if s.label_ != "parallelism_marker"]
    assert others(doc) == others(model_only)
    assert len(doc.spans["rhetoric_components"].attrs["scores"]) == len(doc.spans["rhetoric_components"])


def test_positive_weights_scale_only_gold_spans(refs):
    """The gradient of a gold span's label is multiplied by its weight; every
    other cell is as without weights."""
    nlp = tiny_pipeline("rhetoric_cpu.cfg")
    examples = examples_for(nlp, refs[:10])
    nlp.initialize(lambda: examples)
    comp = nlp.get_pipe("rhetoric_components")
    docs = [eg.predicted for eg in examples]
    nlp.get_pipe("tok2vec").predict(docs)
    spans = comp.suggester(docs, ops=comp.model.ops)
    scores = comp.model.ops.alloc2f(int(spans.lengths.sum()), len(comp.labels)) + 0.5
    _, plain = comp.get_loss(examples, (spans, scores))
    comp.positive_weights = {"tenor": 5.0}
    try:
        _, weighted = comp.get_loss(examples, (spans, scores))
    finally:
        comp.positive_weights = {}
    plain, weighted = comp.model.ops.to_numpy(plain), comp.model.ops.to_numpy(weighted)
    gold = plain < 0
    col = comp.labels.index("tenor")
    assert gold[:, col].any()
    assert numpy.allclose(weighted[gold[:, col], col], 5.0 * plain[gold[:, col], col])
    rest = numpy.ones_like(gold)
    rest[gold[:, col], col] = False
    assert numpy.allclose(weighted[rest], plain[rest])


@pytest.mark.parametrize("weights, match", [({"tenor": 0.0}, "tenor"), ({"simile": 2.0}, "simile")])
def test_bad_component_positive_weights_are_refused(weights, match):
    nlp = spacy.blank("zh")
    with pytest.raises(ValueError, match=match):
        nlp.add_pipe("rhetoric_components", config={"positive_weights": weights})


def test_add_component_replaces_in_place(tmp_path):
    """``rhetoric pipeline add-component TARGET SOURCE --name rhetoric_components
    --before rhetoric_components`` (finalize-zh-rhetoric-components) keeps
    the component's place, its labels in the meta and says where it came
    from; the other components' files are untouched."""
    import shutil

    import srsly

    from spacy_rhetoric.packaging import add_component

    target = tmp_path / "zh_rhetoric"
    shutil.copytree(ROOT / "pipelines" / "zh_rhetoric", target)
    before = spacy.load(target).pipe_names
    tok2vec = (target / "tok2vec" / "model").read_bytes()
    nlp = add_component(target, ROOT / "pipelines" / "zh_rhetoric", "rhetoric_components", before="rhetoric_components")
    assert nlp.pipe_names == before
    meta = srsly.read_json(target / "meta.json")
    assert meta["labels"]["rhetoric_components"] == list(nlp.get_pipe("rhetoric_components").labels)
    assert "rhetoric_components" in meta["rhetoric"]["trained_from"]
    assert not Path(meta["rhetoric"]["trained_from"]["rhetoric_components"]["source"]).is_absolute()
    assert (target / "tok2vec" / "model").read_bytes() == tok2vec
    with pytest.raises(ValueError, match="no component"):
        add_component(target, ROOT / "pipelines" / "zh_rhetoric", "no_such_component")
