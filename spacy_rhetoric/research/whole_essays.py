"""Accuracy on whole essays: run a pipeline on each essay, score per paragraph.

Every gold DocBin of PSE-I (``corpus/pse-i/*.spacy``, ``corpus/pse-i-cerd/
*.spacy``) holds one PARAGRAPH per Doc, and the published figures run the
pipeline on those paragraphs. Users analyse whole essays. This module
measures what that changes, with the scorers ``nlp.evaluate`` uses (each
component's registered scorer through :class:`spacy.scorer.Scorer`):

1. paragraph level: ``nlp.evaluate`` on gold-word Examples of the DocBin;
2. whole essays: the paragraphs of each essay (``doc.user_data["essay_id"]``,
   ordered by ``["para_id"]``) are joined with ``"\\n"`` as ``rhetoric
   analyze`` reads a PSE-I essay (:func:`spacy_rhetoric.analysis.io.
   read_pse_essay`), the pipeline runs on the essay, and its prediction is
   cut back at the paragraphs' character offsets into one predicted doc per
   gold paragraph (:func:`cut_prediction`), scored against the same
   references by the same scorers.

Both use the gold words (and, by default, the gold sentence starts), as the
published figures do; the line break between two paragraphs is one
whitespace token attached to the sentence before it, as the clause segmenter
attaches it. So, inside an essay, the last sentence of every paragraph but
the last holds that token (``rhetoric_textcat`` pools over it) and
``ParagraphTok2Vec.v1`` encodes it with the paragraph; the
``parallelism_linker``'s own BiLSTM, repetition features and CRF read the
whole essay. A paragraph's whole-essay prediction may therefore differ from
its paragraph-level one even with the paragraph-wise encoders;
``changed_paragraphs`` in the result counts how many do. ``before=True`` loads the pipeline with the encoders that read
across line breaks (``spacy.Tok2Vec.v2``, ``spacy-transformers.
strided_spans.v1``: the configs before commit 9ccd4a2, same weights).
"""
from __future__ import annotations

import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy
from spacy.language import Language
from spacy.scorer import Scorer
from spacy.tokens import Doc, SpanGroup
from spacy.training import Example

from ..corpora.readers import gold_word_example
from ..evaluation.util import read_references
from ..spangroups import PARALLELISM_KEY, parallelism_offsets, set_parallelisms

#: Paragraph-wise encoders (commit 9ccd4a2) -> the whole-doc ones they replaced.
WHOLE_DOC_ENCODERS = {
    "spacy_rhetoric.ParagraphTok2Vec.v1": "spacy.Tok2Vec.v2",
    "spacy_rhetoric.paragraph_strided_spans.v1": "spacy-transformers.strided_spans.v1",
}
#: The span groups compared in :func:`prediction_signature`.
COMPARED_GROUPS = ("rhetoric", "rhetoric_form", "rhetoric_content", "rhetoric_components")
#: The headline scores printed by the CLI, in order.
HEADLINE = (
    "parallelism_epm_p", "parallelism_epm_r", "parallelism_epm_f", "parallelism_mbawo_f",
    "rhetoric_coarse_micro_f", "rhetoric_components_f",
)


# --- loading -----------------------------------------------------------------


def before_overrides(config: Dict[str, Any], path: str = "") -> Dict[str, str]:
    """Dot-notation config overrides that replace every paragraph-wise
    encoder in ``config`` (a nested dict, e.g. ``nlp.config``) by the
    whole-doc one of :data:`WHOLE_DOC_ENCODERS`; ``{}`` when it has none."""
    found: Dict[str, str] = {}
    for key, value in config.items():
        where = f"{path}.{key}" if path else key
        if isinstance(value, dict):
            found.update(before_overrides(value, where))
        elif key.startswith("@") and value in WHOLE_DOC_ENCODERS:
            found[where] = WHOLE_DOC_ENCODERS[value]
    return found


