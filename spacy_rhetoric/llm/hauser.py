"""HAUSER metrics for generated similes and metaphors (He et al. 2023,
``papers/002_*``), with a simile KB built from our own corpora (:mod:`.kb`).

Per candidate, from its (tenor, vehicle) pairs:

- relevance r = (1/m_p) Σ_(t,v) n(t, v)            (§3.1.1, eq. 3: the KB
  co-occurrence approximation of eq. 2);
- logical consistency c_l = 1 − P(contradiction | literal, candidate)
  from a local NLI classifier                          (§3.1.2, eq. 4);
- sentiment consistency c_s = P(h_s = a) − P(h_l = a), a the polarity the
  sentiment classifier gives the literal sentence, the candidate cut after
  its first vehicle                                    (§3.1.3, eq. 5);
  the classifier is a local HF model or jiagu's (:class:`JiaguSentiment`);
- quality Q = α r' + β c_l' + γ c_s', primes = min–max normalisation among
  the candidates of one input (all equal → 0.5)        (§3.1.4, eqs. 6–7),
  (α, β, γ) = (3/6, 2/6, 1/6) by default (their best combination, Table 5);
- creativity C = −log(mean_v N_v + 1), natural log     (§3.2, eq. 8);
- informativeness I = mean vehicle length in tokens of the tokenizer used
  (words with a word-segmenting pipeline)              (§3.3).

The classifiers are any local Hugging Face sequence-classification model
(a path), with the label names given in the config. When one is not
configured its sub-score is skipped: a notice is logged and recorded, and
the remaining weights are rescaled to sum to 1.

Components come from (in this order) the caller, a spaCy pipeline with a
``rhetoric_components`` span group (our component span categorizer), or the
comparator rule of :func:`rule_components`.
"""
from __future__ import annotations

import logging
import math
import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Callable, Dict, Hashable, List, Optional, Sequence, Tuple

from spacy.util import registry

from .kb import SimileKB, pair_components

logger = logging.getLogger(__name__)

DEFAULT_WEIGHTS = (1 / 2, 1 / 3, 1 / 6)

#: Comparator words of Chinese similes, longest first so 好像 wins over 像.
COMPARATORS = ("好像", "好似", "就像", "犹如", "宛如", "仿佛", "如同", "恰似", "似乎", "像", "似", "如")
#: Words that close the vehicle phrase of a simile (像 X 一样).
_CLOSERS = ("一样", "一般", "似的", "那样", "般")
_CLAUSE_END = re.compile(r"[，,。.！!？?；;：:、…—\s“”\"'「」『』（）()]")


def require_local_model(path: str) -> str:
    """``path`` if it is a local folder; else FileNotFoundError naming it
    (transformers would otherwise try to read it as a hub repository id)."""
    from pathlib import Path

    if not Path(path).is_dir():
        raise FileNotFoundError(f"model folder not found: {path} (only local model paths are supported)")
    return str(path)


@dataclass
class Components:
    """Components of one candidate.

    pairs: ``[(tenor, vehicle), ...]`` strings; vehicles: vehicle strings;
    vehicle_tokens: token count of each vehicle (aligned with ``vehicles``);
    vehicle_end: character offset where the first vehicle ends, if known.
    """

    pairs: List[Tuple[str, str]] = field(default_factory=list)
    vehicles: List[str] = field(default_factory=list)
    vehicle_tokens: List[int] = field(default_factory=list)
    vehicle_end: Optional[int] = None


# -- sub-scores -------------------------------------------------------------------


def relevance(pairs: Sequence[Tuple[str, str]], kb: SimileKB) -> float:
    """r = (1/m_p) Σ n(t, v) over the m_p pairs (HAUSER eq. 3); 0.0 without
    pairs (an unseen or missing pair has n = 0). Unit: simile samples."""
    if not pairs:
        return 0.0
    return sum(kb.n(t, v) for t, v in pairs) / len(pairs)


def creativity(vehicles: Sequence[str], kb: SimileKB) -> Optional[float]:
    """C = −log(mean_v N_v + 1), natural log (HAUSER eq. 8). Range (−∞, 0];
    0 for vehicles the KB never saw. None without vehicles."""
    if not vehicles:
        return None
    mean = sum(kb.vehicle_frequency(v) for v in vehicles) / len(vehicles)
    return 0.0 - math.log(mean + 1.0)  # 0.0 - : no -0.0 for unseen vehicles


