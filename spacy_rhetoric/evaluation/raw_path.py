"""The evaluation of record: the user's path, scored by character offsets.

A user hands the pipeline raw text; `rhetoric analyze`, `rhetoric serve` and
``nlp(text)`` tokenise it with the pipeline's own tokenizer, cut it into
sentences with the ``clause_segmenter`` and label each sentence. This module
runs exactly that path (``nlp.pipe`` on the text, then
:func:`spacy_rhetoric.analysis.records.doc_to_record`, the analysis/v1 record the
user gets) and scores the record against gold annotation by **character
offsets**, so the tokenisation and the sentence units are the pipeline's own.

Gold (:class:`GoldDoc`) is read from the corpora as text:

- ``pse-i-cerd``: the team's annotation of the PSE-I essays
  (``annotations/pse-i-cerd/*.jsonl``); each essay's paragraphs are joined by
  ``"\\n"`` as ``analyze`` reads a PSE-I XML file; sentence labels at the
  three levels and components, each record one gold unit (a PSE-I ``<sent>``);
- ``pse-i``: the same essays' parallelisms (PSE-I word-level branches) and,
  at the sentence level, ``parallelism`` for a ``<sent>`` holding a branch
  (PSE-I's definition: two or more branches);
- ``simile``: one sentence per text, ``metaphor``/``simile`` or literal, tenor
  and vehicle spans;
- ``cmc``: one sentence per text, the held-out split of
  :func:`spacy_rhetoric.corpora.cmc.make_split`; gold 1 is "metaphor or
  personification", so predictions of either count as the one label
  ``figurative``;
- ``hypo-cn``: HYPO-cn's valid split (its test split is held out upstream),
  one sentence per text, hyperbole or not; besides P/R/F1, the sentence
  accuracy (:func:`score_accuracy`), the figure Kong et al. 2020 report;
- ``configure``: the passages of ConFiguRe's validation split in the dev
  part of ``configs/configure_split.json`` (split by work, never trained
  on), scored for the four CERD devices by :func:`score_figures`.

How a gold unit gets its prediction when units differ
(:func:`assign_sentences`): every predicted sentence is given to the gold unit
it overlaps by the most characters (the earlier one on a tie); a gold unit's
labels at a level are the union of its predicted sentences' non-literal
labels, or ``literal`` when it has none. A predicted sentence is thus counted
once, and a gold unit split into several predicted sentences gets all of
their devices.

Headings: a gold unit that is the only unit of its paragraph and ends in no
sentence punctuation (a one-line title) is a heading; sentence scores are
reported for all units, for body units and for headings apart.

Components: strict (same label, same start and end character) and overlap
(a predicted span is correct when it overlaps a gold span of its label; a
gold span is found when a predicted span of its label overlaps it).

Parallelisms: each predicted branch is mapped to the gold words it overlaps
by at least one character (a branch becomes the run from its first to its
last such word), then EPM/MPBM/MBAWO/MWO are computed on gold word offsets
with :func:`spacy_rhetoric.scorers.parallelism.score_groups` (Bothwell et al.
2023, §5 and Appendix B), as the gold-word figures are.

``gold_units=True`` runs the same scoring on the gold words and gold sentence
units instead of raw text (each PSE-I paragraph as its own Doc with the
``<sent>`` starts, each simile sentence on its gold words, each CMC text as
one sentence): the upper bound the earlier figures measured.
"""
from __future__ import annotations

import bisect
import json
import time
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple, Union

from spacy.language import Language
from spacy.scorer import PRFScore
from spacy.tokens import Doc

from ..taxonomy import COMPONENT_LABELS, LEVEL_LABELS, LEVELS, LITERAL
from ..scorers.classification import set_scores
from ..scorers.parallelism import score_groups
from ..spangroups import CROSS_PARAGRAPH, IN_PARAGRAPH

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
CONFIGURE_SPLIT = Path(__file__).resolve().parents[2] / "configs" / "configure_split.json"
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


# --- gold ---------------------------------------------------------------------


def _is_heading(text: str, alone: bool) -> bool:
    text = text.strip()
    return alone and bool(text) and text[-1] not in SENTENCE_END and not any(c in SENTENCE_END for c in text)


def _split_stem(split: str) -> str:
    """The converter's split stem (train / dev = validation / optimization / test)."""
    return {"validation": "dev", "training": "train"}.get(split, split)


def _pse_essays(pse_dir: Path, split: Optional[str], essays: Optional[Set[str]] = None):
    """``(essay id, paragraph docs)`` of a PSE-I split (or of ``essays``)."""
    import spacy

    from ..corpora.pse_i import read_essay, read_splits

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
    from ..spangroups import parallelism_offsets

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
    from ..corpora.pse_i_cerd import read_records
    from ..errors import CorpusFormatError

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
    from ..corpora.simile import read_simile, split_path, tag_spans

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
    from ..corpora.cmc import make_split, read_cmc

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
    from ..corpora.pse_i import read_splits
    from ..corpora.pse_original import DUBIOUS, split_essays

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
    from ..corpora.cmre import SPLIT_FILES, mapping_of, read_cmre, tenor_vehicle_spans

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
    from ..corpora.cmre import JUDGED, PERSONIFICATION_COMPONENTS, SPLIT_FILES, read_cmre, read_relation_annotations

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
    from ..corpora.hypo_cn import read_split

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
    from ..corpora.configure import read_configure, read_split, split_passages

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
        from ..corpora.pse_i_cerd import split_essays

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


# --- predictions ----------------------------------------------------------------


