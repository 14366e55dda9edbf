"""HYPO-cn (Kong et al. 2020, EMNLP, "Identifying Exaggerated Language"), as
published in the MMFLD repository (Lai et al. 2023) -> Docs.

Format (``../shared/data/README.md``, row ``hypo-cn/``): ``train.1``,
``train.0``, ``valid.1``, ``valid.0``; one sentence a line, UTF-8; the file
suffix is the label (``1`` hyperbolic, ``0`` literal). The test split is
held out by the project's maintainers and is not read here.

Reading (:func:`read_hypo_cn`): a blank line (after stripping surrounding
whitespace) or an undecodable file raises :class:`CorpusFormatError` naming
the file and the 1-based line; a final line break is not a line. The text is
stripped of surrounding whitespace (the published files have none).

Mapping onto the taxonomy (DESIGN §3.1), sentence level:

- ``.1`` (hyperbolic): coarse ``hyperbole`` positive and ``literal``
  negative; every other label is unknown (masked in training): such a
  sentence may also be a metaphor or a personification, and its hyperbole
  form, content and components are not given;
- ``.0`` (literal): coarse ``hyperbole`` negative, and with it every
  hyperbole form, content and component (a sentence without hyperbole has
  none); metaphor, personification, parallelism and ``literal`` stay
  unknown (HYPO-cn's literal side was only judged for exaggeration).

Our annotation of the training hyperboles (``annotations/hypo-cn``; its
datasheet says how it was made): with ``annotations_dir``, a ``train.1``
line that has a record gets hyperbole's form and content labels and the
``hyperbole_object`` / ``hyperbole_content`` components, and declares them
annotated. A line the annotators judged *not* hyperbole by CERD's definition
(``"coarse": []``) becomes a hyperbole negative (its forms, contents and
components with it) and ``literal`` unknown: the project trains CERD's
device, not HYPO-cn's wider notion. Lines without a record keep the mapping
above.

``doc.user_data`` holds ``corpus`` = ``"hypo-cn"``, ``split``, ``line``
(1-based line in its file) and ``hypo_label`` (0/1). Every Doc is one
sentence (``mark_single_sentence``), words from the given ``nlp``'s
tokenizer (the CLI uses the shipped pipeline's pkuseg model, as for CMC).

The published files are kept as they are: ``train.0`` holds one sentence
twice (converted twice); no sentence is in two files.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc

from .. import taxonomy as tx
from ..annotation import ANNOTATED_KEY, COMPONENTS_KEY, LEVEL_SPAN_KEYS
from ..errors import CorpusFormatError
from .docbin import mark_single_sentence, write_docbin
from .jsonio import iter_jsonl_objects, text_sha1
from .sentence_records import char_components, check_record, components_of, read_records, whole_doc_spans

HYPERBOLE = "hyperbole"
HYPERBOLE_COMPONENTS = components_of(HYPERBOLE)
#: Our split name -> the stem of its published files.
SPLITS = {"train": "train", "valid": "valid"}
LABELS = (1, 0)
#: Split -> file of our annotation in ``annotations/hypo-cn`` (records of
#: ``train.1`` lines).
ANNOTATION_FILES = {"train": "train.jsonl"}


@dataclass(frozen=True)
class HypoSentence:
    """One line of a HYPO-cn file: ``label`` 1/0 (the file suffix), ``line``
    1-based, ``text`` stripped (non-empty)."""

    split: str
    label: int
    line: int
    text: str


def file_path(hypo_dir: Path, split: str, label: int) -> Path:
    """``hypo_dir/<split>.<label>``; raises ValueError for an unknown split
    or label."""
    if split not in SPLITS or label not in LABELS:
        raise ValueError(f"HYPO-cn has splits {', '.join(SPLITS)} and labels 1/0, not {split!r}/{label!r}")
    return Path(hypo_dir) / f"{SPLITS[split]}.{label}"


def read_hypo_cn(path: Path, split: str, label: int) -> Iterator[HypoSentence]:
    """Sentences of one HYPO-cn file, in line order. Raises
    :class:`CorpusFormatError` naming the file and line for a blank line or
    bytes that are not UTF-8, FileNotFoundError for a missing file."""
    path = Path(path)
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as err:
        raise CorpusFormatError(path, f"not UTF-8: {err.reason}", line=data[: err.start].count(b"\n") + 1) from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    for line_no, raw in enumerate(lines, start=1):
        sentence = raw.strip()
        if not sentence:
            raise CorpusFormatError(path, "empty line (one sentence a line expected)", line=line_no)
        yield HypoSentence(split, label, line_no, sentence)


def read_split(hypo_dir: Path, split: str) -> List[HypoSentence]:
    """Both files of ``split``: the ``.1`` sentences, then the ``.0`` ones."""
    return [s for label in LABELS for s in read_hypo_cn(file_path(hypo_dir, split, label), split, label)]


def _check_level(bad: Callable[[str], CorpusFormatError], rec: dict, level: str) -> None:
    labels = rec.get(level)
    allowed = tx.children(level, HYPERBOLE)
    if not isinstance(labels, list) or not set(labels) <= set(allowed) or bool(labels) != bool(rec.get("coarse")):
        raise bad(f"{level!r} must list one or more of {', '.join(allowed)} on a hyperbole and be empty otherwise, not {labels!r}")


def check_levels(bad: Callable[[str], CorpusFormatError], rec: dict) -> None:
    """Raise ``bad(...)`` unless the record's form and content labels are
    hyperbole's, present exactly when ``coarse`` is ``["hyperbole"]``."""
    for level in ("form", "content"):
        _check_level(bad, rec, level)


