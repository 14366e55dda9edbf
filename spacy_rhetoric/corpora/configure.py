"""ConFiguRe (Zhu et al. 2022, COLING, ``papers/001``) JSON -> Docs.

Format (``../shared/data/README.md``): one JSON object mapping a passage key
``work_片段N`` to ``{"fragment": text, "units": [{"figurativeUnit", "fos",
"begin", "end", "annotator"}]}``. ``begin``/``end`` are character offsets into
``fragment`` (end exclusive); ``fos`` names one of the 12 figure types
(§3.1), in Chinese (``比喻``), Chinese with its English gloss (``比喻
(Metaphor/Simile)``, half- or full-width brackets), the gloss alone, or our
label (``metaphor``): :func:`parse_fos`.

One Doc per passage, tokenised by the ``nlp`` given (characters with a blank
``zh`` pipeline, so every unit falls on token boundaries). Gold:
``doc.spans["figurative_units"]``, labels the English names of
:data:`spacy_rhetoric.taxonomy.CONFIGURE_FIGURES`; the group's
``attrs["label_zh"]`` maps each label to its Chinese name. Units may overlap
(41 pairs in the validation split): all are kept. ``doc.user_data`` holds
``corpus`` (``"configure"``), ``key`` and ``work``.

Split by work: the passages of one work (the part of the key before
``_片段``) are all in train or all in dev, so dev measures prose the model
has not read. :func:`choose_dev_works` picks the dev works; the choice for
the validation split is committed in ``configs/configure_split.json``
(``docs/corpora.md``).
"""
from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

import numpy
from spacy.language import Language
from spacy.tokens import Doc, SpanGroup

from ..errors import CorpusFormatError
from ..taxonomy import CONFIGURE_FIGURES
from .docbin import write_docbin

FIGURATIVE_UNITS_KEY = "figurative_units"
WORK_SEPARATOR = "_片段"

#: The English gloss of each figure type (ConFiguRe §3.1 and Table 10).
FOS_GLOSS: Dict[str, str] = {
    "metaphor": "Metaphor/Simile",
    "personification": "Personification",
    "metonymy": "Metonymy",
    "hyperbole": "Hyperbole",
    "irony": "Irony",
    "synaesthesia": "Synaesthesia",
    "rhetorical_question": "Rhetorical question",
    "parallelism": "Parallelism",
    "duality": "Duality",
    "repetition": "Repetition",
    "antithesis": "Antithesis",
    "quote": "Quote",
}


def _norm(name: str) -> str:
    return re.sub(r"[\s_\-]+", "", name).casefold()


_FOS_LOOKUP: Dict[str, str] = {}
for _label, _zh in CONFIGURE_FIGURES.items():
    for _name in (_label, _zh, FOS_GLOSS[_label], *FOS_GLOSS[_label].split("/")):
        _FOS_LOOKUP[_norm(_name)] = _label
_GLOSSED = re.compile(r"^\s*(\S+?)\s*[(（](.*)[)）]\s*$")


def parse_fos(value: str) -> Optional[str]:
    """Our label for a ConFiguRe ``fos`` value, or None if it names no type.

    Accepted: the Chinese name (``问语``), the Chinese name with its English
    gloss in brackets (``问语(Rhetorical question)``, ``问语（Rhetorical
    question）``), the gloss alone (``Rhetorical question``, either half of
    ``Metaphor/Simile``) and our label (``rhetorical_question``); case, spaces
    and underscores do not matter. A glossed name must agree with its gloss.
    """
    if not isinstance(value, str):
        return None
    match = _GLOSSED.match(value)
    if match:
        name, gloss = (_FOS_LOOKUP.get(_norm(part)) for part in match.groups())
        return name if name is not None and name == gloss else None
    return _FOS_LOOKUP.get(_norm(value))


def work_of(key: str) -> str:
    """The work (book) of a passage key: the part before ``_片段``, or the
    whole key when it has none."""
    return key.rsplit(WORK_SEPARATOR, 1)[0]


@dataclass(frozen=True)
class Unit:
    """A figurative unit: character offsets into its passage (end exclusive)."""

    begin: int
    end: int
    label: str


@dataclass(frozen=True)
class Passage:
    key: str
    fragment: str
    units: Tuple[Unit, ...]

    @property
    def work(self) -> str:
        return work_of(self.key)


