"""Loading a pipeline to analyse with: an installed package, a pipeline
folder, or the rule baseline (``"rules"``). Every command and service that
runs a pipeline loads it here; assembling and packaging trained components
is :mod:`spacy_rhetoric.packaging`'s.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, Dict, Optional, Union

import spacy
from spacy.language import Language


#: ``load_pipeline("rules")``: the rule baseline (blank ``zh`` + ``rhetoric_simile_rules``).
RULES = "rules"


def load_pipeline(model: Union[str, Path], config: Optional[Dict[str, Any]] = None) -> Language:
    """``spacy.load(model, config=config)`` (an installed package or a
    pipeline folder; ``config``: overrides as a nested dict), or the rule
    baseline for ``"rules"``. Raises OSError with a hint when ``model`` is
    neither."""
    if str(model) == RULES:
        nlp = spacy.blank("zh")
        nlp.add_pipe("rhetoric_simile_rules")
        return nlp
    try:
        return spacy.load(model, config=config or {})
    except OSError as err:
        raise OSError(
            f"cannot load pipeline {str(model)!r}: not an installed package or a pipeline folder "
            "(build one with `spacy project run train`, or pass --model PATH)"
        ) from err
