"""Architecture of the ``figurative_units`` component: a clause-level CRF tagger.

``spacy_rhetoric.FigurativeTagger.v1`` follows ConFiguRe's best recognition
baseline (Zhu et al. 2022, ``papers/001`` §4.3, E2ECRF): one vector per
clause, B-X/I-X/O tags over the clauses, a linear-chain CRF
(:mod:`spacy_rhetoric.ml.crf`). Where E2ECRF mean-pools a fine-tuned
RoBERTa-zh-Large over each clause, we pool what the pipeline already
computed and never train it:

- ``doc.tensor``, the shared encoder's word vectors that spaCy's ``tok2vec``
  component writes (no gradient flows into it, so the encoder and the
  components that listen to it are unchanged), mean- and max-pooled over
  the clause's tokens;
- cheap clause features (:func:`clause_cue_features`): question marks and
  question words (问语), quotation marks (引语), comparators (比喻), hyperbolic
  words (夸张), character-bigram overlap, equal length and shared first or
  last characters with the neighbouring clauses (反复, 对偶, 排比);
- what the pipeline's other components found in the clause, where they ran
  before (:func:`pipeline_features`): the sentence's coarse device scores
  (``sent._.rhetoric``), parallelism branches and rhetorical components.

They are features: no label is ever copied from them. Then a maxout layer,
a packed BiLSTM over the clauses of a doc, a linear layer to tag space and
the CRF.
"""
from __future__ import annotations

import math
import re
from typing import List, Optional, Sequence, Tuple

import numpy
from spacy.tokens import Doc, Span
from spacy.util import registry
from thinc.api import Dropout, Linear, Maxout, Model, chain, with_array
from thinc.types import Floats2d

from .crf import CRF
from .lstm import PackedBiLSTM
from .parallelism_tagger import NoGradient

CLAUSES_KEY = "clauses"

QUESTION_WORDS = ("吗", "呢", "难道", "岂", "何", "什么", "怎么", "怎样", "为什么", "谁", "哪", "多少", "几时", "莫非", "不成")
COMPARATORS = ("像", "好像", "仿佛", "如同", "宛如", "犹如", "似", "一样", "一般", "般", "似的", "如", "若", "成了", "是")
HYPERBOLE_WORDS = ("万", "千", "百", "无数", "极", "最", "永远", "整个", "一丝", "一点", "死", "透", "满", "全")
OPEN_QUOTES = "“「『\"‘"
CLOSE_QUOTES = "”」』\"’"
_EDGE_PUNCT = re.compile(r"^[\s\W_]+|[\s\W_]+$")

#: The coarse devices of ``sent._.rhetoric`` read as features.
PIPELINE_DEVICES = ("metaphor", "personification", "hyperbole", "parallelism")
#: Component labels read as features (``doc.spans["rhetoric_components"]``).
PIPELINE_COMPONENTS = ("comparator", "tenor", "vehicle", "personification_object", "personification_content",
                       "hyperbole_object", "hyperbole_content", "parallelism_marker")


def clause_spans(doc: Doc, key: str = CLAUSES_KEY) -> List[Span]:
    """The clauses of ``doc`` (``doc.spans[key]``, in order). Raises ValueError
    when the doc has no such group (the ``clause_segmenter`` did not run)."""
    if key not in doc.spans:
        raise ValueError(f"doc.spans[{key!r}] is missing: put a clause_segmenter before figurative_units")
    return sorted(doc.spans[key], key=lambda s: s.start)


def _core(text: str) -> str:
    """The clause without punctuation and whitespace at its edges."""
    return _EDGE_PUNCT.sub("", text)


def _bigrams(text: str) -> set:
    return {text[i:i + 2] for i in range(len(text) - 1)}


def _jaccard(a: set, b: set) -> float:
    return len(a & b) / len(a | b) if a and b else 0.0


N_CUES = 30


def clause_cue_features(texts: Sequence[str]) -> numpy.ndarray:
    """Floats2d (n_clauses, :data:`N_CUES`), each in [0, 1], for the clause
    texts of one doc, in order. Per clause: question mark, ending in one,
    question word; opening and closing quotes, inside an open quote;
    comparator, hyperbolic word; ends in ``。！；：，``; log length; for the
    previous and the next clause: bigram Jaccard, equal core length, length
    ratio, same first character, same last character, identical core;
    repeated bigram inside; relative position in the doc; first and last
    clause."""
    n = len(texts)
    cores = [_core(t) for t in texts]
    grams = [_bigrams(c) for c in cores]
    feats = numpy.zeros((n, N_CUES), dtype="float32")
    quoted = False
    for i, (text, core) in enumerate(zip(texts, cores)):
        f = feats[i]
        f[0] = any(c in text for c in "？?")
        f[1] = text.rstrip("”」』\"’ ").endswith(("？", "?"))
        f[2] = any(w in core for w in QUESTION_WORDS)
        f[3] = any(c in text for c in OPEN_QUOTES)
        f[4] = any(c in text for c in CLOSE_QUOTES)
        f[5] = quoted
        for c in text:
            if c in "“「『":
                quoted = True
            elif c in "”」』":
                quoted = False
        f[6] = any(w in core for w in COMPARATORS[:11])
        f[7] = any(w in core for w in HYPERBOLE_WORDS)
        tail = text.rstrip("”」』\"’ ")[-1:]
        f[8] = tail in "。．."
        f[9] = tail in "！!"
        f[10] = tail in "；;"
        f[11] = tail in "：:"
        f[12] = tail in "，,"
        f[13] = min(math.log1p(len(core)) / 4.0, 1.0)
        for k, j in enumerate((i - 1, i + 1)):
            if not 0 <= j < n:
                continue
            other = cores[j]
            base = 14 + 6 * k
            f[base] = _jaccard(grams[i], grams[j])
            f[base + 1] = len(core) == len(other) and len(core) > 0
            f[base + 2] = min(len(core), len(other)) / max(len(core), len(other), 1)
            f[base + 3] = bool(core) and bool(other) and core[0] == other[0]
            f[base + 4] = bool(core) and bool(other) and core[-1] == other[-1]
            f[base + 5] = bool(core) and core == other
        f[26] = len(grams[i]) < max(len(core) - 1, 0)
        f[27] = i / max(n - 1, 1)
        f[28] = i == 0
        f[29] = i == n - 1
    return feats


