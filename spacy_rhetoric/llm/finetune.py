"""LoRA supervised fine-tuning of a causal LM for rhetorical generation (RG).

Defaults follow CERD's fine-tuning of Qwen1.5-7B (Liu et al. 2024,
``papers/000``, Appendix C, Table 15): LoRA r = 32, alpha = 32, learning rate
2e-4, batch size 32, AdamW, cosine learning-rate schedule, 50 steps for
single-task RG. Each record becomes the RG prompt of
:mod:`spacy_rhetoric.llm.prompts` (the same one inference uses) as a user turn
and ``{"generation": target}`` as the assistant turn, formatted with the
tokenizer's chat template; the loss is the mean cross-entropy over the answer
tokens only (prompt tokens are masked with -100).

Writes to ``output_dir``: ``checkpoint-<step>/`` (adapter + optimizer,
scheduler and data-order state, for ``resume``), ``adapter/`` (final adapter
in peft format, loadable by ``spacy_rhetoric.Transformers.v1`` as
``adapter_path``), ``train_log.jsonl`` (one line per step) and
``summary.json`` (records used, steps, losses, throughput in tokens/second).
"""
from __future__ import annotations

import json
import logging
import math
import shutil
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union

from ..errors import Errors
from .completion import completion_target, render_rg_completion
from .prompts import format_answer, rg_messages
from .records import RGRecord
from .transformers_backend import load_local_tokenizer, pick_device

logger = logging.getLogger(__name__)
IGNORE_INDEX = -100


@dataclass
class FinetuneConfig:
    """Fine-tuning settings (defaults: CERD Table 15 for the LoRA part).

    batch_size: examples per optimizer step, reached by gradient
        accumulation over micro-batches of ``micro_batch_size``.
    max_steps: optimizer steps. warmup_ratio: share of steps with linear
        warm-up before the cosine decay. max_length: examples longer than
        this many tokens are skipped (counted in the summary).
    target_modules: peft target modules ("all-linear" or a list of names).
    save_every: checkpoint every this many steps (and at the end);
        keep_checkpoints: how many recent checkpoints to keep.
    language: prompt language; k: preceding sentences kept per record.
    prompt_style: ``"chat"`` (instruction models, CERD's prompt) or
        ``"completion"`` (base LMs; see :func:`encode_example`).
    threads: torch CPU threads (0 = torch's default).
    """

    r: int = 32
    alpha: int = 32
    dropout: float = 0.05
    lr: float = 2e-4
    weight_decay: float = 0.0
    batch_size: int = 32
    micro_batch_size: int = 4
    max_steps: int = 50
    warmup_ratio: float = 0.0
    max_length: int = 1024
    target_modules: Union[str, List[str]] = "all-linear"
    save_every: int = 25
    keep_checkpoints: int = 2
    seed: int = 0
    language: str = "zh"
    k: int = 3
    device: str = "auto"
    threads: int = 0
    prompt_style: str = "chat"

    def validate(self) -> None:
        """Raise ``ValueError`` for inconsistent settings."""
        if self.batch_size < 1 or self.micro_batch_size < 1 or self.batch_size % self.micro_batch_size:
            raise ValueError("batch_size must be a positive multiple of micro_batch_size")
        if self.max_steps < 1 or self.save_every < 1 or self.r < 1:
            raise ValueError("max_steps, save_every and r must be >= 1")
        if self.prompt_style not in ("chat", "completion"):
            raise ValueError(Errors.R003.format(styles=("chat", "completion"), value=self.prompt_style))


