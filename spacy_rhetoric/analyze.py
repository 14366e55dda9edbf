"""Analyse documents with an assembled pipeline: JSONL records and an HTML report.

Inputs (:func:`iter_inputs`): ``.txt`` files (UTF-8), PSE-I ``.xml`` essays
(their words joined, one line per paragraph), folders (their ``*.txt`` and
``*.xml`` files, recursively, sorted), ``-`` for standard input (one
document). A PSE-I folder (with ``splits.json``) can be restricted to one
split.

JSONL schema ``spacy-rhetoric/analysis/v1`` (one record per input document;
character offsets are Python string indices into ``text``, end exclusive)::

    {"schema": "spacy-rhetoric/analysis/v1",
     "id": str, "path": str | null,
     "model": {"name": str, "version": str},
     "text": str, "n_chars": int, "n_tokens": int,
     "sentences": [{"start": int, "end": int, "text": str,
                    "coarse": {label: score}, "form": {label: score},
                    "content": {label: score}}],
     "components": [{"label": str, "start": int, "end": int, "text": str,
                     "score": float | null}],
     "parallelisms": [{"id": str, "branches": [{"start": int, "end": int,
                                                 "text": str}]}],
     "clauses": [{"start": int, "end": int}],
     "summary": {"sentences": int, "clauses": int, "coarse": {label: n},
                 "form": {label: n}, "content": {label: n},
                 "components": {label: n}, "parallelisms": int,
                 "branches": int}}

Sentence labels are those ``Span._.rhetoric`` holds (empty dicts when the
pipeline has no ``rhetoric_textcat``); ``summary`` counts sentences per
non-literal label. Sentences, components and parallelisms consisting only of
whitespace are left out, so empty or whitespace-only text gives a record with
empty lists (documented empty result, DESIGN §5).
"""
from __future__ import annotations

import contextlib
import json
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

from spacy.language import Language
from spacy.tokens import Doc, Span

from .annotation import COMPONENTS_KEY, sentence_spans
from .spangroups import PARALLELISM_KEY, parallelisms
from .taxonomy import LEVELS, LITERAL

SCHEMA = "spacy-rhetoric/analysis/v1"
INPUT_SUFFIXES = (".txt", ".xml")
#: Distinct colours for the branches of different parallelisms (cycled).
GROUP_COLOURS = ("#fbb4ae", "#b3cde3", "#ccebc5", "#decbe4", "#fed9a6", "#ffffcc", "#e5d8bd", "#fddaec", "#f2f2f2")
COMPONENT_COLOURS = {
    "comparator": "#fdd49e", "tenor": "#a6cee3", "vehicle": "#b2df8a",
    "personification_object": "#cab2d6", "personification_content": "#fb9a99",
    "hyperbole_object": "#ffff99", "hyperbole_content": "#fdbf6f", "parallelism_marker": "#d9d9d9",
}


@dataclass
class InputDoc:
    """One document to analyse: ``id`` (file stem, ``-`` for stdin), its path
    (None for stdin) and its text."""

    id: str
    path: Optional[str]
    text: str


def read_pse_essay(path: Path) -> str:
    """Text of a PSE-I XML essay: each paragraph's words joined, paragraphs
    separated by ``\\n``. Raises CorpusFormatError naming file and line."""
    import spacy

    from .corpora.pse_i import read_essay

    return "\n".join(doc.text for doc in read_essay(path, spacy.blank("zh").vocab))


def read_text_file(path: Path) -> str:
    """UTF-8 text of ``path``. Raises ValueError naming the file and the
    line of the first byte that is not UTF-8."""
    data = path.read_bytes()
    try:
        return data.decode("utf8")
    except UnicodeDecodeError as err:
        line = data[: err.start].count(b"\n") + 1
        raise ValueError(f"{path}, line {line}: not UTF-8 text ({err.reason})") from None


