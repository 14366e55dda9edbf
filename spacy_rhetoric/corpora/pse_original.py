"""The original PSE annotation (sentence level) -> parallelisms of sentences.

Format (``../shared/data/README.md``; Song et al. 2016, Bothwell et al. 2023):
one XML file per essay, the same 409 essays and file names as PSE-I,
``<doc><para id><sent id type>text</sent>``. ``type`` is

- ``inParaPaibiB/I/E``: a branch of a parallelism inside one paragraph,
- ``outParaPaibiB/I/E``: a branch of a parallelism whose branches are
  sentences in different paragraphs (the only gold for those; PSE-I dropped
  them),
- ``InSentenceBIE``: a whole parallelism inside the sentence,
- blank: none.

A chain runs ``B`` -> ``I``... -> ``E`` in document order, one chain of a kind
open at a time. The branch of a chain is the whole sentence. Three files break
that rule (``12.xml`` and ``367.xml``, noted upstream as dubious, and
``392.xml``); :func:`read_essay` repairs what it can and counts every repair
(:class:`ChainProblems`): a ``B`` while a chain is open closes it, an ``I`` or
``E`` with no open chain is dropped, a chain left open at the end is closed;
a repaired chain with fewer than two branches is dropped. The converter
leaves the upstream-dubious files out of its DocBins and says so.

Each essay becomes one Doc of its text (paragraphs joined by ``"\\n"``,
sentences concatenated) tokenised by the given ``nlp`` (characters for
``spacy.blank("zh")``): sentence starts at the ``<sent>`` units, the
cross-paragraph parallelisms in the parallelism span groups with
``kind = "cross_paragraph"`` (:func:`spacy_rhetoric.spangroups.
set_parallelisms`), each branch the whole sentence without edge whitespace.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Optional, Sequence, Tuple

from lxml import etree
from spacy.language import Language
from spacy.tokens import Doc

from ..errors import CorpusFormatError
from ..spangroups import CROSS_PARAGRAPH, set_parallelisms
from .docbin import write_docbin
from .pse_i import read_splits

#: Files the upstream repository notes as dubious (left out of the DocBins).
DUBIOUS = ("12.xml", "367.xml")
#: The chain kinds of ``type`` and the tag letters.
CHAIN_KINDS = {"inParaPaibi": "in_paragraph", "outParaPaibi": "cross_paragraph"}
IN_SENTENCE = "InSentenceBIE"

#: A sentence as ``(paragraph index, sentence index)`` among the essay's
#: non-empty paragraphs.
SentId = Tuple[int, int]


@dataclass
class ChainProblems:
    """Repairs made to malformed chains (see the module docstring)."""

    b_while_open: int = 0
    orphan: int = 0
    unclosed: int = 0
    too_short: int = 0

    def total(self) -> int:
        return self.b_while_open + self.orphan + self.unclosed + self.too_short


@dataclass
class OriginalEssay:
    """One essay: its paragraphs' sentence texts, the parallelisms of each
    chain kind as lists of :data:`SentId`, the sentences typed
    ``InSentenceBIE`` and the repairs made."""

    name: str
    paragraphs: List[List[str]]
    groups: Dict[str, List[List[SentId]]]
    in_sentence: List[SentId]
    problems: ChainProblems = field(default_factory=ChainProblems)

    @property
    def text(self) -> str:
        return "\n".join("".join(p) for p in self.paragraphs)

    def sentence_offsets(self) -> Dict[SentId, Tuple[int, int]]:
        """Character offsets of every sentence in :attr:`text`, edge whitespace left out."""
        out, pos = {}, 0
        for i, para in enumerate(self.paragraphs):
            for j, sent in enumerate(para):
                lead = len(sent) - len(sent.lstrip())
                out[(i, j)] = (pos + lead, pos + len(sent.rstrip()))
                pos += len(sent)
            pos += 1
        return out


def _chains(tags: Sequence[Tuple[SentId, str]], problems: ChainProblems) -> List[List[SentId]]:
    chains: List[List[SentId]] = []
    current: Optional[List[SentId]] = None
    for sid, tag in tags:
        if tag == "B":
            if current is not None:
                problems.b_while_open += 1
                chains.append(current)
            current = [sid]
        elif current is None:
            problems.orphan += 1
        else:
            current.append(sid)
            if tag == "E":
                chains.append(current)
                current = None
    if current is not None:
        problems.unclosed += 1
        chains.append(current)
    kept = [c for c in chains if len(c) >= 2]
    problems.too_short += len(chains) - len(kept)
    return kept


def read_essay(path: Path) -> OriginalEssay:
    """One pse-original XML file. Raises :class:`CorpusFormatError` naming
    the file and line for malformed XML, a root other than ``<doc>`` or an
    unknown ``type``."""
    path = Path(path)
    try:
        root = etree.parse(str(path)).getroot()
    except etree.XMLSyntaxError as err:
        raise CorpusFormatError(path, f"malformed XML: {err.msg}", line=err.lineno) from None
    if root.tag != "doc":
        raise CorpusFormatError(path, f"root element is <{root.tag}>, expected <doc>", line=root.sourceline)
    paragraphs: List[List[str]] = []
    tags: Dict[str, List[Tuple[SentId, str]]] = {kind: [] for kind in CHAIN_KINDS.values()}
    in_sentence: List[SentId] = []
    for para in root.iter("para"):
        sents = [s for s in para.iter("sent") if (s.text or "").strip()]
        if not sents:
            continue
        for j, sent in enumerate(sents):
            sid = (len(paragraphs), j)
            kind = (sent.get("type") or "").strip()
            if not kind:
                continue
            if kind == IN_SENTENCE:
                in_sentence.append(sid)
            elif kind[:-1] in CHAIN_KINDS and kind[-1] in "BIE":
                tags[CHAIN_KINDS[kind[:-1]]].append((sid, kind[-1]))
            else:
                raise CorpusFormatError(path, f"unknown sentence type {kind!r}", line=sent.sourceline)
        paragraphs.append([s.text for s in sents])
    problems = ChainProblems()
    groups = {kind: _chains(seq, problems) for kind, seq in tags.items()}
    return OriginalEssay(path.name, paragraphs, groups, in_sentence, problems)


def essay_doc(nlp: Language, essay: OriginalEssay) -> Doc:
    """The essay as one Doc (module docstring). Raises ValueError when a
    sentence boundary falls inside a token of ``nlp``'s tokenizer."""
    doc = nlp.make_doc(essay.text)
    offsets = essay.sentence_offsets()
    starts = {doc.char_span(s, e, alignment_mode="strict").start for s, e in offsets.values() if e > s}
    for token in doc:
        token.is_sent_start = token.i in starts
    groups = []
    for chain in essay.groups["cross_paragraph"]:
        spans = [doc.char_span(*offsets[sid], alignment_mode="strict") for sid in chain]
        if any(s is None for s in spans):
            raise ValueError(f"{essay.name}: a branch does not align with the tokens")
        groups.append([(s.start, s.end) for s in spans])
    set_parallelisms(doc, groups, kinds=[CROSS_PARAGRAPH] * len(groups))
    doc.user_data.update({"essay_id": Path(essay.name).stem, "corpus": "pse-original"})
    return doc


