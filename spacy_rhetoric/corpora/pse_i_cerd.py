"""The team-annotated PSE-I essays in the CERD taxonomy -> Docs.

Input: ``annotations/pse-i-cerd/{train,test}.jsonl`` (one record per PSE-I
``<sent>``, DESIGN §6)::

    {"essay": "328", "para": 1, "sent": 0, "text": "...",
     "coarse": [...], "form": [...], "content": [...],
     "components": [{"label": "tenor", "start": 3, "end": 5, "text": "..."}]}

with component offsets in characters of ``text``, and the PSE-I XML essays
they come from (gold LTP words and word-level parallelisms).

Each annotated ``<para>`` becomes one Doc, exactly as
:func:`spacy_rhetoric.corpora.pse_i.read_essay` makes it (gold words,
sentence starts, PSE-I parallelisms in ``doc.spans["parallelism"]``), whose
sentence labels are then replaced by the team's: non-literal coarse, form and
content labels as sentence spans in ``doc.spans["rhetoric"]``,
``["rhetoric_form"]`` and ``["rhetoric_content"]``, components in
``doc.spans["rhetoric_components"]``. The docs annotate every label of the
taxonomy (``doc.user_data["rhetoric_annotated"]``). A component whose
characters do not fall on LTP word boundaries is widened to the words that
hold it (counted in the statistics).
"""
from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Set, Tuple

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from .. import taxonomy as tx
from ..annotation import COMPONENTS_KEY, LEVEL_SPAN_KEYS
from ..errors import CorpusFormatError
from .docbin import ANNOTATED_KEY, write_docbin
from .jsonio import iter_jsonl_objects
from .pse_i import read_essay

ANNOTATED = {**{level: list(tx.LEVEL_LABELS[level]) for level in tx.LEVELS}, "components": list(tx.COMPONENT_LABELS)}
_FINE = {"form": tx.FORM, "content": tx.CONTENT}


def _check_record(path: Path, line: int, rec: object) -> dict:
    """The record if it is well formed; else CorpusFormatError (file, line)."""
    def bad(msg: str) -> CorpusFormatError:
        return CorpusFormatError(path, msg, line=line)

    if not isinstance(rec, dict):
        raise bad("a record must be a JSON object")
    for key, kind in (("essay", str), ("para", int), ("sent", int), ("text", str), ("coarse", list),
                      ("form", list), ("content", list), ("components", list)):
        if not isinstance(rec.get(key), kind):
            raise bad(f"'{key}' must be a {kind.__name__}")
    coarse = rec["coarse"]
    unknown = [c for c in coarse if c not in tx.COARSE_LABELS]
    if not coarse or unknown:
        raise bad(f"coarse labels {coarse!r}: empty or unknown {unknown!r}")
    if tx.LITERAL in coarse and len(coarse) > 1:
        raise bad("'literal' together with a device")
    for level, table in _FINE.items():
        for label in rec[level]:
            if label == tx.LITERAL:
                if tx.LITERAL not in coarse:
                    raise bad(f"{level} 'literal' on a sentence with a device")
            elif label not in table:
                raise bad(f"unknown {level} label {label!r}")
            elif table[label][0] not in coarse:
                raise bad(f"{level} label {label!r} without its coarse parent {table[label][0]!r}")
    for comp in rec["components"]:
        label, start, end = comp.get("label"), comp.get("start"), comp.get("end")
        if label not in tx.COMPONENTS:
            raise bad(f"unknown component label {label!r}")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(rec["text"])):
            raise bad(f"component {label!r} has offsets {start!r}..{end!r} outside the sentence")
        if "text" in comp and rec["text"][start:end] != comp["text"]:
            raise bad(f"component {label!r} text {comp['text']!r} differs from text[{start}:{end}]")
    return rec


def read_records(path: Path) -> Iterator[Tuple[int, dict]]:
    """``(line number, record)`` of a JSONL file, each checked. Raises
    CorpusFormatError naming the file and line of malformed input."""
    for line_no, rec in iter_jsonl_objects(path):
        yield line_no, _check_record(path, line_no, rec)


def _label_doc(doc: Doc, records: List[Tuple[int, dict]], path: Path, stats: Counter) -> None:
    sents = list(doc.sents)
    if len(sents) != len(records):
        line = records[0][0]
        raise CorpusFormatError(path, f"essay {records[0][1]['essay']} para {records[0][1]['para']}: "
                                      f"{len(records)} records for {len(sents)} sentences", line=line)
    level_spans: Dict[str, List[Span]] = defaultdict(list)
    components: List[Span] = []
    for sent, (line, rec) in zip(sents, sorted(records, key=lambda r: r[1]["sent"])):
        if sent.text != rec["text"]:
            raise CorpusFormatError(path, f"text differs from PSE-I essay {rec['essay']}: {sent.text!r}", line=line)
        for level in tx.LEVELS:
            for label in rec[level]:
                if label != tx.LITERAL:
                    level_spans[level].append(Span(doc, sent.start, sent.end, label=label))
        for comp in rec["components"]:
            start, end = sent.start_char + comp["start"], sent.start_char + comp["end"]
            span = doc.char_span(start, end, label=comp["label"])
            if span is None:
                span = doc.char_span(start, end, label=comp["label"], alignment_mode="expand")
                stats["components_widened"] += 1
            components.append(span)
            stats[f"component/{comp['label']}"] += 1
        stats["sentences"] += 1
        for level in tx.LEVELS:
            stats.update(f"{level}/{label}" for label in rec[level])
    for level in tx.LEVELS:
        doc.spans[LEVEL_SPAN_KEYS[level]] = level_spans[level]
    doc.spans[COMPONENTS_KEY] = sorted(components, key=lambda s: (s.start, s.end, s.label_))
    doc.user_data.update({"corpus": "pse-i-cerd", ANNOTATED_KEY: ANNOTATED})


