"""HAUSER relevance, creativity and informativeness of the CMDAG metaphors
(given tenor/vehicle strings) against a simile KB built from other sources.

Used by ``rhetoric research hauser-cmdag`` (project command ``evaluate-cmdag-hauser``):
the KB is built from the simile-corpus TRAIN split and CMDAG ``val.json``,
and the 3,447 records of CMDAG ``test.json`` are scored, so no scored pair
counts itself.
"""
from __future__ import annotations

import statistics
import time
from typing import Callable, Dict, List, Sequence

from ..llm.hauser import creativity, informativeness, relevance
from ..llm.kb import SimileKB, normalize


def score_records(
    kb: SimileKB, records: Sequence[dict], tokenize: Callable[[str], List[str]]
) -> List[Dict[str, object]]:
    """One row per CMDAG record: ids, tenor, vehicle, ``relevance`` (n(t, v)),
    ``vehicle_frequency`` (N_v), ``creativity``, ``informativeness`` (vehicle
    length in tokens of ``tokenize``)."""
    rows = []
    for rec in records:
        t, v = rec["tenor"], rec["vehicle"]
        rows.append(
            {
                "metaphor_id": rec["metaphor_id"],
                "sub_id": rec["sub_id"],
                "tenor": t,
                "vehicle": v,
                "relevance": relevance([(t, v)], kb),
                "vehicle_frequency": kb.vehicle_frequency(v),
                "creativity": creativity([v], kb),
                "informativeness": informativeness([len(tokenize(normalize(v) or v))]),
            }
        )
    return rows


def summarize(rows: Sequence[Dict[str, object]], seconds: float) -> Dict[str, object]:
    """Means, medians, coverage and the timing of a :func:`score_records` run."""
    out: Dict[str, object] = {"records": len(rows), "seconds": round(seconds, 3)}
    for key in ("relevance", "creativity", "informativeness", "vehicle_frequency"):
        vals = [float(r[key]) for r in rows if r[key] is not None]
        out[key] = {
            "mean": statistics.fmean(vals),
            "median": statistics.median(vals),
            "min": min(vals),
            "max": max(vals),
        }
    out["pairs_seen_in_kb"] = sum(1 for r in rows if r["relevance"] > 0)
    out["vehicles_seen_in_kb"] = sum(1 for r in rows if r["vehicle_frequency"] > 0)
    return out


def run(kb: SimileKB, records: Sequence[dict], tokenize: Callable[[str], List[str]]):
    """``(rows, summary)`` with the wall-clock time of the scoring."""
    start = time.perf_counter()
    rows = score_records(kb, records, tokenize)
    return rows, summarize(rows, time.perf_counter() - start)


def score_file(kb_path, cmdag_file, *, output=None, nlp_path=None):
    """Score one CMDAG JSON file with the KB at ``kb_path``; writes the rows
    (JSONL) and ``<output>.summary.json`` when ``output`` is given.
    ``nlp_path``: spaCy pipeline whose tokenizer counts vehicle tokens
    (default: blank ``zh``, i.e. characters). Returns ``(rows, summary)``."""
    import json
    from pathlib import Path

    import spacy

    from ..corpora.cmdag import read_cmdag

    kb = SimileKB.from_disk(kb_path)
    nlp = spacy.load(nlp_path) if nlp_path else spacy.blank("zh")
    rows, summary = run(kb, read_cmdag(cmdag_file), lambda s: [t.text for t in nlp.make_doc(s)])
    summary["kb"] = {"path": str(kb_path), **kb.size()}
    summary["informativeness_unit"] = f"tokens of {nlp_path}" if nlp_path else "characters (blank zh tokenizer)"
    if output is not None:
        output = Path(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        with output.open("w", encoding="utf8") as fh:
            for row in rows:
                fh.write(json.dumps(row, ensure_ascii=False) + "\n")
        Path(str(output) + ".summary.json").write_text(json.dumps(summary, ensure_ascii=False, indent=2), encoding="utf8")
    return rows, summary


def print_report(rows, summary, *, examples: int = 3) -> None:
    """Summary table plus the highest and lowest scored records."""
    from wasabi import msg

    msg.info(f"{summary['records']} records scored in {summary['seconds']:.3f} s; KB {summary.get('kb', {})}")
    table = [(k, *(f"{summary[k][s]:.4f}" for s in ("mean", "median", "min", "max"))) for k in ("relevance", "creativity", "informativeness", "vehicle_frequency")]
    msg.table(table, header=("score", "mean", "median", "min", "max"), divider=True)
    msg.text(f"pairs seen in KB: {summary['pairs_seen_in_kb']}, vehicles seen in KB: {summary['vehicles_seen_in_kb']}; informativeness unit: {summary.get('informativeness_unit')}")
    for key in ("relevance", "creativity", "informativeness"):
        ranked = sorted((r for r in rows if r[key] is not None), key=lambda r: (-r[key], r["metaphor_id"]))
        for name, part in (("highest", ranked[:examples]), ("lowest", ranked[-examples:])):
            msg.text(f"{key} {name}: " + " | ".join(f"{r['tenor']}→{r['vehicle']} ({r[key]:.3f})" for r in part))
