"""Analyse documents with an assembled pipeline: JSONL records and an HTML report.

Inputs, encodings, document ids and how output is written safely are
described in :mod:`spacy_rhetoric.analysis_io`; the local (``nlp.pipe``) and
Ray engines in :mod:`spacy_rhetoric.engines`. This module holds the record
schema, the HTML report and the driver :func:`analyze`.

JSONL schema ``spacy-rhetoric/analysis/v1`` (one record per input document;
character offsets are Python string indices into ``text``, end exclusive)::

    {"schema": "spacy-rhetoric/analysis/v1",
     "id": str, "path": str | null, "encoding": str | null,
     "model": {"name": str, "version": str},
     "text": str, "n_chars": int, "n_tokens": int,
     "sentences": [{"start": int, "end": int, "text": str,
                    "coarse": {label: score}, "form": {label: score},
                    "content": {label: score}}],
     "components": [{"label": str, "start": int, "end": int, "text": str,
                     "score": float | null}],
     "parallelisms": [{"id": str, "kind": "in_paragraph" | "cross_paragraph",
                       "branches": [{"start": int, "end": int, "text": str}]}],
     "clauses": [{"start": int, "end": int}],
     "summary": {"sentences": int, "clauses": int, "coarse": {label: n},
                 "form": {label: n}, "content": {label: n},
                 "components": {label: n}, "parallelisms": int,
                 "cross_paragraph_parallelisms": int, "branches": int}}

``id`` is the file stem, made unique when stems are shared (see
:mod:`spacy_rhetoric.analysis_io`); ``path`` is null for standard input.
``encoding`` is the Python codec the text was decoded with (``utf-8``,
``utf-8-sig``, ``utf-16``, ``gb18030``, ...; :func:`analysis_io.decode_text`),
null for PSE-I XML (the XML declares its own) and for standard input given
as a text stream.

A document that cannot be read or analysed gets an error record instead, in
the same output and with the same ``id``::

    {"schema": "spacy-rhetoric/analysis/v1", "id": str, "path": str | null,
     "error": {"type": str, "message": str}}

``type`` is one of ``not_text`` (binary, or no encoding fits),
``decode_error`` (a forced ``--encoding`` does not decode it),
``format_error`` (malformed PSE-I XML), ``read_error`` (the file cannot be
read), ``too_long`` (more characters than the pipeline's ``max_length``) and
``analysis_error`` (the pipeline raised on it); ``message`` names the file
(and line where known). Records are written in input order by the local
engine, in completion order by the Ray engine.

Sentence labels are those ``Span._.rhetoric`` holds (empty dicts when the
pipeline has no ``rhetoric_textcat``); ``summary`` counts sentences per
non-literal label. Sentences, components and parallelisms consisting only of
whitespace are left out, so empty or whitespace-only text gives a record with
empty lists (documented empty result, DESIGN §5).
"""
from __future__ import annotations

import contextlib
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, Span

from .analysis_io import (  # noqa: F401  re-exported: the analyze API predates the split
    INPUT_SUFFIXES,
    DocumentError,
    InputDoc,
    expand_inputs,
    expand_paths,
    iter_inputs,
    read_pse_essay,
    read_text_file,
)
from .annotation import COMPONENTS_KEY, clip_to_paragraph, sentence_spans
from .pipeline import load_pipeline
from .serve.render import COMPONENT_COLOURS, GROUP_COLOURS  # noqa: F401  the report's colours (shared with the page)
from .spangroups import PARALLELISM_KEY, parallelism_groups
from .taxonomy import LEVELS, LITERAL

SCHEMA = "spacy-rhetoric/analysis/v1"
ENGINES = ("local", "ray")


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
    """The ``spacy-rhetoric/analysis/v1`` record of an analysed Doc."""
    sentences = []
    for sent in sentence_spans(doc):
        # a sentence's offsets leave out whitespace at its edges, as its
        # span in doc.spans["rhetoric"] does
        clipped = clip_to_paragraph(doc, sent.start, sent.end)
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
    return {
        "schema": SCHEMA,
        "id": doc_id,
        "path": path,
        "encoding": encoding,
        "model": model or {},
        "text": doc.text,
        "n_chars": len(doc.text),
        "n_tokens": sum(1 for t in doc if not t.is_space),
        "sentences": sentences,
        "components": components,
        "parallelisms": groups,
        "clauses": clauses,
        "summary": summarize(sentences, components, groups, len(clauses)),
    }


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


