"""One renderer for the page of ``rhetoric serve`` and the static report of
``rhetoric analyze --format html``: HTML built from ``spacy-rhetoric/analysis/v1``
records (never from a Doc), so both show exactly what the JSON says.

The essay is shown as written: its text goes into a ``white-space: pre-wrap``
block character for character (no space is ever added between words,
paragraph breaks and indentation are kept), and every label, score and
group number is drawn by CSS (``::before``/``::after`` from ``data-*``
attributes), so the block's ``textContent`` is exactly the record's ``text``.

Marked elements (all carry ``data-key``, and ``data-start``/``data-end``,
the record's character offsets into ``text``; the element itself leaves out
the span's leading and trailing whitespace, e.g. a sentence's line break):

``span.rh-sent``
    every sentence of ``record["sentences"]``; ``data-sentence`` is its index
    there, ``data-rhetoric`` its coarse labels, highest score first,
    space-separated (``literal`` for a literal sentence, so
    ``[data-rhetoric~="metaphor"]`` selects metaphor sentences);
    ``data-coarse``/``data-form``/``data-content`` hold ``label:score``
    lists (the side panel and the tooltip read them).
``span.rh-unit``
    a figurative unit (ConFiguRe's figure types, the ``figurative_units``
    component): ``data-figure`` is its label, ``data-tag`` its Chinese
    name; one overline colour per figure type (:data:`FIGURE_COLOURS`).
``span.rh-branch``
    a parallelism branch: ``data-parallelism`` is the group number (1, 2,
    ... in record order), ``data-branch`` the branch number in its group.
``span.rh-comp``
    a component: ``data-component`` is its label.

Elements nest sentence > unit > branch > component. Where spans cross (a branch
running over a sentence end, a component over a branch end), the inner
element is split into pieces sharing one ``data-key``; CSS draws a
label only on the first (``rh-first``) or last (``rh-last``) piece.
"""
from __future__ import annotations

import html
import json
import re
from bisect import bisect_left, bisect_right
from functools import lru_cache
from importlib import resources
from typing import Any, Dict, List, Tuple

from ..taxonomy import COARSE_ZH, COMPONENT_ZH, COMPONENTS, CONFIGURE_FIGURES, CONTENT, FORM, LITERAL

#: Background of a sentence per coarse device (literal: none).
COARSE_COLOURS: Dict[str, str] = {
    "metaphor": "#fde0a8",
    "personification": "#c9e7c2",
    "hyperbole": "#f7c4c4",
    "parallelism": "#cfdcf5",
}
#: Underline colour per component.
COMPONENT_COLOURS: Dict[str, str] = {
    "comparator": "#e08214", "tenor": "#1f78b4", "vehicle": "#33a02c",
    "personification_object": "#6a3d9a", "personification_content": "#e31a1c",
    "hyperbole_object": "#b15928", "hyperbole_content": "#ff7f00", "parallelism_marker": "#636363",
}
#: Border colours of parallelism groups (cycled): each group's branches share one.
GROUP_COLOURS: Tuple[str, ...] = ("#d7301f", "#0570b0", "#238b45", "#88419d", "#cc4c02", "#02818a",
                                  "#ce1256", "#525252", "#8c6d31")

#: Overline colour per figure type of a figurative unit (ConFiguRe's 12).
FIGURE_COLOURS: Dict[str, str] = {
    "metaphor": "#e6550d", "personification": "#31a354", "metonymy": "#756bb1", "hyperbole": "#de2d26",
    "irony": "#636363", "synaesthesia": "#e7ba52", "rhetorical_question": "#3182bd", "parallelism": "#08519c",
    "duality": "#9e9ac8", "repetition": "#a55194", "antithesis": "#8c6d31", "quote": "#17becf",
}

_LEVEL_OF = {"sent": 0, "unit": 1, "branch": 2, "comp": 3}
_SPACE_RUN = re.compile(r"\s+")


