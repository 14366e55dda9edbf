"""Agreement statistics against scipy / scikit-learn (to 1e-9) and hand values."""
import math

import numpy as np
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score, ndcg_score

from spacy_rhetoric.research.agreement import (
    cohen_kappa,
    hit_ratio_at_k,
    mrr,
    ndcg_at_k,
    pearson,
    spearman,
)

SEEDS = range(8)


@pytest.mark.parametrize("seed", SEEDS)
def test_pearson_matches_scipy(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(3, 60))
    x = rng.normal(size=n)
    y = 0.5 * x + rng.normal(size=n)
    r, p = pearson(x, y)
    ref = stats.pearsonr(x, y)
    assert abs(r - ref.statistic) < 1e-9
    assert abs(p - ref.pvalue) < 1e-9


@pytest.mark.parametrize("seed", SEEDS)
def test_spearman_matches_scipy_with_ties(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(5, 60))
    x = rng.integers(1, 6, size=n).astype(float)  # 1-5 ratings: many ties
    y = x + rng.integers(-1, 2, size=n)
    rho, p = spearman(x, y)
    ref = stats.spearmanr(x, y)
    assert abs(rho - ref.statistic) < 1e-9
    assert abs(p - ref.pvalue) < 1e-9


def test_pearson_edge_cases():
    r, p = pearson([1, 2, 3], [2, 4, 6])
    assert r == pytest.approx(1.0) and p < 1e-6
    r, p = pearson([1, 1, 1], [1, 2, 3])
    assert math.isnan(r) and math.isnan(p)
    with pytest.raises(ValueError, match="at least 3"):
        pearson([1, 2], [1, 2])
    with pytest.raises(ValueError, match="equal length"):
        pearson([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="finite"):
        pearson([1, 2, float("nan")], [1, 2, 3])


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("weights", [None, "linear", "quadratic"])
def test_cohen_kappa_matches_sklearn(seed, weights):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(10, 80))
    a = rng.integers(1, 11, size=n)
    b = np.clip(a + rng.integers(-2, 3, size=n), 1, 10)
    ours = cohen_kappa(list(a), list(b), weights=weights)
    assert abs(ours - cohen_kappa_score(a, b, weights=weights)) < 1e-9


def test_cohen_kappa_string_labels_and_errors():
    a = ["A", "B", "C", "A", "B"]
    b = ["A", "B", "A", "A", "C"]
    assert abs(cohen_kappa(a, b) - cohen_kappa_score(a, b)) < 1e-9
    assert math.isnan(cohen_kappa(["x", "x"], ["x", "x"]))
    with pytest.raises(ValueError, match="not in the given label set"):
        cohen_kappa(a, b, labels=["A", "B"])
    with pytest.raises(ValueError, match="weights"):
        cohen_kappa(a, b, weights="cubic")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("k", [1, 3, 5])
def test_ndcg_matches_sklearn_linear_gains(seed, k):
    rng = np.random.default_rng(seed)
    human = [list(rng.integers(1, 6, size=5).astype(float)) for _ in range(12)]
    metric = [list(rng.random(5)) for _ in range(12)]  # continuous: no ties
    expected = float(np.mean([ndcg_score([h], [m], k=k, ignore_ties=True) for h, m in zip(human, metric)]))
    assert abs(ndcg_at_k(human, metric, k) - expected) < 1e-9


def test_ranking_measures_hand_computed():
    # group 1: human best = candidate 2; metric ranks it 2nd
    # group 2: human best = candidate 0; metric ranks it 1st
    # group 3: human best = candidate 3; metric ranks it 4th
    human = [[1, 3, 5, 2], [4, 1, 2, 3], [2, 2, 1, 5]]
    metric = [[0.9, 0.1, 0.5, 0.2], [0.8, 0.7, 0.6, 0.5], [0.4, 0.3, 0.2, 0.1]]
    assert hit_ratio_at_k(human, metric, 1) == pytest.approx(1 / 3)
    assert hit_ratio_at_k(human, metric, 2) == pytest.approx(2 / 3)
    assert hit_ratio_at_k(human, metric, 4) == 1.0
    assert mrr(human, metric) == pytest.approx((1 / 2 + 1 + 1 / 4) / 3)
    # nDCG@1 of group 1: gain of metric top (1) / gain of human top (5)
    g1 = 1 / 5
    g2 = 1.0
    g3 = 2 / 5
    assert ndcg_at_k(human, metric, 1) == pytest.approx((g1 + g2 + g3) / 3)
    # a perfect metric scores 1 everywhere
    assert ndcg_at_k(human, human, 3) == pytest.approx(1.0)
    assert mrr(human, human) == 1.0


def test_ranking_measures_reject_bad_input():
    with pytest.raises(ValueError, match="group 0"):
        mrr([[1, 2]], [[1]])
    with pytest.raises(ValueError, match="k must be"):
        hit_ratio_at_k([[1, 2]], [[1, 2]], 0)
    with pytest.raises(ValueError, match="gains"):
        ndcg_at_k([[-1, 2]], [[1, 2]], 1)
