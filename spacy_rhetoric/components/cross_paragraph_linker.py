"""``cross_paragraph_linker``: parallelisms whose branches are sentences of
different paragraphs (an essay's skeleton: 温暖是手 / 温暖是爱 / 温暖是家, or
three paragraphs opening 当…的时候，温暖就是…).

``parallelism_linker`` reads each paragraph on its own, as PSE-I's
in-paragraph annotation requires; this component links across paragraphs,
trained on the original PSE annotation's ``outPara`` chains
(``convert pse-original``).

Candidates are the paragraph-opening sentences (93% of the gold branches),
every pair at most ``window`` candidates apart is scored by a small network
over character features (:mod:`spacy_rhetoric.ml.cross_paragraph`), and the
decoder (:func:`link_groups`) builds parallelisms in document order: a
candidate joins the group it is most probably linked to on average, or
starts one with an earlier candidate, when the probability is at least
``threshold``. The branch is the
whole sentence, without whitespace at its edges.

Output: the parallelisms are added to the same span groups as the
in-paragraph ones (``doc.spans["parallelism"]``, ``["parallelism_N"]``), each
group with ``attrs["kind"] = "cross_paragraph"``;
``spacy_rhetoric.parallelisms(doc, kind="cross_paragraph")`` returns them
alone. Put it before ``rhetoric_textcat``, so that the sentences holding its
branches are labelled parallelism (the linker rule).
"""
from __future__ import annotations

from itertools import islice
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import numpy
from spacy.language import Language
from spacy.pipeline import TrainablePipe
from spacy.tokens import Doc
from spacy.training import Example, validate_examples, validate_get_examples
from spacy.vocab import Vocab
from thinc.api import Config, Model, Optimizer, set_dropout_rate
from thinc.types import Floats2d

from ..ml.cross_paragraph import N_FEATURES, Candidate, doc_features
from ..scorers.cross_paragraph import score_cross_paragraph
from ..spangroups import CROSS_PARAGRAPH, PARALLELISM_KEY, parallelism_groups, parallelisms, set_parallelisms

DEFAULT_MODEL = Config().from_str("""
[model]
@architectures = "spacy_rhetoric.PairScorer.v1"
hidden_width = 32
""")["model"]

#: Per doc: candidates, candidate pairs, and the pairs' features.
DocPairs = Tuple[List[Candidate], List[Tuple[int, int]], numpy.ndarray]


@Language.factory(
    "cross_paragraph_linker",
    assigns=["doc.spans"],
    default_config={
        "model": DEFAULT_MODEL,
        "spans_key": PARALLELISM_KEY,
        "window": 8,
        "threshold": 0.5,
        "positive_weight": 4.0,
        "scorer": {"@scorers": "spacy_rhetoric.cross_paragraph_scorer.v1"},
    },
    default_score_weights={"cross_paragraph_link_f": 0.5, "cross_paragraph_group_f": 0.5,
                           "cross_paragraph_link_p": None, "cross_paragraph_link_r": None,
                           "cross_paragraph_group_p": None, "cross_paragraph_group_r": None,
                           "cross_paragraph_n_predicted": None, "cross_paragraph_n_gold": None},
)
def make_cross_paragraph_linker(
    nlp: Language,
    name: str,
    model: Model[Floats2d, Floats2d],
    spans_key: str,
    window: int,
    threshold: float,
    positive_weight: float,
    scorer: Optional[Callable],
) -> "CrossParagraphLinker":
    """Factory of :class:`CrossParagraphLinker`."""
    return CrossParagraphLinker(nlp.vocab, model, name, spans_key=spans_key, window=window,
                                threshold=threshold, positive_weight=positive_weight, scorer=scorer)