def label_zh(label: str, level: str = "coarse") -> str:
    """The Chinese name of a label (the label itself when it has none)."""
    if label == LITERAL:
        return "字面"
    if level == "coarse":
        return COARSE_ZH.get(label, label)
    if level == "form":
        return FORM.get(label, (None, label))[1]
    if level == "content":
        return CONTENT.get(label, (None, label))[1]
    return COMPONENT_ZH.get(label, label)


def group_colour(number: int) -> str:
    return GROUP_COLOURS[(number - 1) % len(GROUP_COLOURS)]


def devices_of(sentence: Dict[str, Any]) -> List[str]:
    """A sentence's non-literal coarse labels, highest score first."""
    coarse = sentence.get("coarse") or {}
    return [lab for lab, _ in sorted(coarse.items(), key=lambda kv: -float(kv[1] or 0)) if lab != LITERAL]


def _scores_attr(values: Dict[str, Any]) -> str:
    return " ".join(f"{lab}:{float(score):.2f}" for lab, score in sorted((values or {}).items(), key=lambda kv: -float(kv[1] or 0)))


def _tooltip(sentence: Dict[str, Any]) -> str:
    lines = []
    for level, title in (("coarse", "修辞"), ("form", "形式 form"), ("content", "内容 content")):
        values = sentence.get(level) or {}
        if values:
            parts = ", ".join(f"{label_zh(lab, level)} {lab} {float(s):.2f}" for lab, s in
                              sorted(values.items(), key=lambda kv: -float(kv[1] or 0)))
            lines.append(f"{title}: {parts}")
    return "\n".join(lines)


class _Mark:
    __slots__ = ("kind", "start", "end", "key", "attrs", "order")

    def __init__(self, kind: str, start: int, end: int, key: str, attrs: Dict[str, str], order: int) -> None:
        self.kind, self.start, self.end, self.key, self.attrs, self.order = kind, start, end, key, attrs, order

    @property
    def sort_key(self) -> Tuple[int, int, int, int]:
        return (_LEVEL_OF[self.kind], self.start, -self.end, self.order)


class _Whitespace:
    """The runs of whitespace of a text (``str.isspace``, which ``\\s``
    matches exactly), found once, so that trimming a span costs
    O(log runs) however much whitespace it starts or ends with."""

    def __init__(self, text: str) -> None:
        runs = [m.span() for m in _SPACE_RUN.finditer(text)]
        self.starts = [s for s, _ in runs]
        self.ends = [e for _, e in runs]

    def _run_at(self, i: int) -> int:
        """Index of the run holding position ``i``, or -1."""
        k = bisect_right(self.starts, i) - 1
        return k if k >= 0 and i < self.ends[k] else -1

    def trim(self, start: int, end: int) -> Tuple[int, int]:
        """``(lo, hi)``: ``[start, end)`` without its leading and trailing
        whitespace (``lo == hi`` when nothing else is left)."""
        k = self._run_at(start) if start < end else -1
        lo = min(self.ends[k], end) if k >= 0 else start
        k = self._run_at(end - 1) if lo < end else -1
        hi = max(self.starts[k], lo) if k >= 0 else end
        return lo, max(hi, lo)


