"""Linear-chain CRF: brute force agreement, padding, gradients, long-sequence stability."""
import itertools

import numpy
import pytest
from thinc.api import NumpyOps

from spacy_rhetoric.ml.crf import (
    CRF,
    FORBIDDEN,
    crf_decode,
    crf_loss,
    effective_scores,
    forward_backward,
    nll_and_gradients,
    pad,
    viterbi,
)
from spacy_rhetoric.ml.tagging import TagScheme


def _path_score(emit, path, start, trans, end):
    s = start[path[0]] + end[path[-1]] + sum(emit[t, y] for t, y in enumerate(path))
    return s + sum(trans[a, b] for a, b in zip(path, path[1:]))


def _random_case(rng, lengths, K):
    emit = rng.normal(scale=2.0, size=(len(lengths), max(lengths), K))
    for b, n in enumerate(lengths):
        emit[b, n:] = rng.normal(size=(max(lengths) - n, K)) * 100  # padding must not matter
    return emit, numpy.array(lengths), rng.normal(size=K), rng.normal(size=(K, K)), rng.normal(size=K)


@pytest.mark.parametrize("seed", range(4))
def test_partition_and_best_path_match_brute_force(seed):
    rng = numpy.random.default_rng(seed)
    K = 3
    emit, lengths, start, trans, end = _random_case(rng, [5, 1, 3, 4], K)
    _, _, log_z = forward_backward(emit, lengths, start, trans, end)
    paths, scores = viterbi(emit, lengths, start, trans, end)
    for b, n in enumerate(lengths):
        all_scores = {p: _path_score(emit[b], p, start, trans, end) for p in itertools.product(range(K), repeat=int(n))}
        brute_z = numpy.logaddexp.reduce(list(all_scores.values()))
        best = max(all_scores, key=all_scores.get)
        assert log_z[b] == pytest.approx(brute_z, abs=1e-9)
        assert tuple(paths[b]) == best
        assert scores[b] == pytest.approx(all_scores[best], abs=1e-9)


def test_nll_matches_brute_force_and_gradients_match_finite_differences():
    rng = numpy.random.default_rng(7)
    K = 4
    emit, lengths, start, trans, end = _random_case(rng, [4, 2, 3], K)
    gold = rng.integers(0, K, size=emit.shape[:2])
    nll, d_emit, d_start, d_trans, d_end = nll_and_gradients(emit, lengths, gold, start, trans, end)
    _, _, log_z = forward_backward(emit, lengths, start, trans, end)
    for b, n in enumerate(lengths):
        gold_path = tuple(int(y) for y in gold[b, :n])
        assert nll[b] == pytest.approx(log_z[b] - _path_score(emit[b], gold_path, start, trans, end), abs=1e-9)
    assert numpy.abs(d_emit[1, 2:]).max() == 0.0  # padding gets no gradient
    eps = 1e-6

    def total(e=emit, s=start, t=trans, n=end):
        return nll_and_gradients(e, lengths, gold, s, t, n)[0].sum()

    for name, array, grad in (("emit", emit, d_emit), ("start", start, d_start), ("trans", trans, d_trans), ("end", end, d_end)):
        for idx in list(numpy.ndindex(array.shape))[::3]:
            if name == "emit" and idx[1] >= lengths[idx[0]]:
                continue
            bumped = array.copy()
            bumped[idx] += eps
            numeric = (total(**{{"emit": "e", "start": "s", "trans": "t", "end": "n"}[name]: bumped}) - total()) / eps
            assert numeric == pytest.approx(grad[idx], abs=1e-4), (name, idx)


def test_batched_equals_one_by_one():
    rng = numpy.random.default_rng(3)
    emit, lengths, start, trans, end = _random_case(rng, [6, 2, 9, 1], 5)
    _, _, log_z = forward_backward(emit, lengths, start, trans, end)
    paths, _ = viterbi(emit, lengths, start, trans, end)
    for b, n in enumerate(lengths):
        single = emit[b:b + 1, :n]
        _, _, z1 = forward_backward(single, lengths[b:b + 1], start, trans, end)
        p1, _ = viterbi(single, lengths[b:b + 1], start, trans, end)
        assert z1[0] == pytest.approx(log_z[b], abs=1e-9) and p1[0] == paths[b]


