"""``spacy_rhetoric.QuantizedTransformerModel.v1``: the transformer encoder
predicting with int8 linear layers on a CPU, trained and saved as the float
model. A tiny random local BERT stands in for the real encoder."""
from __future__ import annotations

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from rhetoric_helpers import ROOT, examples_for, simile_docs, train

pytest.importorskip("spacy_transformers")


@pytest.fixture(scope="module")
def refs(simile_dir):
    return list(simile_docs(simile_dir, "Train", 40))


@pytest.fixture(scope="module")
def nlp_and_refs(tmp_path_factory, refs):
    from tiny_models import tiny_encoder

    bert = tiny_encoder(tmp_path_factory.mktemp("bert") / "bert")
    cfg = spacy.util.load_config(
        ROOT / "configs" / "experiments" / "rhetoric_trf.cfg",
        overrides={
            "paths.transformer": str(bert),
            "system.gpu_allocator": None,
            "components.transformer.model.@architectures": "spacy_rhetoric.QuantizedTransformerModel.v1",
            "components.transformer.model.get_spans.window": 32,
            "components.transformer.model.get_spans.stride": 24,
        },
        interpolate=False,
    )
    nlp = spacy.util.load_model_from_config(cfg, auto_fill=True, validate=True)
    nlp = train(nlp, examples_for(nlp, refs[:12]), steps=2)
    return nlp, refs


def _states(nlp, refs):
    """The encoder's last hidden states (wordpieces x width) of 8 sentences."""
    docs = [nlp(Doc(nlp.vocab, words=[t.text for t in ref])) for ref in refs[:8]]
    return numpy.concatenate([d._.trf_data.model_output.last_hidden_state.reshape((-1, d._.trf_data.width))
                              for d in docs])


def _float_twin(path):
    return spacy.load(path, config={"components": {"transformer": {"model": {"int8_on_cpu": False}}}})


def test_int8_prediction_is_close_to_float(nlp_and_refs, tmp_path):
    from spacy_rhetoric.ml import quantized_transformer as qt

    nlp, refs = nlp_and_refs
    nlp.to_disk(tmp_path / "m")
    float_out = _states(_float_twin(tmp_path / "m"), refs)
    int8_out = _states(nlp, refs)
    assert float_out.shape == int8_out.shape
    assert not numpy.array_equal(float_out, int8_out)  # the int8 copy did run
    assert numpy.abs(float_out - int8_out).max() < 0.1 * numpy.abs(float_out).max()
    module = nlp.get_pipe("transformer").model.layers[0].shims[0]._model
    assert module in qt._QUANTIZED  # cached for the float module, which stays float
    assert all(p.dtype.is_floating_point for p in module.parameters())


def test_saved_and_loaded_as_the_float_model(nlp_and_refs, tmp_path):
    import torch

    nlp, refs = nlp_and_refs
    nlp.to_disk(tmp_path / "m")
    module = _float_twin(tmp_path / "m").get_pipe("transformer").model.layers[0].shims[0]._model
    assert all(isinstance(m, torch.nn.Linear) for name, m in module.named_modules() if name.endswith("dense"))
    loaded = spacy.load(tmp_path / "m")
    numpy.testing.assert_allclose(_states(loaded, refs), _states(nlp, refs), atol=1e-4)


def test_the_int8_copy_follows_an_update(nlp_and_refs):
    from spacy_rhetoric.ml.quantized_transformer import quantized_copy

    nlp, refs = nlp_and_refs
    module = nlp.get_pipe("transformer").model.layers[0].shims[0]._model
    first = quantized_copy(module)
    assert quantized_copy(module) is first
    from thinc.api import Adam

    nlp.update(examples_for(nlp, refs[:4]), sgd=Adam(0.01), drop=0.0)  # the config's schedule starts at lr 0
    assert nlp.get_pipe("transformer").model.layers[0].shims[0]._model is module
    assert quantized_copy(module) is not first
