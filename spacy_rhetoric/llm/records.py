"""Training and evaluation records for rhetorical generation (CERD task RG).

An :class:`RGRecord` is one generation problem: the at most k preceding
sentences, a coarse device (metaphor, personification, hyperbole), the object
the sentence must use the device on, and the reference sentence (the
fine-tuning target). Sources:

CERD JSON (``read_cerd_rg``; Liu et al. 2024, ``papers/000``, §3.2): records
    ``{"sentence", "previousSentences": [...], "generationList": [{"rhetoric",
    "object"}, ...]}``; one RGRecord per generationList entry whose device is
    an RG device (Chinese names 比喻/比拟/夸张 or the English labels).

Records derived from the project's real corpora (CERD itself is not public),
all with device ``metaphor`` and object = the tenor, as CERD's RG uses the
tenor as the object of a metaphor:

- simile corpus (Liu et al. 2018; ``simile_rg_records``): every sentence
  labelled ``simile`` that has a tagged tenor; object = the words of its first
  tenor span joined; target = the sentence (words joined). The corpus holds
  isolated sentences, so the context is empty (k = 0). Sentences without a
  tenor are skipped and counted.
- CMDAG (Shao et al. 2024; ``cmdag_rg_records``): the tenor and vehicle
  strings are located in the context by exact search (the same rule as the
  CMDAG converter, ``spacy_rhetoric.corpora.cmdag.locate``); the context is
  split into sentences (:func:`split_sentences`); target = the sentences from
  the one holding the tenor to the one holding the vehicle; context = at most
  k sentences before it. Records that cannot be located, with a target longer
  than ``max_target_chars``, or duplicating an earlier (target, object) pair
  (CMDAG repeats a context for each ``sub_id``) are skipped and counted.
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from ..corpora.jsonio import iter_jsonl_objects, load_json_list
from ..errors import CorpusFormatError
from ..taxonomy import COARSE_ZH, OBJECT_COMPONENT, REQUEST_OBJECT
from .prompts import RG_DEVICES

#: Sentence end: 。！？!?… (and runs of them), followed by closing quotes or
#: brackets, or a line break / run of whitespace (poems and lyrics).
_SENT_END = re.compile(r"([。！？!?…]+[”’」』）)\]]*|\s+)")


@dataclass
class RGRecord:
    """One RG problem. previous_sentences: oldest first. meta: source
    specifics (file, line or record index, ids)."""

    rhetoric: str
    object: str
    target: str
    previous_sentences: List[str] = field(default_factory=list)
    source: str = ""
    meta: Dict[str, object] = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


def split_sentences(text: str) -> List[str]:
    """Split running Chinese text into sentences: after 。！？!?… (with any
    closing quotes/brackets) and at line breaks or whitespace runs; empty
    pieces dropped, other whitespace stripped."""
    pieces, start = [], 0
    for match in _SENT_END.finditer(text):
        pieces.append(text[start : match.end()].strip())
        start = match.end()
    pieces.append(text[start:].strip())
    return [p for p in pieces if p]


def _sentence_bounds(text: str) -> List[Tuple[int, int]]:
    """Character ``(start, end)`` of each sentence of :func:`split_sentences`."""
    bounds, start = [], 0
    for match in _SENT_END.finditer(text):
        bounds.append((start, match.end()))
        start = match.end()
    bounds.append((start, len(text)))
    return [(s, e) for s, e in bounds if text[s:e].strip()]


def _device(value: object) -> Optional[str]:
    """English RG device for a CERD ``rhetoric`` value, None for a non-RG
    device (parallelism, literal)."""
    if not isinstance(value, str):
        return None
    zh_to_label = {zh: lab for lab, zh in COARSE_ZH.items()}
    label = zh_to_label.get(value.strip(), value.strip().lower())
    return label if label in OBJECT_COMPONENT else None


# -- CERD ------------------------------------------------------------------
def read_cerd_rg(path: Union[str, Path]) -> List[RGRecord]:
    """RG records of a CERD-format JSON file (see module docstring).

    Raises :class:`CorpusFormatError` naming the file and line (invalid JSON)
    or record index (missing/ill-typed field, an unknown device name).
    Entries for parallelism or literal are skipped (CERD's RG excludes them).
    """
    path = Path(path)
    data = load_json_list(path, "RG records")
    out = []
    for i, rec in enumerate(data):
        if not isinstance(rec, dict) or not isinstance(rec.get("sentence"), str):
            raise CorpusFormatError(path, 'record needs a string field "sentence"', record=i)
        previous = rec.get("previousSentences") or []
        gens = rec.get("generationList")
        if not isinstance(previous, list) or not all(isinstance(s, str) for s in previous):
            raise CorpusFormatError(path, '"previousSentences" must be a list of strings', record=i)
        if not isinstance(gens, list):
            raise CorpusFormatError(path, '"generationList" must be a list', record=i)
        for j, gen in enumerate(gens):
            if not isinstance(gen, dict) or not isinstance(gen.get("object"), str):
                raise CorpusFormatError(path, f"generationList[{j}] needs a string \"object\"", record=i)
            name = gen.get("rhetoric")
            device = _device(name)
            if device is None:
                if name in ("排比", "parallelism", None, "literal"):
                    continue
                raise CorpusFormatError(path, f"unknown rhetoric {name!r} in generationList[{j}]", record=i)
            if not gen["object"].strip() or not rec["sentence"].strip():
                continue
            out.append(
                RGRecord(
                    device,
                    gen["object"].strip(),
                    rec["sentence"].strip(),
                    [s.strip() for s in previous if s.strip()],
                    source="cerd",
                    meta={"file": str(path), "record": i},
                )
            )
    return out


# -- simile corpus ---------------------------------------------------------
def simile_rg_records(path: Union[str, Path], stats: Optional[Counter] = None) -> List[RGRecord]:
    """RG records derived from one simile-corpus TSV file (module docstring).
    ``stats`` (optional Counter) receives ``sentences``, ``simile``,
    ``no_tenor``, ``records``. Format errors raise ``CorpusFormatError``."""
    from ..corpora.simile import read_simile, tag_spans

    path = Path(path)
    stats = stats if stats is not None else Counter()
    out = []
    for sent in read_simile(path):
        stats["sentences"] += 1
        if sent.label != "simile":
            continue
        stats["simile"] += 1
        tenors = [(s, e) for s, e, lab in tag_spans(path, sent) if lab == "tenor"]
        if not tenors:
            stats["no_tenor"] += 1
            continue
        start, end = tenors[0]
        out.append(
            RGRecord(
                "metaphor",
                "".join(sent.words[start:end]),
                "".join(sent.words),
                [],
                source="simile",
                meta={"file": path.name, "line": sent.line},
            )
        )
    stats["records"] += len(out)
    return out


# -- CMDAG -----------------------------------------------------------------
def cmdag_rg_records(
    path: Union[str, Path],
    *,
    k: int = 3,
    max_target_chars: int = 120,
    stats: Optional[Counter] = None,
) -> List[RGRecord]:
    """RG records derived from one CMDAG JSON file (module docstring).
    ``stats`` receives ``contexts``, ``not_located``, ``too_long``,
    ``duplicate``, ``records``. Format errors raise ``CorpusFormatError``."""
    from ..corpora.cmdag import locate, read_cmdag

    path = Path(path)
    stats = stats if stats is not None else Counter()
    seen = set()
    out = []
    for i, rec in enumerate(read_cmdag(path)):
        stats["contexts"] += 1
        context = rec["context"]
        found = locate(context, rec["tenor"], rec["vehicle"])
        if found is None:
            stats["not_located"] += 1
            continue
        (t0, _), (v0, _) = found
        bounds = _sentence_bounds(context)
        first = _sentence_index(bounds, min(t0, v0))
        last = _sentence_index(bounds, max(t0, v0))
        target = context[bounds[first][0] : bounds[last][1]].strip()
        if len(target) > max_target_chars:
            stats["too_long"] += 1
            continue
        key = (target, rec["tenor"].strip())
        if key in seen:
            stats["duplicate"] += 1
            continue
        seen.add(key)
        previous = [context[s:e].strip() for s, e in bounds[max(0, first - k) : first]] if k else []
        out.append(
            RGRecord(
                "metaphor",
                rec["tenor"].strip(),
                target,
                previous,
                source="cmdag",
                meta={"file": path.name, "record": i, "metaphor_id": rec.get("metaphor_id")},
            )
        )
    stats["records"] += len(out)
    return out


def _sentence_index(bounds: Sequence[Tuple[int, int]], offset: int) -> int:
    for i, (start, end) in enumerate(bounds):
        if start <= offset < end:
            return i
    return len(bounds) - 1


def derive_rg_records(
    simile_dir: Optional[Union[str, Path]] = None,
    cmdag_dir: Optional[Union[str, Path]] = None,
    *,
    simile_splits: Sequence[str] = ("Train",),
    cmdag_splits: Sequence[str] = ("val",),
    k: int = 3,
) -> Tuple[List[RGRecord], Dict[str, Counter]]:
    """Records from the simile corpus (``*-{split}.tsv``) and CMDAG
    (``{split}.json``) folders, with per-source statistics.

    Defaults use the simile training split and CMDAG's validation part, so the
    simile dev/test and CMDAG test parts stay unseen for evaluation. Raises
    ``FileNotFoundError`` for a missing split file.
    """
    records: List[RGRecord] = []
    stats: Dict[str, Counter] = {}
    if simile_dir is not None:
        stats["simile"] = Counter()
        for split in simile_splits:
            files = sorted(Path(simile_dir).glob(f"*-{split}.tsv"))
            if not files:
                raise FileNotFoundError(f"no *-{split}.tsv in {simile_dir}")
            for f in files:
                records.extend(simile_rg_records(f, stats["simile"]))
    if cmdag_dir is not None:
        stats["cmdag"] = Counter()
        for split in cmdag_splits:
            f = Path(cmdag_dir) / f"{split}.json"
            if not f.exists():
                raise FileNotFoundError(f"CMDAG split file not found: {f}")
            records.extend(cmdag_rg_records(f, k=k, stats=stats["cmdag"]))
    return records, stats


# -- annotated essays (all four devices) -------------------------------------
def essay_rg_records(
    path: Union[str, Path],
    *,
    k: int = 3,
    devices: Sequence[str] = RG_DEVICES,
    stats: Optional[Counter] = None,
) -> List[RGRecord]:
    """RG records of the team-annotated PSE-I essays (``annotations/pse-i-cerd/*.jsonl``,
    validated by :func:`spacy_rhetoric.corpora.pse_i_cerd.read_records`).

    - metaphor, personification, hyperbole: one record per sentence labelled
      with the device that has a gold object component (``REQUEST_OBJECT``:
      tenor, personification_object, hyperbole_object); object = the first
      such component; target = the sentence.
    - parallelism: one record per maximal run of consecutive sentences of a
      paragraph labelled parallelism (PSE-I's branches are often whole
      sentences, so the run is the parallelism); object = its first
      ``parallelism_marker``; target = the run's sentences joined.

    Context = the at most ``k`` sentences of the essay before the target.
    ``meta`` names the essay, paragraph and sentence(s). Sentences of a
    device without its object component are skipped and counted
    (``no_object/<device>``). Raises CorpusFormatError for malformed lines.
    """
    from ..corpora.pse_i_cerd import read_records

    stats = stats if stats is not None else Counter()
    essays: Dict[str, List[dict]] = {}
    for _, rec in read_records(Path(path)):
        essays.setdefault(str(rec["essay"]), []).append(rec)
    out: List[RGRecord] = []
    for essay, recs in essays.items():
        recs.sort(key=lambda r: (int(r["para"]), int(r["sent"])))
        texts = [r["text"] for r in recs]
        for i, rec in enumerate(recs):
            for device in devices:
                if device == "parallelism" or device not in rec["coarse"]:
                    continue
                obj = _first_component(rec, REQUEST_OBJECT[device])
                if obj is None:
                    stats[f"no_object/{device}"] += 1
                    continue
                out.append(_essay_record(device, obj, [i], texts, recs, k, str(path)))
                stats[device] += 1
        if "parallelism" in devices:
            for run in _parallelism_runs(recs):
                obj = next((o for j in run if (o := _first_component(recs[j], REQUEST_OBJECT["parallelism"]))), None)
                if obj is None:
                    stats["no_object/parallelism"] += 1
                    continue
                out.append(_essay_record("parallelism", obj, run, texts, recs, k, str(path)))
                stats["parallelism"] += 1
    return out


def _first_component(rec: dict, label: str) -> Optional[str]:
    return next((c["text"] for c in rec["components"] if c["label"] == label and c["text"].strip()), None)


def _parallelism_runs(recs: List[dict]) -> List[List[int]]:
    """Indices of maximal runs of consecutive parallelism sentences, each
    inside one paragraph."""
    runs: List[List[int]] = []
    for i, rec in enumerate(recs):
        if "parallelism" not in rec["coarse"]:
            continue
        if runs and runs[-1][-1] == i - 1 and recs[i - 1]["para"] == rec["para"]:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def _essay_record(device: str, obj: str, idx: List[int], texts: List[str], recs: List[dict], k: int, source: str) -> RGRecord:
    first = idx[0]
    context = [t.strip() for t in texts[max(0, first - k) : first] if t.strip()] if k else []
    meta = {"essay": recs[first]["essay"], "para": recs[first]["para"], "sents": [recs[j]["sent"] for j in idx]}
    return RGRecord(device, obj.strip(), "".join(texts[j] for j in idx).strip(), context, source=source, meta=meta)


# -- JSONL -----------------------------------------------------------------
def write_jsonl(records: Iterable[RGRecord], path: Union[str, Path]) -> int:
    """Write records one JSON object per line; returns the count."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    n = 0
    with path.open("w", encoding="utf8") as fh:
        for rec in records:
            fh.write(json.dumps(rec.to_dict(), ensure_ascii=False) + "\n")
            n += 1
    return n


def read_jsonl(path: Union[str, Path]) -> Iterator[RGRecord]:
    """Read records written by :func:`write_jsonl`. Raises
    :class:`CorpusFormatError` naming the file and line for invalid JSON, a
    missing field or a non-RG device."""
    path = Path(path)
    for line_no, obj in iter_jsonl_objects(path):
        missing = [f for f in ("rhetoric", "object", "target") if not isinstance(obj.get(f), str)]
        if missing:
            raise CorpusFormatError(path, f"missing string field(s) {missing}", line=line_no)
        if obj["rhetoric"] not in RG_DEVICES:
            raise CorpusFormatError(path, f"rhetoric must be one of {RG_DEVICES}", line=line_no)
        yield RGRecord(
            obj["rhetoric"],
            obj["object"],
            obj["target"],
            list(obj.get("previous_sentences") or []),
            source=str(obj.get("source", "")),
            meta=dict(obj.get("meta") or {}),
        )


def load_records(paths: Iterable[Union[str, Path]], k: int = 3) -> List[RGRecord]:
    """Records from files by suffix: ``.jsonl`` (:func:`read_jsonl`) or
    ``.json`` (CERD format, :func:`read_cerd_rg`); context cut to the last
    ``k`` sentences. Raises ``ValueError`` for another suffix."""
    out: List[RGRecord] = []
    for p in paths:
        p = Path(p)
        if p.suffix == ".jsonl":
            recs = list(read_jsonl(p))
        elif p.suffix == ".json":
            recs = read_cerd_rg(p)
        else:
            raise ValueError(f"{p}: RG records must be .jsonl (project format) or .json (CERD format)")
        for r in recs:
            r.previous_sentences = r.previous_sentences[-k:] if k else []
        out.extend(recs)
    return out
