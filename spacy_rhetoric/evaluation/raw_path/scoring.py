"""Scoring of the raw-path evaluation: the pipeline's analysis records of the
gold texts (:func:`predict_raw`, and on gold units :func:`predict_gold_units`)
scored against the gold by character offsets: sentences, units, components,
parallelisms, cross-paragraph parallelisms, figures (:func:`score_records`).
The rules (sentence assignment, headings, overlap) are those of
:mod:`spacy_rhetoric.evaluation.raw_path`.
"""
from __future__ import annotations

import bisect
from collections import Counter, defaultdict
from typing import Any, Dict, FrozenSet, Iterable, List, Optional, Sequence, Set, Tuple

from spacy.language import Language
from spacy.scorer import PRFScore
from spacy.tokens import Doc

from ...scorers.classification import set_scores
from ...scorers.parallelism import score_groups
from ...spangroups import CROSS_PARAGRAPH, IN_PARAGRAPH
from ...taxonomy import LEVELS, LITERAL
from .gold import CONFIGURE_DEVICES, Char, GoldDoc, GoldUnit


def predict_raw(nlp: Language, gold: Sequence[GoldDoc], batch_size: int = 8) -> List[Dict[str, Any]]:
    """analysis/v1 records of the texts as a user gets them (``nlp.pipe`` on raw text)."""
    from ...analysis.records import doc_to_record, model_info, single_torch_thread

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
    from ...analysis.records import doc_to_record, model_info, single_torch_thread

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
    from ...scorers.cross_paragraph import score_cross_groups, to_units

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
    from ...taxonomy import CONFIGURE_FIGURES

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


def device_counts(gold: Sequence[GoldDoc], records: Sequence[Dict[str, Any]]) -> List[Tuple[str, int, int]]:
    """``(what, predicted, gold)`` rows: sentences per coarse device (the
    analysed sentences that carry it, the gold units that do), then groups
    and branches of each kind of parallelism (gold ``–`` where the corpus
    does not annotate that kind)."""
    from ...taxonomy import COARSE_ZH

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
