"""Linear-chain conditional random field for thinc models.

Lafferty et al. 2001; the Encoder-CRF tagger of Bothwell et al. 2023 §6.2.
A sequence ``y`` of length ``T`` over ``K`` tags scores

    s(x, y) = start[y_0] + sum_t emit[t, y_t] + sum_t trans[y_{t-1}, y_t] + end[y_{T-1}]

and ``p(y | x) = exp(s(x, y)) / Z(x)``. The log partition function ``log Z``
comes from the forward algorithm, the gradient of the negative
log-likelihood from forward-backward marginals (expected minus observed
counts), the best path from Viterbi. All recursions run in log space in
float64, so they stay finite on documents of thousands of words.

Transition constraints (e.g. the tag bigrams a tagging scheme can never
produce, :meth:`spacy_rhetoric.ml.tagging.TagScheme.transition_mask`) are added
as a fixed penalty of :data:`FORBIDDEN` to the learned scores, so forbidden
paths get probability ~exp(-1e4) and are never chosen by Viterbi unless no
allowed path exists.

The thinc layer :func:`CRF` holds the learned ``start`` / ``trans`` / ``end``
scores and passes emissions through unchanged; the component computes the
loss with :func:`crf_loss` (which accumulates the transition gradients into
the layer) and decodes with :func:`crf_decode`.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

import numpy
from thinc.api import Model, get_array_module, registry
from thinc.types import Floats2d

from ..errors import Errors

FORBIDDEN = -1e4

Mask = Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]


def _lse(a: numpy.ndarray, axis: int) -> numpy.ndarray:
    """log-sum-exp over ``axis`` (stable: subtracts the max)."""
    m = a.max(axis=axis, keepdims=True)
    m = numpy.where(numpy.isfinite(m), m, 0.0)
    return (numpy.log(numpy.exp(a - m).sum(axis=axis, keepdims=True)) + m).squeeze(axis)


def pad(emissions: Sequence[numpy.ndarray]) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Stack per-document emissions Floats2d (n_words_i, n_tags) into a
    zero-padded Floats3d (batch, max_len, n_tags) float64 and Ints1d lengths."""
    lengths = numpy.array([len(e) for e in emissions], dtype="int64")
    n_tags = emissions[0].shape[1] if len(emissions) else 0
    out = numpy.zeros((len(emissions), int(lengths.max(initial=0)), n_tags), dtype="float64")
    for i, e in enumerate(emissions):
        out[i, : len(e)] = e
    return out, lengths


