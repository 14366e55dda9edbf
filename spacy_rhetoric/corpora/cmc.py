"""Chinese Metaphor Corpus (CMC; Li et al. 2022, INLG, "Nominal Metaphor
Generation with Multitask Learning"), old binary version -> Docs.

Format (``../shared/data/README.md``, row ``cmc/``): one sentence a line,
``label<TAB>text``, UTF-8; label ``1`` = metaphorical, which in this corpus
*includes personification* (e.g. 石榴娃娃急切地扒开叶子向外张望), ``0`` =
literal. Only the upstream training file exists here (``cmc/train.tsv``,
6,256 lines), so the held-out split is ours (below).

Reading (:func:`read_cmc`): a line is malformed when it does not have exactly
two tab-separated fields, its label is not ``0``/``1`` or its text is empty
after stripping surrounding whitespace; :class:`CorpusFormatError` names the
file and the 1-based line. The text is stripped of surrounding whitespace
(176 lines of the file end in a space). The real file has four malformed
lines (2488, 4024, 4508, 5472: ``0<TAB>verse number<TAB>text``, from a
Quran translation); :func:`convert_cmc` raises on them with ``strict=True``
and otherwise skips them and lists them in ``split.json``.

Mapping onto the taxonomy (DESIGN §3.1), sentence level only, no spans:

- label 0: ``ANNOTATED_KEY`` = coarse ``metaphor`` and ``personification``,
  both negative; hyperbole, parallelism and literal stay unknown (a literal
  CMC sentence may still be a hyperbole or a parallelism);
- label 1: ``ANNOTATED_KEY`` = coarse ``literal`` (negative) and
  ``DISJUNCTIONS_KEY`` = ``[["coarse/metaphor", "coarse/personification"]]``:
  at least one of the two holds, which one is unknown.

Our reading of the label-1 texts of our training split
(``annotations/cmc-positives``: team annotators decided metaphor and
personification, and a personification's object and content, by
``annotations/GUIDELINES.md``; its datasheet says how): with
``annotations_dir``, a training sentence whose text has a record gets the
devices found as sentence spans and the personification components, and
declares ``metaphor``, ``personification`` and their components'
``personification_object``/``_content`` as annotated (plus ``literal``
negative when a device was found) instead of the disjunction. A record is
made on the first training line of its text and holds for every training
line with that text.

``doc.user_data`` also holds ``corpus`` = ``"cmc"``, ``line`` (1-based line
in the file) and ``cmc_label`` (0/1). Every Doc is one sentence
(``mark_single_sentence``), words from the given ``nlp``'s tokenizer
(:func:`default_pkuseg_model`: the shipped pipeline's pkuseg model).

Held-out split (:func:`make_split`), 80/10/10 train/dev/test, assigned by
line number and reproducible from ``split.json``:

1. Lines with the same (stripped) text form one group, named by its first
   line, and go to the same split: the file holds 353 texts on more than one
   line (1,042 lines), and a line-level split would put copies of test
   sentences into train.
2. A group's stratum is (label, text contains 像 or 象); its label is the
   label most of its lines carry (its first line's on a tie; one text,
   老师像什么？, has four 1s and one 0).
3. Within a stratum the groups are ordered by
   ``sha256(f"cmc:{seed}:{first line}")`` (hex digest, ascending); groups go
   to test until the stratum's test lines reach ``round(0.1 * lines)``, then
   to dev likewise, the rest to train. Split sizes in lines are therefore
   within one group's size of 10 %.
"""
from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

from spacy.language import Language
from spacy.tokens import Doc

from ..annotation import ANNOTATED_KEY, COMPONENTS_KEY, DISJUNCTIONS_KEY, LEVEL_SPAN_KEYS
from ..errors import CorpusFormatError
from .docbin import mark_single_sentence, write_docbin
from .sentence_records import METAPHOR_OR_PERSONIFICATION, char_components, components_of, read_records, whole_doc_spans

