"""``rhetoric_components``: the rhetorical component span categorizer (CERD CE).

CERD task CE (Liu et al. 2024, ``papers/000``, §3.1): extract the components
of the devices in a sentence: comparator, tenor, vehicle (metaphor),
personification object/content, hyperbole object/content, parallelism marker
(``taxonomy.COMPONENTS``).

This is spaCy's ``SpanCategorizer`` (suggester -> tok2vec -> span pooling ->
Linear -> sigmoid, multi-label) with two changes:

- ``get_loss`` masks the columns of component labels a training doc does not
  annotate (:func:`spacy_rhetoric.annotation.annotated_components`), so that a
  corpus annotating only tenor/vehicle/comparator does not teach the model
  that there are never hyperbole objects;
- decoding keeps, per label, only non-overlapping spans (greedy by score)
  when ``allow_overlap`` is false, since components of one type never nest
  in the corpora (CERD's BIO encoding cannot express it either).
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.attrs import IS_PUNCT, IS_SPACE
from spacy.language import Language
from spacy.pipeline.spancat import SpanCategorizer, Suggester
from spacy.tokens import Doc, Span, SpanGroup
from spacy.training import Example, validate_get_examples
from spacy.util import registry
from thinc.api import Config, Model, get_current_ops
from thinc.types import Floats2d, Ints2d, Ragged

from ..annotation import COMPONENTS_KEY, ParagraphClipper, annotated_components
from ..errors import Errors
from ..scorers.components import score_rhetoric_components
from ..taxonomy import COMPONENT_LABELS
from .parallelism_markers import marker_spans
from .rhetoric_textcat import DEFAULT_MODEL_CONFIG

MARKER = "parallelism_marker"
PARALLELISM = "parallelism"
DEFAULT_MODEL = Config().from_str(DEFAULT_MODEL_CONFIG)["model"]


def _device_regions(doc: Doc, spans_key: str, label: Optional[str] = None) -> List[Tuple[int, int]]:
    """Token ranges where components are looked for: the sentences labelled
    with a device (``label`` when given) in ``doc.spans[spans_key]``
    (written by ``rhetoric_textcat``, which runs first), or the whole doc
    when that group does not exist (training docs, a pipeline without the
    classifier)."""
    if spans_key not in doc.spans:
        return [(0, len(doc))]
    return sorted({(span.start, span.end) for span in doc.spans[spans_key] if label is None or span.label_ == label})


def device_ngrams(docs: Sequence[Doc], sizes: Sequence[int], spans_key: str, ops) -> Ragged:
    """Candidate components: the n-grams of ``sizes`` tokens inside each
    device sentence (:func:`_device_regions`) whose first and last tokens are
    neither punctuation nor whitespace (a component never has either at its
    edges, guidelines §5.1). Ragged with data Ints2d (n_spans, 2) of
    ``(start, end)`` token offsets, lengths Ints1d (n_docs,)."""
    rows: List[Tuple[int, int]] = []
    lengths = []
    for doc in docs:
        # token flags read as one array, not Token by Token
        flags = doc.to_array([IS_PUNCT, IS_SPACE]).reshape((-1, 2)) if len(doc) else numpy.zeros((0, 2))
        edge = (~flags.any(axis=1)).tolist()
        n = len(rows)
        for start, end in _device_regions(doc, spans_key):
            for size in sizes:
                rows.extend((i, i + size) for i in range(start, end - size + 1) if edge[i] and edge[i + size - 1])
        lengths.append(len(rows) - n)
    data = numpy.asarray(rows, dtype="i").reshape((-1, 2))
    return Ragged(ops.asarray2i(data), ops.asarray1i(numpy.asarray(lengths, dtype="i")))


@registry.misc("spacy_rhetoric.device_ngram_suggester.v1")
def build_device_ngram_suggester(sizes: List[int], spans_key: str = "rhetoric") -> Suggester:
    """Suggester of ``rhetoric_components`` (spaCy's ``Suggester``
    protocol): n-grams of ``sizes`` tokens inside the sentences the
    classifier labelled with a device, without punctuation or whitespace at
    their edges (:func:`device_ngrams`). Components belong to a device of
    their sentence (CERD §3.1), so a literal sentence gets none, and the
    span model scores about a third of the n-grams
    ``spacy.ngram_suggester.v1`` gives it. Raises ValueError for an empty or
    non-positive ``sizes``."""
    if not sizes or any(size < 1 for size in sizes):
        raise ValueError(Errors.R112.format(sizes=sizes))

    def suggest(docs: Iterable[Doc], *, ops=None) -> Ragged:
        return device_ngrams(list(docs), sizes, spans_key, ops if ops is not None else get_current_ops())

    return suggest


@Language.factory(
    "rhetoric_components",
    assigns=["doc.spans"],
    default_config={
        "model": DEFAULT_MODEL,
        "suggester": {"@misc": "spacy.ngram_suggester.v1", "sizes": [1, 2, 3]},
        "spans_key": COMPONENTS_KEY,
        "threshold": 0.5,
        "thresholds": {},
        "object_thresholds": {},
        "positive_weights": {},
        "branch_markers": False,
        "allow_overlap": False,
        "scorer": {"@scorers": "spacy_rhetoric.rhetoric_components_scorer.v1"},
    },
    default_score_weights={
        "rhetoric_components_f": 1.0,
        "rhetoric_components_p": 0.0,
        "rhetoric_components_r": 0.0,
    },
)
def make_rhetoric_components(
    nlp: Language,
    name: str,
    model: Model[Tuple[List[Doc], Ragged], Floats2d],
    suggester: Suggester,
    spans_key: str,
    threshold: float,
    thresholds: Dict[str, float],
    object_thresholds: Dict[str, float],
    positive_weights: Dict[str, float],
    branch_markers: bool,
    allow_overlap: bool,
    scorer: Optional[Callable],
) -> "RhetoricComponents":
    """Factory of :class:`RhetoricComponents`."""
    return RhetoricComponents(
        nlp.vocab,
        model,
        suggester,
        name,
        spans_key=spans_key,
        threshold=threshold,
        thresholds=thresholds,
        object_thresholds=object_thresholds,
        positive_weights=positive_weights,
        branch_markers=branch_markers,
        allow_overlap=allow_overlap,
        scorer=scorer,
    )


class RhetoricComponents(SpanCategorizer):
    """Multi-label span categorizer for rhetorical components, writing
    ``doc.spans["rhetoric_components"]`` (``attrs["scores"]`` holds each
    span's probability). Labels are restricted to ``taxonomy.COMPONENT_LABELS``.
    """

    def __init__(
        self,
        vocab,
        model: Model,
        suggester: Suggester,
        name: str = "rhetoric_components",
        *,
        spans_key: str = COMPONENTS_KEY,
        threshold: float = 0.5,
        thresholds: Optional[Dict[str, float]] = None,
        object_thresholds: Optional[Dict[str, float]] = None,
        positive_weights: Optional[Dict[str, float]] = None,
        branch_markers: bool = False,
        allow_overlap: bool = False,
        scorer: Optional[Callable] = score_rhetoric_components,
    ) -> None:
        """``thresholds``: per component label, overriding ``threshold``
        (chosen on dev by ``rhetoric tune thresholds``).
        ``object_thresholds``: per component label, the threshold for a
        span named in advance, as a suggestion request names its object
        (:meth:`scored_spans`, read by :mod:`spacy_rhetoric.llm.verify`);
        chosen on dev by ``rhetoric tune object-thresholds``. It does not
        change ``doc.spans``.
        ``positive_weights``: per component label, the weight of a gold span
        in the loss (:meth:`get_loss`); 1 where not given.
        ``branch_markers``: at prediction, parallelism markers are read off
        the branches the linkers wrote (:mod:`spacy_rhetoric.components.parallelism_markers`,
        the guidelines' definition) instead of taken from the span model;
        such a span's score is 1.0. Raises ValueError
        for a threshold outside [0, 1], a weight that is not positive or a
        label outside the taxonomy."""
        thresholds = dict(thresholds or {})
        object_thresholds = {k: float(v) for k, v in (object_thresholds or {}).items()}
        positive_weights = {k: float(v) for k, v in (positive_weights or {}).items()}
        for key, value in {"threshold": threshold, **thresholds, **object_thresholds}.items():
            if not 0.0 <= value <= 1.0:
                raise ValueError(Errors.R104.format(key=key, value=value))
        for key, value in positive_weights.items():
            if not value > 0:
                raise ValueError(Errors.R111.format(key=key, value=value))
        unknown = [k for k in [*thresholds, *object_thresholds, *positive_weights] if k not in COMPONENT_LABELS]
        if unknown:
            raise ValueError(Errors.R106.format(label=unknown[0], labels=", ".join(COMPONENT_LABELS)))
        super().__init__(
            vocab,
            model,
            suggester,
            name,
            spans_key=spans_key,
            threshold=threshold,
            max_positive=None,
            allow_overlap=True,
            scorer=scorer,
        )
        # spaCy's allow_overlap only applies to single-label decoding; ours
        # is a per-label filter on the multi-label output.
        self.cfg["label_overlap"] = bool(allow_overlap)
        self.cfg["thresholds"] = thresholds
        self.cfg["object_thresholds"] = object_thresholds
        self.cfg["branch_markers"] = bool(branch_markers)
        self.positive_weights = positive_weights

    def add_label(self, label: str) -> int:
        """Add a component label; raises ValueError outside the taxonomy."""
        if label not in COMPONENT_LABELS:
            raise ValueError(Errors.R106.format(label=label, labels=", ".join(COMPONENT_LABELS)))
        return super().add_label(label)

    def label_mask(self, examples: Iterable[Example]) -> numpy.ndarray:
        """Floats2d (n_examples, n_labels): 1 where the example's reference doc
        annotates the label, 0 where the label is unknown for it."""
        rows = []
        for eg in examples:
            known = annotated_components(eg.reference)
            rows.append([1.0 if lab in known else 0.0 for lab in self.labels])
        return numpy.asarray(rows, dtype="f").reshape((-1, len(self.labels)))

    def get_loss(self, examples: Iterable[Example], spans_scores: Tuple[Ragged, Floats2d]) -> Tuple[float, Floats2d]:
        """spaCy's spancat loss with unannotated labels masked and gold spans
        weighted.

        spans_scores: suggested spans (Ragged, one row per candidate) and
        their scores Floats2d (n_candidates, n_labels). Returns (loss,
        gradient): gradient = (scores - target) * mask * weight, where mask is
        0 in the columns of labels the candidate's doc does not annotate and
        weight is ``positive_weights[label]`` where the candidate is a gold
        span of the label, else 1 (the positive-class weight of a weighted
        binary loss: a personification content is one of hundreds of
        candidate n-grams of its sentence). Loss = sum(diff^2 * mask * weight).
        """
        examples = list(examples)
        spans, scores = spans_scores
        _, diff = super().get_loss(examples, spans_scores)
        per_doc = self.label_mask(examples)
        lengths = self.model.ops.to_numpy(spans.lengths).astype("i")
        weight = numpy.repeat(per_doc, lengths, axis=0)
        if self.positive_weights:
            # spaCy's multi-label gradient is scores - target
            target = self.model.ops.to_numpy(scores - diff) > 0.5
            per_label = numpy.asarray([self.positive_weights.get(lab, 1.0) for lab in self.labels], dtype="f")
            weight = weight * numpy.where(target, per_label[None, :], 1.0)
        weight = self.model.ops.asarray2f(weight)
        return float((diff**2 * weight).sum()), diff * weight

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[List[str]] = None,
    ) -> None:
        """Labels default to those the examples annotate (declared in
        ``user_data["rhetoric_annotated"]["components"]`` or present);
        otherwise as spaCy's spancat. Raises TypeError (spaCy E930) if
        ``get_examples`` is not a callable returning Examples."""
        validate_get_examples(get_examples, "RhetoricComponents.initialize")
        if labels is None:
            found = set()
            for eg in get_examples():
                found.update(annotated_components(eg.reference))
            labels = [lab for lab in COMPONENT_LABELS if lab in found]
        super().initialize(get_examples, nlp=nlp, labels=labels)

    def _label_thresholded(self, doc: Doc, indices: Ints2d, scores: Floats2d) -> SpanGroup:
        """spaCy's multi-label decoding (``SpanCategorizer``, ``max_positive``
        None) with each label's own threshold (``cfg["thresholds"]``, else
        ``cfg["threshold"]``): a span per (candidate, label) whose probability
        reaches it, in candidate then label order. ``indices`` Ints2d
        (n_candidates, 2) token offsets, ``scores`` Floats2d (n_candidates,
        n_labels). The candidates over threshold are found with one array
        comparison; spaCy's loop visits each of them in Python."""
        group = SpanGroup(doc, name=self.key)
        if scores.size == 0:
            return group
        scores = self.model.ops.to_numpy(scores)
        indices = self.model.ops.to_numpy(indices)
        thresholds = self.cfg.get("thresholds") or {}
        base = self.cfg["threshold"]
        rows, cols = _reaching(scores, [thresholds.get(label, base) for label in self.labels])
        labels = self.labels
        for i, j in zip(rows.tolist(), cols.tolist()):
            group.append(Span(doc, int(indices[i, 0]), int(indices[i, 1]), label=labels[j]))
        group.attrs["scores"] = numpy.asarray(scores[rows, cols], dtype="f")
        return group

    def scored_spans(
        self, docs: Sequence[Doc], predictions: Tuple[Ragged, Floats2d], thresholds: Optional[Dict[str, float]] = None
    ) -> List[List[Dict[str, Any]]]:
        """For each doc, the suggested spans whose probability of a label in
        ``thresholds`` (default ``cfg["object_thresholds"]``) reaches that
        label's threshold, as ``{"label", "start", "end", "text", "score"}``
        with character offsets, in candidate then label order.
        ``predictions`` is :meth:`predict`'s: indices Ragged of Ints2d
        (n_candidates, 2) token offsets, one row block per doc, and scores
        Floats2d (n_candidates, n_labels). Unlike ``doc.spans``, no span
        is dropped for overlapping a higher-scoring one: the caller asks
        about one span it names in advance."""
        indices, scores = predictions
        limits = self.cfg.get("object_thresholds", {}) if thresholds is None else thresholds
        scores = self.model.ops.to_numpy(scores)
        # a label not asked about is never reached
        rows, cols = _reaching(scores, [limits.get(label, numpy.inf) for label in self.labels])
        spans = self.model.ops.to_numpy(indices.dataXd)
        ends = numpy.cumsum(self.model.ops.to_numpy(indices.lengths))
        out: List[List[Dict[str, Any]]] = [[] for _ in docs]
        for i, j, score in zip(rows.tolist(), cols.tolist(), scores[rows, cols].tolist()):
            d = int(numpy.searchsorted(ends, i, side="right"))  # the doc whose block holds row i
            span = docs[d][int(spans[i, 0]) : int(spans[i, 1])]
            out[d].append({"label": self.labels[j], "start": span.start_char, "end": span.end_char,
                           "text": span.text, "score": float(score)})
        return out

    def _make_span_group_multilabel(self, doc: Doc, indices: Ints2d, scores: Floats2d) -> SpanGroup:
        """Spans with probability >= threshold, clipped to one paragraph
        without whitespace at their edges; without ``label_overlap`` a span is
        dropped when a higher-scoring span of the same label overlaps it."""
        group = _clip_group(doc, self._label_thresholded(doc, indices, scores), self.key)
        if self.cfg.get("branch_markers", False) and MARKER in self.labels:
            group = _with_branch_markers(doc, group)
        if self.cfg.get("label_overlap", True) or len(group) == 0:
            return group
        span_scores = group.attrs["scores"]
        order = numpy.argsort(-span_scores, kind="stable")
        taken = {}
        kept: List[Tuple[Span, float]] = []
        for i in order:
            span = group[int(i)]
            occupied = taken.setdefault(span.label_, numpy.zeros(len(doc), dtype=bool))
            if occupied[span.start : span.end].any():
                continue
            occupied[span.start : span.end] = True
            kept.append((span, float(span_scores[i])))
        kept.sort(key=lambda x: (x[0].start, x[0].end, x[0].label_))
        out = SpanGroup(doc, name=self.key, spans=[s for s, _ in kept])
        out.attrs["scores"] = numpy.asarray([sc for _, sc in kept], dtype="f")
        return out