def informativeness(vehicle_tokens: Sequence[int]) -> Optional[float]:
    """I = mean vehicle length in tokens (HAUSER §3.3). None without
    vehicles."""
    if not vehicle_tokens:
        return None
    return sum(vehicle_tokens) / len(vehicle_tokens)


def minmax(values: Sequence[float]) -> List[float]:
    """Min–max normalisation of one group to [0, 1] (HAUSER eq. 6); all
    equal (or a single value) → 0.5 each (footnote 5)."""
    if not values:
        return []
    lo, hi = min(values), max(values)
    if hi == lo:
        return [0.5] * len(values)
    return [(v - lo) / (hi - lo) for v in values]


def _normalise_by_group(values: Sequence[float], groups: Sequence[Hashable]) -> List[float]:
    members: Dict[Hashable, List[int]] = defaultdict(list)
    for i, g in enumerate(groups):
        members[g].append(i)
    out = [0.0] * len(values)
    for idx in members.values():
        for i, v in zip(idx, minmax([values[i] for i in idx])):
            out[i] = v
    return out


def quality_scores(
    relevance: Optional[Sequence[float]],
    logical: Optional[Sequence[float]],
    sentiment: Optional[Sequence[float]],
    groups: Sequence[Hashable],
    weights: Sequence[float] = DEFAULT_WEIGHTS,
) -> List[float]:
    """HAUSER quality Q_i = α r'_i + β c'_li + γ c'_si (eqs. 6–7).

    relevance, logical, sentiment: precomputed raw sub-scores, each a
    sequence aligned with ``groups`` (one group key per candidate, e.g. the
    index of its literal sentence), or None to skip that sub-score. Each is
    min–max normalised within its group (all equal → 0.5), then weighted by
    ``weights`` = (α, β, γ); weights of skipped sub-scores are dropped and
    the rest rescaled to sum to 1, so Q ∈ [0, 1].

    Returns one Q per candidate. Raises ValueError when every sub-score is
    None, lengths differ from ``groups``, a value is not finite, or the
    weights are not 3 non-negative numbers with a positive sum over the
    sub-scores given.
    """
    subs = (relevance, logical, sentiment)
    if len(weights) != 3 or any(w < 0 for w in weights):
        raise ValueError(f"weights must be 3 non-negative numbers (α, β, γ), got {tuple(weights)}")
    present = [(s, w) for s, w in zip(subs, weights) if s is not None]
    if not present:
        raise ValueError("at least one of relevance, logical, sentiment must be given")
    total = sum(w for _, w in present)
    if total <= 0:
        raise ValueError("the weights of the given sub-scores sum to 0")
    for s, _ in present:
        if len(s) != len(groups):
            raise ValueError(f"sub-score of length {len(s)} does not align with {len(groups)} groups")
        if not all(math.isfinite(v) for v in s):
            raise ValueError("sub-scores must be finite numbers")
    q = [0.0] * len(groups)
    for s, w in present:
        for i, v in enumerate(_normalise_by_group(list(s), groups)):
            q[i] += (w / total) * v
    return q


def rerank(candidates: Sequence[str], scores: Sequence[float]) -> List[Tuple[str, float]]:
    """Candidates sorted by descending score (stable: ties keep input
    order), as ``(candidate, score)``."""
    if len(candidates) != len(scores):
        raise ValueError(f"{len(candidates)} candidates but {len(scores)} scores")
    order = sorted(range(len(candidates)), key=lambda i: (-scores[i], i))
    return [(candidates[i], scores[i]) for i in order]


# -- components ---------------------------------------------------------------------