FILE_NAME = "train.tsv"
SPLITS = ("train", "dev", "test")
#: Shares of dev and test (the rest is train).
DEV_SHARE = 0.1
TEST_SHARE = 0.1
COMPARATOR_CHARS = ("像", "象")
NEGATIVE_ANNOTATED = {"coarse": ["metaphor", "personification"], "form": [], "content": [], "components": []}
POSITIVE_ANNOTATED = {"coarse": ["literal"], "form": [], "content": [], "components": []}
POSITIVE_DISJUNCTIONS = [["coarse/metaphor", "coarse/personification"]]
#: The two devices our reading of the label-1 texts decides, and its components.
JUDGED = METAPHOR_OR_PERSONIFICATION
PERSONIFICATION_COMPONENTS = components_of("personification")
#: Split -> file of that reading in ``annotations/cmc-positives``.
ANNOTATION_FILES = {"train": "train.jsonl"}
#: The shipped pipeline's word segmenter, relative to the repository root.
SHIPPED_PKUSEG = Path("pipelines") / "zh_rhetoric" / "tokenizer" / "pkuseg_model"


@dataclass(frozen=True)
class CmcSentence:
    """One line of the corpus: ``line`` 1-based, ``label`` 0/1, ``text``
    stripped of surrounding whitespace (non-empty)."""

    line: int
    label: int
    text: str


def has_comparator(text: str) -> bool:
    """Whether ``text`` contains 像 or 象 (the split's and the report's
    stratum; 象 also occurs in 现象, 印象, 大象 ...)."""
    return any(ch in text for ch in COMPARATOR_CHARS)


def parse_line(path: Path, line_no: int, raw: str) -> CmcSentence:
    """One ``label<TAB>text`` line (without its line break). Raises
    :class:`CorpusFormatError` naming ``path`` and ``line_no``."""
    parts = raw.split("\t")
    if len(parts) != 2:
        raise CorpusFormatError(path, f"expected 'label<TAB>text' (2 fields), got {len(parts)} fields", line=line_no)
    label, text = parts[0].strip(), parts[1].strip()
    if label not in ("0", "1"):
        raise CorpusFormatError(path, f"label must be 0 or 1, got {parts[0]!r}", line=line_no)
    if not text:
        raise CorpusFormatError(path, "empty text", line=line_no)
    return CmcSentence(line_no, int(label), text)


def read_cmc(path: Path, skipped: Optional[List[Dict[str, object]]] = None) -> Iterator[CmcSentence]:
    """Sentences of one CMC TSV file (UTF-8, a BOM allowed), in line order
    (a blank line is malformed; a final line break is not a line).

    Raises :class:`CorpusFormatError` (file and line) for a malformed line,
    unless ``skipped`` is a list: then each malformed line is appended to it
    as ``{"line": n, "reason": message}`` and left out.
    """
    path = Path(path)
    with path.open(encoding="utf-8-sig") as fh:
        for line_no, raw in enumerate(fh, start=1):
            try:
                sent = parse_line(path, line_no, raw.rstrip("\r\n"))
            except CorpusFormatError as err:
                if skipped is None:
                    raise
                skipped.append({"line": line_no, "reason": str(err)})
                continue
            yield sent


def _order_key(seed: int, line: int) -> str:
    return hashlib.sha256(f"cmc:{seed}:{line}".encode("utf8")).hexdigest()


def make_split(sentences: Sequence[CmcSentence], seed: int = 0) -> Dict[str, List[int]]:
    """``{"train": [...], "dev": [...], "test": [...]}``: sorted line numbers
    of each split (procedure in the module docstring; deterministic for a
    given set of sentences and ``seed``, independent of their order)."""
    groups: Dict[str, List[CmcSentence]] = defaultdict(list)
    for sent in sorted(sentences, key=lambda s: s.line):
        groups[sent.text].append(sent)
    strata: Dict[Tuple[int, bool], List[List[CmcSentence]]] = defaultdict(list)
    for members in groups.values():
        counts = Counter(s.label for s in members)
        label = max(counts, key=lambda lab: (counts[lab], lab == members[0].label))
        strata[(label, has_comparator(members[0].text))].append(members)
    split: Dict[str, List[int]] = {name: [] for name in SPLITS}
    for key in sorted(strata):
        ordered = sorted(strata[key], key=lambda g: _order_key(seed, g[0].line))
        n_lines = sum(len(g) for g in ordered)
        targets = {"test": round(TEST_SHARE * n_lines), "dev": round(DEV_SHARE * n_lines)}
        filled = {"test": 0, "dev": 0}
        for members in ordered:
            name = next((n for n in ("test", "dev") if filled[n] < targets[n]), "train")
            if name != "train":
                filled[name] += len(members)
            split[name].extend(s.line for s in members)
    return {name: sorted(lines) for name, lines in split.items()}