def predict_raw(nlp: Language, gold: Sequence[GoldDoc], batch_size: int = 8) -> List[Dict[str, Any]]:
    """analysis/v1 records of the texts as a user gets them (``nlp.pipe`` on raw text)."""
    from ..analysis.records import doc_to_record, model_info, single_torch_thread

    info = model_info(nlp)
    with single_torch_thread():
        docs = nlp.pipe((g.text for g in gold), batch_size=batch_size)
        return [doc_to_record(doc, g.id, model=info) for g, doc in zip(gold, docs)]


def _shift(record: Dict[str, Any], offset: int) -> Dict[str, Any]:
    for key in ("sentences", "components"):
        for item in record[key]:
            item["start"] += offset
            item["end"] += offset
    for group in record["parallelisms"]:
        for b in group["branches"]:
            b["start"] += offset
            b["end"] += offset
    return record


def predict_gold_units(nlp: Language, gold: Sequence[GoldDoc], batch_size: int = 8) -> List[Dict[str, Any]]:
    """Records predicted on the gold words and gold sentence units (the
    upper bound): each paragraph a Doc of its gold words with its gold
    sentence starts (a text without gold words is one sentence of the
    pipeline's own words), offsets moved back into the text."""
    from ..analysis.records import doc_to_record, model_info, single_torch_thread

    info = model_info(nlp)
    pieces: List[Tuple[int, int, Doc]] = []
    for i, g in enumerate(gold):
        if g.paragraphs:
            for off, words, starts in g.paragraphs:
                if words:
                    pieces.append((i, off, Doc(nlp.vocab, words=words, spaces=[False] * len(words), sent_starts=starts)))
        else:
            doc = nlp.make_doc(g.text)
            if len(doc):
                doc[0].is_sent_start = True
                for t in doc[1:]:
                    t.is_sent_start = False
            pieces.append((i, 0, doc))
    records = [{"sentences": [], "components": [], "parallelisms": [], "id": g.id, "text": g.text} for g in gold]
    with single_torch_thread():
        for (i, off, _), doc in zip(pieces, nlp.pipe((p[2] for p in pieces), batch_size=batch_size)):
            rec = _shift(doc_to_record(doc, gold[i].id, model=info), off)
            for key in ("sentences", "components", "parallelisms"):
                records[i][key].extend(rec[key])
    return records


# --- scoring ------------------------------------------------------------------


def _overlap(a: Char, b: Char) -> int:
    return max(0, min(a[1], b[1]) - max(a[0], b[0]))


def assign_sentences(units: Sequence[GoldUnit], sentences: Sequence[Dict[str, Any]]) -> List[List[Dict[str, Any]]]:
    """For each gold unit, the predicted sentences given to it: each
    predicted sentence goes to the unit it overlaps by the most characters
    (the earlier on a tie; none when it overlaps no unit)."""
    given: List[List[Dict[str, Any]]] = [[] for _ in units]
    starts = [u.start for u in units]
    for sent in sentences:
        span = (sent["start"], sent["end"])
        lo = max(0, bisect.bisect_right(starts, span[0]) - 1)
        best, best_overlap = None, 0
        for k in range(lo, len(units)):
            if units[k].start >= span[1]:
                break
            ov = _overlap(span, (units[k].start, units[k].end))
            if ov > best_overlap:
                best, best_overlap = k, ov
        if best is not None:
            given[best].append(sent)
    return given


def predicted_unit_labels(sentences: Sequence[Dict[str, Any]], collapse: Dict[str, str]) -> Dict[str, Set[str]]:
    """Per level, the union of the non-literal labels of ``sentences``
    (``collapse`` applied to coarse labels), or ``{literal}``."""
    out: Dict[str, Set[str]] = {}
    for level in LEVELS:
        labs = {lab for s in sentences for lab in s.get(level, {}) if lab != LITERAL}
        if level == "coarse" and collapse:
            labs = {collapse.get(lab, lab) for lab in labs}
        out[level] = labs or {LITERAL}
    return out


def _subset_scores(pairs: Dict[str, List[Tuple[Set[str], Set[str]]]], prefix: str) -> Dict[str, Any]:
    scores: Dict[str, Any] = {}
    for level, level_pairs in pairs.items():
        if level_pairs:
            scores.update(set_scores(level_pairs, f"{prefix}_{level}"))
    return scores


