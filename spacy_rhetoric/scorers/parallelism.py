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
same way. Speed comes from interval arithmetic for overlaps (no word sets),
and from skipping the assignment solver when no choice exists.
"""
from __future__ import annotations

from typing import Callable, Dict, Iterable, List, Sequence, Tuple

import numpy
from scipy.optimize import linear_sum_assignment
from spacy.training import Example
from spacy.util import registry

from ..spangroups import PARALLELISM_KEY, parallelism_offsets

METRICS: Tuple[str, ...] = ("epm", "mpbm", "mbawo", "mwo")

Branch = Tuple[int, int]
Groups = Sequence[Sequence[Branch]]


def _as_array(branches: Iterable[Branch]) -> numpy.ndarray:
    """Branches in pyrallelism's order (iteration of a set), Ints2d (n, 2)."""
    return numpy.array([b for b in set(map(tuple, branches))], dtype="int64").reshape(-1, 2)


def _overlap(h: numpy.ndarray, r: numpy.ndarray) -> numpy.ndarray:
    """Word overlap of every branch pair: Ints2d (len(h), len(r))."""
    lo = numpy.maximum(h[:, None, 0], r[None, :, 0])
    hi = numpy.minimum(h[:, None, 1], r[None, :, 1])
    return numpy.clip(hi - lo, 0, None)


def _n_words(p: numpy.ndarray) -> int:
    """Words covered by a parallelism's branches (overlaps counted once)."""
    if len(p) == 0:
        return 0
    p = p[numpy.argsort(p[:, 0])]
    total, reach = 0, -1
    for s, e in p:
        s = max(s, reach)
        if e > s:
            total += e - s
            reach = e
    return int(total)


def _mbawo_pair(h: numpy.ndarray, r: numpy.ndarray) -> int:
    """MBAWO score of one pair (Appendix B): the inner matching's total if it
    has >= 2 non-zero terms, else 0."""
    ov = _overlap(h, r)
    nz = ov > 0
    n_nz = int(nz.sum())
    if n_nz < 2:
        return 0
    if (nz.sum(axis=0) <= 1).all() and (nz.sum(axis=1) <= 1).all():
        # Non-zero entries in distinct rows and columns: every maximum
        # matching takes all of them, so no solver is needed.
        return int(ov.sum())
    size = max(ov.shape)
    square = numpy.zeros((size, size), dtype="int64")
    square[: ov.shape[0], : ov.shape[1]] = ov
    rows, cols = linear_sum_assignment(square, maximize=True)
    terms = square[rows, cols]
    return int(terms.sum()) if int((terms > 0).sum()) > 1 else 0


def _pair_score(metric: str, h: numpy.ndarray, r: numpy.ndarray) -> int:
    if metric == "epm":
        return int(len(h) == len(r) and set(map(tuple, h.tolist())) == set(map(tuple, r.tolist())))
    if metric == "mpbm":
        shared = len(set(map(tuple, h.tolist())) & set(map(tuple, r.tolist())))
        return shared if shared > 1 else 0
    if metric == "mbawo":
        return _mbawo_pair(h, r)
    if metric == "mwo":
        return _n_words(h) + _n_words(r) - _n_words(numpy.concatenate([h, r]))
    raise ValueError(f"Unknown metric {metric!r}; expected one of {', '.join(METRICS)}.")


def _size(metric: str, p: numpy.ndarray) -> int:
    if metric == "epm":
        return 1
    if metric == "mpbm":
        return len(p)
    return _n_words(p)


def _spans_touch(h: numpy.ndarray, r: numpy.ndarray) -> bool:
    return bool(len(h) and len(r) and (_overlap(h, r) > 0).any())


def document_counts(hypotheses: Groups, references: Groups, metric: str) -> Tuple[int, int, int]:
    """``(matched score, hypothesis size, reference size)`` of one document.

    hypotheses / references: parallelisms as sequences of ``(start, end)``
    word offsets (end exclusive). Raises ValueError for an unknown metric.
    """
    if metric not in METRICS:
        raise ValueError(f"Unknown metric {metric!r}; expected one of {', '.join(METRICS)}.")
    hyp = [_as_array(p) for p in hypotheses]
    ref = [_as_array(p) for p in references]
    hyp_size = sum(_size(metric, p) for p in hyp)
    ref_size = sum(_size(metric, p) for p in ref)
    if not hyp or not ref:
        return 0, hyp_size, ref_size
    matrix = numpy.zeros((len(hyp), len(ref)), dtype="int64")
    for i, h in enumerate(hyp):
        for j, r in enumerate(ref):
            # Every metric scores 0 for parallelisms without a shared word.
            if _spans_touch(h, r):
                matrix[i, j] = _pair_score(metric, h, r)
    if not matrix.any():
        return 0, hyp_size, ref_size
    rows, cols = linear_sum_assignment(matrix, maximize=True)
    return int(matrix[rows, cols].sum()), hyp_size, ref_size


def prf(score: int, hyp_size: int, ref_size: int) -> Tuple[float, float, float]:
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
    its confusion matrices).
    """
    pairs = list(pairs)
    result = {}
    for metric in metrics:
        tot = numpy.zeros(3, dtype="int64")
        for hyp, ref in pairs:
            tot += document_counts(hyp, ref, metric)
        p, r, f = prf(*map(int, tot))
        result[metric] = {"p": p, "r": r, "f": f, "score": int(tot[0]), "hyp_size": int(tot[1]), "ref_size": int(tot[2])}
    return result


def reference_scores(pairs: Iterable[Tuple[Groups, Groups]], metrics: Sequence[str] = METRICS) -> Dict[str, Dict[str, float]]:
    """The same scores computed by ``pyrallelism`` itself (for parity tests
    and the speed benchmark); same return layout as :func:`score_groups`."""
    from pyrallelism import evaluate_bipartite_parallelism_metric
    from pyrallelism.primitives.evaluation_metric import get_metric
    from pyrallelism.structures.confusion_matrix import ReducedConfusionMatrix

    pairs = list(pairs)
    result = {}
    for metric in metrics:
        total = ReducedConfusionMatrix()
        for hyp, ref in pairs:
            hyp_dir = {i: set(map(tuple, p)) for i, p in enumerate(hyp)}
            ref_dir = {i: set(map(tuple, p)) for i, p in enumerate(ref)}
            matrix, _ = evaluate_bipartite_parallelism_metric(hyp_dir, ref_dir, get_metric(metric))
            total += matrix
        p, r, f = total.get_statistics()
        result[metric] = {"p": p, "r": r, "f": f, "score": int(total.score),
                          "hyp_size": int(total.hypothesis_count), "ref_size": int(total.reference_count)}
    return result


def same_tokens(example: Example) -> bool:
    """Whether predicted and reference docs have identical tokens (fast path
    that skips alignment)."""
    x, y = example.predicted, example.reference
    return len(x) == len(y) and x.text == y.text and bool((x.to_array("ORTH") == y.to_array("ORTH")).all())


def example_groups(example: Example, key: str = PARALLELISM_KEY) -> Tuple[List[List[Branch]], List[List[Branch]]]:
    """``(hypotheses, references)`` of an Example in reference word offsets.

    When the predicted tokenisation differs from the reference one, predicted
    branches are mapped onto reference tokens by spaCy's alignment; a branch
    that cannot be aligned is dropped (and so is a parallelism left with
    fewer than two branches).
    """
    ref = parallelism_offsets(example.reference, key)
    pred_doc = example.predicted
    hyp = parallelism_offsets(pred_doc, key)
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
