"""Agreement statistics for meta-evaluation (automatic metric vs. human).

Correlations (Pearson with its t-test p-value, Spearman), Cohen's kappa
(unweighted and quadratic-weighted) and the ranking measures HAUSER uses to
compare a metric's ranking of the candidates of one literal sentence with the
human ranking: HR@k, nDCG@k (HAUSER, He et al. 2023, Appendix B) and MRR.

Conventions shared by the ranking measures: ``human`` and ``metric`` are lists
of groups (one group = the candidates of one input), each group a sequence of
scores aligned by candidate; higher is better. Ties in ``metric`` are broken
by candidate order (earlier first), so results are deterministic.
"""
from __future__ import annotations

import math
from typing import Hashable, List, Optional, Sequence, Tuple

import numpy as np
from scipy import stats

Groups = Sequence[Sequence[float]]


def _paired(x: Sequence[float], y: Sequence[float], minimum: int) -> Tuple[np.ndarray, np.ndarray]:
    a = np.asarray(x, dtype=np.float64)
    b = np.asarray(y, dtype=np.float64)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"expected two 1-d sequences of equal length, got shapes {a.shape} and {b.shape}")
    if len(a) < minimum:
        raise ValueError(f"need at least {minimum} pairs, got {len(a)}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise ValueError("scores must be finite numbers")
    return a, b


def pearson(x: Sequence[float], y: Sequence[float]) -> Tuple[float, float]:
    """Pearson's r and its two-sided p-value.

    r = Σ(x−x̄)(y−ȳ) / (√Σ(x−x̄)² √Σ(y−ȳ)²); the p-value comes from
    t = r√(n−2)/√(1−r²) under Student's t with n−2 degrees of freedom
    (Huang et al. 2026, §2.2.1, ``papers/003_*``).

    x, y: Floats1d (n,), n ≥ 3. Returns ``(r, p)``; r = nan (and p = nan) when
    either side is constant. Raises ValueError on unequal lengths, n < 3 or
    non-finite values.
    """
    a, b = _paired(x, y, 3)
    da, db = a - a.mean(), b - b.mean()
    denom = math.sqrt(float(da @ da)) * math.sqrt(float(db @ db))
    if denom == 0.0:
        return float("nan"), float("nan")
    r = max(-1.0, min(1.0, float(da @ db) / denom))
    n = len(a)
    if abs(r) == 1.0:  # t would be infinite
        return r, 0.0
    t = r * math.sqrt(n - 2) / math.sqrt(1.0 - r * r)
    return r, float(2.0 * stats.t.sf(abs(t), n - 2))


def spearman(x: Sequence[float], y: Sequence[float]) -> Tuple[float, float]:
    """Spearman's ρ (Pearson's r of the average ranks) and its p-value
    (the same t approximation as :func:`pearson`).

    x, y: Floats1d (n,), n ≥ 3. Returns ``(rho, p)``; raises like
    :func:`pearson`.
    """
    a, b = _paired(x, y, 3)
    return pearson(stats.rankdata(a), stats.rankdata(b))


def cohen_kappa(
    a: Sequence[Hashable],
    b: Sequence[Hashable],
    *,
    weights: Optional[str] = None,
    labels: Optional[Sequence[Hashable]] = None,
) -> float:
    """Cohen's κ = (p_o − p_e) / (1 − p_e) between two raters (Cohen 1960;
    used by Huang et al. 2026 §2.2.2 and CERD §3.3 for agreement).

    a, b: the two raters' labels, length n ≥ 1. ``weights``: None
    (unweighted), ``"linear"`` or ``"quadratic"``; the weighted forms need
    ordered categories: ``labels`` in order, else the sorted union of both
    raters' labels. Weighted κ = 1 − Σ w·O / Σ w·E with w_ij = |i−j| or
    (i−j)², O the observed and E the chance confusion matrix.
    Returns nan when the chance agreement is perfect (both raters constant on
    the same label). Raises ValueError on unequal or empty inputs, an unknown
    ``weights`` or a label missing from ``labels``.
    """
    if len(a) != len(b) or len(a) == 0:
        raise ValueError(f"expected two non-empty label sequences of equal length, got {len(a)} and {len(b)}")
    if weights not in (None, "linear", "quadratic"):
        raise ValueError(f"weights must be None, 'linear' or 'quadratic', got {weights!r}")
    cats = list(labels) if labels is not None else sorted(set(a) | set(b))
    index = {c: i for i, c in enumerate(cats)}
    missing = (set(a) | set(b)) - set(index)
    if missing:
        raise ValueError(f"labels not in the given label set: {sorted(map(str, missing))}")
    k = len(cats)
    observed = np.zeros((k, k), dtype=np.float64)
    for x, y in zip(a, b):
        observed[index[x], index[y]] += 1
    expected = np.outer(observed.sum(1), observed.sum(0)) / observed.sum()
    grid = np.abs(np.subtract.outer(np.arange(k), np.arange(k))).astype(np.float64)
    if weights is None:
        w = (grid > 0).astype(np.float64)
    elif weights == "linear":
        w = grid
    else:
        w = grid**2
    chance = float((w * expected).sum())
    if chance == 0.0:
        return float("nan")
    return 1.0 - float((w * observed).sum()) / chance


def _ranking(scores: Sequence[float]) -> List[int]:
    """Candidate indices by descending score, ties in candidate order."""
    return sorted(range(len(scores)), key=lambda i: (-scores[i], i))


def _check_groups(human: Groups, metric: Groups) -> None:
    if len(human) != len(metric) or len(human) == 0:
        raise ValueError(f"expected the same non-zero number of groups, got {len(human)} and {len(metric)}")
    for g, (h, m) in enumerate(zip(human, metric)):
        if len(h) != len(m) or len(h) == 0:
            raise ValueError(f"group {g}: {len(h)} human scores but {len(m)} metric scores")


def _best_rank(h: Sequence[float], m: Sequence[float]) -> int:
    """1-based position, in the metric's ranking, of the first human-best
    candidate to appear (any candidate tied for the human maximum counts)."""
    top = max(h)
    for pos, i in enumerate(_ranking(m), start=1):
        if h[i] == top:
            return pos
    raise AssertionError("unreachable")


def hit_ratio_at_k(human: Groups, metric: Groups, k: int) -> float:
    """HR@k: share of groups whose human-best candidate is among the metric's
    top k (HAUSER §4.2.1, recommendation task).

    human, metric: groups of aligned scores. Returns a float in [0, 1].
    Raises ValueError on misaligned groups or k < 1.
    """
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}")
    _check_groups(human, metric)
    return sum(_best_rank(h, m) <= k for h, m in zip(human, metric)) / len(human)