def score_sentences(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """Sentence-label P/R/F1 (micro, macro, per label; literal excluded from
    micro as in :func:`~spacy_rhetoric.scorers.classification.set_scores`)
    per level, for ``all`` units, ``body`` units and ``headings``; plus the
    unit counts."""
    pairs = {sub: defaultdict(list) for sub in ("all", "body", "headings")}
    for g, rec in zip(gold, records):
        for unit, sents in zip(g.units, assign_sentences(g.units, rec["sentences"])):
            pred = predicted_unit_labels(sents, g.collapse)
            for level, labels in g.scored.items():
                pair = (set(unit.labels.get(level, set())) & labels, pred[level] & labels)
                pairs["all"][level].append(pair)
                pairs["headings" if unit.heading else "body"][level].append(pair)
    result: Dict[str, Any] = {}
    for sub, level_pairs in pairs.items():
        result[sub] = _subset_scores(level_pairs, "sents")
        result[sub]["n_units"] = len(next(iter(level_pairs.values()), []))
    return result


def score_units(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
    """How well the predicted sentences reproduce the gold units: boundary
    P/R/F1 on sentence end characters (the end of each text left out) and
    the share of gold units matched exactly (same start and end)."""
    prf, exact, n = PRFScore(), 0, 0
    for g, rec in zip(gold, records):
        last = len(g.text.rstrip())
        gold_ends = {u.end for u in g.units if u.end < last}
        pred_ends = {s["end"] for s in rec["sentences"] if s["end"] < last}
        prf.score_set(pred_ends, gold_ends)
        spans = {(s["start"], s["end"]) for s in rec["sentences"]}
        exact += sum((u.start, u.end) in spans for u in g.units)
        n += len(g.units)
    if prf.tp + prf.fp + prf.fn == 0:  # single sentences: no boundary to find
        return {"boundary_p": None, "boundary_r": None, "boundary_f": None, "exact_units": exact / n if n else None,
                "n_units": n, "n_predicted": sum(len(r["sentences"]) for r in records)}
    return {"boundary_p": prf.precision, "boundary_r": prf.recall, "boundary_f": prf.fscore,
            "exact_units": exact / n if n else None, "n_units": n,
            "n_predicted": sum(len(r["sentences"]) for r in records)}


def _component_counts(gold: Sequence[Tuple[str, int, int]], pred: Sequence[Tuple[str, int, int]], labels: FrozenSet[str]):
    strict, overlap_p, overlap_r = defaultdict(PRFScore), defaultdict(PRFScore), defaultdict(PRFScore)
    gold = [c for c in gold if c[0] in labels]
    pred = [c for c in pred if c[0] in labels]
    for label in labels:
        g = {c for c in gold if c[0] == label}
        p = {c for c in pred if c[0] == label}
        strict[label].score_set(p, g)
        hit_p = sum(any(_overlap(a[1:], b[1:]) for b in g) for a in p)
        hit_r = sum(any(_overlap(a[1:], b[1:]) for a in p) for b in g)
        overlap_p[label].tp += hit_p
        overlap_p[label].fp += len(p) - hit_p
        overlap_r[label].tp += hit_r
        overlap_r[label].fn += len(g) - hit_r
    return strict, overlap_p, overlap_r


def score_components(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Component P/R/F1, ``strict`` and ``overlap``, micro and per label;
    None when no text has component gold."""
    strict: Dict[str, PRFScore] = defaultdict(PRFScore)
    ov_p: Dict[str, PRFScore] = defaultdict(PRFScore)
    ov_r: Dict[str, PRFScore] = defaultdict(PRFScore)
    seen = False
    for g, rec in zip(gold, records):
        if g.components is None:
            continue
        seen = True
        pred = [(c["label"], c["start"], c["end"]) for c in rec["components"]]
        s, p, r = _component_counts(g.components, pred, g.component_labels)
        for label in g.component_labels:
            strict[label] += s[label]
            ov_p[label] += p[label]
            ov_r[label] += r[label]
    if not seen:
        return None

    def block(per: Dict[str, PRFScore]) -> Dict[str, Any]:
        micro = PRFScore()
        for v in per.values():
            micro += v
        return {"p": micro.precision, "r": micro.recall, "f": micro.fscore,
                "per_type": {k: {"p": v.precision, "r": v.recall, "f": v.fscore, "support": v.tp + v.fn}
                             for k, v in sorted(per.items())}}

    overlap: Dict[str, Any] = {}
    for label in sorted(ov_p):
        p, r = ov_p[label].precision, ov_r[label].recall
        overlap[label] = {"p": p, "r": r, "f": 2 * p * r / (p + r) if p + r else 0.0}
    mp, mr = PRFScore(), PRFScore()
    for v in ov_p.values():
        mp += v
    for v in ov_r.values():
        mr += v
    p, r = mp.precision, mr.recall
    return {"strict": block(strict),
            "overlap": {"p": p, "r": r, "f": 2 * p * r / (p + r) if p + r else 0.0, "per_type": overlap}}


def branch_to_words(branch: Char, words: Sequence[Char], starts: Sequence[int]) -> Optional[Char]:
    """Gold word offsets ``(first, last + 1)`` of the words a character span
    overlaps by at least one character; None when it overlaps none."""
    first = max(0, bisect.bisect_right(starts, branch[0]) - 1)
    hit = []
    for k in range(first, len(words)):
        if words[k][0] >= branch[1]:
            break
        if _overlap(branch, words[k]) > 0:
            hit.append(k)
    return (hit[0], hit[-1] + 1) if hit else None


def score_parallelism(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """EPM/MPBM/MBAWO/MWO of the in-paragraph parallelisms on gold word
    offsets (module docstring); None when no text has parallelism gold."""
    pairs = []
    for g, rec in zip(gold, records):
        if g.parallelisms is None or g.words is None:
            continue
        starts = [w[0] for w in g.words]
        hyp = []
        for group in rec["parallelisms"]:
            if group.get("kind", IN_PARAGRAPH) != IN_PARAGRAPH:
                continue
            branches = [branch_to_words((b["start"], b["end"]), g.words, starts) for b in group["branches"]]
            branches = sorted({b for b in branches if b is not None})
            if len(branches) >= 2:
                hyp.append(branches)
        pairs.append((hyp, [sorted(gr) for gr in g.parallelisms]))
    return score_groups(pairs) if pairs else None


def score_cross_paragraph(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Pairwise link and exact-group P/R/F1 of the cross-paragraph
    parallelisms (:mod:`spacy_rhetoric.scorers.cross_paragraph`; predicted
    branches mapped to the gold sentence they overlap most), on all texts
    and on the texts that have such a gold parallelism, plus the predicted
    groups on the texts that have none (false groups). None when no text
    has this gold."""
    from ..scorers.cross_paragraph import score_cross_groups, to_units

    pairs, with_gold, false_groups, without = [], [], 0, 0
    for g, rec in zip(gold, records):
        if g.cross_paragraph is None:
            continue
        units = [(u.start, u.end) for u in g.units]
        hyp = [[to_units((b["start"], b["end"]), units) for b in grp["branches"]]
               for grp in rec["parallelisms"] if grp.get("kind") == CROSS_PARAGRAPH]
        pairs.append((hyp, g.cross_paragraph))
        if g.cross_paragraph:
            with_gold.append((hyp, g.cross_paragraph))
        else:
            without += 1
            false_groups += len(hyp)
    if not pairs:
        return None
    return {"all": score_cross_groups(pairs, "cross"), "with_gold": score_cross_groups(with_gold, "cross"),
            "texts_with_gold": len(with_gold), "texts_without_gold": without,
            "groups_on_texts_without_gold": false_groups}


def score_accuracy(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> Optional[Dict[str, Any]]:
    """Per scored coarse label of the texts that ask for it
    (``GoldDoc.accuracy``): the share of gold units whose predicted labels
    (:func:`assign_sentences`, :func:`predicted_unit_labels`) hold the label
    exactly when the gold does, and the unit count; None when no text asks."""
    right: Counter = Counter()
    total: Counter = Counter()
    for g, rec in zip(gold, records):
        if not g.accuracy:
            continue
        scored = g.scored.get("coarse", frozenset())
        for unit, sents in zip(g.units, assign_sentences(g.units, rec["sentences"])):
            pred = predicted_unit_labels(sents, g.collapse)["coarse"]
            for label in scored:
                total[label] += 1
                right[label] += (label in pred) == (label in unit.labels.get("coarse", ()))
    if not total:
        return None
    return {label: {"accuracy": right[label] / total[label], "n_units": total[label]} for label in sorted(total)}


def figure_match(sentence: Char, unit: Char) -> bool:
    """Whether a predicted sentence and a gold figurative unit match: they
    overlap by at least half of the shorter of the two (the rule of
    :func:`spacy_rhetoric.annotation.labels_in`). A sentence that a unit only
    touches (a closing quotation mark, the last characters of a clause)
    does not match it."""
    shorter = min(sentence[1] - sentence[0], unit[1] - unit[0])
    return shorter > 0 and 2 * _overlap(sentence, unit) >= shorter


def score_figures(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]],
                  devices: Sequence[str] = CONFIGURE_DEVICES) -> Optional[Dict[str, Any]]:
    """Per device P/R/F1 of predicted sentences against gold figurative units
    that are not sentence units (ConFiguRe), by character overlap
    (:func:`figure_match`): precision is the share of predicted sentences
    labelled with the device that match a gold unit of it, recall the share
    of gold units of the device matched by a predicted sentence labelled
    with it. ``micro`` pools the counts of ``devices``. None when no text
    has such gold. Returns ``{"per_device": {device: {"p", "r", "f",
    "predicted", "support"}}, "micro": {...}}``."""
    counts = {d: Counter() for d in devices}
    seen = False
    for g, rec in zip(gold, records):
        if g.figures is None:
            continue
        seen = True
        for device in devices:
            units = [(s, e) for lab, s, e in g.figures if lab == device]
            sents = [(s["start"], s["end"]) for s in rec["sentences"] if device in s.get("coarse", {})]
            _count_overlaps(counts[device], sents, units)
    if not seen:
        return None
    return {"per_device": {d: _overlap_prf(c) for d, c in counts.items()},
            "micro": _overlap_prf(sum(counts.values(), Counter()))}


def _count_overlaps(c: Counter, predicted: Sequence[Tuple[int, int]], gold: Sequence[Tuple[int, int]]) -> None:
    """Add to ``c`` the predicted and gold spans (character offsets) and
    how many of each :func:`figure_match` one of the other side."""
    c["predicted"] += len(predicted)
    c["support"] += len(gold)
    c["p_hits"] += sum(any(figure_match(f, u) for u in gold) for f in predicted)
    c["r_hits"] += sum(any(figure_match(f, u) for f in predicted) for u in gold)


def _overlap_prf(c: Counter) -> Dict[str, Any]:
    """``{"p", "r", "f", "predicted", "support"}`` of counts from :func:`_count_overlaps`."""
    p = c["p_hits"] / c["predicted"] if c["predicted"] else 0.0
    r = c["r_hits"] / c["support"] if c["support"] else 0.0
    return {"p": p, "r": r, "f": 2 * p * r / (p + r) if p + r else 0.0,
            "predicted": c["predicted"], "support": c["support"]}


def score_unit_devices(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]],
                       devices: Sequence[str] = CONFIGURE_DEVICES) -> Optional[Dict[str, Any]]:
    """The ``figurative_units`` component against gold sentence units, the
    reverse of :func:`score_figures`: per device P/R/F1 of the record's
    predicted figurative units of the four types that are CERD devices
    (比喻 metaphor, 比拟 personification, 夸张 hyperbole, 排比 parallelism)
    against the gold units whose coarse labels hold the device, matched by
    :func:`figure_match` (overlap of at least half of the shorter).
    Precision is the share of predicted units of the device that match a
    gold unit of it, recall the share of gold units of the device matched
    by a predicted unit of it; ``micro`` pools the counts. A device is
    scored only on the texts whose gold scores it at the coarse level, and
    ``per_device`` lists only the devices some text scores.
    ``predicted_per_type`` counts the predicted units of each of the 12
    types (:data:`spacy_rhetoric.taxonomy.CONFIGURE_FIGURES`) over all
    texts. None when no text scores any of ``devices``.

    Returns ``{"per_device": {device: {"p", "r", "f", "predicted",
    "support"}}, "micro": {...}, "predicted_per_type": {type: n}}``.
    """
    from ..taxonomy import CONFIGURE_FIGURES

    counts: Dict[str, Counter] = {}
    per_type: Counter = Counter({t: 0 for t in CONFIGURE_FIGURES})
    for g, rec in zip(gold, records):
        predicted = rec.get("figurative_units", [])
        per_type.update(u["label"] for u in predicted)
        for device in devices:
            if device not in g.scored.get("coarse", ()):
                continue
            units = [(u.start, u.end) for u in g.units if device in u.labels.get("coarse", ())]
            found = [(u["start"], u["end"]) for u in predicted if u["label"] == device]
            _count_overlaps(counts.setdefault(device, Counter()), found, units)
    if not counts:
        return None
    return {"per_device": {d: _overlap_prf(counts[d]) for d in devices if d in counts},
            "micro": _overlap_prf(sum(counts.values(), Counter())), "predicted_per_type": dict(per_type)}


