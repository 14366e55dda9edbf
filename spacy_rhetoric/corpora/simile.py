"""Chinese Simile Recognition corpus (Liu et al. 2018) TSV -> Docs.

Format (``../shared/data/README.md``): per sentence a label line (``simile`` or
``literal``), then one ``word<TAB>tag`` line per LTP word, then a blank line.
Tags: ``ts tb tm te`` (tenor single/begin/middle/end), ``vs vb vm ve``
(vehicle), ``O``. Files ``*-Train.tsv``, ``*-Dev.tsv``, ``*-Test.tsv``.

Mapping onto the taxonomy (DESIGN §3.1): a ``simile`` sentence has coarse
``metaphor`` and form ``simile``; a ``literal`` sentence has neither (the
corpus says nothing about the other devices, so they stay unannotated).

Comparator derivation: the corpus does not tag 像. In a simile sentence the
``comparator`` span is the word containing 像 that is nearest before the
first vehicle (the last such word before it); if no 像-word precedes a
vehicle, the first 像-word of the sentence. Literal sentences get none.

Hyperbole (``annotations/simile-hyperbole``): team annotators read every
sentence of the training split for hyperbole by ``annotations/GUIDELINES.md``
(its datasheet says how). With ``annotations_dir`` each sentence that has a
record also declares hyperbole, its forms and contents and the components
``hyperbole_object`` and ``hyperbole_content`` as annotated, so a sentence
the annotators judged not hyperbole is a negative for them; without it, or
for a split without a file, hyperbole stays unknown to the loss.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Dict, Iterator, List, Optional, Tuple

from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from .. import taxonomy as tx
from ..errors import CorpusFormatError
from .docbin import ANNOTATED_KEY, mark_single_sentence, write_docbin
from .sentence_records import char_components, components_of, read_records, whole_doc_spans

LABELS = ("simile", "literal")
COMPARATOR_CHAR = "像"
ROLE = {"t": "tenor", "v": "vehicle"}
SPLITS = {"train": "Train", "dev": "Dev", "test": "Test"}
ANNOTATED = {
    "coarse": ["metaphor"],
    "form": ["simile"],
    "content": [],
    "components": ["comparator", "tenor", "vehicle"],
}
HYPERBOLE = "hyperbole"
HYPERBOLE_COMPONENTS = components_of(HYPERBOLE)
#: Split -> file of our hyperbole annotation in ``annotations/simile-hyperbole``.
HYPERBOLE_FILES = {"train": "train.jsonl"}
#: What a sentence with a hyperbole record annotates.
HYPERBOLE_ANNOTATED = {
    "coarse": ANNOTATED["coarse"] + [HYPERBOLE],
    "form": ANNOTATED["form"] + tx.children("form", HYPERBOLE),
    "content": ANNOTATED["content"] + tx.children("content", HYPERBOLE),
    "components": ANNOTATED["components"] + list(HYPERBOLE_COMPONENTS),
}


@dataclass
class SimileSentence:
    """One sentence of the corpus: ``words`` and ``tags`` aligned, ``label``
    ``simile``/``literal``, ``line`` the 1-based line of its label."""

    words: List[str]
    tags: List[str]
    label: str
    line: int


def _check_tag(path: Path, line_no: int, tag: str) -> None:
    if tag != "O" and not (len(tag) == 2 and tag[0] in ROLE and tag[1] in "sbme"):
        raise CorpusFormatError(path, f"unknown tag {tag!r}", line=line_no)


def read_simile(path: Path) -> Iterator[SimileSentence]:
    """Sentences of one TSV file. Raises :class:`CorpusFormatError` naming the
    file and line for an unknown label or tag, a line without a tab, or a
    sentence without words."""
    path = Path(path)
    current: Optional[SimileSentence] = None
    with path.open(encoding="utf8") as fh:
        for line_no, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            if not line.strip():
                if current is not None:
                    if not current.words:
                        raise CorpusFormatError(path, "sentence without words", line=current.line)
                    yield current
                    current = None
                continue
            if current is None:
                if line.strip() not in LABELS:
                    raise CorpusFormatError(path, f"expected a label {LABELS}, got {line!r}", line=line_no)
                current = SimileSentence([], [], line.strip(), line_no)
                continue
            parts = line.split("\t")
            if len(parts) != 2 or not parts[0]:
                raise CorpusFormatError(path, f"expected 'word<TAB>tag', got {line!r}", line=line_no)
            _check_tag(path, line_no, parts[1])
            current.words.append(parts[0])
            current.tags.append(parts[1])
    if current is not None:
        if not current.words:
            raise CorpusFormatError(path, "sentence without words", line=current.line)
        yield current


def tag_spans(path: Path, sent: SimileSentence) -> List[Tuple[int, int, str]]:
    """``(start, end, label)`` of tenor/vehicle spans decoded from the
    single/begin/middle/end tags; raises on an ill-formed sequence."""
    spans, open_at = [], None
    for i, tag in enumerate(sent.tags):
        role, pos = (tag[0], tag[1]) if tag != "O" else (None, None)
        if open_at is not None and (pos not in ("m", "e") or role != open_at[1]):
            raise CorpusFormatError(path, f"span opened at word {open_at[0]} is not closed", line=sent.line)
        if pos == "s":
            spans.append((i, i + 1, ROLE[role]))
        elif pos == "b":
            open_at = (i, role)
        elif pos == "e":
            spans.append((open_at[0], i + 1, ROLE[role]))
            open_at = None
        elif pos == "m" and open_at is None:
            raise CorpusFormatError(path, f"tag {tag!r} at word {i} outside a span", line=sent.line)
    if open_at is not None:
        raise CorpusFormatError(path, f"span opened at word {open_at[0]} is not closed", line=sent.line)
    return spans


def comparator_index(words: List[str], spans: List[Tuple[int, int, str]]) -> Optional[int]:
    """Index of the comparator word (see the module docstring), or None."""
    candidates = [i for i, w in enumerate(words) if COMPARATOR_CHAR in w]
    if not candidates:
        return None
    vehicle_starts = [s for s, _, lab in spans if lab == "vehicle"]
    if vehicle_starts:
        before = [i for i in candidates if i < min(vehicle_starts)]
        if before:
            return before[-1]
    return candidates[0]


def sentence_text(sent: SimileSentence) -> str:
    """The sentence as the converter's Doc spells it: its words joined."""
    return "".join(sent.words)


