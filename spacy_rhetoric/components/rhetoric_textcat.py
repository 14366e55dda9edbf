"""``rhetoric_textcat``: per-sentence multi-label rhetoric classification.

CERD's tasks RC, FC and CC (Liu et al. 2024, ``papers/000``, §3.1, §4.1) as
one spaCy component: every sentence of a Doc gets a score for each
``"level/label"`` of the taxonomy (coarse, form, content; 30 outputs) from one
model, and a hierarchy-respecting decoder turns scores into labels.

Model: spaCy's own ``spacy.SpanCategorizer.v1`` applied to the sentence spans
(tok2vec -> mean+max pooling over the sentence's tokens -> Linear -> sigmoid),
so the tok2vec can be shared with ``rhetoric_components``.

Training masks labels a doc does not annotate
(:func:`spacy_rhetoric.annotation.annotated_labels`): their gradient is zero,
so corpora that annotate different label subsets can be combined.
"""
from __future__ import annotations

from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span, SpanGroup
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from spacy.util import registry
from thinc.api import Config, Model, Optimizer, get_current_ops, set_dropout_rate
from thinc.types import Floats2d, Ragged

from ..annotation import (
    ALL_LEVEL_LABELS,
    DISJUNCTIONS_KEY,
    LEVEL_SPAN_KEYS,
    annotated_labels,
    gold_sentence_labels,
    mark_one_sentence,
    sentence_spans,
)
from ..errors import Errors
from ..extensions import SCORES  # importing it registers Span._.rhetoric
from ..scorers.classification import score_rhetoric_classification
from ..spangroups import CROSS_PARAGRAPH, IN_PARAGRAPH, parallelism_groups
from ..taxonomy import LEVELS, LITERAL, children

#: The coarse device the linker rule sets (see :class:`RhetoricTextCategorizer`).
PARALLELISM = "parallelism"

#: ``(row, label columns)``: at least one of the labels is true in that row.
Disjunctions = List[Tuple[int, List[int]]]

DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy.SpanCategorizer.v1"
scorer = {"@layers": "spacy.LinearLogistic.v1"}

[model.reducer]
@layers = "spacy.mean_max_reducer.v1"
hidden_size = 128

[model.tok2vec]
@architectures = "spacy.Tok2Vec.v2"

[model.tok2vec.embed]
@architectures = "spacy.MultiHashEmbed.v2"
width = 96
rows = [5000, 2500, 2500]
attrs = ["NORM", "PREFIX", "SUFFIX"]
include_static_vectors = false

