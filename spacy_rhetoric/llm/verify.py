"""Verified suggestions: every generated candidate is analysed, in its
context, by our own rhetoric pipeline, and counts as *verified* only when the
pipeline finds the requested device on the requested object.

Rule for a candidate requested with device d and object o, analysed as the
text ``context + candidate`` (only what lies in the candidate counts):

- metaphor, personification, hyperbole: some sentence of the candidate is
  labelled d by ``rhetoric_textcat`` (its own thresholds, as ``rhetoric
  analyze`` records them), and some component of the candidate labelled
  ``OBJECT_COMPONENT[d]`` (tenor, personification_object, hyperbole_object)
  matches o by the containment rule of
  :func:`spacy_rhetoric.llm.rhetoric_success.object_matches`, or,
  failing that, a span matching o reaches the analysing pipeline's
  *object threshold* for that label (``rhetoric_components``'s
  ``object_thresholds``, the record's ``scored_object_spans``). A request
  names its object in advance, so the question is only whether that span
  is the object, not where one is: the threshold is chosen on the dev
  essays' human sentences (``rhetoric tune object-thresholds``), and a
  pipeline without one uses its components alone;
- parallelism: the linker groups at least ``min_branches`` (default 3)
  branches inside the candidate, at least ``min_branches`` of them different
  once punctuation is left out (the marker o is not required). The same
  clause said three times (是理想；是理想；是理想。) is repetition (反复),
  not parallelism (``annotations/GUIDELINES.md`` §4.5);
- and, for every device, the candidate is not degenerate
  (:func:`repeated_clause`): no unit of up to 4 characters said 5 times
  in a row (悄悄地悄地地地地地…), and no clause of ``min_clause_chars`` (default 5)
  or more characters occurs twice in it or is copied from the context. A
  clause is a run of word characters, or the text between two marks of
  clause or sentence punctuation with quotation marks and brackets left out
  (因为有“因为有”的道理 is one clause, not three short runs). A small LM's
  sampling loops (是人类生命的根基，是人类生命的根基) and copies of the
  context otherwise pass the analyser. For parallelism the marker is meant
  to come back: a clause that begins every linked branch (也许很多时候，
  我们……；也许很多时候，……) may repeat.

The *analyser score* in [0, 1] ranks verified candidates by the pipeline's
confidence: the highest textcat score of d among the candidate's sentences,
times the score of the best matching object component where an object is
required. The *fluency* is the KenLM log-probability per character (natural
log, <= 0; ``exp(-fluency)`` is the per-character perplexity) of the
candidate under the word 3-gram model of
:mod:`spacy_rhetoric.llm.ngram_lm`.

The analyser is any callable ``texts -> analysis records``
(``spacy-rhetoric/analysis/v1``, :func:`spacy_rhetoric.analysis.records.doc_to_record`),
so tests can pass a stub and the service its locked pipeline.

The ``verifier`` block of ``rhetoric_generator`` is :class:`Verifier`,
registered as ``spacy_rhetoric.SuggestionVerifier.v1`` in ``registry.misc``::

    [components.rhetoric_generator.verifier]
    @misc = "spacy_rhetoric.SuggestionVerifier.v1"
    analyser = "self"
    kenlm_path = "assets/kenlm/zh_CN.lm"

    [components.rhetoric_generator.verifier.reranker]
    @misc = "spacy_rhetoric.LogprobReranker.v1"
"""
from __future__ import annotations

import math
import re
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Sequence, Tuple

from spacy.util import registry

from ..analysis.render import devices_of
from ..errors import Errors
from ..taxonomy import COARSE_ZH, COMPONENTS, OBJECT_COMPONENT
from .base import SettingsBlock
from .completion import join_sentences
from .rhetoric_success import object_matches

