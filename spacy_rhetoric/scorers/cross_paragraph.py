"""Scores of parallelisms across paragraphs (``cross_paragraph_linker``).

Branches are sentences, so each predicted branch is first mapped to the
reference sentence it overlaps by the most characters (a branch that
overlaps none stays itself and matches nothing). Then, per document:

- pairwise links: every unordered pair of branches of one parallelism is a
  link; P = |predicted links that are gold| / |predicted links|, R likewise
  over gold links;
- exact groups: a predicted parallelism is correct when its set of branches
  equals a gold one's; P over predicted groups, R over gold groups.

Counts are summed over documents (micro), with spaCy's ``PRFScore``.
"""
from __future__ import annotations

from itertools import combinations
from typing import Callable, Dict, Hashable, Iterable, List, Optional, Sequence, Set, Tuple

from spacy.scorer import PRFScore
from spacy.training import Example
from spacy.util import registry

from ..spangroups import CROSS_PARAGRAPH, PARALLELISM_KEY, parallelisms

Char = Tuple[int, int]


def to_units(branch: Char, units: Sequence[Char]) -> Char:
    """The unit of ``units`` that ``branch`` overlaps by the most characters
    (``branch`` itself when it overlaps none)."""
    best, best_overlap = branch, 0
    for unit in units:
        overlap = min(branch[1], unit[1]) - max(branch[0], unit[0])
        if overlap > best_overlap:
            best, best_overlap = unit, overlap
    return best


def links(groups: Iterable[Iterable[Hashable]]) -> Set[frozenset]:
    """Unordered pairs of branches that share a group."""
    return {frozenset(p) for g in groups for p in combinations(sorted(set(g)), 2)}


def group_counts(hyp: Sequence[Sequence[Hashable]], ref: Sequence[Sequence[Hashable]]) -> Tuple[PRFScore, PRFScore]:
    """``(link score, exact-group score)`` of one document."""
    link, exact = PRFScore(), PRFScore()
    link.score_set(links(hyp), links(ref))
    exact.score_set({frozenset(g) for g in hyp if len(set(g)) >= 2}, {frozenset(g) for g in ref if len(set(g)) >= 2})
    return link, exact


def score_cross_groups(pairs: Iterable[Tuple[Sequence[Sequence[Hashable]], Sequence[Sequence[Hashable]]]],
                       prefix: str = "cross_paragraph") -> Dict[str, Optional[float]]:
    """``{prefix}_link_p/r/f``, ``{prefix}_group_p/r/f`` and the counts
    ``{prefix}_n_predicted`` / ``_n_gold`` (groups) over ``(hypotheses,
    references)`` pairs of documents, each a list of groups of branch ids."""
    link, exact = PRFScore(), PRFScore()
    n_hyp = n_ref = 0
    for hyp, ref in pairs:
        a, b = group_counts(hyp, ref)
        link += a
        exact += b
        n_hyp += len(hyp)
        n_ref += len(ref)
    return {
        f"{prefix}_link_p": link.precision, f"{prefix}_link_r": link.recall, f"{prefix}_link_f": link.fscore,
        f"{prefix}_group_p": exact.precision, f"{prefix}_group_r": exact.recall, f"{prefix}_group_f": exact.fscore,
        f"{prefix}_n_predicted": n_hyp, f"{prefix}_n_gold": n_ref,
    }


def example_groups(eg: Example, key: str = PARALLELISM_KEY) -> Tuple[List[List[Char]], List[List[Char]]]:
    """Predicted and reference cross-paragraph parallelisms of an Example as
    reference sentence character offsets."""
    units = [(s.start_char, s.end_char) for s in eg.reference.sents] if eg.reference.has_annotation("SENT_START") else []
    ref = [[(b.start_char, b.end_char) for b in g] for g in parallelisms(eg.reference, key, CROSS_PARAGRAPH)]
    ref = [[to_units(b, units) for b in g] for g in ref]
    hyp = [[to_units((b.start_char, b.end_char), units) for b in g] for g in parallelisms(eg.predicted, key, CROSS_PARAGRAPH)]
    return hyp, ref


def score_cross_paragraph(examples: Iterable[Example], *, spans_key: str = PARALLELISM_KEY, **kwargs) -> Dict[str, Optional[float]]:
    """spaCy scorer of ``cross_paragraph_linker`` (module docstring)."""
    return score_cross_groups(example_groups(eg, spans_key) for eg in examples)


@registry.scorers("spacy_rhetoric.cross_paragraph_scorer.v1")
def make_cross_paragraph_scorer() -> Callable[..., Dict[str, Optional[float]]]:
    """Registered scorer for ``cross_paragraph_linker``."""
    return score_cross_paragraph
