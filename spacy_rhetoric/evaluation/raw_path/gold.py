"""Gold of the raw-path evaluation: each corpus read as text, with its units,
labels, components and parallelisms as character offsets (:class:`GoldDoc`,
:func:`read_gold`). What each corpus gives is listed in
:mod:`spacy_rhetoric.evaluation.raw_path`.
"""
from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, FrozenSet, List, Optional, Sequence, Set, Tuple

from spacy.tokens import Doc

from ...taxonomy import COMPONENT_LABELS, LEVEL_LABELS, LEVELS, LITERAL



#: Characters that end a heading-less sentence: a unit ending in none of them
#: and alone in its paragraph is a title.
SENTENCE_END = set("。．.？?！!；;…")


#: The corpora :func:`read_gold` knows.
CORPORA = ("pse-i-cerd", "pse-i", "simile", "cmc", "pse-original", "cmre", "cmre-relation-only", "hypo-cn", "configure")


#: Corpora read from one split whatever ``--split`` says: CMRE has no test
#: split here, HYPO-cn's and ConFiguRe's are held out upstream.
FIXED_SPLITS = {"cmre": "dev", "cmre-relation-only": "dev", "hypo-cn": "valid", "configure": "dev (by work)"}


#: ConFiguRe figure types that are CERD devices (the same English labels,
#: :data:`spacy_rhetoric.taxonomy.CONFIGURE_FIGURES`): 比喻, 比拟, 夸张, 排比.
CONFIGURE_DEVICES = ("metaphor", "personification", "hyperbole", "parallelism")


#: ConFiguRe's split by work, relative to the repository root.
CONFIGURE_SPLIT = Path(__file__).resolve().parents[3] / "configs" / "configure_split.json"


#: The one label CMC annotates (metaphor or personification).
FIGURATIVE = "figurative"


Char = Tuple[int, int]


@dataclass
class GoldUnit:
    """One gold sentence unit: character offsets in its text and its labels
    per annotated level (``{literal}`` when it carries no device)."""

    start: int
    end: int
    labels: Dict[str, Set[str]]
    heading: bool = False


@dataclass
class GoldDoc:
    """One text with its gold annotation in character offsets.

    ``scored``: the labels each level annotates (a level absent is not
    scored); ``components`` None when the corpus has no component gold,
    ``component_labels`` the labels it annotates; ``words`` (gold word
    character offsets) and ``parallelisms`` (branches as gold word offsets
    ``(start, end)``) None when it has no parallelism gold; ``collapse`` maps
    predicted coarse labels onto the corpus's own (CMC).
    """

    id: str
    text: str
    units: List[GoldUnit]
    scored: Dict[str, FrozenSet[str]]
    components: Optional[List[Tuple[str, int, int]]] = None
    component_labels: FrozenSet[str] = frozenset()
    words: Optional[List[Char]] = None
    parallelisms: Optional[List[List[Char]]] = None
    collapse: Dict[str, str] = field(default_factory=dict)
    # gold-unit path: the gold words and sentence starts of each paragraph
    paragraphs: List[Tuple[int, List[str], List[bool]]] = field(default_factory=list)
    #: cross-paragraph parallelisms, branches as sentence character offsets
    #: (None: not annotated)
    cross_paragraph: Optional[List[List[Char]]] = None
    #: figurative units that are no sentence units, ``(device, start, end)``
    #: (ConFiguRe; None: none annotated), scored by :func:`score_figures`
    figures: Optional[List[Tuple[str, int, int]]] = None
    #: also report the sentence accuracy of each scored coarse label
    accuracy: bool = False


def _is_heading(text: str, alone: bool) -> bool:
    text = text.strip()
    return alone and bool(text) and text[-1] not in SENTENCE_END and not any(c in SENTENCE_END for c in text)


def _split_stem(split: str) -> str:
    """The converter's split stem (train / dev = validation / optimization / test)."""
    return {"validation": "dev", "training": "train"}.get(split, split)


