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

The ``task`` block of ``rhetoric_generator`` is
:class:`RhetoricGenerationTask`, registered as
``spacy_rhetoric.RhetoricGeneration.v1`` in ``registry.llm_tasks``: the
prompt style (one of the two tasks above), its language, shots and lead,
and the context it is given::

    [components.rhetoric_generator.task]
    @llm_tasks = "spacy_rhetoric.RhetoricGeneration.v1"
    prompt_style = "completion"
    n_context = 2
    n_shots = 0
    lead = "device"
"""
from __future__ import annotations

from collections import defaultdict, deque
from dataclasses import dataclass, field, replace
from typing import Any, Deque, Dict, List, Optional, Sequence, Tuple

from ..errors import Errors
from .base import Completion, SettingsBlock, registry
from .completion import (BRANCH_BREAKS, BRANCH_STOPS, LEADS, STOP, Lead, make_lead, parse_completion, render_rg_completion,
                         select_shots)
from .prompts import RG_DEVICES, RG_TEMPLATES, ParsedAnswer, parse_generation, render_rg_prompt, rg_messages
from .records import RGRecord, read_jsonl

PROMPT_STYLES = ("instruction", "completion")
#: Languages of the instruction prompt (CERD's Chinese, and English).
LANGUAGES = tuple(RG_TEMPLATES)


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


@dataclass
class RhetoricGenerationTask(SettingsBlock):
    """What ``rhetoric_generator`` asks of its model, and how (CERD task RG,
    ``papers/000`` §3.2): the prompts, the call and the parsing of one
    :data:`PROMPT_STYLES` task (:class:`InstructionRGTask` or
    :class:`CompletionRGTask`), and the context it is given.

    prompt_style: ``"instruction"`` (CERD's RG prompt with a JSON answer,
        through ``backend.chat``; instruction-tuned models) or
        ``"completion"`` (few-shot completion through ``backend.complete``,
        for base LMs such as Gemma 3 270M; :mod:`spacy_rhetoric.llm.completion`;
        ``language`` and ``rewrite`` do not apply).
    language: prompt language of the instruction style, ``"zh"`` (CERD's) or ``"en"``.
    n_context: k, the number of preceding sentences given as context.
    rewrite: include the sentence being replaced in the prompt (a rewrite
        suggestion); off gives CERD's original RG prompt.
    max_sentence_chars: longer target sentences are skipped (reason given);
        longer context sentences keep their last ``max_sentence_chars``
        characters, so the prompt stays bounded.
    lead: how each answer is begun for the model (completion style only;
        :func:`~spacy_rhetoric.llm.completion.make_lead`): ``"none"`` or
        ``"device"``.
    shots: device -> completion shots (dicts with ``rhetoric``, ``object``,
        ``target``, ``previous_sentences``), chosen once by
        :func:`choose_shots` and saved with the component.

    Raises ``ValueError`` for an unknown prompt style (R003), lead (R018),
    language (R008), or a negative ``n_context``.
    """

    prompt_style: str = "instruction"
    language: str = "zh"
    n_context: int = 3
    rewrite: bool = True
    max_sentence_chars: int = 300
    lead: str = "none"
    shots: Dict[str, List[dict]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(Errors.R003.format(styles=PROMPT_STYLES, value=self.prompt_style))
        check_lead(self.prompt_style, self.lead)
        if self.language not in LANGUAGES:
            raise ValueError(Errors.R008.format(languages=sorted(LANGUAGES), value=self.language))
        if self.n_context < 0:
            raise ValueError(Errors.R007.format(name="n_context", minimum=0, value=self.n_context))


    @property
    def style(self) -> Any:
        """The :class:`InstructionRGTask` or :class:`CompletionRGTask` of ``prompt_style``."""
        shots = {dev: [RGRecord(**s) for s in recs] for dev, recs in self.shots.items()}
        return make_rg_task(self.prompt_style, language=self.language, shots=shots, lead=self.lead)

    def clip_context(self, sentences: Sequence[str]) -> List[str]:
        """The last ``n_context`` non-blank sentences, stripped, each cut to
        its last ``max_sentence_chars`` characters."""
        kept = [s.strip() for s in sentences if s and s.strip()]
        kept = kept[-self.n_context:] if self.n_context else []
        return [s[-self.max_sentence_chars:] for s in kept]

    def generate_prompts(self, requests: Sequence[RGRequest]) -> List[Any]:
        """One prompt per request (a chat conversation or a completion prompt)."""
        return self.style.generate_prompts(requests)

    def prompt_text(self, request: RGRequest) -> str:
        """The prompt as plain text (for logs and evaluation files)."""
        return self.style.prompt_text(request)

    def call(self, backend: Any, prompts: List[Any], **decoding: Any) -> List[List[Completion]]:
        """Ask ``backend`` in the way the prompt style needs (``n``, ``first``
        and the decoding settings as :meth:`CompletionRGTask.call`)."""
        return self.style.call(backend, prompts, **decoding)

    def parse_responses(self, answers: Sequence[Sequence[Completion]]) -> List[List[ParsedAnswer]]:
        """One :class:`ParsedAnswer` per answer."""
        return self.style.parse_responses(answers)


def choose_shots(shots_path: Optional[str], n_shots: int) -> Dict[str, List[dict]]:
    """``n_shots`` completion shots per RG device, a seeded choice
    (:func:`~spacy_rhetoric.llm.completion.select_shots`) among the RG
    records of ``shots_path`` (JSONL, ``rhetoric convert rg-records``; None: the
    project's own examples), as plain dicts so they are saved with the
    component. Raises ``ValueError`` for ``n_shots < 0``."""
    if n_shots < 0:
        raise ValueError(Errors.R007.format(name="n_shots", minimum=0, value=n_shots))
    records = list(read_jsonl(shots_path)) if shots_path else []
    keep = ("rhetoric", "object", "target", "previous_sentences")
    return {dev: [{k: getattr(r, k) for k in keep} for r in select_shots(records, dev, n_shots)] for dev in RG_DEVICES}


@registry.llm_tasks("spacy_rhetoric.RhetoricGeneration.v1")
def make_rhetoric_generation_task(
    prompt_style: str = "instruction",
    language: str = "zh",
    n_context: int = 3,
    rewrite: bool = True,
    max_sentence_chars: int = 300,
    shots_path: Optional[str] = None,
    n_shots: int = 4,
    lead: str = "none",
) -> RhetoricGenerationTask:
    """The ``task`` block of ``rhetoric_generator`` (see
    :class:`RhetoricGenerationTask`). shots_path, n_shots: where the
    completion shots are drawn from and how many per prompt
    (:func:`choose_shots`; completion style only). Raises ``ValueError`` as
    :class:`RhetoricGenerationTask` and :func:`choose_shots`."""
    if prompt_style not in PROMPT_STYLES:
        raise ValueError(Errors.R003.format(styles=PROMPT_STYLES, value=prompt_style))
    check_lead(prompt_style, lead)
    shots = choose_shots(shots_path, n_shots) if prompt_style == "completion" else {}
    return RhetoricGenerationTask(prompt_style, language, n_context, rewrite, max_sentence_chars, lead, shots)