def _marks(record: Dict[str, Any]) -> List[_Mark]:
    text = record.get("text") or ""
    n = len(text)
    marks: List[_Mark] = []
    space = _Whitespace(text)

    def add(kind: str, span: Dict[str, Any], key: str, attrs: Dict[str, str]) -> None:
        try:
            start, end = int(span["start"]), int(span["end"])
        except (KeyError, TypeError, ValueError):
            return
        start, end = max(0, start), min(n, end)
        # the element covers the span without its outer whitespace (a
        # sentence's final line break stays outside, so its badge ends the
        # line); data-start/data-end keep the record's offsets
        lo, hi = space.trim(start, end)
        if lo < hi:
            marks.append(_Mark(kind, lo, hi, key, {"data-start": str(start), "data-end": str(end), **attrs}, len(marks)))

    for i, sent in enumerate(record.get("sentences") or []):
        devices = devices_of(sent)
        attrs = {
            "data-sentence": str(i),
            "data-rhetoric": " ".join(devices) if devices else (LITERAL if LITERAL in (sent.get("coarse") or {}) else ""),
            "data-coarse": _scores_attr(sent.get("coarse")),
            "data-form": _scores_attr(sent.get("form")),
            "data-content": _scores_attr(sent.get("content")),
            "title": _tooltip(sent),
        }
        if devices:
            coarse = sent.get("coarse") or {}
            attrs["data-badge"] = " ".join(f"{label_zh(d)} {float(coarse[d]):.2f}" for d in devices)
            colours = [COARSE_COLOURS.get(d, "#eeeeee") for d in devices]
            if len(colours) == 1:
                attrs["style"] = f"background-color: {colours[0]}"
            else:  # one stripe per device
                stops = ", ".join(f"{c} {k * 10}px {(k + 1) * 10}px" for k, c in enumerate(colours))
                attrs["style"] = f"background: repeating-linear-gradient(135deg, {stops})"
        if not attrs["data-rhetoric"]:
            del attrs["data-rhetoric"]
        add("sent", sent, f"s{i}", attrs)
    for u, unit in enumerate(record.get("figurative_units") or []):
        label = str(unit.get("label", ""))
        name = str(unit.get("label_zh") or CONFIGURE_FIGURES.get(label, label))
        add("unit", unit, f"u{u}", {
            "data-figure": label, "data-tag": name, "style": f"--rh-unit: {FIGURE_COLOURS.get(label, '#444444')}",
            "title": f"{name} {label.replace('_', ' ')} (figurative unit)",
        })
    for g, group in enumerate(record.get("parallelisms") or [], start=1):
        branches = group.get("branches") or []
        kind = str(group.get("kind") or "in_paragraph")
        # a cross-paragraph group (branches in several paragraphs) says so in its tag
        tag = "跨段排比" if kind == "cross_paragraph" else "排比"
        for b, branch in enumerate(branches, start=1):
            add("branch", branch, f"p{g}.{b}", {
                "data-parallelism": str(g), "data-branch": str(b), "data-group-id": str(group.get("id", "")),
                "data-parallelism-kind": kind, "data-tag": f"{tag}{g}·{b}", "style": f"--rh-group: {group_colour(g)}",
                "title": f"{tag} parallelism {g} ({kind.replace('_', '-')}), branch {b} of {len(branches)}",
            })
    for c, comp in enumerate(record.get("components") or []):
        label = str(comp.get("label", ""))
        score = comp.get("score")
        add("comp", comp, f"c{c}", {
            "data-component": label, "data-label": label_zh(label, "component"),
            "style": f"--rh-comp: {COMPONENT_COLOURS.get(label, '#444444')}",
            "title": f"{label_zh(label, 'component')} {label}" + ("" if score is None else f" {float(score):.2f}"),
        })
    return marks


def _open_tag(mark: _Mark, first: bool, last: bool) -> str:
    classes = [f"rh-{mark.kind}"] + (["rh-first"] if first else []) + (["rh-last"] if last else [])
    attrs = {"class": " ".join(classes), "data-key": mark.key, **mark.attrs}
    return "<span " + " ".join(f'{k}="{html.escape(v, quote=True)}"' for k, v in attrs.items()) + ">"