def read_annotations(path: Path, sentences: Sequence[HypoSentence]) -> Dict[int, dict]:
    """Our annotation of the ``train.1`` sentences, by line.

    path: ``annotations/hypo-cn/train.jsonl``, one record per annotated line
        of ``train.1``: ``{"split", "line", "text_sha1", "coarse":
        ["hyperbole"] or [], "form": [...], "content": [...], "components":
        [{"label", "start", "end", "text"}], "note"}``
        (:mod:`.sentence_records`; forms and contents hyperbole's,
        components ``hyperbole_object``/``hyperbole_content`` with character
        offsets into the stripped sentence, end exclusive).
    sentences: the split's sentences (only the ``.1`` ones are annotated).
    Raises CorpusFormatError naming the file and line of a malformed record,
    a line that is not a ``train.1`` line, a text that differs or a line
    annotated twice.
    """
    positives = {s.line: s for s in sentences if s.label == 1}
    return read_records(path, positives, text_of=lambda s: s.text, name_of=lambda line: f"train.1 line {line}",
                        what="a line of train.1", judged=(HYPERBOLE,), components=HYPERBOLE_COMPONENTS,
                        extra=check_levels)


def _annotated(coarse: Sequence[str], with_fine: bool) -> Dict[str, List[str]]:
    fine = {lv: tx.children(lv, HYPERBOLE) if with_fine else [] for lv in ("form", "content")}
    return {"coarse": list(coarse), **fine, "components": list(HYPERBOLE_COMPONENTS) if with_fine else []}


def sentence_to_doc(nlp: Language, sent: HypoSentence, record: Optional[dict] = None) -> Doc:
    """One single-sentence Doc with the gold and the annotated labels of the
    module docstring; ``record``: the line's record of
    :func:`read_annotations` (``train.1`` only)."""
    doc = mark_single_sentence(nlp.make_doc(sent.text))
    doc.user_data.update({"corpus": "hypo-cn", "split": sent.split, "line": sent.line, "hypo_label": sent.label})
    for key in LEVEL_SPAN_KEYS.values():
        doc.spans[key] = []
    doc.spans[COMPONENTS_KEY] = []
    if sent.label == 0:
        doc.user_data[ANNOTATED_KEY] = _annotated([HYPERBOLE], with_fine=True)
    elif record is None:
        doc.spans[LEVEL_SPAN_KEYS["coarse"]] = whole_doc_spans(doc, [HYPERBOLE])
        doc.user_data[ANNOTATED_KEY] = _annotated([HYPERBOLE, tx.LITERAL], with_fine=False)
    elif record["coarse"]:
        for level, key in LEVEL_SPAN_KEYS.items():
            doc.spans[key] = whole_doc_spans(doc, record[level])
        doc.spans[COMPONENTS_KEY] = sorted(
            char_components(doc, [(c["label"], c["start"], c["end"]) for c in record["components"]]),
            key=lambda s: (s.start, s.end, s.label_))
        doc.user_data[ANNOTATED_KEY] = _annotated([HYPERBOLE, tx.LITERAL], with_fine=True)
    else:  # read and judged not hyperbole by CERD's definition
        doc.user_data[ANNOTATED_KEY] = _annotated([HYPERBOLE], with_fine=True)
    return doc


