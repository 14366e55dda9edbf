"""Verified suggestions, measured: success per request at N candidates,
latency per request, and the fluency of what is returned first.

Held-out requests (:func:`held_out_requests`) are RG records of the
team-annotated essays that no model was trained on (``rhetoric convert rg-records
--essays annotations/pse-i-cerd/test.jsonl``): the context (the essay's
preceding sentences), the device, the object from the gold components and
the human sentence. ``per_device`` requests are drawn per device with a seed
from the first file; where it has fewer, the next files top them up in order
(hyperbole has 12 test sentences with an object, so dev tops it up).

Success per request at N (:func:`request_rows`): the generator drew N
candidates (one sampled draw of ``max(ns)``; its first N answers are a draw
of N) and at least one is verified by the analyser
(:mod:`spacy_rhetoric.llm.verify`). The verifier is the same pipeline that
judges success, so this measures "a verified candidate is returned"; whether
verified candidates are right is what the blind read checks.

Fluency: KenLM log-probability per character (natural log) of the first
returned candidate and of the human sentence; reported as per-character
perplexity ``exp(-mean)``.
"""
from __future__ import annotations

import json
import math
import random
import statistics
import time
from pathlib import Path
from typing import Any, Dict, Iterable, List, Optional, Sequence

from ..llm.records import RGRecord, read_jsonl
from ..llm.verify import kenlm_fluency
from ..taxonomy import COMPONENTS


def held_out_requests(paths: Sequence[Path], per_device: int, seed: int = 0) -> List[RGRecord]:
    """``per_device`` records per device (in the order of ``RG_DEVICES`` of
    the files' records), drawn with ``seed`` from the first file and topped up
    from the next ones in order. Each record's ``meta["file"]`` names its file."""
    pools: List[Dict[str, List[RGRecord]]] = []
    for path in paths:
        pool: Dict[str, List[RGRecord]] = {}
        for rec in read_jsonl(path):
            rec.meta["file"] = Path(path).name
            pool.setdefault(rec.rhetoric, []).append(rec)
        pools.append(pool)
    devices = list(dict.fromkeys(d for pool in pools for d in pool))
    out: List[RGRecord] = []
    for device in devices:
        chosen: List[RGRecord] = []
        for pool in pools:
            recs = pool.get(device, [])
            need = per_device - len(chosen)
            if need <= 0:
                break
            chosen.extend(random.Random(seed).sample(recs, min(need, len(recs))))
        out.extend(chosen)
    return out


def request_rows(generator: Any, requests: Sequence[RGRecord], ns: Sequence[int], *, batch: int = 1,
                 done: Iterable[int] = (), progress: bool = True) -> Iterable[Dict[str, Any]]:
    """One row per request not in ``done``: its candidates with their
    verdicts (``generator.suggest`` semantics, ``max(ns)`` drawn), success
    at each N, and ``seconds`` (the batch's wall time divided by its size
    when ``batch`` > 1: throughput, not latency)."""
    from tqdm import tqdm

    n = max(ns)
    skip = set(done)
    todo = [(i, r) for i, r in enumerate(requests) if i not in skip]
    bar = tqdm(total=len(todo), disable=not progress, unit="request")
    for start in range(0, len(todo), batch):
        chunk = todo[start : start + batch]
        jobs = [(generator._clip_context(r.previous_sentences), r.rhetoric, r.object, None) for _, r in chunk]
        results = generator._run(jobs, n)
        for (i, rec), job, res in zip(chunk, jobs, results):
            verified = {c.text for c in res.candidates if c.verified}
            first = next((c for c in res.candidates if c.ok), None)
            yield {
                "id": i, "rhetoric": rec.rhetoric, "object": rec.object, "context": job[0], "human": rec.target, "meta": rec.meta,
                "seconds": round(res.seconds / len(chunk), 3), "verification": res.verification,
                "drawn": res.drawn, "success": {str(k): any(t in verified for t in res.drawn[:k]) for k in ns},
                "returned": first.text if first else None, "returned_verified": bool(first and first.verified),
                "candidates": [c.to_dict() for c in res.candidates],
            }
        bar.update(len(chunk))
    bar.close()


def reverify_rows(rows: Sequence[Dict[str, Any]], analyse: Any, ns: Sequence[int], *,
                  progress: bool = True) -> Iterable[Dict[str, Any]]:
    """The same draws judged by another verifier: for each row of
    :func:`request_rows`, its ``drawn`` answers (in draw order) analysed
    again in the row's ``context`` by ``analyse``
    (:func:`spacy_rhetoric.llm.verify.verify`). Yields rows with the same
    ``id``, request fields and ``drawn``; ``success`` at each N is whether
    some of the first N drawn answers is verified now; ``returned`` is the
    verified answer with the highest analyser score (else the first drawn
    answer), ``candidates`` the verdicts of the distinct answers and
    ``human_verified`` whether the human sentence itself passes (the
    verifier's recall on real writing). The
    generator is not run, so the two verifiers see identical candidates."""
    from tqdm import tqdm

    from ..llm.verify import verify

    for row in tqdm(rows, disable=not progress, unit="request"):
        texts = list(dict.fromkeys(t for t in row["drawn"] if t))
        judged = verify(analyse, row["context"], row["rhetoric"], row["object"], texts + [row["human"]])
        verdicts, human = dict(zip(texts, judged)), judged[-1]
        verified = sorted((t for t in texts if verdicts[t].verified), key=lambda t: -verdicts[t].analyser_score)
        returned = verified[0] if verified else (texts[0] if texts else None)
        yield {
            **{k: row[k] for k in ("id", "rhetoric", "object", "context", "human", "meta", "drawn")},
            "success": {str(k): any(t in verified for t in row["drawn"][:k]) for k in ns},
            "returned": returned, "returned_verified": bool(verified),
            "candidates": [{"text": t, **verdicts[t].to_dict()} for t in texts],
            "human_verified": human.verified,
        }