def encoder_names(config: Dict[str, Any]) -> List[str]:
    """The paragraph-wise or whole-doc encoder names (keys or values of
    :data:`WHOLE_DOC_ENCODERS`) that ``config`` (a nested dict) uses."""
    known = set(WHOLE_DOC_ENCODERS) | set(WHOLE_DOC_ENCODERS.values())
    found: List[str] = []
    for key, value in config.items():
        if isinstance(value, dict):
            found.extend(encoder_names(value))
        elif key.startswith("@") and value in known:
            found.append(value)
    return found


def load_encoders(model: Union[str, Path], before: bool = False) -> Language:
    """``spacy.load(model)``; with ``before``, the pipeline folder ``model``
    with its paragraph-wise encoders replaced by the whole-doc ones (same
    weights). Raises ValueError when ``before`` is asked of something that
    is not a folder or has no paragraph-wise encoder."""
    import spacy
    from spacy.util import load_config

    if not before:
        return spacy.load(model)
    if not Path(model).is_dir():
        raise ValueError(f"{model}: before=True needs a pipeline folder")
    overrides = before_overrides(load_config(Path(model) / "config.cfg"))
    if not overrides:
        raise ValueError(f"{model}: no paragraph-wise encoder to replace ({', '.join(WHOLE_DOC_ENCODERS)})")
    return spacy.load(model, config=overrides)


# --- essays ------------------------------------------------------------------


def group_essays(refs: Sequence[Doc]) -> List[List[int]]:
    """Indices into ``refs`` of each essay's paragraphs, essays in order of
    first appearance, paragraphs by integer ``para_id``. Raises ValueError
    for a doc without ``essay_id``/``para_id`` or a paragraph listed twice."""
    essays: Dict[str, List[int]] = defaultdict(list)
    for i, ref in enumerate(refs):
        if ref.user_data.get("essay_id") is None or ref.user_data.get("para_id") is None:
            raise ValueError(f"doc {i} has no essay_id/para_id in user_data: cannot rebuild essays")
        essays[str(ref.user_data["essay_id"])].append(i)
    out = []
    for essay_id, members in essays.items():
        members.sort(key=lambda i: int(refs[i].user_data["para_id"]))
        para_ids = [refs[i].user_data["para_id"] for i in members]
        if len(set(para_ids)) != len(para_ids):
            raise ValueError(f"essay {essay_id}: a para_id occurs twice ({para_ids})")
        out.append(members)
    return out


def essay_text(paragraphs: Sequence[Doc]) -> str:
    """The essay as ``rhetoric analyze`` reads it: paragraph texts joined by
    ``"\\n"``."""
    return "\n".join(p.text for p in paragraphs)


def essay_doc(nlp: Language, paragraphs: Sequence[Doc], gold_sents: bool = True) -> Tuple[Doc, List[Tuple[int, int]]]:
    """A gold-word Doc of the whole essay and each paragraph's character
    range ``(start, end)`` in it (end exclusive).

    Tokens: each paragraph's gold words, with one ``"\\n"`` token between two
    paragraphs; ``doc.text == essay_text(paragraphs)``. With ``gold_sents``
    (and every paragraph annotated), the sentence starts of the paragraphs;
    the line break belongs to the sentence before it.
    """
    words: List[str] = []
    spaces: List[bool] = []
    starts: List[bool] = []
    ranges: List[Tuple[int, int]] = []
    offset = 0
    for k, para in enumerate(paragraphs):
        if k:
            words.append("\n")
            spaces.append(False)
            starts.append(False)
            offset += 1
        words.extend(t.text for t in para)
        spaces.extend(bool(t.whitespace_) for t in para)
        starts.extend(bool(t.is_sent_start) for t in para)
        ranges.append((offset, offset + len(para.text)))
        offset += len(para.text)
    with_sents = gold_sents and all(p.has_annotation("SENT_START") for p in paragraphs)
    doc = Doc(nlp.vocab, words=words, spaces=spaces, sent_starts=starts if with_sents else None)
    return doc, ranges


# --- cutting a prediction back into paragraphs --------------------------------


