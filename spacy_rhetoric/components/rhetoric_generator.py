"""``rhetoric_generator``: controllable rhetorical generation (CERD task RG),
every candidate verified by our own analyser.

Given up to k preceding sentences, a coarse device (metaphor,
personification, hyperbole, and beyond CERD parallelism) and an object
(tenor / personification object / hyperbole object / parallelism marker),
an LLM generates N candidate sentences that should use the device on the
object and continue the context (Liu et al. 2024, ``papers/000``, §3.2).
Each candidate is then analysed in its context by a rhetoric pipeline and
verified or not (:mod:`spacy_rhetoric.llm.verify`); verified ones come
first, ranked by the analyser's score, KenLM fluency and a pluggable
reranker from ``registry.misc`` (default ``spacy_rhetoric.LogprobReranker.v1``,
or ``spacy_rhetoric.HauserReranker.v1``).

As spacy-llm's ``llm`` component, it is configured by blocks: a registered
task (``@llm_tasks``: prompt style, language, context, shots, lead;
:class:`~spacy_rhetoric.llm.tasks.RhetoricGenerationTask`), a registered
model (``@llm_backends``), how candidates are drawn
(:class:`~spacy_rhetoric.llm.sampling.Sampling`) and how they are verified
and ranked (:class:`~spacy_rhetoric.llm.verify.Verifier`), beside which
sentences get suggestions (``policy``, ``rhetorics``)::

    [components.rhetoric_generator]
    factory = "rhetoric_generator"
    policy = "none"
    rhetorics = ["metaphor"]

    [components.rhetoric_generator.task]
    @llm_tasks = "spacy_rhetoric.RhetoricGeneration.v1"
    prompt_style = "instruction"
    n_context = 3

    [components.rhetoric_generator.model]
    @llm_backends = "spacy_rhetoric.OpenAICompatible.v1"
    base_url = "http://127.0.0.1:8000/v1"

    [components.rhetoric_generator.sampling]
    @misc = "spacy_rhetoric.GenerationSampling.v1"
    n_candidates = 3
    temperature = 0.7

    [components.rhetoric_generator.verifier]
    @misc = "spacy_rhetoric.SuggestionVerifier.v1"
    analyser = "self"

Settings left out take their defaults. A config with the earlier flat
settings is refused, naming the block of each (:func:`check_config`).

In a pipeline the component writes ``doc._.rhetoric_suggestions``: one dict
per requested sentence (by index, by explicit request, or by ``policy``)::

    {"sentence": 3, "start_char": 40, "end_char": 58, "text": "...",
     "rhetoric": "metaphor", "object": "月光",
     "candidates": [{"text": ..., "verified": ..., "evidence": [...], "reason": ...,
                     "score": ..., "logprob": ..., "repaired": ...}],
     "failures": [{"raw": ..., "error": ...}], "skipped": None,
     "n_verified": 1, "verification": "on", "budget_exhausted": False}

Answers that do not parse are listed under ``failures`` with their raw text;
nothing is invented. Docs without sentence boundaries are treated as one
sentence; empty docs get an empty list.
"""
from __future__ import annotations

import json
import logging
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, Span
from spacy.util import ensure_path, minibatch, registry

from ..errors import Errors
from ..llm.base import Completion, LLMBackend
from ..llm.prompts import RG_DEVICES, ParsedAnswer
from ..llm.records import split_sentences
from ..llm.sampling import Sampling
from ..llm.tasks import RGRequest, RhetoricGenerationTask
from ..llm.verify import Analyse, Verdict, Verifier, check_weights, kenlm_fluency, pipeline_analyser, rank_score, verify
from ..taxonomy import LITERAL, REQUEST_OBJECT

logger = logging.getLogger(__name__)

#: ``scorer(candidates, *, context, rhetoric, object, logprobs) -> scores``
Reranker = Callable[..., List[float]]
POLICIES = ("none", "literal", "all")
OBJECT_POS = ("NOUN", "PROPN")

if not Doc.has_extension("rhetoric_suggestions"):
    Doc.set_extension("rhetoric_suggestions", default=None)


