"""LLM judges for generated rhetoric, over any :class:`~spacy_rhetoric.llm.base.LLMBackend`.

- :class:`SingleAnswerRater`: CERD's single-answer rating, an integer 1–5
  (Liu et al. 2024, ``papers/000_*`` §4.2, Table 8).
- :class:`PairwiseRanker`: CERD's pairwise ranking of a candidate against
  the essay's own (reference) sentence; the share of candidates judged better
  is the ranking score (§4.2, Table 8).
- :class:`MetaphorJudge`: the five-dimension staged multi-turn judge of
  Huang et al. 2026 (``papers/003_*`` §1.3 and §2.1): turn 1 sets the role
  and conceptual metaphor theory and asks for source and target domains;
  then one turn per dimension (novelty 创新性, relevance 关联性, clarity
  明确性, literariness 文学性, cultural fit 文化契合度), each with definition,
  mapping analysis and a 1–10 score with reasons; a final turn integrates
  them. Total = sum of the five scores. Also best-of-group selection (§3.3.2)
  and a repeat-k stability check (§3.4).

Prompts are the Chinese jinja2 templates ``spacy_rhetoric/prompts/judge_*``.
Every answer must be one JSON object of the documented shape (optionally in a
```json fence); anything else is a parse failure that is reported on the
result (``error``), never replaced by a guessed score.
"""
from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple

from ..errors import JudgeParseError
from ..llm.base import LLMBackend
from ..llm.prompts import template_environment
from ..taxonomy import COMPONENT_ZH, OBJECT_COMPONENT, zh_name

#: The five dimensions (key, Chinese name, definition written for the prompt).
DIMENSIONS: Tuple[Tuple[str, str, str], ...] = (
    (
        "novelty",
        "创新性",
        "创新性看这个隐喻新不新：源域与目标域的搭配是否少见，是否给人意料之外的联想，"
        "是否跳出了习以为常的说法，带来看待本体的新角度。陈旧套话得分低。",
    ),
    (
        "relevance",
        "关联性",
        "关联性看源域和目标域之间的联系是否站得住：两者是否有真实的相似点或内在逻辑，"
        "投射过去的特征是否恰当，是否加深了对本体的理解。牵强或相互冲突的搭配得分低。",
    ),
    (
        "clarity",
        "明确性",
        "明确性看读者能否顺利读懂：喻体的哪一特征被借用是否清楚，映射是否连贯、没有断裂，"
        "意思是否容易把握。晦涩、含混或需要费力猜测的表达得分低。",
    ),
    (
        "literariness",
        "文学性",
        "文学性看句子的艺术价值：语言是否凝练优美，意象是否鲜明，修辞运用是否巧妙，"
        "句子本身是否通顺连贯、有韵味。平淡直白或语病明显的句子得分低。",
    ),
    (
        "cultural_fit",
        "文化契合度",
        "文化契合度看隐喻在中文语境和中华文化中是否自然得体：意象是否符合中文读者的文化经验、"
        "习俗和价值观，是否能被中文读者接受和共鸣。与中文文化习惯相悖或生硬照搬的得分低。",
    ),
)

#: Chinese role name of the object slot per coarse device (CERD RG prompt).
OBJECT_ROLE = {device: COMPONENT_ZH[role] for device, role in OBJECT_COMPONENT.items()}

_FENCE = re.compile(r"^\s*```(?:json)?\s*\n?(.*?)\n?\s*```\s*$", re.S)


def render(template: str, **variables: Any) -> str:
    """Render ``prompts/<template>.jinja2``; raises jinja2's UndefinedError
    when a variable is missing."""
    return template_environment().get_template(f"{template}.jinja2").render(**variables).strip()