def _clip(text: str, start: int, end: int, a: int, b: int) -> Optional[Tuple[int, int]]:
    """The character range ``[start, end)`` clipped to ``[a, b)`` when what
    lies outside is whitespace only; None when it does not overlap ``[a, b)``
    or crosses it with non-whitespace text."""
    s, e = max(start, a), min(end, b)
    if s >= e:
        return None
    if text[start:s].strip() or text[e:end].strip():
        return None
    return s, e


def _crosses(start: int, end: int, a: int, b: int) -> bool:
    """Whether ``[start, end)`` overlaps ``[a, b)`` and reaches outside it."""
    return start < b and end > a and (start < a or end > b)


def _cut_group(doc: Doc, piece: Doc, key: str, a: int, b: int) -> int:
    """Copy span group ``key`` of ``doc`` onto ``piece`` (the paragraph at
    characters ``[a, b)``): spans inside, shifted, with per-span ``attrs``
    (e.g. ``scores``) kept in step. Returns the spans that cross the
    paragraph with text and were dropped."""
    group = doc.spans[key]
    kept, rows, dropped = [], [], 0
    for i, span in enumerate(group):
        clipped = _clip(doc.text, span.start_char, span.end_char, a, b)
        if clipped is None:
            dropped += _crosses(span.start_char, span.end_char, a, b)
            continue
        new = piece.char_span(clipped[0] - a, clipped[1] - a, label=span.label, kb_id=span.kb_id, span_id=span.id)
        if new is None:
            raise ValueError(f"span {span.text!r} of group {key!r} does not fall on the paragraph's tokens")
        kept.append(new)
        rows.append(i)
    attrs = {}
    for name, value in group.attrs.items():
        per_span = isinstance(value, (list, numpy.ndarray)) and len(value) == len(group)
        attrs[name] = (numpy.asarray(value)[rows] if isinstance(value, numpy.ndarray) else [value[i] for i in rows]) if per_span else value
    piece.spans[key] = SpanGroup(piece, name=key, attrs=attrs, spans=kept)
    return dropped


def _cut_parallelisms(doc: Doc, piece: Doc, start: int, end: int, key: str = PARALLELISM_KEY) -> Dict[str, int]:
    """Write the parallelisms of ``doc`` within tokens ``[start, end)`` onto
    ``piece``, renumbered as the linker numbers them. A parallelism with
    branches in several paragraphs keeps its branches here, and is dropped
    when fewer than two are left (the linker's rule). Returns counts
    ``split_parallelisms`` and ``dropped_parallelisms``."""
    groups, split, dropped = [], 0, 0
    for group in parallelism_offsets(doc, key):
        inside = [(s - start, e - start) for s, e in group if start <= s and e <= end]
        if not inside:
            continue
        if len(inside) < len(group):
            split += 1
            if len(inside) < 2:
                dropped += 1
                continue
        groups.append(inside)
    set_parallelisms(piece, groups, key=key)
    return {"split_parallelisms": split, "dropped_parallelisms": dropped}


def _cut_extensions(doc: Doc, piece: Doc, a: int, b: int) -> int:
    """Copy span extension values (``Span._.rhetoric``: ``doc.user_data``
    keys ``("._.", name, start_char, end_char)``) of spans inside characters
    ``[a, b)`` onto ``piece``, shifted; a sentence that ends with the line
    break is clipped to the paragraph. Returns the values dropped because
    their span crosses the paragraph with text."""
    dropped = 0
    for key, value in doc.user_data.items():
        if not (isinstance(key, tuple) and len(key) == 4 and key[0] == "._." and key[2] is not None and key[3] is not None):
            continue
        clipped = _clip(doc.text, key[2], key[3], a, b)
        if clipped is None:
            dropped += _crosses(key[2], key[3], a, b)
            continue
        piece.user_data[("._.", key[1], clipped[0] - a, clipped[1] - a)] = value
    return dropped