def encode_example(
    tokenizer: Any, record: RGRecord, language: str = "zh", k: int = 3, prompt_style: str = "chat"
) -> Tuple[List[int], List[int]]:
    """``(input_ids, labels)`` of one record, labels = -100 on the prompt
    tokens (loss on answer tokens only).

    prompt_style ``"chat"``: CERD's RG prompt as a user turn and
    ``{"generation": target}`` as the assistant turn, in the tokenizer's chat
    template; the answer ends with the template's end-of-turn text (or EOS).
    ``"completion"`` (base LMs): BOS + the completion prompt of
    :mod:`spacy_rhetoric.llm.completion` with no shots, then the target and a
    line break, where inference stops. Raises ``ValueError`` for another style.
    """
    context = record.previous_sentences[-k:] if k else []
    if prompt_style == "completion":
        bos = [tokenizer.bos_token_id] if tokenizer.bos_token_id is not None else []
        prompt = bos + tokenizer(render_rg_completion(record.rhetoric, record.object, context), add_special_tokens=False)["input_ids"]
        answer = tokenizer(completion_target(record), add_special_tokens=False)["input_ids"]
        return prompt + answer, [IGNORE_INDEX] * len(prompt) + answer
    if prompt_style != "chat":
        raise ValueError(Errors.R003.format(styles=("chat", "completion"), value=prompt_style))
    messages = rg_messages(record.rhetoric, record.object, context, language=language)
    answer = format_answer(record.target)
    prompt_text = tokenizer.apply_chat_template(messages, add_generation_prompt=True, tokenize=False)
    full_text = tokenizer.apply_chat_template(
        messages + [{"role": "assistant", "content": answer}], tokenize=False
    )
    prompt = tokenizer(prompt_text, add_special_tokens=False)["input_ids"]
    full = tokenizer(full_text, add_special_tokens=False)["input_ids"]
    if full[: len(prompt)] != prompt:
        # Template does not extend the prompt verbatim: append the answer.
        full = prompt + tokenizer(answer, add_special_tokens=False)["input_ids"] + [tokenizer.eos_token_id]
    labels = [IGNORE_INDEX] * len(prompt) + full[len(prompt) :]
    return full, labels


def _micro_batches(n_examples: int, size: int, seed: int) -> Iterator[List[int]]:
    """Endless stream of micro-batches of example indices: a fresh seeded
    permutation per epoch, so the order is reproducible (for resume)."""
    import torch

    epoch = 0
    while True:
        gen = torch.Generator().manual_seed(seed + epoch)
        order = torch.randperm(n_examples, generator=gen).tolist()
        for start in range(0, n_examples, size):
            yield order[start : start + size]
        epoch += 1


def _pad(batch: List[Tuple[List[int], List[int]]], pad_id: int, device: Any):
    """Left-padded ``input_ids``, ``attention_mask``, ``position_ids``,
    ``labels``: ``Ints2d (batch, max_len)``. Left padding puts every answer
    at the end of its row, so only the last positions need logits."""
    import torch

    width = max(len(ids) for ids, _ in batch)
    ids = torch.full((len(batch), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(batch), width), dtype=torch.long)
    labels = torch.full((len(batch), width), IGNORE_INDEX, dtype=torch.long)
    for i, (x, y) in enumerate(batch):
        ids[i, width - len(x) :] = torch.tensor(x)
        mask[i, width - len(x) :] = 1
        labels[i, width - len(y) :] = torch.tensor(y)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return ids.to(device), mask.to(device), positions.to(device), labels.to(device)


def _answer_loss(model: Any, batch: List[Tuple[List[int], List[int]]], pad_id: int, device: Any, n_answer: int):
    """Summed answer-token cross-entropy of a micro-batch divided by
    ``n_answer`` (the answer tokens of the whole optimizer step), and the
    number of input tokens. Logits are computed for the answer positions
    only (``logits_to_keep``): with a 262k vocabulary the output layer is
    most of the cost of a full-width pass."""
    import torch

    ids, mask, positions, labels = _pad(batch, pad_id, device)
    keep = max(sum(1 for t in y if t != IGNORE_INDEX) for _, y in batch)
    logits = model(input_ids=ids, attention_mask=mask, position_ids=positions, logits_to_keep=keep + 1).logits
    logits = logits[:, :-1].float()
    target = labels[:, -keep:]
    loss = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), target.reshape(-1), ignore_index=IGNORE_INDEX, reduction="sum"
    ) / max(1, n_answer)
    return loss, int(mask.sum())