def latency_requests(requests: Sequence[RGRecord], count: int) -> List[RGRecord]:
    """``count`` requests spread evenly over ``requests`` (every
    ``len // count``-th, so each device keeps its share): the ones whose
    latency is timed."""
    return list(requests[:: max(1, len(requests) // count)][:count]) if count > 0 else []


def time_requests(generator: Any, requests: Sequence[RGRecord], ns: Sequence[int]) -> Dict[str, Dict[str, Any]]:
    """Latency of one request at a time, per N: ``{N: {"p50", "p95",
    "mean", "requests"}}`` in seconds (generation, verification and
    ranking), after one untimed warm-up request."""
    if not requests:
        return {}
    warm = requests[0]
    generator.suggest(warm.previous_sentences, warm.rhetoric, warm.object, min(ns))
    out: Dict[str, Dict[str, Any]] = {}
    for k in ns:
        times = []
        for rec in requests:
            start = time.perf_counter()
            generator.suggest(rec.previous_sentences, rec.rhetoric, rec.object, k)
            times.append(time.perf_counter() - start)
        out[str(k)] = {**percentiles(times), "requests": len(times)}
    return out


def percentiles(values: Sequence[float]) -> Dict[str, float]:
    """``p50``, ``p95`` (linear interpolation, as numpy's default) and
    ``mean`` of ``values``, rounded to ms."""
    import numpy

    return {"p50": round(float(numpy.percentile(values, 50)), 3), "p95": round(float(numpy.percentile(values, 95)), 3),
            "mean": round(float(statistics.fmean(values)), 3)}


def summarize(rows: Sequence[Dict[str, Any]], ns: Sequence[int], kenlm: Any = None) -> Dict[str, Any]:
    """Per device and over all: requests, success at each N, the share of
    requests whose first returned candidate is verified, the share whose
    human sentence is verified (rows of :func:`reverify_rows`), and with ``kenlm``
    the per-character perplexity of the first returned candidates and of the
    human sentences (over the same requests)."""
    out: Dict[str, Any] = {}
    devices = sorted({r["rhetoric"] for r in rows})
    for name, group in [("all", list(rows))] + [(d, [r for r in rows if r["rhetoric"] == d]) for d in devices]:
        if not group:
            continue
        entry: Dict[str, Any] = {"requests": len(group)}
        for k in ns:
            entry[f"success@{k}"] = round(sum(r["success"][str(k)] for r in group) / len(group), 4)
        entry["first_returned_verified"] = round(sum(r["returned_verified"] for r in group) / len(group), 4)
        if all("human_verified" in r for r in group):
            entry["human_verified"] = round(sum(r["human_verified"] for r in group) / len(group), 4)
        if kenlm is not None:
            pairs = [(r["returned"], r["human"]) for r in group if r["returned"]]
            entry["char_ppl_returned"] = _char_ppl(kenlm, [a for a, _ in pairs])
            entry["char_ppl_human"] = _char_ppl(kenlm, [b for _, b in pairs])
        out[name] = entry
    return out


def _char_ppl(kenlm: Any, texts: List[str]) -> Optional[float]:
    values = [v for v in kenlm_fluency(kenlm, texts) if v is not None]
    return round(math.exp(-statistics.fmean(values)), 2) if values else None


def read_rows(path: Path) -> List[Dict[str, Any]]:
    """Rows already written to a results file (for ``--resume``)."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf8").splitlines() if line.strip()]


def samples_markdown(rows: Sequence[Dict[str, Any]], n: int, seed: int = 0) -> str:
    """A Markdown table of ``n`` requests per device drawn with ``seed``
    (not chosen by hand): the object, the suggestion returned first, whether
    it was verified, and its evidence (or the reason it was not). ``rows``
    from ``evaluate-suggestions`` or ``reverify-suggestions``."""
    lines = ["| device | object | returned first | verified | evidence / reason |", "|---|---|---|---|---|"]
    for device in sorted({r["rhetoric"] for r in rows}):
        pool = [r for r in rows if r["rhetoric"] == device]
        for row in sorted(random.Random(seed).sample(pool, min(n, len(pool))), key=lambda r: r["id"]):
            # the answer returned first: evaluate-suggestions rows rank their
            # candidates, reverify-suggestions rows keep draw order; both name it
            first = next((c for c in row["candidates"] if c["text"] == row.get("returned")), None)
            if first is None:
                lines.append(f"| {device} | {row['object']} | (no answer parsed) | no | |")
                continue
            # the parts of the requested device found in it (its sentence label is the whole text)
            parts = [e for e in first["evidence"] if e["label"] == "branch" or COMPONENTS.get(e["label"], ("",))[0] == device]
            detail = " · ".join(f"{e['label']} {e['text']}" for e in parts) if first["verified"] else first["reason"]
            lines.append(f"| {device} | {_cell(row['object'])} | {_cell(first['text'])} | "
                         f"{'yes' if first['verified'] else 'no'} | {_cell(detail)} |")
    return "\n".join(lines) + "\n"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")