def consistency(records: Sequence[Dict[str, Any]]) -> Dict[str, int]:
    """Counts that must agree: branches lying in no sentence labelled
    ``parallelism``, and sentences labelled ``parallelism`` that hold no
    branch (both are 0 under the linker rule of ``rhetoric_textcat``)."""
    outside = lonely = branches = 0
    for rec in records:
        par_sents = [(s["start"], s["end"]) for s in rec["sentences"] if "parallelism" in s.get("coarse", {})]
        spans = [(b["start"], b["end"]) for g in rec["parallelisms"] for b in g["branches"]]
        branches += len(spans)
        outside += sum(not any(_overlap(b, s) for s in par_sents) for b in spans)
        lonely += sum(not any(_overlap(b, s) for b in spans) for s in par_sents)
    return {"branches": branches, "branches_outside_parallelism_sentences": outside,
            "parallelism_sentences_without_branch": lonely}


def cross_only_units(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> Optional[Dict[str, int]]:
    """Gold units whose sentences hold a cross-paragraph branch and no
    in-paragraph one (the units the linker rule labels parallelism because
    of a cross-paragraph parallelism alone), and how many of them the gold
    labels ``parallelism``; None without coarse gold."""
    n = yes = 0
    for g, rec in zip(gold, records):
        if "parallelism" not in g.scored.get("coarse", ()):
            continue
        spans = {kind: [(b["start"], b["end"]) for p in rec["parallelisms"] if p.get("kind", IN_PARAGRAPH) == kind
                        for b in p["branches"]] for kind in (IN_PARAGRAPH, CROSS_PARAGRAPH)}
        for unit, sents in zip(g.units, assign_sentences(g.units, rec["sentences"])):
            holds = {kind: any(_overlap((s["start"], s["end"]), b) for s in sents for b in bs) for kind, bs in spans.items()}
            if holds[CROSS_PARAGRAPH] and not holds[IN_PARAGRAPH]:
                n += 1
                yes += "parallelism" in unit.labels.get("coarse", ())
    return {"units": n, "gold_parallelism": yes} if any("parallelism" in g.scored.get("coarse", ()) for g in gold) else None


def gold_counts(gold: Sequence[GoldDoc]) -> Dict[str, Dict[str, int]]:
    """Gold units per non-literal label and level."""
    counts: Dict[str, Counter] = defaultdict(Counter)
    for g in gold:
        for u in g.units:
            for level, labels in u.labels.items():
                counts[level].update(lab for lab in labels if lab != LITERAL)
    return {lv: dict(sorted(c.items())) for lv, c in counts.items()}


def score_records(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]], *,
                  figurative_units: bool = False) -> Dict[str, Any]:
    """All scores of :mod:`spacy_rhetoric.evaluation.raw_path` for records
    aligned with ``gold``; with ``figurative_units`` (the records come from a
    pipeline with that component) also ``"figurative_units"``
    (:func:`score_unit_devices`)."""
    if len(gold) != len(records):
        raise ValueError(f"{len(gold)} gold texts but {len(records)} records")
    extra = {"figurative_units": score_unit_devices(gold, records)} if figurative_units else {}
    return {
        "sentences": score_sentences(gold, records),
        "units": score_units(gold, records),
        "components": score_components(gold, records),
        "parallelism": score_parallelism(gold, records),
        "cross_paragraph": score_cross_paragraph(gold, records),
        "accuracy": score_accuracy(gold, records),
        "figures": score_figures(gold, records),
        "consistency": consistency(records),
        "cross_paragraph_only_units": cross_only_units(gold, records),
        "gold_counts": gold_counts(gold),
        "n_texts": len(gold),
        "n_chars": sum(len(g.text) for g in gold),
        **extra,
    }


