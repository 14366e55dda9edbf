"""LLM tasks, after spacy-llm's split of *task* and *model*: a task turns
requests into prompts (``generate_prompts``), asks a backend in the one way
its prompts need (``call``), and turns the answers back into results
(``parse_responses``); the backend (:mod:`spacy_rhetoric.llm.base`) only
answers. The ``rhetoric_generator`` component orchestrates: it chooses the
sentences, runs a task, reranks and writes to the docs.

Two RG tasks (CERD task RG, Liu et al. 2024, ``papers/000`` §3.2):

- :class:`InstructionRGTask` (prompt style ``"instruction"``): CERD's
  instruction with a JSON answer (``prompts/rg_zh.jinja2``), asked through
  ``backend.chat``, parsed by :func:`~spacy_rhetoric.llm.prompts.parse_generation`;
  for instruction-tuned models.
- :class:`CompletionRGTask` (prompt style ``"completion"``): few-shot
  completion (``prompts/rg_completion_zh.jinja2``), asked through
  ``backend.complete`` with a line-break stop, parsed by
  :func:`~spacy_rhetoric.llm.completion.parse_completion`; for base LMs.
  Its ``lead`` begins the answers for the model (forced prefix,
  :func:`~spacy_rhetoric.llm.completion.make_lead`).
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field, replace
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from ..errors import Errors
from .base import Completion
from .completion import BRANCH_BREAKS, BRANCH_STOPS, LEADS, STOP, Lead, make_lead, parse_completion, render_rg_completion
from .prompts import ParsedAnswer, parse_generation, render_rg_prompt, rg_messages
from .records import RGRecord

PROMPT_STYLES = ("instruction", "completion")


@dataclass
class RGRequest:
    """One generation problem: at most k preceding sentences (oldest first),
    the device, its object, and optionally a sentence to rewrite."""

    context: List[str]
    rhetoric: str
    object: str
    original: Optional[str] = None


@dataclass
class InstructionRGTask:
    """CERD's RG instruction; ``language`` "zh" or "en"."""

    language: str = "zh"

    def generate_prompts(self, requests: Sequence[RGRequest]) -> List[List[dict]]:
        """One chat conversation (a single user turn) per request."""
        return [rg_messages(r.rhetoric, r.object, r.context, language=self.language, original=r.original) for r in requests]

    def prompt_text(self, request: RGRequest) -> str:
        """The prompt as plain text (for logs and evaluation files)."""
        return render_rg_prompt(request.rhetoric, request.object, request.context, language=self.language, original=request.original)

    def call(self, backend: Any, prompts: List[List[dict]], *, first: int = 0, **decoding: Any) -> List[List[Completion]]:
        """``first``: the index of the first candidate drawn (unused here)."""
        return backend.chat(prompts, **decoding)

    def parse_responses(self, answers: Sequence[Sequence[Completion]]) -> List[List[ParsedAnswer]]:
        """Strict JSON parsing with one repair step, per answer."""
        return [[parse_generation(c.text) for c in comps] for comps in answers]


@dataclass(frozen=True)
class CompletionPrompt:
    """A completion prompt and what begins its answers (:class:`Lead`)."""

    text: str
    lead: Lead = Lead()


@dataclass
class CompletionRGTask:
    """Few-shot completion; ``shots``: device -> solved example records;
    ``lead``: one of :data:`~spacy_rhetoric.llm.completion.LEADS`. The
    sentence to rewrite (``original``) is not part of this prompt."""

    shots: Dict[str, List[RGRecord]] = field(default_factory=dict)
    lead: str = "none"

    def generate_prompts(self, requests: Sequence[RGRequest]) -> List[CompletionPrompt]:
        return [CompletionPrompt(self.prompt_text(r), make_lead(r.rhetoric, r.object, self.lead)) for r in requests]

    def prompt_text(self, request: RGRequest) -> str:
        """The prompt without its lead (for logs and evaluation files)."""
        return render_rg_completion(request.rhetoric, request.object, request.context, self.shots.get(request.rhetoric, []))

    def call(self, backend: Any, prompts: List[CompletionPrompt], *, n: int = 1, first: int = 0,
             **decoding: Any) -> List[List[Completion]]:
        """``n`` answers per prompt, each beginning with its lead: candidate
        ``j`` (counted from ``first``, so rounds go on where the last
        stopped) with ``lead.texts[j % len(lead.texts)]``; a lead with a
        marker writes its branches clause by clause (:func:`_branch_led`)."""
        out: List[List[Completion]] = [[] for _ in prompts]
        plain = [i for i, p in enumerate(prompts) if not p.lead.branches]
        for i, comps in zip(plain, _text_led(backend, [prompts[i] for i in plain], n, first, decoding)):
            out[i] = comps
        for i in (i for i, p in enumerate(prompts) if p.lead.branches):
            out[i] = _branch_led(backend, prompts[i], n, decoding)
        return out

    def parse_responses(self, answers: Sequence[Sequence[Completion]]) -> List[List[ParsedAnswer]]:
        """The first line of each answer."""
        return [[parse_completion(c.text) for c in comps] for comps in answers]