def mrr(human: Groups, metric: Groups) -> float:
    """Mean reciprocal rank of the human-best candidate in the metric's
    ranking (HAUSER §4.2.1). Returns a float in (0, 1]."""
    _check_groups(human, metric)
    return sum(1.0 / _best_rank(h, m) for h, m in zip(human, metric)) / len(human)


def _dcg(gains: Sequence[float], order: Sequence[int], k: int) -> float:
    return sum(gains[j] / math.log2(1 + i) for i, j in enumerate(order[:k], start=1))


def ndcg_at_k(human: Groups, metric: Groups, k: int) -> float:
    """nDCG@k averaged over groups, HAUSER Appendix B (eqs. 10–11):
    NDCG(k) = DCG(O_hypo, k) / DCG(O_ref, k), DCG(O, k) = Σ_{i≤k}
    gain(I(i)) / log2(1+i), where I(i) is the candidate at rank i of the
    ranking O induces. The gains are the human scores (the optimal ranking
    is the human one), so O_ref ranks by human and O_hypo by metric score.

    human scores must be ≥ 0 (gains); a group whose ideal DCG is 0 counts 1.
    Returns a float in [0, 1]. Raises ValueError on misaligned groups,
    negative human scores or k < 1.
    """
    if k < 1:
        raise ValueError(f"k must be ≥ 1, got {k}")
    _check_groups(human, metric)
    total = 0.0
    for h, m in zip(human, metric):
        if min(h) < 0:
            raise ValueError("human scores are gains and must be ≥ 0")
        ideal = _dcg(h, _ranking(h), k)
        total += 1.0 if ideal == 0 else _dcg(h, _ranking(m), k) / ideal
    return total / len(human)
