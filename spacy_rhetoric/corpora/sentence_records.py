"""Our annotation of single sentences of a corpus whose text we may not copy
(``annotations/cmre-relation-only``, ``annotations/simile-hyperbole``,
``annotations/cmc-positives``): one JSONL record per sentence,
``{"split", "line", "text_sha1", "coarse": [...], "components": [{"label",
"start", "end", "text"}], "note"}``. ``text_sha1`` ties a record to the text
it was made on; component offsets are characters of that text, end
exclusive. The checks here are shared by the converters; each converter
names what its annotation decides.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, Iterable, Mapping, Optional, Sequence, Tuple, TypeVar

from spacy.tokens import Doc, Span

from .. import taxonomy as tx
from ..errors import CorpusFormatError
from .jsonio import iter_jsonl_objects, text_sha1

Bad = Callable[[str], CorpusFormatError]
S = TypeVar("S")

#: What the CMRE and CMC readings decide: the two devices, and a
#: personification's components.
METAPHOR_OR_PERSONIFICATION = ("metaphor", "personification")


def components_of(device: str) -> Tuple[str, ...]:
    """The component labels of ``device`` (taxonomy order)."""
    return tuple(label for label, (parent, _, _) in tx.COMPONENTS.items() if parent == device)


def check_record(bad: Bad, rec: dict, text: str, where: str, judged: Sequence[str],
                 components: Sequence[str]) -> None:
    """Raise ``bad(message)`` unless ``rec`` was made on ``text`` (its
    ``text_sha1``), its ``coarse`` is a list of ``judged`` labels (empty:
    none of them), and each component has one of the ``components`` labels,
    whose device (:data:`taxonomy.COMPONENTS`) is in ``coarse``, and offsets
    that cut its ``text`` out of ``text``. ``where`` names the sentence in
    the message (``"CMRE line 7"``)."""
    if rec.get("text_sha1") != text_sha1(text):
        raise bad(f"'text_sha1' {rec.get('text_sha1')!r} is not that of {where} ({text!r})")
    coarse, comps = rec.get("coarse"), rec.get("components")
    if not isinstance(coarse, list) or not set(coarse) <= set(judged):
        raise bad(f"'coarse' must be a list of {', '.join(judged)} (empty: none), not {coarse!r}")
    if not isinstance(comps, list):
        raise bad("'components' must be a list")
    for comp in comps:
        if not isinstance(comp, dict) or comp.get("label") not in components:
            raise bad(f"component {comp!r}: only {', '.join(components)} are annotated here")
        device = tx.COMPONENTS[comp["label"]][0]
        if device not in coarse:
            raise bad(f"component {comp['label']!r} on a sentence that is not a {device}")
        start, end = comp.get("start"), comp.get("end")
        if not (isinstance(start, int) and isinstance(end, int) and 0 <= start < end <= len(text)
                and text[start:end] == comp.get("text")):
            raise bad(f"component {comp['label']!r}: text {comp.get('text')!r} is not text[{start!r}:{end!r}]")


def read_records(path: Path, sentences: Mapping[int, S], *, text_of: Callable[[S], str], name_of: Callable[[int], str],
                 what: str, judged: Sequence[str], components: Sequence[str],
                 extra: Optional[Callable[[Bad, dict], None]] = None) -> Dict[int, dict]:
    """The records of ``path`` by their ``line``, each checked by
    :func:`check_record` (and ``extra``) against the sentence ``sentences``
    holds at that line. ``name_of(line)`` names a sentence in messages
    (``"CMRE line 7"``); ``what`` says which lines ``sentences`` holds
    (``"a relation-only sentence of this CMRE split"``). Raises
    CorpusFormatError naming the file and line of a malformed record, a
    line ``sentences`` lacks, a text that differs or a sentence annotated
    twice."""
    records: Dict[int, dict] = {}
    for line_no, rec in iter_jsonl_objects(path):
        def bad(msg: str) -> CorpusFormatError:
            return CorpusFormatError(path, msg, line=line_no)

        line = rec.get("line")
        sent = sentences.get(line) if isinstance(line, int) else None
        if sent is None:
            raise bad(f"'line' {line!r} is not {what}")
        if line in records:
            raise bad(f"{name_of(line)} is annotated twice")
        check_record(bad, rec, text_of(sent), name_of(line), judged, components)
        if extra is not None:
            extra(bad, rec)
        records[line] = rec
    return records


def char_components(doc: Doc, spans: Iterable[Tuple[str, int, int]]) -> list:
    """``(label, start, end)`` character spans as component spans, widened to
    the words that hold them; spans that become the same after widening are
    kept once."""
    comps = [doc.char_span(s, e, label=lab, alignment_mode="expand") for lab, s, e in spans]
    return list({(c.label_, c.start, c.end): c for c in comps if c is not None}.values())


def whole_doc_spans(doc: Doc, labels: Iterable[str]) -> list:
    """One span over the whole (single-sentence) doc per label."""
    return [Span(doc, 0, len(doc), label=label) for label in labels]