def rule_components(text: str, tenor: Optional[str] = None) -> Components:
    """Tenor/vehicle of a simile by the comparator rule: the vehicle is the
    text after the first comparator (:data:`COMPARATORS`) up to a closing
    word (一样, 一般, 似的, 那样, 般) or the end of the clause; the tenor is
    ``tenor`` when given, else the clause text before the comparator.
    A fallback for when no component model is configured: it sees no
    metaphor without comparator and may over-extend the vehicle. Vehicle
    length is counted in characters. Empty Components when no comparator.
    """
    best = None
    for comp in COMPARATORS:
        i = text.find(comp)
        if i != -1 and (best is None or i < best[0]):
            best = (i, comp)
    if best is None:
        return Components()
    start = best[0] + len(best[1])
    end = len(text)
    m = _CLAUSE_END.search(text, start)
    if m:
        end = m.start()
    for closer in _CLOSERS:
        j = text.find(closer, start, end)
        if j > start:
            end = j
    vehicle = text[start:end].strip()
    if not vehicle:
        return Components()
    if tenor is None:
        clause_start = max((m.end() for m in _CLAUSE_END.finditer(text, 0, best[0])), default=0)
        tenor = text[clause_start : best[0]].strip()
    pairs = [(tenor, vehicle)] if tenor else []
    return Components(pairs, [vehicle], [len(vehicle)], end)


def doc_components(doc, tenor: Optional[str] = None) -> Components:
    """Components from ``doc.spans["rhetoric_components"]`` (tenor/vehicle
    spans, paired by :func:`~.kb.pair_components`); ``tenor``, when given,
    replaces a missing tenor. Vehicle length in tokens of the doc."""
    spans = [(s.start, s.end, s.label_) for s in doc.spans.get("rhetoric_components", [])]
    vehicles, pairs = pair_components(spans)
    text = lambda se: doc[se[0] : se[1]].text  # noqa: E731
    pair_texts = [(text(t), text(v)) for t, v in pairs]
    if tenor and not pair_texts:
        pair_texts = [(tenor, text(v)) for v in vehicles]
    end = doc[vehicles[0][1] - 1].idx + len(doc[vehicles[0][1] - 1].text) if vehicles else None
    return Components(pair_texts, [text(v) for v in vehicles], [e - s for s, e in vehicles], end)


# -- classifiers ----------------------------------------------------------------------


class SequenceClassifier:
    """A local Hugging Face sequence-classification model (path only: no
    download). ``labels`` maps role names to the model's label names or
    indices, e.g. ``{"contradiction": "CONTRADICTION"}``; label names are
    matched case-insensitively against ``config.id2label``.

    Raises ValueError when a configured label is not among the model's
    labels; FileNotFoundError when the path is not a folder.
    """

    def __init__(self, path: str, labels: Dict[str, object], *, batch_size: int = 16, max_length: int = 256):
        from transformers import AutoModelForSequenceClassification, AutoTokenizer

        self.path = require_local_model(str(path))
        self.tokenizer = AutoTokenizer.from_pretrained(self.path, local_files_only=True)
        self.model = AutoModelForSequenceClassification.from_pretrained(self.path, local_files_only=True)
        self.model.eval()
        self.batch_size = batch_size
        self.max_length = max_length
        names = {str(v).lower(): int(k) for k, v in self.model.config.id2label.items()}
        self.index: Dict[str, int] = {}
        for role, label in labels.items():
            if isinstance(label, int) and 0 <= label < self.model.config.num_labels:
                self.index[role] = label
            elif str(label).lower() in names:
                self.index[role] = names[str(label).lower()]
            else:
                raise ValueError(
                    f"{self.path}: label {label!r} for {role!r} not among the model's labels {sorted(names)}"
                )

    def probs(self, texts: Sequence[str], pairs: Optional[Sequence[str]] = None) -> List[List[float]]:
        """Softmax probabilities, Floats2d (n_texts, n_labels) as lists;
        ``pairs`` gives second segments (NLI hypotheses)."""
        import torch

        out: List[List[float]] = []
        for i in range(0, len(texts), self.batch_size):
            a = list(texts[i : i + self.batch_size])
            b = list(pairs[i : i + self.batch_size]) if pairs is not None else None
            enc = self.tokenizer(a, b, padding=True, truncation=True, max_length=self.max_length, return_tensors="pt")
            with torch.no_grad():
                logits = self.model(**enc).logits
            out.extend(torch.softmax(logits.float(), dim=-1).tolist())
        return out


def logical_consistency(nli: SequenceClassifier, literals: Sequence[str], candidates: Sequence[str]) -> List[float]:
    """c_l = 1 − P(contradiction) for each (literal, candidate) pair (HAUSER
    eq. 4); ``nli.index`` must map ``"contradiction"``."""
    c = nli.index["contradiction"]
    return [1.0 - p[c] for p in nli.probs(literals, candidates)]