def parse_json_object(text: str, fields: Dict[str, Callable[[Any], bool]]) -> Dict[str, Any]:
    """Strictly parse an answer: the whole text (or a single ```json fence)
    must be one JSON object holding every key of ``fields``, each value
    passing its check. Extra keys are allowed.

    Raises :class:`JudgeParseError` saying what is wrong (quoting at most 80
    characters of the answer).
    """
    body = text.strip()
    m = _FENCE.match(body)
    if m:
        body = m.group(1).strip()
    try:
        data = json.loads(body)
    except json.JSONDecodeError as err:
        raise JudgeParseError(f"answer is not JSON ({err.msg}): {text[:80]!r}") from None
    if not isinstance(data, dict):
        raise JudgeParseError(f"answer is not a JSON object: {text[:80]!r}")
    for key, check in fields.items():
        if key not in data:
            raise JudgeParseError(f"answer lacks field {key!r}: {text[:80]!r}")
        if not check(data[key]):
            raise JudgeParseError(f"field {key!r} has an invalid value {data[key]!r}")
    return data


def _int_in(lo: int, hi: int) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, int) and not isinstance(v, bool) and lo <= v <= hi


def _text(v: Any) -> bool:
    return isinstance(v, str) and bool(v.strip())


@dataclass
class JudgeResult:
    """The verdict of one single-turn judge call.

    value: the parsed verdict (a 1–5 score, or 1.0/0.5/0.0 for pairwise:
    candidate better / tie / reference better); None on failure.
    reason: the judge's reason; answer: the raw answer text; error: why no
    verdict was obtained (backend error or parse failure), else None.
    """

    value: Optional[float]
    reason: Optional[str] = None
    answer: str = ""
    error: Optional[str] = None


@dataclass
class GenerationItem:
    """One generation to judge: preceding ``context`` sentences, the required
    coarse ``rhetoric`` (label) and ``object``, the ``candidate`` and the
    essay's ``reference`` sentence."""

    candidate: str
    rhetoric: str = "metaphor"
    object: str = ""
    context: List[str] = field(default_factory=list)
    reference: str = ""


def _condition(item: GenerationItem) -> Dict[str, Any]:
    return {
        "context": item.context,
        "rhetoric_zh": zh_name("coarse", item.rhetoric),
        "object": item.object,
        "object_role": OBJECT_ROLE.get(item.rhetoric, "对象"),
    }


def _ask(backend: LLMBackend, prompts: Sequence[str], temperature: float, max_new_tokens: int):
    convs = [[{"role": "user", "content": p}] for p in prompts]
    return [answers[0] for answers in backend.chat(convs, n=1, temperature=temperature, max_new_tokens=max_new_tokens)]


def _single_turn_results(answers, fields: dict, value_of: Callable[[dict], float]) -> List[JudgeResult]:
    """One :class:`JudgeResult` per answer: a backend failure or an answer
    that does not parse into ``fields`` becomes a result with ``error`` set
    and no value; otherwise ``value_of(parsed)`` with the parsed reason."""
    out = []
    for c in answers:
        if not c.ok:
            out.append(JudgeResult(None, answer=c.text, error=f"backend: {c.error}"))
            continue
        try:
            data = parse_json_object(c.text, fields)
        except JudgeParseError as err:
            out.append(JudgeResult(None, answer=c.text, error=str(err)))
            continue
        out.append(JudgeResult(value_of(data), data["reason"], c.text))
    return out


class SingleAnswerRater:
    """CERD single-answer rating: one integer 1–5 per candidate."""

    def __init__(self, backend: LLMBackend, *, temperature: float = 0.0, max_new_tokens: int = 256):
        self.backend = backend
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens

    def prompt(self, item: GenerationItem) -> str:
        return render("judge_rating", candidate=item.candidate, **_condition(item))

    def __call__(self, items: Sequence[GenerationItem]) -> List[JudgeResult]:
        """One :class:`JudgeResult` per item (``value`` = score 1–5)."""
        answers = _ask(self.backend, [self.prompt(i) for i in items], self.temperature, self.max_new_tokens)
        fields = {"score": _int_in(1, 5), "reason": _text}
        return _single_turn_results(answers, fields, lambda data: float(data["score"]))


