"""``rhetoric research evaluate-generation``: score generated candidates from a JSONL file.

Input: one JSON object per line::

    {"context": ["前一句。", ...], "condition": {"rhetoric": "metaphor", "object": "月亮"},
     "reference": "原文的句子。", "candidates": ["生成句一。", "生成句二。"],
     "literal": "可选：HAUSER 一致性用的字面句"}

``context`` (list of strings) and ``literal`` are optional; ``reference`` may
be "" (then BLEU/ROUGE/BERTScore and pairwise ranking skip that record).
A malformed line raises :class:`~spacy_rhetoric.errors.CorpusFormatError`
naming the file and line.

Metrics (each only when its option is given; sources in the modules named):

- reference metrics BLEU-2/4, ROUGE-L, BERTScore (``--encoder``) and
  perplexity under a causal LM (``--lm``): :mod:`.reference`;
- perplexity and OOV rate under a KenLM word n-gram model (``--kenlm``):
  :mod:`spacy_rhetoric.llm.ngram_lm`;
- HAUSER (He et al. 2023, ``papers/002_*``) relevance, creativity,
  informativeness and quality Q (``--kb``) and sentiment consistency
  c_s = P(h_s = a) − P(h_l = a) (§3.1.3, eq. 5; ``--sentiment jiagu`` or a
  local classifier): :mod:`spacy_rhetoric.llm.hauser`. HAUSER compares a candidate with the
  literal sentence it polishes: here the record's ``literal``, else its
  ``reference``. The candidate (and a reference counterpart, itself a
  rhetorical sentence) is cut after its first vehicle as §3.1.3 prescribes;
  a literal is used whole, since §3.1.3's cut of literals at their first
  event needs an event extractor we do not have. Logical consistency
  (§3.1.2, eq. 4) needs a Chinese NLI model, which is not available: it is
  reported as "not available", never approximated, and Q leaves it out;
- rhetoric success rate (``--rhetoric-model``): :mod:`spacy_rhetoric.llm.rhetoric_success`.
  With that pipeline, HAUSER's components (tenor, vehicle) come from its
  ``rhetoric_components``; without it, from the comparator rule.

Output: a JSON file (per-record, per-candidate scores; corpus-level summary;
notices of skipped scores) and a readable Markdown report beside it.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..corpora.jsonio import iter_jsonl_objects
from ..errors import CorpusFormatError
from ..taxonomy import COARSE_LABELS

NOT_AVAILABLE = "not available"
LOGICAL_NOTICE = (
    "HAUSER logical consistency (He et al. 2023, §3.1.2, eq. 4): not available: it needs a Chinese NLI "
    "model and none is available; it is not approximated, and quality Q leaves it out (weights rescaled)"
)
LITERAL_CUT_NOTICE = (
    "HAUSER sentiment consistency: literal sentences are classified whole (§3.1.3 cuts them at their "
    "first event; no event extractor is available); candidates and references are cut after their first vehicle"
)

#: Readable names of the summary keys (the report and the CLI table).
METRIC_NAMES: Dict[str, str] = {
    "records": "records",
    "candidates": "candidates",
    "bleu2": "BLEU-2 (%, characters)",
    "bleu4": "BLEU-4 (%, characters)",
    "rougeL": "ROUGE-L F (%, characters)",
    "bertscore_P": "BERTScore precision (%, --encoder)",
    "bertscore_R": "BERTScore recall (%, --encoder)",
    "bertscore_F1": "BERTScore F1 (%, --encoder)",
    "perplexity": "perplexity, causal LM (--lm), per LM token",
    "kenlm_perplexity": "perplexity, KenLM n-gram (--kenlm), per word, OOV included",
    "kenlm_perplexity_excl_oov": "perplexity, KenLM n-gram, per word, OOV excluded",
    "kenlm_oov_rate": "KenLM OOV rate (fraction of words)",
    "kenlm_words": "KenLM words scored",
    "hauser_quality": "HAUSER quality Q (0-1, per-record min-max, --kb)",
    "hauser_relevance": "HAUSER relevance r (KB samples)",
    "hauser_creativity": "HAUSER creativity C (<= 0)",
    "hauser_informativeness": "HAUSER informativeness I (vehicle tokens)",
    "hauser_sentiment_consistency": "HAUSER sentiment consistency c_s (-1 to 1, --sentiment)",
    "hauser_logical_consistency": "HAUSER logical consistency c_l",
    "records_without_candidate": "records without a candidate (every answer failed to parse)",
    "rhetoric_success_rate": "rhetoric success rate: device and object (--rhetoric-model)",
    "rhetoric_success_rate_of_requests": "rhetoric success rate per request (a failed generation counts as failure)",
    "rhetoric_device_rate": "rhetoric device rate: requested device labelled",
    "rhetoric_object_rate": "rhetoric object rate: requested object found as its component",
    "rhetoric_candidates": "candidates requesting",
    "judge_rating": "LLM judge rating (1-5)",
    "judge_pairwise_better_rate": "LLM judge: better than the reference (rate)",
    "judge_metaphor_total": "LLM metaphor judge total",
}


def metric_name(key: str) -> str:
    """Readable name of a summary key; per-device keys (``key.device``)
    get the device appended, unknown keys are returned as they are."""
    base, _, device = key.partition(".")
    name = METRIC_NAMES.get(base, key if not device else base)
    return f"{name} [{device}]" if device else name


def read_generation_jsonl(path: Path) -> List[Dict[str, Any]]:
    """Validated records of a generation JSONL file (see module docstring)."""
    path = Path(path)
    return [_read_record(path, line_no, rec) for line_no, rec in iter_jsonl_objects(path)]


def _read_record(path: Path, line_no: int, rec: Dict[str, Any]) -> Dict[str, Any]:
    def fail(message: str):
        raise CorpusFormatError(path, message, line=line_no)

    cands = rec.get("candidates")
    if not isinstance(cands, list) or not all(isinstance(c, str) for c in cands):
        fail("'candidates' must be a list of strings")
    context = rec.get("context", [])
    if not isinstance(context, list) or not all(isinstance(c, str) for c in context):
        fail("'context' must be a list of strings")
    cond = rec.get("condition", {})
    if not isinstance(cond, dict) or cond.get("rhetoric", "metaphor") not in COARSE_LABELS:
        fail(f"'condition.rhetoric' must be one of {list(COARSE_LABELS)}")
    if not isinstance(cond.get("object", ""), str):
        fail("'condition.object' must be a string")
    for key in ("reference", "literal"):
        if rec.get(key) is not None and not isinstance(rec[key], str):
            fail(f"'{key}' must be a string")
    return {
        "line": line_no,
        "context": context,
        "rhetoric": cond.get("rhetoric", "metaphor"),
        "object": cond.get("object", ""),
        "reference": rec.get("reference") or "",
        "literal": rec.get("literal") or None,
        "candidates": cands,
    }


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


@dataclass
class _Tools:
    """What the options loaded: HAUSER scorer, sentiment classifier, rhetoric
    pipeline, KenLM model; and the notices collected."""

    hauser: Any = None
    sentiment: Any = None
    nlp: Any = None
    kenlm: Any = None
    notices: List[str] = field(default_factory=list)

    def notice(self, text: str) -> None:
        if text not in self.notices:
            self.notices.append(text)


def _load_tools(kb_path, sentiment, rhetoric_model, kenlm_path, lm_path, encoder_path) -> _Tools:
    from ..llm import hauser as hs

    tools = _Tools(sentiment=hs.load_sentiment(sentiment))
    if kb_path is not None:
        from ..llm.kb import SimileKB

        tools.hauser = hs.HauserScorer(SimileKB.from_disk(kb_path), sentiment=tools.sentiment)
    else:
        tools.notice("HAUSER relevance, creativity, informativeness and quality skipped: no --kb given")
    if tools.sentiment is None:
        tools.notice("HAUSER sentiment consistency skipped: no --sentiment given")
    if rhetoric_model:
        from ..llm.rhetoric_success import load_rhetoric_model

        tools.nlp = load_rhetoric_model(rhetoric_model)
    else:
        tools.notice("rhetoric success rate skipped: no --rhetoric-model given")
    if kenlm_path:
        from ..llm.ngram_lm import load_kenlm

        tools.kenlm = load_kenlm(kenlm_path)
    else:
        tools.notice("KenLM perplexity skipped: no --kenlm given")
    if not lm_path:
        tools.notice("perplexity skipped: no --lm given")
    if not encoder_path:
        tools.notice("BERTScore skipped: no --encoder given")
    return tools


def evaluate_generation(
    input_path: Path,
    output_path: Path,
    *,
    kb_path: Optional[Path] = None,
    lm_path: Optional[str] = None,
    encoder_path: Optional[str] = None,
    kenlm_path: Optional[str] = None,
    sentiment: Optional[str] = None,
    rhetoric_model: Optional[str] = None,
    backend=None,
    judges: Sequence[str] = (),
    progress: bool = True,
) -> Dict[str, Any]:
    """Score every candidate of ``input_path``; write ``output_path`` (JSON)
    and ``output_path`` with suffix ``.md`` (report). ``kenlm_path``: an ARPA
    or KenLM binary file; ``sentiment``: ``"jiagu"`` or a local classifier
    folder; ``rhetoric_model``: a spaCy pipeline (folder or package);
    ``judges``: any of ``rating``, ``pairwise``, ``metaphor`` (need
    ``backend``, an LLMBackend). Returns the written JSON object. Raises
    ValueError for a judge name unknown or requested without a backend."""
    from tqdm import tqdm

    unknown = set(judges) - {"rating", "pairwise", "metaphor"}
    if unknown:
        raise ValueError(f"unknown judges {sorted(unknown)}; choose from rating, pairwise, metaphor")
    if judges and backend is None:
        raise ValueError("LLM judges need a backend (--base-url and --model)")
    records = read_generation_jsonl(input_path)
    tools = _load_tools(kb_path, sentiment, rhetoric_model, kenlm_path, lm_path, encoder_path)
    rows = [_score_record(rec, tools) for rec in tqdm(records, desc="evaluate-generation", disable=not progress)]
    summary = _summary(rows, tools, lm_path, encoder_path)
    _run_judges(judges, backend, rows, summary)
    result = {"input": str(input_path), "summary": summary, "notices": tools.notices, "records": rows}
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    output_path.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf8")
    output_path.with_suffix(".md").write_text(report(result), encoding="utf8")
    return result


def _components(texts: Sequence[str], tenor: Optional[str], tools: _Tools):
    """(Docs of the rhetoric pipeline or None, HAUSER components of each text)."""
    from ..llm.hauser import doc_components, rule_components

    if tools.nlp is None:
        return None, [rule_components(t, tenor) for t in texts]
    from ..analysis.records import single_torch_thread

    with single_torch_thread():  # as `rhetoric analyze`: far faster on a busy machine
        docs = list(tools.nlp.pipe(texts))
    return docs, [doc_components(d, tenor) for d in docs]


def _counterpart(rec: Dict[str, Any], tenor: Optional[str], tools: _Tools) -> Optional[str]:
    """HAUSER's literal sentence for the consistency scores: the record's
    literal (whole), else its reference cut after the first vehicle."""
    from ..llm.hauser import cut_at_first_vehicle

    if rec["literal"]:
        return rec["literal"]
    if not rec["reference"]:
        return None
    return cut_at_first_vehicle([rec["reference"]], _components([rec["reference"]], tenor, tools)[1])[0]


def _score_record(rec: Dict[str, Any], tools: _Tools) -> Dict[str, Any]:
    from ..llm import hauser as hs
    from . import reference as ref

    texts = rec["candidates"]
    cands: List[Dict[str, Any]] = [{"text": c} for c in texts]
    row = {**{k: rec[k] for k in ("line", "rhetoric", "object", "reference", "literal")}, "candidates": cands}
    if rec["reference"]:
        for c in cands:
            c["bleu2"] = ref.bleu([c["text"]], [rec["reference"]], 2)
            c["bleu4"] = ref.bleu([c["text"]], [rec["reference"]], 4)
            c["rougeL"] = ref.rouge_l([c["text"]], [rec["reference"]])
    if not cands or (tools.hauser is None and tools.sentiment is None and tools.nlp is None):
        return row
    tenor = rec["object"] if rec["rhetoric"] == "metaphor" and rec["object"] else None
    docs, comps = _components(texts, tenor, tools)
    if docs is not None:
        from ..llm.rhetoric_success import check_docs

        for c, check in zip(cands, check_docs(docs, rec["rhetoric"], rec["object"])):
            c["rhetoric_success"] = check
    counterpart = None
    if tools.sentiment is not None:
        counterpart = _counterpart(rec, tenor, tools)
        row["sentiment_counterpart"] = None if counterpart is None else "literal" if rec["literal"] else "reference"
    sentiment = None
    if tools.hauser is not None:
        scores = tools.hauser.score_group(texts, literal=counterpart, tenor=tenor, components=comps)
        for c, s in zip(cands, scores):
            c["hauser"] = s
        sentiment = [s["sentiment"] for s in scores] if counterpart else None
    elif counterpart:
        sentiment = hs.sentiment_consistency(tools.sentiment, [counterpart] * len(texts), hs.cut_at_first_vehicle(texts, comps))
    if sentiment is not None:
        for c, value in zip(cands, sentiment):
            c["sentiment_consistency"] = value
    return row


def _summary(rows: List[Dict[str, Any]], tools: _Tools, lm_path, encoder_path) -> Dict[str, Any]:
    from . import reference as ref

    flat = [(r, c) for r in rows for c in r["candidates"]]
    with_ref = [(r, c) for r, c in flat if r["reference"]]
    summary: Dict[str, Any] = {"records": len(rows), "candidates": len(flat),
                               "records_without_candidate": sum(1 for r in rows if not r["candidates"])}
    if with_ref:
        cands, refs = [c["text"] for _, c in with_ref], [r["reference"] for r, _ in with_ref]
        summary.update({"bleu2": ref.bleu(cands, refs, 2), "bleu4": ref.bleu(cands, refs, 4), "rougeL": ref.rouge_l(cands, refs)})
        if encoder_path:
            summary.update({f"bertscore_{k}": v for k, v in ref.bertscore(cands, refs, encoder_path).items()})
    if lm_path and flat:
        summary["perplexity"] = ref.perplexity([c["text"] for _, c in flat], lm_path)
    if tools.kenlm is not None and flat:
        summary.update(_kenlm_summary(flat, tools.kenlm))
    if tools.hauser is not None:
        # the scorer's "logical consistency skipped" notice is replaced by LOGICAL_NOTICE
        for notice in tools.hauser.notices:
            if "logical consistency" not in notice and "sentiment consistency skipped" not in notice:
                tools.notice(notice)
        for key in ("quality", "relevance", "creativity", "informativeness"):
            summary[f"hauser_{key}"] = _mean([c["hauser"][key] for _, c in flat if "hauser" in c])
    if tools.hauser is not None or tools.sentiment is not None:
        _consistency_summary(rows, flat, tools, summary)
    if tools.nlp is not None:
        from ..llm.rhetoric_success import success_summary

        checked = [(r, c) for r, c in flat if "rhetoric_success" in c]
        summary.update(success_summary([c["rhetoric_success"] for _, c in checked], [r["rhetoric"] for r, _ in checked]))
        summary["rhetoric_success_rate_of_requests"] = _request_success(rows)
    return summary


def _request_success(rows: List[Dict[str, Any]]) -> Optional[float]:
    """Share of records (requests) with at least one successful candidate:
    a request whose answers all failed to parse counts as a failure, which
    the per-candidate rate cannot see."""
    if not rows:
        return None
    ok = sum(any(c.get("rhetoric_success", {}).get("success") for c in r["candidates"]) for r in rows)
    return ok / len(rows)


def _kenlm_summary(flat, model) -> Dict[str, Any]:
    from ..llm.ngram_lm import kenlm_perplexity

    corpus, per_text = kenlm_perplexity([c["text"] for _, c in flat], model)
    for (_, c), counts in zip(flat, per_text):
        c["kenlm"] = {**counts.summary(), "segmented": [" ".join(words) for words in counts.segmented]}
    return {f"kenlm_{k}": v for k, v in corpus.items()}


def _consistency_summary(rows, flat, tools: _Tools, summary: Dict[str, Any]) -> None:
    if tools.sentiment is not None:
        summary["hauser_sentiment_consistency"] = _mean([c.get("sentiment_consistency") for _, c in flat])
        missing = sum(1 for r in rows if r["candidates"] and r.get("sentiment_counterpart") is None)
        if missing:
            tools.notice(f"HAUSER sentiment consistency skipped for {missing} record(s) with neither literal nor reference")
        if any(r.get("sentiment_counterpart") == "literal" for r in rows):
            tools.notice(LITERAL_CUT_NOTICE)
    summary["hauser_logical_consistency"] = NOT_AVAILABLE
    tools.notice(LOGICAL_NOTICE)


def _run_judges(judges: Sequence[str], backend, rows: List[Dict[str, Any]], summary: Dict[str, Any]) -> None:
    from .judges import GenerationItem, MetaphorJudge, PairwiseRanker, SingleAnswerRater, better_rate

    items = [
        (c, GenerationItem(c["text"], r["rhetoric"] if r["rhetoric"] != "parallelism" else "metaphor", r["object"], [], r["reference"]))
        for r in rows
        for c in r["candidates"]
    ]
    if "rating" in judges:
        results = SingleAnswerRater(backend)([i for _, i in items])
        for (c, _), res in zip(items, results):
            c["judge_rating"] = asdict(res)
        summary["judge_rating"] = _mean([res.value for res in results])
        summary["judge_rating_failures"] = sum(res.error is not None for res in results)
    if "pairwise" in judges:
        paired = [(c, i) for c, i in items if i.reference.strip()]
        results = PairwiseRanker(backend)([i for _, i in paired])
        for (c, _), res in zip(paired, results):
            c["judge_pairwise"] = asdict(res)
        summary["judge_pairwise_better_rate"] = better_rate(results)
        summary["judge_pairwise_failures"] = sum(res.error is not None for res in results)
    if "metaphor" in judges:
        results = MetaphorJudge(backend)([c["text"] for c, _ in items])
        for (c, _), res in zip(items, results):
            c["judge_metaphor"] = asdict(res)
        summary["judge_metaphor_total"] = _mean([res.total for res in results])
        summary["judge_metaphor_failures"] = sum(res.error is not None for res in results)


def format_value(value: Any) -> str:
    """A summary value as shown in the report and the CLI table."""
    if isinstance(value, float):
        return f"{value:.4f}"
    return "—" if value is None else str(value)


def summary_table(summary: Dict[str, Any]) -> List[tuple]:
    """``(readable name, key, value)`` rows of a summary."""
    return [(metric_name(k), k, format_value(v)) for k, v in summary.items()]


def _candidate_parts(c: Dict[str, Any]) -> List[str]:
    parts = [f"{k} {c[k]:.2f}" for k in ("bleu2", "rougeL") if k in c]
    if "kenlm" in c and c["kenlm"]["perplexity"] is not None:
        parts.append(f"KenLM ppl {c['kenlm']['perplexity']:.1f} (OOV {c['kenlm']['oov_rate']:.2f})")
    if "hauser" in c:
        parts.append(f"Q {c['hauser']['quality']:.2f}")
    if c.get("sentiment_consistency") is not None:
        parts.append(f"c_s {c['sentiment_consistency']:+.2f}")
    if "rhetoric_success" in c:
        check = c["rhetoric_success"]
        mark = {True: "yes", False: "no", None: "n/a"}
        parts.append(f"success {mark[check['success']]} (device {mark[check['device']]}, object {mark[check['object']]})")
    for key, field_name in (("judge_rating", "value"), ("judge_metaphor", "total")):
        if key in c:
            parts.append(f"{key} {c[key][field_name] if c[key][field_name] is not None else 'failed'}")
    return parts


def report(result: Dict[str, Any]) -> str:
    """A readable Markdown report of an :func:`evaluate_generation` result."""
    lines = [f"# Generation evaluation: {result['input']}", "", "| metric | key | value |", "|---|---|---|"]
    lines += [f"| {name} | `{key}` | {value} |" for name, key, value in summary_table(result["summary"])]
    if result["notices"]:
        lines += ["", "Notices:", *(f"- {n}" for n in result["notices"])]
    lines += ["", "## Candidates", ""]
    for rec in result["records"]:
        lines.append(f"- line {rec['line']} ({rec['rhetoric']}, object {rec['object'] or '—'}), reference: {rec['reference'] or '—'}")
        for c in rec["candidates"]:
            lines.append(f"  - {c['text']} — " + ", ".join(_candidate_parts(c)))
    return "\n".join(lines) + "\n"
