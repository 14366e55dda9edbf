"""ConFiguRe's four CERD devices as sentence labels, for the sentence
classifier (``rhetoric_textcat``).

ConFiguRe (Zhu et al. 2022, :mod:`.configure`) marks figurative units, the
smallest runs of clauses that carry one figure, of twelve types. Four of
them are CERD devices under the same English labels
(:data:`spacy_rhetoric.evaluation.raw_path.CONFIGURE_DEVICES`: 比喻
``metaphor``, 比拟 ``personification`` with both 拟人 and 拟物, 夸张
``hyperbole``, 排比 ``parallelism``; ``docs/corpora.md``).

One Doc per passage, words from the given ``nlp``'s tokenizer, cut into
sentences after sentence-final punctuation (:data:`SENTENCE_END`, with the
closing quotation marks and brackets that follow it). The units of the four
devices go into ``doc.spans["rhetoric"]`` as they are (widened to whole
words). A sentence then carries a device exactly when a unit of it covers
the sentence by the rule the classifier and the raw-path evaluation share
(:func:`spacy_rhetoric.annotation.labels_in`: an overlap of at least half
of the shorter of the two). A sentence a unit only touches gets nothing
from it.

Annotated (``doc.user_data["rhetoric_annotated"]``): the four coarse
devices, so a sentence without a unit of a device is a negative for it.
``literal``, every form, content and component stay unknown: ConFiguRe
gives no kinds and no spans inside a unit, and a sentence without any of
the four may still hold a figure ConFiguRe types otherwise (a 借代 unit is
not a CERD device, but its sentence is not known to be literal).
``doc.user_data`` also holds ``corpus`` (``"configure"``), ``key`` and
``work``.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from ..annotation import ANNOTATED_KEY, LEVEL_SPAN_KEYS
from .configure import Passage, read_configure, read_split, split_passages
from .docbin import write_docbin

#: The four ConFiguRe types that are CERD devices (their English labels).
DEVICES = ("metaphor", "personification", "hyperbole", "parallelism")
#: Sentence-final punctuation, and what may close a sentence after it.
SENTENCE_END = "。！？!?；;…"
_SENTENCE = re.compile(rf"[^{SENTENCE_END}]*(?:[{SENTENCE_END}]+[”’」』）)\"']*|$)")


def sentence_offsets(text: str) -> List[Tuple[int, int]]:
    """Character offsets ``(start, end)`` of the sentences of ``text``: each
    ends after a run of :data:`SENTENCE_END` and the closing quotation marks
    or brackets after it; the rest of the text is the last sentence.
    Sentences of whitespace only are left out."""
    out = []
    for m in _SENTENCE.finditer(text):
        if m.end() > m.start() and text[m.start():m.end()].strip():
            out.append((m.start(), m.end()))
    return out


def passage_doc(nlp: Language, passage: Passage) -> Doc:
    """The passage as one Doc with its sentences and the units of the four
    devices (module docstring)."""
    doc = nlp.make_doc(passage.fragment)
    starts = set()
    for start, _ in sentence_offsets(passage.fragment):
        span = doc.char_span(start, start + 1, alignment_mode="expand")
        if span is not None:
            starts.add(span.start)
    for token in doc:
        token.is_sent_start = token.i == 0 or token.i in starts
    units = []
    for unit in sorted(passage.units, key=lambda u: (u.begin, u.end, u.label)):
        if unit.label in DEVICES:
            span = doc.char_span(unit.begin, unit.end, label=unit.label, alignment_mode="expand")
            if span is not None:
                units.append(span)
    for key in LEVEL_SPAN_KEYS.values():
        doc.spans[key] = []
    doc.spans[LEVEL_SPAN_KEYS["coarse"]] = units
    doc.user_data.update({"corpus": "configure", "key": passage.key, "work": passage.work,
                          ANNOTATED_KEY: {"coarse": list(DEVICES), "form": [], "content": [], "components": []}})
    return doc


def convert_configure_devices(path: Union[str, Path], split_path: Union[str, Path], output_dir: Union[str, Path],
                              nlp: Language, parts: Optional[Sequence[str]] = None) -> Dict[str, Dict[str, int]]:
    """Write ``output_dir/<part>.spacy`` for each part of the split by work
    (``train`` and ``dev``, or ``parts``). Returns ``{part: {"passages",
    "sentences", <device>: units}}``. Raises CorpusFormatError for a
    malformed file or split, ValueError for a work the split does not list."""
    passages = split_passages(read_configure(path), read_split(split_path))
    stats: Dict[str, Dict[str, int]] = {}
    for part in parts or list(passages):
        docs = [passage_doc(nlp, p) for p in passages[part]]
        write_docbin(docs, Path(output_dir) / f"{part}.spacy")
        stats[part] = {"passages": len(docs), "sentences": sum(len(list(d.sents)) for d in docs),
                       **{d: sum(s.label_ == d for doc in docs for s in doc.spans["rhetoric"]) for d in DEVICES}}
    return stats
