"""Analyse documents with an assembled pipeline: JSONL records and an HTML report.

Inputs, encodings, document ids and how output is written safely are
described in :mod:`spacy_rhetoric.analysis.io`; the local (``nlp.pipe``) and
Ray engines in :mod:`spacy_rhetoric.analysis.engines`. This module holds the record
schema, the HTML report and the driver :func:`analyze`.

JSONL schema ``spacy-rhetoric/analysis/v1`` (built by
:func:`spacy_rhetoric.analysis.records.doc_to_record`) (one record per input document;
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
     "figurative_units": [{"start": int, "end": int, "label": str,
                           "label_zh": str}],
     "summary": {"sentences": int, "clauses": int, "coarse": {label: n},
                 "form": {label: n}, "content": {label: n},
                 "components": {label: n}, "parallelisms": int,
                 "cross_paragraph_parallelisms": int, "branches": int}}

``figurative_units`` are the units of ConFiguRe's 12 figure types that the
``figurative_units`` component found (``label`` in English, ``label_zh`` the
Chinese name: 比喻, 比拟, 借代, 夸张, 反语, 通感, 问语, 排比, 对偶, 反复, 对比,
引语); ``[]`` with a pipeline without it.

``id`` is the file stem, made unique when stems are shared (see
:mod:`spacy_rhetoric.analysis.io`); ``path`` is null for standard input.
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

The pipeline sees each document with its line endings normalised (``\\r\\n``
and a lone ``\\r`` become ``\\n``) and in pieces of bounded size (whole
paragraphs, else sentences); ``text`` and every offset are those of the text
as read (:mod:`spacy_rhetoric.analysis.pieces`, which also says what a cut can
change in a document longer than one piece).
"""
from __future__ import annotations

import contextlib
import sys
from collections import Counter
from pathlib import Path
from typing import IO, Any, Callable, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc

from ..taxonomy import LITERAL
from .io import InputDoc, expand_inputs, expand_paths, iter_inputs
from .loading import load_pipeline
from .records import SCHEMA, doc_sections, doc_to_record, error_record, model_info, single_torch_thread, too_long_message

ENGINES = ("local", "ray")


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


# --- HTML -------------------------------------------------------------------
#
# The report shares its rendering with the page of ``rhetoric serve``
# (spacy_rhetoric/analysis/render.py: HTML from the JSON record, CSS and the
# sentence panel's JS in spacy_rhetoric/serve/static), so both show an essay
# as written: no space added between words, paragraphs kept.


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
{{ legend|safe }}
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
    per-document summary table, one legend, then each document as the page
    of ``rhetoric serve`` shows it (summary and the marked essay, rendered
    from the record by :func:`spacy_rhetoric.analysis.render.render_record`).
    ``sections`` is accepted for compatibility and not used: everything is
    rendered from the records."""
    import jinja2

    from .render import render_legend, render_record, static_text
    from ..taxonomy import LEVEL_LABELS

    env = jinja2.Environment(autoescape=True)
    coarse = [c for c in LEVEL_LABELS["coarse"] if c != LITERAL]
    js = static_text("rhetoric.js").replace("</", "<\\/")
    return env.from_string(HTML_TEMPLATE).render(
        title=title, records=records, documents=[(r, render_record(r, legend=False)) for r in records],
        legend=render_legend(any("figurative_units" in r for r in records)) if records else "",
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
    piece_chars: Optional[int] = None,
    threads: Union[int, str, None] = None,
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

    Each document is analysed in pieces of at most ``piece_chars``
    characters (default :data:`spacy_rhetoric.analysis.pieces.PIECE_CHARS`), with its
    line endings normalised, and gets one record whose offsets index the
    text as read (:mod:`spacy_rhetoric.analysis.pieces`): memory grows with
    ``batch_size`` times the piece size, not with the document. ``threads``:
    torch and BLAS threads of this process, a number or ``"auto"``
    (:func:`spacy_rhetoric.runtime.threads.set_threads`; None: ``RHETORIC_THREADS``
    or ``"auto"``); ``n_process`` workers run one.

    Returns ``{"documents", "ok", "failed"}`` for this run, ``"skipped"``
    (ids already in the output) and ``"skipped_failed"`` (of those, error
    records), and the counts ``"sentences"``, ``"device_sentences"``,
    ``"components"``, ``"parallelisms"`` of this run's records. Raises
    ValueError for a bad option, an output that cannot be resumed or an
    output that is one of the inputs (the same file, or a link to it; checked
    before anything is written), FileNotFoundError for a missing input, OSError when the pipeline cannot
    be loaded, RuntimeError when the Ray engine fails.
    """
    from tqdm import tqdm

    from . import engines
    from .io import JsonlWriter, check_encoding, expand_inputs, refuse_input_as_output, scan_jsonl, write_atomic

    from ..runtime.threads import set_threads
    from .pieces import PIECE_CHARS

    piece_chars = PIECE_CHARS if piece_chars is None else piece_chars
    if piece_chars < 1:
        raise ValueError(f"--piece-chars must be at least 1, got {piece_chars}")
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
    refuse_input_as_output(output, inputs)  # before anything is written
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
        set_threads(threads)
        results = engines.local_results(nlp, docs, n_process=n_process, batch_size=batch_size, with_sections=fmt == "html",
                                        piece_chars=piece_chars)
    else:
        results = engines.ray_results(model, docs, address=ray_address, num_actors=num_actors, batch_size=batch_size,  # type: ignore[arg-type]
                                      max_length=max_length, with_sections=fmt == "html", piece_chars=piece_chars)
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
