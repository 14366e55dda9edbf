"""``spacy_rhetoric.LengthBatchedTransformerModel.v1``: the encoder runs
each span cut to its real length, in sub-batches of similar length, and
gives the hidden states (and, in training, the gradients) of
TransformerModel.v3's padded batch. A tiny random
local BERT stands in for the encoder; the shipped pipeline is checked on
real PSE-I essays."""
from __future__ import annotations

from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc

from rhetoric_helpers import ROOT, examples_for, simile_docs, train

pytest.importorskip("spacy_transformers")
torch = pytest.importorskip("torch")

V3 = "spacy-transformers.TransformerModel.v3"
BY_LENGTH = "spacy_rhetoric.LengthBatchedTransformerModel.v1"


@pytest.fixture(scope="module")
def bert(tmp_path_factory) -> Path:
    from tiny_models import tiny_encoder

    return tiny_encoder(tmp_path_factory.mktemp("bert") / "bert")


@pytest.fixture(scope="module")
def encoder(bert):
    from transformers import BertModel

    return BertModel.from_pretrained(bert).eval()


def _padded(lengths, n_positions, seed=0):
    """A right-padded batch: input ids, attention mask, token type ids."""
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, 100, (len(lengths), n_positions), generator=gen)
    mask = torch.zeros_like(ids)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return {"input_ids": ids * mask, "attention_mask": mask, "token_type_ids": torch.zeros_like(ids)}


@pytest.mark.parametrize("batch_tokens", [0, 40, 100_000])
def test_states_match_the_padded_batch(encoder, batch_tokens):
    from spacy_rhetoric.ml.transformer_model import LengthBatchedEncoder

    lengths = [30, 3, 17, 30, 9, 1, 22]
    batch = _padded(lengths, 30)
    with torch.no_grad():
        padded = encoder(**batch)
        by_length = LengthBatchedEncoder(encoder, batch_tokens)(**batch)
    assert type(by_length) is type(padded)
    assert by_length.last_hidden_state.shape == padded.last_hidden_state.shape
    for row, n in enumerate(lengths):
        torch.testing.assert_close(by_length.last_hidden_state[row, :n], padded.last_hidden_state[row, :n],
                                   atol=1e-5, rtol=1e-4)
        assert not by_length.last_hidden_state[row, n:].any()  # padding: zeros, which nothing reads
    torch.testing.assert_close(by_length.pooler_output, padded.pooler_output, atol=1e-5, rtol=1e-4)


def test_each_span_alone_does_not_depend_on_the_batch(encoder):
    from spacy_rhetoric.ml.transformer_model import LengthBatchedEncoder

    alone = _padded([12], 12, seed=3)
    mixed = _padded([25, 12, 4], 25, seed=4)
    for key in alone:
        mixed[key][1, :12] = alone[key][0]
    with torch.no_grad():
        out_alone = LengthBatchedEncoder(encoder, 0)(**_padded([12, 12], 12, seed=3))
        out_mixed = LengthBatchedEncoder(encoder, 0)(**mixed)
    assert torch.equal(out_mixed.last_hidden_state[1, :12], out_alone.last_hidden_state[0])


