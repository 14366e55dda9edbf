"""How grouped parallelism branches are stored on a Doc.

Storage follows spacy-experimental's coreference component, which keeps each
cluster as its own span group ``doc.spans[f"{prefix}_{i}"]``:

- ``doc.spans["parallelism"]``: every branch of every parallelism, label
  ``branch``, sorted by start (the flat view displaCy and scorers use);
- ``doc.spans["parallelism_1"]``, ``["parallelism_2"]``, ...: one group per
  parallelism (1-based, in order of their first branch), its branches in
  document order;
- every branch span's ``id_`` is the key of its group, so the parallelism a
  branch belongs to is recoverable from the span alone;
- each group's ``attrs["kind"]`` says which kind of parallelism it is:
  ``"in_paragraph"`` (branches inside one paragraph, PSE-I's parallelisms,
  found by ``parallelism_linker``; also what a group without the attribute
  is) or ``"cross_paragraph"`` (branches are sentences of different
  paragraphs, the original PSE annotation's ``outPara`` chains, found by
  ``cross_paragraph_linker``). :func:`parallelisms` returns both unless
  asked for one.

All of these survive ``DocBin`` and ``Doc.to_bytes`` round trips. Always write
them with :func:`set_parallelisms` so that the three views cannot disagree.
"""
from __future__ import annotations

import re
from typing import Iterable, List, Optional, Sequence, Tuple

from spacy.tokens import Doc, Span

PARALLELISM_KEY = "parallelism"
BRANCH_LABEL = "branch"
IN_PARAGRAPH = "in_paragraph"
CROSS_PARAGRAPH = "cross_paragraph"
KINDS = (IN_PARAGRAPH, CROSS_PARAGRAPH)

#: A parallelism as token offsets: branches ``(start, end)``, end exclusive.
Offsets = Sequence[Tuple[int, int]]


def _group_pattern(key: str) -> "re.Pattern[str]":
    return re.compile(rf"^{re.escape(key)}_(\d+)$")


def set_parallelisms(
    doc: Doc, parallelisms: Iterable[Offsets], key: str = PARALLELISM_KEY, kinds: Optional[Sequence[str]] = None
) -> None:
    """Write ``parallelisms`` to ``doc`` (replacing any there before).

    parallelisms: each an iterable of ``(start, end)`` token offsets of its
        branches (end exclusive). Parallelisms with fewer than two branches are
        kept as given: deciding whether to drop them is the caller's policy.
    kinds: the kind of each parallelism (:data:`KINDS`), default all
        ``"in_paragraph"``.
    Raises ValueError if a branch is empty or outside the doc, or for an
    unknown kind or a ``kinds`` of another length.
    """
    pattern = _group_pattern(key)
    for old in [k for k in doc.spans if k == key or pattern.match(k)]:
        del doc.spans[old]
    parallelisms = list(parallelisms)
    kinds = [IN_PARAGRAPH] * len(parallelisms) if kinds is None else list(kinds)
    if len(kinds) != len(parallelisms) or any(k not in KINDS for k in kinds):
        raise ValueError(f"kinds must give one of {KINDS} per parallelism; got {kinds!r} for {len(parallelisms)}")
    groups = [(sorted(set(map(tuple, p))), kind) for p, kind in zip(parallelisms, kinds)]
    groups = [g for g in groups if g[0]]
    groups.sort(key=lambda g: g[0][0])
    flat: List[Span] = []
    for i, (branches, kind) in enumerate(groups, start=1):
        group_key = f"{key}_{i}"
        spans = []
        for start, end in branches:
            if not 0 <= start < end <= len(doc):
                raise ValueError(
                    f"Branch ({start}, {end}) is empty or outside the doc of {len(doc)} tokens."
                )
            spans.append(Span(doc, start, end, label=BRANCH_LABEL, span_id=group_key))
        doc.spans[group_key] = spans
        doc.spans[group_key].attrs["kind"] = kind
        flat.extend(spans)
    flat.sort(key=lambda s: (s.start, s.end))
    doc.spans[key] = flat


def _group_keys(doc: Doc, key: str, kind: Optional[str]) -> List[str]:
    pattern = _group_pattern(key)
    keys = sorted((k for k in doc.spans if pattern.match(k)), key=lambda k: int(pattern.match(k).group(1)))
    return [k for k in keys if kind is None or parallelism_kind(doc, k) == kind]


def parallelism_kind(doc: Doc, group_key: str) -> str:
    """The kind of the group ``doc.spans[group_key]`` (``"in_paragraph"`` when unmarked)."""
    return doc.spans[group_key].attrs.get("kind", IN_PARAGRAPH)


def parallelisms(doc: Doc, key: str = PARALLELISM_KEY, kind: Optional[str] = None) -> List[Tuple[Span, ...]]:
    """The parallelisms of ``doc``, each a tuple of its branch Spans in
    document order; the list is ordered by each parallelism's first branch.
    ``kind``: only ``"in_paragraph"`` or only ``"cross_paragraph"`` ones
    (default both).

    Returns an empty list when the doc has no parallelism annotation.
    """
    result = [tuple(sorted(doc.spans[k], key=lambda s: s.start)) for k in _group_keys(doc, key, kind)]
    return [p for p in result if p]


def parallelism_groups(doc: Doc, key: str = PARALLELISM_KEY) -> List[Tuple[str, Tuple[Span, ...]]]:
    """``(kind, branches)`` of every parallelism, in the order of :func:`parallelisms`."""
    out = []
    for k in _group_keys(doc, key, None):
        spans = tuple(sorted(doc.spans[k], key=lambda s: s.start))
        if spans:
            out.append((parallelism_kind(doc, k), spans))
    return out


def parallelism_offsets(doc: Doc, key: str = PARALLELISM_KEY, kind: Optional[str] = None) -> List[List[Tuple[int, int]]]:
    """Like :func:`parallelisms` but as ``(start, end)`` token offsets."""
    return [[(s.start, s.end) for s in group] for group in parallelisms(doc, key, kind)]