def analyze_docs(
    nlp: Language,
    inputs: Iterable[InputDoc],
    *,
    n_process: int = 1,
    batch_size: int = 8,
) -> Iterator[Tuple[InputDoc, Doc]]:
    """Run ``nlp`` over ``inputs`` (order kept); yields ``(input, doc)``.

    Raises ValueError naming the document if its text is longer than
    ``nlp.max_length`` characters (raise that limit to analyse it).
    """

    def checked() -> Iterator[Tuple[str, InputDoc]]:
        for item in inputs:
            if len(item.text) > nlp.max_length:
                raise ValueError(too_long_message(item, nlp.max_length))
            yield item.text, item

    with single_torch_thread():
        for doc, item in nlp.pipe(checked(), as_tuples=True, n_process=n_process, batch_size=batch_size):
            yield item, doc


@contextlib.contextmanager
def single_torch_thread() -> Iterator[None]:
    """Run torch on one thread inside the block (restored afterwards).

    Why: spaCy forks its ``n_process`` workers, and a child that inherits a
    multi-threaded OpenMP pool from a parent that already ran torch hangs on
    its first parallel region (the BiLSTM of ``parallelism_linker``). With
    one process, the small BiLSTM gains nothing from threads and loses much
    on a busy machine (measured: 42 PSE-I essays took 73.9 s with torch's
    default threads vs 8.5 s with one, 2 shared cores).
    """
    torch = sys.modules.get("torch")
    if torch is None:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


# --- HTML -------------------------------------------------------------------
#
# The report shares its rendering with the page of ``rhetoric serve``
# (spacy_rhetoric/serve/render.py: HTML from the JSON record, CSS and the
# sentence panel's JS in spacy_rhetoric/serve/static), so both show an essay
# as written: no space added between words, paragraphs kept.


def doc_sections(doc: Doc) -> Dict[str, str]:
    """The rendering of a Doc (``{"essay": html}``): the marked essay of its
    record, as the report and the page of ``rhetoric serve`` show it."""
    from .serve.render import render_essay

    return {"essay": render_essay(doc_to_record(doc, ""))}


HTML_TEMPLATE = """<!DOCTYPE html>
<html lang="zh"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font-family: "WenQuanYi Micro Hei", "Noto Sans CJK SC", "Microsoft YaHei", sans-serif; margin: 2em; max-width: 90em; }
table.report { border-collapse: collapse; margin-bottom: 2em; }
table.report td, table.report th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
table.report td:first-child, table.report th:first-child { text-align: left; }
h2 { border-top: 2px solid #444; padding-top: 0.5em; }
{{ css|safe }}
</style></head><body>
<h1>{{ title }}</h1>
<p>{{ records|length }} document(s), model {{ model.name }} {{ model.version }}, schema {{ schema }}.{% if failures %} {{ failures|length }} document(s) failed.{% endif %}
Hover over or click a sentence for its form, content and scores.</p>
{% if failures %}<h2 id="failed">Failed documents</h2>
<table class="report failed">
<tr><th>document</th><th>path</th><th>error</th><th>message</th></tr>
{% for f in failures %}<tr><td>{{ f.id }}</td><td>{{ f.path or "-" }}</td><td>{{ f.error.type }}</td><td>{{ f.error.message }}</td></tr>
{% endfor %}
</table>{% endif %}
<table class="report summary">
<tr><th>document</th><th>sentences</th>{% for c in coarse %}<th>{{ c }}</th>{% endfor %}<th>components</th><th>parallelisms</th><th>branches</th></tr>
{% for r in records %}<tr><td><a href="#doc-{{ loop.index }}">{{ r.id }}</a></td><td>{{ r.summary.sentences }}</td>
{% for c in coarse %}<td>{{ r.summary.coarse.get(c, 0) }}</td>{% endfor %}
<td>{{ r.summary.components.values()|sum }}</td><td>{{ r.summary.parallelisms }}</td><td>{{ r.summary.branches }}</td></tr>
{% endfor %}
</table>
{% for r, html in documents %}
<h2 id="doc-{{ loop.index }}">{{ r.id }}</h2>
{{ html|safe }}
{% endfor %}
<aside id="rh-panel" class="rh-panel" hidden></aside>
<script>{{ js|safe }}</script>
<script>RhetoricView.bind(document.body, document.getElementById("rh-panel"), {});</script>
</body></html>
"""


