"""Test fixtures for the LLM code: a tiny, randomly initialised Qwen2-style
chat model, and real RG records derived from the shared corpora.

No pretrained weights can be downloaded in every environment, so the code
paths of the local backend and of LoRA fine-tuning are exercised on a model
built here: ``transformers.Qwen2Config`` with a few hundred vocabulary items,
a character-level tokenizer (one token per character, built with the
``tokenizers`` library) and a ChatML chat template like Qwen's. Its outputs
are meaningless text; it exists to test plumbing, never to produce
suggestions.
"""
from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Iterable, List, Union

from spacy_rhetoric.llm.prompts import format_answer, render_rg_prompt
from spacy_rhetoric.llm.records import RGRecord, cmdag_rg_records, simile_rg_records

#: ChatML, as used by Qwen models; ``<|im_end|>`` ends every turn.
CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<unk>")
#: Characters always in the vocabulary (JSON answers, ASCII, newlines).
BASE_CHARS = "\n " + "".join(chr(c) for c in range(33, 127))


def build_char_tokenizer(texts: Iterable[str], max_chars: int = 400):
    """A character tokenizer (``PreTrainedTokenizerFast``) whose vocabulary is
    the special tokens, ``BASE_CHARS`` and the ``max_chars`` most frequent
    other characters of ``texts``; anything else maps to ``<unk>``."""
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    counts = Counter(ch for text in texts for ch in text if ch not in BASE_CHARS)
    chars = list(BASE_CHARS) + [ch for ch, _ in counts.most_common(max_chars)]
    vocab = {tok: i for i, tok in enumerate(SPECIAL_TOKENS)}
    for ch in chars:
        vocab.setdefault(ch, len(vocab))
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Split(Regex(".|\n"), behavior="isolated")
    core.decoder = decoders.Fuse()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=core,
        eos_token="<|im_end|>",
        pad_token="<|endoftext|>",
        unk_token="<unk>",
        additional_special_tokens=["<|im_start|>"],
    )
    tokenizer.chat_template = CHATML_TEMPLATE
    return tokenizer


def build_tiny_chat_model(
    path: Union[str, Path],
    texts: Iterable[str],
    *,
    max_chars: int = 400,
    hidden_size: int = 64,
    layers: int = 2,
    heads: int = 4,
    seed: int = 0,
) -> Path:
    """Save a random Qwen2 causal LM + character tokenizer to ``path``.

    texts: text whose characters should be in the vocabulary (prompts and
    answers). Returns ``path``. The model is float32, ``hidden_size`` wide,
    with ``layers`` decoder layers; vocabulary = specials + ``BASE_CHARS`` +
    up to ``max_chars`` characters.
    """
    import torch
    from transformers import GenerationConfig, Qwen2Config, Qwen2ForCausalLM

    path = Path(path)
    tokenizer = build_char_tokenizer(texts, max_chars=max_chars)
    config = Qwen2Config(
        vocab_size=len(tokenizer),
        hidden_size=hidden_size,
        intermediate_size=hidden_size * 2,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),
        max_position_embeddings=2048,
        tie_word_embeddings=True,
        bos_token_id=tokenizer.pad_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        torch_dtype="float32",
    )
    torch.manual_seed(seed)
    model = Qwen2ForCausalLM(config)
    model.generation_config = GenerationConfig(
        eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id
    )
    path.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


def real_records(simile_dir: Path, cmdag_dir: Path, n_simile: int = 6, n_cmdag: int = 2) -> List[RGRecord]:
    """The first simile-derived and CMDAG-derived RG records of the real data."""
    simile = simile_rg_records(next(simile_dir.glob("*-Dev.tsv")))[:n_simile]
    cmdag = [r for r in cmdag_rg_records(cmdag_dir / "val.json") if r.previous_sentences][:n_cmdag]
    return simile + cmdag


def tiny_model(path: Path, records: List[RGRecord]) -> Path:
    """A tiny chat model whose vocabulary covers the RG prompts and answers of ``records``."""
    texts = [render_rg_prompt(r.rhetoric, r.object, r.previous_sentences) + format_answer(r.target) for r in records]
    texts += [render_rg_prompt(d, "月光", ["上文。"], language=lang) for d in ("metaphor", "personification", "hyperbole") for lang in ("zh", "en")]
    return build_tiny_chat_model(path, texts, max_chars=300, hidden_size=32, layers=2, heads=2)