def _check_level(bad: Callable[[str], CorpusFormatError], rec: dict, level: str, is_hyperbole: bool) -> None:
    """Raise ``bad(...)`` unless the record's ``level`` labels are hyperbole's,
    present exactly when the sentence is a hyperbole."""
    labels = rec.get(level)
    allowed = tx.children(level, HYPERBOLE)
    if not isinstance(labels, list) or not set(labels) <= set(allowed) or bool(labels) != is_hyperbole:
        raise bad(f"{level!r} must list one or more of {', '.join(allowed)} on a hyperbole and be empty otherwise, not {labels!r}")


def read_hyperbole_annotations(path: Path, sentences: Dict[int, SimileSentence]) -> Dict[int, dict]:
    """Our hyperbole annotation of one split, by the line of each sentence's
    label in the corpus file.

    path: ``annotations/simile-hyperbole/train.jsonl``, one record per
        sentence: ``{"split", "line", "text_sha1", "coarse": ["hyperbole"] or
        [], "form": [...], "content": [...], "components": [{"label",
        "start", "end", "text"}], "note"}``; forms and contents are
        hyperbole's, components ``hyperbole_object``/``hyperbole_content``
        with character offsets into :func:`sentence_text` (end exclusive).
        The corpus states no license, so its sentences are not copied:
        ``text_sha1`` ties the record to the text it was made on.
    sentences: the split's sentences by label line.
    Raises CorpusFormatError naming the file and line of a malformed record,
    a line that is no sentence of the split, a text that differs or a
    sentence annotated twice.
    """
    def forms_and_contents(bad: Callable[[str], CorpusFormatError], rec: dict) -> None:
        for level in ("form", "content"):
            _check_level(bad, rec, level, bool(rec["coarse"]))

    return read_records(path, sentences, text_of=sentence_text, name_of=lambda line: f"the sentence at line {line}",
                        what="the label line of a sentence of this split", judged=(HYPERBOLE,),
                        components=HYPERBOLE_COMPONENTS, extra=forms_and_contents)