#: Marks that end a clause (the clause segmenter's clause and sentence
#: punctuation, the enumeration comma and line breaks).
_CLAUSE_END = re.compile(r"[，,：:—；;。．.？?！!…、\n\r]+")
#: A loop inside a clause: a unit of at most STUTTER_UNIT word characters
#: said STUTTER_TIMES times or more in a row (哈哈 or 层层 stay below it).
STUTTER_UNIT, STUTTER_TIMES = 4, 5
_STUTTER = re.compile(r"(\w{1,%d}?)\1{%d,}" % (STUTTER_UNIT, STUTTER_TIMES - 1))
#: Quotation marks and brackets: inside a clause, they do not end it.
_QUOTES = re.compile(r"[“”‘’「」『』\"'（）()《》〈〉【】\[\]\s\u3000]+")

#: ``texts -> one analysis record per text``
Analyse = Callable[[List[str]], List[Dict[str, Any]]]
#: Record key of the spans the component head scores for a named object
#: (``RhetoricComponents.scored_spans``), beside the record's components.
SCORED_SPANS = "scored_object_spans"
#: Characters that end a sentence, so the candidate starts a new one.
_SENTENCE_FINAL = "。！？!?…”’」』）)"
#: Default ranking weights (see :func:`rank_score`); chosen before any
#: measurement, not tuned.
DEFAULT_WEIGHTS = {"analyser": 1.0, "fluency": 0.1, "reranker": 0.1}


@dataclass
class Verdict:
    """The analyser's judgement of one candidate.

    verified: the rule of the module docstring holds (None: not checked).
    device: the device part holds; object: the object part (None when it
    does not apply). analyser_score: in [0, 1]. evidence: what was found of
    the requested device in the candidate, offsets in characters of the
    candidate text: ``{"label", "text", "start", "end", "score"}`` with
    label the device (a sentence labelled with it), one of its component
    labels (``COMPONENTS``) or ``"branch"``. reason: why it is not
    verified, in words ("" when verified).
    """

    verified: Optional[bool]
    device: Optional[bool] = None
    object: Optional[bool] = None
    analyser_score: float = 0.0
    evidence: List[Dict[str, Any]] = field(default_factory=list)
    reason: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


def in_context(context: Sequence[str], candidate: str) -> Tuple[str, int]:
    """The text to analyse and the candidate's start offset in it: the
    context sentences joined (:func:`join_sentences`), then the candidate,
    after a line break when the context does not end a sentence (so the
    candidate never continues a context sentence)."""
    prefix = join_sentences(context)
    if prefix and prefix[-1] not in _SENTENCE_FINAL:
        prefix += "\n"
    return prefix + candidate, len(prefix)


def verify_record(record: Dict[str, Any], start: int, rhetoric: str, obj: str, *, min_branches: int = 3) -> Verdict:
    """The :class:`Verdict` of the candidate that starts at character
    ``start`` of the analysed ``record``. Raises ``KeyError`` for a record
    without ``sentences``/``components``/``parallelisms``."""
    sentences = [s for s in record["sentences"] if s["end"] > start]
    components = [c for c in record["components"] if c["start"] >= start]
    # evidence: the requested device's own components (tenor, comparator and vehicle of a metaphor, ...)
    evidence = [_piece(c["label"], c, start, c.get("score")) for c in components
                if COMPONENTS.get(c["label"], ("",))[0] == rhetoric]
    if rhetoric == "parallelism":
        return _verify_parallelism(record, sentences, start, evidence, min_branches)
    labelled = [s for s in sentences if rhetoric in devices_of(s)]
    scores = [float(s["coarse"][rhetoric]) for s in labelled]
    evidence = [_piece(rhetoric, s, start, s["coarse"][rhetoric]) for s in labelled] + evidence
    device_ok = bool(scores)
    label = OBJECT_COMPONENT[rhetoric]
    matches = [float(c.get("score") or 0.0) for c in components if c["label"] == label and object_matches(c["text"], obj)]
    if not matches:
        named = [c for c in record.get(SCORED_SPANS, ()) if c["start"] >= start and c["label"] == label and object_matches(c["text"], obj)]
        best = max(named, key=lambda c: c["score"], default=None)
        if best is not None:
            matches = [best["score"]]
            evidence.append(_piece(label, best, start, best["score"]))
    object_ok = bool(matches)
    score = (max(scores) if scores else 0.0) * (max(matches) if matches else 0.0)
    reason = ""
    if not device_ok:
        found = sorted({d for s in sentences for d in devices_of(s)})
        reason = f"no {rhetoric} ({COARSE_ZH[rhetoric]}) found" + (f"; found {', '.join(found)}" if found else "")
    elif not object_ok:
        others = [c["text"] for c in components if c["label"] == label]
        reason = f"{obj} is not the {label} found" + (f" ({', '.join(others)})" if others else " (none found)")
    return Verdict(device_ok and object_ok, device_ok, object_ok, score, evidence, reason)