def effective_scores(
    start: numpy.ndarray, trans: numpy.ndarray, end: numpy.ndarray, mask: Optional[Mask] = None
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Learned scores (Floats1d (K,), Floats2d (K, K), Floats1d (K,)) plus the
    :data:`FORBIDDEN` penalty where ``mask`` (Bools of the same shapes) is False."""
    start, trans, end = (numpy.asarray(x, dtype="float64") for x in (start, trans, end))
    if mask is None:
        return start, trans, end
    m_start, m_trans, m_end = mask
    return (
        start + numpy.where(m_start, 0.0, FORBIDDEN),
        trans + numpy.where(m_trans, 0.0, FORBIDDEN),
        end + numpy.where(m_end, 0.0, FORBIDDEN),
    )


def forward_backward(
    emit: numpy.ndarray, lengths: numpy.ndarray, start: numpy.ndarray, trans: numpy.ndarray, end: numpy.ndarray
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Forward and backward log scores of a padded batch.

    emit: Floats3d (B, T, K); lengths: Ints1d (B,), each >= 1.
    Returns ``(alpha, beta, log_z)``: Floats3d (B, T, K) each, with
    ``alpha[b, t, k]`` the log score of all prefixes ending in tag k at t and
    ``beta[b, t, k]`` that of all suffixes after it (including ``end``), and
    Floats1d (B,) log partition functions. Positions past a sequence's
    length carry its last values and must be ignored.
    """
    B, T, K = emit.shape
    alpha = numpy.empty_like(emit)
    beta = numpy.empty_like(emit)
    alpha[:, 0] = start + emit[:, 0]
    for t in range(1, T):
        step = _lse(alpha[:, t - 1, :, None] + trans[None], axis=1) + emit[:, t]
        alpha[:, t] = numpy.where((t < lengths)[:, None], step, alpha[:, t - 1])
    beta[:, T - 1] = end
    for t in range(T - 2, -1, -1):
        step = _lse(trans[None] + (emit[:, t + 1] + beta[:, t + 1])[:, None, :], axis=2)
        beta[:, t] = numpy.where((t >= lengths - 1)[:, None], end, step)
    log_z = _lse(alpha[:, T - 1] + end, axis=1)
    return alpha, beta, log_z


def nll_and_gradients(
    emit: numpy.ndarray,
    lengths: numpy.ndarray,
    gold: numpy.ndarray,
    start: numpy.ndarray,
    trans: numpy.ndarray,
    end: numpy.ndarray,
) -> Tuple[numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray, numpy.ndarray]:
    """Negative log-likelihood of gold paths and its gradients.

    emit: Floats3d (B, T, K); lengths: Ints1d (B,); gold: Ints2d (B, T) tag
    ids (padding ignored); start/trans/end: effective scores.
    Returns ``(nll, d_emit, d_start, d_trans, d_end)``: Floats1d (B,) per
    sequence, Floats3d (B, T, K) (zero on padding), Floats1d (K,), Floats2d
    (K, K), Floats1d (K,), each gradient summed over the batch. Gradients are
    marginals minus gold indicators (forward-backward; Lafferty et al. 2001 §4).
    """
    B, T, K = emit.shape
    alpha, beta, log_z = forward_backward(emit, lengths, start, trans, end)
    valid = numpy.arange(T)[None, :] < lengths[:, None]  # (B, T)
    rows = numpy.arange(B)
    gold = numpy.where(valid, gold, 0)
    last = gold[rows, lengths - 1]
    onehot = numpy.zeros_like(emit)
    onehot[rows[:, None], numpy.arange(T)[None, :], gold] = 1.0
    onehot *= valid[:, :, None]
    gold_score = (emit * onehot).sum(axis=(1, 2)) + start[gold[:, 0]] + end[last]
    pair_valid = valid[:, 1:]
    gold_score += (trans[gold[:, :-1], gold[:, 1:]] * pair_valid).sum(axis=1)
    marg = numpy.exp(alpha + beta - log_z[:, None, None]) * valid[:, :, None]
    d_emit = marg - onehot
    d_start = (marg[:, 0] - onehot[:, 0]).sum(axis=0)
    d_end = (marg[rows, lengths - 1] - onehot[rows, lengths - 1]).sum(axis=0)
    d_trans = numpy.zeros_like(trans)
    for t in range(T - 1):
        live = pair_valid[:, t]
        if not live.any():
            break
        pair = alpha[live, t, :, None] + trans[None] + (emit[live, t + 1] + beta[live, t + 1])[:, None, :]
        d_trans += numpy.exp(pair - log_z[live, None, None]).sum(axis=0)
    numpy.add.at(d_trans, (gold[:, :-1][pair_valid], gold[:, 1:][pair_valid]), -1.0)
    return log_z - gold_score, d_emit, d_start, d_trans, d_end


def viterbi(
    emit: numpy.ndarray, lengths: numpy.ndarray, start: numpy.ndarray, trans: numpy.ndarray, end: numpy.ndarray
) -> Tuple[List[List[int]], numpy.ndarray]:
    """Best tag path of each sequence in a padded batch (Viterbi 1967).

    emit: Floats3d (B, T, K); lengths: Ints1d (B,).
    Returns ``(paths, scores)``: a list of B tag-id lists (each of its
    sequence's length) and Floats1d (B,) their scores s(x, y).

    The sequences are sorted longest first, so that step ``t`` computes only
    the sequences still running (paragraphs are mostly far shorter than the
    longest in their batch), and the back-pointers are followed for the
    whole batch at once.
    """
    B, T, K = emit.shape
    if T == 0:
        return [[] for _ in range(B)], numpy.zeros(B)
    lengths = numpy.asarray(lengths)
    order = numpy.argsort(-lengths, kind="stable")
    lens, emit = lengths[order], emit[order]
    n_live = (lens[None, :] > numpy.arange(T)[:, None]).sum(axis=1)  # (T,)
    delta = start + emit[:, 0]
    back = numpy.zeros((B, T, K), dtype="int64")
    for t in range(1, T):
        n = n_live[t]
        if n == 0:
            break
        cand = delta[:n, :, None] + trans[None]
        best_prev = cand.argmax(axis=1)
        # the value at best_prev is the max
        delta[:n] = numpy.take_along_axis(cand, best_prev[:, None, :], axis=1)[:, 0] + emit[:n, t]
        back[:n, t] = best_prev
    final = delta + end
    best = final.argmax(axis=1)
    path = numpy.zeros((B, T), dtype="int64")
    cur = best.copy()
    for t in range(int(lens[0]) - 1, -1, -1):
        n = n_live[t]
        if t + 1 < T:
            cur[:n] = numpy.where(lens[:n] == t + 1, best[:n], back[numpy.arange(n), t + 1, cur[:n]])
        path[:n, t] = cur[:n]
    paths: List[List[int]] = [[] for _ in range(B)]
    scores = numpy.empty(B, dtype=final.dtype)
    for i, b in enumerate(order):
        paths[b] = path[i, : lens[i]].tolist()
        scores[b] = final[i, best[i]]
    return paths, scores


@registry.layers("spacy_rhetoric.CRF.v1")
def CRF(nO: Optional[int] = None) -> Model[List[Floats2d], List[Floats2d]]:
    """A CRF output layer: holds ``start`` Floats1d (nO,), ``trans`` Floats2d
    (nO, nO) and ``end`` Floats1d (nO,) scores; its forward pass returns the
    emissions unchanged (List[Floats2d], each (n_words, nO)). Use
    :func:`crf_loss` for training and :func:`crf_decode` for prediction.
    """
    return Model("crf", _crf_forward, init=_crf_init, dims={"nO": nO}, params={"start": None, "trans": None, "end": None})


def _crf_init(model: Model, X=None, Y=None) -> None:
    if Y is not None and not model.has_dim("nO"):
        model.set_dim("nO", Y[0].shape[1])
    nO = model.get_dim("nO")
    model.set_param("start", model.ops.alloc1f(nO))
    model.set_param("trans", model.ops.alloc2f(nO, nO))
    model.set_param("end", model.ops.alloc1f(nO))


def _crf_forward(model: Model, X: List[Floats2d], is_train: bool):
    return X, lambda dY: dY


def _scores(model: Model, mask: Optional[Mask]):
    to_np = lambda a: model.ops.to_numpy(a)  # noqa: E731
    return effective_scores(to_np(model.get_param("start")), to_np(model.get_param("trans")), to_np(model.get_param("end")), mask)


def crf_loss(
    model: Model, emissions: Sequence[Floats2d], gold: Sequence[Sequence[int]], mask: Optional[Mask] = None
) -> Tuple[float, List[Floats2d]]:
    """Summed NLL of ``gold`` tag ids under the CRF ``model`` (the layer made
    by :func:`CRF`) and the gradients of the emissions (List[Floats2d], each
    (n_words, nO), in the emissions' own array type). Accumulates the
    gradients of ``start``/``trans``/``end`` into ``model`` (``inc_grad``).
    Empty sequences contribute nothing. Raises ValueError if a gold sequence's
    length differs from its emissions'.
    """
    keep = [i for i, e in enumerate(emissions) if len(e)]
    d_out = [model.ops.alloc2f(*e.shape) for e in emissions]
    if not keep:
        return 0.0, d_out
    host = [model.ops.to_numpy(emissions[i]) for i in keep]
    emit, lengths = pad(host)
    gold_ids = numpy.zeros(emit.shape[:2], dtype="int64")
    for row, i in enumerate(keep):
        if len(gold[i]) != len(emissions[i]):
            raise ValueError(Errors.R109.format(index=i, n_tags=len(gold[i]), n_words=len(emissions[i])))
        gold_ids[row, : len(gold[i])] = gold[i]
    start, trans, end = _scores(model, mask)
    nll, d_emit, d_start, d_trans, d_end = nll_and_gradients(emit, lengths, gold_ids, start, trans, end)
    xp = get_array_module(model.get_param("trans"))
    model.inc_grad("start", xp.asarray(d_start, dtype="float32"))
    model.inc_grad("trans", xp.asarray(d_trans, dtype="float32"))
    model.inc_grad("end", xp.asarray(d_end, dtype="float32"))
    for row, i in enumerate(keep):
        d_out[i] = model.ops.asarray2f(d_emit[row, : lengths[row]].astype("float32"))
    return float(nll.sum()), d_out


def crf_decode(model: Model, emissions: Sequence[Floats2d], mask: Optional[Mask] = None) -> List[List[int]]:
    """Viterbi tag ids for each document's emissions (Floats2d (n_words, nO));
    an empty document gets an empty path."""
    keep = [i for i, e in enumerate(emissions) if len(e)]
    paths: List[List[int]] = [[] for _ in emissions]
    if not keep:
        return paths
    emit, lengths = pad([model.ops.to_numpy(emissions[i]) for i in keep])
    start, trans, end = _scores(model, mask)
    best, _ = viterbi(emit, lengths, start, trans, end)
    for i, path in zip(keep, best):
        paths[i] = path
    return paths
