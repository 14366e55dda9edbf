"""``spacy_rhetoric.ProbabilityAverage.v1`` and ``rhetoric pipeline average``."""
from __future__ import annotations

import numpy
import pytest
import spacy
import srsly
from thinc.api import Model

from rhetoric_helpers import ROOT
from spacy_rhetoric.ml.ensemble import build_probability_average
from spacy_rhetoric.packaging import VECTOR_FILES, average_classifiers, listener_paths, make_self_contained


def _constant(values, seen):
    """A model that outputs ``values`` and records the gradient it gets."""
    def forward(model, X, is_train):
        def backprop(dY):
            seen.append(dY)
            return X
        return model.ops.asarray2f(values), backprop

    return Model("constant", forward, dims={"nO": len(values[0])})


def test_weighted_mean_and_shares_of_the_gradient():
    g1, g2 = [], []
    first = _constant([[0.9, 0.1], [0.2, 0.4]], g1)
    second = _constant([[0.5, 0.5], [0.0, 1.0]], g2)
    model = build_probability_average(first, second, 0.3)
    Y, backprop = model(("docs", "spans"), is_train=True)
    numpy.testing.assert_allclose(Y, [[0.78, 0.22], [0.14, 0.58]], rtol=1e-6)
    assert backprop(numpy.ones((2, 2), dtype="f")) == ("docs", "spans")
    numpy.testing.assert_allclose(g1[0], 0.7)
    numpy.testing.assert_allclose(g2[0], 0.3)


@pytest.mark.parametrize("weight", [-0.1, 1.5])
def test_weight_outside_unit_interval(weight):
    with pytest.raises(ValueError, match="second_weight"):
        build_probability_average(_constant([[0.5]], []), _constant([[0.5]], []), weight)


def test_members_that_disagree_on_shape():
    model = build_probability_average(_constant([[0.5, 0.5]], []), _constant([[0.5]], []), 0.5)
    with pytest.raises(ValueError, match="output shape"):
        model.predict(("docs", "spans"))


def _params(model):
    """Every parameter and torch weight of ``model``, in walk order, as bytes."""
    found = []
    for node in model.walk():
        found.extend((name, node.get_param(name).tobytes()) for name in node.param_names if node.has_param(name))
        for shim in node.shims:
            found.extend((k, v.numpy().tobytes()) for k, v in shim._model.state_dict().items())
    return found


@pytest.fixture(scope="module")
def averaged(tmp_path_factory):
    """zh_rhetoric's classifier averaged with itself, written and reloaded."""
    out = tmp_path_factory.mktemp("averaged") / "zh_rhetoric_avg"
    source = ROOT / "pipelines" / "zh_rhetoric"
    return source, out, average_classifiers(source, source, out, second_weight=0.3, version="9.9.9")


def test_written_pipeline_reloads_with_both_members(averaged):
    source, out, nlp = averaged
    model_cfg = nlp.config["components"]["rhetoric_textcat"]["model"]
    assert model_cfg["@architectures"] == "spacy_rhetoric.ProbabilityAverage.v1"
    assert model_cfg["second_weight"] == pytest.approx(0.3)
    # the target's tok2vec has the second's weights: both members listen to it
    assert listener_paths(model_cfg["second"]) == ["model.tok2vec"] and listener_paths(model_cfg["first"]) == ["model.tok2vec"]
    assert nlp.pipe_names == spacy.load(source).pipe_names
    # the second member's weights were saved and loaded, not left at their initialisation
    reference = spacy.load(source)
    second = nlp.get_pipe("rhetoric_textcat").model.layers[1]
    assert _params(second) == _params(reference.get_pipe("rhetoric_textcat").model)
    for file in VECTOR_FILES:
        assert (out / "vocab" / file).read_bytes() == (source / "vocab" / file).read_bytes()
    meta = srsly.read_json(out / "meta.json")
    assert meta["version"] == "9.9.9"
    assert meta["sources"] == srsly.read_json(source / "meta.json")["sources"]
    assert meta["rhetoric"]["trained_from"]["rhetoric_textcat"]["second_weight"] == pytest.approx(0.3)
    # the other components' files are the source's, byte for byte
    assert (out / "parallelism_linker" / "model").read_bytes() == (source / "parallelism_linker" / "model").read_bytes()


def test_a_classifier_averaged_with_itself_answers_as_before(averaged, pse_dir):
    """On real essays, after a first nlp(text) as users call it."""
    from spacy_rhetoric.evaluation.benchmark import pse_test_texts

    source, _, nlp = averaged
    texts = pse_test_texts(pse_dir)["texts"][:3]
    reference = spacy.load(source)
    nlp(texts[0])
    for doc, ref in zip(nlp.pipe(texts), reference.pipe(texts)):
        for key in ("rhetoric", "rhetoric_form", "rhetoric_components"):
            assert [(s.start, s.end, s.label_) for s in doc.spans[key]] == [(s.start, s.end, s.label_) for s in ref.spans[key]]
        numpy.testing.assert_allclose(doc.spans["rhetoric"].attrs["scores"], ref.spans["rhetoric"].attrs["scores"], atol=1e-6)


def test_a_pipeline_without_the_classifier(tmp_path):
    nlp = spacy.blank("zh")
    nlp.to_disk(tmp_path / "blank")
    with pytest.raises(ValueError, match="no component 'rhetoric_textcat'"):
        average_classifiers(tmp_path / "blank", ROOT / "pipelines" / "zh_rhetoric", tmp_path / "out", second_weight=0.3)