def _verify_parallelism(record, sentences, start, evidence, min_branches) -> Verdict:
    groups = [g["branches"] for g in record["parallelisms"] if g["branches"] and min(b["start"] for b in g["branches"]) >= start]
    best = max(groups, key=len, default=[])
    evidence = evidence + [_piece("branch", b, start, None) for b in best]
    distinct = len({_bare(_CLAUSE_END.sub("", b["text"])) for b in best})
    ok = distinct >= min_branches
    scores = [float(s["coarse"]["parallelism"]) for s in sentences if "parallelism" in (s.get("coarse") or {})]
    score = max(scores, default=0.0) if ok else 0.0
    reason = ""
    if len(best) < min_branches:
        reason = f"{len(best)} branches linked, {min_branches} needed"
    elif not ok:
        reason = f"{len(best)} branches linked, {distinct} of them different, {min_branches} needed"
    return Verdict(ok, ok, None, score, evidence, reason)


def _piece(label: str, span: Dict[str, Any], start: int, score: Any) -> Dict[str, Any]:
    return {"label": label, "text": span["text"], "start": span["start"] - start, "end": span["end"] - start,
            "score": None if score is None else round(float(score), 4)}


def verify(analyse: Analyse, context: Sequence[str], rhetoric: str, obj: str, candidates: Sequence[str],
           *, min_branches: int = 3, min_clause_chars: int = 5) -> List[Verdict]:
    """Analyse each candidate in its context (one ``analyse`` call) and judge
    it; aligned with ``candidates``. A degenerate candidate
    (:func:`repeated_clause`) keeps its evidence but is not verified."""
    placed = [in_context(context, c) for c in candidates]
    records = analyse([text for text, _ in placed]) if placed else []
    verdicts = [verify_record(rec, start, rhetoric, obj, min_branches=min_branches) for rec, (_, start) in zip(records, placed)]
    before = _context_clauses(context)  # once per request, not per candidate
    for verdict, cand in zip(verdicts, candidates):
        repeated = _repeated(before, cand, min_clause_chars, _marker_clauses(verdict, cand))
        if repeated:
            verdict.verified, verdict.analyser_score = False, 0.0
            verdict.reason = "; ".join(filter(None, [verdict.reason, repeated]))
    return verdicts


def repeated_clause(context: Sequence[str], candidate: str, min_chars: int = 5) -> str:
    """Why ``candidate`` is degenerate, or "": a stutter (a unit of up to
    4 word characters 5 times in a row), or a clause (a maximal run of
    word characters, :func:`spacy_rhetoric.llm.ngram_lm.clauses`) of
    at least ``min_chars`` characters that occurs twice in the candidate, or
    that is a clause of the context (a copy, not a suggestion). Parallel
    branches share their marker, not whole clauses, so they pass."""
    return _repeated(_context_clauses(context), candidate, min_chars)


def _bare(text: str) -> str:
    """``text`` without quotation marks, brackets and spaces."""
    return _QUOTES.sub("", text)