class PairwiseRanker:
    """CERD pairwise ranking against the reference sentence. The candidate
    is shown as A and the reference as B; ``value`` 1.0 = candidate better,
    0.5 = tie, 0.0 = reference better."""

    VERDICT = {"A": 1.0, "B": 0.0, "tie": 0.5}

    def __init__(self, backend: LLMBackend, *, temperature: float = 0.0, max_new_tokens: int = 256):
        self.backend = backend
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens

    def prompt(self, item: GenerationItem) -> str:
        return render("judge_pairwise", first=item.candidate, second=item.reference, **_condition(item))

    def __call__(self, items: Sequence[GenerationItem]) -> List[JudgeResult]:
        """One :class:`JudgeResult` per item. Raises ValueError when an item
        has no reference."""
        for i, item in enumerate(items):
            if not item.reference.strip():
                raise ValueError(f"item {i}: pairwise ranking needs a reference sentence")
        answers = _ask(self.backend, [self.prompt(i) for i in items], self.temperature, self.max_new_tokens)
        fields = {"better": lambda v: v in self.VERDICT, "reason": _text}
        return _single_turn_results(answers, fields, lambda data: self.VERDICT[data["better"]])


def better_rate(results: Sequence[JudgeResult]) -> Optional[float]:
    """CERD's ranking score: share of parsed pairwise verdicts where the
    candidate is better (ties count half). None when nothing parsed."""
    values = [r.value for r in results if r.value is not None]
    return sum(values) / len(values) if values else None


@dataclass
class MetaphorJudgement:
    """Result of the staged judge for one sentence.

    domains: ``{"source_domain", "target_domain", "mapping"}`` from turn 1;
    scores / reasons / analyses: per dimension key (1–10 integers);
    total: sum of the five scores (None unless all five parsed);
    summary: the integration turn's overall remark; transcript: the whole
    conversation (messages in order); error: the first failure
    ("turn <name>: ..."), after which no further turn is sent;
    warnings: non-fatal findings (e.g. the integration turn restating a
    score differently from its dimension turn; the dimension turn wins).
    """

    sentence: str
    domains: Dict[str, str] = field(default_factory=dict)
    scores: Dict[str, int] = field(default_factory=dict)
    reasons: Dict[str, str] = field(default_factory=dict)
    analyses: Dict[str, str] = field(default_factory=dict)
    total: Optional[int] = None
    summary: Optional[str] = None
    transcript: List[Dict[str, str]] = field(default_factory=list)
    error: Optional[str] = None
    warnings: List[str] = field(default_factory=list)


@dataclass
class GroupChoice:
    """Best-of-group verdict: ``best`` is the 0-based index of the chosen
    sentence (None on failure)."""

    sentences: List[str]
    best: Optional[int]
    reason: Optional[str] = None
    answer: str = ""
    error: Optional[str] = None