def latest_checkpoint(output_dir: Union[str, Path]) -> Optional[Path]:
    """The ``checkpoint-<step>`` folder with the highest step, or None."""
    found = []
    for p in Path(output_dir).glob("checkpoint-*"):
        if p.is_dir() and p.name.split("-")[-1].isdigit() and (p / "trainer_state.pt").exists():
            found.append((int(p.name.split("-")[-1]), p))
    return max(found)[1] if found else None


def finetune(
    model_path: Union[str, Path],
    records: Sequence[RGRecord],
    output_dir: Union[str, Path],
    config: Optional[FinetuneConfig] = None,
    *,
    resume: bool = False,
    progress: bool = True,
    stop_after: Optional[int] = None,
) -> Dict[str, Any]:
    """LoRA-fine-tune the local causal LM at ``model_path`` on RG ``records``.

    resume: continue from the latest checkpoint in ``output_dir`` (adapter
    weights, optimizer, scheduler, RNG and data order), else start fresh.
    stop_after: stop (with a checkpoint) after this step, as an interrupted
    run would; the schedule still spans ``max_steps``, so a later ``resume``
    continues exactly as an uninterrupted run.
    Returns the summary written to ``summary.json``: ``n_records``,
    ``n_skipped_too_long``, ``steps``, ``first_loss``, ``last_loss``,
    ``train_seconds``, ``tokens``, ``answer_tokens``, ``tokens_per_second``
    (all input tokens, prompt + answer, excluding padding, per second of
    training steps). Raises ``ValueError`` without usable records and
    ``OSError`` when the model is not available locally.
    """
    import torch
    from peft import LoraConfig, get_peft_model, set_peft_model_state_dict
    from tqdm import tqdm
    from transformers import AutoModelForCausalLM, get_cosine_schedule_with_warmup

    cfg = config or FinetuneConfig()
    cfg.validate()
    if cfg.threads:
        torch.set_num_threads(cfg.threads)
    output_dir = Path(output_dir)
    output_dir.mkdir(parents=True, exist_ok=True)
    device = pick_device(cfg.device)

    tokenizer = load_local_tokenizer(str(model_path))
    if cfg.prompt_style == "chat" and not getattr(tokenizer, "chat_template", None):
        raise ValueError(Errors.R005.format(path=model_path))
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token
    examples, too_long = [], 0
    for rec in records:
        ids, labels = encode_example(tokenizer, rec, cfg.language, cfg.k, cfg.prompt_style)
        if len(ids) > cfg.max_length:
            too_long += 1
        else:
            examples.append((ids, labels))
    if not examples:
        raise ValueError(Errors.R014.format(n_given=len(records), n_too_long=too_long))

    dtype = torch.float32
    if device != "cpu" and torch.cuda.is_available() and torch.cuda.is_bf16_supported():
        dtype = torch.bfloat16
    torch.manual_seed(cfg.seed)
    model = AutoModelForCausalLM.from_pretrained(str(model_path), local_files_only=True, torch_dtype=dtype)
    lora = LoraConfig(
        r=cfg.r,
        lora_alpha=cfg.alpha,
        lora_dropout=cfg.dropout,
        target_modules=cfg.target_modules,
        task_type="CAUSAL_LM",
    )
    model = get_peft_model(model, lora)
    model.to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=cfg.lr, weight_decay=cfg.weight_decay)
    scheduler = get_cosine_schedule_with_warmup(
        optimizer, int(cfg.warmup_ratio * cfg.max_steps), cfg.max_steps
    )

    start_step = 0
    ckpt = latest_checkpoint(output_dir) if resume else None
    if ckpt is not None:
        start_step = _load_checkpoint(ckpt, model, optimizer, scheduler, set_peft_model_state_dict)
        logger.info("resuming from %s (step %d)", ckpt, start_step)

    accum = cfg.batch_size // cfg.micro_batch_size
    stream = _micro_batches(len(examples), cfg.micro_batch_size, cfg.seed)
    for _ in range(start_step * accum):  # replay the data order up to the checkpoint
        next(stream)

    log_path = output_dir / "train_log.jsonl"
    if start_step == 0 and log_path.exists():
        log_path.unlink()
    losses: List[float] = []
    tokens = answer_tokens = 0
    train_seconds = 0.0
    model.train()
    end_step = min(cfg.max_steps, stop_after) if stop_after else cfg.max_steps
    bar = tqdm(range(start_step, end_step), desc="finetune", disable=not progress, unit="step")
    for step in bar:
        t0 = time.perf_counter()
        micro = [[examples[i] for i in next(stream)] for _ in range(accum)]
        n_answer = sum(sum(1 for t in y if t != IGNORE_INDEX) for mb in micro for _, y in mb)
        step_loss = 0.0
        for mb in micro:
            loss, n_tokens = _answer_loss(model, mb, tokenizer.pad_token_id, device, n_answer)
            loss.backward()
            step_loss += float(loss.detach())
            tokens += n_tokens
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        scheduler.step()
        optimizer.zero_grad(set_to_none=True)
        dt = time.perf_counter() - t0
        train_seconds += dt
        answer_tokens += n_answer
        losses.append(step_loss)
        entry = {"step": step + 1, "loss": step_loss, "lr": scheduler.get_last_lr()[0], "seconds": dt}
        with log_path.open("a", encoding="utf8") as fh:
            fh.write(json.dumps(entry) + "\n")
        bar.set_postfix(loss=f"{step_loss:.4f}")
        if (step + 1) % cfg.save_every == 0 or step + 1 == end_step:
            _save_checkpoint(output_dir, step + 1, model, optimizer, scheduler, cfg)

    adapter_dir = output_dir / "adapter"
    model.save_pretrained(str(adapter_dir))
    summary = {
        "model_path": str(model_path),
        "adapter": str(adapter_dir),
        "device": device,
        "n_records": len(examples),
        "n_skipped_too_long": too_long,
        "start_step": start_step,
        "steps": end_step,
        "first_loss": losses[0] if losses else None,
        "last_loss": losses[-1] if losses else None,
        "losses": losses,
        "train_seconds": train_seconds,
        "tokens": tokens,
        "answer_tokens": answer_tokens,
        "tokens_per_second": tokens / train_seconds if train_seconds else None,
        "config": asdict(cfg),
    }
    (output_dir / "summary.json").write_text(json.dumps(summary, indent=2, ensure_ascii=False), encoding="utf8")
    return summary