def _add_hyperbole(doc: Doc, record: dict, components: List[Span]) -> None:
    """The record's hyperbole as sentence spans and components (widened to
    the words that hold a span that cuts a word)."""
    for level, key in (("coarse", "rhetoric"), ("form", "rhetoric_form"), ("content", "rhetoric_content")):
        doc.spans[key] = list(doc.spans[key]) + whole_doc_spans(doc, record[level])
    components.extend(char_components(doc, [(c["label"], c["start"], c["end"]) for c in record["components"]]))
    doc.cats["coarse/hyperbole"] = float(bool(record["coarse"]))


def sentence_to_doc(vocab: Vocab, path: Path, sent: SimileSentence, hyperbole: Optional[dict] = None) -> Doc:
    """One Doc (one sentence) with cats, sentence-level and component gold;
    ``hyperbole``: the sentence's record of :func:`read_hyperbole_annotations`."""
    doc = mark_single_sentence(Doc(vocab, words=sent.words, spaces=[False] * len(sent.words)))
    is_simile = sent.label == "simile"
    doc.cats = {"coarse/metaphor": float(is_simile), "form/simile": float(is_simile)}
    whole = [Span(doc, 0, len(doc), label="metaphor")] if is_simile else []
    doc.spans["rhetoric"] = whole
    doc.spans["rhetoric_form"] = [Span(doc, 0, len(doc), label="simile")] if is_simile else []
    doc.spans["rhetoric_content"] = []
    spans = tag_spans(path, sent)
    components = [Span(doc, s, e, label=lab) for s, e, lab in spans]
    if is_simile:
        idx = comparator_index(sent.words, spans)
        if idx is not None:
            components.append(Span(doc, idx, idx + 1, label="comparator"))
    if hyperbole is not None:
        _add_hyperbole(doc, hyperbole, components)
    doc.spans["rhetoric_components"] = sorted(components, key=lambda s: (s.start, s.end))
    annotated = HYPERBOLE_ANNOTATED if hyperbole is not None else ANNOTATED
    doc.user_data.update({"corpus": "simile", "line": sent.line, ANNOTATED_KEY: annotated})
    return doc


def split_path(simile_dir: Path, stem: str) -> Path:
    """The TSV file of split ``stem`` (train/dev/test)."""
    matches = sorted(Path(simile_dir).glob(f"*-{SPLITS[stem]}.tsv"))
    if len(matches) != 1:
        raise FileNotFoundError(f"expected one *-{SPLITS[stem]}.tsv in {simile_dir}, found {len(matches)}")
    return matches[0]


def convert_simile(simile_dir: Path, output_dir: Path, vocab: Vocab,
                   annotations_dir: Optional[Path] = None) -> Dict[str, Dict[str, int]]:
    """Convert the three splits to ``output_dir/{train,dev,test}.spacy``.

    annotations_dir: ``annotations/simile-hyperbole``; a split with a file
        there (:data:`HYPERBOLE_FILES`) gets its hyperbole (module docstring).
    Returns ``{split: {"sentences": n, "similes": n, "tenors": n,
    "vehicles": n, "comparators": n, "hyperbole_annotated": n,
    "hyperboles": n}}``. Raises CorpusFormatError for a malformed corpus or
    annotation file.
    """
    stats: Dict[str, Dict[str, int]] = {}
    for stem in SPLITS:
        path = split_path(simile_dir, stem)
        sentences = list(read_simile(path))
        records: Dict[int, dict] = {}
        if annotations_dir is not None and stem in HYPERBOLE_FILES:
            ann_path = Path(annotations_dir) / HYPERBOLE_FILES[stem]
            if ann_path.is_file():
                records = read_hyperbole_annotations(ann_path, {s.line: s for s in sentences})
        docs = [sentence_to_doc(vocab, path, s, records.get(s.line)) for s in sentences]
        write_docbin(docs, Path(output_dir) / f"{stem}.spacy")
        labels = [s.label_ for d in docs for s in d.spans["rhetoric_components"]]
        stats[stem] = {
            "sentences": len(docs),
            "similes": sum(int(d.cats["coarse/metaphor"]) for d in docs),
            **{f"{lab}s": labels.count(lab) for lab in ("tenor", "vehicle", "comparator")},
            "hyperbole_annotated": len(records),
            "hyperboles": sum(bool(r["coarse"]) for r in records.values()),
        }
    return stats