def render_essay(record: Dict[str, Any]) -> str:
    """The record's text with its sentences, branches and components marked
    (module docstring): a ``div.rh-essay`` whose text content is ``text``."""
    text = record.get("text") or ""
    marks = _marks(record)
    cuts = sorted({0, len(text), *(m.start for m in marks), *(m.end for m in marks)})
    # one sweep over the cuts: the marks covering the piece [a, b) are those
    # with start <= a < end (every end is a cut), kept per level in sort_key
    # order as they open and close, so the work grows with the marks open
    # at each cut, not with all marks
    opening: Dict[int, List[_Mark]] = {}
    closing: Dict[int, List[_Mark]] = {}
    for m in marks:
        opening.setdefault(m.start, []).append(m)
        closing.setdefault(m.end, []).append(m)
    open_marks: Tuple[List[_Mark], ...] = tuple([] for _ in _LEVEL_OF)  # per level, in sort_key order
    open_keys: Tuple[List[Tuple[int, int, int, int]], ...] = tuple([] for _ in _LEVEL_OF)
    out: List[str] = []
    pieces: Dict[str, List[int]] = {}  # mark key -> positions of its opening tags in out
    stack: List[_Mark] = []
    for a, b in zip(cuts, cuts[1:]):
        for m in closing.get(a, ()):
            level, key = _LEVEL_OF[m.kind], m.sort_key
            i = bisect_left(open_keys[level], key)
            del open_keys[level][i], open_marks[level][i]
        for m in opening.get(a, ()):
            level, key = _LEVEL_OF[m.kind], m.sort_key
            i = bisect_left(open_keys[level], key)
            open_keys[level].insert(i, key)
            open_marks[level].insert(i, m)
        covering = [m for level in open_marks for m in level]
        keep = 0
        while keep < len(stack) and keep < len(covering) and stack[keep] is covering[keep]:
            keep += 1
        while len(stack) > keep:
            stack.pop()
            out.append("</span>")
        for m in covering[keep:]:
            pieces.setdefault(m.key, []).append(len(out))
            out.append("")  # the opening tag, written below once the pieces are known
            stack.append(m)
        out.append(html.escape(text[a:b], quote=False))
    out.extend("</span>" for _ in stack)
    for m in marks:
        positions = pieces.get(m.key, [])
        for k, pos in enumerate(positions):
            out[pos] = _open_tag(m, first=k == 0, last=k == len(positions) - 1)
    return '<div class="rh-essay" lang="zh">' + "".join(out) + "</div>"


def render_summary(record: Dict[str, Any]) -> str:
    """Counts per device (sentences), form, content, components, and the
    number of parallelisms and branches: a ``div.rh-summary``."""
    summary = record.get("summary") or {}
    rows = []
    coarse = summary.get("coarse") or {}
    cells = "".join(
        f'<tr data-summary="{lab}"><td><span class="rh-swatch" style="background-color: {COARSE_COLOURS[lab]}"></span>'
        f'{label_zh(lab)} {lab}</td><td class="rh-count">{int(coarse.get(lab, 0))}</td></tr>'
        for lab in COARSE_COLOURS)
    rows.append(f'<table class="rh-counts"><tr><th>修辞 device</th><th>句 sentences</th></tr>{cells}'
                f'<tr data-summary="parallelism-groups"><td>排比组 parallelism groups (branches)</td>'
                f'<td class="rh-count">{int(summary.get("parallelisms", 0))} ({int(summary.get("branches", 0))})</td></tr>'
                f'<tr data-summary="cross-paragraph-groups"><td>其中跨段 of them across paragraphs</td>'
                f'<td class="rh-count">{int(summary.get("cross_paragraph_parallelisms", 0))}</td></tr>'
                f'</table>')
    details = []
    for level, title in (("form", "形式 form"), ("content", "内容 content"), ("components", "成分 components")):
        counts = summary.get(level) or {}
        lvl = "component" if level == "components" else level
        items = ", ".join(f"{label_zh(lab, lvl)} {lab} {n}" for lab, n in counts.items()) or "–"
        details.append(f'<p data-summary="{level}"><b>{title}:</b> {html.escape(items)}</p>')
    if "figurative_units" in record:
        counts: Dict[str, int] = {}
        for unit in record.get("figurative_units") or []:
            label = str(unit.get("label", ""))
            counts[label] = counts.get(label, 0) + 1
        items = ", ".join(f"{CONFIGURE_FIGURES.get(lab, lab)} {lab} {n}" for lab, n in sorted(counts.items(), key=lambda kv: -kv[1])) or "–"
        details.append(f'<p data-summary="figurative_units"><b>修辞格 figures:</b> {html.escape(items)}</p>')
    head = (f'<p class="rh-totals">{int(summary.get("sentences", 0))} 句 sentences, '
            f'{int(summary.get("clauses", 0))} 分句 clauses, {int(record.get("n_chars", len(record.get("text") or "")))} 字 characters</p>')
    return '<div class="rh-summary">' + head + "".join(rows) + "".join(details) + "</div>"


