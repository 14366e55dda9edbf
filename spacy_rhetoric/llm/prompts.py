"""Prompts for rhetorical generation (CERD task RG) and parsing of answers.

The templates live in ``spacy_rhetoric/prompts/*.jinja2`` and follow the
structure of CERD's RG prompt (Liu et al. 2024, ``papers/000``, §3.2 and
Appendix D, Figure 13): the four coarse device types, the requested device
and its object (tenor / personification object / hyperbole object), the at
most k preceding sentences, and a JSON answer ``{"generation": "..."}``. The
wording is the project's own. The same prompt is used for inference and for
fine-tuning, as in CERD.

Parsing is strict with exactly one repair step (see :func:`parse_generation`);
an answer that does not parse is returned as a failure with its raw text.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from typing import List, Optional, Sequence

import jinja2

from ..errors import Errors
from ..taxonomy import COARSE_ZH, COMPONENT_ZH, REQUEST_OBJECT
from .base import Message

#: Prompt language -> template file in ``spacy_rhetoric/prompts``.
RG_TEMPLATES = {"zh": "rg_zh.jinja2", "en": "rg_en.jinja2"}
#: Coarse devices RG can ask for (CERD excludes parallelism and literal).
RG_DEVICES = tuple(REQUEST_OBJECT)
ANSWER_FIELD = "generation"


@lru_cache(maxsize=None)
def template_environment() -> jinja2.Environment:
    """The one Jinja environment of every prompt template in
    ``spacy_rhetoric/prompts`` (RG, completion and judge prompts)."""
    return jinja2.Environment(
        loader=jinja2.PackageLoader("spacy_rhetoric", "prompts"),
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )


def render_rg_prompt(
    rhetoric: str,
    object: str,
    previous_sentences: Sequence[str] = (),
    *,
    language: str = "zh",
    original: Optional[str] = None,
) -> str:
    """Render the RG prompt.

    rhetoric: a coarse device in ``RG_DEVICES`` (metaphor, personification,
        hyperbole). object: the required tenor / personification object /
        hyperbole object (non-empty). previous_sentences: the preceding
        context, oldest first (may be empty). original: an optional sentence
        to rewrite (not part of CERD's prompt; used for rewrite suggestions).
    Raises ``ValueError`` for an unknown device or language or an empty object.
    """
    if rhetoric not in REQUEST_OBJECT:
        raise ValueError(Errors.R001.format(devices=RG_DEVICES, value=rhetoric))
    if language not in RG_TEMPLATES:
        raise ValueError(Errors.R008.format(languages=sorted(RG_TEMPLATES), value=language))
    if not object or not object.strip():
        raise ValueError(Errors.R002)
    role = REQUEST_OBJECT[rhetoric]
    template = template_environment().get_template(RG_TEMPLATES[language])
    return template.render(
        rhetoric=rhetoric,
        rhetoric_zh=COARSE_ZH[rhetoric],
        object_role=role.replace("_", " "),
        object_role_zh=COMPONENT_ZH[role],
        object=object.strip(),
        previous_sentences=[s.strip() for s in previous_sentences if s and s.strip()],
        original=original.strip() if original else None,
    ).strip()


def rg_messages(
    rhetoric: str,
    object: str,
    previous_sentences: Sequence[str] = (),
    *,
    language: str = "zh",
    original: Optional[str] = None,
) -> List[Message]:
    """The RG prompt as a one-turn chat conversation (a single user message)."""
    prompt = render_rg_prompt(rhetoric, object, previous_sentences, language=language, original=original)
    return [{"role": "user", "content": prompt}]


def format_answer(generation: str) -> str:
    """The target answer text for fine-tuning: ``{"generation": "..."}``
    (compact JSON, Chinese characters unescaped)."""
    return json.dumps({ANSWER_FIELD: generation}, ensure_ascii=False)


@dataclass
class ParsedAnswer:
    """Result of parsing one model answer.

    generation: the sentence, or None on failure. raw: the unmodified answer.
    error: why parsing failed (None on success). repaired: True when the
    repair step (JSON object cut out of surrounding text) was needed.
    """

    generation: Optional[str]
    raw: str
    error: Optional[str] = None
    repaired: bool = False

    @property
    def ok(self) -> bool:
        return self.error is None


def _load_generation(text: str) -> str:
    """Strict reading: ``text`` must be a JSON object with a non-empty string
    field ``generation``. Raises ``ValueError`` otherwise."""
    value = json.loads(text)
    if not isinstance(value, dict):
        raise ValueError(f"answer is JSON {type(value).__name__}, not an object")
    generation = value.get(ANSWER_FIELD)
    if not isinstance(generation, str):
        raise ValueError(f'answer has no string field "{ANSWER_FIELD}"')
    if not generation.strip():
        raise ValueError(f'field "{ANSWER_FIELD}" is empty')
    return generation.strip()


def _first_json_object(text: str) -> Optional[str]:
    """The first balanced ``{...}`` substring of ``text`` (braces inside JSON
    strings respected), or None."""
    start = text.find("{")
    while start != -1:
        depth, in_string, escaped = 0, False, False
        for i in range(start, len(text)):
            ch = text[i]
            if in_string:
                if escaped:
                    escaped = False
                elif ch == "\\":
                    escaped = True
                elif ch == '"':
                    in_string = False
            elif ch == '"':
                in_string = True
            elif ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
                if depth == 0:
                    return text[start : i + 1]
        start = text.find("{", start + 1)
    return None


def parse_generation(text: str) -> ParsedAnswer:
    """Parse an RG answer.

    1. Strict: the whole answer (whitespace stripped) is a JSON object with a
       non-empty string ``generation``.
    2. One repair step: the first balanced ``{...}`` inside the answer (e.g.
       wrapped in a Markdown code fence or preceded by a remark) is parsed
       strictly in the same way.
    Anything else is a failure: ``generation`` None, ``error`` set, ``raw``
    the answer as received. Nothing is ever guessed from free text.
    """
    raw = text if isinstance(text, str) else ""
    if not raw.strip():
        return ParsedAnswer(None, raw, error="empty answer")
    try:
        return ParsedAnswer(_load_generation(raw.strip()), raw)
    except ValueError as err:
        strict_error = str(err)
    candidate = _first_json_object(raw)
    if candidate is not None and candidate != raw.strip():
        try:
            return ParsedAnswer(_load_generation(candidate), raw, repaired=True)
        except ValueError as err:
            return ParsedAnswer(None, raw, error=f"unparseable answer: {err}")
    return ParsedAnswer(None, raw, error=f"unparseable answer: {strict_error}")