def convert_hypo_cn(hypo_dir: Path, output_dir: Path, nlp: Language,
                    annotations_dir: Optional[Path] = None) -> Dict[str, Dict[str, int]]:
    """Convert the train and valid splits to ``output_dir/{train,valid}.spacy``.

    annotations_dir: ``annotations/hypo-cn``; a split with a file there
        (:data:`ANNOTATION_FILES`) gets our hyperbole forms, contents and
        components (module docstring).
    Returns ``{split: {"sentences", "hyperbolic", "literal", "annotated",
    "judged_not_hyperbole", "hyperbole_objects", "hyperbole_contents"}}``.
    Raises CorpusFormatError for a malformed corpus or annotation file,
    FileNotFoundError for a missing one.
    """
    stats: Dict[str, Dict[str, int]] = {}
    for split in SPLITS:
        sentences = read_split(hypo_dir, split)
        records: Dict[int, dict] = {}
        if annotations_dir is not None and split in ANNOTATION_FILES:
            ann_path = Path(annotations_dir) / ANNOTATION_FILES[split]
            if ann_path.is_file():
                records = read_annotations(ann_path, sentences)
        docs = [sentence_to_doc(nlp, s, records.get(s.line) if s.label == 1 else None) for s in sentences]
        write_docbin(docs, Path(output_dir) / f"{split}.spacy")
        comps = [s.label_ for d in docs for s in d.spans[COMPONENTS_KEY]]
        stats[split] = {
            "sentences": len(docs),
            "hyperbolic": sum(s.label for s in sentences),
            "literal": sum(1 - s.label for s in sentences),
            "annotated": len(records),
            "judged_not_hyperbole": sum(not r["coarse"] for r in records.values()),
            "hyperbole_objects": comps.count("hyperbole_object"),
            "hyperbole_contents": comps.count("hyperbole_content"),
        }
    return stats


# --- the annotators' sheets -> annotations/hypo-cn ---------------------------

#: Sheet file (in the raw folder) -> the ``train.1`` lines it covers
#: (first, last; inclusive). The second pass covers every tenth line.
FIRST_PASS_SHEETS = {
    "first_pass_1.jsonl": (1, 627),
    "first_pass_2.jsonl": (628, 1254),
    "first_pass_3.jsonl": (1255, 1880),
}
SECOND_PASS_SHEET = "second_pass.jsonl"
#: Keys an annotator's line may have.
SHEET_KEYS = ("line", "coarse", "form", "content", "components", "note")


def locate(text: str, span: str, occurrence: int) -> Optional[Tuple[int, int]]:
    """``(start, end)`` of the ``occurrence``-th (1-based) occurrence of
    ``span`` in ``text`` (occurrences may overlap), or None when there are
    fewer."""
    start = -1
    for _ in range(occurrence):
        start = text.find(span, start + 1)
        if start < 0:
            return None
    return start, start + len(span)