N_PIPELINE = len(PIPELINE_DEVICES) + 1 + len(PIPELINE_COMPONENTS)


def pipeline_features(doc: Doc, clauses: Sequence[Span]) -> numpy.ndarray:
    """Floats2d (n_clauses, :data:`N_PIPELINE`): per clause, the coarse
    device scores of its sentence (``sent._.rhetoric["coarse"]``, 0 when not
    accepted or not set), whether it overlaps a parallelism branch
    (``doc.spans["parallelism"]``), and per component label whether a
    component of ``doc.spans["rhetoric_components"]`` overlaps it. Zeros where
    those components did not run."""
    feats = numpy.zeros((len(clauses), N_PIPELINE), dtype="float32")
    has_rhetoric = Span.has_extension("rhetoric")
    branches = [(s.start, s.end) for s in doc.spans.get("parallelism", [])]
    components = [(s.start, s.end, s.label_) for s in doc.spans.get("rhetoric_components", [])]
    comp_col = {lab: len(PIPELINE_DEVICES) + 1 + k for k, lab in enumerate(PIPELINE_COMPONENTS)}
    sent_scores = {}
    for i, clause in enumerate(clauses):
        if has_rhetoric and doc.has_annotation("SENT_START"):
            sent = clause[0].sent
            if sent.start not in sent_scores:
                decided = sent._.rhetoric or {}
                sent_scores[sent.start] = decided.get("coarse", {}) if isinstance(decided, dict) else {}
            for k, device in enumerate(PIPELINE_DEVICES):
                feats[i, k] = float(sent_scores[sent.start].get(device, 0.0))
        feats[i, len(PIPELINE_DEVICES)] = any(s < clause.end and clause.start < e for s, e in branches)
        for s, e, label in components:
            if label in comp_col and s < clause.end and clause.start < e:
                feats[i, comp_col[label]] = 1.0
    return feats


def _pool(tensor: numpy.ndarray, clauses: Sequence[Span], width: int) -> numpy.ndarray:
    """Floats2d (n_clauses, 2 * width): mean and max of the clause's rows of
    ``tensor`` (zeros when the doc has no tensor)."""
    out = numpy.zeros((len(clauses), 2 * width), dtype="float32")
    if tensor is None or tensor.size == 0 or tensor.shape[-1] != width:
        return out
    for i, clause in enumerate(clauses):
        rows = tensor[clause.start:clause.end]
        out[i, :width] = rows.mean(axis=0)
        out[i, width:] = rows.max(axis=0)
    return out


@registry.layers("spacy_rhetoric.ClauseFeatures.v1")
def ClauseFeatures(
    clauses_key: str = CLAUSES_KEY, tensor_width: Optional[int] = None, use_pipeline: bool = True,
) -> Model[List[Doc], List[Floats2d]]:
    """Docs -> List[Floats2d] (n_clauses, nO), no parameters: pooled
    ``doc.tensor`` (mean and max, 2 * ``tensor_width``), the clause cues and,
    with ``use_pipeline``, the pipeline features. ``tensor_width`` is read
    from the first doc with a tensor at initialisation when None; a doc whose
    tensor has another width (or none) gets zeros there."""
    return Model(
        "clause_features", _features_forward, init=_features_init,
        attrs={"clauses_key": clauses_key, "use_pipeline": use_pipeline},
        dims={"nO": None, "tensor_width": tensor_width},
    )


def _features_init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    if not model.has_dim("tensor_width"):
        widths = [doc.tensor.shape[-1] for doc in (X or []) if doc.tensor is not None and doc.tensor.size]
        model.set_dim("tensor_width", widths[0] if widths else 0)
    width = model.get_dim("tensor_width")
    model.set_dim("nO", 2 * width + N_CUES + (N_PIPELINE if model.attrs["use_pipeline"] else 0))


