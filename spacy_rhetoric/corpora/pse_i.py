"""PSE-I (Paibi Student Essays, in-paragraph version) XML -> Docs.

Format (``../shared/data/README.md``; Bothwell et al. 2023, §4): one XML file
per essay, ``<doc><para id><sent id cont><word id [parallelism_id_1
branch_id_1]>``. A branch is the contiguous run of words sharing
``(parallelism_id_1, branch_id_1)``; a parallelism is the set of its branches.

Each ``<para>`` becomes one Doc:

- tokens: the LTP words (gold tokenisation), no spaces;
- sentence starts: the first word of every ``<sent>``;
- ``doc.user_data``: ``essay_id`` (file stem), ``para_id``, ``corpus``;
- parallelisms: :func:`spacy_rhetoric.spangroups.set_parallelisms`;
- sentence-level gold: ``doc.spans["rhetoric"]`` holds every sentence that
  overlaps a branch, labelled ``parallelism``; the corpus annotates only that
  coarse label (``doc.user_data["rhetoric_annotated"]``).
"""
from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, Iterator, List, Tuple

from lxml import etree
from spacy.tokens import Doc, Span
from spacy.vocab import Vocab

from ..errors import CorpusFormatError
from ..spangroups import parallelisms, set_parallelisms
from .docbin import ANNOTATED_KEY, write_docbin

#: ``splits.json`` key -> output file stem (DESIGN §6).
SPLITS: Dict[str, str] = {
    "training": "train",
    "validation": "dev",
    "optimization": "optimization",
    "test": "test",
}
ANNOTATED = {"coarse": ["parallelism"], "form": [], "content": [], "components": []}


@dataclass
class PseStats:
    """Counts of one converted split (or of the whole corpus)."""

    essays: int = 0
    paragraphs: int = 0
    words: int = 0
    parallelisms: int = 0
    branches: int = 0

    def add(self, other: "PseStats") -> None:
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class _Para:
    para_id: str
    words: List[str] = field(default_factory=list)
    sent_starts: List[bool] = field(default_factory=list)
    # (parallelism id, branch id) -> word indices, in document order
    branch_words: Dict[Tuple[str, str], List[int]] = field(default_factory=lambda: defaultdict(list))
    branch_lines: Dict[Tuple[str, str], int] = field(default_factory=dict)
    # each parallelism's branches as (start, end) word offsets (parse_essay)
    groups: List[List[Tuple[int, int]]] = field(default_factory=list)


def _parse_para(path: Path, para: "etree._Element") -> _Para:
    out = _Para(para_id=para.get("id", ""))
    for sent in para.iter("sent"):
        first = True
        for word in sent.iter("word"):
            text = word.text or ""
            if not text.strip():
                raise CorpusFormatError(path, "empty <word>", line=word.sourceline)
            par, branch = word.get("parallelism_id_1"), word.get("branch_id_1")
            if (par is None) != (branch is None):
                raise CorpusFormatError(
                    path, "<word> has only one of parallelism_id_1 / branch_id_1", line=word.sourceline
                )
            if par is not None:
                key = (par, branch)
                out.branch_words[key].append(len(out.words))
                out.branch_lines.setdefault(key, word.sourceline)
            out.words.append(text)
            out.sent_starts.append(first)
            first = False
    return out


def _branch_offsets(path: Path, para: _Para) -> List[List[Tuple[int, int]]]:
    """Group contiguous branch runs by parallelism id; raise on gaps."""
    groups: Dict[str, List[Tuple[int, int]]] = defaultdict(list)
    for (par, _), idx in para.branch_words.items():
        if idx[-1] - idx[0] + 1 != len(idx):
            line = para.branch_lines[(par, _)]
            raise CorpusFormatError(path, f"branch {_} of parallelism {par} is not contiguous", line=line)
        groups[par].append((idx[0], idx[-1] + 1))
    return list(groups.values())


def _make_doc(vocab: Vocab, path: Path, para: _Para) -> Doc:
    doc = Doc(vocab, words=para.words, spaces=[False] * len(para.words), sent_starts=para.sent_starts)
    set_parallelisms(doc, para.groups)
    in_branch = {i for group in para.groups for start, end in group for i in range(start, end)}
    doc.spans["rhetoric"] = [
        Span(doc, s.start, s.end, label="parallelism")
        for s in doc.sents
        if any(i in in_branch for i in range(s.start, s.end))
    ]
    doc.user_data.update(
        {"essay_id": path.stem, "para_id": para.para_id, "corpus": "pse-i", ANNOTATED_KEY: ANNOTATED}
    )
    return doc