def sentence_to_doc(nlp: Language, sent: CmcSentence) -> Doc:
    """One single-sentence Doc with the user data of the module docstring
    (no spans, no cats)."""
    doc = mark_single_sentence(nlp.make_doc(sent.text))
    doc.user_data.update({"corpus": "cmc", "line": sent.line, "cmc_label": sent.label})
    if sent.label == 1:
        doc.user_data[ANNOTATED_KEY] = {k: list(v) for k, v in POSITIVE_ANNOTATED.items()}
        doc.user_data[DISJUNCTIONS_KEY] = [list(d) for d in POSITIVE_DISJUNCTIONS]
    else:
        doc.user_data[ANNOTATED_KEY] = {k: list(v) for k, v in NEGATIVE_ANNOTATED.items()}
    return doc


def read_positive_annotations(path: Path, sentences: Sequence[CmcSentence]) -> Dict[str, dict]:
    """Our reading of one split's label-1 texts, by text.

    path: ``annotations/cmc-positives/train.jsonl``, one record per distinct
        label-1 text of the split: ``{"split", "line", "text_sha1", "coarse",
        "components", "note"}`` (:mod:`.sentence_records`; ``coarse`` a
        subset of :data:`JUDGED`, personification components only on a
        personification), ``line`` the text's first line in the split.
    sentences: the split's sentences.
    Raises CorpusFormatError naming the file and line of a malformed record,
    a line that is not the first label-1 line of its text in the split, a
    text that differs or a text annotated twice.
    """
    first: Dict[int, CmcSentence] = {}
    seen = set()
    for sent in sorted(sentences, key=lambda s: s.line):
        if sent.label == 1 and sent.text not in seen:
            seen.add(sent.text)
            first[sent.line] = sent
    records = read_records(path, first, text_of=lambda s: s.text, name_of=lambda line: f"CMC line {line}",
                           what="the first line of a label-1 text of this split", judged=JUDGED,
                           components=PERSONIFICATION_COMPONENTS)
    return {first[line].text: rec for line, rec in records.items()}


def annotated_positive_doc(nlp: Language, sent: CmcSentence, record: dict) -> Doc:
    """One single-sentence Doc for a label-1 sentence with our reading
    (:func:`read_positive_annotations`): the devices found, the
    personification components, and what is known (module docstring)."""
    doc = mark_single_sentence(nlp.make_doc(sent.text))
    doc.user_data.update({"corpus": "cmc", "line": sent.line, "cmc_label": sent.label})
    doc.spans[LEVEL_SPAN_KEYS["coarse"]] = whole_doc_spans(doc, record["coarse"])
    doc.spans[COMPONENTS_KEY] = char_components(doc, [(c["label"], c["start"], c["end"]) for c in record["components"]])
    coarse = list(JUDGED) + (["literal"] if record["coarse"] else [])
    doc.user_data[ANNOTATED_KEY] = {"coarse": coarse, "form": [], "content": [], "components": list(PERSONIFICATION_COMPONENTS)}
    return doc


def default_pkuseg_model() -> Optional[Path]:
    """The shipped pipeline's pkuseg model
    (``<repository root>/pipelines/zh_rhetoric/tokenizer/pkuseg_model``, the
    root being the folder above the package) if it exists, else None
    (character segmentation)."""
    path = Path(__file__).resolve().parents[2] / SHIPPED_PKUSEG
    return path if path.is_dir() else None


