"""CERD (Liu et al. 2024, ``papers/000``) JSON -> Docs, for users who obtain
the corpus from its authors.

Record layouts (DESIGN §3.1), a JSON list per file:

- RC: ``{"sentence": str, "rhetoricList": ["比喻", ...] | null}``; null or an
  empty list means literal.
- FC / CC: ``{"sentence": str, "rhetoricList": [{"form": "明喻"}, ...] | null}``
  (``"content"`` for CC). The coarse labels follow from the fine ones.
- CE: ``{"sentence": str, "tags": ["O", "B-METAPHOR-TENOR", ...]}``, one BIO
  tag per character of the sentence, with CERD's component types
  (``taxonomy.COMPONENTS``). CERD's release stores CE as BIO tags; this
  per-character JSON is the layout this converter reads.
- RG: ``{"sentence": str, "previousSentences": [str], "generationList":
  [{"rhetoric": "比喻", "object": str}]}``.

Each record becomes one single-sentence Doc tokenised by the given ``nlp``.
Gold follows the project's conventions (``corpora/docbin.py``): ``doc.cats``
keys ``level/label`` for every label of the annotated levels, sentence spans
in ``doc.spans["rhetoric"]``, ``["rhetoric_form"]``, ``["rhetoric_content"]``,
components in ``doc.spans["rhetoric_components"]``, and for RG the context and
conditions in ``doc.user_data["generation"]``.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable, Dict, List

from spacy.language import Language
from spacy.tokens import Doc, Span

from .. import taxonomy as tx
from ..errors import CorpusFormatError, CorpusRecordError
from .docbin import ANNOTATED_KEY, mark_single_sentence, write_docbin
from .jsonio import load_json_list

TASKS = ("rc", "fc", "cc", "ce", "rg")
_BIO_TYPES = {bio: label for label, (_, _, bio) in tx.COMPONENTS.items()}


def _sentence(rec: dict) -> str:
    text = rec.get("sentence")
    if not isinstance(text, str) or not text.strip():
        raise CorpusRecordError("'sentence' must be a non-empty string")
    return text


def _rhetoric_list(rec: dict) -> list:
    if "rhetoricList" not in rec:
        raise CorpusRecordError("missing 'rhetoricList'")
    value = rec["rhetoricList"]
    if value is None:
        return []
    if not isinstance(value, list):
        raise CorpusRecordError("'rhetoricList' must be a list or null")
    return value


def _set_levels(doc: Doc, labels: Dict[str, set], levels: List[str]) -> None:
    """cats + sentence spans for the annotated ``levels``."""
    for level in levels:
        gold = labels[level] or {tx.LITERAL}
        doc.cats.update({f"{level}/{lab}": float(lab in gold) for lab in tx.LEVEL_LABELS[level]})
        key = "rhetoric" if level == "coarse" else f"rhetoric_{level}"
        doc.spans[key] = [Span(doc, 0, len(doc), label=lab) for lab in sorted(gold) if lab != tx.LITERAL]


def _coarse_record(doc: Doc, rec: dict) -> List[str]:
    try:
        coarse = {tx.from_zh("coarse", name) for name in _rhetoric_list(rec)}
    except (KeyError, TypeError) as err:
        raise CorpusRecordError(f"unknown coarse device {err}") from None
    _set_levels(doc, {"coarse": coarse}, ["coarse"])
    return ["coarse"]


def _fine_record(level: str) -> Callable[[Doc, dict], List[str]]:
    def convert(doc: Doc, rec: dict) -> List[str]:
        fine = set()
        for item in _rhetoric_list(rec):
            if not isinstance(item, dict) or level not in item:
                raise CorpusRecordError(f"items of 'rhetoricList' must be objects with key {level!r}")
            try:
                fine.add(tx.from_zh(level, item[level]))
            except KeyError:
                raise CorpusRecordError(f"unknown {level} label {item[level]!r}") from None
        coarse = {tx.parent(level, lab) for lab in fine}
        _set_levels(doc, {"coarse": coarse, level: fine}, ["coarse", level])
        return ["coarse", level]

    return convert


def _ce_record(doc: Doc, rec: dict) -> List[str]:
    text, tags = rec["sentence"], rec.get("tags")
    if not isinstance(tags, list) or len(tags) != len(text):
        raise CorpusRecordError("'tags' must be a list with one BIO tag per character of 'sentence'")
    spans, start, label = [], None, None
    for i, tag in enumerate([*tags, "O"]):
        prefix, _, kind = str(tag).partition("-")
        if kind and kind not in _BIO_TYPES:
            raise CorpusRecordError(f"unknown component type in tag {tag!r} at character {i}")
        if prefix not in ("B", "I", "O") or (prefix == "I" and not kind):
            raise CorpusRecordError(f"malformed BIO tag {tag!r} at character {i}")
        if start is not None and not (prefix == "I" and _BIO_TYPES[kind] == label):
            spans.append(doc.char_span(start, i, label=label, alignment_mode="expand"))
            start = None
        if prefix == "B" or (prefix == "I" and start is None):  # a stray I- starts a span (seqeval's rule)
            start, label = i, _BIO_TYPES[kind]
    doc.spans["rhetoric_components"] = sorted(spans, key=lambda s: (s.start, s.end))
    return ["components"]


def _rg_record(doc: Doc, rec: dict) -> List[str]:
    previous, conditions = rec.get("previousSentences", []), rec.get("generationList")
    if not isinstance(previous, list) or not all(isinstance(s, str) for s in previous):
        raise CorpusRecordError("'previousSentences' must be a list of strings")
    if not isinstance(conditions, list) or not conditions:
        raise CorpusRecordError("'generationList' must be a non-empty list")
    parsed = []
    for item in conditions:
        if not isinstance(item, dict) or not isinstance(item.get("object"), str):
            raise CorpusRecordError("items of 'generationList' need 'rhetoric' and a string 'object'")
        try:
            parsed.append({"rhetoric": tx.from_zh("coarse", item.get("rhetoric")), "object": item["object"]})
        except KeyError:
            raise CorpusRecordError(f"unknown device {item.get('rhetoric')!r} in 'generationList'") from None
    doc.user_data["generation"] = {"previous_sentences": previous, "conditions": parsed}
    return []


_CONVERTERS: Dict[str, Callable[[Doc, dict], List[str]]] = {
    "rc": _coarse_record,
    "fc": _fine_record("form"),
    "cc": _fine_record("content"),
    "ce": _ce_record,
    "rg": _rg_record,
}


def read_cerd(path: Path, task: str, nlp: Language) -> List[Doc]:
    """Docs of one CERD JSON file for ``task`` (rc, fc, cc, ce, rg).

    Raises ValueError for an unknown task and :class:`CorpusFormatError`
    naming the file and line (invalid JSON) or record index (bad record).
    """
    if task not in _CONVERTERS:
        raise ValueError(f"unknown CERD task {task!r}; expected one of {TASKS}")
    path = Path(path)
    records = load_json_list(path)
    docs = []
    for i, rec in enumerate(records):
        try:
            if not isinstance(rec, dict):
                raise CorpusRecordError("record is not an object")
            doc = mark_single_sentence(nlp.make_doc(_sentence(rec)))
            levels = _CONVERTERS[task](doc, rec)
        except CorpusRecordError as err:
            raise CorpusFormatError(path, str(err), record=i) from None
        annotated = {"coarse": [], "form": [], "content": [], "components": []}
        for level in levels:
            annotated[level] = list(tx.COMPONENT_LABELS if level == "components" else tx.LEVEL_LABELS[level])
        doc.user_data.update({"corpus": "cerd", "task": task, "record": i, ANNOTATED_KEY: annotated})
        docs.append(doc)
    return docs


def convert_cerd(paths: List[Path], task: str, output_dir: Path, nlp: Language) -> Dict[str, int]:
    """Convert each file to ``output_dir/<file stem>.spacy``; returns doc counts."""
    counts = {}
    for path in paths:
        counts[Path(path).stem] = write_docbin(read_cerd(path, task, nlp), Path(output_dir) / f"{Path(path).stem}.spacy")
    return counts
