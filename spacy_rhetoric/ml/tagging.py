"""Tagging schemes for rhetorical parallelism detection (RPD).

Source: Bothwell et al. 2023, "Introducing Rhetorical Parallelism Detection",
§6.1 (tag sets and links) and Fig. 4. A parallelism is a set of >= 2
non-overlapping branches; each word gets one tag:

- ``B`` first word of a branch. The first branch of a parallelism carries no
  link (tag ``"B"``); every later branch carries a link to the previous branch
  of the same parallelism, written ``"B:<link>"`` with a negative integer:
  * token distance (``link="token"``): ``prev_end_inclusive - start``, the
    (negative) number of word hops from this branch's first word back to the
    previous branch's last word;
  * branch distance (``link="branch"``): the (negative) number of branches,
    counted over all branches of the document in order, back to the previous
    branch of the same parallelism.
- ``I`` inside a branch, ``O`` outside any branch.
- ``M`` (tag sets with M) replaces ``O`` between consecutive branches of one
  parallelism; ``E`` (with E) replaces the final ``I`` of a branch (a one-word
  branch stays ``B``); ``J`` (with J) replaces ``I`` in non-initial branches.
  ``E`` wins over ``J`` on a branch's final word.

Decoding is tag-set agnostic (``M`` reads as ``O``; ``J`` and ``E`` as
continuations) and total: every tag sequence decodes. Ill-formed input is
resolved as documented in :func:`decode`.

Offsets are token offsets ``(start, end)`` with ``end`` exclusive, as in
:mod:`spacy_rhetoric.spangroups`.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy

from ..errors import Errors

TAGSETS: Tuple[str, ...] = ("BIO", "BIOE", "BIOJ", "BIOM", "BIOJE", "BIOME", "BIOMJ", "BIOMJE")
LINK_TYPES: Tuple[str, ...] = ("token", "branch")
#: Tag types; ``L`` is the internal name of a linked ``B`` (a non-initial branch start).
TAG_TYPES: Tuple[str, ...] = ("O", "M", "B", "L", "I", "J", "E")

Branch = Tuple[int, int]
Parallelism = List[Branch]


def _check_scheme(tagset: str, link: str) -> None:
    if tagset not in TAGSETS:
        raise ValueError(Errors.R107.format(tagset=tagset, tagsets=", ".join(TAGSETS)))
    if link not in LINK_TYPES:
        raise ValueError(Errors.R108.format(link=link, links=", ".join(LINK_TYPES)))


def parse_tag(tag: str) -> Tuple[str, Optional[int]]:
    """Split a tag string into ``(type, link)``; ``type`` in :data:`TAG_TYPES`.

    ``"B:-3"`` -> ``("L", -3)``; ``"B"`` -> ``("B", None)``; ``"I"`` -> ``("I", None)``.
    Raises ValueError for any other string.
    """
    if tag in ("O", "M", "B", "I", "J", "E"):
        return tag, None
    if tag.startswith("B:"):
        try:
            return "L", int(tag[2:])
        except ValueError:
            pass
    raise ValueError(f"Not a parallelism tag: {tag!r}")


def _normalise(parallelisms: Iterable[Iterable[Branch]], n_words: int) -> List[Parallelism]:
    groups = [sorted((int(s), int(e)) for s, e in p) for p in parallelisms]
    groups = [g for g in groups if g]
    groups.sort()
    seen = numpy.zeros(n_words, dtype=bool)
    for group in groups:
        for start, end in group:
            if not 0 <= start < end <= n_words:
                raise ValueError(f"Branch ({start}, {end}) is empty or outside a text of {n_words} words.")
            if seen[start:end].any():
                raise ValueError(f"Branch ({start}, {end}) overlaps another branch; RPD tags need flat, non-overlapping branches.")
            seen[start:end] = True
    return groups


def encode(
    parallelisms: Iterable[Iterable[Branch]], n_words: int, tagset: str = "BIOMJ", link: str = "token"
) -> List[str]:
    """Tag a text of ``n_words`` words with its parallelisms (§6.1).

    parallelisms: each an iterable of ``(start, end)`` branches (end exclusive).
    Returns a list of ``n_words`` tag strings.
    Raises ValueError for an unknown scheme, a branch outside the text, or
    overlapping branches (one stratum is flat). A parallelism with a single
    branch is encoded as given (a lone unlinked ``B`` run); :func:`decode`
    drops it again.
    """
    _check_scheme(tagset, link)
    groups = _normalise(parallelisms, n_words)
    tags = ["O"] * n_words
    order = {b: i for i, b in enumerate(sorted(b for g in groups for b in g))}
    use_m, use_j, use_e = "M" in tagset, "J" in tagset, "E" in tagset
    for group in groups:
        for k, (start, end) in enumerate(group):
            if k == 0:
                tags[start] = "B"
            else:
                prev = group[k - 1]
                dist = (prev[1] - 1 - start) if link == "token" else (order[prev] - order[(start, end)])
                tags[start] = f"B:{dist}"
                if use_m:
                    for i in range(prev[1], start):
                        if tags[i] == "O":
                            tags[i] = "M"
            inner = "J" if (use_j and k > 0) else "I"
            for i in range(start + 1, end):
                tags[i] = inner
            if use_e and end - start > 1:
                tags[end - 1] = "E"
    # M is written over O only; branches of other parallelisms already tagged stay.
    return tags


def decode(tags: Sequence[str], link: str = "token") -> List[Parallelism]:
    """Recover parallelisms from tags of any tag set (inverse of :func:`encode`).

    Returns the parallelisms as sorted lists of ``(start, end)`` branches, the
    list ordered by first branch. Ill-formed sequences decode as follows:

    - ``I``/``J``/``E`` after ``O``/``M`` or at the start (no open branch) opens
      a new, unlinked branch (as conlleval reads a stray ``I``);
    - a ``B`` closes any open branch; ``E`` closes its branch;
    - a dangling link (token distance: no earlier branch ends at
      ``start + link``; branch distance: ``index + link`` is not an earlier
      branch, i.e. a link past the start; or a link ``>= 0``) is dropped: the
      branch starts a new parallelism;
    - a parallelism left with a single branch is dropped (RPD requires >= 2).

    Raises ValueError for an unknown link type or tag string (naming its position).
    """
    if link not in LINK_TYPES:
        raise ValueError(Errors.R108.format(link=link, links=", ".join(LINK_TYPES)))
    branches: List[List[int]] = []  # [start, end, link or None]
    open_branch: Optional[List] = None
    for i, tag in enumerate(tags):
        try:
            typ, value = parse_tag(tag)
        except ValueError as err:
            raise ValueError(f"{err} at position {i}") from None
        if typ in ("B", "L"):
            open_branch = [i, i + 1, value]
            branches.append(open_branch)
        elif typ in ("I", "J", "E"):
            if open_branch is None:
                open_branch = [i, i + 1, None]
                branches.append(open_branch)
            open_branch[1] = i + 1
            if typ == "E":
                open_branch = None
        else:
            open_branch = None
    by_last_word: Dict[int, int] = {}
    group_of: List[int] = []
    n_groups = 0
    for k, (start, end, value) in enumerate(branches):
        target = None
        if value is not None and value < 0:
            if link == "token":
                target = by_last_word.get(start + value)
            elif k + value >= 0:
                target = k + value
        if target is None:
            group_of.append(n_groups)
            n_groups += 1
        else:
            group_of.append(group_of[target])
        by_last_word[end - 1] = k
    grouped: Dict[int, Parallelism] = {}
    for (start, end, _), g in zip(branches, group_of):
        grouped.setdefault(g, []).append((start, end))
    result = [sorted(p) for p in grouped.values() if len(p) >= 2]
    result.sort()
    return result


@dataclass(frozen=True)
class TagScheme:
    """One of the 16 RPD tagging schemes: a tag set × a link type (§6.1)."""

    tagset: str = "BIOMJ"
    link: str = "token"

    def __post_init__(self) -> None:
        _check_scheme(self.tagset, self.link)

    def encode(self, parallelisms: Iterable[Iterable[Branch]], n_words: int) -> List[str]:
        """See :func:`encode`."""
        return encode(parallelisms, n_words, self.tagset, self.link)

    def decode(self, tags: Sequence[str]) -> List[Parallelism]:
        """See :func:`decode`."""
        return decode(tags, self.link)

    def allowed_type_bigrams(self) -> Tuple[set, set, set]:
        """The tag-type transitions this scheme can produce.

        Returns ``(starts, bigrams, ends)``: the types that may open a text,
        the ``(prev, next)`` type pairs, and the types that may close a text,
        over :data:`TAG_TYPES`. Derived from the encoding rules: ``I``/``J``
        before ``E`` must continue; with ``J``, ``I`` only occurs in initial
        branches and ``J`` only in later ones; with ``M``, an initial branch is
        followed by ``M`` or a branch start, never ``O``, and ``M`` only sits
        between a branch end and a branch start (§6.1, Fig. 5).
        """
        use_m, use_j, use_e = "M" in self.tagset, "J" in self.tagset, "E" in self.tagset
        types = ["O", "B", "L", "I"] + (["M"] if use_m else []) + (["J"] if use_j else []) + (["E"] if use_e else [])
        cont_initial = ["I"] + (["E"] if use_e else [])
        cont_later = (["J"] if use_j else ["I"]) + (["E"] if use_e else [])
        cont: Dict[str, List[str]] = {
            "B": cont_initial,
            "L": cont_later,
            "I": (["I", "E"] if use_e else ["I"]),
            "J": (["J", "E"] if use_e else ["J"]),
            "E": [],
            "O": [],
            "M": [],
        }
        # May a branch end on this type? (E schemes end multi-word branches on E.)
        can_end = {"B": True, "L": True, "E": True, "I": not use_e, "J": not use_e, "O": False, "M": False}
        # Types that end an initial branch for sure (so no O may follow with M).
        initial_only = {"B"} | ({"I"} if use_j else set())
        bigrams = set()
        for prev in types:
            nexts = set(cont[prev])
            if prev in ("O", "M"):
                nexts |= {"B", "L"} if (prev == "M" or not use_m) else {"B"}
                nexts |= {prev}
            elif can_end[prev]:
                nexts |= {"B", "L"}
                if use_m:
                    nexts.add("M")
                if not (use_m and prev in initial_only):
                    nexts.add("O")
            bigrams |= {(prev, n) for n in nexts if n in types}
        starts = {"O", "B"}
        ends = {t for t in types if can_end[t] and t not in initial_only} | {"O"}
        return starts, bigrams, ends

    def transition_mask(self, labels: Sequence[str]) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
        """Boolean masks of allowed transitions over ``labels`` (tag strings).

        Returns ``(start, trans, end)``: Bools1d (n_tags,), Bools2d
        (n_tags, n_tags) with ``trans[i, j]`` = may tag j follow tag i, and
        Bools1d (n_tags,). Raises ValueError for a label that is not a tag.
        """
        starts, bigrams, ends = self.allowed_type_bigrams()
        types = [parse_tag(t)[0] for t in labels]
        start = numpy.array([t in starts for t in types], dtype=bool)
        end = numpy.array([t in ends for t in types], dtype=bool)
        trans = numpy.array([[(a, b) in bigrams for b in types] for a in types], dtype=bool)
        return start, trans, end