def render_html(
    records: List[Dict[str, Any]],
    sections: Optional[List[Dict[str, str]]] = None,
    model: Optional[Dict[str, str]] = None,
    title: str = "Rhetorical devices",
    failures: Sequence[Dict[str, Any]] = (),
) -> str:
    """The report page: the error records of failed documents (if any), a
    per-document summary table, then each document as the page of
    ``rhetoric serve`` shows it (summary, legend and the marked essay,
    rendered from the record by :func:`spacy_rhetoric.serve.render.render_record`).
    ``sections`` is accepted for compatibility and not used: everything is
    rendered from the records."""
    import jinja2

    from .serve.render import render_record, static_text
    from .taxonomy import LEVEL_LABELS

    env = jinja2.Environment(autoescape=True)
    coarse = [c for c in LEVEL_LABELS["coarse"] if c != LITERAL]
    js = static_text("rhetoric.js").replace("</", "<\\/")
    return env.from_string(HTML_TEMPLATE).render(
        title=title, records=records, documents=[(r, render_record(r)) for r in records],
        model=model or {"name": "", "version": ""}, schema=SCHEMA, coarse=coarse, failures=list(failures),
        css=static_text("rhetoric.css"), js=js,
    )


# --- driver ---------------------------------------------------------------------


def analyze(
    paths: Sequence[Union[str, Path]],
    output: Union[str, Path, IO[str]],
    *,
    model: Union[str, Language] = "zh_rhetoric",
    fmt: str = "jsonl",
    n_process: int = 1,
    batch_size: int = 8,
    split: Optional[str] = None,
    max_length: Optional[int] = None,
    progress: bool = True,
    stdin: Optional[IO] = None,
    encoding: str = "auto",
    resume: bool = False,
    engine: str = "local",
    ray_address: Optional[str] = None,
    num_actors: int = 1,
    on_message: Optional[Callable[[str], None]] = None,
) -> Dict[str, int]:
    """Analyse ``paths`` and write JSONL (one record per document, error
    records included) or the HTML report to ``output`` (a path, ``"-"`` for
    stdout, or an open file).

    ``engine``: ``local`` (``nlp.pipe`` with ``n_process`` processes) or
    ``ray`` (Ray Data, ``num_actors`` actors; joins ``ray_address`` or starts
    Ray on this machine). ``resume``: append to an existing JSONL file,
    skipping the ids it already holds (ok or failed) and dropping a partial
    last line. ``on_message`` receives one line per failed document and per
    notice (no wrapping).

    Returns ``{"documents", "ok", "failed"}`` for this run, ``"skipped"``
    (ids already in the output) and ``"skipped_failed"`` (of those, error
    records), and the counts ``"sentences"``, ``"device_sentences"``,
    ``"components"``, ``"parallelisms"`` of this run's records. Raises
    ValueError for a bad option or an output that cannot be resumed,
    FileNotFoundError for a missing input, OSError when the pipeline cannot
    be loaded, RuntimeError when the Ray engine fails.
    """
    from tqdm import tqdm

    from . import engines
    from .analysis_io import JsonlWriter, check_encoding, expand_inputs, scan_jsonl, write_atomic

    if fmt not in ("jsonl", "html"):
        raise ValueError(f"unknown format {fmt!r}; use jsonl or html")
    if engine not in ENGINES:
        raise ValueError(f"unknown engine {engine!r}; use local or ray")
    encoding = check_encoding(encoding)
    to_file = not hasattr(output, "write") and str(output) != "-"
    if resume and (fmt != "jsonl" or not to_file):
        raise ValueError("--resume needs --format jsonl and an --output file")
    if engine == "ray" and not isinstance(model, str):
        raise ValueError("the ray engine needs the pipeline as a package name or folder, not a loaded Language")
    inputs = expand_inputs(paths, split)
    state = scan_jsonl(output) if resume else None  # type: ignore[arg-type]
    todo = [(i, src) for i, src in inputs if i not in state.done] if state else inputs
    nlp: Optional[Language] = None
    if engine == "local":
        nlp = load_pipeline(model) if isinstance(model, str) else model
        if max_length:
            nlp.max_length = max_length
        info: Optional[Dict[str, str]] = model_info(nlp)
    else:
        engines.require_ray()
        info = engines.model_meta_info(model, require=ray_address is None)  # type: ignore[arg-type]
    if state and info and state.models - {(info["name"], info["version"])}:
        found = ", ".join(f"{n} {v}" for n, v in sorted(state.models))
        raise ValueError(f"{output} holds records of {found}, this run uses {info['name']} {info['version']}; "
                         "resume with the same pipeline or write to a new file")
    totals = Counter(documents=0, ok=0, failed=0, skipped=len(inputs) - len(todo),
                     skipped_failed=len(state.failed & {i for i, _ in inputs}) if state else 0,
                     sentences=0, device_sentences=0, components=0, parallelisms=0)
    bar = tqdm(total=len(todo), unit="doc", disable=not progress, file=sys.stderr)

    def say(message: str) -> None:
        if on_message is not None:
            with bar.external_write_mode(file=sys.stderr):
                on_message(message)

    if state and state.valid_bytes < state.size:
        say(f"resume: dropped a partial last line ({state.size - state.valid_bytes} bytes) of {output}")
    docs = iter_inputs((), stdin=stdin, encoding=encoding, errors="record", inputs=todo)
    if engine == "local":
        results = engines.local_results(nlp, docs, n_process=n_process, batch_size=batch_size, with_sections=fmt == "html")
    else:
        results = engines.ray_results(model, docs, address=ray_address, num_actors=num_actors, batch_size=batch_size,  # type: ignore[arg-type]
                                      max_length=max_length, with_sections=fmt == "html")
    collected: List[Tuple[int, Dict[str, Any], Optional[Dict[str, str]]]] = []
    with contextlib.closing(results), bar:
        writer = JsonlWriter(output, fresh=not resume, truncate_to=state.valid_bytes if state else None,
                             fsync_every=batch_size) if fmt == "jsonl" else None
        try:
            for index, record, sections in results:
                _add_totals(totals, record)
                if "error" in record:
                    say(f"failed: {record['id']}: {record['error']['type']}: {record['error']['message']}")
                if writer is not None:
                    writer.write(record)
                else:
                    collected.append((index, record, sections))
                bar.update(1)
        finally:
            if writer is not None:
                writer.close()
    if fmt == "html":
        collected.sort(key=lambda x: x[0])
        ok = [(r, s) for _, r, s in collected if "error" not in r]
        failures = [r for _, r, _ in collected if "error" in r]
        page = render_html([r for r, _ in ok], [s or {} for _, s in ok], info or _first_model(ok), failures=failures)
        write_atomic(output, page)
    return dict(totals)


def _first_model(pairs: List[Tuple[Dict[str, Any], Any]]) -> Dict[str, str]:
    return next((r.get("model") or {} for r, _ in pairs), {"name": "", "version": ""})


def _add_totals(totals: Counter, record: Dict[str, Any]) -> None:
    totals["documents"] += 1
    if "error" in record:
        totals["failed"] += 1
        return
    totals["ok"] += 1
    totals["sentences"] += len(record["sentences"])
    totals["device_sentences"] += sum(1 for s in record["sentences"] if any(k != LITERAL for k in s["coarse"]))
    totals["components"] += len(record["components"])
    totals["parallelisms"] += len(record["parallelisms"])


__all__ = ["SCHEMA", "InputDoc", "analyze", "analyze_docs", "doc_to_record", "doc_sections", "error_record",
           "iter_inputs", "expand_inputs", "expand_paths", "render_html"]
