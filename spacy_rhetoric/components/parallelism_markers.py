"""Parallelism markers read off the branches of a parallelism.

The annotation guidelines define the marker by the branches
(``annotations/GUIDELINES.md`` §5.3): "the word or phrase repeated in
**every** item. Start at the first word that all items share and extend it
as long as it stays identical in all items", one span per occurrence. Given
the branches the linkers found, that definition is a decoder: this module
applies it to the doc's words, so the marker is as good as the branches and
the word segmentation.

Words are compared by their text. Structural particles (的, 地, 得, 了, 着,
过) and punctuation never start a marker: they attach to the word before
them and are shared by almost any two Chinese clauses, so "the first shared
word" would otherwise be 的 in most parallelisms without a repeated word.
"""
from __future__ import annotations

from typing import Iterable, List, Optional, Sequence, Tuple

from spacy.tokens import Doc, Span

from ..spangroups import KINDS, parallelisms

#: Particles that attach to the word before them (never a marker's first word).
ATTACHED_PARTICLES = frozenset("的地得了着过")


def _words(branch: Span) -> List[str]:
    return [t.text for t in branch]


def _can_start(token) -> bool:
    return not (token.is_punct or token.is_space or token.text in ATTACHED_PARTICLES)


def _find(words: Sequence[str], run: Sequence[str]) -> int:
    """Index of the first occurrence of ``run`` in ``words``, or -1."""
    n = len(run)
    for i in range(len(words) - n + 1):
        if list(words[i : i + n]) == list(run):
            return i
    return -1


def shared_marker(branches: Sequence[Span]) -> Optional[List[Tuple[int, int]]]:
    """The marker of one parallelism, by the guidelines' definition (§5.3).

    branches: the parallelism's branches, in document order (two or more).
    Returns one ``(start, end)`` doc token offset per branch (the first
    occurrence of the marker in it), or None when the branches share no
    word that may start a marker. The marker starts at the first word of
    the first branch that every branch contains and is extended word by
    word while every branch still contains the longer run; it never takes
    in punctuation or whitespace.
    """
    if len(branches) < 2:
        return None
    first = branches[0]
    words = [_words(b) for b in branches]
    for i, token in enumerate(first):
        if not _can_start(token) or any(_find(o, words[0][i : i + 1]) < 0 for o in words[1:]):
            continue
        end = i + 1
        while end < len(first) and not (first[end].is_punct or first[end].is_space):
            if any(_find(o, words[0][i : end + 1]) < 0 for o in words[1:]):
                break
            end += 1
        run = words[0][i:end]
        starts = [b.start + _find(w, run) for b, w in zip(branches, words)]
        return [(start, start + len(run)) for start in starts]
    return None


def marker_spans(doc: Doc, kinds: Iterable[str] = KINDS, label: str = "parallelism_marker") -> List[Span]:
    """Marker spans (label ``label``) of every parallelism of ``kinds`` in
    ``doc`` (the groups :func:`spacy_rhetoric.spangroups.parallelisms`
    reads), one per branch that holds the marker, sorted by start."""
    spans = set()
    for kind in kinds:
        for branches in parallelisms(doc, kind=kind):
            for start, end in shared_marker(branches) or ():
                spans.add((start, end))
    return [Span(doc, start, end, label=label) for start, end in sorted(spans)]