@pytest.mark.parametrize("batch_tokens", [0, 40])
def test_gradients_match_the_padded_batch(bert, batch_tokens):
    """Training runs by length too: the parameters get the gradients of the
    padded batch (dropout off, so both compute the same function)."""
    from transformers import BertModel

    from spacy_rhetoric.ml.transformer_model import LengthBatchedEncoder

    lengths = [30, 3, 17, 9]
    batch = _padded(lengths, 30)
    weights = torch.randn(len(lengths), 30, 32, generator=torch.Generator().manual_seed(1))
    mask = batch["attention_mask"].unsqueeze(-1)
    grads = []
    for by_length in (False, True):
        model = BertModel.from_pretrained(bert).eval()  # eval: no dropout
        encoder = LengthBatchedEncoder(model, batch_tokens) if by_length else model
        (encoder(**batch).last_hidden_state * weights * mask).sum().backward()
        grads.append({name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys() and grads[0]
    for name in grads[0]:
        torch.testing.assert_close(grads[1][name], grads[0][name], atol=1e-4, rtol=1e-3)


def test_left_padding_runs_the_batch_as_it_is(encoder):
    from spacy_rhetoric.ml.transformer_model import LengthBatchedEncoder

    batch = _padded([8, 8], 8)
    batch["attention_mask"][0, :3] = 0  # ones not a prefix: left padded
    with torch.no_grad():
        expected = encoder(**batch).last_hidden_state
        got = LengthBatchedEncoder(encoder, 0)(**batch).last_hidden_state
    assert torch.equal(got, expected)


def test_an_output_it_cannot_regroup_is_a_clear_error(encoder):
    from spacy_rhetoric.ml.transformer_model import LengthBatchedEncoder

    with torch.no_grad(), pytest.raises(ValueError, match=r"\[R206\].*attentions"):
        LengthBatchedEncoder(encoder, 0)(**_padded([5, 2], 5), output_attentions=True)


def _pipeline(bert, architecture, **settings):
    overrides = {
        "paths.transformer": str(bert),
        "system.gpu_allocator": None,
        "components.transformer.model.@architectures": architecture,
        "components.transformer.model.get_spans.window": 32,
        "components.transformer.model.get_spans.stride": 24,
        **{f"components.transformer.model.{k}": v for k, v in settings.items()},
    }
    cfg = spacy.util.load_config(ROOT / "configs" / "experiments" / "rhetoric_trf.cfg", overrides=overrides,
                                 interpolate=False)
    return spacy.util.load_model_from_config(cfg, auto_fill=True, validate=True)


def _states(nlp, refs):
    """Each doc's hidden states at its real wordpieces, concatenated."""
    docs = list(nlp.pipe([Doc(nlp.vocab, words=[t.text for t in ref]) for ref in refs], batch_size=8))
    rows = []
    for doc in docs:
        data = doc._.trf_data
        mask = numpy.asarray(data.wordpieces.attention_mask).astype(bool)
        rows.append(numpy.asarray(data.model_output.last_hidden_state)[mask])
    return numpy.concatenate(rows)


def test_trains_saves_and_predicts_like_transformer_model_v3(bert, simile_dir, tmp_path):
    refs = list(simile_docs(simile_dir, "Train", 40))
    nlp = _pipeline(bert, BY_LENGTH)
    nlp = train(nlp, examples_for(nlp, refs[:12]), steps=2)
    nlp.to_disk(tmp_path / "m")
    loaded = spacy.load(tmp_path / "m")
    padded_twin = _padded_twin(tmp_path / "m")
    assert loaded.config["components"]["transformer"]["model"]["@architectures"] == BY_LENGTH
    numpy.testing.assert_allclose(_states(loaded, refs[12:28]), _states(padded_twin, refs[12:28]), atol=1e-5)


def _padded_twin(path: Path):
    """The pipeline saved at ``path`` with its encoder run by
    TransformerModel.v3 (same weights, every span padded in one batch)."""
    cfg = spacy.util.load_config(path / "config.cfg", interpolate=False)
    block = cfg["components"]["transformer"]["model"]
    block["@architectures"] = V3
    for key in ("batch_tokens", "int8_on_cpu", "cpu_threads"):
        block.pop(key, None)
    return spacy.util.load_model_from_config(cfg, auto_fill=True, validate=True).from_disk(path)


def test_int8_option_runs_the_int8_copy(bert, simile_dir):
    refs = list(simile_docs(simile_dir, "Train", 40))
    float_nlp = _pipeline(bert, BY_LENGTH)
    float_nlp.initialize(lambda: examples_for(float_nlp, refs[:8]))
    int8_nlp = _pipeline(bert, BY_LENGTH, int8_on_cpu=True)
    int8_nlp.initialize(lambda: examples_for(int8_nlp, refs[:8]))
    int8_nlp.get_pipe("transformer").from_bytes(float_nlp.get_pipe("transformer").to_bytes())
    float_out, int8_out = _states(float_nlp, refs[8:20]), _states(int8_nlp, refs[8:20])
    assert not numpy.array_equal(float_out, int8_out)
    assert numpy.abs(float_out - int8_out).max() < 0.1 * numpy.abs(float_out).max()


def test_int8_spans_alone_do_not_depend_on_the_batch(bert, simile_dir):
    """Dynamic int8 quantisation scales activations per call: with each
    span run alone (batch_tokens 0), a doc's states are the same, bit for
    bit, whatever else is in its batch."""
    refs = list(simile_docs(simile_dir, "Train", 40))
    nlp = _pipeline(bert, BY_LENGTH, int8_on_cpu=True, batch_tokens=0)
    nlp.initialize(lambda: examples_for(nlp, refs[:8]))
    alone = _states(nlp, refs[8:9])
    in_batch = _states(nlp, refs[8:20])
    assert numpy.array_equal(in_batch[: len(alone)], alone)


def test_negative_batch_tokens_is_a_clear_error(bert):
    with pytest.raises(ValueError, match=r"\[R205\]"):
        _pipeline(bert, BY_LENGTH, batch_tokens=-1)


def test_shipped_transformer_pipeline_gives_the_padded_answers(pse_dir):
    """The shipped ``zh_rhetoric_trf`` (by length) and the same weights run
    by TransformerModel.v3 give three real essays the same analysis."""
    from spacy_rhetoric.analysis.io import iter_inputs
    from test_same_answer import TOLERANCE, annotations, max_difference

    path = ROOT / "pipelines" / "zh_rhetoric_trf"
    shipped = spacy.load(path)
    assert shipped.config["components"]["transformer"]["model"]["@architectures"] == BY_LENGTH
    padded = _padded_twin(path)
    texts = [item.text for item in iter_inputs([pse_dir], split="test")][:3]
    for by_length_doc, padded_doc in zip(shipped.pipe(texts), padded.pipe(texts)):
        assert max_difference(annotations(by_length_doc), annotations(padded_doc)) <= TOLERANCE


def test_negative_cpu_threads_below_minus_one_is_a_clear_error(bert):
    with pytest.raises(ValueError, match=r"\[R207\]"):
        _pipeline(bert, BY_LENGTH, cpu_threads=-2)


def test_encoder_threads(monkeypatch):
    from spacy_rhetoric.runtime import threads

    monkeypatch.setattr(threads, "_worker", False)
    monkeypatch.setenv("OMP_NUM_THREADS", "3")
    assert threads.encoder_threads(0) is None
    assert threads.encoder_threads(2) == 2
    assert threads.encoder_threads(-1) == 3 == threads.threads_setting()
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert threads.machine_threads() >= 1
    # a server's request thread keeps the caller's setting
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(threads.encoder_threads, 2).result() is None
    # a worker (forked for n_process, or a Ray actor) keeps its one thread
    before = torch.get_num_threads()
    try:
        threads.mark_worker()
        assert torch.get_num_threads() == 1
        assert threads.encoder_threads(2) is None and threads.encoder_threads(-1) is None
    finally:
        torch.set_num_threads(before)


def test_cpu_threads_apply_to_the_encoder_alone(bert, simile_dir, monkeypatch):
    """The caller runs torch on one thread (as ``rhetoric analyze`` does);
    the encoder's prediction runs on ``cpu_threads`` and the caller's
    setting is back afterwards. Training and a forked worker are left as
    they are."""
    from spacy_rhetoric.runtime import threads
    from spacy_rhetoric.analysis.records import single_torch_thread

    monkeypatch.setattr(threads, "_worker", False)
    refs = list(simile_docs(simile_dir, "Train", 12))
    nlp = _pipeline(bert, BY_LENGTH, cpu_threads=2)
    nlp.initialize(lambda: examples_for(nlp, refs[:8]))
    module = nlp.get_pipe("transformer").model.layers[0].shims[0]._model
    seen = []
    module.register_forward_pre_hook(lambda m, args, kwargs: seen.append(torch.get_num_threads()), with_kwargs=True)
    docs = [Doc(nlp.vocab, words=[t.text for t in ref]) for ref in refs[8:]]
    with single_torch_thread():
        list(nlp.pipe(docs))
        assert seen and set(seen) == {2}
        assert torch.get_num_threads() == 1
        seen.clear()
        nlp.update(examples_for(nlp, refs[:4]))
        assert set(seen) == {1}
        seen.clear()
        monkeypatch.setattr(threads, "_worker", True)
        list(nlp.pipe(docs))
        assert set(seen) == {1}
