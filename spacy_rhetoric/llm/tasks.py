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
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Sequence

from ..errors import Errors
from .base import Completion
from .completion import STOP, parse_completion, render_rg_completion
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

    def call(self, backend: Any, prompts: List[List[dict]], **decoding: Any) -> List[List[Completion]]:
        return backend.chat(prompts, **decoding)

    def parse_responses(self, answers: Sequence[Sequence[Completion]]) -> List[List[ParsedAnswer]]:
        """Strict JSON parsing with one repair step, per answer."""
        return [[parse_generation(c.text) for c in comps] for comps in answers]


@dataclass
class CompletionRGTask:
    """Few-shot completion; ``shots``: device -> solved example records.
    The sentence to rewrite (``original``) is not part of this prompt."""

    shots: Dict[str, List[RGRecord]] = field(default_factory=dict)

    def generate_prompts(self, requests: Sequence[RGRequest]) -> List[str]:
        return [self.prompt_text(r) for r in requests]

    def prompt_text(self, request: RGRequest) -> str:
        return render_rg_completion(request.rhetoric, request.object, request.context, self.shots.get(request.rhetoric, []))

    def call(self, backend: Any, prompts: List[str], **decoding: Any) -> List[List[Completion]]:
        return backend.complete(prompts, stop=STOP, **decoding)

    def parse_responses(self, answers: Sequence[Sequence[Completion]]) -> List[List[ParsedAnswer]]:
        """The first line of each answer."""
        return [[parse_completion(c.text) for c in comps] for comps in answers]


def make_rg_task(prompt_style: str, *, language: str = "zh", shots: Optional[Dict[str, List[RGRecord]]] = None):
    """The RG task of a prompt style. Raises ``ValueError`` for another style."""
    if prompt_style == "instruction":
        return InstructionRGTask(language)
    if prompt_style == "completion":
        return CompletionRGTask(dict(shots or {}))
    raise ValueError(Errors.R003.format(styles=PROMPT_STYLES, value=prompt_style))
