"""``rhetoric serve``: a REST service and a page for teachers
(:mod:`spacy_rhetoric.serve.app`, needs ``pip install 'spacy-rhetoric[serve]'``),
and the renderer shared with the static report
(:mod:`spacy_rhetoric.analysis.render`, no extra dependency)."""
from __future__ import annotations

from typing import Any


def create_app(*args: Any, **kwargs: Any) -> Any:
    """See :func:`spacy_rhetoric.serve.app.create_app` (imported lazily, so
    that the renderer works without FastAPI installed)."""
    from .app import create_app as _create_app

    return _create_app(*args, **kwargs)


def run(*args: Any, **kwargs: Any) -> None:
    """See :func:`spacy_rhetoric.serve.app.run`."""
    from .app import run as _run

    _run(*args, **kwargs)


__all__ = ["create_app", "run"]