def test_shipped_transformer_pipeline_in_two_processes_after_a_first_call(pse_dir):
    """``zh_rhetoric_trf`` as users run it: ``nlp(text)`` first, then
    ``nlp.pipe(..., n_process=2)``; the averaged classifier (its second
    member listening to the shared static ``tok2vec``) gives the
    one-process answers."""
    from spacy_rhetoric.evaluation.benchmark import pse_test_texts

    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric_trf")
    model_cfg = nlp.config["components"]["rhetoric_textcat"]["model"]
    assert model_cfg["@architectures"] == "spacy_rhetoric.ProbabilityAverage.v1"
    assert nlp.get_pipe("tok2vec").listening_components == ["rhetoric_textcat", "rhetoric_components"]
    texts = pse_test_texts(pse_dir)["texts"][:4]
    nlp(texts[0])

    def answers(docs):
        return [[(s.start, s.end, s.label_, round(float(sc), 4)) for s, sc in zip(d.spans["rhetoric"], d.spans["rhetoric"].attrs["scores"])]
                for d in docs]

    one = answers(nlp.pipe(texts, batch_size=2))
    assert any(one)
    assert answers(nlp.pipe(texts, batch_size=2, n_process=2)) == one


def test_pipelines_with_different_vectors(tmp_path):
    """One vocab holds one vector table: averaging must not replace the
    first member's vectors by the second's."""
    import shutil

    from spacy.vectors import Vectors

    target = tmp_path / "other_vectors"
    shutil.copytree(ROOT / "pipelines" / "zh_rhetoric", target)
    nlp = spacy.load(target)
    nlp.vocab.vectors = Vectors(data=numpy.ones((1, 100), dtype="f"), keys=[nlp.vocab.strings.add("月光")])
    nlp.vocab.to_disk(target / "vocab")
    with pytest.raises(ValueError, match="different static vectors"):
        average_classifiers(target, ROOT / "pipelines" / "zh_rhetoric", tmp_path / "out", second_weight=0.3)
    assert not (tmp_path / "out").exists()


def test_pipelines_with_the_same_vectors_and_other_strings(tmp_path):
    """The same vector table in a vocab with other strings (as in
    zh_rhetoric_trf, whose vocab holds the transformer's strings) is the
    same table."""
    import shutil

    target = tmp_path / "more_strings"
    shutil.copytree(ROOT / "pipelines" / "zh_rhetoric", target)
    nlp = spacy.load(target)
    nlp.vocab.strings.add("只在这个词表里的词")
    nlp.vocab.to_disk(target / "vocab")
    out = average_classifiers(target, ROOT / "pipelines" / "zh_rhetoric", tmp_path / "out", second_weight=0.3)
    assert "只在这个词表里的词" in out.vocab.strings


def _without_encoder(path):
    """``zh_rhetoric`` with every listener replaced by its own copy of the
    encoder and no ``tok2vec`` component: a target that has no static
    encoder to share, as ``zh_rhetoric_trf`` has none."""
    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric")
    for name in list(nlp.get_pipe("tok2vec").listening_components):
        make_self_contained(nlp, name)
    nlp.remove_pipe("tok2vec")
    nlp.to_disk(path)
    return path


def test_a_target_without_the_encoder_gets_it_once(tmp_path, pse_dir):
    """Both second members listen to one ``tok2vec`` added before the
    classifier, written to disk, and the answers equal the source's (each
    average is of two copies of the same classifier)."""
    from spacy_rhetoric.evaluation.benchmark import pse_test_texts

    source = ROOT / "pipelines" / "zh_rhetoric"
    target = _without_encoder(tmp_path / "no_encoder")
    out = tmp_path / "out"
    average_classifiers(target, source, out, second_weight=0.3)
    nlp = average_classifiers(out, source, out, name="rhetoric_components", second_weight=0.3)
    names = nlp.pipe_names
    assert names.count("tok2vec") == 1 and names.index("tok2vec") < names.index("rhetoric_textcat")
    assert nlp.get_pipe("tok2vec").listening_components == ["rhetoric_textcat", "rhetoric_components"]
    meta = srsly.read_json(out / "meta.json")
    assert meta["pipeline"] == names and meta["rhetoric"]["trained_from"]["tok2vec"] == {"source": "pipelines/zh_rhetoric"}
    assert (out / "tok2vec" / "model").read_bytes() == (source / "tok2vec" / "model").read_bytes()
    texts = pse_test_texts(pse_dir)["texts"][:3]
    reference = spacy.load(source)
    nlp(texts[0])
    for doc, ref in zip(nlp.pipe(texts), reference.pipe(texts)):
        for key in ("rhetoric", "rhetoric_components"):
            assert [(s.start, s.end, s.label_) for s in doc.spans[key]] == [(s.start, s.end, s.label_) for s in ref.spans[key]]
            numpy.testing.assert_allclose(doc.spans[key].attrs["scores"], ref.spans[key].attrs["scores"], atol=1e-5)


def test_a_target_whose_encoder_differs_gets_a_copy(tmp_path):
    """The target's own ``tok2vec`` has other weights: it cannot serve the
    second member, which gets its own copy of the encoder."""
    target = tmp_path / "other_encoder"
    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric")
    model = nlp.get_pipe("tok2vec").model
    node = next(n for n in model.walk() if "W" in n.param_names and n.has_param("W"))
    node.set_param("W", node.get_param("W") * 1.01)
    nlp.to_disk(target)
    out = average_classifiers(target, ROOT / "pipelines" / "zh_rhetoric", tmp_path / "out", second_weight=0.3)
    model_cfg = out.config["components"]["rhetoric_textcat"]["model"]
    assert model_cfg["second"]["tok2vec"]["@architectures"] == "spacy_rhetoric.ParagraphTok2Vec.v1"
    assert listener_paths(model_cfg["second"]) == [] and out.pipe_names.count("tok2vec") == 1