def link_groups(n: int, pairs: Sequence[Tuple[int, int]], probs: numpy.ndarray, threshold: float) -> List[List[int]]:
    """Groups of candidate indices, built in document order (average
    linkage): candidate ``j`` joins the earlier group whose members in its
    window it is linked to with the highest mean probability, when that mean
    is at least ``threshold``; otherwise it starts a group with its most
    probable earlier candidate still alone, when that probability is at
    least ``threshold``. Each group is sorted; groups have two members or
    more and come in order of their first member.

    pairs: ``(i, j)`` with ``i < j``; probs: Floats1d (n_pairs,).
    """
    prob: Dict[Tuple[int, int], float] = dict(zip(map(tuple, pairs), probs.tolist()))
    earlier_of: Dict[int, List[Tuple[int, float]]] = {}
    for (i, j), p in prob.items():
        earlier_of.setdefault(j, []).append((i, p))
    group_of: Dict[int, int] = {}
    groups: List[List[int]] = []
    for j in range(n):
        earlier = earlier_of.get(j, [])
        best_group, best_mean = None, threshold
        for g, members in enumerate(groups):
            near = [prob[(i, j)] for i in members if (i, j) in prob]
            if near and sum(near) / len(near) >= best_mean:
                best_group, best_mean = g, sum(near) / len(near)
        if best_group is not None:
            groups[best_group].append(j)
            group_of[j] = best_group
            continue
        alone = [(p, i) for i, p in earlier if i not in group_of and p >= threshold]
        if alone:
            _, i = max(alone)
            group_of[i] = group_of[j] = len(groups)
            groups.append([i, j])
    return sorted((sorted(g) for g in groups), key=lambda g: g[0])


