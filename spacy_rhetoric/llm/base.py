"""The one small interface every LLM backend implements.

Backends are registered in the ``llm_backends`` registry (``@llm_backends`` in
a config block), e.g. ``spacy_rhetoric.OpenAICompatible.v1`` and
``spacy_rhetoric.Transformers.v1``. Generation code and judges depend only on
:class:`LLMBackend`, never on a concrete backend. Tasks (what is asked of a
backend and how its answers are read, :mod:`spacy_rhetoric.llm.tasks`) are
registered in the ``llm_tasks`` registry (``@llm_tasks``), the registry
spacy-llm gives its tasks.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import List, Optional, Protocol, Sequence, runtime_checkable

import catalogue
from spacy.util import registry

#: ``registry.llm_backends``: lets configs choose a backend by name.
if not hasattr(registry, "llm_backends"):
    registry.llm_backends = catalogue.create(  # type: ignore[attr-defined]
        "spacy", "llm_backends", entry_points=True
    )
#: ``registry.llm_tasks``: lets configs choose a task by name (entry points
#: ``spacy_llm_tasks``; the same catalogue namespace as spacy-llm's).
if not hasattr(registry, "llm_tasks"):
    registry.llm_tasks = catalogue.create(  # type: ignore[attr-defined]
        "spacy", "llm_tasks", entry_points=True
    )

#: A chat message: ``{"role": "system"|"user"|"assistant", "content": str}``.
Message = dict


@dataclass
class Completion:
    """One answer of a backend to one conversation.

    text: the raw answer text ("" when the call failed).
    logprob: sum of the answer tokens' log-probabilities (natural log), when
        the backend can report it, else None.
    n_tokens: number of answer tokens, when known.
    error: None on success; otherwise a message saying why no answer came
        (timeout, HTTP status, ...). Never contains an API key.
    """

    text: str
    logprob: Optional[float] = None
    n_tokens: Optional[int] = None
    error: Optional[str] = None
    meta: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.error is None


@runtime_checkable
class LLMBackend(Protocol):
    """A chat model. Implementations must be safe to serialise with their
    config only (no secrets in ``to_config``)."""

    def chat(
        self,
        conversations: Sequence[Sequence[Message]],
        *,
        n: int = 1,
        temperature: float = 0.0,
        max_new_tokens: int = 128,
    ) -> List[List[Completion]]:
        """Answer each conversation ``n`` times.

        Returns a list aligned with ``conversations``, each a list of ``n``
        :class:`Completion`. Failures are returned as completions with
        ``error`` set, never raised for a single conversation; temperature 0
        means deterministic (greedy) decoding.
        """
        ...
