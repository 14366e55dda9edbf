"""Local backend: a Hugging Face causal LM (optionally with a peft LoRA adapter).

Registered as ``spacy_rhetoric.Transformers.v1`` in ``registry.llm_backends``::

    [components.rhetoric_generator.backend]
    @llm_backends = "spacy_rhetoric.Transformers.v1"
    model_path = "/models/Qwen1.5-7B-Chat"
    adapter_path = "training/generator/adapter"

The model is loaded lazily at the first call, always with
``local_files_only=True``: a path or a model name already in the local
Hugging Face cache; nothing is downloaded at run time. Prompts are formatted
with the tokenizer's chat template (:meth:`TransformersBackend.chat`), or
given as plain text to a base LM (:meth:`TransformersBackend.complete`, for
the few-shot prompts of :mod:`spacy_rhetoric.llm.completion`). Decoding is
greedy when temperature is 0 (beam search returning ``n`` beams when
``n > 1``, so candidates differ and stay deterministic), sampling otherwise
(nucleus sampling with ``top_p``; ``repetition_penalty`` > 1 keeps a small
base LM from looping). Each answer's log-probability is
computed by a teacher-forced pass of the model over prompt + answer, i.e.
under the unmodified model distribution (temperature 1).
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any, List, Optional, Sequence, Tuple, Union

from ..errors import Errors
from .base import Completion, Message, registry

logger = logging.getLogger(__name__)


def pick_device(device: str = "auto") -> str:
    """``"auto"`` -> ``"cuda"`` when a CUDA GPU is visible, else ``"cpu"``;
    any other value is returned unchanged (``"cpu"``, ``"cuda:1"``, ...)."""
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


class TransformersBackend:
    """Chat with a local causal LM.

    model_path: directory (or cached model name) of the base model and
        tokenizer (a chat template is needed for :meth:`chat` only).
    adapter_path: optional peft LoRA adapter directory (peft format, e.g.
        written by ``rhetoric pipeline finetune-generator``).
    device: ``"auto"`` (CUDA when present), ``"cpu"``, ``"cuda:0"``, ...
    dtype: ``"auto"`` (float32 on CPU, the checkpoint's dtype on GPU),
        ``"float32"``, ``"bfloat16"`` or ``"float16"``.
    batch_size: conversations per forward batch.
    max_input_tokens: longer prompts are not truncated (that would cut the
        instruction or context silently) but answered with a failure.
    seed: seeds torch before sampling, for reproducible sampled candidates.
    top_p: nucleus-sampling mass (1.0 = off). repetition_penalty: CTRL's
        penalty on tokens already generated (Keskar et al. 2019, §4.1;
        1.0 = off).
    """

    def __init__(
        self,
        model_path: str,
        adapter_path: Optional[str] = None,
        *,
        device: str = "auto",
        dtype: str = "auto",
        batch_size: int = 8,
        max_input_tokens: int = 4096,
        seed: Optional[int] = None,
        top_p: float = 1.0,
        repetition_penalty: float = 1.0,
    ) -> None:
        if batch_size < 1:
            raise ValueError(Errors.R007.format(name="batch_size", minimum=1, value=batch_size))
        if not 0 < top_p <= 1 or repetition_penalty <= 0:
            raise ValueError(Errors.R015.format(top_p=top_p, repetition_penalty=repetition_penalty))
        self.model_path = str(model_path)
        self.adapter_path = str(adapter_path) if adapter_path else None
        self.device = device
        self.dtype = dtype
        self.batch_size = int(batch_size)
        self.max_input_tokens = int(max_input_tokens)
        self.seed = seed
        self.top_p = float(top_p)
        self.repetition_penalty = float(repetition_penalty)
        self._model: Any = None
        self._tokenizer: Any = None

    def __repr__(self) -> str:
        return f"TransformersBackend(model_path={self.model_path!r}, adapter_path={self.adapter_path!r})"

    # -- loading ----------------------------------------------------------
    @classmethod
    def from_model(cls, model: Any, tokenizer: Any, **kwargs: Any) -> "TransformersBackend":
        """Wrap an already loaded model (e.g. during fine-tuning)."""
        backend = cls(getattr(model, "name_or_path", "<in memory>") or "<in memory>", **kwargs)
        backend._model, backend._tokenizer = model, tokenizer
        _prepare_tokenizer(tokenizer)
        return backend

    def check_available(self) -> None:
        """Raise ``FileNotFoundError`` naming the project command that builds
        what is missing when ``model_path`` is a path that does not exist (a
        name that is not a path is left to :meth:`load`) or ``adapter_path``
        has no ``adapter_config.json``. Cheap: no model is loaded."""
        if _missing_folder(self.model_path):
            raise FileNotFoundError(Errors.R019.format(path=self.model_path))
        if self.adapter_path and not (Path(self.adapter_path) / "adapter_config.json").is_file():
            raise FileNotFoundError(Errors.R020.format(path=self.adapter_path))

    def load(self) -> None:
        """Load tokenizer, model and adapter (once). Raises ``OSError`` when
        the model or adapter is not available locally (``FileNotFoundError``
        naming the command that builds it, :meth:`check_available`)."""
        if self._model is not None:
            return
        self.check_available()
        import torch
        from transformers import AutoModelForCausalLM

        device = pick_device(self.device)
        tokenizer = load_local_tokenizer(self.model_path)
        _prepare_tokenizer(tokenizer)
        if self.dtype == "auto":
            torch_dtype: Any = torch.float32 if device == "cpu" else "auto"
        else:
            torch_dtype = getattr(torch, self.dtype)
        model = AutoModelForCausalLM.from_pretrained(
            self.model_path, local_files_only=True, torch_dtype=torch_dtype
        )
        if self.adapter_path:
            from peft import PeftModel

            # inference only: fold the LoRA weights into the base layers (peft's merge_and_unload), so
            # a step costs what the base model's does instead of adding the adapter's matmuls
            model = PeftModel.from_pretrained(model, self.adapter_path, is_trainable=False).merge_and_unload()
        model.to(device).eval()
        self._model, self._tokenizer = model, tokenizer
        logger.info("loaded %s (adapter %s) on %s", self.model_path, self.adapter_path, device)

    @property
    def model(self) -> Any:
        self.load()
        return self._model

    @property
    def tokenizer(self) -> Any:
        self.load()
        return self._tokenizer

    # -- public API -------------------------------------------------------
    def chat(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 128,
    ) -> List[List[Completion]]:
        """Answer each conversation ``n`` times (see ``LLMBackend.chat``).

        ``Completion.logprob`` is the natural-log probability of the answer
        tokens (including the end-of-turn token when generated),
        ``n_tokens`` their number. Raises ``ValueError`` for ``n < 1``.
        """
        if not conversations:
            return []
        prompts = [self._prompt_ids(conv) for conv in conversations]
        return self._answer(prompts, n, temperature, max_new_tokens, stop_text=None)

    def complete(
        self,
        prompts: Sequence[str],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 128,
        stop: Union[str, Sequence[str]] = "\n",
        not_first: Sequence[str] = (),
        never: Sequence[str] = (),
    ) -> List[List[Completion]]:
        """Continue each plain-text prompt ``n`` times (base LMs, no chat
        template): the tokenizer's BOS token, then the prompt. Each answer
        ends at (and includes) the first ``stop`` text (one text or several:
        the earliest of them), at EOS or after ``max_new_tokens``
        (``meta["finish_reason"]`` "stop" or "length"). ``not_first``: texts
        no answer may begin with; the tokens that would begin one (or that
        are blank) are barred at the first step (transformers'
        ``begin_suppress_tokens``), so e.g. an answer cannot be only a stop.
        ``never``: texts no token of an answer may contain (transformers'
        ``suppress_tokens``), e.g. a line break where the line must go on.
        Same failures and log-probabilities as :meth:`chat` (scored under
        the model's own distribution, the barred tokens included)."""
        if not prompts:
            return []
        tok = self.tokenizer
        bos = [tok.bos_token_id] if tok.bos_token_id is not None else []
        ids = [bos + tok(p, add_special_tokens=False)["input_ids"] for p in prompts]
        stops = tuple(s for s in ([stop] if isinstance(stop, str) else stop) if s)
        barred = (self._tokens_with(tuple(t for t in not_first if t), first=True),
                  self._tokens_with(tuple(t for t in never if t), first=False))
        return self._answer(ids, n, temperature, max_new_tokens, stop_text=stops or None, barred=barred)

    def _answer(
        self, prompts: List[List[int]], n: int, temperature: float, max_new_tokens: int,
        stop_text: Optional[Tuple[str, ...]], barred: Tuple[Sequence[int], Sequence[int]] = ((), ())
    ) -> List[List[Completion]]:
        if n < 1:
            raise ValueError(Errors.R007.format(name="n", minimum=1, value=n))
        results: List[Optional[List[Completion]]] = [None] * len(prompts)
        todo = []
        for i, ids in enumerate(prompts):
            if len(ids) > self.max_input_tokens:
                err = f"prompt too long: {len(ids)} tokens > max_input_tokens={self.max_input_tokens}"
                results[i] = [Completion(text="", error=err) for _ in range(n)]
            else:
                todo.append(i)
        for start in range(0, len(todo), self.batch_size):
            idx = todo[start : start + self.batch_size]
            answers = self._generate([prompts[i] for i in idx], n, temperature, max_new_tokens, stop_text, barred)
            for j, i in enumerate(idx):
                results[i] = answers[j * n : (j + 1) * n]
        return [r or [] for r in results]

    def score(
        self, conversations: Sequence[Sequence[Message]], answers: Sequence[str]
    ) -> List[Tuple[float, int]]:
        """Teacher-forced ``(logprob, n_tokens)`` of each given ``answer``
        (followed by the end-of-turn token) after its conversation; natural
        log. Perplexity = ``exp(-logprob / n_tokens)``."""
        if len(conversations) != len(answers):
            raise ValueError("conversations and answers must have the same length")
        tok = self.tokenizer
        out: List[Tuple[float, int]] = []
        for start in range(0, len(answers), self.batch_size):
            prompts = [self._prompt_ids(c) for c in conversations[start : start + self.batch_size]]
            conts = [
                tok(a, add_special_tokens=False)["input_ids"] + [tok.eos_token_id]
                for a in answers[start : start + self.batch_size]
            ]
            out.extend(self._logprobs(prompts, conts))
        return out

    # -- internals --------------------------------------------------------
    def _prompt_ids(self, conversation: Sequence[Message]) -> List[int]:
        if not getattr(self.tokenizer, "chat_template", None):
            raise ValueError(Errors.R005.format(path=self.model_path))
        text = self.tokenizer.apply_chat_template(
            list(conversation), add_generation_prompt=True, tokenize=False
        )
        return self.tokenizer(text, add_special_tokens=False)["input_ids"]

    def _stop_ids(self) -> List[int]:
        ids = {self.tokenizer.eos_token_id}
        gen_eos = getattr(getattr(self.model, "generation_config", None), "eos_token_id", None)
        if isinstance(gen_eos, int):
            ids.add(gen_eos)
        elif isinstance(gen_eos, (list, tuple)):
            ids.update(gen_eos)
        return sorted(i for i in ids if i is not None)

    def _tokens_with(self, texts: Tuple[str, ...], first: bool) -> List[int]:
        """Ids of the vocabulary's tokens that contain one of ``texts`` or,
        with ``first``, that are blank or begin (after leading blanks) with
        one of them; special tokens never. Cached per argument."""
        if not texts:
            return []
        cache = self.__dict__.setdefault("_barred", {})
        if (texts, first) not in cache:
            tok = self.tokenizer
            special = set(tok.all_special_ids)
            pieces = tok.convert_ids_to_tokens(list(range(len(tok))))
            strings = ((i, tok.convert_tokens_to_string([p]) if p is not None else "") for i, p in enumerate(pieces))
            if first:
                hit = (i for i, t in strings if not t.strip() or t.lstrip().startswith(texts))
            else:
                hit = (i for i, t in strings if any(x in t for x in texts))
            cache[(texts, first)] = [i for i in hit if i not in special]
        return cache[(texts, first)]

    def _stop_criterion(self, stop_text: Tuple[str, ...]) -> Any:
        """transformers' ``StopStringCriteria`` for ``stop_text``, built once
        per stop tuple: given as ``stop_strings``, ``generate`` builds it anew
        on every call, reading and hashing the whole vocabulary each time
        (262k tokens for Gemma 3; a tenth of a suggestion's time)."""
        from transformers import StopStringCriteria

        cache = self.__dict__.setdefault("_stop_criteria", {})
        if stop_text not in cache:
            cache[stop_text] = StopStringCriteria(self.tokenizer, list(stop_text))
        return cache[stop_text]

    def _generate(
        self, prompts: List[List[int]], n: int, temperature: float, max_new_tokens: int,
        stop_text: Optional[Tuple[str, ...]], barred: Tuple[Sequence[int], Sequence[int]] = ((), ())
    ) -> List[Completion]:
        import torch
        from transformers import StoppingCriteriaList

        model, tok = self.model, self.tokenizer
        stop = self._stop_ids()
        kwargs: dict = {
            "max_new_tokens": int(max_new_tokens),
            "num_return_sequences": n,
            "pad_token_id": tok.pad_token_id,
            "eos_token_id": stop,
            "repetition_penalty": self.repetition_penalty if self.repetition_penalty != 1.0 else None,
        }
        if stop_text:
            kwargs.update(stopping_criteria=StoppingCriteriaList([self._stop_criterion(stop_text)]))
        if barred[0]:
            kwargs.update(begin_suppress_tokens=list(barred[0]))
        if barred[1]:
            kwargs.update(suppress_tokens=list(barred[1]))
        if temperature <= 0:
            kwargs.update(do_sample=False, num_beams=n if n > 1 else 1)
            if n == 1:
                kwargs.update(temperature=None, top_p=None, top_k=None)
        else:
            if self.seed is not None:
                torch.manual_seed(self.seed)
            kwargs.update(do_sample=True, temperature=float(temperature), top_p=self.top_p)
        with torch.no_grad():
            if kwargs["do_sample"] and len(prompts) * n > 1:
                # the rows share the prompt's beginning: compute its cache once and give each row a copy
                # (transformers' prefix caching) instead of one prefill per row
                rows = [ids for ids in prompts for _ in range(n)]  # generate's order for num_return_sequences
                input_ids, attention, cache = self._shared_prefix(rows, int(max_new_tokens))
                kwargs.update(num_return_sequences=1)
                if cache is not None:
                    kwargs.update(past_key_values=cache)
            else:
                input_ids, attention = _left_pad(prompts, tok.pad_token_id, model.device)
            out = model.generate(input_ids=input_ids, attention_mask=attention, return_dict_in_generate=True,
                                 output_logits=True, **kwargs)
            # log p of each generated token under the model itself (raw logits, log-softmaxed), not under
            # the sampling distribution; read off the generation instead of a second forward pass. Beam
            # search reorders rows, so its kept beams are scored afresh below.
            steps = None if kwargs.get("num_beams", 1) > 1 else \
                model.compute_transition_scores(out.sequences, out.logits, normalize_logits=True)
        width = input_ids.shape[1]
        continuations = [_cut_at_stop(row[width:].tolist(), stop, tok.pad_token_id) for row in out.sequences]
        if stop_text:
            continuations = [_cut_at_text(c, stop_text, tok) for c in continuations]
        if steps is None:
            scores = self._logprobs([p for p in prompts for _ in range(n)], continuations)
        else:
            scores = [(float(steps[row, : len(c)].sum()) if c else 0.0, len(c)) for row, c in enumerate(continuations)]
        completions = []
        for cont, (logprob, n_tokens) in zip(continuations, scores):
            text = tok.decode(cont, skip_special_tokens=True)
            finished = bool(cont) and (cont[-1] in stop or bool(stop_text and text.endswith(stop_text)))
            meta = {"finish_reason": "stop" if finished else "length"}
            completions.append(Completion(text=text, logprob=logprob, n_tokens=n_tokens, meta=meta))
        return completions

    def _shared_prefix(self, rows: List[List[int]], max_new_tokens: int) -> Tuple[Any, Any, Any]:
        """``(input_ids, attention_mask, cache)`` for generating after each
        of ``rows`` (token ids) at once. The longest beginning all rows
        share (all but a row's last token at most) is run once and its
        key/value cache repeated for every row
        (``DynamicCache.batch_repeat_interleave``); the rest of each row
        follows it, padded in the middle: ``Ints2d (n_rows, prefix +
        longest rest)``. Each token keeps the position and the keys it has
        in a left-padded batch (positions count the mask's ones), so the
        answers are those of a full prefill of every row. cache is None
        (and the batch left-padded) when the rows share nothing, or when
        middle padding and ``max_new_tokens`` would reach past the model's
        sliding attention window (Gemma 3: 512 slots), where padding slots
        in the middle would push a row's first tokens out of its window."""
        import torch
        from transformers import DynamicCache

        pad = self.tokenizer.pad_token_id
        shared = min(len(r) for r in rows) - 1
        for i, token in enumerate(rows[0][:shared]):
            if any(r[i] != token for r in rows):
                shared = i
                break
        rest = max(len(r) for r in rows) - shared
        window = getattr(self.model.config, "sliding_window", None)
        padded = any(len(r) - shared < rest for r in rows)
        if shared < 1 or (padded and window and shared + rest + max_new_tokens > window):
            return (*_left_pad(rows, pad, self.model.device), None)
        prefix = rows[0][:shared]
        cache = DynamicCache()
        self.model(input_ids=torch.tensor([prefix], device=self.model.device), past_key_values=cache,
                   use_cache=True, logits_to_keep=1)
        cache.batch_repeat_interleave(len(rows))
        rests, masks = _left_pad([r[shared:] for r in rows], pad, self.model.device)
        ones = torch.ones((len(rows), shared), dtype=masks.dtype, device=masks.device)
        return torch.cat([torch.tensor([prefix] * len(rows), device=rests.device), rests], 1), torch.cat([ones, masks], 1), cache

    def _logprobs(self, prompts: List[List[int]], conts: List[List[int]]) -> List[Tuple[float, int]]:
        """Sum of log p(cont_t | prompt, cont_<t) for each pair, one padded batch."""
        import torch

        model, tok = self.model, self.tokenizer
        if not prompts:
            return []
        full = [p + c for p, c in zip(prompts, conts)]
        input_ids, attention = _left_pad(full, tok.pad_token_id, model.device)
        positions = (attention.cumsum(-1) - 1).clamp(min=0)
        with torch.no_grad():
            logits = model(input_ids=input_ids, attention_mask=attention, position_ids=positions).logits
        logp = torch.log_softmax(logits[:, :-1].float(), dim=-1)
        targets = input_ids[:, 1:]
        token_lp = logp.gather(-1, targets.unsqueeze(-1)).squeeze(-1)
        width = input_ids.shape[1]
        out = []
        for row, cont in enumerate(conts):
            k = len(cont)
            value = float(token_lp[row, width - 1 - k :].sum()) if k else 0.0
            out.append((value, k))
        return out


def _missing_folder(model_path: str) -> bool:
    """True when ``model_path`` is written as a path (absolute, ``./``, or
    more than ``owner/name``) and no folder is there; a hub-style name is
    left to the local cache lookup."""
    path = Path(str(model_path))
    looks_like_path = path.is_absolute() or str(model_path).startswith(".") or len(path.parts) > 2
    return looks_like_path and not path.is_dir()


def load_local_tokenizer(model_path: str) -> Any:
    """``AutoTokenizer`` from a local path or the local cache only. Raises
    ``OSError`` naming the path when it is not available locally (nothing is
    ever downloaded; ``FileNotFoundError`` R019, naming the command that
    builds the asset, for a folder that does not exist)."""
    from transformers import AutoTokenizer

    if _missing_folder(model_path):
        raise FileNotFoundError(Errors.R019.format(path=str(model_path)))

    try:
        return AutoTokenizer.from_pretrained(str(model_path), local_files_only=True)
    except (OSError, ValueError) as err:
        raise OSError(Errors.R006.format(path=str(model_path), reason=type(err).__name__)) from err


def _prepare_tokenizer(tokenizer: Any) -> None:
    tokenizer.padding_side = "left"
    if tokenizer.pad_token_id is None:
        tokenizer.pad_token = tokenizer.eos_token


def _left_pad(rows: List[List[int]], pad_id: int, device: Any):
    """Left-padded ``Ints2d (batch, max_len)`` ids and attention mask."""
    import torch

    width = max(len(r) for r in rows)
    ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for i, r in enumerate(rows):
        if r:
            ids[i, width - len(r) :] = torch.tensor(r, dtype=torch.long)
            mask[i, width - len(r) :] = 1
    return ids.to(device), mask.to(device)


def _cut_at_stop(ids: List[int], stop: List[int], pad_id: int) -> List[int]:
    """Answer ids up to and including the first stop token; padding dropped."""
    for i, t in enumerate(ids):
        if t in stop:
            return ids[: i + 1]
    while ids and ids[-1] == pad_id:
        ids = ids[:-1]
    return ids


def _cut_at_text(ids: List[int], stop_text: Tuple[str, ...], tok: Any) -> List[int]:
    """Answer ids up to and including the token that completes one of
    ``stop_text`` (``generate`` runs on until every row of the batch has
    stopped)."""
    for i in range(1, len(ids) + 1):
        text = tok.decode(ids[:i], skip_special_tokens=True)
        if any(s in text for s in stop_text):
            return ids[:i]
    return ids


@registry.llm_backends("spacy_rhetoric.Transformers.v1")
def make_transformers_backend(
    model_path: str,
    adapter_path: Optional[str] = None,
    device: str = "auto",
    dtype: str = "auto",
    batch_size: int = 8,
    max_input_tokens: int = 4096,
    seed: Optional[int] = None,
    top_p: float = 1.0,
    repetition_penalty: float = 1.0,
) -> TransformersBackend:
    """Registered factory of :class:`TransformersBackend` (see there)."""
    return TransformersBackend(
        model_path,
        adapter_path,
        device=device,
        dtype=dtype,
        batch_size=batch_size,
        max_input_tokens=max_input_tokens,
        seed=seed,
        top_p=top_p,
        repetition_penalty=repetition_penalty,
    )