def evaluate_raw(
    model: Union[str, Path, Language],
    corpora: Sequence[str],
    *,
    shared: Path,
    annotations: Path,
    split: str = "test",
    gold_units: bool = False,
    batch_size: int = 8,
    config: Optional[Dict[str, Any]] = None,
    output: Optional[Path] = None,
) -> Dict[str, Any]:
    """Run ``model`` on each corpus as raw text (and, with ``gold_units``, on
    its gold units too) and score by characters.

    Returns ``{"model", "version", "split", "corpora": {name: {"raw": scores,
    "gold_units": scores?, "seconds"}}}`` (scores of :func:`score_records`)
    and writes it as JSON to ``output``; the raw scores hold
    ``"figurative_units"`` when the pipeline has that component.
    ``config``: overrides for loading
    ``model`` (a nested dict). Raises ValueError for an unknown corpus,
    OSError for missing data.
    """
    from ..packaging import load_pipeline

    nlp = model if isinstance(model, Language) else load_pipeline(model, config)
    result: Dict[str, Any] = {"model": str(model) if not isinstance(model, Language) else f"{nlp.lang}_{nlp.meta.get('name')}",
                              "name": f"{nlp.lang}_{nlp.meta.get('name', '')}", "version": nlp.meta.get("version"),
                              "split": split, "config": config or {}, "corpora": {}}
    units = any(nlp.get_pipe_meta(name).factory == "figurative_units" for name in nlp.pipe_names)
    for corpus in corpora:
        gold = read_gold(corpus, shared, annotations, split)
        t0 = time.perf_counter()
        entry = {"raw": score_records(gold, predict_raw(nlp, gold, batch_size), figurative_units=units)}
        entry["seconds"] = round(time.perf_counter() - t0, 1)
        entry["split"] = FIXED_SPLITS.get(corpus, split)
        if gold_units:
            entry["gold_units"] = score_records(gold, predict_gold_units(nlp, gold, batch_size))
        result["corpora"][corpus] = entry
    if output is not None:
        output = Path(output)
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf8")
    return result