def _file_sha256(path: Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def split_stats(sentences: Sequence[CmcSentence]) -> Dict[str, int]:
    """``sentences``, ``positives``, ``with_xiang`` (像/象) and
    ``distinct_texts`` of a list of sentences."""
    return {
        "sentences": len(sentences),
        "positives": sum(s.label for s in sentences),
        "with_xiang": sum(has_comparator(s.text) for s in sentences),
        "distinct_texts": len({s.text for s in sentences}),
    }


def convert_cmc(
    cmc_dir: Path,
    output_dir: Path,
    nlp: Language,
    *,
    seed: int = 0,
    strict: bool = False,
    segmentation: str = "",
    annotations_dir: Optional[Path] = None,
) -> Dict[str, object]:
    """Convert ``cmc_dir/train.tsv`` to ``output_dir/{train,dev,test}.spacy``
    and ``output_dir/split.json`` (the procedure, seed, the source file's
    SHA-256, the line numbers of each split and the skipped lines).

    ``segmentation`` describes ``nlp``'s tokenizer for ``split.json`` (e.g.
    ``"pkuseg:<path>"`` or ``"characters"``). Malformed lines raise
    :class:`CorpusFormatError` with ``strict``, else are skipped and listed.
    Returns ``{"splits": {split: split_stats(...)}, "skipped": [{"line",
    "reason"}], "lines": number of lines read (sentences + skipped)}``.
    ``annotations_dir``: ``annotations/cmc-positives``; a split with a file
    there (:data:`ANNOTATION_FILES`) gets our reading of its label-1 texts
    (module docstring), counted in its stats as ``annotated`` and per label.
    Raises FileNotFoundError without ``cmc_dir/train.tsv``.
    """
    path = Path(cmc_dir) / FILE_NAME
    if not path.is_file():
        raise FileNotFoundError(f"CMC file not found: {path}")
    skipped: Optional[List[Dict[str, object]]] = None if strict else []
    sentences = list(read_cmc(path, skipped))
    skipped = skipped or []
    split = make_split(sentences, seed)
    by_line = {s.line: s for s in sentences}
    output_dir = Path(output_dir)
    stats: Dict[str, Dict[str, int]] = {}
    for name in SPLITS:
        members = [by_line[n] for n in split[name]]
        records: Dict[str, dict] = {}
        if annotations_dir is not None and name in ANNOTATION_FILES:
            ann_path = Path(annotations_dir) / ANNOTATION_FILES[name]
            if ann_path.is_file():
                records = read_positive_annotations(ann_path, members)
        read = [records.get(s.text) if s.label == 1 else None for s in members]
        write_docbin((sentence_to_doc(nlp, s) if rec is None else annotated_positive_doc(nlp, s, rec)
                      for s, rec in zip(members, read)), output_dir / f"{name}.spacy")
        stats[name] = split_stats(members)
        if records:
            annotated = [rec for rec in read if rec is not None]
            stats[name].update({"annotated": len(annotated),
                                **{f"annotated_{label}": sum(label in r["coarse"] for r in annotated) for label in JUDGED}})
    record = {
        "corpus": "cmc",
        "source": FILE_NAME,
        "source_sha256": _file_sha256(path),
        "seed": seed,
        "shares": {"train": round(1 - DEV_SHARE - TEST_SHARE, 2), "dev": DEV_SHARE, "test": TEST_SHARE},
        "procedure": (
            "lines with identical stripped text form a group (same split); a group's stratum is "
            "(majority label, first line's on a tie; text contains 像 or 象); within a stratum groups are "
            "ordered by sha256('cmc:{seed}:{first line}') hex digest ascending, and fill test until "
            "round(0.1 * stratum lines) lines, then dev likewise, the rest train; malformed lines skipped"
        ),
        "segmentation": segmentation,
        "stats": stats,
        "skipped": skipped,
        "splits": split,
    }
    output_dir.mkdir(parents=True, exist_ok=True)
    (output_dir / "split.json").write_text(json.dumps(record, ensure_ascii=False, indent=1) + "\n", encoding="utf8")
    return {"splits": stats, "skipped": skipped, "lines": len(sentences) + len(skipped)}
