"""Choosing the verifier's object threshold on the dev essays' own sentences.

A suggestion request names its object (月光, 春风...), so verification asks
whether *that* span is the device's object (:mod:`spacy_rhetoric.llm.verify`),
not where the objects of a free text are. ``rhetoric_components`` decodes
free text with one threshold per label, chosen for detection; this module
chooses a second threshold per object label for the named span
(``object_thresholds``), on human writing with gold labels:

- positives: each dev request of device d (``corpus/rg/essays_dev.jsonl``),
  its human sentence and gold object (the component annotated in the
  team's CERD annotation of the dev essays);
- negatives: each dev request of another device that names an object
  (metaphor, hyperbole, personification: the tenor, hyperbole object or
  personified object), whose sentence is not also a request of d: a
  sentence about that object that is not d by the annotation.

Each sentence is analysed after its request's context, as the verifier
analyses a candidate. At threshold t a pair is *verified* when the
verifier's device rule holds and the object matches a component found or a
span scoring at least t. The chosen t is the lowest of the grid whose
precision over the pairs reaches ``min_precision``: recall rises as t
falls, so this is the most recall a stated precision allows. Never run on
test requests.
"""
from __future__ import annotations

from typing import Any, Dict, List, Sequence, Tuple

from ..llm.records import RGRecord
from ..llm.rhetoric_success import object_matches
from ..llm.verify import SCORED_SPANS, in_context, pipeline_analyser, verify_record
from ..taxonomy import OBJECT_COMPONENT

#: Thresholds tried: 0.05 to 0.50 in steps of 0.05.
GRID: Tuple[float, ...] = tuple(round(0.05 * i, 2) for i in range(1, 11))
#: The key of the components alone in :func:`sweep`'s table: above any
#: probability, so no scored span passes.
COMPONENTS_ALONE = 1.01


def _sentence_key(rec: RGRecord) -> Tuple[Any, ...]:
    meta = rec.meta or {}
    return (meta.get("essay"), meta.get("para"), tuple(meta.get("sents") or ()), rec.target)


def labelled_pairs(records: Sequence[RGRecord], device: str) -> List[Tuple[RGRecord, bool]]:
    """``(record, is_device)`` for the positives and negatives of the
    module docstring, in file order. Raises ``ValueError`` when ``device``
    names no object (parallelism) or the records hold no positive."""
    if device not in OBJECT_COMPONENT:
        raise ValueError(f"{device!r} names no object; one of {sorted(OBJECT_COMPONENT)}")
    positive = {_sentence_key(r) for r in records if r.rhetoric == device}
    if not positive:
        raise ValueError(f"no {device} request among {len(records)} records")
    return [(r, r.rhetoric == device) for r in records
            if r.rhetoric in OBJECT_COMPONENT and (r.rhetoric == device or _sentence_key(r) not in positive)]


def score_pairs(nlp: Any, pairs: Sequence[Tuple[RGRecord, bool]], device: str, n_context: int) -> List[Dict[str, Any]]:
    """Per pair: ``gold``, ``device`` (the verifier's device rule),
    ``component`` (a component found matches the object) and ``best`` (the
    highest score of a span matching the object, 0.0 if none), with the
    context cut to its last ``n_context`` sentences. While it runs, the
    component head scores every suggested span for the device's object
    label (its ``object_thresholds`` are restored after)."""
    label = OBJECT_COMPONENT[device]
    comp = nlp.get_pipe("rhetoric_components")
    placed = [in_context(r.previous_sentences[-n_context:] if n_context else [], r.target) for r, _ in pairs]
    kept = comp.cfg.get("object_thresholds", {})
    comp.cfg["object_thresholds"] = {label: 0.0}
    try:
        records = pipeline_analyser(nlp)([text for text, _ in placed])
    finally:
        comp.cfg["object_thresholds"] = kept
    out = []
    for (rec, gold), (_, start), record in zip(pairs, placed, records):
        spans = record.pop(SCORED_SPANS)
        verdict = verify_record(record, start, device, rec.object)
        best = max((s["score"] for s in spans if s["start"] >= start and object_matches(s["text"], rec.object)), default=0.0)
        out.append({"gold": gold, "device": bool(verdict.device), "component": bool(verdict.object), "best": best})
    return out


def sweep(scored: Sequence[Dict[str, Any]], grid: Sequence[float] = GRID) -> Dict[float, Dict[str, float]]:
    """Counts, precision, recall and F1 of the verdicts at each threshold
    of ``grid``, and of the components alone under the key
    :data:`COMPONENTS_ALONE`."""
    out: Dict[float, Dict[str, float]] = {}
    for t in [*grid, COMPONENTS_ALONE]:
        tp = fp = fn = 0
        for row in scored:
            ok = row["device"] and (row["component"] or row["best"] >= t)
            tp += ok and row["gold"]
            fp += ok and not row["gold"]
            fn += (not ok) and row["gold"]
        p = tp / (tp + fp) if tp + fp else 0.0
        r = tp / (tp + fn) if tp + fn else 0.0
        out[t] = {"tp": tp, "fp": fp, "fn": fn, "p": p, "r": r, "f": 2 * p * r / (p + r) if p + r else 0.0}
    return out


def choose(table: Dict[float, Dict[str, float]], min_precision: float) -> float:
    """The lowest threshold of ``table`` whose precision reaches
    ``min_precision``; :data:`COMPONENTS_ALONE` when none does."""
    ok = [t for t, row in table.items() if row["tp"] and row["p"] >= min_precision]
    return min(ok, default=COMPONENTS_ALONE)
