"""The ``spacy-rhetoric/analysis/v1`` record of an analysed Doc.

One module below everything that builds or reads records: the ``analyze``
driver and its engines (:mod:`spacy_rhetoric.analysis.driver`,
:mod:`spacy_rhetoric.analysis.engines`), ``rhetoric serve`` and the evaluations import
it; rendering a record as HTML lives beside it
(:mod:`spacy_rhetoric.analysis.render`). The schema is documented in
:mod:`spacy_rhetoric.analysis.driver`.
"""
from __future__ import annotations

import contextlib
import sys
from collections import Counter
from typing import Any, Dict, Iterator, List, Optional

from spacy.language import Language
from spacy.tokens import Doc, Span

from ..annotation import COMPONENTS_KEY, ParagraphClipper, sentence_spans
from ..spangroups import PARALLELISM_KEY, parallelism_groups
from ..taxonomy import LEVELS, LITERAL
from .io import InputDoc
from .render import render_essay

SCHEMA = "spacy-rhetoric/analysis/v1"
#: ``doc.user_data`` key of the :func:`record_body` that the
#: ``rhetoric_analysis_record`` component leaves on a doc.
RECORD_BODY_KEY = "rhetoric_record_body"


# --- records ------------------------------------------------------------------


def _rhetoric_of(sent: Span) -> Dict[str, Dict[str, float]]:
    value = sent._.rhetoric if Span.has_extension("rhetoric") else None
    value = value or {}
    return {level: {k: round(float(v), 4) for k, v in value.get(level, {}).items()} for level in LEVELS}


def _scores(doc: Doc, key: str) -> List[Optional[float]]:
    group = doc.spans.get(key)
    if group is None:
        return []
    scores = group.attrs.get("scores")
    if scores is None or len(scores) != len(group):
        return [None] * len(group)
    return [round(float(s), 4) for s in scores]


def doc_to_record(
    doc: Doc, doc_id: str, path: Optional[str] = None, model: Optional[Dict[str, str]] = None, encoding: Optional[str] = None
) -> Dict[str, Any]:
    """The ``spacy-rhetoric/analysis/v1`` record of an analysed Doc: its
    :func:`record_body` (the one the ``rhetoric_analysis_record`` component
    left in ``doc.user_data``, when it ran) with the given id, path, model
    and encoding."""
    body = doc.user_data.get(RECORD_BODY_KEY)
    if body is None:
        body = record_body(doc)
    return body_to_record(body, doc_id, path, model, encoding)


def body_to_record(
    body: Dict[str, Any], doc_id: str, path: Optional[str] = None, model: Optional[Dict[str, str]] = None,
    encoding: Optional[str] = None,
) -> Dict[str, Any]:
    """The ``spacy-rhetoric/analysis/v1`` record of a :func:`record_body`
    (of a doc, or merged from a document's pieces by
    :func:`spacy_rhetoric.analysis.pieces.merge_bodies`)."""
    return {"schema": SCHEMA, "id": doc_id, "path": path, "encoding": encoding, "model": model or {}, **body}


def record_body(doc: Doc) -> Dict[str, Any]:
    """What a record says of the analysed text: text, counts, sentences,
    components, parallelisms, clauses and summary (every key of
    :func:`doc_to_record` but schema, id, path, encoding and model)."""
    sentences = []
    clip = ParagraphClipper(doc)
    for sent in sentence_spans(doc):
        # a sentence's offsets leave out whitespace at its edges (its span
        # in doc.sents and doc.spans["rhetoric"] keeps a paragraph's line break)
        clipped = clip(sent.start, sent.end)
        if clipped is None:
            continue
        labels = _rhetoric_of(sent)
        span = doc[clipped[0]:clipped[1]]
        sentences.append({"start": span.start_char, "end": span.end_char, "text": span.text, **labels})
    # a span of whitespace only carries no device (the documented empty result)
    components = [
        {"label": s.label_, "start": s.start_char, "end": s.end_char, "text": s.text, "score": score}
        for s, score in zip(doc.spans.get(COMPONENTS_KEY, []), _scores(doc, COMPONENTS_KEY))
        if s.text.strip()
    ]
    groups = [
        {"id": branches[0].id_ or f"{PARALLELISM_KEY}_{i}", "kind": kind,
         "branches": [{"start": b.start_char, "end": b.end_char, "text": b.text} for b in branches]}
        for i, (kind, branches) in enumerate(parallelism_groups(doc), start=1)
        if any(b.text.strip() for b in branches)
    ]
    clauses = [{"start": s.start_char, "end": s.end_char} for s in doc.spans.get("clauses", [])]
    figurative_units = figurative_units_of(doc)
    return {
        "text": doc.text,
        "n_chars": len(doc.text),
        "n_tokens": sum(1 for t in doc if not t.is_space),
        "sentences": sentences,
        "components": components,
        "parallelisms": groups,
        "clauses": clauses,
        "figurative_units": figurative_units,
        "summary": summarize(sentences, components, groups, len(clauses)),
    }