@dataclass
class Candidate:
    """One generated sentence.

    text: the parsed generation ("" for a failure). score: reranker score
    (higher is better; None for a failure). logprob: the backend's answer
    log-probability (natural log) or None. raw: the model's raw answer.
    error: why it failed (backend error or unparseable answer), else None.
    repaired: True when the answer needed the parser's repair step.
    verified: the analyser found the requested device on the requested
    object (None: not checked, e.g. verification off or a failure);
    evidence: what it found, offsets in characters of ``text``; reason: why
    it is not verified; analyser_score, fluency: the ranking terms of
    :mod:`spacy_rhetoric.llm.verify` (fluency None without a KenLM model).
    """

    text: str
    score: Optional[float]
    logprob: Optional[float]
    raw: str
    error: Optional[str] = None
    repaired: bool = False
    verified: Optional[bool] = None
    evidence: List[dict] = field(default_factory=list)
    reason: str = ""
    analyser_score: Optional[float] = None
    fluency: Optional[float] = None

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Suggestion:
    """What one request returns: ``candidates`` (verified ones first, best
    first, then unverified ones, then failures), ``n_drawn`` (answers drawn),
    ``n_verified``, ``verification`` ("on", or "off: <why>"), and
    ``budget_exhausted`` (drawing stopped at ``time_budget`` before N),
    ``seconds`` (wall time of the request) and ``drawn`` (each answer's
    parsed text in the order drawn, "" for a failure: the first k of a
    sampled draw are a draw of k)."""

    candidates: List[Candidate]
    n_drawn: int
    n_verified: int
    verification: str
    budget_exhausted: bool = False
    seconds: float = 0.0
    drawn: List[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["candidates"] = [c.to_dict() for c in self.candidates]
        return out

    def message(self, analyser: str = "the analyser") -> str:
        """What was verified, in one sentence for the reader."""
        budget = " (the time budget was spent)" if self.budget_exhausted else ""
        if self.verification != "on":
            return f"{self.n_drawn} candidates drawn{budget}, not verified (verification {self.verification}): check each yourself"
        if self.n_verified == 0:
            return (f"none of the {self.n_drawn} candidates drawn{budget} was verified: {analyser} did not find the "
                    "requested device on the object in any; they are listed as unverified")
        return f"{self.n_verified} of {self.n_drawn} candidates drawn{budget} verified by {analyser}; verified ones first"


@registry.misc("spacy_rhetoric.LogprobReranker.v1")
def make_logprob_reranker(length_normalize: bool = True) -> Reranker:
    """Score candidates by the model's log-probability of the answer.

    length_normalize: divide by the candidate's length in characters (sum
    log-probabilities favour short answers; for Chinese, characters are a
    close proxy of tokens). Candidates without a log-probability (backends
    that do not report it) all get the same score, one below the lowest
    known score (0.0 when none is known), so the sort keeps their order.
    """

    def scorer(
        candidates: List[str],
        *,
        context: List[str],
        rhetoric: str,
        object: str,
        logprobs: List[Optional[float]],
    ) -> List[float]:
        known = []
        for text, lp in zip(candidates, logprobs):
            if lp is None:
                known.append(None)
            else:
                known.append(lp / max(1, len(text)) if length_normalize else lp)
        values = [v for v in known if v is not None]
        floor = (min(values) - 1.0) if values else 0.0
        return [floor if v is None else float(v) for v in known]

    return scorer


#: Where each setting of the earlier flat ``[components.rhetoric_generator]``
#: went: the block (``model``, ``task``, ``sampling``, ``verifier``).
MOVED_SETTINGS = {
    "backend": "model",
    "prompt_style": "task", "language": "task", "n_context": "task", "rewrite": "task",
    "max_sentence_chars": "task", "shots_path": "task", "n_shots": "task", "lead": "task",
    "n_candidates": "sampling", "temperature": "sampling", "max_new_tokens": "sampling",
    "time_budget": "sampling", "round_size": "sampling",
    "verify": "verifier", "analyser": "verifier", "weights": "verifier", "kenlm_path": "verifier",
    "min_branches": "verifier", "reranker": "verifier",
}


def check_config(config: Mapping[str, Any], section: str = "components.rhetoric_generator") -> None:
    """Raise ``ValueError`` (R023) when the ``[section]`` block ``config`` of
    a ``rhetoric_generator`` still has settings of the earlier flat config,
    naming for each the block it now belongs to (``backend`` became the
    ``model`` block). ``spacy.load`` and ``nlp.add_pipe`` reject such a
    config too (spaCy's "unexpected argument"); :func:`read_generator_config`,
    which reads the config files of ``rhetoric serve --generator-config``
    and of pipeline assembly, calls this first, so the message says where
    each setting went."""
    by_block: Dict[str, List[str]] = {}
    for key in config:
        if key in MOVED_SETTINGS:
            by_block.setdefault(MOVED_SETTINGS[key], []).append("the backend block" if key == "backend" else key)
    if by_block:
        moved = "; ".join(f"{', '.join(keys)} -> [{section}.{block}]" for block, keys in by_block.items())
        raise ValueError(Errors.R023.format(section=section, moved=moved))


def read_generator_config(path: Union[str, Path]) -> Dict[str, Any]:
    """The ``[components.rhetoric_generator]`` block of a config file
    (without ``factory``). Raises ValueError if the file has none, or when
    it has settings of the earlier flat config (R023, naming the block each
    now belongs to)."""
    from thinc.api import Config

    cfg = Config().from_disk(path, interpolate=False)
    block = cfg.get("components", {}).get("rhetoric_generator")
    if block is None:
        raise ValueError(f"{path}: no [components.rhetoric_generator] section")
    try:
        check_config(block)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None
    return {k: v for k, v in block.items() if k != "factory"}


@Language.factory(
    "rhetoric_generator",
    assigns=["doc._.rhetoric_suggestions"],
    requires=[],
    default_config={
        "task": {
            "@llm_tasks": "spacy_rhetoric.RhetoricGeneration.v1",
            "prompt_style": "instruction",
            "language": "zh",
            "n_context": 3,
            "rewrite": True,
            "max_sentence_chars": 300,
            "shots_path": None,
            "n_shots": 4,
            "lead": "none",
        },
        "model": {
            "@llm_backends": "spacy_rhetoric.OpenAICompatible.v1",
            "base_url": "http://127.0.0.1:8000/v1",
            "model": "default",
            "api_key_env": "OPENAI_API_KEY",
            "timeout": 60.0,
            "max_retries": 3,
        },
        "sampling": {
            "@misc": "spacy_rhetoric.GenerationSampling.v1",
            "n_candidates": 3,
            "temperature": 0.7,
            "max_new_tokens": 96,
            "time_budget": 0.0,
            "round_size": 0,
        },
        "verifier": {
            "@misc": "spacy_rhetoric.SuggestionVerifier.v1",
            "verify": True,
            "analyser": "self",
            "weights": {"analyser": 1.0, "fluency": 0.1, "reranker": 0.1},
            "kenlm_path": None,
            "min_branches": 3,
            "reranker": {"@misc": "spacy_rhetoric.LogprobReranker.v1"},
        },
        "policy": "none",
        "rhetorics": ["metaphor"],
    },
)
def make_rhetoric_generator(
    nlp: Language,
    name: str,
    task: RhetoricGenerationTask,
    model: LLMBackend,
    sampling: Sampling,
    verifier: Verifier,
    policy: str,
    rhetorics: List[str],
) -> "RhetoricGenerator":
    """Factory of :class:`RhetoricGenerator`, after spacy-llm's ``llm``
    component: a registered ``task`` (``@llm_tasks``, the prompts and the
    context), a registered ``model`` (``@llm_backends``), the ``sampling``
    and ``verifier`` blocks (``@misc``), and which sentences get
    suggestions (``policy``, ``rhetorics``). See :class:`RhetoricGenerator`."""
    return RhetoricGenerator(nlp.vocab, model, name=name, task=task, sampling=sampling, verifier=verifier,
                             policy=policy, rhetorics=rhetorics, nlp=nlp)


class RhetoricGenerator:
    """Suggest rhetorical sentences with an LLM (CERD RG).

    backend: any :class:`LLMBackend` (the ``model`` block of the config).
    task: the :class:`~spacy_rhetoric.llm.tasks.RhetoricGenerationTask`
        (prompt style, language, context, shots, lead); default: CERD's
        instruction prompt in Chinese with 3 context sentences.
    sampling: :class:`~spacy_rhetoric.llm.sampling.Sampling` (candidates
        per request, decoding settings, time budget); default ``Sampling()``.
    verifier: :class:`~spacy_rhetoric.llm.verify.Verifier` (analyser,
        ranking weights, KenLM model, reranker); default ``Verifier()``.
    policy: which sentences get suggestions when the caller names none:
        ``"none"`` (only requested ones), ``"literal"`` (sentences whose
        ``sent._.rhetoric`` has no device, i.e. the rhetoric textcat judged
        them literal; without textcat output, sentences outside
        ``doc.spans["rhetoric"]``), ``"all"``.
    rhetorics: devices to suggest for policy-chosen sentences (each of
        metaphor/personification/hyperbole/parallelism).

    The settings of the three blocks and of the component are kept together
    in ``cfg`` (one flat dict, saved by :meth:`to_disk`); :attr:`task`
    is rebuilt from it, so a change of ``cfg`` applies to the next request.

    Raises ``ValueError`` for an unknown policy (R009) or device (R001), or a
    completion-style task with a backend that has no ``complete`` (R004).
    """

    def __init__(
        self,
        vocab: Any,
        backend: LLMBackend,
        *,
        name: str = "rhetoric_generator",
        task: Optional[RhetoricGenerationTask] = None,
        sampling: Optional[Sampling] = None,
        verifier: Optional[Verifier] = None,
        policy: str = "none",
        rhetorics: Sequence[str] = ("metaphor",),
        nlp: Optional[Language] = None,
    ) -> None:
        task = task or RhetoricGenerationTask()
        sampling = sampling or Sampling()
        verifier = verifier or Verifier()
        if task.prompt_style == "completion" and not callable(getattr(backend, "complete", None)):
            raise ValueError(Errors.R004.format(backend=type(backend).__name__))
        if policy not in POLICIES:
            raise ValueError(Errors.R009.format(policies=POLICIES, value=policy))
        bad = [r for r in rhetorics if r not in RG_DEVICES]
        if bad:
            raise ValueError(Errors.R001.format(devices=RG_DEVICES, value=bad))
        self.vocab = vocab
        self.name = name
        self.backend = backend
        self.reranker = verifier.reranker or make_logprob_reranker()
        self.cfg: Dict[str, Any] = {"policy": policy, "rhetorics": list(rhetorics), **task.cfg, **sampling.cfg,
                                    **verifier.cfg}
        self._nlp = nlp
        self._analyse: Optional[Analyse] = None
        self._kenlm: Any = None

    def check_ready(self) -> None:
        """Raise ``FileNotFoundError`` (one sentence naming the project command
        that builds it) when an asset this generator needs is missing: the
        backend's local model or LoRA adapter (backends with a
        ``check_available()``), or the KenLM model of ``kenlm_path``. Cheap:
        nothing is loaded. ``rhetoric serve`` calls it at start."""
        check = getattr(self.backend, "check_available", None)
        if callable(check):
            check()
        path = self.cfg.get("kenlm_path")
        if path and not Path(path).is_file():
            raise FileNotFoundError(Errors.R021.format(path=str(path)))

    def set_analyser(self, analyse: Optional[Analyse]) -> None:
        """Verify with ``analyse`` (``texts -> analysis records``), e.g. a
        stub in tests or the service's locked pipeline; None = back to the
        ``analyser`` setting."""
        self._analyse = analyse

    # -- plain Python API ---------------------------------------------------
    def generate(
        self,
        doc_or_context: Union[Doc, Sequence[str], str, None],
        rhetoric: str,
        object: str,
        n: Optional[int] = None,
        *,
        original: Optional[str] = None,
    ) -> List[Candidate]:
        """Generate ``n`` candidate sentences (CERD RG).

        doc_or_context: the text the sentence should follow: a Doc (its last
            k sentences), a list of sentences, a string (split into
            sentences), or None/empty for no context.
        rhetoric: metaphor, personification, hyperbole or parallelism.
        object: the tenor / personification object / hyperbole object /
            parallelism marker.
        Returns :attr:`Suggestion.candidates`: verified candidates best
        first, then unverified ones, then failures (``ok`` False, with raw
        answer and error). Raises ``ValueError`` for an unknown device or an
        empty object.
        """
        return self.suggest(doc_or_context, rhetoric, object, n, original=original).candidates

    def suggest(
        self,
        doc_or_context: Union[Doc, Sequence[str], str, None],
        rhetoric: str,
        object: str,
        n: Optional[int] = None,
        *,
        original: Optional[str] = None,
        weights: Optional[Dict[str, float]] = None,
        time_budget: Optional[float] = None,
    ) -> Suggestion:
        """Draw ``n`` candidates, verify and rank them (see :meth:`generate`);
        the :class:`Suggestion` also says how many were drawn and verified.
        weights, time_budget: this request's ranking weights (missing names
        keep the component's) and time budget in seconds, instead of the
        component's settings. Raises ``ValueError`` for an unknown or
        negative weight or a negative budget."""
        context = self._context_of(doc_or_context)
        if time_budget is not None and time_budget < 0:
            raise ValueError(f"time_budget must be >= 0 seconds, got {time_budget}")
        merged = check_weights({**self.cfg["weights"], **(weights or {})})
        return self._run([(context, rhetoric, object, original)], n or self.cfg["n_candidates"],
                         weights=merged, time_budget=time_budget)[0]

    # -- pipeline API -------------------------------------------------------
    def __call__(
        self,
        doc: Doc,
        *,
        sentences: Optional[Sequence[int]] = None,
        requests: Optional[Sequence[dict]] = None,
    ) -> Doc:
        """Write ``doc._.rhetoric_suggestions``.

        sentences: sentence indices to suggest for (devices from
            ``rhetorics``, objects found as for the policy).
        requests: explicit ``{"sentence": i, "rhetoric": ..., "object": ...}``.
        Without either, ``policy`` chooses. Pass them with
        ``nlp(text, component_cfg={"rhetoric_generator": {"sentences": [2]}})``.
        Raises ``IndexError`` for a sentence index out of range.
        """
        return next(iter(self._process([doc], sentences=sentences, requests=requests)))

    def pipe(self, stream: Iterable[Doc], *, batch_size: int = 16) -> Iterator[Doc]:
        """Process docs in batches; one backend call per batch of docs, so a
        server sees up to ``concurrency`` requests at once."""
        for batch in minibatch(stream, size=batch_size):
            yield from self._process(list(batch))

    # -- serialisation (settings only; the backend is rebuilt from config) ---
    def to_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = tuple()) -> None:
        """Write the settings as ``cfg`` JSON. The backend is not saved: it
        is described by the pipeline config (model names, paths, the *name*
        of the API key variable), so no secret can end up on disk."""
        path = ensure_path(path)
        path.mkdir(parents=True, exist_ok=True)
        (path / "cfg").write_text(json.dumps(self.cfg, ensure_ascii=False, indent=2), encoding="utf8")

    def from_disk(self, path: Union[str, Path], *, exclude: Iterable[str] = tuple()) -> "RhetoricGenerator":
        """Read the settings written by :meth:`to_disk`."""
        cfg_path = ensure_path(path) / "cfg"
        if cfg_path.exists():
            self.cfg.update(json.loads(cfg_path.read_text(encoding="utf8")))
        return self

    # -- internals ----------------------------------------------------------
    def _context_of(self, value: Union[Doc, Sequence[str], str, None]) -> List[str]:
        if value is None:
            sents: List[str] = []
        elif isinstance(value, Doc):
            sents = [s.text for s in _sentences(value)]
        elif isinstance(value, str):
            sents = split_sentences(value)
        else:
            sents = [str(s) for s in value]
        return self._clip_context(sents)

    def _clip_context(self, sents: Sequence[str]) -> List[str]:
        return self.task.clip_context(sents)

    def _targets(self, doc: Doc, sents: List[Span], sentences, requests) -> List[dict]:
        if requests is not None:
            out = []
            for req in requests:
                i = int(req["sentence"])
                _check_index(i, sents)
                out.append({"sentence": i, "rhetoric": req["rhetoric"], "object": req.get("object")})
            return out
        if sentences is not None:
            indices = [int(i) for i in sentences]
            for i in indices:
                _check_index(i, sents)
        elif self.cfg["policy"] == "all":
            indices = list(range(len(sents)))
        elif self.cfg["policy"] == "literal":
            indices = [i for i, s in enumerate(sents) if _is_literal(doc, s)]
        else:
            indices = []
        return [{"sentence": i, "rhetoric": r, "object": None} for i in indices for r in self.cfg["rhetorics"]]

    def _process(self, docs: List[Doc], sentences=None, requests=None) -> List[Doc]:
        jobs, slots = [], []
        for doc in docs:
            sents = _sentences(doc)
            suggestions: List[dict] = []
            for target in self._targets(doc, sents, sentences, requests):
                sent = sents[target["sentence"]]
                entry = {
                    "sentence": target["sentence"],
                    "start_char": sent.start_char,
                    "end_char": sent.end_char,
                    "text": sent.text,
                    "rhetoric": target["rhetoric"],
                    "object": target["object"] or _find_object(doc, sent, target["rhetoric"]),
                    "candidates": [],
                    "failures": [],
                    "skipped": None,
                }
                if entry["object"] is None:
                    entry["skipped"] = f"no {REQUEST_OBJECT.get(entry['rhetoric'], 'object')} found in the sentence"
                elif len(sent.text) > self.cfg["max_sentence_chars"]:
                    entry["skipped"] = f"sentence longer than max_sentence_chars={self.cfg['max_sentence_chars']}"
                else:
                    context = self._clip_context([s.text for s in sents[: target["sentence"]]])
                    original = sent.text if self.cfg["rewrite"] else None
                    jobs.append((context, entry["rhetoric"], entry["object"], original))
                    slots.append(entry)
                suggestions.append(entry)
            doc._.rhetoric_suggestions = suggestions
        if jobs:
            for entry, result in zip(slots, self._run(jobs, self.cfg["n_candidates"])):
                entry["candidates"] = [c.to_dict() for c in result.candidates if c.ok]
                entry["failures"] = [{"raw": c.raw, "error": c.error} for c in result.candidates if not c.ok]
                entry.update(n_verified=result.n_verified, verification=result.verification,
                             budget_exhausted=result.budget_exhausted)
        return docs

    @property
    def task(self) -> RhetoricGenerationTask:
        """The RG task of ``cfg`` (:class:`~spacy_rhetoric.llm.tasks.RhetoricGenerationTask`):
        it makes the prompts, asks the backend and parses the answers."""
        return RhetoricGenerationTask.from_cfg(self.cfg)

    @property
    def sampling(self) -> Sampling:
        """The sampling settings of ``cfg``."""
        return Sampling.from_cfg(self.cfg)

    @property
    def verifier(self) -> Verifier:
        """The verification settings of ``cfg``, with the reranker."""
        return Verifier.from_cfg(self.cfg, reranker=self.reranker)

    def _run(self, jobs: List[tuple], n: int, *, weights: Optional[Dict[str, float]] = None,
             time_budget: Optional[float] = None) -> List[Suggestion]:
        """jobs: ``(context, rhetoric, object, original)``. Candidates are
        drawn in rounds (one backend call each, all jobs batched) until ``n``
        are drawn or ``time_budget`` is spent, then verified and ranked."""
        start = time.perf_counter()
        task, sampling = self.task, self.sampling
        prompts = task.generate_prompts([RGRequest(list(ctx), r, o, orig) for ctx, r, o, orig in jobs])
        size = sampling.round_size or n
        budget = sampling.time_budget if time_budget is None else time_budget
        answers: List[List[Completion]] = [[] for _ in jobs]
        parsed: List[List[ParsedAnswer]] = [[] for _ in jobs]
        while len(answers[0]) < n:
            if budget and answers[0] and time.perf_counter() - start >= budget:
                break
            got = task.call(self.backend, prompts, n=min(size, n - len(answers[0])), first=len(answers[0]),
                            temperature=sampling.temperature, max_new_tokens=sampling.max_new_tokens)
            for i, (comps, p) in enumerate(zip(got, task.parse_responses(got))):
                answers[i].extend(comps)
                parsed[i].extend(p)
        weights = weights or self.cfg["weights"]
        out = [self._rank(job, comps, p, weights) for job, comps, p in zip(jobs, answers, parsed)]
        for result in out:
            result.budget_exhausted = len(answers[0]) < n
            result.seconds = time.perf_counter() - start
        return out

    def _analyser(self) -> Tuple[Optional[Analyse], str]:
        """The analyser to verify with and the verification status."""
        if not self.cfg.get("verify", True):
            return None, "off: verify = false"
        if self._analyse is not None:
            return self._analyse, "on"
        name = self.cfg.get("analyser")
        if name is None:
            return None, "off: no analyser configured"
        if name == "self":
            if self._nlp is None or "rhetoric_textcat" not in self._nlp.pipe_names:
                return None, "off: this pipeline has no rhetoric_textcat (set analyser to a pipeline)"
            self._analyse = pipeline_analyser(self._nlp, before=self.name)
        else:
            from ..analysis.loading import load_pipeline

            self._analyse = pipeline_analyser(load_pipeline(name))
        return self._analyse, "on"

    def _fluency(self, texts: List[str]) -> List[Optional[float]]:
        path = self.cfg.get("kenlm_path")
        if not path:
            return [None] * len(texts)
        if self._kenlm is None:
            from ..llm.ngram_lm import load_kenlm

            self._kenlm = load_kenlm(path)
        return kenlm_fluency(self._kenlm, texts)

    def _rank(self, job: tuple, completions: List[Completion], answers: List[ParsedAnswer],
              weights: Dict[str, float]) -> Suggestion:
        context, rhetoric, obj, _ = job
        good: Dict[str, Candidate] = {}
        failures: List[Candidate] = []
        for comp, parsed in zip(completions, answers):
            if not comp.ok:
                failures.append(Candidate("", None, None, comp.text, error=comp.error))
                continue
            if not parsed.ok:
                failures.append(Candidate("", None, comp.logprob, comp.text, error=parsed.error))
                continue
            cand = Candidate(parsed.generation, None, comp.logprob, comp.text, repaired=parsed.repaired)
            prev = good.get(cand.text)
            if prev is None or _lp(cand) > _lp(prev):
                good[cand.text] = cand
        ranked = list(good.values())
        analyse, status = self._analyser()
        if ranked:
            scores = self.reranker(
                [c.text for c in ranked],
                context=list(context),
                rhetoric=rhetoric,
                object=obj,
                logprobs=[c.logprob for c in ranked],
            )
            if len(scores) != len(ranked):
                raise ValueError(Errors.R010.format(n_scores=len(scores), n_candidates=len(ranked)))
            texts = [c.text for c in ranked]
            verdicts = verify(analyse, context, rhetoric, obj, texts, min_branches=self.cfg.get("min_branches", 3)) \
                if analyse else [Verdict(None, reason=f"not verified: verification {status}") for _ in ranked]
            for cand, score, verdict, fluency in zip(ranked, scores, verdicts, self._fluency(texts)):
                cand.verified, cand.evidence, cand.reason = verdict.verified, verdict.evidence, verdict.reason
                cand.analyser_score = verdict.analyser_score if analyse else None
                cand.fluency = None if fluency is None else round(fluency, 4)
                cand.score = rank_score(verdict, fluency, float(score), weights)
            ranked.sort(key=lambda c: (c.verified is True, c.score), reverse=True)
        if failures:
            logger.info("%d of %d answers failed: %s", len(failures), len(completions), failures[0].error)
        n_verified = sum(c.verified is True for c in ranked)
        drawn = [p.generation if c.ok and p.ok else "" for c, p in zip(completions, answers)]
        return Suggestion(ranked + failures, len(completions), n_verified, status, drawn=drawn)


