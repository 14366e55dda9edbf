"""Helpers shared by the evaluation drivers and the studies: one pipeline
component run over docs, the reference docs of a DocBin, and the grid of
thresholds the tuning tries.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any, List, Optional

from spacy.language import Language
from spacy.tokens import Doc, DocBin

#: Thresholds tried by the tuning (raw path and gold units): 0.10 ... 0.80.
THRESHOLD_GRID = tuple(round(0.1 + 0.05 * i, 2) for i in range(15))


def apply_component(proc: Any, docs: List[Doc], batch_size: Optional[int] = None) -> List[Doc]:
    """Run one pipeline component over ``docs``; rule-based components
    without ``pipe`` (``clause_segmenter``) are called doc by doc."""
    if hasattr(proc, "pipe"):
        return list(proc.pipe(docs) if batch_size is None else proc.pipe(docs, batch_size=batch_size))
    return [proc(d) for d in docs]


def read_references(data: Path, nlp: Language, limit: int = 0) -> List[Doc]:
    """Non-empty reference docs of a DocBin (at most ``limit`` if > 0).
    Raises ValueError naming the file when it has no docs."""
    docs = [d for d in DocBin().from_disk(data).get_docs(nlp.vocab) if len(d)]
    if limit:
        docs = docs[:limit]
    if not docs:
        raise ValueError(f"{data}: no non-empty docs")
    return docs