class CrossParagraphLinker(TrainablePipe):
    """Links paragraph-opening sentences into parallelisms (module docstring).

    Settings: ``window`` (how many earlier candidates a candidate is compared
    with), ``threshold`` (decision threshold of a link), ``positive_weight``
    (training: weight of the gradient of gold links, which are rare).
    """

    def __init__(
        self,
        vocab: Vocab,
        model: Model,
        name: str = "cross_paragraph_linker",
        *,
        spans_key: str = PARALLELISM_KEY,
        window: int = 8,
        threshold: float = 0.5,
        positive_weight: float = 4.0,
        scorer: Optional[Callable] = score_cross_paragraph,
    ) -> None:
        """Raises ValueError for a window < 1, a threshold outside [0, 1] or
        a positive weight <= 0."""
        if window < 1 or not 0.0 <= threshold <= 1.0 or positive_weight <= 0:
            raise ValueError(f"cross_paragraph_linker: window >= 1, 0 <= threshold <= 1 and positive_weight > 0 "
                             f"are required; got {window}, {threshold}, {positive_weight}")
        self.vocab = vocab
        self.model = model
        self.name = name
        self.scorer = scorer
        self.cfg = {"spans_key": spans_key, "window": int(window), "threshold": float(threshold),
                    "positive_weight": float(positive_weight)}

    def score(self, examples: Iterable[Example], **kwargs) -> Dict[str, Optional[float]]:
        return self.scorer(examples, spans_key=self.cfg["spans_key"], **kwargs) if self.scorer else {}

    # --- prediction ---------------------------------------------------------

    def _features(self, docs: Sequence[Doc]) -> List[DocPairs]:
        return [doc_features(doc, self.cfg["window"]) for doc in docs]

    def _scores(self, per_doc: Sequence[DocPairs], is_train: bool = False):
        feats = numpy.concatenate([f for _, _, f in per_doc]) if per_doc else numpy.zeros((0, N_FEATURES), dtype="f")
        X = self.model.ops.asarray2f(feats.reshape((-1, N_FEATURES)))
        if is_train:
            return self.model.begin_update(X)
        return self.model.predict(X), None

    def predict(self, docs: Iterable[Doc]) -> Tuple[List[DocPairs], numpy.ndarray]:
        """Per doc its candidates, pairs and features, and the link
        probabilities of all pairs, Floats1d (total pairs,)."""
        per_doc = self._features(list(docs))
        if not sum(len(p) for _, p, _ in per_doc):
            return per_doc, numpy.zeros((0,), dtype="f")
        probs, _ = self._scores(per_doc)
        return per_doc, self.model.ops.to_numpy(probs).reshape((-1,))

    def set_annotations(self, docs: Iterable[Doc], predictions: Tuple[List[DocPairs], numpy.ndarray]) -> None:
        """Replace the doc's cross-paragraph parallelisms by the decoded ones,
        keeping every other parallelism as it is."""
        per_doc, probs = predictions
        key = self.cfg["spans_key"]
        offset = 0
        for doc, (cands, pairs, _) in zip(docs, per_doc):
            p = probs[offset:offset + len(pairs)]
            offset += len(pairs)
            kept = [(kind, [(s.start, s.end) for s in spans]) for kind, spans in parallelism_groups(doc, key)
                    if kind != CROSS_PARAGRAPH]
            found = [[(cands[k][0], cands[k][1]) for k in group]
                     for group in link_groups(len(cands), pairs, p, self.cfg["threshold"])]
            set_parallelisms(doc, [g for _, g in kept] + found, key=key,
                             kinds=[k for k, _ in kept] + [CROSS_PARAGRAPH] * len(found))

    # --- training -------------------------------------------------------------

    def _gold(self, eg: Example, cands: Sequence[Candidate], pairs: Sequence[Tuple[int, int]]) -> numpy.ndarray:
        """1.0 for a pair whose candidates overlap branches of one gold
        cross-paragraph parallelism of ``eg.reference``, else 0.0."""
        owner: Dict[int, int] = {}
        ref_groups = parallelisms(eg.reference, self.cfg["spans_key"], CROSS_PARAGRAPH)
        branches = [(b.start_char, b.end_char, g) for g, group in enumerate(ref_groups) for b in group]
        pred = eg.predicted
        for k, (start, end, _) in enumerate(cands):
            a, b = pred[start].idx, pred[end - 1].idx + len(pred[end - 1].text)
            best = max(branches, key=lambda br: min(b, br[1]) - max(a, br[0]), default=None)
            if best is not None and min(b, best[1]) - max(a, best[0]) > 0:
                owner[k] = best[2]
        return numpy.asarray([float(i in owner and owner.get(i) == owner.get(j)) for i, j in pairs], dtype="f")

    def _targets(self, examples: Sequence[Example]) -> Tuple[List[DocPairs], numpy.ndarray]:
        per_doc = self._features([eg.predicted for eg in examples])
        gold = [self._gold(eg, c, p) for eg, (c, p, _) in zip(examples, per_doc)]
        return per_doc, (numpy.concatenate(gold) if gold else numpy.zeros((0,), dtype="f"))

    def update(
        self,
        examples: Iterable[Example],
        *,
        drop: float = 0.0,
        sgd: Optional[Optimizer] = None,
        losses: Optional[Dict[str, float]] = None,
    ) -> Dict[str, float]:
        """One gradient step on the candidate pairs of ``examples``."""
        if losses is None:
            losses = {}
        losses.setdefault(self.name, 0.0)
        examples = list(examples)
        validate_examples(examples, "CrossParagraphLinker.update")
        per_doc, gold = self._targets(examples)
        if not len(gold):
            return losses
        set_dropout_rate(self.model, drop)
        scores, backprop = self._scores(per_doc, is_train=True)
        loss, d_scores = self.get_loss(examples, scores, gold=gold)
        backprop(d_scores)
        if sgd is not None:
            self.finish_update(sgd)
        losses[self.name] += loss
        return losses

    def get_loss(self, examples: Iterable[Example], scores: Floats2d, *, gold: Optional[numpy.ndarray] = None) -> Tuple[float, Floats2d]:
        """Weighted squared error of the link probabilities, as spaCy's
        textcat: gradient (scores - gold) * weight, weight
        ``positive_weight`` on gold links and 1 elsewhere.
        scores: Floats2d (n_pairs, 1). Returns (loss, gradient)."""
        if gold is None:
            _, gold = self._targets(list(examples))
        ops = self.model.ops
        target = ops.asarray2f(gold.reshape((-1, 1)))
        weight = ops.asarray2f(numpy.where(gold > 0.5, self.cfg["positive_weight"], 1.0).astype("f").reshape((-1, 1)))
        diff = scores - target
        return float((diff ** 2 * weight).sum()), diff * weight

    def initialize(self, get_examples: Callable[[], Iterable[Example]], *, nlp: Optional[Language] = None) -> None:
        """Initialise the model on the candidate pairs of up to 10 examples."""
        validate_get_examples(get_examples, "CrossParagraphLinker.initialize")
        sample = list(islice(get_examples(), 10))
        per_doc, gold = self._targets(sample)
        if len(gold):
            X = self.model.ops.asarray2f(numpy.concatenate([f for _, _, f in per_doc]))
            self.model.initialize(X=X, Y=self.model.ops.asarray2f(gold.reshape((-1, 1))))
        else:
            self.model.initialize()