def _save_checkpoint(output_dir: Path, step: int, model: Any, optimizer: Any, scheduler: Any, cfg: FinetuneConfig) -> None:
    import torch

    path = output_dir / f"checkpoint-{step}"
    model.save_pretrained(str(path))
    torch.save(
        {
            "step": step,
            "optimizer": optimizer.state_dict(),
            "scheduler": scheduler.state_dict(),
            "rng": torch.get_rng_state(),
            "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        },
        path / "trainer_state.pt",
    )
    old = sorted(
        (int(p.name.split("-")[-1]), p) for p in output_dir.glob("checkpoint-*") if p.name.split("-")[-1].isdigit()
    )
    for _, p in old[: max(0, len(old) - cfg.keep_checkpoints)]:
        shutil.rmtree(p, ignore_errors=True)


def _load_checkpoint(path: Path, model: Any, optimizer: Any, scheduler: Any, set_state: Any) -> int:
    import torch
    from safetensors.torch import load_file

    weights = path / "adapter_model.safetensors"
    if not weights.exists():
        raise FileNotFoundError(f"checkpoint {path} has no adapter_model.safetensors")
    set_state(model, load_file(str(weights)))
    state = torch.load(path / "trainer_state.pt", map_location="cpu", weights_only=False)
    optimizer.load_state_dict(state["optimizer"])
    scheduler.load_state_dict(state["scheduler"])
    torch.set_rng_state(state["rng"])  # LoRA dropout continues as uninterrupted
    if state.get("cuda_rng") is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda_rng"])
    return int(state["step"])


def perplexity(logprob: float, n_tokens: int) -> float:
    """Perplexity ``exp(-logprob / n_tokens)`` of an answer (CERD §4.2 uses
    PPL for RG); ``inf`` for zero tokens."""
    return math.exp(-logprob / n_tokens) if n_tokens else float("inf")
