"""Chinese Metaphorical Relation Extraction (CMRE; Chen et al. 2023, EMNLP
Findings) -> Docs in the CERD taxonomy, with partial labels.

Format (``../shared/data/README.md``, row ``cmre/``): JSON lines, one
sentence each: ``sentences`` (one list of characters, BERT word pieces:
``[CLS]`` first, ``[SEP]`` last, ``##`` continuations, ``[UNK]``),
``clusters`` (relations: pairs of token index ranges ``[start, end]``,
inclusive, ``[CLS]`` counting as 0), ``spans_type`` (``[[start, end], type]``
with type 本体 tenor, 喻体 vehicle, 喻体动作 source action, 喻体属性 source
attribute, 喻体部件 source part) and ``label`` (``"1"`` metaphorical /
``"0"``).

CMRE follows linguistic metaphor identification, which is broader than
CERD's device (DESIGN §3.1): its metaphors include conventional verb
metaphors (冻结存款, 捍卫权利), which CERD calls literal, and what CERD
calls personification (太阳笑了: 本体 + 喻体动作). The mapping
(:func:`mapping_of`) therefore takes only what CMRE states in CERD's terms:

- ``"1"`` with at least one 本体–喻体 relation -> coarse ``metaphor``
  (positive); the 本体 of such a relation is a ``tenor``, the 喻体 a
  ``vehicle``. Annotated: coarse metaphor, components tenor and vehicle.
  Form, content, personification, hyperbole, parallelism and the comparator
  (CMRE does not mark 像) stay unknown.
- ``"1"`` with only 喻体动作 / 喻体属性 / 喻体部件 relations -> nothing
  known in CERD's terms: CMRE does not separate CERD personification, CERD
  action metaphor and conventional (literal) verb metaphor, and guessing
  which by a word list would make labels a script chose. Without our own
  annotation these sentences are left out (counted as ``relation_only``).
  With ``annotations/cmre-relation-only`` (team annotators read each one by
  ``annotations/GUIDELINES.md``; its datasheet says how) each becomes a Doc
  annotating coarse metaphor and personification and the personification
  object and content; tenor, vehicle and comparator are known (absent) only
  when the sentence is not a metaphor. Hyperbole, parallelism, form and
  content stay unknown.
- ``"0"`` -> coarse metaphor and personification negative (CMRE's metaphor
  includes both), no tenor, vehicle or comparator; hyperbole and
  parallelism stay unknown.
- A ``"0"`` with relations or a ``"1"`` without any is inconsistent and left
  out (counted, with its line).

Text: the word pieces joined (``##`` dropped); ``[UNK]`` becomes U+25A1 □
so that offsets stay one token = its characters. The Docs have one sentence
each and words from the given ``nlp``'s tokenizer; a span that does not fall
on word boundaries is widened to the words that hold it.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

from spacy.language import Language
from spacy.tokens import Doc, Span

from ..annotation import ANNOTATED_KEY, COMPONENTS_KEY, LEVEL_SPAN_KEYS
from ..errors import CorpusFormatError
from .docbin import mark_single_sentence, write_docbin
from .jsonio import iter_jsonl_objects
from .sentence_records import METAPHOR_OR_PERSONIFICATION, char_components, components_of, read_records, whole_doc_spans

#: Split name -> file name in ``../shared/data/cmre`` (no test split here).
SPLIT_FILES = {"train": "train.jsonlines", "dev": "dev.jsonlines"}
TENOR, VEHICLE = "本体", "喻体"
RELATION_TYPES = (TENOR, VEHICLE, "喻体动作", "喻体属性", "喻体部件")
UNK = "\u25a1"
METAPHOR_ANNOTATED = {"coarse": ["metaphor"], "form": [], "content": [], "components": ["tenor", "vehicle"]}
LITERAL_ANNOTATED = {"coarse": ["metaphor", "personification"], "form": [], "content": [],
                     "components": ["tenor", "vehicle", "comparator"]}
#: The two devices our relation-only annotation decides, and its components.
JUDGED = METAPHOR_OR_PERSONIFICATION
PERSONIFICATION_COMPONENTS = components_of("personification")
#: Split name -> file name of the relation-only annotation in ``annotations/cmre-relation-only``.
ANNOTATION_FILES = {"train": "train.jsonl", "dev": "dev.jsonl"}


@dataclass(frozen=True)
class CmreSentence:
    """One line: ``line`` 1-based, ``text``, ``label`` 0/1, ``relations``
    as ``((type, start, end), (type, start, end))`` in characters of
    ``text`` (end exclusive)."""

    line: int
    text: str
    label: int
    relations: Tuple[Tuple[Tuple[str, int, int], Tuple[str, int, int]], ...]


def _char_offsets(pieces: List[str]) -> Tuple[str, List[Tuple[int, int]]]:
    """Text and per-token character offsets of a word-piece list (with
    ``[CLS]``/``[SEP]``, which get empty offsets)."""
    text, offsets = "", []
    for piece in pieces:
        if piece in ("[CLS]", "[SEP]"):
            offsets.append((len(text), len(text)))
            continue
        piece = UNK if piece == "[UNK]" else piece[2:] if piece.startswith("##") and len(piece) > 2 else piece
        offsets.append((len(text), len(text) + len(piece)))
        text += piece
    return text, offsets


def _parse(path: Path, line: int, raw: object) -> CmreSentence:
    def bad(msg: str) -> CorpusFormatError:
        return CorpusFormatError(path, msg, line=line)

    sents, clusters, types = raw.get("sentences"), raw.get("clusters"), raw.get("spans_type")
    if not (isinstance(sents, list) and len(sents) == 1 and isinstance(sents[0], list)
            and all(isinstance(t, str) for t in sents[0])):
        raise bad("'sentences' must be one list of strings")
    if raw.get("label") not in ("0", "1"):
        raise bad(f"'label' must be \"0\" or \"1\", not {raw.get('label')!r}")
    if not isinstance(clusters, list) or not isinstance(types, list):
        raise bad("'clusters' and 'spans_type' must be lists")
    text, offsets = _char_offsets(sents[0])
    type_of: Dict[Tuple[int, int], str] = {}
    for item in types:
        try:
            (a, b), kind = item
        except (TypeError, ValueError):
            raise bad(f"'spans_type' item {item!r} is not [[start, end], type]") from None
        if kind not in RELATION_TYPES:
            raise bad(f"unknown span type {kind!r}")
        type_of[(a, b)] = kind

    def span(rng: object) -> Tuple[str, int, int]:
        if not (isinstance(rng, list) and len(rng) == 2 and all(isinstance(i, int) for i in rng)
                and 0 < rng[0] <= rng[1] < len(offsets)):
            raise bad(f"token range {rng!r} outside the sentence")
        if tuple(rng) not in type_of:
            raise bad(f"token range {rng!r} has no type in 'spans_type'")
        return type_of[tuple(rng)], offsets[rng[0]][0], offsets[rng[1]][1]

    relations = []
    for pair in clusters:
        if not (isinstance(pair, list) and len(pair) == 2):
            raise bad(f"a cluster must be a pair of token ranges, not {pair!r}")
        relations.append((span(pair[0]), span(pair[1])))
    return CmreSentence(line, text, int(raw["label"]), tuple(relations))


def read_cmre(path: Path) -> Iterator[CmreSentence]:
    """The sentences of one CMRE file. Raises CorpusFormatError naming the
    file and the 1-based line of a malformed record."""
    for line_no, raw in iter_jsonl_objects(path):
        yield _parse(Path(path), line_no, raw)


def mapping_of(sent: CmreSentence) -> Optional[str]:
    """``"metaphor"``, ``"literal"``, ``"relation_only"`` or
    ``"inconsistent"`` (see the module docstring)."""
    if sent.label == 0:
        return "literal" if not sent.relations else "inconsistent"
    if not sent.relations:
        return "inconsistent"
    return "metaphor" if any(VEHICLE in (a[0], b[0]) for a, b in sent.relations) else "relation_only"


def tenor_vehicle_spans(sent: CmreSentence) -> List[Tuple[str, int, int]]:
    """``(label, start, end)`` of the tenors and vehicles of the 本体–喻体
    relations, deduplicated, in order."""
    out = []
    for pair in sent.relations:
        kinds = {a[0] for a in pair}
        if kinds != {TENOR, VEHICLE}:
            continue
        for kind, start, end in pair:
            item = ("tenor" if kind == TENOR else "vehicle", start, end)
            if item not in out:
                out.append(item)
    return sorted(out, key=lambda x: (x[1], x[2], x[0]))


def _blank_doc(nlp: Language, sent: CmreSentence) -> Doc:
    """The sentence as one single-sentence Doc with its CMRE line in ``user_data``."""
    doc = mark_single_sentence(nlp.make_doc(sent.text))
    doc.user_data.update({"corpus": "cmre", "line": sent.line, "cmre_label": sent.label})
    return doc


def sentence_to_doc(nlp: Language, sent: CmreSentence, mapping: str) -> Doc:
    """One single-sentence Doc for a ``metaphor`` or ``literal`` sentence
    (module docstring): sentence span in ``doc.spans["rhetoric"]``, tenor and
    vehicle in ``doc.spans["rhetoric_components"]``, the annotated labels in
    ``doc.user_data``."""
    doc = _blank_doc(nlp, sent)
    if mapping == "metaphor":
        doc.spans[LEVEL_SPAN_KEYS["coarse"]] = [Span(doc, 0, len(doc), label="metaphor")]
        doc.spans[COMPONENTS_KEY] = char_components(doc, tenor_vehicle_spans(sent))
        doc.user_data[ANNOTATED_KEY] = {k: list(v) for k, v in METAPHOR_ANNOTATED.items()}
    else:
        doc.user_data[ANNOTATED_KEY] = {k: list(v) for k, v in LITERAL_ANNOTATED.items()}
    return doc


def read_relation_annotations(path: Path, sentences: Dict[int, CmreSentence]) -> Dict[int, dict]:
    """Our annotation of a split's relation-only sentences, by CMRE line.

    path: ``annotations/cmre-relation-only/{train,dev}.jsonl``, one record per
        sentence: ``{"line": 7, "text_sha1": "...", "coarse": [...],
        "components": [{"label", "start", "end", "text"}], "note": "..."}``
        with ``coarse`` a subset of :data:`JUDGED` (empty: neither) and
        personification components (offsets in characters of the CMRE
        sentence, end exclusive) only on a personification. CMRE states no
        license, so its sentences are not copied: ``text_sha1`` (the first 12
        hex digits of the SHA-1 of the UTF-8 sentence) ties the record to
        the CMRE text it was made on.
    sentences: the split's CMRE sentences by line.
    Raises CorpusFormatError naming the file and line of a malformed record,
    a line that is not a relation-only sentence of the split, a text that
    differs from CMRE's or a sentence annotated twice.
    """
    relation_only = {line: s for line, s in sentences.items() if mapping_of(s) == "relation_only"}
    return read_records(path, relation_only, text_of=lambda s: s.text, name_of=lambda line: f"CMRE line {line}",
                        what="a relation-only sentence of this CMRE split", judged=JUDGED,
                        components=PERSONIFICATION_COMPONENTS)


def annotated_relation_doc(nlp: Language, sent: CmreSentence, record: dict) -> Doc:
    """One single-sentence Doc for a relation-only sentence with our
    annotation (:func:`read_relation_annotations`): the devices found as
    sentence spans, the personification components, and what is known in
    ``doc.user_data["rhetoric_annotated"]`` (module docstring)."""
    doc = _blank_doc(nlp, sent)
    doc.spans[LEVEL_SPAN_KEYS["coarse"]] = whole_doc_spans(doc, record["coarse"])
    doc.spans[COMPONENTS_KEY] = char_components(doc, [(c["label"], c["start"], c["end"]) for c in record["components"]])
    # a metaphor's tenor and vehicle were not marked, so they stay unknown to the loss
    known = list(PERSONIFICATION_COMPONENTS) + ([] if "metaphor" in record["coarse"] else ["tenor", "vehicle", "comparator"])
    doc.user_data[ANNOTATED_KEY] = {"coarse": list(JUDGED), "form": [], "content": [], "components": known}
    return doc


def convert_cmre(cmre_dir: Path, output_dir: Path, nlp: Language,
                 annotations_dir: Optional[Path] = None) -> Dict[str, Dict[str, object]]:
    """``cmre_dir/{train,dev}.jsonlines`` -> ``output_dir/{train,dev}.spacy``.

    annotations_dir: ``annotations/cmre-relation-only``; its relation-only
        sentences are then written too (module docstring). A split without
        a file there keeps them left out.
    Returns per split the count of each mapping, the tenor and vehicle spans
    written, the relation-only sentences annotated and what was found in
    them, and the lines of inconsistent records. Raises FileNotFoundError
    for a missing CMRE file and CorpusFormatError for a malformed one.
    """
    out: Dict[str, Dict[str, object]] = {}
    for split, name in SPLIT_FILES.items():
        path = Path(cmre_dir) / name
        if not path.is_file():
            raise FileNotFoundError(f"CMRE file not found: {path}")
        sentences = list(read_cmre(path))
        records: Dict[int, dict] = {}
        ann_path = Path(annotations_dir) / ANNOTATION_FILES[split] if annotations_dir is not None else None
        if ann_path is not None and ann_path.is_file():
            records = read_relation_annotations(ann_path, {s.line: s for s in sentences})
        counts: Counter = Counter()
        inconsistent: List[int] = []
        docs = []
        for sent in sentences:
            mapping = mapping_of(sent)
            counts[mapping] += 1
            if mapping == "inconsistent":
                inconsistent.append(sent.line)
            if mapping in ("metaphor", "literal"):
                doc = sentence_to_doc(nlp, sent, mapping)
            elif sent.line in records:
                doc = annotated_relation_doc(nlp, sent, records[sent.line])
                counts["relation_only/annotated"] += 1
                counts.update(f"relation_only/{label}" for label in records[sent.line]["coarse"] or ["neither"])
            else:
                continue
            counts.update(f"component/{s.label_}" for s in doc.spans.get(COMPONENTS_KEY, []))
            docs.append(doc)
        counts["docs"] = write_docbin(docs, Path(output_dir) / f"{split}.spacy")
        out[split] = {**dict(sorted(counts.items())), "inconsistent_lines": inconsistent}
    return out