def cut_prediction(doc: Doc, a: int, b: int) -> Tuple[Doc, Dict[str, int]]:
    """The prediction ``doc`` (a whole essay) restricted to the paragraph at
    characters ``[a, b)``: tokens, sentence starts and token annotation
    (``Span.as_doc``), every span group, the parallelisms (renumbered) and
    span extension values. Returns the paragraph doc and counts of what
    crossed the paragraph: ``dropped_spans``, ``dropped_extensions``,
    ``split_parallelisms``, ``dropped_parallelisms``. Raises ValueError when
    ``[a, b)`` does not fall on token boundaries."""
    span = doc.char_span(a, b)
    if span is None:
        raise ValueError(f"characters {a}-{b} do not fall on token boundaries")
    piece = span.as_doc()
    pattern = re.compile(rf"^{re.escape(PARALLELISM_KEY)}(_\d+)?$")
    counts = {"dropped_spans": 0}
    for key in list(doc.spans):
        if not pattern.match(key):
            counts["dropped_spans"] += _cut_group(doc, piece, key, a, b)
    counts.update(_cut_parallelisms(doc, piece, span.start, span.end))
    counts["dropped_extensions"] = _cut_extensions(doc, piece, a, b)
    return piece, counts


# --- prediction and scoring ---------------------------------------------------


class _KeepingScorer(Scorer):
    """spaCy's Scorer, keeping the Examples it scored (so the predictions
    ``nlp.evaluate`` made can be compared afterwards)."""

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        self.examples: List[Example] = []

    def score(self, examples, **kwargs):
        self.examples = list(examples)
        return super().score(self.examples, **kwargs)


def evaluate_paragraphs(nlp: Language, refs: Sequence[Doc], gold_sents: bool = True) -> Tuple[Dict[str, Any], List[Doc]]:
    """``nlp.evaluate`` on gold-word Examples of ``refs`` (one paragraph
    each). Returns the scores and the predicted docs, in ``refs`` order."""
    scorer = _KeepingScorer(nlp=nlp)
    scores = nlp.evaluate([gold_word_example(nlp, ref, gold_sents) for ref in refs], scorer=scorer)
    return scores, [eg.predicted for eg in scorer.examples]


def predict_essays(
    nlp: Language, refs: Sequence[Doc], gold_sents: bool = True, batch_size: Optional[int] = None
) -> Tuple[List[Doc], Dict[str, int]]:
    """Run ``nlp`` on every essay of ``refs`` (:func:`group_essays`) and cut
    each prediction back per paragraph. Returns one predicted doc per
    reference, in ``refs`` order (each with the reference's text), and the
    summed counts of :func:`cut_prediction` plus ``essays``. Raises
    ValueError if a cut paragraph's text differs from its reference's."""
    essays = group_essays(refs)
    inputs = [essay_doc(nlp, [refs[i] for i in members], gold_sents) for members in essays]
    outputs = nlp.pipe((doc for doc, _ in inputs), batch_size=batch_size or nlp.batch_size)
    predicted: List[Optional[Doc]] = [None] * len(refs)
    totals: Dict[str, int] = defaultdict(int)
    for members, (_, ranges), doc in zip(essays, inputs, outputs):
        for i, (a, b) in zip(members, ranges):
            piece, counts = cut_prediction(doc, a, b)
            if piece.text != refs[i].text:
                raise ValueError(f"essay {refs[i].user_data['essay_id']}: paragraph {refs[i].user_data['para_id']} changed text")
            predicted[i] = piece
            for k, v in counts.items():
                totals[k] += v
    totals["essays"] = len(essays)
    return predicted, dict(totals)


def score_predictions(nlp: Language, predicted: Sequence[Doc], refs: Sequence[Doc]) -> Dict[str, Any]:
    """Scores of ``predicted`` against ``refs`` with the Scorer
    ``nlp.evaluate`` builds (the tokenizer's and every component's scorer)."""
    from spacy.language import _replace_numpy_floats

    return _replace_numpy_floats(Scorer(nlp=nlp).score([Example(p, r) for p, r in zip(predicted, refs)]))