def parse_essay(path: Path) -> List[_Para]:
    """The paragraphs of one PSE-I XML file with their words, sentence starts
    and branches, checked. Raises :class:`CorpusFormatError` naming the file
    and line for malformed XML, empty words, half-annotated words or split
    branches; a parallelism that spans paragraphs is an error too (PSE-I is
    in-paragraph)."""
    try:
        root = etree.parse(str(path)).getroot()
    except etree.XMLSyntaxError as err:
        raise CorpusFormatError(path, f"malformed XML: {err.msg}", line=err.lineno) from None
    if root.tag != "doc":
        raise CorpusFormatError(path, f"root element is <{root.tag}>, expected <doc>", line=root.sourceline)
    paras, owner = [], {}
    for para_el in root.iter("para"):
        para = _parse_para(path, para_el)
        for par, branch in para.branch_words:
            if owner.setdefault(par, para.para_id) != para.para_id:
                line = para.branch_lines[(par, branch)]
                raise CorpusFormatError(path, f"parallelism {par} spans several paragraphs", line=line)
        para.groups = _branch_offsets(path, para)
        paras.append(para)
    return paras


def read_essay(path: Path, vocab: Vocab) -> List[Doc]:
    """The paragraph Docs of one PSE-I XML file (paragraphs without words are
    skipped). Raises :class:`CorpusFormatError` as :func:`parse_essay`."""
    return [_make_doc(vocab, path, para) for para in parse_essay(path) if para.words]


def essay_text(path: Path) -> str:
    """The text of one PSE-I XML file: each paragraph's words joined,
    paragraphs with words separated by ``\\n`` (the text of
    :func:`read_essay`'s Docs, without building them). Raises
    :class:`CorpusFormatError` as :func:`parse_essay`."""
    return "\n".join("".join(para.words) for para in parse_essay(path) if para.words)


def read_splits(pse_dir: Path) -> Dict[str, List[str]]:
    """``splits.json`` as ``{split stem: [file names]}`` (train/dev/optimization/test)."""
    path = pse_dir / "splits.json"
    try:
        raw = json.loads(path.read_text(encoding="utf8"))
    except json.JSONDecodeError as err:
        raise CorpusFormatError(path, f"invalid JSON: {err.msg}", line=err.lineno) from None
    missing = [k for k in SPLITS if k not in raw]
    if missing:
        raise CorpusFormatError(path, f"missing split(s) {missing}")
    return {stem: list(raw[key]) for key, stem in SPLITS.items()}


def essay_stats(docs: List[Doc]) -> PseStats:
    groups = [p for d in docs for p in parallelisms(d)]
    return PseStats(
        essays=1,
        paragraphs=len(docs),
        words=sum(len(d) for d in docs),
        parallelisms=len(groups),
        branches=sum(len(p) for p in groups),
    )


def iter_split(pse_dir: Path, files: List[str], vocab: Vocab) -> Iterator[Tuple[str, List[Doc]]]:
    """``(file name, paragraph docs)`` for each essay of a split."""
    for name in files:
        path = pse_dir / "xml" / name
        if not path.is_file():
            raise CorpusFormatError(pse_dir / "splits.json", f"lists {name}, which is not in {pse_dir / 'xml'}")
        yield name, read_essay(path, vocab)


def convert_pse_i(pse_dir: Path, output_dir: Path, vocab: Vocab) -> Dict[str, PseStats]:
    """Convert PSE-I to ``output_dir/{train,dev,optimization,test}.spacy``.

    Returns the counts per split stem. Raises :class:`CorpusFormatError`.
    """
    stats: Dict[str, PseStats] = {}
    for stem, files in read_splits(pse_dir).items():
        split_stats, docs = PseStats(), []
        for _, essay_docs in iter_split(pse_dir, files, vocab):
            split_stats.add(essay_stats(essay_docs))
            docs.extend(essay_docs)
        write_docbin(docs, output_dir / f"{stem}.spacy")
        stats[stem] = split_stats
    return stats
