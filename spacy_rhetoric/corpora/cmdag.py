"""CMDAG Chinese metaphor dataset (Shao et al. 2024) JSON -> Docs.

Format (``../shared/data/README.md``): a JSON list of records
``{"metaphor_id", "context", "tenor", "vehicle", "ground", "sub_id"}``; the
tenor and vehicle are strings, not offsets. Several records (``sub_id``) may
share one metaphor and its context.

One Doc per distinct ``(metaphor_id, context)``, tokenised by the ``nlp``
given (character segmentation with a blank ``zh`` pipeline). Spans are found
by exact string search, never guessed:

- the vehicle is its first occurrence in the context;
- the tenor is its occurrence nearest to that vehicle, one that ends at or
  before the vehicle's start preferred (tenors usually precede vehicles);
- a record whose tenor or vehicle string is empty or does not occur, or whose located
  span does not fall on token boundaries, adds no spans and is counted as not
  located.

Gold: ``doc.cats["coarse/metaphor"] = 1.0`` (every context holds a metaphor),
``doc.spans["rhetoric_components"]`` with ``tenor`` and ``vehicle``;
annotated labels: coarse ``metaphor``, components ``tenor``, ``vehicle``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span

from ..errors import CorpusFormatError
from .docbin import ANNOTATED_KEY, write_docbin
from .jsonio import load_json_list

FIELDS = ("metaphor_id", "context", "tenor", "vehicle", "ground", "sub_id")
SPLITS = ("val", "test")
ANNOTATED = {"coarse": ["metaphor"], "form": [], "content": [], "components": ["tenor", "vehicle"]}


def read_cmdag(path: Path) -> List[dict]:
    """Validated records of one CMDAG JSON file.

    Raises :class:`CorpusFormatError` naming the file and line for invalid
    JSON, and the file and record index for a record that is not an object,
    lacks a field, or has a non-string context, tenor or vehicle. Empty
    strings are valid (the real data has one empty vehicle): such a record is
    simply not located.
    """
    path = Path(path)
    data = load_json_list(path)
    for i, rec in enumerate(data):
        if not isinstance(rec, dict):
            raise CorpusFormatError(path, "record is not an object", record=i)
        missing = [f for f in FIELDS if f not in rec]
        if missing:
            raise CorpusFormatError(path, f"missing field(s) {missing}", record=i)
        for name in ("context", "tenor", "vehicle"):
            if not isinstance(rec[name], str):
                raise CorpusFormatError(path, f"field {name!r} must be a string", record=i)
    return data


def _occurrences(text: str, needle: str) -> List[int]:
    starts, i = [], text.find(needle)
    while i != -1:
        starts.append(i)
        i = text.find(needle, i + 1)
    return starts


def locate(context: str, tenor: str, vehicle: str) -> Optional[Tuple[Tuple[int, int], Tuple[int, int]]]:
    """Character offsets ``((t_start, t_end), (v_start, v_end))`` of the tenor
    and vehicle by the rule in the module docstring, or None."""
    if not tenor.strip() or not vehicle.strip():
        return None
    vehicles = _occurrences(context, vehicle)
    tenors = _occurrences(context, tenor)
    if not vehicles or not tenors:
        return None
    v = vehicles[0]
    before = [t for t in tenors if t + len(tenor) <= v]
    t = before[-1] if before else min(tenors, key=lambda s: abs(s - v))
    return (t, t + len(tenor)), (v, v + len(vehicle))


@dataclass
class CmdagStats:
    records: int = 0
    located: int = 0
    not_located: int = 0
    docs: int = 0
    not_located_ids: List[str] = field(default_factory=list)


def records_to_docs(nlp: Language, records: List[dict], stats: CmdagStats) -> List[Doc]:
    """Group records by context and build the Docs, updating ``stats``."""
    by_context: Dict[Tuple[str, str], List[dict]] = {}
    for rec in records:
        by_context.setdefault((str(rec["metaphor_id"]), rec["context"]), []).append(rec)
    docs = []
    for (metaphor_id, context), recs in by_context.items():
        doc = nlp.make_doc(context)
        spans: Dict[Tuple[int, int, str], Span] = {}
        for rec in recs:
            stats.records += 1
            found = locate(context, rec["tenor"], rec["vehicle"])
            pair = [doc.char_span(s, e, label=lab) for (s, e), lab in zip(found, ("tenor", "vehicle"))] if found else []
            if not pair or any(span is None for span in pair):
                stats.not_located += 1
                stats.not_located_ids.append(f"{metaphor_id}/{rec['sub_id']}")
                continue
            stats.located += 1
            spans.update({(s.start, s.end, s.label_): s for s in pair})
        doc.cats = {"coarse/metaphor": 1.0}
        doc.spans["rhetoric_components"] = [spans[k] for k in sorted(spans)]
        doc.user_data.update({"corpus": "cmdag", "metaphor_id": metaphor_id, ANNOTATED_KEY: ANNOTATED})
        docs.append(doc)
    stats.docs += len(docs)
    return docs


def convert_cmdag(cmdag_dir: Path, output_dir: Path, nlp: Language) -> Dict[str, CmdagStats]:
    """Convert ``val.json`` and ``test.json`` to ``output_dir/{val,test}.spacy``."""
    stats = {}
    for stem in SPLITS:
        split_stats = CmdagStats()
        docs = records_to_docs(nlp, read_cmdag(Path(cmdag_dir) / f"{stem}.json"), split_stats)
        write_docbin(docs, Path(output_dir) / f"{stem}.spacy")
        stats[stem] = split_stats
    return stats
