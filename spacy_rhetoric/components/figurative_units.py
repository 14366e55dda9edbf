"""The ``figurative_units`` component: ConFiguRe's figure recognition.

A figurative unit is the smallest run of clauses that carries one figure of
speech, of 12 types (Zhu et al. 2022, ``papers/001`` §3.1; DESIGN §3.2). The
component tags the ``clause_segmenter``'s clauses with B-X/I-X/O (X one of
:data:`spacy_rhetoric.taxonomy.CONFIGURE_FIGURES`) and decodes them with a
linear-chain CRF (Viterbi, transitions constrained to the typed BIO scheme),
the E2ECRF baseline of §4.3. Architecture:
:mod:`spacy_rhetoric.ml.figurative_tagger` (it reads the pipeline's
``doc.tensor`` and never trains the shared encoder).

Output: ``doc.spans["figurative_units"]`` (labels the English names; the
group's ``attrs["label_zh"]`` maps them to the Chinese names), each unit from
the start of its first clause to the end of its last. Units never overlap
(one tag per clause). A doc without clauses gets an empty group.

Gold: the reference doc's ``doc.spans["figurative_units"]`` by character
offsets (``rhetoric convert configure``); a unit covers the clauses that
share a character with its text without edge punctuation. Gold units that
overlap cannot all be tagged: the earlier (then the longer) is kept.
"""

from itertools import islice
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.errors import Errors as SpacyErrors
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc, Span
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, set_dropout_rate
from thinc.types import Floats2d

from ..corpora.configure import FIGURATIVE_UNITS_KEY, set_figurative_units
from ..ml.crf import Mask, crf_decode, crf_loss, effective_scores
from ..ml.figurative_tagger import CLAUSES_KEY, clause_spans, unit_clause_range
from ..scorers.figurative_units import score_figurative_units, unit_key
from ..taxonomy import CONFIGURE_FIGURES

DEFAULT_MODEL_CONFIG = """
[model]
@architectures = "spacy_rhetoric.FigurativeTagger.v1"
hidden_width = 128
lstm_depth = 1
dropout = 0.2

[model.features]
@layers = "spacy_rhetoric.ClauseFeatures.v1"
clauses_key = "clauses"
use_pipeline = true
"""
DEFAULT_MODEL = Config().from_str(DEFAULT_MODEL_CONFIG)["model"]

#: The tag set: O, then B-X and I-X for each figure type in taxonomy order.
TAGS: Tuple[str, ...] = ("O", *(f"{p}-{label}" for label in CONFIGURE_FIGURES for p in "BI"))


def typed_bio_mask(labels: Sequence[str]) -> Mask:
    """Allowed (start, transition, end) of the typed BIO scheme over
    ``labels`` (Bools (K,), (K, K), (K,)): a sequence starts with O or B-X;
    I-X follows only B-X or I-X; any tag may end it."""
    k = len(labels)
    start = numpy.array([not lab.startswith("I-") for lab in labels])
    trans = numpy.ones((k, k), dtype=bool)
    for j, lab in enumerate(labels):
        if lab.startswith("I-"):
            typ = lab[2:]
            for i, prev in enumerate(labels):
                trans[i, j] = prev in (f"B-{typ}", f"I-{typ}")
    return start, trans, numpy.ones(k, dtype=bool)


def decode_units(tags: Sequence[str]) -> List[Tuple[int, int, str]]:
    """Units ``(first, last, label)`` (clause indices, inclusive) of a tag
    sequence: a B-X and the I-X after it; a stray I-X starts a unit."""
    units: List[Tuple[int, int, str]] = []
    for i, tag in enumerate(tags):
        if tag == "O":
            continue
        prefix, label = tag.split("-", 1)
        if prefix == "I" and units and units[-1][1] == i - 1 and units[-1][2] == label:
            units[-1] = (units[-1][0], i, label)
        else:
            units.append((i, i, label))
    return units


def encode_units(units: Iterable[Tuple[int, int, str]], n_clauses: int) -> List[str]:
    """Tags of ``n_clauses`` clauses for units ``(first, last, label)``;
    a unit overlapping one already placed (earlier start, then longer first)
    is left out."""
    tags = ["O"] * n_clauses
    for first, last, label in sorted(units, key=lambda u: (u[0], -(u[1] - u[0]))):
        if any(t != "O" for t in tags[first:last + 1]):
            continue
        tags[first] = f"B-{label}"
        for i in range(first + 1, last + 1):
            tags[i] = f"I-{label}"
    return tags


def gold_clause_units(doc: Doc, clauses: Sequence[Span], reference: Doc, key: str = FIGURATIVE_UNITS_KEY) -> List[Tuple[int, int, str]]:
    """The reference's units as clause ranges of ``doc`` (same text), by
    characters (:func:`unit_clause_range` on the units' cores)."""
    bounds = [(c.start_char, c.end_char) for c in clauses]
    units = []
    for span in reference.spans.get(key, []):
        if span.label_ not in CONFIGURE_FIGURES:
            continue
        begin, end = unit_key(reference.text, span.start_char, span.end_char)
        found = unit_clause_range(bounds, begin, end)
        if found:
            units.append((*found, span.label_))
    return units


