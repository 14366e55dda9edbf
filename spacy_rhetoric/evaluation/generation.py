"""``rhetoric evaluate-generation``: score generated candidates from a JSONL file.

Input: one JSON object per line::

    {"context": ["前一句。", ...], "condition": {"rhetoric": "metaphor", "object": "月亮"},
     "reference": "原文的句子。", "candidates": ["生成句一。", "生成句二。"],
     "literal": "可选：HAUSER 一致性用的字面句"}

``context`` (list of strings) and ``literal`` are optional; ``reference`` may
be "" (then BLEU/ROUGE/BERTScore and pairwise ranking skip that record).
A malformed line raises :class:`~spacy_rhetoric.errors.CorpusFormatError`
naming the file and line.

Output: a JSON file (per-record, per-candidate scores; corpus-level summary;
notices of skipped scores) and a readable Markdown report beside it.
"""
from __future__ import annotations

import json
import statistics
from dataclasses import asdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from ..corpora.jsonio import iter_jsonl_objects
from ..errors import CorpusFormatError
from ..taxonomy import COARSE_LABELS


def read_generation_jsonl(path: Path) -> List[Dict[str, Any]]:
    """Validated records of a generation JSONL file (see module docstring)."""
    path = Path(path)
    records = []
    for line_no, rec in iter_jsonl_objects(path):
        cands = rec.get("candidates")
        if not isinstance(cands, list) or not all(isinstance(c, str) for c in cands):
            raise CorpusFormatError(path, "'candidates' must be a list of strings", line=line_no)
        context = rec.get("context", [])
        if not isinstance(context, list) or not all(isinstance(c, str) for c in context):
            raise CorpusFormatError(path, "'context' must be a list of strings", line=line_no)
        cond = rec.get("condition", {})
        if not isinstance(cond, dict) or cond.get("rhetoric", "metaphor") not in COARSE_LABELS:
            raise CorpusFormatError(path, f"'condition.rhetoric' must be one of {list(COARSE_LABELS)}", line=line_no)
        if not isinstance(rec.get("reference", ""), str):
            raise CorpusFormatError(path, "'reference' must be a string", line=line_no)
        records.append(
            {
                "line": line_no,
                "context": context,
                "rhetoric": cond.get("rhetoric", "metaphor"),
                "object": str(cond.get("object", "")),
                "reference": rec.get("reference", ""),
                "literal": rec.get("literal") or (context[-1] if context else None),
                "candidates": cands,
            }
        )
    return records


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    vals = [v for v in values if v is not None]
    return statistics.fmean(vals) if vals else None


def evaluate_generation(
    input_path: Path,
    output_path: Path,
    *,
    kb_path: Optional[Path] = None,
    lm_path: Optional[str] = None,
    encoder_path: Optional[str] = None,
    backend=None,
    judges: Sequence[str] = (),
    progress: bool = True,
) -> Dict[str, Any]:
    """Score every candidate of ``input_path``; write ``output_path`` (JSON)
    and ``output_path`` with suffix ``.md`` (report). ``judges``: any of
    ``rating``, ``pairwise``, ``metaphor`` (need ``backend``, an LLMBackend).
    Returns the written JSON object. Raises ValueError for a judge name
    unknown or requested without a backend."""
    from tqdm import tqdm

    from . import reference as ref

    unknown = set(judges) - {"rating", "pairwise", "metaphor"}
    if unknown:
        raise ValueError(f"unknown judges {sorted(unknown)}; choose from rating, pairwise, metaphor")
    if judges and backend is None:
        raise ValueError("LLM judges need a backend (--base-url and --model)")
    records = read_generation_jsonl(input_path)
    notices: List[str] = []
    scorer = None
    if kb_path is not None:
        from .hauser import HauserScorer
        from .kb import SimileKB

        scorer = HauserScorer(SimileKB.from_disk(kb_path))
    else:
        notices.append("HAUSER scores skipped: no --kb given")
    if not lm_path:
        notices.append("perplexity skipped: no --lm given")
    if not encoder_path:
        notices.append("BERTScore skipped: no --encoder given")
    rows: List[Dict[str, Any]] = []
    for rec in tqdm(records, desc="evaluate-generation", disable=not progress):
        cands = [{"text": c} for c in rec["candidates"]]
        if rec["reference"] and cands:
            for c in cands:
                c["bleu2"] = ref.bleu([c["text"]], [rec["reference"]], 2)
                c["bleu4"] = ref.bleu([c["text"]], [rec["reference"]], 4)
                c["rougeL"] = ref.rouge_l([c["text"]], [rec["reference"]])
        if scorer is not None and cands:
            tenor = rec["object"] if rec["rhetoric"] == "metaphor" else None
            for c, s in zip(cands, scorer.score_group(rec["candidates"], literal=rec["literal"], tenor=tenor)):
                c["hauser"] = s
        rows.append({**{k: rec[k] for k in ("line", "rhetoric", "object", "reference")}, "candidates": cands})
    flat = [(r, c) for r in rows for c in r["candidates"]]
    with_ref = [(r, c) for r, c in flat if r["reference"]]
    summary: Dict[str, Any] = {"records": len(rows), "candidates": len(flat)}
    if with_ref:
        cands, refs = [c["text"] for _, c in with_ref], [r["reference"] for r, _ in with_ref]
        summary.update({"bleu2": ref.bleu(cands, refs, 2), "bleu4": ref.bleu(cands, refs, 4), "rougeL": ref.rouge_l(cands, refs)})
        if encoder_path:
            summary.update({f"bertscore_{k}": v for k, v in ref.bertscore(cands, refs, encoder_path).items()})
    if lm_path and flat:
        summary["perplexity"] = ref.perplexity([c["text"] for _, c in flat], lm_path)
    if scorer is not None:
        notices.extend(scorer.notices)
        for key in ("quality", "relevance", "creativity", "informativeness"):
            summary[f"hauser_{key}"] = _mean([c["hauser"][key] for _, c in flat if "hauser" in c])
    _run_judges(judges, backend, rows, summary)
    result = {"input": str(input_path), "summary": summary, "notices": notices, "records": rows}
    output_path = Path(output_path)
    output_path.parent.mkdir(parents=True, exist_ok=True)
    output_path.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf8")
    output_path.with_suffix(".md").write_text(report(result), encoding="utf8")
    return result


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


def report(result: Dict[str, Any]) -> str:
    """A readable Markdown report of an :func:`evaluate_generation` result."""
    lines = [f"# Generation evaluation: {result['input']}", "", "| metric | value |", "|---|---|"]
    for key, value in result["summary"].items():
        lines.append(f"| {key} | {value:.4f} |" if isinstance(value, float) else f"| {key} | {value} |")
    if result["notices"]:
        lines += ["", "Notices:", *(f"- {n}" for n in result["notices"])]
    lines += ["", "## Candidates", ""]
    for rec in result["records"]:
        lines.append(f"- line {rec['line']} ({rec['rhetoric']}, object {rec['object'] or '—'}), reference: {rec['reference'] or '—'}")
        for c in rec["candidates"]:
            parts = [f"{k} {c[k]:.2f}" for k in ("bleu2", "rougeL") if k in c]
            if "hauser" in c:
                parts.append(f"Q {c['hauser']['quality']:.2f}")
            for key, field in (("judge_rating", "value"), ("judge_metaphor", "total")):
                if key in c:
                    parts.append(f"{key} {c[key][field] if c[key][field] is not None else 'failed'}")
            lines.append(f"  - {c['text']} — " + ", ".join(parts))
    return "\n".join(lines) + "\n"