def _fmt(v: Optional[float]) -> str:
    return "" if v is None else f"{v:.3f}"


def headline_rows(entry: Dict[str, Any]) -> List[Tuple[str, ...]]:
    """Rows ``(score, raw P, R, F1, gold-unit F1)`` of one corpus entry."""
    raw, gold = entry["raw"], entry.get("gold_units")
    rows: List[Tuple[str, ...]] = []

    def f_of(scores: Optional[Dict[str, Any]], path: Sequence[str]) -> Optional[float]:
        node: Any = scores
        for key in path:
            if not isinstance(node, dict) or key not in node:
                return None
            node = node[key]
        return node

    for sub in ("all", "body", "headings"):
        block = raw["sentences"].get(sub, {})
        if not block.get("n_units"):
            continue
        for level in LEVELS:
            per = block.get(f"sents_{level}_per_type")
            if per is None:
                continue
            micro = (block.get(f"sents_{level}_micro_p"), block.get(f"sents_{level}_micro_r"), block.get(f"sents_{level}_micro_f"))
            gf = f_of(gold, ("sentences", sub, f"sents_{level}_micro_f"))
            rows.append((f"{sub} ({block['n_units']}) {level} micro", *map(_fmt, micro), _fmt(gf)))
            if sub == "all" or level == "coarse":
                for label, v in per.items():
                    if label == LITERAL:
                        continue
                    gv = f_of(gold, ("sentences", sub, f"sents_{level}_per_type", label, "f"))
                    rows.append((f"{sub} {level}/{label}", _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]), _fmt(gv)))
    comps = raw.get("components")
    if comps:
        for kind in ("strict", "overlap"):
            c = comps[kind]
            rows.append((f"components {kind} micro", _fmt(c["p"]), _fmt(c["r"]), _fmt(c["f"]),
                         _fmt(f_of(gold, ("components", kind, "f")))))
            for label, v in c["per_type"].items():
                rows.append((f"components {kind} {label}", _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]),
                             _fmt(f_of(gold, ("components", kind, "per_type", label, "f")))))
    par = raw.get("parallelism")
    if par:
        for metric, v in par.items():
            rows.append((f"parallelism {metric.upper()}", _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]),
                         _fmt(f_of(gold, ("parallelism", metric, "f")))))
    cross = raw.get("cross_paragraph")
    if cross:
        for sub, title in (("with_gold", f"texts with one ({cross['texts_with_gold']})"), ("all", "all texts")):
            c, gc = cross[sub], f_of(gold, ("cross_paragraph", sub)) or {}
            for what in ("link", "group"):
                rows.append((f"cross-paragraph {what}s, {title}", _fmt(c[f"cross_{what}_p"]), _fmt(c[f"cross_{what}_r"]),
                             _fmt(c[f"cross_{what}_f"]), _fmt(gc.get(f"cross_{what}_f"))))
        rows.append((f"cross-paragraph groups on the {cross['texts_without_gold']} texts without one", "", "",
                     str(cross["groups_on_texts_without_gold"]), ""))
    for label, v in (raw.get("accuracy") or {}).items():
        rows.append((f"{label} sentence accuracy ({v['n_units']})", "", "", _fmt(v["accuracy"]),
                     _fmt(f_of(gold, ("accuracy", label, "accuracy")))))
    figures = raw.get("figures")
    if figures:
        for device, v in [*figures["per_device"].items(), ("micro", figures["micro"])]:
            rows.append((f"figurative units {device} ({v['support']} gold, {v['predicted']} predicted sentences)",
                         _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]),
                         _fmt(f_of(gold, ("figures", "per_device", device, "f")) if device != "micro"
                              else f_of(gold, ("figures", "micro", "f")))))
    units = raw.get("figurative_units")
    if units:
        for device, v in [*units["per_device"].items(), ("micro", units["micro"])]:
            rows.append((f"figurative_units component {device} ({v['support']} gold sentences, {v['predicted']} predicted units)",
                         _fmt(v["p"]), _fmt(v["r"]), _fmt(v["f"]), ""))
    u = raw["units"]
    if not u["n_units"]:  # no gold sentence units (ConFiguRe)
        return rows
    if u["boundary_f"] is not None:
        rows.append(("sentence units: boundary", _fmt(u["boundary_p"]), _fmt(u["boundary_r"]), _fmt(u["boundary_f"]), ""))
    rows.append(("sentence units: gold units matched exactly", "", "", _fmt(u["exact_units"]), ""))
    return rows


