"""RG as few-shot completion, for base (not instruction-tuned) language models.

CERD's RG prompt (:mod:`spacy_rhetoric.llm.prompts`) is an instruction with a
JSON answer; a base LM such as Gemma 3 270M continues text instead of
following instructions, so this prompt style shows solved items and lets the
model complete the last one (template ``prompts/rg_completion_zh.jinja2``):

    下面是修辞造句的练习。……
    上文：（无）
    修辞：比喻
    本体：月亮
    句子：弯弯的月亮像一只小船，静静地泊在夜空里。
    …
    上文：<the context>
    修辞：比喻
    本体：<the object>
    句子：

The answer is the generated text up to the first line break. A *lead*
(:func:`make_lead`) begins parts of the answer for the model (forced-prefix
decoding): with the ``"device"`` lead a metaphor begins with its tenor and a
comparator (one comparator per candidate in turn), a personification with
its object and a word only apt for a person (one per candidate in turn),
and each of a parallelism's first three clauses begins with its marker, the
clauses set apart by ；; the model writes the rest.
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources
from typing import Dict, List, Optional, Sequence, Tuple

from ..errors import Errors
from ..taxonomy import COARSE_ZH, COMPONENT_ZH, REQUEST_OBJECT
from .prompts import RG_DEVICES, ParsedAnswer, template_environment
from .records import RGRecord, read_jsonl

TEMPLATE = "rg_completion_zh.jinja2"
BUILTIN_SHOTS = "rg_shots_zh.jsonl"
#: The answer ends at the first line break (the template's item separator).
STOP = "\n"
ANSWER_PREFIX = "句子："
#: How an answer may be begun for the model (see :func:`make_lead`).
LEADS = ("none", "device")
#: Comparators the ``"device"`` lead puts after a metaphor's tenor, used in
#: turn: the simile markers 像/仿佛/如同 and the copula 是 of a 暗喻
#: (CERD's metaphor forms, ``papers/000`` §2.1).
LEAD_COMPARATORS = ("像", "仿佛", "是", "如同")
#: What the ``"device"`` lead puts after a personification's object, used in
#: turn: manner adverbials of a person (副词: 小溪欢快地向山下流去), an
#: action addressed to us (动词: 野花向我们点头微笑) and a human expression
#: (动词), the transferred-word forms of ``annotations/GUIDELINES.md`` §3.2.
#: The model writes the predicate; none names a vehicle, so the answer is
#: not a simile (GUIDELINES §4.1). Chosen on dev requests
#: (``docs/generation.md``).
LEAD_PERSONIFICATION = ("悄悄地", "向我们", "微笑着", "温柔地")
#: The words the ``"device"`` lead puts after the object, per device.
LEAD_WORDS = {"metaphor": LEAD_COMPARATORS, "personification": LEAD_PERSONIFICATION}
#: Clauses of a parallelism the ``"device"`` lead begins with its marker:
#: three branches, the fewest a parallelism has (``annotations/GUIDELINES.md``).
LEAD_BRANCHES = 3
#: A branch before the last ends at a clause or sentence break (the lead's
#: separator takes its place) and may not end the line, so that the answer
#: reaches its last branch; the last one runs to the line's end.
BRANCH_STOPS = ("，", "；", "。", "！", "？")
#: What a branch may not begin with after its marker: a break there would
#: leave the branch empty (因为有；因为有；因为有；), which is no branch.
BRANCH_BREAKS = BRANCH_STOPS + ("、", "…", "：", STOP)
#: What the ``"device"`` lead puts between the branches it begins, in place
#: of the model's clause break: the semicolon that sets out parallel clauses
#: (我爱春天的花；我爱夏天的雨；…). Chosen on dev requests against keeping
#: the model's own break (``docs/generation.md``).
LEAD_SEPARATOR = "；"


@dataclass(frozen=True)
class Lead:
    """What begins an answer: ``texts`` open the answer, one per candidate
    in turn; ``marker`` opens each of the first ``branches`` clauses, and
    ``separator`` (when set) replaces the clause break before each marker."""

    texts: Tuple[str, ...] = ("",)
    marker: str = ""
    branches: int = 0
    separator: str = ""


def join_sentences(sentences: Sequence[str]) -> str:
    """Context sentences on one line: joined directly after final
    punctuation, with a space otherwise (CMDAG lyrics lines have none)."""
    out = ""
    for s in (s.strip() for s in sentences if s and s.strip()):
        out += (" " if out and out[-1] not in "。！？!?…”’」』）)" else "") + s
    return out


def _item(r: RGRecord, with_target: bool) -> Dict[str, Optional[str]]:
    return {
        "context": join_sentences(r.previous_sentences),
        "rhetoric_zh": COARSE_ZH[r.rhetoric],
        "object_role_zh": COMPONENT_ZH[REQUEST_OBJECT[r.rhetoric]],
        "object": r.object.strip(),
        "target": r.target.strip() if with_target else None,
    }


def render_rg_completion(
    rhetoric: str,
    object: str,
    previous_sentences: Sequence[str] = (),
    shots: Sequence[RGRecord] = (),
) -> str:
    """The few-shot completion prompt: the shots solved, then the request
    with ``句子：`` left open. Raises ``ValueError`` for a device outside
    ``RG_DEVICES`` or an empty object."""
    if rhetoric not in REQUEST_OBJECT:
        raise ValueError(Errors.R001.format(devices=RG_DEVICES, value=rhetoric))
    if not object or not object.strip():
        raise ValueError(Errors.R002)
    request = RGRecord(rhetoric, object, "", list(previous_sentences))
    items = [_item(s, True) for s in shots] + [_item(request, False)]
    return template_environment().get_template(TEMPLATE).render(items=items).rstrip("\n")


def make_lead(rhetoric: str, object: str, lead: str) -> Lead:
    """The :class:`Lead` of a request. ``"none"``: nothing is begun.
    ``"device"``: a metaphor's answers begin with its tenor and each of
    :data:`LEAD_COMPARATORS` in turn; a personification's with its object
    and each of :data:`LEAD_PERSONIFICATION` in turn; a parallelism's first
    :data:`LEAD_BRANCHES` clauses begin with its marker, set apart by
    :data:`LEAD_SEPARATOR`; hyperbole is not begun.
    Raises ``ValueError`` for another lead."""
    if lead not in LEADS:
        raise ValueError(Errors.R018.format(leads=LEADS, value=lead))
    obj = object.strip()
    if lead == "none" or not obj:
        return Lead()
    if rhetoric in LEAD_WORDS:
        return Lead(tuple(obj + w for w in LEAD_WORDS[rhetoric]))
    if rhetoric == "parallelism":
        return Lead(marker=obj, branches=LEAD_BRANCHES, separator=LEAD_SEPARATOR)
    return Lead()


def completion_target(record: RGRecord) -> str:
    """The fine-tuning answer for a completion prompt: target + line break."""
    return record.target.strip() + STOP


def parse_completion(text: str) -> ParsedAnswer:
    """The sentence a base LM wrote after ``句子：``: the text before the
    first line break, stripped. Empty → failure (``error`` set); the raw
    text is always kept. Nothing else is repaired or guessed."""
    raw = text if isinstance(text, str) else ""
    line = raw.split(STOP, 1)[0].strip()
    if line.startswith(ANSWER_PREFIX):
        line = line[len(ANSWER_PREFIX) :].strip()
    if not line:
        return ParsedAnswer(None, raw, error="empty answer")
    return ParsedAnswer(line, raw)


@lru_cache(maxsize=None)
def builtin_shots() -> List[RGRecord]:
    """The project's own example items (three per RG device)."""
    ref = resources.files("spacy_rhetoric") / "prompts" / BUILTIN_SHOTS
    with resources.as_file(ref) as path:
        return list(read_jsonl(path))


def select_shots(
    records: Sequence[RGRecord],
    rhetoric: str,
    n: int,
    *,
    seed: int = 0,
    max_target_chars: int = 40,
    max_context_chars: int = 60,
) -> List[RGRecord]:
    """``n`` shots for ``rhetoric``: a seeded random choice among ``records``
    of that device with a target of at most ``max_target_chars`` characters
    and a context of at most ``max_context_chars`` (short shots keep the
    prompt short); topped up from :func:`builtin_shots` when too few
    qualify. The same arguments always give the same shots."""
    pool = [
        r
        for r in records
        if r.rhetoric == rhetoric
        and 0 < len(r.target.strip()) <= max_target_chars
        and "\n" not in r.target
        and len("".join(r.previous_sentences)) <= max_context_chars
    ]
    chosen = random.Random(seed).sample(pool, min(n, len(pool)))
    if len(chosen) < n:
        own = [r for r in builtin_shots() if r.rhetoric == rhetoric]
        chosen.extend(own[: n - len(chosen)])
    return chosen