@Language.factory(
    "figurative_units",
    assigns=["doc.spans"],
    requires=["doc.spans"],
    default_config={
        "model": DEFAULT_MODEL,
        "spans_key": FIGURATIVE_UNITS_KEY,
        "clauses_key": CLAUSES_KEY,
        "o_bias": 0.0,
        "b_bias": 0.0,
        "scorer": {"@scorers": "spacy_rhetoric.figurative_units_scorer.v1"},
    },
    default_score_weights={
        "figurative_units_recognition_f": 0.5,
        "figurative_units_extraction_f": 0.25,
        "figurative_units_recognition_macro_f": 0.25,
        "figurative_units_recognition_p": None,
        "figurative_units_recognition_r": None,
        "figurative_units_extraction_p": None,
        "figurative_units_extraction_r": None,
        "figurative_units_overlap_p": None,
        "figurative_units_overlap_r": None,
        "figurative_units_overlap_f": None,
        "figurative_units_per_type": None,
    },
)
def make_figurative_units(
    nlp: Language,
    name: str,
    model: Model[List[Doc], List[Floats2d]],
    spans_key: str,
    clauses_key: str,
    o_bias: float,
    b_bias: float,
    scorer: Optional[Callable],
) -> "FigurativeUnits":
    """Create a ``figurative_units`` tagger.

    spans_key: where units are written (``doc.spans[spans_key]``).
    clauses_key: the clause group it tags (the clause_segmenter's).
    o_bias: subtracted from the O tag's emission of every clause before
        decoding; above 0 it finds more and longer units (chosen on dev).
    b_bias: added to every B-X emission before decoding; above 0 it starts
        more units, which stay short (chosen on dev). Both are the
        "extractor tweaking" of Minkov et al. 2006 (HLT-NAACL), which trades
        precision for recall at decoding, without retraining.
    """
    return FigurativeUnits(nlp.vocab, model, name, spans_key=spans_key, clauses_key=clauses_key, o_bias=o_bias,
                           b_bias=b_bias, scorer=scorer)