def coarse_counts(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> Dict[str, PRFScore]:
    """Per coarse label, the PRFScore over the gold units of ``gold``
    (labels each text scores, :func:`assign_sentences`)."""
    counts: Dict[str, PRFScore] = defaultdict(PRFScore)
    for g, rec in zip(gold, records):
        scored = g.scored.get("coarse", frozenset())
        for unit, sents in zip(g.units, assign_sentences(g.units, rec["sentences"])):
            pred = predicted_unit_labels(sents, g.collapse)["coarse"] & scored
            for label in scored:
                counts[label].score_set({label} & pred, {label} & unit.labels.get("coarse", set()))
    return counts


def nearest_half(curve: Dict[float, float], tolerance: float) -> float:
    """The threshold nearest 0.5 whose F1 in ``curve`` ({threshold: F1}) is
    within ``tolerance`` of the best (the higher F1 on a tie of distance)."""
    top = max(curve.values())
    return min((t for t in curve if curve[t] >= top - tolerance), key=lambda t: (abs(t - 0.5), -curve[t]))


def _predict_last(nlp: Language, name: str, gold: Sequence[GoldDoc], batch_size: int):
    """``(component, docs, predictions)``: every other component run once on
    the gold texts, then ``name``'s raw predictions, which its tuner
    re-decodes per threshold. Raises ValueError without ``name``."""
    from ..analysis.records import single_torch_thread

    if name not in nlp.pipe_names:
        raise ValueError(f"the pipeline has no {name}")
    pipe = nlp.get_pipe(name)
    with single_torch_thread():
        docs = list(nlp.pipe((g.text for g in gold), batch_size=batch_size, disable=[name]))
        return pipe, docs, pipe.predict(docs)


def _tune_per_label(pipe, docs, predictions, gold, keys: Dict[str, str], support: Counter, f_of,
                    grid: Sequence[float], min_support: int, tolerance: float) -> Dict[str, Any]:
    """The grid search shared by the two tuners: for each ``cfg["thresholds"]``
    key (mapped to its gold label) with enough support, re-decode ``docs``
    from the one ``predictions`` at every grid value, score the records with
    ``f_of(records, label)`` and keep :func:`nearest_half`; the thresholds are
    left set in ``pipe.cfg``."""
    from ..analysis.records import doc_to_record

    thresholds = dict(pipe.cfg.get("thresholds") or {})
    result: Dict[str, Any] = {}
    for key, label in keys.items():
        if support[label] < min_support:
            continue
        curve = {}
        for t in grid:
            pipe.cfg["thresholds"] = {**thresholds, key: float(t)}
            pipe.set_annotations(docs, predictions)
            curve[float(t)] = f_of([doc_to_record(d, g.id) for d, g in zip(docs, gold)], label)
        best = nearest_half(curve, tolerance)
        thresholds[key] = best
        result[label] = {"threshold": best, "f": curve[best], "support": support[label], "grid": curve}
    pipe.cfg["thresholds"] = thresholds
    return result


#: ``o_bias`` values :func:`tune_linker_bias_raw` tries (log-potential units).
O_BIAS_GRID = tuple(round(0.05 * i, 2) for i in range(13))


def tune_linker_bias_raw(
    nlp: Language,
    devs: Sequence[Sequence[GoldDoc]],
    *,
    grid: Sequence[float] = O_BIAS_GRID,
    tolerance: float = 0.01,
    batch_size: int = 8,
) -> Dict[str, Any]:
    """Choose ``parallelism_linker``'s ``o_bias`` (the decision-rule bias
    against the ``O`` tag) on the dev texts that annotate parallelism, read
    as raw text, and set it in the component's ``cfg``.

    The components before the linker run once; the linker decodes once per
    grid value. The score is the mean of EPM F1 and MBAWO F1 (Bothwell et
    al. 2023 §5, weighted as in the linker's default score weights); the
    smallest bias within
    ``tolerance`` of the best wins, so the trained decoding (0) stays unless
    dev shows a gain. Run it before the classifier's thresholds: the
    classifier's parallelism rule reads the linker's branches. Returns
    ``{"o_bias", "f", "grid": {bias: score}, "texts"}``. Raises ValueError
    without a ``parallelism_linker`` or without parallelism gold in ``devs``.
    """
    from ..analysis.records import doc_to_record, single_torch_thread
    from .rhetoric import apply_component

    name = "parallelism_linker"
    if name not in nlp.pipe_names:
        raise ValueError(f"the pipeline has no {name}")
    gold = [g for dev in devs for g in dev if g.parallelisms is not None and g.words is not None]
    if not gold:
        raise ValueError("no dev text annotates parallelism")
    linker = nlp.get_pipe(name)
    with single_torch_thread():
        before = list(nlp.pipe((g.text for g in gold), batch_size=batch_size,
                               disable=nlp.pipe_names[nlp.pipe_names.index(name):]))
        curve = {}
        for bias in grid:
            linker.cfg["o_bias"] = float(bias)
            # the linker replaces its own span groups: the same docs serve every grid value
            docs = apply_component(linker, before, batch_size)
            scores = score_parallelism(gold, [doc_to_record(d, g.id) for d, g in zip(docs, gold)])
            curve[float(bias)] = (scores["epm"]["f"] + scores["mbawo"]["f"]) / 2
    top = max(curve.values())
    best = min(b for b in curve if curve[b] >= top - tolerance)
    linker.cfg["o_bias"] = best
    return {"o_bias": best, "f": curve[best], "grid": curve, "texts": len(gold)}


def tune_thresholds_raw(
    nlp: Language,
    devs: Sequence[Sequence[GoldDoc]],
    *,
    grid: Optional[Sequence[float]] = None,
    min_support: int = 10,
    tolerance: float = 0.01,
    batch_size: int = 8,
) -> Dict[str, Any]:
    """Choose one ``rhetoric_textcat`` threshold per coarse device on dev
    texts read as raw text (the user's path), and set them in the
    component's ``cfg["thresholds"]``.

    Every other component runs once; the classifier predicts once and only
    its decoding (linker rule included) is repeated per grid value. A device
    is tuned on the pooled dev units that score it, when it has at least
    ``min_support`` of them (fewer would fit noise). The threshold nearest
    0.5 whose dev F1 is within ``tolerance`` of the best wins: a dev set of
    a few dozen units cannot tell such thresholds apart, and a low threshold
    chosen on essays labels that device on every kind of text (the
    transformer's parallelism at 0.15, best on 12 dev essays by 0.006, put
    parallelism on 787 of 2,262 simile test sentences). Returns ``{label: {"threshold", "f",
    "support", "grid"}}``. Raises ValueError without a ``rhetoric_textcat``.
    """
    from .rhetoric import THRESHOLD_GRID

    grid = THRESHOLD_GRID if grid is None else grid
    gold = [g for dev in devs for g in dev]
    textcat, docs, predictions = _predict_last(nlp, "rhetoric_textcat", gold, batch_size)
    support = Counter(lab for g in gold for u in g.units
                      for lab in u.labels.get("coarse", ()) if lab in g.scored.get("coarse", ()))
    devices = [k.split("/", 1)[1] for k in textcat.labels
               if k.startswith("coarse/") and k != f"coarse/{LITERAL}" and k in textcat.cfg["trained_labels"]]

    def f_of(records: List[Dict[str, Any]], label: str) -> float:
        return coarse_counts(gold, records)[label].fscore

    return _tune_per_label(textcat, docs, predictions, gold, {f"coarse/{lab}": lab for lab in devices},
                           support, f_of, grid, min_support, tolerance)


def tune_component_thresholds_raw(
    nlp: Language,
    devs: Sequence[Sequence[GoldDoc]],
    *,
    grid: Optional[Sequence[float]] = None,
    min_support: int = 10,
    tolerance: float = 0.01,
    batch_size: int = 8,
) -> Dict[str, Any]:
    """Choose one ``rhetoric_components`` threshold per component label on
    dev texts read as raw text, by strict-span F1 (the rule of
    :func:`tune_thresholds_raw`: nearest 0.5 within ``tolerance`` of the
    best), and set them in the component's ``cfg["thresholds"]``. Run it
    after the classifier's thresholds are set: the component looks only in
    device sentences. Labels with fewer than ``min_support`` dev spans keep
    the default. Returns ``{label: {"threshold", "f", "support", "grid"}}``.
    Raises ValueError without a ``rhetoric_components``."""
    from .rhetoric import THRESHOLD_GRID

    grid = THRESHOLD_GRID if grid is None else grid
    gold = [g for dev in devs for g in dev]
    pipe, docs, predictions = _predict_last(nlp, "rhetoric_components", gold, batch_size)
    support = Counter(lab for g in gold for lab, _, _ in (g.components or ()))

    def f_of(records: List[Dict[str, Any]], label: str) -> float:
        return score_components(gold, records)["strict"]["per_type"].get(label, {}).get("f", 0.0)

    return _tune_per_label(pipe, docs, predictions, gold, {lab: lab for lab in pipe.labels},
                           support, f_of, grid, min_support, tolerance)


def device_counts(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> List[Tuple[str, int, int]]:
    """``(what, predicted, gold)`` rows: sentences per coarse device (the
    analysed sentences that carry it, the gold units that do), then groups
    and branches of each kind of parallelism (gold ``–`` where the corpus
    does not annotate that kind)."""
    from ..taxonomy import COARSE_ZH

    rows = []
    for label in COARSE_ZH:
        pred = sum(label in s.get("coarse", {}) for r in records for s in r["sentences"])
        ref = sum(label in u.labels.get("coarse", ()) for g in gold for u in g.units)
        rows.append((f"sentences: {label}", pred, ref))
    def predicted(kind: str, what: str) -> int:
        groups = [p for r in records for p in r["parallelisms"] if p.get("kind", IN_PARAGRAPH) == kind]
        return len(groups) if what == "groups" else sum(len(p["branches"]) for p in groups)

    for kind, attr in ((IN_PARAGRAPH, "parallelisms"), (CROSS_PARAGRAPH, "cross_paragraph")):
        has_gold = any(getattr(g, attr) is not None for g in gold)
        for what in ("groups", "branches"):
            ref = sum(len(x) if what == "groups" else sum(len(p) for p in x)
                      for x in (getattr(g, attr) or [] for g in gold)) if has_gold else "–"
            rows.append((f"{kind.replace('_', '-')} parallelism {what}", predicted(kind, what), ref))
    return rows


def align_records(gold: Sequence[GoldDoc], records: Iterable[Dict[str, Any]]) -> Tuple[List[GoldDoc], List[Dict[str, Any]], List[str]]:
    """The gold texts that have an analysis/v1 record (e.g. ``rhetoric
    analyze`` output, matched by id; error records do not count), their
    records in the same order, and the ids of the gold texts without one.
    Raises ValueError when no gold text has a record."""
    by_id = {r["id"]: r for r in records if "error" not in r}
    kept = [g for g in gold if g.id in by_id]
    if not kept:
        raise ValueError(f"no analysis record matches any of the {len(gold)} gold texts (ids are essay ids, e.g. {gold[0].id if gold else '?'})")
    return kept, [by_id[g.id] for g in kept], [g.id for g in gold if g.id not in by_id]