def figurative_units_of(doc: Doc) -> List[Dict[str, Any]]:
    """The record's ``figurative_units``: ``{start, end, label, label_zh}`` per
    unit of ``doc.spans["figurative_units"]`` (character offsets, end
    exclusive; ``label`` one of ConFiguRe's 12 figure types, ``label_zh`` its
    Chinese name), in text order; ``[]`` when the pipeline has no
    ``figurative_units`` component."""
    from ..taxonomy import CONFIGURE_FIGURES

    return [{"start": s.start_char, "end": s.end_char, "label": s.label_, "label_zh": CONFIGURE_FIGURES.get(s.label_, s.label_)}
            for s in sorted(doc.spans.get("figurative_units", []), key=lambda s: (s.start_char, s.end_char))]


def error_record(doc_id: str, path: Optional[str], type: str, message: str) -> Dict[str, Any]:
    """The record of a document that could not be read or analysed."""
    return {"schema": SCHEMA, "id": doc_id, "path": path, "error": {"type": type, "message": message}}


def too_long_message(item: InputDoc, max_length: int) -> str:
    return (f"{item.path or item.id}: {len(item.text)} characters exceed the pipeline's "
            f"max_length {max_length}; split the text or raise --max-length")


def summarize(sentences: List[dict], components: List[dict], groups: List[dict], n_clauses: int) -> Dict[str, Any]:
    """Counts of a record: sentences per non-literal label and level,
    components per label, parallelisms and branches."""
    summary: Dict[str, Any] = {"sentences": len(sentences), "clauses": n_clauses}
    for level in LEVELS:
        counts = Counter(lab for s in sentences for lab in s[level] if lab != LITERAL)
        summary[level] = dict(sorted(counts.items()))
    summary["components"] = dict(sorted(Counter(c["label"] for c in components).items()))
    summary["parallelisms"] = len(groups)
    summary["cross_paragraph_parallelisms"] = sum(g.get("kind") == "cross_paragraph" for g in groups)
    summary["branches"] = sum(len(g["branches"]) for g in groups)
    return summary


def model_info(nlp: Language) -> Dict[str, str]:
    return {"name": f"{nlp.lang}_{nlp.meta.get('name', '')}", "version": str(nlp.meta.get("version", ""))}


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (restored afterwards).

    Why: spaCy forks its ``n_process`` workers, and a child that inherits a
    multi-threaded OpenMP pool from a parent that already ran torch hangs on
    its first parallel region (the BiLSTM of ``parallelism_linker``). With
    one process, the small BiLSTM gains nothing from threads and loses much
    on a busy machine (measured: 42 PSE-I essays took 73.9 s with torch's
    default threads vs 8.5 s with one, 2 shared cores). A transformer
    encoder with ``cpu_threads`` uses the cores that other processes leave
    free, or the threads the user chose
    (:func:`spacy_rhetoric.runtime.threads.encoder_threads`).
    """
    from ..runtime.threads import torch_threads

    # torch not imported yet: nothing to set (and no reason to import it)
    with torch_threads(1 if "torch" in sys.modules else None):
        yield


def doc_sections(doc: Doc) -> Dict[str, str]:
    """The rendering of a Doc (``{"essay": html}``): the marked essay of its
    record, as the report and the page of ``rhetoric serve`` show it."""
    return {"essay": render_essay(doc_to_record(doc, ""))}
