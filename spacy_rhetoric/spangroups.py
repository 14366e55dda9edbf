"""How grouped parallelism branches are stored on a Doc.

Storage follows spacy-experimental's coreference component, which keeps each
cluster as its own span group ``doc.spans[f"{prefix}_{i}"]``:

- ``doc.spans["parallelism"]``: every branch of every parallelism, label
  ``branch``, sorted by start (the flat view displaCy and scorers use);
- ``doc.spans["parallelism_1"]``, ``["parallelism_2"]``, ...: one group per
  parallelism (1-based, in order of their first branch), its branches in
  document order;
- every branch span's ``id_`` is the key of its group, so the parallelism a
  branch belongs to is recoverable from the span alone.

All of these survive ``DocBin`` and ``Doc.to_bytes`` round trips. Always write
them with :func:`set_parallelisms` so that the three views cannot disagree.
"""
from __future__ import annotations

import re
from typing import Iterable, List, Sequence, Tuple

from spacy.tokens import Doc, Span

PARALLELISM_KEY = "parallelism"
BRANCH_LABEL = "branch"

#: A parallelism as token offsets: branches ``(start, end)``, end exclusive.
Offsets = Sequence[Tuple[int, int]]


def _group_pattern(key: str) -> "re.Pattern[str]":
    return re.compile(rf"^{re.escape(key)}_(\d+)$")


def set_parallelisms(doc: Doc, parallelisms: Iterable[Offsets], key: str = PARALLELISM_KEY) -> None:
    """Write ``parallelisms`` to ``doc`` (replacing any there before).

    parallelisms: each an iterable of ``(start, end)`` token offsets of its
        branches (end exclusive). Parallelisms with fewer than two branches are
        kept as given: deciding whether to drop them is the caller's policy.
    Raises ValueError if a branch is empty or outside the doc.
    """
    pattern = _group_pattern(key)
    for old in [k for k in doc.spans if k == key or pattern.match(k)]:
        del doc.spans[old]
    groups = [sorted(set(map(tuple, p))) for p in parallelisms]
    groups = [g for g in groups if g]
    groups.sort(key=lambda g: g[0])
    flat: List[Span] = []
    for i, branches in enumerate(groups, start=1):
        group_key = f"{key}_{i}"
        spans = []
        for start, end in branches:
            if not 0 <= start < end <= len(doc):
                raise ValueError(
                    f"Branch ({start}, {end}) is empty or outside the doc of {len(doc)} tokens."
                )
            spans.append(Span(doc, start, end, label=BRANCH_LABEL, span_id=group_key))
        doc.spans[group_key] = spans
        flat.extend(spans)
    flat.sort(key=lambda s: (s.start, s.end))
    doc.spans[key] = flat


def parallelisms(doc: Doc, key: str = PARALLELISM_KEY) -> List[Tuple[Span, ...]]:
    """The parallelisms of ``doc``, each a tuple of its branch Spans in
    document order; the list is ordered by each parallelism's first branch.

    Returns an empty list when the doc has no parallelism annotation.
    """
    pattern = _group_pattern(key)
    keys = sorted(
        (k for k in doc.spans if pattern.match(k)),
        key=lambda k: int(pattern.match(k).group(1)),
    )
    result = [tuple(sorted(doc.spans[k], key=lambda s: s.start)) for k in keys]
    return [p for p in result if p]


def parallelism_offsets(doc: Doc, key: str = PARALLELISM_KEY) -> List[List[Tuple[int, int]]]:
    """Like :func:`parallelisms` but as ``(start, end)`` token offsets."""
    return [[(s.start, s.end) for s in group] for group in parallelisms(doc, key)]
