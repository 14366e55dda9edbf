"""A simile knowledge base: tenor–vehicle co-occurrence counts from real corpora.

HAUSER (He et al. 2023, ``papers/002_*``) scores relevance with the number of
simile samples n(t, v) that contain the tenor–vehicle pair (§3.1.1, eq. 3)
and creativity with the vehicle frequency N_v, the number of simile samples
whose vehicle is v (§3.2, eqs. 8–9). This module counts both from our own
corpora instead of MAPS-KB:

- the Chinese simile corpus (Liu et al. 2018), TRAIN split only, sentences
  labelled ``simile``: tenor and vehicle spans from the ``t*``/``v*`` tags;
  each vehicle is paired with the nearest tenor before it, else the nearest
  after it (a sentence without a tenor adds to N_v only);
- CMDAG (Shao et al. 2024) JSON files: one sample per record
  ``(tenor, vehicle)``; exact repeats of ``(metaphor_id, sub_id, tenor,
  vehicle)`` count once (``(metaphor_id, sub_id)`` alone is not unique).

Within one sample each distinct pair adds 1 to n(t, v) and each distinct
vehicle adds 1 to N_v.

String normalisation (:func:`normalize`), applied to every tenor and vehicle
before counting and before lookup, so that keys do not depend on a word
segmentation:

1. Unicode NFKC (full-width letters/digits to half-width) and lower case;
2. all whitespace removed (segmented words are joined without spaces);
3. punctuation and symbols stripped at both ends;
4. one leading quantity phrase removed: a numeral (一 两 二 三 … 十 几 半 数
   or ASCII digits) followed by one classifier from :data:`CLASSIFIERS`
   (一只蝴蝶 → 蝴蝶, 两颗星星 → 星星), unless nothing would remain.

The KB is saved as one UTF-8 JSON file (:meth:`SimileKB.to_disk`).
"""
from __future__ import annotations

import json
import re
import unicodedata
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Tuple, Union

FORMAT = "spacy_rhetoric.SimileKB"
VERSION = 1

#: Common Chinese classifiers (量词) that follow a numeral in a vehicle phrase.
CLASSIFIERS = (
    "个只条位片朵颗棵张把块座道根头匹群串阵轮弯缕丝层盏枝支株粒滴双对件本幅首股团堆间场声面扇艘架辆口尾叶尊抹"
    "束捧粒尾颗轮柄杆顶把副盘碗杯瓶桶袋篮筐门所家栋节段截句篇首曲只匹峰"
)
_NUMERALS = "一两二三四五六七八九十几半数0-9"
_QUANTITY = re.compile(f"^[{_NUMERALS}]+[{CLASSIFIERS}]")


def _is_edge_junk(ch: str) -> bool:
    return unicodedata.category(ch)[0] in "PSZ"


def normalize(text: str) -> str:
    """Normalised key of a tenor or vehicle string (rules in the module
    docstring). Returns "" for text with no content characters."""
    s = unicodedata.normalize("NFKC", text).lower()
    s = "".join(s.split())
    start, end = 0, len(s)
    while start < end and _is_edge_junk(s[start]):
        start += 1
    while end > start and _is_edge_junk(s[end - 1]):
        end -= 1
    s = s[start:end]
    m = _QUANTITY.match(s)
    if m and m.end() < len(s):
        s = s[m.end() :]
    return s


def pair_components(spans: Sequence[Tuple[int, int, str]]) -> Tuple[List[Tuple[int, int]], List[Tuple[Tuple[int, int], Tuple[int, int]]]]:
    """Vehicles and (tenor, vehicle) pairs of one sentence.

    spans: ``(start, end, label)`` with label ``tenor`` or ``vehicle`` (other
    labels are ignored), in any order, offsets in any unit. Each vehicle is
    paired with the nearest tenor ending at or before its start, else with
    the nearest tenor starting after it. Returns ``(vehicles, pairs)`` with
    ``vehicles`` as ``(start, end)`` and pairs as ``((ts, te), (vs, ve))``.
    """
    tenors = sorted((s, e) for s, e, lab in spans if lab == "tenor")
    vehicles = sorted((s, e) for s, e, lab in spans if lab == "vehicle")
    pairs = []
    for v in vehicles:
        before = [t for t in tenors if t[1] <= v[0]]
        after = [t for t in tenors if t[0] >= v[1]]
        if before:
            pairs.append((before[-1], v))
        elif after:
            pairs.append((after[0], v))
    return vehicles, pairs