def render_legend(figures: bool = True) -> str:
    """What the colours, underlines and boxes mean: a ``div.rh-legend``;
    with ``figures``, the overline colour of each of the 12 figure types of
    the figurative units too."""
    devices = "".join(
        f'<li><span class="rh-swatch" style="background-color: {c}"></span>{label_zh(lab)} {lab}</li>'
        for lab, c in COARSE_COLOURS.items())
    comps = "".join(
        f'<li><span class="rh-underline" style="--rh-comp: {COMPONENT_COLOURS[lab]}">{label_zh(lab, "component")}</span> {lab}</li>'
        for lab in COMPONENTS)
    units = "".join(
        f'<li><span class="rh-overline" style="--rh-unit: {FIGURE_COLOURS[lab]}">{zh}</span> {lab.replace("_", " ")}</li>'
        for lab, zh in CONFIGURE_FIGURES.items())
    units = f'<p><b>修辞格 figurative units</b> (overlined)</p><ul class="rh-legend-figures">{units}</ul>' if figures else ""
    return ('<div class="rh-legend"><b>图例 legend</b>'
            f'<ul class="rh-legend-devices">{devices}<li><span class="rh-swatch rh-swatch-literal"></span>字面 literal (no colour)</li></ul>'
            f'<ul class="rh-legend-components">{comps}</ul>' + units +
            '<p><span class="rh-legend-branch">排比n·k</span> branch k of parallelism n (one border colour per parallelism); '
            '跨段排比n·k: a parallelism whose branches are sentences of different paragraphs</p>'
            '<p>Scores follow each device sentence; hover over or click a sentence for form, content and scores.</p></div>')


def render_record(record: Dict[str, Any], *, legend: bool = True) -> str:
    """One document: summary, legend and the marked essay, in a
    ``div.rh-doc`` (the page of ``rhetoric serve``; the static report
    passes ``legend=False`` and draws one legend for the page). The legend
    lists the figure types when the record has ``figurative_units``."""
    if "error" in record:
        err = record.get("error") or {}
        return (f'<div class="rh-doc rh-failed"><p class="rh-error">{html.escape(str(err.get("type", "error")))}: '
                f'{html.escape(str(err.get("message", "")))}</p></div>')
    parts = ['<div class="rh-doc" data-doc-id="', html.escape(str(record.get("id", "")), quote=True), '">',
             '<div class="rh-side-info">', render_summary(record),
             render_legend("figurative_units" in record) if legend else "", "</div>",
             render_essay(record), "</div>"]
    return "".join(parts)


@lru_cache(maxsize=None)
def static_text(name: str) -> str:
    """A file of ``spacy_rhetoric/serve/static`` (CSS, JS, the page)."""
    # read as package data of spacy_rhetoric: importing spacy_rhetoric.serve would need FastAPI
    return resources.files("spacy_rhetoric").joinpath("serve", "static", name).read_text(encoding="utf8")


def inline_json(value: Any) -> str:
    """``value`` as JSON safe inside a ``<script>`` element."""
    return json.dumps(value, ensure_ascii=False).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


__all__ = ["COARSE_COLOURS", "COMPONENT_COLOURS", "FIGURE_COLOURS", "GROUP_COLOURS", "render_essay", "render_summary", "render_legend",
           "render_record", "static_text", "label_zh", "devices_of", "group_colour"]
