"""How ``rhetoric_generator`` draws its candidates: the ``sampling`` block.

Registered as ``spacy_rhetoric.GenerationSampling.v1`` in ``registry.misc``::

    [components.rhetoric_generator.sampling]
    @misc = "spacy_rhetoric.GenerationSampling.v1"
    n_candidates = 8
    temperature = 0.8
    max_new_tokens = 64

The settings every backend takes per call live here; those a backend
implements in its own way (``top_p``, ``repetition_penalty`` and ``seed``
of ``spacy_rhetoric.Transformers.v1``, ``extra_body`` of
``spacy_rhetoric.OpenAICompatible.v1``) stay in the ``model`` block.
"""
from __future__ import annotations

from dataclasses import dataclass

from spacy.util import registry

from ..errors import Errors
from .base import SettingsBlock


@dataclass
class Sampling(SettingsBlock):
    """n_candidates: candidates drawn per request (identical generations
        are merged, so fewer may come back).
    temperature: 0 = greedy / deterministic; passed to the backend.
    max_new_tokens: most tokens of one answer; passed to the backend.
    time_budget: seconds per request for drawing candidates (0 = none):
        candidates are drawn in rounds of ``round_size`` (0 = all
        ``n_candidates`` in one round) and no new round starts once the
        budget is spent.

    Raises ``ValueError`` (R007) for ``n_candidates`` or ``max_new_tokens``
    below 1, or a negative ``temperature``, ``time_budget`` or ``round_size``.
    """

    n_candidates: int = 3
    temperature: float = 0.7
    max_new_tokens: int = 96
    time_budget: float = 0.0
    round_size: int = 0

    def __post_init__(self) -> None:
        for name, minimum in (("n_candidates", 1), ("max_new_tokens", 1), ("temperature", 0), ("time_budget", 0),
                              ("round_size", 0)):
            if getattr(self, name) < minimum:
                raise ValueError(Errors.R007.format(name=name, minimum=minimum, value=getattr(self, name)))



@registry.misc("spacy_rhetoric.GenerationSampling.v1")
def make_sampling(
    n_candidates: int = 3,
    temperature: float = 0.7,
    max_new_tokens: int = 96,
    time_budget: float = 0.0,
    round_size: int = 0,
) -> Sampling:
    """The ``sampling`` block of ``rhetoric_generator`` (see :class:`Sampling`)."""
    return Sampling(n_candidates, temperature, max_new_tokens, time_budget, round_size)