class MetaphorJudge:
    """Five-dimension staged multi-turn judge (Huang et al. 2026 §2.1).

    Turn order (the conversation each sentence goes through):
    ``prepare`` (role + theory + domains) → ``novelty`` → ``relevance`` →
    ``clarity`` → ``literariness`` → ``cultural_fit`` → ``integrate``.
    All sentences advance turn by turn in one batched backend call per turn.
    Temperature 0 by default, as the paper sets it.
    """

    TURNS = ("prepare", *(d[0] for d in DIMENSIONS), "integrate")

    def __init__(self, backend: LLMBackend, *, temperature: float = 0.0, max_new_tokens: int = 512):
        self.backend = backend
        self.temperature = temperature
        self.max_new_tokens = max_new_tokens

    def _turn_prompt(self, turn: str, sentence: str) -> str:
        if turn == "prepare":
            return render("judge_metaphor_prepare", sentence=sentence)
        if turn == "integrate":
            return render("judge_metaphor_integrate", dimensions=[(k, zh) for k, zh, _ in DIMENSIONS])
        key, zh, definition = next(d for d in DIMENSIONS if d[0] == turn)
        return render("judge_metaphor_dimension", dimension_zh=zh, definition=definition)

    def _absorb(self, turn: str, j: MetaphorJudgement, text: str) -> None:
        if turn == "prepare":
            data = parse_json_object(text, {"source_domain": _text, "target_domain": _text, "mapping": _text})
            j.domains = {k: data[k] for k in ("source_domain", "target_domain", "mapping")}
        elif turn == "integrate":
            checks = {"scores": lambda v: isinstance(v, dict), "total": _int_in(5, 50), "summary": _text}
            data = parse_json_object(text, checks)
            j.summary = data["summary"]
            j.total = sum(j.scores.values())
            for key, value in data["scores"].items():
                if key in j.scores and value != j.scores[key]:
                    j.warnings.append(f"integration restates {key} as {value!r}, dimension turn gave {j.scores[key]}")
            if data["total"] != j.total:
                j.warnings.append(f"integration total {data['total']} differs from the sum {j.total}")
        else:
            data = parse_json_object(text, {"analysis": _text, "score": _int_in(1, 10), "reason": _text})
            j.scores[turn], j.reasons[turn], j.analyses[turn] = data["score"], data["reason"], data["analysis"]

    def __call__(self, sentences: Sequence[str]) -> List[MetaphorJudgement]:
        """Judge each sentence; failures are reported per sentence."""
        judgements = [MetaphorJudgement(s) for s in sentences]
        for j in judgements:
            if not j.sentence.strip():
                j.error = "empty sentence: nothing to judge"
        for turn in self.TURNS:
            active = [j for j in judgements if j.error is None]
            if not active:
                break
            for j in active:
                j.transcript.append({"role": "user", "content": self._turn_prompt(turn, j.sentence)})
            answers = self.backend.chat(
                [list(j.transcript) for j in active],
                n=1,
                temperature=self.temperature,
                max_new_tokens=self.max_new_tokens,
            )
            for j, (c, *_) in zip(active, answers):
                if not c.ok:
                    j.error = f"turn {turn}: backend: {c.error}"
                    continue
                j.transcript.append({"role": "assistant", "content": c.text})
                try:
                    self._absorb(turn, j, c.text)
                except JudgeParseError as err:
                    j.error = f"turn {turn}: {err}"
        return judgements

    def best_of_group(self, groups: Sequence[Sequence[str]]) -> List[GroupChoice]:
        """Choose the best sentence of each group (§3.3.2: groups of 3 in
        the paper; any size ≥ 2 here). Raises ValueError for a group of
        fewer than 2 sentences."""
        for g, group in enumerate(groups):
            if len(group) < 2:
                raise ValueError(f"group {g}: best-of-group needs at least 2 sentences, got {len(group)}")
        prompts = [render("judge_best_of_group", sentences=list(g)) for g in groups]
        answers = _ask(self.backend, prompts, self.temperature, self.max_new_tokens)
        out = []
        for group, c in zip(groups, answers):
            if not c.ok:
                out.append(GroupChoice(list(group), None, answer=c.text, error=f"backend: {c.error}"))
                continue
            try:
                data = parse_json_object(c.text, {"best": _int_in(1, len(group)), "reason": _text})
            except JudgeParseError as err:
                out.append(GroupChoice(list(group), None, answer=c.text, error=str(err)))
                continue
            out.append(GroupChoice(list(group), data["best"] - 1, data["reason"], c.text))
        return out

    def stability(self, sentences: Sequence[str], k: int = 5) -> List[Dict[str, Any]]:
        """Repeat the staged judgement ``k`` times (§3.4: 5 repeats at
        temperature 0) and report per sentence: ``totals`` (k values, None
        for failed runs), ``identical`` (all k runs gave the same five
        scores), ``total_stdev`` (population stdev over parsed runs),
        ``max_dimension_spread`` (largest max−min of one dimension), and
        ``failures``. Raises ValueError for k < 2."""
        if k < 2:
            raise ValueError(f"stability needs k ≥ 2 repeats, got {k}")
        runs = [self(sentences) for _ in range(k)]
        report = []
        for i, sentence in enumerate(sentences):
            js = [run[i] for run in runs]
            ok = [j for j in js if j.error is None]
            spread = max(
                (max(j.scores[d] for j in ok) - min(j.scores[d] for j in ok) for d, _, _ in DIMENSIONS),
                default=None,
            ) if ok else None
            report.append(
                {
                    "sentence": sentence,
                    "totals": [j.total for j in js],
                    "identical": len(ok) == k and all(j.scores == ok[0].scores for j in ok),
                    "total_stdev": statistics.pstdev([j.total for j in ok]) if ok else None,
                    "max_dimension_spread": spread,
                    "failures": [j.error for j in js if j.error is not None],
                }
            )
        return report
