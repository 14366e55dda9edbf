"""Redaction of secrets (API keys, tokens) from messages, answers and logs.

One function for every place a secret could leak: the LLM backends' error
messages, ``generate``'s output, the service's answers and its log.

A secret reaches a message in more shapes than its exact value: with the
line break or spaces that an env file or ``$'...\\n'`` left around it, with
that line break escaped (``repr``, JSON, an HTTP library's error message
quoting a header), or URL-encoded. :func:`secret_forms` lists those shapes;
:func:`redact` replaces every one of them, longest first, by ``***``.

Redaction must run on the **whole** text before any truncation: a message cut
first and redacted after keeps every character of a key that straddles the
cut but the last ones, which no longer match.
"""
from __future__ import annotations

import json
import os
import re
from typing import Iterable, List, Optional, Sequence
from urllib.parse import quote

#: Shortest secret value that is redacted (shorter ones would blank out
#: ordinary words of a message).
MIN_SECRET_CHARS = 4
#: Shortest whitespace-separated piece of a secret that is redacted on its own
#: (a value with an inner line break can reach a message one line at a time).
MIN_PIECE_CHARS = 8
#: Names of environment variables whose values count as secrets.
SECRET_NAME = re.compile(r"API_KEY|TOKEN|SECRET|PASSWORD", re.IGNORECASE)
MASK = "***"


def clean_secret(value: Optional[str]) -> Optional[str]:
    """The secret as it must be used: surrounding whitespace (a trailing line
    break, a space) stripped; None for an unset or blank value.

    Raises ValueError (without quoting the value) when whitespace or a control
    character is left inside it: such a value cannot be a key and would break
    or leak through an HTTP header."""
    if value is None:
        return None
    value = value.strip()
    if not value:
        return None
    if any(ch.isspace() or ord(ch) < 32 or ord(ch) == 127 for ch in value):
        raise ValueError("the API key contains whitespace or a control character inside it")
    return value


def secret_forms(value: Optional[str]) -> List[str]:
    """Every shape in which ``value`` may appear in a message, longest first:
    the value, stripped, escaped as ``repr`` and JSON do, URL-encoded, and
    its whitespace-separated pieces of at least :data:`MIN_PIECE_CHARS`.
    Empty for a value shorter than :data:`MIN_SECRET_CHARS` (after stripping)."""
    if not value or len(value.strip()) < MIN_SECRET_CHARS:
        return []
    forms = set()
    for v in {value, value.strip()}:
        forms.update({v, repr(v)[1:-1], json.dumps(v)[1:-1], json.dumps(v, ensure_ascii=False)[1:-1], quote(v, safe="")})
    forms.update(piece for piece in value.split() if len(piece) >= MIN_PIECE_CHARS)
    return sorted((f for f in forms if len(f) >= MIN_SECRET_CHARS), key=len, reverse=True)


def redact(text: str, secrets: Iterable[Optional[str]]) -> str:
    """``text`` with every form (:func:`secret_forms`) of every secret
    replaced by ``***``. Run it before cutting ``text`` to a length."""
    if not text:
        return text
    forms = sorted({f for s in secrets for f in secret_forms(s)}, key=len, reverse=True)
    for form in forms:
        text = text.replace(form, MASK)
    return text


def environment_secrets(extra_names: Sequence[Optional[str]] = ()) -> List[str]:
    """Values of the environment variables named like secrets
    (:data:`SECRET_NAME`) and of ``extra_names`` (e.g. a backend's
    ``api_key_env``), for :func:`redact`."""
    names = {name for name in os.environ if SECRET_NAME.search(name)}
    names.update(n for n in extra_names if n)
    return [v for v in (os.environ.get(n) for n in names) if v]