def _text_led(backend: Any, prompts: List[CompletionPrompt], n: int, first: int,
              decoding: Dict[str, Any]) -> List[List[Completion]]:
    """Answers begun by each prompt's lead texts in turn; prompts that need
    the same number of answers are asked in one backend call."""
    wanted: Dict[Tuple[int, str], int] = defaultdict(int)
    for i, p in enumerate(prompts):
        for j in range(first, first + n):
            wanted[(i, p.lead.texts[j % len(p.lead.texts)])] += 1
    got: Dict[Tuple[int, str], Deque[Completion]] = {}
    for count in sorted(set(wanted.values())):
        keys = [key for key, c in wanted.items() if c == count]
        answers = backend.complete([prompts[i].text + lead for i, lead in keys], n=count, stop=STOP, **decoding)
        for (i, lead), comps in zip(keys, answers):
            got[(i, lead)] = deque(_begun(lead, c) for c in comps)
    return [[got[(i, p.lead.texts[j % len(p.lead.texts)])].popleft() for j in range(first, first + n)]
            for i, p in enumerate(prompts)]


def _branch_led(backend: Any, prompt: CompletionPrompt, n: int, decoding: Dict[str, Any]) -> List[Completion]:
    """``n`` answers whose first ``lead.branches`` clauses each begin with
    ``lead.marker``: the model writes a clause up to a clause or sentence
    break (:data:`BRANCH_STOPS`; it may not end the line there), the break
    becomes ``lead.separator`` (when set; its log-probability stays that of
    the break the model chose), the marker is put after it, and so on; the
    last branch runs to the line's end. No branch may begin with a break
    (:data:`BRANCH_BREAKS`, barred at the first token), so none is its
    marker alone. An answer that fails or runs out of tokens stops there."""
    marker, separator, branches = prompt.lead.marker, prompt.lead.separator, prompt.lead.branches
    settings = {**decoding, "not_first": BRANCH_BREAKS}
    inner = {"stop": BRANCH_STOPS, "never": (STOP,), **settings}
    last = {"stop": STOP, **settings}
    first = backend.complete([prompt.text + marker], n=n, **(last if branches == 1 else inner))[0]
    parts = [_begun(marker, c) for c in first]
    for branch in range(1, branches):
        todo = [j for j, c in enumerate(parts) if c.ok and c.text.endswith(BRANCH_STOPS)]
        if separator:
            for j in todo:
                parts[j] = replace(parts[j], text=parts[j].text[:-1] + separator)
        answers = backend.complete([prompt.text + parts[j].text + marker for j in todo], n=1,
                                   **(last if branch == branches - 1 else inner))
        for j, (more,) in zip(todo, answers):
            parts[j] = _joined(parts[j], _begun(marker, more))
    return parts


def _begun(lead: str, completion: Completion) -> Completion:
    """The completion with its lead in front (a failed one as it is)."""
    return replace(completion, text=lead + completion.text) if completion.ok and lead else completion


def _joined(head: Completion, tail: Completion) -> Completion:
    """One answer from two consecutive parts: texts joined, log-probabilities
    and token counts summed (the forced marker is not scored); a failed
    tail fails the whole."""
    if not tail.ok:
        return tail
    logprob = None if head.logprob is None or tail.logprob is None else head.logprob + tail.logprob
    n_tokens = None if head.n_tokens is None or tail.n_tokens is None else head.n_tokens + tail.n_tokens
    return replace(tail, text=head.text + tail.text, logprob=logprob, n_tokens=n_tokens)


def make_rg_task(prompt_style: str, *, language: str = "zh", shots: Optional[Dict[str, List[RGRecord]]] = None,
                 lead: str = "none"):
    """The RG task of a prompt style. Raises ``ValueError`` for another
    style, an unknown lead, or a lead with the instruction style."""
    check_lead(prompt_style, lead)
    if prompt_style == "instruction":
        return InstructionRGTask(language)
    if prompt_style == "completion":
        return CompletionRGTask(dict(shots or {}), lead)
    raise ValueError(Errors.R003.format(styles=PROMPT_STYLES, value=prompt_style))


def check_lead(prompt_style: str, lead: str) -> None:
    """Raises ``ValueError`` for an unknown lead, or a lead other than
    ``"none"`` with a prompt style other than ``"completion"``."""
    if lead not in LEADS or (lead != "none" and prompt_style != "completion"):
        raise ValueError(Errors.R018.format(leads=LEADS, value=lead))