def prediction_signature(doc: Doc) -> Tuple:
    """Everything the scorers read of a predicted paragraph: sentence
    starts, the labelled character spans of :data:`COMPARED_GROUPS` and the
    parallelisms (token offsets)."""
    sents = tuple(bool(t.is_sent_start) for t in doc)
    groups = tuple(
        tuple(sorted((s.label_, s.start_char, s.end_char) for s in doc.spans.get(key, []))) for key in COMPARED_GROUPS
    )
    return sents, groups, tuple(tuple(g) for g in parallelism_offsets(doc))


def changed_paragraphs(a: Sequence[Doc], b: Sequence[Doc]) -> Dict[str, int]:
    """How many paragraph predictions differ between ``a`` and ``b`` (same
    order), in total and per part of :func:`prediction_signature`."""
    parts = ("sentences", "sentence_labels_or_components", "parallelisms")
    out = {"paragraphs": 0, **{p: 0 for p in parts}}
    for x, y in zip(a, b):
        sx, sy = prediction_signature(x), prediction_signature(y)
        out["paragraphs"] += sx != sy
        for name, px, py in zip(parts, sx, sy):
            out[name] += px != py
    return out


def evaluate_whole_essays(
    model: Union[str, Path],
    data: Path,
    *,
    before: bool = False,
    gold_sents: bool = True,
    output: Optional[Path] = None,
) -> Dict[str, Any]:
    """Paragraph-level and whole-essay scores of ``model`` on ``data``.

    before: load the pipeline with the whole-doc encoders (see module doc).
    Returns ``{"model", "data", "before", "encoders" (:func:`encoder_names`),
    "gold_sents", "n_paragraphs",
    "n_words", "paragraphs": nlp.evaluate scores, "essays": the same scorers
    on the cut-back whole-essay predictions, "cut": counts from
    :func:`predict_essays`, "changed": :func:`changed_paragraphs` of the
    two predictions}``; scores are floats in [0, 1] (``speed`` in words per
    second). Writes it as JSON to ``output``.
    """
    nlp = load_encoders(model, before)
    refs = read_references(Path(data), nlp)
    paragraph_scores, paragraph_docs = evaluate_paragraphs(nlp, refs, gold_sents)
    essay_docs, cut = predict_essays(nlp, refs, gold_sents)
    result: Dict[str, Any] = {
        "model": str(model), "data": str(data), "before": before, "encoders": encoder_names(nlp.config),
        "gold_sents": gold_sents,
        "n_paragraphs": len(refs), "n_words": sum(len(r) for r in refs),
        "paragraphs": paragraph_scores, "essays": score_predictions(nlp, essay_docs, refs),
        "cut": cut, "changed": changed_paragraphs(paragraph_docs, essay_docs),
    }
    if output is not None:
        output.parent.mkdir(parents=True, exist_ok=True)
        output.write_text(json.dumps(result, indent=2, ensure_ascii=False), encoding="utf8")
    return result


def headline_rows(result: Dict[str, Any]) -> List[Tuple[str, str, str]]:
    """``(score, paragraphs, whole essays)`` rows of the headline scores
    present in a :func:`evaluate_whole_essays` result, per-label coarse F1
    included; values formatted to 4 decimals."""
    rows = []

    def fmt(v):
        return "" if v is None else f"{v:.4f}"

    for key in HEADLINE:
        p, e = result["paragraphs"].get(key), result["essays"].get(key)
        if p is not None or e is not None:
            rows.append((key, fmt(p), fmt(e)))
    per_p = result["paragraphs"].get("rhetoric_coarse_per_type") or {}
    per_e = result["essays"].get("rhetoric_coarse_per_type") or {}
    for label in sorted(set(per_p) | set(per_e)):
        rows.append((f"coarse/{label} F1", fmt((per_p.get(label) or {}).get("f")), fmt((per_e.get(label) or {}).get("f"))))
    return rows