def _with_branch_markers(doc: Doc, group: SpanGroup) -> SpanGroup:
    """``group`` with its parallelism markers replaced by those read off the
    doc's parallelism branches (:func:`marker_spans`), inside sentences the
    classifier labelled ``parallelism`` (all of them when it did not run)."""
    keep = [span.label_ != MARKER for span in group]
    kept = _keep(group, keep)
    regions = _device_regions(doc, "rhetoric", label=PARALLELISM)
    markers = [m for m in marker_spans(doc, label=MARKER) if any(s <= m.start and m.end <= e for s, e in regions)]
    spans = sorted([*kept, *markers], key=lambda sp: (sp.start, sp.end, sp.label_))
    scores = {(sp.start, sp.end, sp.label_): float(sc) for sp, sc in zip(kept, kept.attrs["scores"])}
    out = SpanGroup(doc, name=group.name, spans=spans)
    out.attrs["scores"] = numpy.asarray([scores.get((sp.start, sp.end, sp.label_), 1.0) for sp in spans], dtype="f")
    return out


def _keep(group: SpanGroup, keep: Sequence[bool]) -> SpanGroup:
    """The spans of ``group`` where ``keep`` is true, with their scores."""
    scores = group.attrs.get("scores")
    out = SpanGroup(group.doc, name=group.name, spans=[s for s, k in zip(group, keep) if k])
    out.attrs["scores"] = numpy.asarray([sc for sc, k in zip(scores, keep) if k], dtype="f")
    return out