def split_essays(pse_original_dir: Path, split_files: Sequence[str]) -> List[OriginalEssay]:
    """The essays of one split (file names from PSE-I's ``splits.json``).
    Raises :class:`CorpusFormatError` for a file the split lists but the
    folder lacks."""
    out = []
    for name in split_files:
        path = Path(pse_original_dir) / name
        if not path.is_file():
            raise CorpusFormatError(path, "listed in splits.json but not found")
        out.append(read_essay(path))
    return out


def essay_counts(essays: Sequence[OriginalEssay]) -> Dict[str, int]:
    """Essays, sentences, parallelisms and branches per kind, in-sentence
    parallelisms and repairs of a list of essays."""
    c: Counter = Counter({k: 0 for k in ("essays", "sentences", "in_paragraph_parallelisms", "in_paragraph_branches",
                                         "cross_paragraph_parallelisms", "cross_paragraph_branches",
                                         "essays_with_cross_paragraph", "in_sentence", "chain_repairs")})
    for e in essays:
        c["essays"] += 1
        c["sentences"] += sum(len(p) for p in e.paragraphs)
        for kind, groups in e.groups.items():
            c[f"{kind}_parallelisms"] += len(groups)
            c[f"{kind}_branches"] += sum(len(g) for g in groups)
        c["essays_with_cross_paragraph"] += bool(e.groups["cross_paragraph"])
        c["in_sentence"] += len(e.in_sentence)
        c["chain_repairs"] += e.problems.total()
    return dict(sorted(c.items()))


def convert_pse_original(pse_original_dir: Path, pse_dir: Path, output_dir: Path, nlp: Language) -> Dict[str, Dict[str, int]]:
    """Write ``output_dir/{train,dev,optimization,test}.spacy`` (one Doc per
    essay, PSE-I's splits) and return the counts per split, plus
    ``"dubious"``: the upstream-dubious files left out, with their repairs."""
    stats: Dict[str, Dict[str, int]] = {}
    dubious: List[OriginalEssay] = []
    for stem, files in read_splits(Path(pse_dir)).items():
        essays = split_essays(pse_original_dir, files)
        dubious.extend(e for e in essays if e.name in DUBIOUS)
        kept = [e for e in essays if e.name not in DUBIOUS]
        write_docbin((essay_doc(nlp, e) for e in kept), Path(output_dir) / f"{stem}.spacy")
        stats[stem] = essay_counts(kept)
    stats["dubious"] = essay_counts(dubious)
    return stats