def _pse_essays(pse_dir: Path, split: Optional[str], essays: Optional[Set[str]] = None):
    """``(essay id, paragraph docs)`` of a PSE-I split (or of ``essays``)."""
    import spacy

    from ...corpora.pse_i import read_essay, read_splits

    if essays is None:
        files = read_splits(pse_dir)[_split_stem(split)]
        essays = {Path(f).stem for f in files}
    vocab = spacy.blank("zh").vocab
    for essay in sorted(essays, key=lambda e: (len(e), e)):
        yield essay, read_essay(pse_dir / "xml" / f"{essay}.xml", vocab)


def _essay_layout(paras: Sequence[Doc]) -> Tuple[str, List[int]]:
    """The essay text (paragraphs joined by ``"\\n"``) and each paragraph's offset."""
    offsets, pos = [], 0
    for doc in paras:
        offsets.append(pos)
        pos += len(doc.text) + 1
    return "\n".join(d.text for d in paras), offsets


def _pse_parallelism_gold(paras: Sequence[Doc], offsets: Sequence[int]) -> Tuple[List[Char], List[List[Char]]]:
    from ...spangroups import parallelism_offsets

    words: List[Char] = []
    groups: List[List[Char]] = []
    for doc, off in zip(paras, offsets):
        base = len(words)
        words.extend((off + t.idx, off + t.idx + len(t.text)) for t in doc)
        groups.extend([(base + s, base + e) for s, e in g] for g in parallelism_offsets(doc))
    return words, groups


def _paragraph_sents(doc: Doc) -> List[Tuple[int, int]]:
    return [(s.start_char, s.end_char) for s in doc.sents]


def read_pse_i(pse_dir: Path, split: str = "test") -> List[GoldDoc]:
    """PSE-I essays of ``split`` (``test``, ``validation``, ``optimization``,
    ``dev`` = validation, ``train``): parallelisms, and sentence-level
    ``parallelism`` for a ``<sent>`` that holds a branch word."""
    out = []
    for essay, paras in _pse_essays(Path(pse_dir), split):
        text, offsets = _essay_layout(paras)
        words, groups = _pse_parallelism_gold(paras, offsets)
        in_branch = {w for g in groups for s, e in g for w in range(s, e)}
        units, widx = [], 0
        for doc, off in zip(paras, offsets):
            sents = list(doc.sents) if len(doc) else []
            for sent in sents:
                has = any(widx + i in in_branch for i in range(sent.start, sent.end))
                label = {"parallelism"} if has else {LITERAL}
                units.append(GoldUnit(off + sent.start_char, off + sent.end_char, {"coarse": label},
                                      _is_heading(sent.text, len(sents) == 1)))
            widx += len(doc)
        out.append(GoldDoc(essay, text, units, {"coarse": frozenset({"parallelism"})}, words=words,
                           parallelisms=groups, paragraphs=_paragraph_words(paras, offsets)))
    return out


def _paragraph_words(paras: Sequence[Doc], offsets: Sequence[int]) -> List[Tuple[int, List[str], List[bool]]]:
    return [(off, [t.text for t in d], [bool(t.is_sent_start) for t in d]) for d, off in zip(paras, offsets)]