def _clauses(text: str) -> List[str]:
    """The units compared for repetition: the runs of word characters, then
    the punctuation-delimited clauses without quotes and brackets (module
    docstring) that are not also a run (a clause without quotes would
    otherwise be counted twice)."""
    from .ngram_lm import clauses

    runs = clauses(text)
    marked = [c for c in map(_bare, _CLAUSE_END.split(text)) if c]
    return runs + [c for c in marked if c not in runs]


def _context_clauses(context: Sequence[str]) -> set:
    return {c for sent in context for c in _clauses(sent)}


def _marker_clauses(verdict: Verdict, candidate: str) -> FrozenSet[str]:
    """The clauses of ``candidate`` that begin every branch the verdict's
    parallelism links (at least 2): its marker, said once per branch."""
    branches = [_bare(e["text"]) for e in verdict.evidence if e["label"] == "branch"]
    if len(branches) < 2:
        return frozenset()
    return frozenset(c for c in _clauses(candidate) if all(b.startswith(c) for b in branches))


def _stutter(candidate: str) -> str:
    """Why ``candidate`` stutters, or "": a unit of 1 to ``STUTTER_UNIT``
    word characters said ``STUTTER_TIMES`` or more times in a row
    (悄悄地悄地地地地地…), a sampling loop too short to make a clause."""
    found = _STUTTER.search(candidate)
    if not found:
        return ""
    unit = found.group(1)
    return f"repeats {unit} {len(found.group(0)) // len(unit)} times in a row"


def _repeated(before: set, candidate: str, min_chars: int, exempt: FrozenSet[str] = frozenset()) -> str:
    stutter = _stutter(candidate)
    if stutter:
        return stutter
    seen = set()
    for clause in _clauses(candidate):
        if len(clause) < min_chars or clause in exempt:
            continue
        if clause in seen:
            return f"repeats the clause {clause}"
        if clause in before:
            return f"copies the clause {clause} from the context"
        seen.add(clause)
    return ""


def pipeline_analyser(nlp: Any, *, before: Optional[str] = None, batch_size: int = 16) -> Analyse:
    """An :data:`Analyse` running ``nlp``'s components in order, stopping
    before the one named ``before`` (the generator itself, when it sits in
    the analysing pipeline)."""
    from ..analysis.records import doc_to_record

    def analyse(texts: List[str]) -> List[Dict[str, Any]]:
        docs = [nlp.make_doc(t) for t in texts]
        named: List[List[Dict[str, Any]]] = [[] for _ in docs]
        for name, proc in nlp.pipeline:
            if name == before:
                break
            if hasattr(proc, "scored_spans"):
                named = _predict_with_scored_spans(proc, docs, batch_size)
            elif hasattr(proc, "pipe"):
                docs = list(proc.pipe(docs, batch_size=batch_size))
            else:
                docs = [proc(d) for d in docs]
        records = [doc_to_record(doc, str(i)) for i, doc in enumerate(docs)]
        for record, spans in zip(records, named):
            record[SCORED_SPANS] = spans
        return records

    return analyse


def _predict_with_scored_spans(proc: Any, docs: List[Any], batch_size: int) -> List[List[Dict[str, Any]]]:
    """Annotate ``docs`` with the component head ``proc`` as its ``pipe``
    would, batch by batch, and return its :meth:`scored_spans` for them
    from the same predictions."""
    from spacy.util import minibatch

    named: List[List[Dict[str, Any]]] = []
    for batch in minibatch(docs, batch_size):
        predictions = proc.predict(batch)
        proc.set_annotations(batch, predictions)
        named.extend(proc.scored_spans(batch, predictions))
    return named


def kenlm_fluency(model: Any, texts: Sequence[str]) -> List[Optional[float]]:
    """KenLM log-probability per character (natural log) of each text: the
    summed log10 probability of :func:`spacy_rhetoric.llm.ngram_lm.score_text`
    times ln 10, over the number of characters scored (those of its
    clauses); None for a text with nothing to score."""
    from .ngram_lm import clauses, score_text

    out: List[Optional[float]] = []
    for text in texts:
        n_chars = sum(len(c) for c in clauses(text))
        out.append(score_text(model, text).log10_prob * math.log(10) / n_chars if n_chars else None)
    return out