def locate_sheet(path: Path, sentences: Dict[int, HypoSentence],
                 lines: Optional[Tuple[int, int]] = None) -> List[dict]:
    """An annotator's sheet as records of ``annotations/hypo-cn``
    (:func:`read_annotations`'s layout), in the sheet's order.

    path: JSONL, one line per ``train.1`` sentence decided: ``{"line": N
        (1-based line of train.1), "coarse": ["hyperbole"] or [], "form":
        [...], "content": [...], "components": [{"label", "text",
        "occurrence"}], "note"}``; ``occurrence`` (default 1) picks which
        occurrence of ``text`` in the sentence is meant.
    sentences: the ``train.1`` sentences by line.
    lines: the range of lines the sheet covers, when it has one.

    Each span string becomes character offsets; labels, span strings and
    notes are copied as they are (a span is never trimmed or moved), and
    ``text_sha1`` ties the record to its sentence. Raises CorpusFormatError
    naming the sheet and its line for an unknown key, a ``line`` outside
    ``train.1`` or the sheet's range, a line decided twice, a span string
    that does not occur in the sentence (as often as ``occurrence`` says),
    or a record that breaks the checks of :func:`read_annotations`.
    """
    path = Path(path)
    records: List[dict] = []
    seen: Dict[int, int] = {}
    for line_no, raw in iter_jsonl_objects(path):
        def bad(msg: str) -> CorpusFormatError:
            return CorpusFormatError(path, msg, line=line_no)

        unknown = sorted(set(raw) - set(SHEET_KEYS))
        if unknown:
            raise bad(f"unknown keys {unknown}; a sheet line has {', '.join(SHEET_KEYS)}")
        n = raw.get("line")
        if not isinstance(n, int) or n not in sentences:
            raise bad(f"'line' {n!r} is not a line of train.1 (1-{max(sentences)})")
        if lines is not None and not lines[0] <= n <= lines[1]:
            raise bad(f"train.1 line {n} is outside this sheet's lines {lines[0]}-{lines[1]}")
        if n in seen:
            raise bad(f"train.1 line {n} is decided twice (also on line {seen[n]})")
        seen[n] = line_no
        text = sentences[n].text
        comps = raw.get("components", [])
        if not isinstance(comps, list):
            raise bad(f"train.1 line {n}: 'components' must be a list")
        located = []
        for comp in comps:
            if not isinstance(comp, dict) or not isinstance(comp.get("text"), str) or not comp["text"]:
                raise bad(f"train.1 line {n}: component {comp!r} has no span string 'text'")
            occurrence = comp.get("occurrence", 1)
            if not isinstance(occurrence, int) or occurrence < 1:
                raise bad(f"train.1 line {n}: component {comp['text']!r}: 'occurrence' must be a positive integer, not {occurrence!r}")
            where = locate(text, comp["text"], occurrence)
            if where is None:
                raise bad(f"train.1 line {n}: span {comp['text']!r} ({comp.get('label')}) does not occur "
                          f"{occurrence} time(s) in the sentence {text!r}")
            located.append({"label": comp.get("label"), "start": where[0], "end": where[1], "text": comp["text"]})
        rec = {"split": "train", "line": n, "text_sha1": text_sha1(text), "coarse": raw.get("coarse"),
               "form": raw.get("form", []), "content": raw.get("content", []),
               "components": sorted(located, key=lambda c: (c["start"], c["end"], str(c["label"])))}
        if raw.get("note"):
            rec["note"] = raw["note"]
        check_record(bad, rec, text, f"train.1 line {n}", (HYPERBOLE,), HYPERBOLE_COMPONENTS)
        check_levels(bad, rec)
        records.append(rec)
    return records


def _write_jsonl(records: Sequence[dict], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf8")


def build_annotations(raw_dir: Path, hypo_dir: Path, output_dir: Path) -> Dict[str, Dict[str, int]]:
    """The annotators' sheets in ``raw_dir`` (:data:`FIRST_PASS_SHEETS`,
    :data:`SECOND_PASS_SHEET`; a sheet not there is skipped) ->
    ``output_dir/train.jsonl`` (the first pass, by line) and
    ``output_dir/second_pass.jsonl``, located by :func:`locate_sheet`
    against ``hypo_dir/train.1``.

    Returns ``{sheet: {"records", "hyperboles", "covers", "missing"}}``
    (``covers``: the lines in the sheet's range; ``missing``: those without a
    record; both 0 for the second pass). Raises CorpusFormatError (sheet and
    line) as :func:`locate_sheet` does (the sheets' ranges do not overlap,
    so no line is in two first-pass sheets); FileNotFoundError when no sheet
    is there.
    """
    raw_dir, output_dir = Path(raw_dir), Path(output_dir)
    sentences = {s.line: s for s in read_hypo_cn(file_path(hypo_dir, "train", 1), "train", 1)}
    stats: Dict[str, Dict[str, int]] = {}
    first: Dict[int, dict] = {}
    found = False
    for name, lines in FIRST_PASS_SHEETS.items():
        path = raw_dir / name
        if not path.is_file():
            continue
        found = True
        records = locate_sheet(path, sentences, lines)
        for rec in records:
            first[rec["line"]] = rec
        covered = {r["line"] for r in records}
        span = range(lines[0], min(lines[1], max(sentences)) + 1)
        stats[name] = {"records": len(records), "hyperboles": sum(bool(r["coarse"]) for r in records),
                       "covers": len(span), "missing": sum(n not in covered for n in span)}
    second_path = raw_dir / SECOND_PASS_SHEET
    if second_path.is_file():
        found = True
        second = sorted(locate_sheet(second_path, sentences), key=lambda r: r["line"])
        _write_jsonl(second, output_dir / "second_pass.jsonl")
        stats[SECOND_PASS_SHEET] = {"records": len(second), "hyperboles": sum(bool(r["coarse"]) for r in second),
                                    "covers": 0, "missing": 0}
    if not found:
        raise FileNotFoundError(f"no annotation sheet in {raw_dir} ({', '.join([*FIRST_PASS_SHEETS, SECOND_PASS_SHEET])})")
    if first:
        _write_jsonl([first[n] for n in sorted(first)], output_dir / "train.jsonl")
    return stats