[model.tok2vec.encode]
@architectures = "spacy.MaxoutWindowEncoder.v2"
width = ${model.tok2vec.embed.width}
window_size = 1
maxout_pieces = 3
depth = 4
"""
DEFAULT_MODEL = Config().from_str(DEFAULT_MODEL_CONFIG)["model"]



@Language.factory(
    "rhetoric_textcat",
    assigns=["doc.spans", "span._.rhetoric"],
    default_config={
        "model": DEFAULT_MODEL,
        "threshold": 0.5,
        "thresholds": {},
        "fine_fallback": True,
        "merge": False,
        "positive_weights": {},
        "parallelism_key": "parallelism",
        "parallelism_kinds": ["in_paragraph", "cross_paragraph"],
        "suggester": {"@misc": "spacy_rhetoric.sentence_suggester.v1"},
        "scorer": {"@scorers": "spacy_rhetoric.rhetoric_classification_scorer.v1"},
    },
    default_score_weights={
        "rhetoric_coarse_micro_f": 1.0,
        "rhetoric_coarse_micro_p": 0.0,
        "rhetoric_coarse_micro_r": 0.0,
        "rhetoric_form_micro_f": 0.0,
        "rhetoric_content_micro_f": 0.0,
    },
)
def make_rhetoric_textcat(
    nlp: Language,
    name: str,
    model: Model[Tuple[List[Doc], Ragged], Floats2d],
    threshold: float,
    thresholds: Dict[str, float],
    fine_fallback: bool,
    merge: bool,
    positive_weights: Dict[str, float],
    parallelism_key: Optional[str],
    parallelism_kinds: List[str],
    suggester: Callable[..., Ragged],
    scorer: Optional[Callable],
) -> "RhetoricTextCategorizer":
    """Factory of :class:`RhetoricTextCategorizer` (see its docstring)."""
    return RhetoricTextCategorizer(
        nlp.vocab,
        model,
        name,
        threshold=threshold,
        thresholds=thresholds,
        fine_fallback=fine_fallback,
        merge=merge,
        positive_weights=positive_weights,
        parallelism_key=parallelism_key,
        parallelism_kinds=parallelism_kinds,
        suggester=suggester,
        scorer=scorer,
    )


def merge_decisions(
    earlier: Dict[str, Dict[str, float]], later: Dict[str, Dict[str, float]]
) -> Dict[str, Dict[str, float]]:
    """Union of two decoded ``sent._.rhetoric`` dicts of one sentence, for
    classifiers trained on corpora that annotate different labels (e.g. one
    on the simile corpus, one on PSE-I). A label accepted by either is kept
    with the higher score; the sentence is ``literal`` only if both say so,
    with the lower literal score, since either model's device makes it
    non-literal. ``"scores"`` (every label's probability) is merged the same
    way: the higher probability of a device, the lower of ``literal``."""
    devices = {**earlier.get("coarse", {}), **later.get("coarse", {})}
    devices.pop(LITERAL, None)
    result: Dict[str, Any] = {}
    for level in LEVELS:
        a, b = earlier.get(level, {}), later.get(level, {})
        if devices:
            merged = {k: max(a.get(k, 0.0), b.get(k, 0.0)) for k in {**a, **b} if k != LITERAL}
        else:
            merged = {LITERAL: min(a.get(LITERAL, 1.0), b.get(LITERAL, 1.0))}
        result[level] = merged
    if SCORES in earlier or SCORES in later:
        result[SCORES] = {}
        for level in LEVELS:
            a, b = earlier.get(SCORES, {}).get(level, {}), later.get(SCORES, {}).get(level, {})
            pick = {k: (min if k == LITERAL else max)(a[k], b[k]) for k in a if k in b}
            result[SCORES][level] = {**a, **b, **pick}
    return result


def _without_edge_space(sent: Span) -> Tuple[int, int]:
    """``(start, end)`` of a sentence without the whitespace tokens at its
    edges (the line break that ends a paragraph belongs to its last
    sentence; the training corpora hold one paragraph per doc and never
    show one); a sentence of whitespace only keeps all its tokens."""
    start, end = sent.start, sent.end
    while start < end and sent.doc[start].is_space:
        start += 1
    while end > start and sent.doc[end - 1].is_space:
        end -= 1
    return (start, end) if start < end else (sent.start, sent.end)


def sentence_indices(docs: Sequence[Doc], ops) -> Ragged:
    """Token offsets of every sentence that the classifier pools over:
    Ragged with data Ints2d (n_sentences, 2) of ``(start, end)`` (whitespace
    at a sentence's edges left out) and lengths Ints1d (n_docs,). A
    suggester in spaCy's sense (``Suggester.__call__(docs, *, ops)``),
    registered as ``spacy_rhetoric.sentence_suggester.v1``."""
    rows: List[Tuple[int, int]] = []
    lengths = []
    for doc in docs:
        sents = sentence_spans(doc)
        rows.extend(_without_edge_space(s) for s in sents)
        lengths.append(len(sents))
    data = numpy.asarray(rows, dtype="i").reshape((-1, 2))
    return Ragged(ops.asarray2i(data), ops.asarray1i(numpy.asarray(lengths, dtype="i")))


@registry.misc("spacy_rhetoric.sentence_suggester.v1")
def build_sentence_suggester() -> Callable[..., Ragged]:
    """The suggester of ``rhetoric_textcat``: every sentence of a doc
    (:func:`sentence_indices`; compare spacy-experimental's
    ``spacy-experimental.sentence_suggester.v1``)."""

    def suggest(docs: Iterable[Doc], *, ops=None) -> Ragged:
        docs = list(docs)
        return sentence_indices(docs, ops if ops is not None else get_current_ops())

    return suggest


class RhetoricTextCategorizer(TrainablePipe):
    """Classify every sentence at the coarse, form and content levels.

    Outputs, per sentence ``sent`` of ``doc.sents`` (the whole doc when no
    sentence starts are set, which is then marked as one sentence; nothing
    for an empty doc):

    - ``sent._.rhetoric`` = ``{"coarse": {label: score}, "form": {...},
      "content": {...}, "scores": {"coarse": {label: score}, "form": {...},
      "content": {...}}}``: under each level the accepted labels (the
      decoding below) with their probabilities, as the analysis record's
      sentences hold them; under ``"scores"`` the probability of every
      label of each level that the component was trained on
      (:meth:`label_scores`), accepted or not;
    - ``doc.spans["rhetoric"]``, ``["rhetoric_form"]``, ``["rhetoric_content"]``:
      one span per accepted non-literal label of a sentence, with exactly
      the sentence's ``start`` and ``end`` (the whitespace that ends a
      paragraph included, as in ``doc.sents``; a sentence of whitespace
      only gets none), ``attrs["scores"]`` aligned with the spans.

    Decoding (hierarchy, CERD §3.1 and the correct mapping of §5.1):
    1. coarse devices with probability >= their threshold are accepted;
       none accepted -> the sentence is ``literal`` alone;
    2. at each fine level, a label is accepted only under an accepted coarse
       parent and with probability >= its threshold; if ``fine_fallback`` and
       none passes, the parent's most probable child is taken;
    3. only labels seen annotated during ``initialize`` are ever output
       (``cfg["trained_labels"]``); literal's score is its own output when
       trained, else ``1 - max(device probabilities)``.
    4. the linker rule: a sentence that overlaps a branch in
       ``doc.spans[parallelism_key]`` (written by a ``parallelism_linker``
       that runs before this component) is labelled ``parallelism`` with its
       most probable form and content under it, whatever its probability
       (the score kept is the classifier's own, so it can be below the
       threshold); a sentence the classifier labels ``parallelism`` keeps
       that label without a branch (the linker missed the group; on the PSE-I
       dev essays this union beat "parallelism only with a branch": sentence
       F1 0.621 vs 0.611 for ``zh_rhetoric``, 0.748 vs 0.735 for
       ``zh_rhetoric_trf``). So no branch ever lies in a sentence that says
       it is not parallel. ``parallelism_kinds`` says which parallelisms
       count (default both ``in_paragraph`` and ``cross_paragraph``; only
       ``in_paragraph`` reproduces the team annotation's convention, which
       labels the branches of PSE-I's in-paragraph parallelisms);
       ``parallelism_key`` None turns the rule off.
    Thresholds: ``threshold`` for all, overridden per ``"level/label"`` by
    ``thresholds``.
    With ``merge``, decisions already in ``sent._.rhetoric`` (from an earlier
    ``rhetoric_textcat`` of the pipeline, trained on another corpus) are
    combined with this component's by :func:`merge_decisions`, and the span
    groups hold the union.
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "rhetoric_textcat",
        *,
        threshold: float = 0.5,
        thresholds: Optional[Dict[str, float]] = None,
        fine_fallback: bool = True,
        merge: bool = False,
        positive_weights: Optional[Dict[str, float]] = None,
        parallelism_key: Optional[str] = "parallelism",
        parallelism_kinds: Sequence[str] = (IN_PARAGRAPH, CROSS_PARAGRAPH),
        suggester: Optional[Callable[..., Ragged]] = None,
        scorer: Optional[Callable] = score_rhetoric_classification,
    ) -> None:
        """Raises ValueError for a threshold outside [0, 1], a positive weight
        <= 0 or an unknown label key."""
        thresholds = dict(thresholds or {})
        for key, value in [("threshold", threshold), *thresholds.items()]:
            if key != "threshold" and key not in ALL_LEVEL_LABELS:
                raise ValueError(Errors.R110.format(key=key, setting="thresholds"))
            if not 0.0 <= float(value) <= 1.0:
                raise ValueError(Errors.R104.format(key=key, value=value))
        positive_weights = {k: float(v) for k, v in (positive_weights or {}).items()}
        for key, value in positive_weights.items():
            if key not in ALL_LEVEL_LABELS:
                raise ValueError(Errors.R110.format(key=key, setting="positive_weights"))
            if not value > 0:
                raise ValueError(Errors.R111.format(key=key, value=value))
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        # a config setting, kept out of cfg so that loading weights trained
        # without it (from_bytes/from_disk) cannot switch it off
        self.merge = bool(merge)
        # a training setting only, kept out of cfg like merge
        self.positive_weights = positive_weights
        # a config setting (the linker rule), kept out of cfg like merge
        self.parallelism_key = parallelism_key
        self.parallelism_kinds = tuple(parallelism_kinds)
        # which spans are classified: the sentences (a registered suggester)
        self.suggester = suggester or build_sentence_suggester()
        self.cfg: Dict[str, Any] = {
            "labels": [],
            "trained_labels": [],
            "threshold": float(threshold),
            "thresholds": thresholds,
            "fine_fallback": bool(fine_fallback),
        }

    @property
    def labels(self) -> Tuple[str, ...]:
        """The ``"level/label"`` outputs, in model column order."""
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    def add_label(self, label: str) -> int:
        """Add a ``"level/label"`` output; returns 1 if new, 0 if present.
        Raises ValueError for a key outside the taxonomy."""
        if label not in ALL_LEVEL_LABELS:
            raise ValueError(Errors.R105.format(label=label))
        if label in self.labels:
            return 0
        self._allow_extra_label()
        self.cfg["labels"].append(label)
        self.vocab.strings.add(label)
        return 1

    # --- prediction -------------------------------------------------------

    def predict(self, docs: Iterable[Doc]) -> Tuple[Ragged, Floats2d]:
        """Sentence offsets (Ragged, from the suggester) and their
        probabilities Floats2d (n_sentences, n_labels)."""
        docs = list(docs)
        indices = self.suggester(docs, ops=self.model.ops)
        if indices.lengths.sum() == 0:
            return indices, self.model.ops.alloc2f(0, len(self.labels))
        return indices, self.model.predict((docs, indices))

    def set_annotations(self, docs: Iterable[Doc], indices_scores: Tuple[Ragged, Floats2d]) -> None:
        """Write ``sent._.rhetoric`` and the three sentence span groups."""
        indices, scores = indices_scores
        scores = self.model.ops.to_numpy(scores)
        lengths = self.model.ops.to_numpy(indices.lengths)
        layout = self._score_layout()
        offset = 0
        for doc, n in zip(docs, lengths):
            mark_one_sentence(doc)
            groups = {lv: ([], []) for lv in LEVELS}
            branches = self._branch_offsets(doc)
            space = doc.to_array("IS_SPACE").astype(bool) if len(doc) else numpy.zeros(0, dtype=bool)
            # rows follow sentence_spans(doc); the model pooled each without
            # its edge whitespace, the labels go on the sentence itself
            for row, sent in zip(range(offset, offset + int(n)), sentence_spans(doc)):
                holds_branch = any(s < sent.end and sent.start < e for s, e in branches)
                decoded: Dict[str, Any] = self.decode(scores[row], force=(PARALLELISM,) if holds_branch else ())
                decoded[SCORES] = self._label_scores(scores[row], layout)
                if self.merge and sent._.rhetoric:
                    decoded = merge_decisions(sent._.rhetoric, decoded)
                sent._.rhetoric = decoded
                # a sentence of whitespace only carries no device
                if space[sent.start:sent.end].all():
                    continue
                for level in LEVELS:
                    for label, score in decoded[level].items():
                        if label != LITERAL:
                            groups[level][0].append(Span(doc, sent.start, sent.end, label=label))
                            groups[level][1].append(score)
            offset += int(n)
            for level, (spans, span_scores) in groups.items():
                group = SpanGroup(doc, name=LEVEL_SPAN_KEYS[level], spans=spans)
                group.attrs["scores"] = numpy.asarray(span_scores, dtype="f")
                doc.spans[LEVEL_SPAN_KEYS[level]] = group

    def _score_layout(self) -> Dict[str, List[Tuple[str, Optional[int]]]]:
        """Per level, ``(label, column)`` of every trained label of that level
        in column order, then ``(literal, column)``; column None where
        ``literal`` was not trained (its score is then derived, see
        :meth:`decode`)."""
        trained = set(self.cfg["trained_labels"])
        layout: Dict[str, List[Tuple[str, Optional[int]]]] = {lv: [] for lv in LEVELS}
        literal: Dict[str, Optional[int]] = {lv: None for lv in LEVELS}
        for i, key in enumerate(self.labels):
            if key not in trained:
                continue
            level, label = key.split("/", 1)
            if label == LITERAL:
                literal[level] = i
            elif level in layout:
                layout[level].append((label, i))
        for level in LEVELS:
            layout[level].append((LITERAL, literal[level]))
        return layout

    def _label_scores(self, probs: numpy.ndarray, layout: Dict[str, List[Tuple[str, Optional[int]]]]) -> Dict[str, Dict[str, float]]:
        row = probs.tolist()
        devices = [row[i] for _, i in layout["coarse"] if i is not None]
        # literal untrained: one minus the highest device probability, as decode
        derived = 1.0 - max(devices, default=0.0)
        return {level: {label: (row[i] if i is not None else derived) for label, i in cols}
                for level, cols in layout.items()}

    def label_scores(self, probs: numpy.ndarray) -> Dict[str, Dict[str, float]]:
        """Every label's probability for one sentence, accepted or not.

        probs: Floats1d (n_labels,) in the order of :attr:`labels`.
        Returns ``{"coarse": {label: p}, "form": {...}, "content": {...}}``
        with, per level, the labels seen annotated during ``initialize``
        (``cfg["trained_labels"]``; the others' outputs were never trained)
        in column order, then ``literal``: its own output when trained,
        else ``1 - max(coarse device probabilities)``, the score
        :meth:`decode` gives a literal sentence. Probabilities are the
        model's sigmoid outputs, in [0, 1]; the labels :meth:`decode`
        accepts carry the same values.
        """
        return self._label_scores(probs, self._score_layout())

    def _branch_offsets(self, doc: Doc) -> List[Tuple[int, int]]:
        """Token offsets of the branches the linker wrote (the linker rule)."""
        if not self.parallelism_key or self.parallelism_key not in doc.spans:
            return []
        return [(s.start, s.end) for kind, spans in parallelism_groups(doc, self.parallelism_key)
                if kind in self.parallelism_kinds for s in spans]

    def _threshold(self, key: str) -> float:
        return float(self.cfg["thresholds"].get(key, self.cfg["threshold"]))

    def decode(self, probs: numpy.ndarray, force: Sequence[str] = ()) -> Dict[str, Dict[str, float]]:
        """Hierarchy-respecting labels of one sentence.

        probs: Floats1d (n_labels,) in the order of :attr:`labels`.
        force: coarse devices accepted whatever their probability (the
        linker rule), each with its most probable trained fine labels.
        Returns ``{"coarse": {label: score}, "form": {...}, "content": {...}}``
        (rules in the class docstring).
        """
        col = {key: i for i, key in enumerate(self.labels)}
        trained = set(self.cfg["trained_labels"])

        def prob(key: str) -> float:
            return float(probs[col[key]])

        # column order, not set order: the same dicts and span order in every process
        devices = [k for k in self.labels if k in trained and k.startswith("coarse/") and k != f"coarse/{LITERAL}"]
        coarse = {k.split("/", 1)[1]: prob(k) for k in devices if prob(k) >= self._threshold(k) or k.split("/", 1)[1] in force}
        result: Dict[str, Dict[str, float]] = {lv: {} for lv in LEVELS}
        if not coarse:
            for level in LEVELS:
                lit = f"{level}/{LITERAL}"
                if lit in trained:
                    result[level][LITERAL] = prob(lit)
                else:
                    result[level][LITERAL] = 1.0 - max((prob(k) for k in devices), default=0.0)
            return result
        result["coarse"] = coarse
        for level in ("form", "content"):
            for device in coarse:
                kids = [f"{level}/{c}" for c in children(level, device) if f"{level}/{c}" in trained]
                if not kids:
                    continue
                accepted = [k for k in kids if prob(k) >= self._threshold(k)]
                if not accepted and (self.cfg["fine_fallback"] or device in force):
                    accepted = [max(kids, key=prob)]
                for key in accepted:
                    result[level][key.split("/", 1)[1]] = prob(key)
        return result

    # --- training ---------------------------------------------------------

    def _example_sentences(self, eg: Example) -> Tuple[List[Tuple[int, int]], List[Span]]:
        """Gold sentences of ``eg.reference`` and their token offsets on
        ``eg.predicted`` (via the alignment when the tokenisations differ;
        sentences that do not align are dropped)."""
        ref_sents = sentence_spans(eg.reference)
        same = len(eg.predicted) == len(eg.reference) and all(
            a.text == b.text for a, b in zip(eg.predicted, eg.reference)
        )
        if same:
            return [(s.start, s.end) for s in ref_sents], ref_sents
        offsets, kept = [], []
        for sent in ref_sents:
            aligned = eg.get_aligned_spans_y2x([sent], allow_overlap=True)
            if aligned:
                offsets.append((aligned[0].start, aligned[0].end))
                kept.append(sent)
        return offsets, kept

    def _targets(self, examples: Sequence[Example]) -> Tuple[Ragged, numpy.ndarray, numpy.ndarray, Disjunctions]:
        """Sentence offsets on the predicted docs, gold targets and the
        annotation mask, both Floats2d (n_sentences, n_labels), and the
        disjunctions: ``(row, columns)`` pairs saying that at least one of
        those labels is true for that sentence (``DISJUNCTIONS_KEY``; such a
        sentence is not literal)."""
        col = {key: i for i, key in enumerate(self.labels)}
        rows, lengths, targets, masks = [], [], [], []
        disjunctions: Disjunctions = []
        for eg in examples:
            annotated = annotated_labels(eg.reference)
            mask = numpy.zeros(len(self.labels), dtype="f")
            for key in annotated:
                if key in col:
                    mask[col[key]] = 1.0
            known = [[col[k] for k in group if k in col] for group in eg.reference.user_data.get(DISJUNCTIONS_KEY, ())]
            known = [group for group in known if group]
            offsets, sents = self._example_sentences(eg)
            rows.extend(offsets)
            lengths.append(len(offsets))
            for sent in sents:
                target = numpy.zeros(len(self.labels), dtype="f")
                for key in gold_sentence_labels(eg.reference, sent, annotated):
                    if key in col:
                        target[col[key]] = 1.0
                if known:
                    # some device is present: no level is literal
                    for level in LEVELS:
                        if f"{level}/{LITERAL}" in col:
                            target[col[f"{level}/{LITERAL}"]] = 0.0
                    disjunctions.extend((len(targets), group) for group in known)
                targets.append(target)
                masks.append(mask)
        ops = self.model.ops
        indices = Ragged(
            ops.asarray2i(numpy.asarray(rows, dtype="i").reshape((-1, 2))),
            ops.asarray1i(numpy.asarray(lengths, dtype="i")),
        )
        shape = (len(targets), len(self.labels))
        target_arr = numpy.asarray(targets, dtype="f").reshape(shape)
        mask_arr = numpy.asarray(masks, dtype="f").reshape(shape)
        return indices, target_arr, mask_arr, disjunctions

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """One gradient step on the gold sentences of ``examples``."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "RhetoricTextCategorizer.update")
        indices, target, mask, disjunctions = self._targets(examples)
        if indices.lengths.sum() == 0:
            return losses
        set_dropout_rate(self.model, drop)
        docs = [eg.predicted for eg in examples]
        scores, backprop = self.model.begin_update((docs, indices))
        loss, d_scores = self.get_loss(examples, scores, target=target, mask=mask, disjunctions=disjunctions)
        backprop(d_scores)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(
        self,
        examples: Iterable[Example],
        scores: Floats2d,
        *,
        target: Optional[numpy.ndarray] = None,
        mask: Optional[numpy.ndarray] = None,
        disjunctions: Optional[Disjunctions] = None,
    ) -> Tuple[float, Floats2d]:
        """Masked, weighted squared-error loss of sigmoid outputs, as spaCy's spancat.

        scores: Floats2d (n_sentences, n_labels) over the gold sentences of
        ``examples``. Gradient = (scores - target) * mask * weight, where mask
        is 0 for labels the example's doc does not annotate, and weight is
        ``positive_weights[label]`` where the target is 1 (else 1): the
        positive-class weight of a weighted binary loss, for labels with few
        positive sentences (personification, hyperbole). A disjunction ("at least
        one of these labels", e.g. CMC's metaphor-or-personification) trains
        its currently most probable label towards 1 and leaves the others
        masked: the max approximation of the disjunction's probability.
        Returns (loss, gradient).
        """
        if target is None or mask is None:
            _, target, mask, disjunctions = self._targets(list(examples))
        # gold positives only: a disjunction's guessed label keeps weight 1
        positive_weight = self._positive_weight_matrix(target)
        if disjunctions:
            target, mask = target.copy(), mask.copy()
            host = self.model.ops.to_numpy(scores)
            for row, cols in disjunctions:
                best = cols[int(numpy.argmax(host[row, cols]))]
                target[row, best] = 1.0
                mask[row, best] = 1.0
        ops = self.model.ops
        weight = mask * positive_weight
        diff = scores - ops.asarray2f(target)
        d_scores = diff * ops.asarray2f(weight)
        return float((diff**2 * ops.asarray2f(weight)).sum()), d_scores

    def _positive_weight_matrix(self, target: numpy.ndarray) -> numpy.ndarray:
        """Floats2d like ``target``: ``positive_weights[label]`` where the target is 1, else 1."""
        per_label = numpy.asarray([self.positive_weights.get(label, 1.0) for label in self.labels], dtype=target.dtype)
        return numpy.where(target > 0.5, per_label[None, :], numpy.ones_like(target))

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[List[str]] = None,
    ) -> None:
        """Add the outputs (``labels``, default all 30 ``"level/label"`` keys),
        record which of them the examples annotate (``cfg["trained_labels"]``)
        and initialise the model on up to 10 examples.

        Raises TypeError (spaCy E930) if ``get_examples`` is not a callable
        returning Examples, ValueError if no example annotates any label.
        """
        validate_get_examples(get_examples, "RhetoricTextCategorizer.initialize")
        for key in labels if labels is not None else ALL_LEVEL_LABELS:
            self.add_label(key)
        trained = set()
        sample: List[Example] = []
        for eg in get_examples():
            trained.update(annotated_labels(eg.reference))
            if len(sample) < 10:
                sample.append(eg)
        trained &= set(self.labels)
        if not trained:
            raise ValueError(Errors.R103.format(name=self.name))
        self.cfg["trained_labels"] = sorted(trained)
        if sample:
            indices, target, _, _ = self._targets(sample)
            docs = [eg.predicted for eg in sample]
            self.model.initialize(X=(docs, indices), Y=self.model.ops.asarray2f(target))
        else:
            self.model.initialize()