def _lp(cand: Candidate) -> float:
    return cand.logprob if cand.logprob is not None else float("-inf")


def _sentences(doc: Doc) -> List[Span]:
    """The doc's sentences; the whole doc when it has no sentence boundaries;
    none for an empty or whitespace-only doc."""
    if not doc.text.strip():
        return []
    if doc.has_annotation("SENT_START"):
        return list(doc.sents)
    return [doc[:]]


def _check_index(i: int, sents: List[Span]) -> None:
    if not 0 <= i < len(sents):
        raise IndexError(Errors.R011.format(index=i, n_sents=len(sents)))


def _is_literal(doc: Doc, sent: Span) -> bool:
    """Literal per the textcat (``sent._.rhetoric``), else per the absence of
    the sentence from ``doc.spans["rhetoric"]``."""
    analysis = sent._.rhetoric if Span.has_extension("rhetoric") else None
    if analysis is not None:
        coarse = analysis.get("coarse") or {}
        return not [lab for lab in coarse if lab != LITERAL]
    group = doc.spans.get("rhetoric") if "rhetoric" in doc.spans else []
    return not any(s.start < sent.end and sent.start < s.end for s in group)


def _find_object(doc: Doc, sent: Span, rhetoric: str) -> Optional[str]:
    """The object for ``rhetoric`` in ``sent``: a predicted component span of
    the device's object type (``doc.spans["rhetoric_components"]``), else the
    first noun/proper noun when the doc has POS tags, else None."""
    label = REQUEST_OBJECT.get(rhetoric)
    if "rhetoric_components" in doc.spans:
        for span in doc.spans["rhetoric_components"]:
            if span.label_ == label and sent.start <= span.start and span.end <= sent.end:
                return span.text
    if doc.has_annotation("POS"):
        for token in sent:
            if token.pos_ in OBJECT_POS:
                return token.text
    return None
