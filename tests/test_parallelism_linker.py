"""The parallelism_linker component: training, prediction, span groups, serialization, configs."""
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from spacy.util import load_config

import spacy_rhetoric
from spacy_rhetoric.runtime.threads import torch_threads
from spacy_rhetoric.spangroups import parallelism_offsets
from spacy_rhetoric.scorers.parallelism import score_groups

from pse_cache import first_essays, split_docs

ROOT = Path(__file__).resolve().parents[1]

TINY_MODEL = {
    "@architectures": "spacy_rhetoric.ParallelismTagger.v1",
    "hidden_width": 32,
    "lstm_depth": 1,
    "tok2vec": {
        "@architectures": "spacy.HashEmbedCNN.v2",
        "pretrained_vectors": None,
        "width": 32,
        "depth": 2,
        "embed_size": 500,
        "window_size": 1,
        "maxout_pieces": 2,
        "subword_features": True,
    },
}


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The BiLSTM on one thread: on a shared 2-core machine more threads are ~30x slower."""
    with torch_threads(1):
        yield


def _examples(nlp, docs):
    return [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in docs]


@pytest.fixture(scope="module")
def train_docs(pse_dir):
    """Short PSE-I training paragraphs with at least one parallelism."""
    docs = [d for d in first_essays(pse_dir, "train", 40) if parallelism_offsets(d) and len(d) < 60]
    return docs[:6]


@pytest.fixture(scope="module")
def trained(train_docs):
    """A tiny linker over-fitted on six real paragraphs (a few seconds on CPU)."""
    numpy.random.seed(0)
    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("parallelism_linker", config={"model": TINY_MODEL})
    examples = _examples(nlp, train_docs)
    optimizer = nlp.initialize(lambda: examples)
    losses = []
    for _ in range(60):
        step = {}
        nlp.update(examples, sgd=optimizer, losses=step)
        losses.append(step["parallelism_linker"])
    return nlp, examples, losses


def test_labels_come_from_the_scheme(trained):
    nlp, _, _ = trained
    linker = nlp.get_pipe("parallelism_linker")
    assert linker.labels[:2] == ("O", "M")
    assert {"B", "I", "J"} <= set(linker.labels)
    assert all(label.startswith("B:-") for label in linker.labels if label.startswith("B:"))


def test_training_fits_real_paragraphs(trained):
    nlp, examples, losses = trained
    assert losses[-1] < losses[0] / 5
    predicted = [nlp(Doc(nlp.vocab, words=[t.text for t in eg.reference])) for eg in examples]
    pairs = [(parallelism_offsets(p), parallelism_offsets(eg.reference)) for p, eg in zip(predicted, examples)]
    assert score_groups(pairs)["mbawo"]["f"] > 0.8


def test_predictions_are_grouped_span_groups(trained):
    nlp, examples, _ = trained
    doc = nlp(Doc(nlp.vocab, words=[t.text for t in examples[0].reference]))
    groups = spacy_rhetoric.parallelisms(doc)
    assert groups, "the over-fitted model should find the parallelism of a training paragraph"
    flat = list(doc.spans["parallelism"])
    assert sorted(s.start for g in groups for s in g) == [s.start for s in flat]
    for group in groups:
        assert len(group) >= 2
        assert {s.label_ for s in group} == {"branch"}
        assert len({s.id_ for s in group}) == 1  # the group is recoverable from any branch
        assert all(doc.spans[s.id_] is not None and s in list(doc.spans[s.id_]) for s in group)


def test_serialization_roundtrip(trained, tmp_path):
    nlp, examples, _ = trained
    nlp.to_disk(tmp_path / "model")
    loaded = spacy.load(tmp_path / "model")
    docs = [Doc(nlp.vocab, words=[t.text for t in eg.reference]) for eg in examples]
    before = [parallelism_offsets(d) for d in nlp.pipe(docs)]
    after = [parallelism_offsets(loaded(Doc(loaded.vocab, words=[t.text for t in d]))) for d in docs]
    assert before == after
    assert loaded.get_pipe("parallelism_linker").labels == nlp.get_pipe("parallelism_linker").labels


def test_o_bias_trades_precision_for_recall_and_is_saved(trained, tmp_path):
    """o_bias 0 decodes as the trained CRF; a larger bias never tags fewer
    words as part of a branch; the bias is saved with the component."""
    nlp, examples, _ = trained
    linker = nlp.get_pipe("parallelism_linker")
    docs = [nlp.make_doc("".join(t.text for t in eg.reference)) for eg in examples]
    paths = linker.predict(docs)
    o = linker.labels.index("O")
    n_tagged = lambda ps: sum(i != o for p in ps for i in p)  # noqa: E731
    try:
        tagged = []
        for bias in (0.0, 2.0, 50.0):
            linker.cfg["o_bias"] = bias
            tagged.append(n_tagged(linker.predict(docs)))
        assert tagged[0] == n_tagged(paths)
        assert tagged[0] <= tagged[1] <= tagged[2]
        assert tagged[2] == sum(len(d) for d in docs)  # O never wins against a bias of 50
        linker.cfg["o_bias"] = 0.5
        nlp.to_disk(tmp_path / "model")
        assert spacy.load(tmp_path / "model").get_pipe("parallelism_linker").cfg["o_bias"] == 0.5
    finally:
        linker.cfg["o_bias"] = 0.0


def test_bad_and_long_input(trained):
    nlp, examples, _ = trained
    assert list(nlp("").spans["parallelism"]) == []
    assert list(nlp("   ").spans["parallelism"]) == []
    english = nlp("We shall fight on the beaches, we shall fight on the landing grounds.")
    assert all(len(g) >= 2 for g in spacy_rhetoric.parallelisms(english))
    # a 2,000-word document, far longer than any training paragraph: tagged in full
    words = [t.text for eg in examples for t in eg.reference]
    words = (words * (2000 // len(words) + 1))[:2000]
    linker = nlp.get_pipe("parallelism_linker")
    long_doc = Doc(nlp.vocab, words=words)
    (path,) = linker.predict([long_doc])
    assert len(path) == 2000
    linker.set_annotations([long_doc], [path])
    assert max((s.end for s in long_doc.spans["parallelism"]), default=0) > 1000


def test_score_reports_all_metrics(trained):
    nlp, examples, _ = trained
    scores = nlp.evaluate(examples)
    for metric in ("epm", "mpbm", "mbawo", "mwo"):
        for part in ("p", "r", "f"):
            assert 0.0 <= scores[f"parallelism_{metric}_{part}"] <= 1.0


def test_unknown_scheme_is_an_error():
    nlp = spacy.blank("zh")
    with pytest.raises(Exception, match="BIOX"):
        nlp.add_pipe("parallelism_linker", config={"tagset": "BIOX"})


def test_cpu_config_trains_with_spacy_train(train_docs, tmp_path):
    """configs/experiments/parallelism_cpu.cfg, its reader and scorer through `spacy train` (3 steps)."""
    from spacy.cli.train import train

    path = tmp_path / "tiny.spacy"
    DocBin(docs=list(train_docs), store_user_data=True).to_disk(path)
    overrides = {
        "paths.train": str(path),
        "paths.dev": str(path),
        "training.max_steps": 3,
        "training.eval_frequency": 3,
        "components.tok2vec.model.encode.width": 32,
        "components.tok2vec.model.embed.rows": [500, 200, 200],
    }
    train(ROOT / "configs" / "experiments" / "parallelism_cpu.cfg", tmp_path / "out", overrides=overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["tok2vec", "parallelism_linker"]
    assert nlp.get_pipe("parallelism_linker").cfg["tagset"] == "BIOMJ"


def _tiny_bert(path: Path, docs) -> None:
    """A randomly initialised 2-layer BERT and a char tokenizer, saved locally."""
    from transformers import BertConfig, BertModel, BertTokenizerFast

    chars = sorted({c for d in docs for c in d.text})
    (path / "vocab.txt").parent.mkdir(parents=True, exist_ok=True)
    (path / "vocab.txt").write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] + chars) + "\n", encoding="utf8")
    tokenizer = BertTokenizerFast(vocab_file=str(path / "vocab.txt"), tokenize_chinese_chars=True)
    tokenizer.save_pretrained(path)
    config = BertConfig(vocab_size=len(chars) + 5, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=37, max_position_embeddings=512)
    BertModel(config).save_pretrained(path)


def test_trf_config_wiring_with_a_tiny_local_bert(train_docs, tmp_path):
    """configs/experiments/parallelism_trf.cfg with a tiny random BERT: a few training steps on CPU."""
    from spacy.cli.train import train

    bert = tmp_path / "tiny-bert"
    _tiny_bert(bert, train_docs)
    path = tmp_path / "tiny.spacy"
    DocBin(docs=list(train_docs[:3]), store_user_data=True).to_disk(path)
    overrides = {
        "paths.train": str(path),
        "paths.dev": str(path),
        "system.gpu_allocator": None,
        "training.max_steps": 2,
        "training.eval_frequency": 2,
        "components.transformer.model.name": str(bert),
        "components.transformer.model.get_spans.window": 32,
        "components.transformer.model.get_spans.stride": 24,
        "components.parallelism_linker.model.hidden_width": 16,
    }
    train(ROOT / "configs" / "experiments" / "parallelism_trf.cfg", tmp_path / "out", overrides=overrides)
    nlp = spacy.load(tmp_path / "out" / "model-last")
    assert nlp.pipe_names == ["transformer", "parallelism_linker"]
    doc = nlp(Doc(nlp.vocab, words=[t.text for t in train_docs[0]]))
    assert all(len(g) >= 2 for g in spacy_rhetoric.parallelisms(doc))


def test_evaluation_report(trained, tmp_path):
    """evaluate_linker writes the four metrics and the Appendix G counts."""
    import json

    from spacy_rhetoric.evaluation.parallelism import CATEGORIES, evaluate_linker

    nlp, examples, _ = trained
    nlp.to_disk(tmp_path / "model")
    data = tmp_path / "gold.spacy"
    DocBin(docs=[eg.reference for eg in examples], store_user_data=True).to_disk(data)
    result = evaluate_linker(tmp_path / "model", data, tmp_path / "metrics" / "parallelism.json")
    saved = json.loads((tmp_path / "metrics" / "parallelism.json").read_text(encoding="utf8"))
    assert saved["documents"] == len(examples) and saved["reference_parallelisms"] == result["reference_parallelisms"]
    assert set(saved["metrics"]) == {"epm", "mpbm", "mbawo", "mwo"}
    errors = saved["errors"]
    # every reference parallelism is either matched (correct or one error category) or a false negative
    matched = errors["correct"] + sum(errors[c] for c in CATEGORIES if not c.startswith("parallelism"))
    assert matched + errors["parallelism_fn"] == saved["reference_parallelisms"]
    assert matched + errors["parallelism_fp"] == saved["predicted_parallelisms"]
    assert "| EPM |" in (tmp_path / "metrics" / "parallelism.md").read_text(encoding="utf8")


def test_repetition_features():
    from spacy_rhetoric.ml.parallelism_tagger import REPETITION_BUCKETS, RepetitionFeatures

    nlp = spacy.blank("zh")
    doc = Doc(nlp.vocab, words=["如果", "和谐", "是", "海", "，", "如果", "友善", "是", "河"])
    layer = RepetitionFeatures()
    (feats,), _ = layer([doc], is_train=False)
    n = len(REPETITION_BUCKETS) + 1
    assert feats.shape == (9, 2 * n) and (feats.sum(axis=1) == 2).all()
    none = len(REPETITION_BUCKETS)
    assert feats[0, none] == 1 and feats[0, n + REPETITION_BUCKETS.index(5)] == 1  # 如果 again 5 words on
    assert feats[5, REPETITION_BUCKETS.index(5)] == 1 and feats[5, n + none] == 1
    assert feats[1, none] == 1 and feats[1, n + none] == 1  # 和谐 occurs once


def test_docs_that_do_not_annotate_parallelism_teach_the_linker_nothing(trained, simile_docbins):
    """Joint training on several corpora: a simile sentence has no branches
    because its corpus does not annotate parallelism, not because it has
    none. Updating on such docs must leave the linker unchanged."""
    from spacy_rhetoric.components.parallelism_linker import annotates_parallelism
    from spacy_rhetoric.corpora.docbin import read_docbin

    nlp = trained[0]
    simile = [d for _, d in zip(range(8), read_docbin(simile_docbins / "train.spacy", nlp.vocab))]
    assert not any(annotates_parallelism(d) for d in simile)
    linker = nlp.get_pipe("parallelism_linker")
    before = linker.model.to_bytes()
    losses = linker.update(_examples(nlp, simile), sgd=nlp.create_optimizer())
    assert losses["parallelism_linker"] == 0.0
    assert linker.model.to_bytes() == before


def test_repetition_features_beside_a_listener_without_input_gradient():
    """A transformer listener's backprop returns None (it hands the gradient
    to the transformer); concatenated with RepetitionFeatures, the backprop
    must not fail (it did when resuming zh_rhetoric_trf on the CPU)."""
    from thinc.api import Model, concatenate

    from spacy_rhetoric.ml.parallelism_tagger import RepetitionFeatures

    def listener(backprop_result):
        def forward(model, docs, is_train):
            return [model.ops.alloc2f(len(d), 4) for d in docs], lambda dY: backprop_result
        return Model("listener", forward)

    nlp = spacy.blank("zh")
    docs = [nlp("如果你是花，如果你是树"), nlp("是山")]
    for backprop_result in (None, []):
        layer = concatenate(listener(backprop_result), RepetitionFeatures())
        out, backprop = layer(docs, is_train=True)
        assert [o.shape[1] for o in out] == [4 + RepetitionFeatures().get_dim("nO")] * 2
        assert backprop(out) == backprop_result