def doc_clause_features(model: Model, doc: Doc) -> numpy.ndarray:
    """Floats2d (n_clauses, nO) of :func:`ClauseFeatures` for one doc."""
    clauses = clause_spans(doc, model.attrs["clauses_key"])
    parts = [_pool(model.ops.to_numpy(doc.tensor) if doc.tensor is not None else None, clauses, model.get_dim("tensor_width")),
             clause_cue_features([c.text for c in clauses])]
    if model.attrs["use_pipeline"]:
        parts.append(pipeline_features(doc, clauses))
    return numpy.hstack(parts)


def _features_forward(model: Model, docs: List[Doc], is_train: bool):
    out = [model.ops.asarray2f(doc_clause_features(model, doc)) for doc in docs]
    return out, lambda dY: NoGradient()


@registry.layers("spacy_rhetoric.ClausePooledTok2Vec.v1")
def ClausePooledTok2Vec(
    tok2vec: Model[List[Doc], List[Floats2d]], features: Model[List[Doc], List[Floats2d]],
) -> Model[List[Doc], List[Floats2d]]:
    """The component's own ``tok2vec`` (trained with it; never the shared
    encoder), mean-pooled over each clause, beside the ``features`` of the
    clause (:func:`ClauseFeatures`): List[Floats2d] (n_clauses, tok2vec
    width + features width). Learns the words of each figure (像, 难道, ...)
    from the data."""
    return Model("clause_pooled_tok2vec", _pooled_forward, init=_pooled_init, layers=[tok2vec, features],
                 attrs={"clauses_key": features.attrs["clauses_key"]}, dims={"nO": None})


def _pooled_init(model: Model, X: Optional[List[Doc]] = None, Y=None) -> None:
    tok2vec, features = model.layers
    tok2vec.initialize(X=X)
    features.initialize(X=X)
    model.set_dim("nO", tok2vec.get_dim("nO") + features.get_dim("nO"))


def _pooled_forward(model: Model, docs: List[Doc], is_train: bool):
    tok2vec, features = model.layers
    tokvecs, backprop_tok2vec = tok2vec(docs, is_train)
    feats = features.predict(docs)
    bounds = [[(c.start, c.end) for c in clause_spans(doc, model.attrs["clauses_key"])] for doc in docs]
    width = tok2vec.get_dim("nO")
    out = []
    for vecs, doc_bounds, f in zip(tokvecs, bounds, feats):
        pooled = model.ops.alloc2f(len(doc_bounds), width)
        for i, (s, e) in enumerate(doc_bounds):
            pooled[i] = vecs[s:e].mean(axis=0)
        out.append(model.ops.xp.hstack([pooled, f]))

    def backprop(d_out: List[Floats2d]):
        d_vecs = []
        for vecs, doc_bounds, d in zip(tokvecs, bounds, d_out):
            dv = model.ops.alloc2f(*vecs.shape)
            for i, (s, e) in enumerate(doc_bounds):
                dv[s:e] += d[i, :width] / max(e - s, 1)
            d_vecs.append(dv)
        backprop_tok2vec(d_vecs)
        return NoGradient()

    return out, backprop


@registry.architectures("spacy_rhetoric.FigurativeTagger.v1")
def build_figurative_tagger(
    features: Model[List[Doc], List[Floats2d]],
    tok2vec: Optional[Model[List[Doc], List[Floats2d]]] = None,
    hidden_width: int = 128,
    lstm_depth: int = 1,
    dropout: float = 0.2,
    nO: Optional[int] = None,
) -> Model[List[Doc], List[Floats2d]]:
    """Clause features (with ``tok2vec``, also its
    :func:`ClausePooledTok2Vec` vectors) -> maxout (``hidden_width``) ->
    packed BiLSTM over the clauses (``lstm_depth`` layers; 0 for none) ->
    dropout -> linear (``nO`` tags, set by the component) -> CRF. Returns
    List[Floats2d] (n_clauses, nO) CRF emissions, with refs ``features``,
    ``output_layer`` and ``crf``. Every doc must hold at least one clause."""
    first = features if tok2vec is None else ClausePooledTok2Vec(tok2vec, features)
    layers: List[Model] = [first, with_array(Maxout(hidden_width, nP=2, dropout=dropout, normalize=True))]
    if lstm_depth > 0:
        layers.append(PackedBiLSTM(hidden_width, hidden_width, depth=lstm_depth, dropout=dropout))
    if dropout > 0:
        layers.append(with_array(Dropout(dropout)))
    output_layer = Linear(nO)
    crf = CRF(nO)
    model = chain(*layers, with_array(output_layer), crf)
    model.set_ref("features", features)
    model.set_ref("output_layer", output_layer)
    model.set_ref("crf", crf)
    return model


def unit_clause_range(clauses: Sequence[Tuple[int, int]], begin: int, end: int) -> Optional[Tuple[int, int]]:
    """The clauses (first, last index, inclusive) that a unit of character
    offsets ``begin..end`` covers: those sharing a character with it. None
    when it touches no clause. ``clauses``: character offsets, in order."""
    hit = [i for i, (s, e) in enumerate(clauses) if s < end and begin < e]
    return (hit[0], hit[-1]) if hit else None