def _reaching(scores: numpy.ndarray, limits: Sequence[float]) -> Tuple[numpy.ndarray, numpy.ndarray]:
    """Row and column indices, in row then column order, where ``scores``
    Floats2d (n_candidates, n_labels) reaches its column's limit. The
    limits are cast to the scores' dtype, as spaCy compares a float32
    score with a Python float threshold. No candidates (a (0, 0) array
    when no doc has one): none."""
    if scores.size == 0:
        return numpy.zeros(0, dtype="i"), numpy.zeros(0, dtype="i")
    return numpy.nonzero(scores >= numpy.asarray(limits, dtype=scores.dtype))


def _clip_group(doc: Doc, group: SpanGroup, key: str) -> SpanGroup:
    """``group`` with every span clipped by :func:`clip_to_paragraph`;
    spans of only whitespace are dropped, and where clipping makes two spans
    of a label equal, the higher-scoring one is kept."""
    scores = group.attrs.get("scores")
    best: Dict[Tuple[int, int, str], float] = {}
    clip = ParagraphClipper(doc)
    for i, span in enumerate(group):
        clipped = clip(span.start, span.end)
        if clipped is None:
            continue
        score = float(scores[i]) if scores is not None else 1.0
        key_ = (*clipped, span.label_)
        best[key_] = max(score, best.get(key_, score))
    kept = sorted(best.items())
    out = SpanGroup(doc, name=key, spans=[Span(doc, s, e, label=label) for (s, e, label), _ in kept])
    out.attrs["scores"] = numpy.asarray([sc for _, sc in kept], dtype="f")
    return out