def _check_unit(path: Path, key: str, i: int, unit: object, n_chars: int) -> Unit:
    where = f"passage {key!r}, unit {i}"
    if not isinstance(unit, dict):
        raise CorpusFormatError(path, f"{where}: a unit must be an object")
    missing = [f for f in ("fos", "begin", "end") if f not in unit]
    if missing:
        raise CorpusFormatError(path, f"{where}: missing field(s) {missing}")
    begin, end = unit["begin"], unit["end"]
    if not all(isinstance(x, int) and not isinstance(x, bool) for x in (begin, end)):
        raise CorpusFormatError(path, f"{where}: 'begin' and 'end' must be integers")
    if not 0 <= begin < end <= n_chars:
        raise CorpusFormatError(path, f"{where}: offsets {begin}..{end} outside the fragment of {n_chars} characters")
    label = parse_fos(unit["fos"])
    if label is None:
        raise CorpusFormatError(path, f"{where}: unknown figure type {unit['fos']!r}")
    return Unit(begin, end, label)


def read_configure(path: Union[str, Path]) -> List[Passage]:
    """The validated passages of one ConFiguRe JSON file, in file order.

    Raises :class:`CorpusFormatError` naming the file (and line) for invalid
    JSON or a top level that is not an object, and the file and passage key
    (and unit index) for a passage without a string ``fragment`` or a list
    ``units``, a unit that is not an object or lacks ``fos``/``begin``/``end``,
    offsets that are not integers with ``0 <= begin < end <= len(fragment)``,
    an unknown ``fos`` (:func:`parse_fos`), or a ``figurativeUnit`` that is not
    the text at its offsets.
    """
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as err:
        raise CorpusFormatError(path, f"invalid JSON: {err.msg}", line=err.lineno) from None
    if not isinstance(data, dict):
        raise CorpusFormatError(path, "expected a JSON object mapping passage keys to passages")
    passages = []
    for key, rec in data.items():
        if not isinstance(rec, dict):
            raise CorpusFormatError(path, f"passage {key!r}: a passage must be an object")
        fragment, units = rec.get("fragment"), rec.get("units")
        if not isinstance(fragment, str):
            raise CorpusFormatError(path, f"passage {key!r}: 'fragment' must be a string")
        if not isinstance(units, list):
            raise CorpusFormatError(path, f"passage {key!r}: 'units' must be a list")
        checked = []
        for i, unit in enumerate(units):
            checked.append(_check_unit(path, key, i, unit, len(fragment)))
            text = unit.get("figurativeUnit")
            if text is not None and text != fragment[unit["begin"]:unit["end"]]:
                raise CorpusFormatError(path, f"passage {key!r}, unit {i}: 'figurativeUnit' is not the text at {unit['begin']}..{unit['end']}")
        passages.append(Passage(key, fragment, tuple(checked)))
    return passages


def set_figurative_units(doc: Doc, spans: Iterable, key: str = FIGURATIVE_UNITS_KEY) -> None:
    """Write ``spans`` (Spans of ``doc``, labels of ``CONFIGURE_FIGURES``) as
    ``doc.spans[key]``, sorted by offsets, with ``attrs["label_zh"]`` mapping
    every figure label to its Chinese name."""
    ordered = sorted(spans, key=lambda s: (s.start, s.end, s.label_))
    group = SpanGroup(doc, name=key, spans=ordered)
    group.attrs["label_zh"] = dict(CONFIGURE_FIGURES)
    doc.spans[key] = group


def passage_to_doc(nlp: Language, passage: Passage) -> Doc:
    """One Doc with the passage's units in ``doc.spans["figurative_units"]``.

    Raises ValueError when a unit does not fall on the tokens of ``nlp``
    (never with character tokens)."""
    doc = nlp.make_doc(passage.fragment)
    spans = []
    for unit in passage.units:
        span = doc.char_span(unit.begin, unit.end, label=unit.label)
        if span is None:
            raise ValueError(f"passage {passage.key!r}: unit {unit.begin}..{unit.end} is not on token boundaries")
        spans.append(span)
    set_figurative_units(doc, spans)
    doc.user_data.update({"corpus": "configure", "key": passage.key, "work": passage.work})
    return doc


def unit_counts(passages: Iterable[Passage]) -> Counter:
    """Units per label."""
    return Counter(u.label for p in passages for u in p.units)


