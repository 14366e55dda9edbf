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
  :func:`~spacy_rhetoric.llm.completion.lead_texts`).
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field, replace
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from ..errors import Errors
from .base import Completion
from .completion import LEADS, STOP, lead_texts, parse_completion, render_rg_completion
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
    """A completion prompt and the leads its candidates begin with, in turn."""

    text: str
    leads: Tuple[str, ...] = ("",)


@dataclass
class CompletionRGTask:
    """Few-shot completion; ``shots``: device -> solved example records;
    ``lead``: one of :data:`~spacy_rhetoric.llm.completion.LEADS`. The
    sentence to rewrite (``original``) is not part of this prompt."""

    shots: Dict[str, List[RGRecord]] = field(default_factory=dict)
    lead: str = "none"

    def generate_prompts(self, requests: Sequence[RGRequest]) -> List[CompletionPrompt]:
        return [CompletionPrompt(self.prompt_text(r), tuple(lead_texts(r.rhetoric, r.object, self.lead))) for r in requests]

    def prompt_text(self, request: RGRequest) -> str:
        """The prompt without its lead (for logs and evaluation files)."""
        return render_rg_completion(request.rhetoric, request.object, request.context, self.shots.get(request.rhetoric, []))

    def call(self, backend: Any, prompts: List[CompletionPrompt], *, n: int = 1, first: int = 0,
             **decoding: Any) -> List[List[Completion]]:
        """``n`` answers per prompt; candidate ``j`` (counted from ``first``,
        so rounds go on where the last stopped) is begun by
        ``leads[j % len(leads)]``, which starts its answer text. Prompts that
        need the same number of answers are asked in one backend call."""
        wanted: Dict[Tuple[int, str], int] = defaultdict(int)
        for i, p in enumerate(prompts):
            for j in range(first, first + n):
                wanted[(i, p.leads[j % len(p.leads)])] += 1
        got: Dict[Tuple[int, str], Deque[Completion]] = {}
        for count in sorted(set(wanted.values())):
            keys = [key for key, c in wanted.items() if c == count]
            answers = backend.complete([prompts[i].text + lead for i, lead in keys], n=count, stop=STOP, **decoding)
            for (i, lead), comps in zip(keys, answers):
                got[(i, lead)] = deque(replace(c, text=lead + c.text) if c.ok and lead else c for c in comps)
        return [[got[(i, p.leads[j % len(p.leads)])].popleft() for j in range(first, first + n)]
                for i, p in enumerate(prompts)]

    def parse_responses(self, answers: Sequence[Sequence[Completion]]) -> List[List[ParsedAnswer]]:
        """The first line of each answer."""
        return [[parse_completion(c.text) for c in comps] for comps in answers]


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