def read_pse_i_cerd(annotations: Path, pse_dir: Path, essays: Optional[Set[str]] = None) -> List[GoldDoc]:
    """The team-annotated PSE-I essays of one JSONL file
    (``annotations/pse-i-cerd/test.jsonl``): labels at the three levels and
    components per ``<sent>``, plus the essay's PSE-I parallelisms.

    Raises :class:`spacy_rhetoric.errors.CorpusFormatError` naming the file
    and line when a record's text is not its ``<sent>`` in the essay.
    ``essays``: keep only these essay ids.
    """
    from ...corpora.pse_i_cerd import read_records
    from ...errors import CorpusFormatError

    annotations = Path(annotations)
    by_essay: Dict[str, List[Tuple[int, dict]]] = defaultdict(list)
    for line, rec in read_records(annotations):
        if essays is None or str(rec["essay"]) in essays:
            by_essay[str(rec["essay"])].append((line, rec))
    scored = {lv: frozenset(LEVEL_LABELS[lv]) - {LITERAL} for lv in LEVELS}
    out = []
    for essay, paras in _pse_essays(Path(pse_dir), None, set(by_essay)):
        text, offsets = _essay_layout(paras)
        words, groups = _pse_parallelism_gold(paras, offsets)
        para_sents = [_paragraph_sents(d) if len(d) else [] for d in paras]
        # records name paragraphs by their <para id>, which need not start at 0
        sents = {(int(paras[i].user_data["para_id"]), j): (offsets[i] + s, offsets[i] + e, len(ps))
                 for i, ps in enumerate(para_sents) for j, (s, e) in enumerate(ps)}
        units, components = [], []
        for line, rec in by_essay[essay]:
            key = (int(rec["para"]), int(rec["sent"]))
            if key not in sents or text[sents[key][0]:sents[key][1]] != rec["text"]:
                raise CorpusFormatError(annotations, f"essay {essay} para {key[0]} sent {key[1]}: text is not that <sent> of the essay", line=line)
            start, end, n_in_para = sents[key]
            units.append(GoldUnit(start, end, {lv: set(rec[lv]) for lv in LEVELS}, _is_heading(rec["text"], n_in_para == 1)))
            components.extend((c["label"], start + c["start"], start + c["end"]) for c in rec.get("components", []))
        units.sort(key=lambda u: u.start)
        out.append(GoldDoc(essay, text, units, scored, sorted(components, key=lambda c: (c[1], c[2], c[0])),
                           frozenset(COMPONENT_LABELS), words, groups, paragraphs=_paragraph_words(paras, offsets)))
    return out


def read_simile_gold(simile_dir: Path, split: str = "test") -> List[GoldDoc]:
    """Sentences of the simile corpus: coarse ``metaphor`` / form ``simile``
    or literal, tenor and vehicle spans (the comparator is not tagged)."""
    from ...corpora.simile import read_simile, split_path, tag_spans

    path = split_path(Path(simile_dir), split)
    out = []
    for sent in read_simile(path):
        starts, pos = [], 0
        for w in sent.words:
            starts.append(pos)
            pos += len(w)
        text = "".join(sent.words)
        yes = sent.label == "simile"
        labels = {"coarse": {"metaphor"} if yes else {LITERAL}, "form": {"simile"} if yes else {LITERAL}}
        comps = [(lab, starts[s], starts[e - 1] + len(sent.words[e - 1])) for s, e, lab in tag_spans(path, sent)]
        out.append(GoldDoc(f"{path.name}:{sent.line}", text, [GoldUnit(0, len(text), labels)],
                           {"coarse": frozenset({"metaphor"}), "form": frozenset({"simile"})}, comps,
                           frozenset({"tenor", "vehicle"}), paragraphs=[(0, list(sent.words), [True] + [False] * (len(sent.words) - 1))]))
    return out


def read_cmc_gold(cmc_path: Path, split: str = "test", seed: int = 0) -> List[GoldDoc]:
    """The CMC sentences of one split of :func:`~spacy_rhetoric.corpora.cmc.make_split`
    (the held-out split the project trains without); label ``figurative``
    (metaphor or personification) or literal. Malformed lines are skipped,
    as the converter skips them (same split)."""
    from ...corpora.cmc import make_split, read_cmc

    sentences = list(read_cmc(Path(cmc_path), skipped=[]))
    lines = set(make_split(sentences, seed=seed)[split])
    out = []
    for sent in sentences:
        if sent.line not in lines:
            continue
        labels = {"coarse": {FIGURATIVE} if sent.label else {LITERAL}}
        out.append(GoldDoc(f"{Path(cmc_path).name}:{sent.line}", sent.text, [GoldUnit(0, len(sent.text), labels)],
                           {"coarse": frozenset({FIGURATIVE})},
                           collapse={"metaphor": FIGURATIVE, "personification": FIGURATIVE}))
    return out