class JiaguSentiment:
    """jiagu's naive-Bayes sentiment classifier (PyPI ``jiagu``, MIT) behind
    the interface :func:`sentiment_consistency` uses: ``index`` maps
    ``"negative"`` → 0 and ``"positive"`` → 1, ``probs(texts)`` gives
    [[P(negative), P(positive)], ...] (Floats2d (n_texts, 2) as lists).

    ``jiagu.sentiment(text)`` returns ``(label, P(label))`` for the more
    probable of its two classes (the Bayes posterior over words of jiagu's own
    segmenter); the other class has 1 − P(label). A Chinese stand-in for
    HAUSER's SST-2 classifier (He et al. 2023, §3.1.3). Raises ImportError
    with the install hint when jiagu is missing.
    """

    index = {"negative": 0, "positive": 1}

    def __init__(self) -> None:
        try:
            import jiagu
        except ImportError as err:
            raise ImportError("--sentiment jiagu needs the jiagu package: pip install -e '.[generation]'") from err
        self._sentiment = jiagu.sentiment

    def probs(self, texts: Sequence[str]) -> List[List[float]]:
        out = []
        for text in texts:
            label, prob = self._sentiment(text)
            if label not in self.index:
                raise ValueError(f"jiagu returned the unknown sentiment label {label!r}")
            negative = prob if label == "negative" else 1.0 - prob
            out.append([negative, 1.0 - negative])
        return out


def load_sentiment(spec: Optional[str]):
    """The sentiment classifier named by ``spec``: ``"jiagu"`` →
    :class:`JiaguSentiment`; a local folder → :class:`SequenceClassifier`
    with labels ``negative`` / ``positive``; None → None."""
    if not spec:
        return None
    if spec == "jiagu":
        return JiaguSentiment()
    return SequenceClassifier(spec, {"negative": "negative", "positive": "positive"})


def cut_at_first_vehicle(texts: Sequence[str], comps: Sequence[Components]) -> List[str]:
    """Each text up to the end of its first vehicle (HAUSER §3.1.3: only
    that part of a simile goes to the sentiment classifier); the whole text
    when no vehicle was found."""
    return [t[: c.vehicle_end] if c.vehicle_end else t for t, c in zip(texts, comps)]


def sentiment_consistency(
    clf: SequenceClassifier, literals: Sequence[str], candidates_cut: Sequence[str]
) -> List[float]:
    """c_s = P(h_s = a) − P(h_l = a), a = the polarity (``clf.index`` keys
    ``"negative"`` and ``"positive"``) more probable for the literal (HAUSER
    eq. 5). Range [−1, 1]."""
    roles = [clf.index["negative"], clf.index["positive"]]
    lit = clf.probs(literals)
    sim = clf.probs(candidates_cut)
    out = []
    for pl, ps in zip(lit, sim):
        a = max(roles, key=lambda r: pl[r])
        out.append(ps[a] - pl[a])
    return out


# -- the scorer ------------------------------------------------------------------------


