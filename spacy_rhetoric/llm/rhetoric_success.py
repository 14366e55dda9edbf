"""Rhetoric success rate of generated candidates: did the generator obey the
two controls of CERD's task RG (``papers/000_*`` §4.2: the requested coarse
device and the requested object)? Judged by a spaCy pipeline with
``rhetoric_textcat`` and ``rhetoric_components`` (e.g. ``pipelines/zh_rhetoric``).

The pipeline's decisions are read as ``rhetoric analyze`` records them:
:func:`~spacy_rhetoric.analysis.records.doc_to_record` takes each sentence's
``sent._.rhetoric``, which ``rhetoric_textcat`` decoded with the pipeline's
own thresholds (its ``threshold`` and per-label ``thresholds``), and
:func:`~spacy_rhetoric.analysis.render.devices_of` lists a sentence's devices.

For a candidate requested with device d and object o:

- device part: some sentence of the candidate carries d (for d =
  ``literal``: no sentence carries any device);
- object part: some component span labelled ``OBJECT_COMPONENT[d]``
  (tenor for metaphor, ``personification_object``, ``hyperbole_object``)
  *matches* o: with spaces removed, both non-empty, the span text contains
  o or is contained in o (so 妈妈 matches 我的妈妈 and 日记 matches 小日记).
  Not applicable (None) when o is empty or d has no object component
  (parallelism, literal);
- success: device part and object part (the device part alone where the
  object part is not applicable).

Rates are fractions of candidates in [0, 1]; the object rate counts only
candidates whose object part applies (None when none does).
"""
from __future__ import annotations

from typing import Any, Dict, List, Optional, Sequence

from ..analysis.loading import load_pipeline
from ..analysis.records import doc_to_record
from ..analysis.render import devices_of
from ..taxonomy import LITERAL, OBJECT_COMPONENT

REQUIRED_PIPES = ("rhetoric_textcat", "rhetoric_components")


def load_rhetoric_model(model: str):
    """The pipeline ``model`` (folder or package). Raises ValueError when it
    lacks ``rhetoric_textcat`` or ``rhetoric_components``."""
    nlp = load_pipeline(model)
    missing = [p for p in REQUIRED_PIPES if p not in nlp.pipe_names]
    if missing:
        raise ValueError(f"--rhetoric-model {model}: pipeline has no {', '.join(missing)} (pipes: {nlp.pipe_names})")
    return nlp


def _squash(text: str) -> str:
    return "".join(text.split())


def object_matches(span_text: str, obj: str) -> bool:
    """The containment rule of the module docstring."""
    a, b = _squash(span_text), _squash(obj)
    return bool(a and b) and (b in a or a in b)


def check_record(record: Dict[str, Any], device: str, obj: str) -> Dict[str, Any]:
    """Checks of one analysed candidate (a ``spacy-rhetoric/analysis/v1``
    record): ``device``, ``object`` (bool or None), ``success`` (bool),
    ``devices`` (the devices found), ``objects`` (texts of the object
    components found)."""
    found = sorted({d for sent in record["sentences"] for d in devices_of(sent)})
    device_ok = not found if device == LITERAL else device in found
    label = OBJECT_COMPONENT.get(device)
    objects = [c["text"] for c in record["components"] if c["label"] == label]
    object_ok = None
    if label is not None and _squash(obj):
        object_ok = any(object_matches(t, obj) for t in objects)
    success = device_ok and object_ok is not False
    return {"success": success, "device": device_ok, "object": object_ok, "devices": found, "objects": objects}


def check_docs(docs: Sequence, device: str, obj: str) -> List[Dict[str, Any]]:
    """:func:`check_record` of each analysed Doc."""
    return [check_record(doc_to_record(doc, str(i)), device, obj) for i, doc in enumerate(docs)]


def _rate(values: Sequence[Optional[bool]]) -> Optional[float]:
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None


def success_summary(checks: Sequence[Dict[str, Any]], devices: Sequence[str]) -> Dict[str, Any]:
    """Flat summary: ``rhetoric_success_rate``, ``rhetoric_device_rate``,
    ``rhetoric_object_rate`` over all candidates, then the same with a
    ``.<device>`` suffix and ``rhetoric_candidates.<device>`` per requested
    device (``devices`` aligned with ``checks``). {} without checks."""
    if not checks:
        return {}
    out: Dict[str, Any] = {}
    groups = [("", list(range(len(checks))))]
    groups += [(f".{d}", [i for i, x in enumerate(devices) if x == d]) for d in sorted(set(devices))]
    for suffix, idx in groups:
        for part in ("success", "device", "object"):
            out[f"rhetoric_{part}_rate{suffix}"] = _rate([checks[i][part] for i in idx])
        if suffix:
            out[f"rhetoric_candidates{suffix}"] = len(idx)
    return out