def _folder_files(folder: Path, split: Optional[str]) -> List[Path]:
    if split is not None:
        from .corpora.pse_i import read_splits

        if not (folder / "splits.json").is_file():
            raise ValueError(f"--split {split} needs a PSE-I folder with splits.json, got {folder}")
        splits = read_splits(folder)
        if split not in splits:
            raise ValueError(f"unknown split {split!r}; {folder / 'splits.json'} has {sorted(splits)}")
        return [folder / "xml" / name for name in splits[split]]
    return sorted(p for p in folder.rglob("*") if p.is_file() and p.suffix.lower() in INPUT_SUFFIXES)


def expand_paths(paths: Sequence[Union[str, Path]], split: Optional[str] = None) -> List[Union[Path, str]]:
    """Files to read, in order: folders expanded, ``"-"`` kept for stdin.

    Raises FileNotFoundError for a missing path, ValueError for a file that
    is not ``.txt``/``.xml`` or a bad ``split``.
    """
    files: List[Union[Path, str]] = []
    for raw in paths:
        if str(raw) == "-":
            files.append("-")
            continue
        path = Path(raw)
        if path.is_dir():
            files.extend(_folder_files(path, split))
        elif path.is_file():
            if path.suffix.lower() not in INPUT_SUFFIXES:
                raise ValueError(f"{path}: unsupported input (expected .txt or .xml)")
            files.append(path)
        else:
            raise FileNotFoundError(f"input not found: {path}")
    return files


def iter_inputs(
    paths: Sequence[Union[str, Path]], split: Optional[str] = None, stdin: Optional[IO[str]] = None
) -> Iterator[InputDoc]:
    """The documents of ``paths`` (see module docstring), read lazily."""
    for item in expand_paths(paths, split):
        if item == "-":
            yield InputDoc("-", None, (stdin or sys.stdin).read())
        elif item.suffix.lower() == ".xml":
            yield InputDoc(item.stem, str(item), read_pse_essay(item))
        else:
            yield InputDoc(item.stem, str(item), read_text_file(item))


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