def read_pse_original(pse_original_dir: Path, pse_dir: Path, split: str = "test") -> List[GoldDoc]:
    """Essays of the original PSE annotation (their own text, paragraphs
    joined by ``"\n"``): sentence units and the cross-paragraph
    parallelisms; the upstream-dubious files are left out."""
    from ...corpora.pse_i import read_splits
    from ...corpora.pse_original import DUBIOUS, split_essays

    files = [f for f in read_splits(Path(pse_dir))[_split_stem(split)] if f not in DUBIOUS]
    out = []
    for essay in split_essays(Path(pse_original_dir), files):
        offsets = essay.sentence_offsets()
        units = [GoldUnit(s, e, {}) for s, e in sorted(offsets.values())]
        groups = [[offsets[sid] for sid in g] for g in essay.groups["cross_paragraph"]]
        # gold units: the whole essay in characters with the <sent> starts
        # (the corpus has no gold words; a cross-paragraph link needs the essay)
        starts = {s for s, _ in offsets.values()}
        chars = list(essay.text)
        out.append(GoldDoc(Path(essay.name).stem, essay.text, units, {}, cross_paragraph=groups,
                           paragraphs=[(0, chars, [i in starts or i == 0 for i in range(len(chars))])]))
    return out


def read_cmre_gold(cmre_dir: Path) -> List[GoldDoc]:
    """CMRE dev sentences that map onto CERD (:mod:`spacy_rhetoric.corpora.cmre`):
    metaphor (本体–喻体 relations, with their tenors and vehicles) or literal
    (label 0); relation-only sentences are not scored. CMRE has no test
    split here, and its dev split is used for nothing else (no model
    selection, no threshold), so it is held out."""
    from ...corpora.cmre import SPLIT_FILES, mapping_of, read_cmre, tenor_vehicle_spans

    path = Path(cmre_dir) / SPLIT_FILES["dev"]
    out = []
    for sent in read_cmre(path):
        mapping = mapping_of(sent)
        if mapping not in ("metaphor", "literal"):
            continue
        labels = {"coarse": {"metaphor"} if mapping == "metaphor" else {LITERAL}}
        out.append(GoldDoc(f"{path.name}:{sent.line}", sent.text, [GoldUnit(0, len(sent.text), labels)],
                           {"coarse": frozenset({"metaphor"})}, tenor_vehicle_spans(sent), frozenset({"tenor", "vehicle"})))
    return out


def read_cmre_relation_gold(cmre_dir: Path, annotation: Path) -> List[GoldDoc]:
    """CMRE dev's relation-only sentences as our annotators read them
    (``annotations/cmre-relation-only/dev.jsonl``): metaphor and
    personification, and the personification object and content. Held out
    like the rest of CMRE dev: a check of personification on text of other
    genres (news, web text). Raises CorpusFormatError for a malformed
    record (file and line)."""
    from ...corpora.cmre import JUDGED, PERSONIFICATION_COMPONENTS, SPLIT_FILES, read_cmre, read_relation_annotations

    path = Path(cmre_dir) / SPLIT_FILES["dev"]
    sentences = {s.line: s for s in read_cmre(path)}
    records = read_relation_annotations(Path(annotation), sentences)
    out = []
    for line, rec in sorted(records.items()):
        text = sentences[line].text
        labels = {"coarse": set(rec["coarse"]) or {LITERAL}}
        comps = [(c["label"], c["start"], c["end"]) for c in rec["components"]]
        out.append(GoldDoc(f"{path.name}:{line}", text, [GoldUnit(0, len(text), labels)],
                           {"coarse": frozenset(JUDGED)}, comps, frozenset(PERSONIFICATION_COMPONENTS)))
    return out