def read_annotated(records_path: Path, pse_dir: Path, vocab: Vocab, stats: Counter) -> List[Doc]:
    """Paragraph Docs of every essay in ``records_path``, labelled by its
    records (see module docstring). Raises CorpusFormatError naming the JSONL
    file and line for a malformed record, a record whose text is not the
    PSE-I sentence, or a paragraph whose sentences are not all annotated."""
    by_para: Dict[Tuple[str, int], List[Tuple[int, dict]]] = defaultdict(list)
    for line, rec in read_records(records_path):
        by_para[(rec["essay"], rec["para"])].append((line, rec))
    docs: List[Doc] = []
    for essay in dict.fromkeys(essay for essay, _ in by_para):
        xml = Path(pse_dir) / "xml" / f"{essay}.xml"
        if not xml.is_file():
            line = next(recs[0][0] for (e, _), recs in by_para.items() if e == essay)
            raise CorpusFormatError(records_path, f"essay {essay}: {xml} not found", line=line)
        stats["essays"] += 1
        for doc in read_essay(xml, vocab):
            records = by_para.get((essay, int(doc.user_data["para_id"])))
            if records is None:
                raise CorpusFormatError(records_path, f"essay {essay}: paragraph {doc.user_data['para_id']} has no records")
            _label_doc(doc, records, records_path, stats)
            docs.append(doc)
    return docs


#: Without a ``dev.jsonl``, every DEV_EVERY-th essay of ``train.jsonl`` (in
#: file order, starting at DEV_OFFSET) is held out as the dev split.
DEV_EVERY, DEV_OFFSET = 9, 4


def split_essays(annotations_dir: Path) -> Dict[str, Tuple[Path, Optional[Set[str]]]]:
    """Where each split's records are: ``{split: (jsonl path, essays or None
    for all of them)}`` for ``train``, ``dev`` and ``test``.

    ``dev.jsonl`` (the PSE-I validation and optimization essays) is the dev
    split when it exists, and then all of ``train.jsonl`` trains; before it
    existed, dev was every ``DEV_EVERY``-th essay of ``train.jsonl``.
    """
    annotations_dir = Path(annotations_dir)
    train, dev = annotations_dir / "train.jsonl", annotations_dir / "dev.jsonl"
    out: Dict[str, Tuple[Path, Optional[Set[str]]]] = {"test": (annotations_dir / "test.jsonl", None)}
    if dev.is_file():
        out.update(train=(train, None), dev=(dev, None))
        return out
    essays = list(dict.fromkeys(str(rec["essay"]) for _, rec in read_records(train)))
    held = {e for i, e in enumerate(essays) if i % DEV_EVERY == DEV_OFFSET}
    out.update(train=(train, set(essays) - held), dev=(train, held))
    return out


def convert_pse_i_cerd(annotations_dir: Path, pse_dir: Path, output_dir: Path, vocab: Vocab) -> Dict[str, Dict[str, int]]:
    """``annotations_dir/{train,dev,test}.jsonl`` -> ``output_dir/{train,dev,test}.spacy``
    (splits by :func:`split_essays`). Returns the counts per split (essays,
    sentences, labels per level, components per type). Raises
    CorpusFormatError.
    """
    out: Dict[str, Dict[str, int]] = {}
    for split, (path, essays) in split_essays(annotations_dir).items():
        if not path.is_file():
            raise CorpusFormatError(path, "annotation file not found")
        stats: Counter = Counter()
        docs = read_annotated(path, pse_dir, vocab, stats)
        if essays is not None:
            docs = [d for d in docs if d.user_data["essay_id"] in essays]
        counts = _doc_counts(docs)
        if essays is None:
            counts["components_widened"] = stats["components_widened"]
        counts["docs"] = write_docbin(docs, Path(output_dir) / f"{split}.spacy")
        out[split] = dict(sorted(counts.items()))
    return out


def _doc_counts(docs: List[Doc]) -> Counter:
    """Essays, sentences, sentence labels and components of converted docs."""
    counts: Counter = Counter(essays=len({d.user_data["essay_id"] for d in docs}))
    for doc in docs:
        sents = list(doc.sents)
        counts["sentences"] += len(sents)
        with_device = {(s.start, s.end) for s in doc.spans[LEVEL_SPAN_KEYS["coarse"]]}
        counts[f"coarse/{tx.LITERAL}"] += sum((s.start, s.end) not in with_device for s in sents)
        for level in tx.LEVELS:
            counts.update(f"{level}/{s.label_}" for s in doc.spans[LEVEL_SPAN_KEYS[level]])
        counts.update(f"component/{s.label_}" for s in doc.spans[COMPONENTS_KEY])
    return counts