@dataclass
class SimileKB:
    """Counts n(t, v) and N_v over normalised strings.

    pair_counts: ``{(tenor, vehicle): n}``; vehicle_counts: ``{vehicle: N_v}``;
    samples: number of simile samples counted; sources: one dict per added
    source (name, path, samples, pairs).
    """

    pair_counts: Counter = field(default_factory=Counter)
    vehicle_counts: Counter = field(default_factory=Counter)
    samples: int = 0
    sources: List[dict] = field(default_factory=list)

    def add_sample(self, pairs: Iterable[Tuple[str, str]], vehicles: Iterable[str] = ()) -> None:
        """Count one simile sample: its (tenor, vehicle) pairs and vehicles
        (the vehicles of ``pairs`` are included automatically)."""
        keys = {(normalize(t), normalize(v)) for t, v in pairs}
        keys = {(t, v) for t, v in keys if t and v}
        vs = {normalize(v) for v in vehicles} | {v for _, v in keys}
        vs.discard("")
        if not vs:
            return
        self.pair_counts.update(keys)
        self.vehicle_counts.update(vs)
        self.samples += 1

    def n(self, tenor: str, vehicle: str) -> int:
        """n(t, v): simile samples containing the normalised pair."""
        return self.pair_counts.get((normalize(tenor), normalize(vehicle)), 0)

    def vehicle_frequency(self, vehicle: str) -> int:
        """N_v: simile samples whose vehicle is the normalised ``vehicle``."""
        return self.vehicle_counts.get(normalize(vehicle), 0)

    def size(self) -> Dict[str, int]:
        """``{"samples", "pairs" (distinct), "pair_tokens" (Σ n), "vehicles"
        (distinct), "tenors" (distinct)}``."""
        return {
            "samples": self.samples,
            "pairs": len(self.pair_counts),
            "pair_tokens": sum(self.pair_counts.values()),
            "vehicles": len(self.vehicle_counts),
            "tenors": len({t for t, _ in self.pair_counts}),
        }

    # -- building from the corpora -------------------------------------------------

    def add_simile_corpus(self, path: Union[str, Path]) -> int:
        """Add the ``simile`` sentences of one simile-corpus TSV file (use the
        TRAIN split for evaluation on other data). Returns the number of
        samples added. Raises ``CorpusFormatError`` (file and line) on a
        malformed file."""
        from ..corpora.simile import read_simile, tag_spans

        path = Path(path)
        before_samples, before_pairs = self.samples, sum(self.pair_counts.values())
        for sent in read_simile(path):
            if sent.label != "simile":
                continue
            spans = tag_spans(path, sent)
            vehicles, pairs = pair_components(spans)
            text = lambda se: "".join(sent.words[se[0] : se[1]])  # noqa: E731
            self.add_sample([(text(t), text(v)) for t, v in pairs], [text(v) for v in vehicles])
        return self._record_source("simile", path, before_samples, before_pairs)

    def add_cmdag(self, path: Union[str, Path]) -> int:
        """Add the records of one CMDAG JSON file. Returns the number of
        samples added. Raises ``CorpusFormatError`` (file and record) on a
        malformed file."""
        from ..corpora.cmdag import read_cmdag

        path = Path(path)
        before_samples, before_pairs = self.samples, sum(self.pair_counts.values())
        seen = set()
        for rec in read_cmdag(path):
            key = (rec["metaphor_id"], rec["sub_id"], rec["tenor"], rec["vehicle"])
            if key in seen:
                continue
            seen.add(key)
            self.add_sample([(rec["tenor"], rec["vehicle"])])
        return self._record_source("cmdag", path, before_samples, before_pairs)

    def _record_source(self, name: str, path: Path, samples: int, pairs: int) -> int:
        added = self.samples - samples
        self.sources.append(
            {"name": name, "file": path.name, "samples": added, "pairs": sum(self.pair_counts.values()) - pairs}
        )
        return added

    # -- serialisation --------------------------------------------------------------

    def to_disk(self, path: Union[str, Path]) -> None:
        """Write the KB as JSON (pairs as ``[tenor, vehicle, n]`` rows)."""
        data = {
            "format": FORMAT,
            "version": VERSION,
            "samples": self.samples,
            "sources": self.sources,
            "pairs": [[t, v, n] for (t, v), n in sorted(self.pair_counts.items())],
            "vehicles": dict(sorted(self.vehicle_counts.items())),
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(data, ensure_ascii=False, indent=0), encoding="utf8")

    @classmethod
    def from_disk(cls, path: Union[str, Path]) -> "SimileKB":
        """Load a KB written by :meth:`to_disk`. Raises ValueError naming the
        file (and line, for invalid JSON) when it is not such a KB."""
        path = Path(path)
        try:
            data = json.loads(path.read_text(encoding="utf8"))
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}, line {err.lineno}: invalid JSON: {err.msg}") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path}: not a simile KB file (expected format {FORMAT!r})")
        if data.get("version") != VERSION:
            raise ValueError(f"{path}: unsupported KB version {data.get('version')!r}")
        kb = cls(samples=int(data["samples"]), sources=list(data.get("sources", [])))
        for i, row in enumerate(data["pairs"]):
            if not (isinstance(row, list) and len(row) == 3 and isinstance(row[2], int)):
                raise ValueError(f"{path}: pair row {i} is not [tenor, vehicle, count]")
            kb.pair_counts[(row[0], row[1])] = row[2]
        kb.vehicle_counts.update({str(v): int(n) for v, n in data["vehicles"].items()})
        return kb


def build_kb(
    simile_files: Sequence[Union[str, Path]] = (),
    cmdag_files: Sequence[Union[str, Path]] = (),
) -> SimileKB:
    """A KB from simile-corpus TSV files and CMDAG JSON files. Raises
    ValueError when no file is given."""
    if not simile_files and not cmdag_files:
        raise ValueError("give at least one simile-corpus or CMDAG file")
    kb = SimileKB()
    for path in simile_files:
        kb.add_simile_corpus(path)
    for path in cmdag_files:
        kb.add_cmdag(path)
    return kb