def doc_to_record(doc: Doc, doc_id: str, path: Optional[str] = None, model: Optional[Dict[str, str]] = None) -> Dict[str, Any]:
    """The ``spacy-rhetoric/analysis/v1`` record of an analysed Doc."""
    sentences = []
    for sent in sentence_spans(doc):
        if not sent.text.strip():
            continue
        labels = _rhetoric_of(sent)
        sentences.append({"start": sent.start_char, "end": sent.end_char, "text": sent.text, **labels})
    # a span of whitespace only carries no device (the documented empty result)
    components = [
        {"label": s.label_, "start": s.start_char, "end": s.end_char, "text": s.text, "score": score}
        for s, score in zip(doc.spans.get(COMPONENTS_KEY, []), _scores(doc, COMPONENTS_KEY))
        if s.text.strip()
    ]
    groups = [
        {"id": branches[0].id_ or f"{PARALLELISM_KEY}_{i}",
         "branches": [{"start": b.start_char, "end": b.end_char, "text": b.text} for b in branches]}
        for i, branches in enumerate(parallelisms(doc), start=1)
        if any(b.text.strip() for b in branches)
    ]
    clauses = [{"start": s.start_char, "end": s.end_char} for s in doc.spans.get("clauses", [])]
    return {
        "schema": SCHEMA,
        "id": doc_id,
        "path": path,
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


def summarize(sentences: List[dict], components: List[dict], groups: List[dict], n_clauses: int) -> Dict[str, Any]:
    """Counts of a record: sentences per non-literal label and level,
    components per label, parallelisms and branches."""
    summary: Dict[str, Any] = {"sentences": len(sentences), "clauses": n_clauses}
    for level in LEVELS:
        counts = Counter(lab for s in sentences for lab in s[level] if lab != LITERAL)
        summary[level] = dict(sorted(counts.items()))
    summary["components"] = dict(sorted(Counter(c["label"] for c in components).items()))
    summary["parallelisms"] = len(groups)
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
                raise ValueError(
                    f"{item.path or item.id}: {len(item.text)} characters exceed the pipeline's "
                    f"max_length {nlp.max_length}; split the text or raise --max-length"
                )
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


def _render_copy(doc: Doc, spans: List[Tuple[int, int, str]]) -> Doc:
    """A copy of ``doc`` whose ``spans["render"]`` holds ``spans`` (token
    offsets and display labels), so relabelling never touches the analysis."""
    copy = doc.copy()
    copy.spans["render"] = [Span(copy, s, e, label=label) for s, e, label in spans]
    return copy


def render_spans(doc: Doc, spans: List[Tuple[int, int, str]], colours: Dict[str, str]) -> str:
    """displaCy span rendering (HTML fragment) of ``spans`` over ``doc``."""
    from spacy import displacy

    if not spans:
        return '<p class="none">none found</p>'
    copy = _render_copy(doc, spans)
    return displacy.render(copy, style="span", options={"spans_key": "render", "colors": colours})


def doc_sections(doc: Doc) -> Dict[str, str]:
    """The three renderings of a Doc: sentence devices (``rhetoric``),
    components and parallelisms (each parallelism's branches in one colour,
    labelled ``排比 k``)."""
    sent_spans = [
        (s.start, s.end, s.label_ if score is None else f"{s.label_} {score:.2f}")
        for s, score in zip(doc.spans.get("rhetoric", []), _scores(doc, "rhetoric"))
    ]
    comp_spans = [(s.start, s.end, s.label_) for s in doc.spans.get(COMPONENTS_KEY, [])]
    par_spans, par_colours = [], {}
    for i, branches in enumerate(parallelisms(doc), start=1):
        label = f"排比 {i}"
        par_colours[label] = GROUP_COLOURS[(i - 1) % len(GROUP_COLOURS)]
        par_spans.extend((b.start, b.end, label) for b in branches)
    return {
        "rhetoric": render_spans(doc, sent_spans, {}),
        "rhetoric_components": render_spans(doc, comp_spans, COMPONENT_COLOURS),
        "parallelism": render_spans(doc, par_spans, par_colours),
    }


HTML_TEMPLATE = """<!DOCTYPE html>
<html lang="zh"><head><meta charset="utf-8"><title>{{ title }}</title>
<style>
body { font-family: sans-serif; margin: 2em; max-width: 70em; }
table { border-collapse: collapse; margin-bottom: 2em; }
td, th { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
td:first-child, th:first-child { text-align: left; }
h2 { border-top: 2px solid #444; padding-top: 0.5em; }
p.none { color: #888; }
</style></head><body>
<h1>{{ title }}</h1>
<p>{{ records|length }} document(s), model {{ model.name }} {{ model.version }}, schema {{ schema }}.</p>
<table>
<tr><th>document</th><th>sentences</th>{% for c in coarse %}<th>{{ c }}</th>{% endfor %}<th>components</th><th>parallelisms</th><th>branches</th></tr>
{% for r in records %}<tr><td><a href="#doc-{{ loop.index }}">{{ r.id }}</a></td><td>{{ r.summary.sentences }}</td>
{% for c in coarse %}<td>{{ r.summary.coarse.get(c, 0) }}</td>{% endfor %}
<td>{{ r.summary.components.values()|sum }}</td><td>{{ r.summary.parallelisms }}</td><td>{{ r.summary.branches }}</td></tr>
{% endfor %}
</table>
{% for r, s in sections %}
<h2 id="doc-{{ loop.index }}">{{ r.id }}</h2>
<p>{{ r.summary.sentences }} sentences, {{ r.summary.clauses }} clauses;
form: {{ r.summary.form or "-" }}; content: {{ r.summary.content or "-" }}; components: {{ r.summary.components or "-" }}</p>
<h3>Sentence devices (rhetoric)</h3>{{ s.rhetoric|safe }}
<h3>Components (rhetoric_components)</h3>{{ s.rhetoric_components|safe }}
<h3>Parallelisms (parallelism)</h3>{{ s.parallelism|safe }}
{% endfor %}
</body></html>
"""


def render_html(records: List[Dict[str, Any]], sections: List[Dict[str, str]], model: Dict[str, str], title: str = "Rhetorical devices") -> str:
    """The report page: a per-document summary table, then each document's
    three displaCy renderings."""
    import jinja2

    from .taxonomy import LEVEL_LABELS

    env = jinja2.Environment(autoescape=True)
    coarse = [c for c in LEVEL_LABELS["coarse"] if c != LITERAL]
    return env.from_string(HTML_TEMPLATE).render(
        title=title, records=records, sections=list(zip(records, sections)), model=model, schema=SCHEMA, coarse=coarse
    )


# --- driver ---------------------------------------------------------------------


def load_pipeline(model: str) -> Language:
    """``spacy.load(model)`` (package name or folder). Raises OSError with a
    hint when it is neither."""
    import spacy

    try:
        return spacy.load(model)
    except OSError as err:
        raise OSError(
            f"cannot load pipeline {model!r}: not an installed package or a pipeline folder "
            "(build one with `spacy project run assemble`, or pass --model PATH)"
        ) from err


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
    stdin: Optional[IO[str]] = None,
) -> Dict[str, int]:
    """Analyse ``paths`` and write JSONL (one record per document) or the
    HTML report to ``output`` (a path, ``"-"`` for stdout, or an open file).

    Returns ``{"documents": n, "sentences": n, "device_sentences": n,
    "components": n, "parallelisms": n}``. Raises ValueError for an unknown
    format, a malformed input (naming file and line) or a too long text.
    """
    from tqdm import tqdm

    if fmt not in ("jsonl", "html"):
        raise ValueError(f"unknown format {fmt!r}; use jsonl or html")
    nlp = load_pipeline(model) if isinstance(model, str) else model
    if max_length:
        nlp.max_length = max_length
    info = model_info(nlp)
    files = expand_paths(paths, split)
    totals = Counter(documents=0, sentences=0, device_sentences=0, components=0, parallelisms=0)
    records, sections = [], []
    inputs = iter_inputs(files, stdin=stdin)
    with _open_output(output) as out:
        bar = tqdm(analyze_docs(nlp, inputs, n_process=n_process, batch_size=batch_size),
                   total=len(files), unit="doc", disable=not progress, file=sys.stderr)
        for item, doc in bar:
            record = doc_to_record(doc, item.id, item.path, info)
            _add_totals(totals, record)
            if fmt == "jsonl":
                out.write(json.dumps(record, ensure_ascii=False) + "\n")
            else:
                records.append(record)
                sections.append(doc_sections(doc))
        if fmt == "html":
            out.write(render_html(records, sections, info))
    return dict(totals)


def _add_totals(totals: Counter, record: Dict[str, Any]) -> None:
    totals["documents"] += 1
    totals["sentences"] += len(record["sentences"])
    totals["device_sentences"] += sum(1 for s in record["sentences"] if any(k != LITERAL for k in s["coarse"]))
    totals["components"] += len(record["components"])
    totals["parallelisms"] += len(record["parallelisms"])


class _open_output:
    """Context manager over a path, ``"-"`` (stdout) or an open text file."""

    def __init__(self, output: Union[str, Path, IO[str]]) -> None:
        self.output, self.fh, self.own = output, None, False

    def __enter__(self) -> IO[str]:
        if hasattr(self.output, "write"):
            self.fh = self.output
        elif str(self.output) == "-":
            self.fh = sys.stdout
        else:
            path = Path(self.output)
            path.parent.mkdir(parents=True, exist_ok=True)
            self.fh, self.own = path.open("w", encoding="utf8"), True
        return self.fh

    def __exit__(self, *exc) -> None:
        if self.own:
            self.fh.close()


__all__ = ["SCHEMA", "InputDoc", "analyze", "analyze_docs", "doc_to_record", "doc_sections", "iter_inputs",
           "expand_paths", "render_html", "load_pipeline"]