class HauserScorer:
    """All HAUSER scores for groups of candidates.

    kb: the simile KB; nlp: optional spaCy pipeline used to extract
    components (if it has ``rhetoric_components``) and to count vehicle
    tokens; nli / sentiment: optional :class:`SequenceClassifier`;
    weights: (α, β, γ).
    """

    def __init__(
        self,
        kb: SimileKB,
        *,
        nlp=None,
        nli: Optional[SequenceClassifier] = None,
        sentiment: Optional[SequenceClassifier] = None,
        weights: Sequence[float] = DEFAULT_WEIGHTS,
    ):
        self.kb = kb
        self.nlp = nlp
        self.nli = nli
        self.sentiment = sentiment
        self.weights = tuple(weights)
        self.notices: List[str] = []
        if nli is None:
            self._notice("logical consistency skipped: no NLI model configured (nli_model)")
        if sentiment is None:
            self._notice("sentiment consistency skipped: no sentiment model configured (sentiment_model)")

    def _notice(self, text: str) -> None:
        if text not in self.notices:
            self.notices.append(text)
            logger.warning(text)

    def components(self, texts: Sequence[str], tenor: Optional[str] = None) -> List[Components]:
        """Components of each text (see the module docstring for the source)."""
        if self.nlp is not None and "rhetoric_components" in self.nlp.pipe_names:
            return [doc_components(doc, tenor) for doc in self.nlp.pipe(texts)]
        return [rule_components(t, tenor) for t in texts]

    def score_group(
        self,
        candidates: Sequence[str],
        *,
        literal: Optional[str] = None,
        tenor: Optional[str] = None,
        components: Optional[Sequence[Components]] = None,
    ) -> List[Dict[str, Optional[float]]]:
        """Scores of the candidates of one input: per candidate a dict with
        ``relevance``, ``logical``, ``sentiment`` (raw; None when skipped),
        ``quality`` (Q), ``creativity``, ``informativeness``. ``literal`` is
        the literal sentence for the consistency scores (skipped without
        it). Empty list for no candidates."""
        if not candidates:
            return []
        comps = list(components) if components is not None else self.components(candidates, tenor)
        rel = [relevance(c.pairs, self.kb) for c in comps]
        logical = sentiment = None
        if literal and self.nli is not None:
            logical = logical_consistency(self.nli, [literal] * len(candidates), candidates)
        if literal and self.sentiment is not None:
            cut = cut_at_first_vehicle(candidates, comps)
            sentiment = sentiment_consistency(self.sentiment, [literal] * len(candidates), cut)
        if not literal and (self.nli is not None or self.sentiment is not None):
            self._notice("consistency scores skipped for inputs without a literal sentence")
        q = quality_scores(rel, logical, sentiment, [0] * len(candidates), self.weights)
        rows = []
        for i, c in enumerate(comps):
            rows.append(
                {
                    "relevance": rel[i],
                    "logical": logical[i] if logical else None,
                    "sentiment": sentiment[i] if sentiment else None,
                    "quality": q[i],
                    "creativity": creativity(c.vehicles, self.kb),
                    "informativeness": informativeness(c.vehicle_tokens),
                }
            )
        return rows

    def __call__(
        self,
        candidates: List[str],
        *,
        context: List[str],
        rhetoric: str,
        object: str,
        logprobs: List[Optional[float]],
    ) -> List[float]:
        """The generator's reranking hook: quality Q of each candidate of one
        request (higher is better). The literal sentence is the last context
        sentence; ``object`` is the tenor for metaphors. ``logprobs`` are
        not used by HAUSER."""
        literal = context[-1] if context else None
        tenor = object if rhetoric == "metaphor" and object else None
        return [row["quality"] for row in self.score_group(candidates, literal=literal, tenor=tenor)]


def load_classifier(path: Optional[str], labels: Dict[str, object]) -> Optional[SequenceClassifier]:
    """A :class:`SequenceClassifier` for ``path``, or None when no path."""
    return SequenceClassifier(path, labels) if path else None


@registry.misc("spacy_rhetoric.HauserReranker.v1")
def make_hauser_reranker(
    kb_path: str,
    nlp_path: Optional[str] = None,
    nli_model: Optional[str] = None,
    nli_contradiction_label: str = "contradiction",
    sentiment_model: Optional[str] = None,
    sentiment_negative_label: str = "negative",
    sentiment_positive_label: str = "positive",
    weights: List[float] = list(DEFAULT_WEIGHTS),
) -> Callable[..., List[float]]:
    """Config factory of the HAUSER reranker (``@misc =
    "spacy_rhetoric.HauserReranker.v1"``). Returns a callable
    ``scorer(candidates, *, context, rhetoric, object, logprobs) -> list[float]``.

    kb_path: JSON written by ``rhetoric convert simile-kb``; nlp_path: optional
    pipeline with ``rhetoric_components``; nli_model / sentiment_model:
    optional local HF classifier paths with their label names.
    """
    import spacy

    nlp = spacy.load(nlp_path) if nlp_path else None
    return HauserScorer(
        SimileKB.from_disk(kb_path),
        nlp=nlp,
        nli=load_classifier(nli_model, {"contradiction": nli_contradiction_label}),
        sentiment=load_classifier(
            sentiment_model, {"negative": sentiment_negative_label, "positive": sentiment_positive_label}
        ),
        weights=weights,
    )