def choose_dev_works(
    passages: Sequence[Passage], dev_share: float = 0.25, seed: int = 0, tries: int = 20000,
    frequent: int = 20, max_work_share: float = 0.4,
) -> List[str]:
    """The works of a dev part holding about ``dev_share`` of the units and of
    every frequent type.

    Each try takes the works in a random order (``numpy.random.RandomState(seed)``)
    and adds them to dev until dev holds ``dev_share`` of all units, skipping a
    work larger than ``max_work_share`` of that target (so no single work
    makes up most of dev). The try kept has the smallest
    ``max_t |dev_t / all_t - dev_share| + |dev / all - dev_share|`` over the
    types ``t`` with at least ``frequent`` units. Deterministic for a given
    input and ``seed``. Returns the sorted dev works.
    """
    per_work: Dict[str, Counter] = {}
    for p in passages:
        per_work.setdefault(p.work, Counter()).update(u.label for u in p.units)
    names = sorted(per_work)
    total = Counter()
    for counts in per_work.values():
        total.update(counts)
    n_all = sum(total.values())
    common = [t for t, n in total.items() if n >= frequent]
    rng = numpy.random.RandomState(seed)
    best: Optional[Tuple[float, List[str]]] = None
    for _ in range(tries):
        dev: List[str] = []
        counts = Counter()
        for i in rng.permutation(len(names)):
            work = names[i]
            if sum(per_work[work].values()) > max_work_share * dev_share * n_all:
                continue
            dev.append(work)
            counts.update(per_work[work])
            if sum(counts.values()) >= dev_share * n_all:
                break
        score = max((abs(counts[t] / total[t] - dev_share) for t in common), default=0.0)
        score += abs(sum(counts.values()) / max(n_all, 1) - dev_share)
        if best is None or score < best[0]:
            best = (score, sorted(dev))
    return best[1] if best else []


def read_split(path: Union[str, Path]) -> Dict[str, List[str]]:
    """``{"train": [works], "dev": [works]}`` from a split file (see
    ``configs/configure_split.json``). Raises CorpusFormatError for another
    shape or a work in both parts."""
    path = Path(path)
    try:
        data = json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as err:
        raise CorpusFormatError(path, f"invalid JSON: {err.msg}", line=err.lineno) from None
    if not isinstance(data, dict) or not all(isinstance(data.get(p), list) for p in ("train", "dev")):
        raise CorpusFormatError(path, "expected an object with the lists 'train' and 'dev'")
    both = set(data["train"]) & set(data["dev"])
    if both:
        raise CorpusFormatError(path, f"works in both train and dev: {sorted(both)}")
    return {"train": list(data["train"]), "dev": list(data["dev"])}


def split_passages(passages: Sequence[Passage], split: Dict[str, List[str]]) -> Dict[str, List[Passage]]:
    """The passages of each part of ``split``. Raises ValueError naming the
    works of ``passages`` that the split does not list."""
    part_of = {work: part for part, works in split.items() for work in works}
    unknown = sorted({p.work for p in passages} - set(part_of))
    if unknown:
        raise ValueError(f"works not in the split: {unknown}")
    parts: Dict[str, List[Passage]] = {part: [] for part in split}
    for p in passages:
        parts[part_of[p.work]].append(p)
    return parts


@dataclass
class ConfigureStats:
    passages: int = 0
    units: int = 0
    works: int = 0
    overlapping_pairs: int = 0
    per_label: Dict[str, int] = field(default_factory=dict)


def _stats(passages: Sequence[Passage]) -> ConfigureStats:
    overlapping = 0
    for p in passages:
        units = sorted(p.units, key=lambda u: (u.begin, u.end))
        overlapping += sum(1 for i, a in enumerate(units) for b in units[i + 1:] if b.begin < a.end)
    return ConfigureStats(
        passages=len(passages), units=sum(len(p.units) for p in passages), works=len({p.work for p in passages}),
        overlapping_pairs=overlapping, per_label=dict(sorted(unit_counts(passages).items())),
    )


def convert_configure(
    path: Union[str, Path], output_dir: Union[str, Path], nlp: Language, split_path: Optional[Union[str, Path]] = None,
) -> Dict[str, ConfigureStats]:
    """Convert a ConFiguRe file to ``output_dir/{train,dev}.spacy`` by the
    split in ``split_path``, or to ``output_dir/<file stem>.spacy`` without
    one (a held-out file is scored whole). Returns the statistics per output."""
    passages = read_configure(path)
    parts = split_passages(passages, read_split(split_path)) if split_path else {Path(path).stem: passages}
    stats = {}
    for part, part_passages in parts.items():
        write_docbin((passage_to_doc(nlp, p) for p in part_passages), Path(output_dir) / f"{part}.spacy")
        stats[part] = _stats(part_passages)
    return stats
