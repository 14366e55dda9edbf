"""Bipartite parallelism metrics: EPM, MPBM, MBAWO and MWO.

Source: Bothwell et al. 2023, §5 (the metric family and EPM) and Appendix B
(MPBM, MBAWO, MWO); reference implementation: PyPI ``pyrallelism``. For each
document, a maximum-weight bipartite matching (Kuhn-Munkres, here
``scipy.optimize.linear_sum_assignment``) pairs hypothesis and reference
parallelisms under a ``score`` function; over a corpus

    P = sum(matched score) / sum(size(h)),   R = sum(matched score) / sum(size(r)),
    F = 2PR / (P + R)   (0 when P = R = 0; P or R is 0 when its size sum is 0)

with

- EPM:   score = 1 if the branch sets are equal else 0; size = 1;
- MPBM:  score = |shared branches| if >= 2 are shared else 0; size = |branches|;
- MBAWO: score = total word overlap of an inner branch-to-branch matching if
  at least two matched branch pairs overlap, else 0; size = |words|;
- MWO:   score = |shared words|; size = |words|.

Results equal pyrallelism's exactly: the inner MBAWO matching is built on the
same square zero-padded matrix with branches in the same order (iteration
order of a Python ``set`` of ``(start, end)`` tuples), so ties resolve the
same way. Speed comes from scoring all four metrics in one pass, interval
arithmetic for overlaps (no word sets), scoring only pairs that share a word,
and skipping the assignment solver when no choice exists.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Sequence, Tuple

import numpy
from scipy.optimize import linear_sum_assignment
from spacy.training import Example
from spacy.util import registry

from ..annotation import same_tokens
from ..spangroups import IN_PARAGRAPH, PARALLELISM_KEY, parallelism_offsets

METRICS: Tuple[str, ...] = ("epm", "mpbm", "mbawo", "mwo")

Branch = Tuple[int, int]
Groups = Sequence[Sequence[Branch]]


def _overlap(a: Branch, b: Branch) -> int:
    """Shared words of two ``(start, end)`` spans."""
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


class _Prepared:
    """A parallelism in the forms the metrics need, computed once per document."""

    __slots__ = ("branches", "branch_set", "merged", "n_words", "lo", "hi")

    def __init__(self, branches: Iterable[Branch]) -> None:
        # pyrallelism iterates a set of (start, end) tuples; same order here
        # so that ties in the inner MBAWO matching resolve identically.
        self.branch_set = frozenset((int(s), int(e)) for s, e in branches)
        self.branches = list(self.branch_set)
        merged: List[List[int]] = []
        for s, e in sorted(self.branches):
            if merged and s <= merged[-1][1]:
                merged[-1][1] = max(merged[-1][1], e)
            else:
                merged.append([s, e])
        self.merged = [(s, e) for s, e in merged if e > s]
        self.n_words = sum(e - s for s, e in self.merged)
        self.lo = min((s for s, _ in self.branches), default=0)
        self.hi = max((e for _, e in self.branches), default=0)


def _mbawo_pair(h: _Prepared, r: _Prepared) -> int:
    """MBAWO score of one pair (Appendix B): the inner branch matching's total
    word overlap if it has >= 2 non-zero terms, else 0."""
    ov = [[_overlap(a, b) for b in r.branches] for a in h.branches]
    nz = [(i, j) for i, row in enumerate(ov) for j, v in enumerate(row) if v > 0]
    if len(nz) < 2:
        return 0
    rows, cols = [i for i, _ in nz], [j for _, j in nz]
    if len(set(rows)) == len(rows) and len(set(cols)) == len(cols):
        # Non-zero entries in distinct rows and columns: every maximum
        # matching takes all of them, so no solver is needed.
        return sum(ov[i][j] for i, j in nz)
    size = max(len(h.branches), len(r.branches))
    square = numpy.zeros((size, size), dtype="int64")
    square[: len(h.branches), : len(r.branches)] = ov
    ri, ci = linear_sum_assignment(square, maximize=True)
    terms = square[ri, ci]
    return int(terms.sum()) if int((terms > 0).sum()) > 1 else 0


def _max_matching(entries: Dict[Tuple[int, int], int], n_rows: int, n_cols: int) -> int:
    """Weight of a maximum-weight bipartite matching given its non-zero
    entries (Kuhn-Munkres via scipy unless each row and column has one)."""
    if not entries:
        return 0
    rows = [i for i, _ in entries]
    cols = [j for _, j in entries]
    if len(set(rows)) == len(rows) and len(set(cols)) == len(cols):
        return sum(entries.values())
    matrix = numpy.zeros((n_rows, n_cols), dtype="int64")
    for (i, j), v in entries.items():
        matrix[i, j] = v
    ri, ci = linear_sum_assignment(matrix, maximize=True)
    return int(matrix[ri, ci].sum())


def _sizes(p: _Prepared) -> Dict[str, int]:
    return {"epm": 1, "mpbm": len(p.branches), "mbawo": p.n_words, "mwo": p.n_words}


def all_document_counts(hypotheses: Groups, references: Groups) -> Dict[str, Tuple[int, int, int]]:
    """``{metric: (matched score, hypothesis size, reference size)}`` of one
    document for all four metrics in one pass.

    hypotheses / references: parallelisms as sequences of ``(start, end)``
    word offsets (end exclusive). Every metric scores 0 for two parallelisms
    that share no word, so only overlapping pairs are scored.
    """
    hyp = [_Prepared(p) for p in hypotheses]
    ref = [_Prepared(p) for p in references]
    hyp_size = {m: sum(_sizes(p)[m] for p in hyp) for m in METRICS}
    ref_size = {m: sum(_sizes(p)[m] for p in ref) for m in METRICS}
    entries: Dict[str, Dict[Tuple[int, int], int]] = {m: {} for m in METRICS}
    for i, h in enumerate(hyp):
        for j, r in enumerate(ref):
            if h.hi <= r.lo or r.hi <= h.lo:
                continue
            shared = sum(_overlap(a, b) for a in h.merged for b in r.merged)
            if not shared:
                continue
            entries["mwo"][i, j] = shared
            if h.branch_set == r.branch_set:
                entries["epm"][i, j] = 1
            common = len(h.branch_set & r.branch_set)
            if common > 1:
                entries["mpbm"][i, j] = common
            mbawo = _mbawo_pair(h, r)
            if mbawo:
                entries["mbawo"][i, j] = mbawo
    return {m: (_max_matching(entries[m], len(hyp), len(ref)), hyp_size[m], ref_size[m]) for m in METRICS}


def document_counts(hypotheses: Groups, references: Groups, metric: str) -> Tuple[int, int, int]:
    """``(matched score, hypothesis size, reference size)`` of one document
    for one metric (see :func:`all_document_counts`). Raises ValueError for
    an unknown metric."""
    if metric not in METRICS:
        raise ValueError(f"Unknown metric {metric!r}; expected one of {', '.join(METRICS)}.")
    return all_document_counts(hypotheses, references)[metric]


def prf_from_sizes(score: float, hyp_size: int, ref_size: int) -> Tuple[float, float, float]:
    """Precision, recall and F1 from summed counts (pyrallelism's conventions:
    a zero size gives 0.0, and P = R = 0 gives F = 0.0)."""
    p = score / hyp_size if hyp_size else 0.0
    r = score / ref_size if ref_size else 0.0
    f = 0.0 if p == 0.0 and r == 0.0 else 2 * (p * r / (p + r))
    return p, r, f


def score_groups(pairs: Iterable[Tuple[Groups, Groups]], metrics: Sequence[str] = METRICS) -> Dict[str, Dict[str, float]]:
    """Corpus scores from ``(hypotheses, references)`` pairs, one per document.

    Returns ``{metric: {"p", "r", "f", "score", "hyp_size", "ref_size"}}``
    with counts summed over documents (micro-averaged, as pyrallelism sums
    its confusion matrices). Raises ValueError for an unknown metric.
    """
    unknown = [m for m in metrics if m not in METRICS]
    if unknown:
        raise ValueError(f"Unknown metric(s) {unknown}; expected some of {', '.join(METRICS)}.")
    totals = {m: [0, 0, 0] for m in metrics}
    for hyp, ref in pairs:
        if not hyp and not ref:
            continue
        counts = all_document_counts(hyp, ref)
        for m in metrics:
            for k in range(3):
                totals[m][k] += counts[m][k]
    result = {}
    for m in metrics:
        score, hyp_size, ref_size = totals[m]
        p, r, f = prf_from_sizes(score, hyp_size, ref_size)
        result[m] = {"p": p, "r": r, "f": f, "score": score, "hyp_size": hyp_size, "ref_size": ref_size}
    return result


def example_groups(example: Example, key: str = PARALLELISM_KEY) -> Tuple[List[List[Branch]], List[List[Branch]]]:
    """``(hypotheses, references)`` of an Example in reference word offsets.

    When the predicted tokenisation differs from the reference one, predicted
    branches are mapped onto reference tokens by spaCy's alignment; a branch
    that cannot be aligned is dropped (and so is a parallelism left with
    fewer than two branches). Only in-paragraph parallelisms are scored (the
    metrics of Bothwell et al. 2023 on PSE-I); cross-paragraph ones have
    their own scores (:mod:`spacy_rhetoric.scorers.cross_paragraph`).
    """
    ref = parallelism_offsets(example.reference, key, IN_PARAGRAPH)
    pred_doc = example.predicted
    hyp = parallelism_offsets(pred_doc, key, IN_PARAGRAPH)
    if same_tokens(example):
        return hyp, ref
    mapped = []
    for group in hyp:
        spans = [pred_doc[s:e] for s, e in group]
        aligned = example.get_aligned_spans_x2y(spans, allow_overlap=True)
        branches = sorted({(s.start, s.end) for s in aligned})
        if len(branches) >= 2:
            mapped.append(branches)
    return mapped, ref


def score_parallelism(examples: Iterable[Example], *, spans_key: str = PARALLELISM_KEY, **kwargs) -> Dict[str, float]:
    """spaCy scorer: ``{f"{spans_key}_{metric}_{p|r|f}": float}`` for the four
    metrics over the Examples' predicted vs reference ``doc.spans[spans_key]``
    groups (see :mod:`spacy_rhetoric.spangroups`)."""
    scores = score_groups(example_groups(eg, spans_key) for eg in examples)
    out: Dict[str, float] = {}
    for metric, values in scores.items():
        for part in ("p", "r", "f"):
            out[f"{spans_key}_{metric}_{part}"] = values[part]
    return out


@registry.scorers("spacy_rhetoric.parallelism_scorer.v1")
def make_parallelism_scorer() -> Callable[..., Dict[str, float]]:
    """Registered scorer for the ``parallelism_linker`` component."""
    return score_parallelism
