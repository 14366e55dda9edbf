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

from dataclasses import dataclass, field, fields
from typing import Any, ClassVar, Dict, List, Optional, Protocol, Sequence, Tuple, runtime_checkable

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


#: Field types whose values a saved ``cfg`` holds as plain JSON numbers and booleans.
_CASTS = {"int": int, "float": float, "bool": bool, int: int, float: float, bool: bool}


class SettingsBlock:
    """A dataclass of ``rhetoric_generator`` settings (the ``task``,
    ``sampling`` and ``verifier`` blocks) that the component keeps flat in
    its ``cfg``: :meth:`from_cfg` rebuilds the block from those settings
    (missing ones take the dataclass defaults), :attr:`cfg` gives them back
    as JSON values (``int``, ``float`` and ``bool`` fields cast, dicts
    copied). Fields named in ``UNSAVED`` (objects rebuilt from config, such
    as a reranker) are neither read nor saved."""

    UNSAVED: ClassVar[Tuple[str, ...]] = ()

    @classmethod
    def from_cfg(cls, cfg: Dict[str, Any], **unsaved: Any) -> Any:
        """The block of a component's settings; ``unsaved`` gives the
        ``UNSAVED`` fields."""
        saved = {f.name: cfg[f.name] for f in fields(cls) if f.name not in cls.UNSAVED and f.name in cfg}
        return cls(**saved, **unsaved)

    @property
    def cfg(self) -> Dict[str, Any]:
        """The settings, as the component saves them."""
        out = {}
        for f in fields(self):
            if f.name in self.UNSAVED:
                continue
            value = getattr(self, f.name)
            cast = _CASTS.get(f.type)
            out[f.name] = cast(value) if cast else dict(value) if isinstance(value, dict) else value
        return out