def test_empty_sequences_in_a_batch_keep_their_place():
    # viterbi sorts the batch longest first; the paths come back in input order
    rng = numpy.random.default_rng(5)
    emit, lengths, start, trans, end = _random_case(rng, [3, 1, 7, 2], 4)
    lengths = numpy.array([0, 3, 0, 7])
    paths, scores = viterbi(emit, lengths, start, trans, end)
    assert paths[0] == [] and paths[2] == []
    for b in (1, 3):
        n = int(lengths[b])
        p1, s1 = viterbi(emit[b:b + 1, :n], lengths[b:b + 1], start, trans, end)
        assert paths[b] == p1[0] and len(paths[b]) == n
        assert scores[b] == pytest.approx(s1[0], abs=1e-9)


def test_stable_on_a_2000_word_document():
    rng = numpy.random.default_rng(0)
    K = 7
    emit = rng.normal(scale=30.0, size=(1, 2000, K))
    lengths = numpy.array([2000])
    start, trans, end = rng.normal(size=K), rng.normal(scale=10.0, size=(K, K)), rng.normal(size=K)
    gold = rng.integers(0, K, size=(1, 2000))
    nll, d_emit, d_start, d_trans, d_end = nll_and_gradients(emit, lengths, gold, start, trans, end)
    assert numpy.isfinite(nll).all() and nll[0] > 0
    for g in (d_emit, d_start, d_trans, d_end):
        assert numpy.isfinite(g).all()
    # node marginals sum to one at every position
    alpha, beta, log_z = forward_backward(emit, lengths, start, trans, end)
    marg = numpy.exp(alpha + beta - log_z[:, None, None])
    assert numpy.allclose(marg.sum(-1), 1.0, atol=1e-6)
    paths, scores = viterbi(emit, lengths, start, trans, end)
    assert len(paths[0]) == 2000
    assert scores[0] == pytest.approx(_path_score(emit[0], paths[0], start, trans, end), rel=1e-9)
    assert scores[0] <= log_z[0] + 1e-6


def test_constraints_are_respected_by_viterbi():
    scheme = TagScheme("BIOMJ", "token")
    labels = ["O", "M", "B", "I", "J", "B:-2"]
    mask = scheme.transition_mask(labels)
    rng = numpy.random.default_rng(1)
    emit = rng.normal(scale=3.0, size=(8, 30, len(labels)))
    lengths = numpy.array([30, 5, 1, 12, 30, 2, 7, 19])
    start, trans, end = effective_scores(numpy.zeros(6), numpy.zeros((6, 6)), numpy.zeros(6), mask)
    paths, _ = viterbi(emit, lengths, start, trans, end)
    m_start, m_trans, m_end = mask
    for path in paths:
        assert m_start[path[0]] and m_end[path[-1]]
        assert all(m_trans[a, b] for a, b in zip(path, path[1:]))
    assert trans.min() == FORBIDDEN


def test_thinc_layer_loss_and_decode():
    """The CRF layer learns: a few gradient steps on a toy task reach the gold path."""
    ops = NumpyOps()
    layer = CRF(nO=3)
    layer.initialize()
    rng = numpy.random.default_rng(0)
    emissions = [ops.asarray2f(rng.normal(size=(n, 3)).astype("float32")) for n in (5, 0, 8)]
    gold = [[0, 1, 1, 2, 0], [], [1, 1, 1, 2, 0, 0, 1, 2]]
    Y, backprop = layer.begin_update(emissions)
    assert Y is emissions
    first, d_emit = crf_loss(layer, emissions, gold)
    assert [d.shape for d in d_emit] == [e.shape for e in emissions]
    for _ in range(200):
        loss, d_emit = crf_loss(layer, emissions, gold)
        for name in ("start", "trans", "end"):
            layer.set_param(name, layer.get_param(name) - 0.1 * layer.get_grad(name))
            layer.set_grad(name, layer.ops.alloc(layer.get_param(name).shape))
        emissions = [e - 0.1 * d for e, d in zip(emissions, d_emit)]
    assert loss < first / 10
    assert crf_decode(layer, emissions) == gold
    with pytest.raises(ValueError, match=r"\[R109\]"):
        crf_loss(layer, emissions, [[0], [], [1]])


def test_pad_shapes():
    padded, lengths = pad([numpy.ones((3, 2)), numpy.ones((1, 2))])
    assert padded.shape == (2, 3, 2) and lengths.tolist() == [3, 1] and padded[1, 1:].sum() == 0
