"""Agreement between two independent annotation passes of the same sentences
(``annotations/pse-i-cerd``), reported next to CERD's (§3.3: Cohen's κ about
0.66).

Records are keyed by ``(essay, para, sent)`` (PSE-I) or, for sentences of a
corpus without essays (``annotations/cmre-relation-only``), by
``(split, 0, line)`` (their text checked by ``text_sha1``); a record
without ``form``/``content`` decided none of their labels.

Each (sentence, label) pair is one binary decision: "does this sentence carry
the label?". Per coarse label κ is computed over the sentences both passes
annotated; the form and content levels are reported as the κ of all their
(sentence, label) decisions pooled, plus each label's κ. Components are
compared as exact (label, start, end) matches: P/R/F1 of the second pass
against the first.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from .. import taxonomy as tx
from .agreement import cohen_kappa

Key = Tuple[str, int, int]


def _read(path: Union[str, Path]) -> Dict[Key, dict]:
    out = {}
    for line in Path(path).read_text(encoding="utf8").splitlines():
        if line.strip():
            rec = json.loads(line)
            key = (str(rec["essay"]), int(rec["para"]), int(rec["sent"])) if "essay" in rec else (str(rec["split"]), 0, int(rec["line"]))
            out[key] = rec
    return out


def _kappa(a: List[int], b: List[int]) -> Optional[float]:
    value = cohen_kappa(a, b, labels=[0, 1])
    return None if value != value else round(value, 4)  # nan: both passes constant


def _level(first: List[dict], second: List[dict], level: str, labels: List[str]) -> Dict[str, object]:
    per_label, pooled_a, pooled_b = {}, [], []
    for label in labels:
        a = [int(label in r.get(level, ())) for r in first]
        b = [int(label in r.get(level, ())) for r in second]
        pooled_a += a
        pooled_b += b
        per_label[label] = {"kappa": _kappa(a, b), "first": sum(a), "second": sum(b), "both": sum(x & y for x, y in zip(a, b))}
    return {"pooled_kappa": _kappa(pooled_a, pooled_b), "labels": per_label}


def annotation_agreement(first_path: Union[str, Path, Sequence[Union[str, Path]]],
                         second_path: Union[str, Path]) -> Dict[str, object]:
    """κ per coarse label, pooled and per-label κ of the form and content
    levels, exact-match component P/R/F1, over the sentences in both passes.
    ``first_path`` may be several files (e.g. ``dev.jsonl`` and
    ``train.jsonl``) that together hold the first pass.

    Raises ValueError when the files share no sentence or a shared sentence's
    text differs between them.
    """
    firsts = [first_path] if isinstance(first_path, (str, Path)) else list(first_path)
    a = {k: v for path in firsts for k, v in _read(path).items()}
    b = _read(second_path)
    keys = sorted(a.keys() & b.keys())
    if not keys:
        raise ValueError(f"{', '.join(map(str, firsts))} and {second_path} share no sentence")
    for key in keys:
        if a[key].get("text", a[key].get("text_sha1")) != b[key].get("text", b[key].get("text_sha1")):
            raise ValueError(f"sentence {key} has different texts in the two files")
    first, second = [a[k] for k in keys], [b[k] for k in keys]
    coarse = _level(first, second, "coarse", list(tx.COARSE_LABELS))
    comp_a = {(k, c["label"], c["start"], c["end"]) for k, r in zip(keys, first) for c in r["components"]}
    comp_b = {(k, c["label"], c["start"], c["end"]) for k, r in zip(keys, second) for c in r["components"]}
    tp = len(comp_a & comp_b)
    p = tp / len(comp_b) if comp_b else 0.0
    r = tp / len(comp_a) if comp_a else 0.0
    return {
        "sentences": len(keys),
        "essays": len({k[0] for k, rec in zip(keys, first) if "essay" in rec}),
        "coarse_exact_match": round(sum(set(x["coarse"]) == set(y["coarse"]) for x, y in zip(first, second)) / len(keys), 4),
        "coarse": coarse,
        "form": _level(first, second, "form", list(tx.FORM)),
        "content": _level(first, second, "content", list(tx.CONTENT)),
        "components": {"first": len(comp_a), "second": len(comp_b), "exact_matches": tp, "p": round(p, 4), "r": round(r, 4),
                       "f": round(2 * p * r / (p + r), 4) if p + r else 0.0},
    }