def rank_score(verdict: Verdict, fluency: Optional[float], reranker: Optional[float], weights: Dict[str, float]) -> float:
    """``w_analyser * analyser_score + w_fluency * fluency + w_reranker *
    reranker`` (a missing term counts 0). Verified candidates are returned
    before the others whatever their scores (:func:`order`)."""
    return (weights.get("analyser", 0.0) * verdict.analyser_score
            + weights.get("fluency", 0.0) * (fluency or 0.0)
            + weights.get("reranker", 0.0) * (reranker or 0.0))


def check_weights(weights: Dict[str, float]) -> Dict[str, float]:
    """``weights`` with the defaults filled in. Raises ``ValueError`` for an
    unknown name or a negative weight."""
    unknown = sorted(set(weights) - set(DEFAULT_WEIGHTS))
    if unknown:
        raise ValueError(f"unknown ranking weight(s) {unknown}; known: {sorted(DEFAULT_WEIGHTS)}")
    bad = {k: v for k, v in weights.items() if float(v) < 0}
    if bad:
        raise ValueError(f"ranking weights must be >= 0, got {bad}")
    return {**DEFAULT_WEIGHTS, **{k: float(v) for k, v in weights.items()}}


@dataclass
class Verifier(SettingsBlock):
    """How ``rhetoric_generator`` verifies and ranks its candidates: the
    ``verifier`` block.

    verify: analyse every candidate in its context and return the verified
        ones first (the rule of this module).
    analyser: the pipeline that verifies: ``"self"`` (the components before
        the generator in its own pipeline, when they include
        ``rhetoric_textcat``), a pipeline name or path (loaded at the first
        request), or None (verification off). ``set_analyser`` of the
        component sets any callable instead (the service does).
    weights: ranking weights ``{"analyser", "fluency", "reranker"}``
        (:func:`rank_score`; missing names take :data:`DEFAULT_WEIGHTS`).
    kenlm_path: KenLM model of the fluency term (``spacy project run
        kenlm-model``); None leaves the term out.
    min_branches: branches the linker must group for a verified parallelism.
    reranker: ``scorer(candidates, *, context, rhetoric, object, logprobs)
        -> scores``, a function of ``registry.misc`` (None: the component's
        default, ``spacy_rhetoric.LogprobReranker.v1``).

    Raises ``ValueError`` for an unknown or negative weight, or
    ``min_branches`` below 2 (R007).
    """

    verify: bool = True
    analyser: Optional[str] = "self"
    weights: Dict[str, float] = field(default_factory=lambda: dict(DEFAULT_WEIGHTS))
    kenlm_path: Optional[str] = None
    min_branches: int = 3
    reranker: Optional[Callable[..., List[float]]] = None

    #: the reranker is rebuilt from config, not saved with the settings
    UNSAVED = ("reranker",)

    def __post_init__(self) -> None:
        self.weights = check_weights(dict(self.weights or {}))
        if self.min_branches < 2:
            raise ValueError(Errors.R007.format(name="min_branches", minimum=2, value=self.min_branches))



@registry.misc("spacy_rhetoric.SuggestionVerifier.v1")
def make_verifier(
    verify: bool = True,
    analyser: Optional[str] = "self",
    weights: Optional[Dict[str, float]] = None,
    kenlm_path: Optional[str] = None,
    min_branches: int = 3,
    reranker: Optional[Callable[..., List[float]]] = None,
) -> Verifier:
    """The ``verifier`` block of ``rhetoric_generator`` (see :class:`Verifier`)."""
    return Verifier(verify, analyser, dict(weights or {}), kenlm_path, min_branches, reranker)