class FigurativeUnits(TrainablePipe):
    """Finds ConFiguRe figurative units and their figure types over clauses."""

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "figurative_units",
        *,
        spans_key: str = FIGURATIVE_UNITS_KEY,
        clauses_key: str = CLAUSES_KEY,
        o_bias: float = 0.0,
        b_bias: float = 0.0,
        scorer: Optional[Callable] = score_figurative_units,
    ) -> None:
        self.vocab = vocab
        self.model = model
        self.name = name
        self.cfg = {"labels": [], "spans_key": spans_key, "clauses_key": clauses_key, "o_bias": float(o_bias),
                    "b_bias": float(b_bias)}
        self.scorer = scorer

    @property
    def labels(self) -> Tuple[str, ...]:
        """The tags, in output-layer order."""
        return tuple(self.cfg["labels"])

    @property
    def label_data(self) -> List[str]:
        return list(self.labels)

    @property
    def spans_key(self) -> str:
        return self.cfg["spans_key"]

    def _clauses(self, doc: Doc) -> List[Span]:
        return clause_spans(doc, self.cfg["clauses_key"])

    def _mask(self) -> Mask:
        return typed_bio_mask(self.labels)

    def emissions(self, docs: Sequence[Doc]) -> List[Floats2d]:
        """CRF emissions per doc, Floats2d (n_clauses, n_tags), with
        ``o_bias`` and ``b_bias`` applied; a doc without clauses gets
        (0, n_tags)."""
        out = [self.model.ops.alloc2f(0, len(self.labels)) for _ in docs]
        todo = [i for i, d in enumerate(docs) if len(d) and self._clauses(d)]
        if todo:
            for i, e in zip(todo, self.model.predict([docs[i] for i in todo])):
                out[i] = e
        o_bias, b_bias = float(self.cfg.get("o_bias", 0.0)), float(self.cfg.get("b_bias", 0.0))
        if o_bias or b_bias:
            shift = self.model.ops.alloc1f(len(self.labels))
            shift[self.labels.index("O")] = o_bias
            for i, tag in enumerate(self.labels):
                if tag.startswith("B-"):
                    shift[i] = -b_bias
            out = [e - shift for e in out]
        return out

    def predict(self, docs: Iterable[Doc]) -> List[List[int]]:
        """Viterbi tag ids per doc, one per clause (``[]`` without clauses)."""
        docs = list(docs)
        emissions = self.emissions(docs)
        paths: List[List[int]] = [[] for _ in docs]
        todo = [i for i, e in enumerate(emissions) if len(e)]
        if todo:
            for i, path in zip(todo, crf_decode(self.model.get_ref("crf"), [emissions[i] for i in todo], self._mask())):
                paths[i] = path
        return paths

    def set_annotations(self, docs: Iterable[Doc], tag_ids: List[List[int]]) -> None:
        labels = self.labels
        for doc, ids in zip(docs, tag_ids):
            clauses = self._clauses(doc) if ids else []
            spans = [Span(doc, clauses[first].start, clauses[last].end, label=label)
                     for first, last, label in decode_units([labels[i] for i in ids])]
            set_figurative_units(doc, spans, key=self.spans_key)

    def classify_units(self, doc: Doc, units: Sequence[Tuple[int, int]], emissions: Optional[Floats2d] = None) -> List[str]:
        """The figure type of each given unit (character offsets into
        ``doc.text``, end exclusive): the type X whose path B-X, I-X, ... over
        the unit's clauses scores highest under the CRF (emissions plus
        transitions inside the unit): ConFiguRe's task 2, figure type
        classification given the units (§4.2). A unit that touches no clause
        gets ``""``."""
        clauses = self._clauses(doc)
        if emissions is None:
            emissions = self.emissions([doc])[0]
        emit = self.model.ops.to_numpy(emissions)
        crf = self.model.get_ref("crf")
        _, trans, _ = effective_scores(crf.get_param("start"), crf.get_param("trans"), crf.get_param("end"), None)
        index = {t: i for i, t in enumerate(self.labels)}
        bounds = [(c.start_char, c.end_char) for c in clauses]
        out = []
        for begin, end in units:
            found = unit_clause_range(bounds, *unit_key(doc.text, begin, end))
            if found is None:
                out.append("")
                continue
            first, last = found
            best, best_score = "", -numpy.inf
            for label in CONFIGURE_FIGURES:
                b, i = index[f"B-{label}"], index[f"I-{label}"]
                score = emit[first, b] + sum(emit[k, i] for k in range(first + 1, last + 1))
                score += trans[b, i] * (last > first) + trans[i, i] * max(last - first - 1, 0)
                if score > best_score:
                    best, best_score = label, score
            out.append(best)
        return out

    def _gold_ids(self, eg: Example) -> List[int]:
        clauses = self._clauses(eg.predicted)
        tags = encode_units(gold_clause_units(eg.predicted, clauses, eg.reference, self.spans_key), len(clauses))
        index = {t: i for i, t in enumerate(self.labels)}
        return [index[t] for t in tags]

    def get_loss(self, examples: Iterable[Example], scores: List[Floats2d]) -> Tuple[float, List[Floats2d]]:
        """CRF negative log-likelihood of the gold tags, summed over docs, and
        its gradient w.r.t. the emissions, List[Floats2d] (n_clauses, n_tags)."""
        validate_examples(examples, "FigurativeUnits.get_loss")
        gold = [self._gold_ids(eg) for eg in examples]
        return crf_loss(self.model.get_ref("crf"), scores, gold, self._mask())

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd=None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """Learn from a batch of Examples; docs without clauses are skipped.
        The predicted docs must already carry the clauses (and ``doc.tensor``
        and what else the features read): the upstream components ran."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        validate_examples(examples, "FigurativeUnits.update")
        keep = [eg for eg in examples if len(eg.predicted) and self._clauses(eg.predicted)]
        if not keep:
            return losses
        set_dropout_rate(self.model, drop)
        scores, backprop = self.model.begin_update([eg.predicted for eg in keep])
        loss, d_scores = self.get_loss(keep, scores)
        backprop(d_scores)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def initialize(
        self,
        get_examples: Callable[[], Iterable[Example]],
        *,
        nlp: Optional[Language] = None,
        labels: Optional[Sequence[str]] = None,
    ) -> None:
        """Take the tag set (:data:`TAGS`, all 12 types, unless ``labels``
        is given), size the output layer and the CRF, and initialise the model
        on up to 10 docs with clauses. Raises ValueError (spaCy E923) when
        ``get_examples`` yields no such doc."""
        validate_get_examples(get_examples, "FigurativeUnits.initialize")
        self.cfg["labels"] = list(labels) if labels is not None else list(TAGS)
        n_tags = len(self.labels)
        self.model.get_ref("output_layer").set_dim("nO", n_tags)
        self.model.get_ref("crf").set_dim("nO", n_tags)
        sample = [eg.predicted for eg in islice((eg for eg in get_examples() if len(eg.predicted) and self._clauses(eg.predicted)), 10)]
        if not sample:
            raise ValueError(SpacyErrors.E923.format(name=self.name))
        self.model.initialize(X=sample)

    def add_label(self, label: str) -> int:
        raise NotImplementedError(SpacyErrors.E931.format(parent="FigurativeUnits", method="add_label", name=self.name))