def read_hypo_cn_gold(hypo_dir: Path) -> List[GoldDoc]:
    """HYPO-cn's valid split (:mod:`spacy_rhetoric.corpora.hypo_cn`): each
    sentence alone, ``hyperbole`` (``valid.1``) or literal (``valid.0``);
    only hyperbole is scored, with its accuracy. Raises CorpusFormatError
    for a malformed file (file and line)."""
    from ...corpora.hypo_cn import read_split

    out = []
    for sent in read_split(Path(hypo_dir), "valid"):
        labels = {"coarse": {"hyperbole"} if sent.label else {LITERAL}}
        out.append(GoldDoc(f"valid.{sent.label}:{sent.line}", sent.text, [GoldUnit(0, len(sent.text), labels)],
                           {"coarse": frozenset({"hyperbole"})}, accuracy=True))
    return out


def read_configure_gold(path: Path, split_path: Path = CONFIGURE_SPLIT, part: str = "dev") -> List[GoldDoc]:
    """ConFiguRe passages of one part of the split by work (``dev``: held
    out), each passage one text; its units of the four CERD devices
    (:data:`CONFIGURE_DEVICES`) are the gold of :func:`score_figures`. The
    other eight types are not scored: a sentence the pipeline labels with a
    device where ConFiguRe has only, say, a 借代 unit counts as a false
    positive. Raises CorpusFormatError for a malformed file, ValueError for
    a work the split does not list."""
    from ...corpora.configure import read_configure, read_split, split_passages

    passages = split_passages(read_configure(path), read_split(split_path))[part]
    return [GoldDoc(p.key, p.fragment, [], {}, figures=[(u.label, u.begin, u.end) for u in sorted(p.units, key=lambda u: (u.begin, u.end, u.label))
                                                               if u.label in CONFIGURE_DEVICES])
            for p in passages]


def read_gold(corpus: str, shared: Path, annotations: Path, split: str = "test") -> List[GoldDoc]:
    """Gold of one of :data:`CORPORA` from ``shared`` (``../shared/data``) and
    ``annotations`` (``annotations/pse-i-cerd``). Splits: ``test``; ``dev``
    (PSE-I CERD: the dev split of :func:`~spacy_rhetoric.corpora.pse_i_cerd.
    split_essays`; PSE-I: validation; simile: Dev; CMC: dev); ``optimization``
    (PSE-I). CMRE and CMRE relation-only (read from ``annotations``'s
    sibling ``cmre-relation-only``): CMRE's dev split whatever ``split``
    says (it has no test); likewise HYPO-cn's valid split and ConFiguRe's
    dev part (:data:`FIXED_SPLITS`). Raises ValueError for an unknown corpus."""
    shared = Path(shared)
    if corpus == "pse-i-cerd":
        from ...corpora.pse_i_cerd import split_essays

        path, essays = split_essays(Path(annotations))[split]
        return read_pse_i_cerd(path, shared / "pse-i", essays)
    if corpus == "pse-i":
        return read_pse_i(shared / "pse-i", split)
    if corpus == "simile":
        return read_simile_gold(shared / "simile", split)
    if corpus == "cmc":
        return read_cmc_gold(shared / "cmc" / "train.tsv", split)
    if corpus == "pse-original":
        return read_pse_original(shared / "pse-original", shared / "pse-i", split)
    if corpus == "cmre":
        return read_cmre_gold(shared / "cmre")
    if corpus == "cmre-relation-only":
        return read_cmre_relation_gold(shared / "cmre", Path(annotations).parent / "cmre-relation-only" / "dev.jsonl")
    if corpus == "hypo-cn":
        return read_hypo_cn_gold(shared / "hypo-cn")
    if corpus == "configure":
        return read_configure_gold(shared / "configure" / "valid.json")
    raise ValueError(f"unknown corpus {corpus!r}; expected one of {', '.join(CORPORA)}")
