"""``rhetoric_simile_rules``: the rule baseline for similes, tenors and vehicles.

The simplest rules we can state, evaluated with the same scorers as the
trained components (``rhetoric_textcat``, ``rhetoric_components``):

1. Sentence: every sentence containing a word with the comparator character
   像 is ``metaphor`` (coarse) / ``simile`` (form); all others are literal.
2. Comparator: the first word of the sentence containing 像.
3. Tenor: scanning left from the comparator within its clause (stopping at
   punctuation), the nearest word that is not a function word
   (:data:`FUNCTION_WORDS`: adverbs and particles such as 就, 也, 好, 的).
4. Vehicle: the words after the comparator up to the first closing marker
   (:data:`CLOSERS`: 一样, 一般, 似的, ...) or punctuation; the vehicle is the
   last of them (the head of a Chinese noun phrase comes last).

Scores are 1.0. The rules use gold words only, no part-of-speech tags.
"""
from __future__ import annotations

from typing import Iterable, List, Optional

import numpy
from spacy.language import Language
from spacy.tokens import Doc, Span, SpanGroup

from .. import extensions  # noqa: F401  registers Span._.rhetoric
from ..annotation import COMPONENTS_KEY, LEVEL_SPAN_KEYS, mark_one_sentence, sentence_spans

COMPARATOR_CHAR = "像"
FUNCTION_WORDS = frozenset(
    "就 也 都 好 还 真 正 又 便 却 简直 仿佛 是 的 了 得 地 着 很 非常 一 总 更 才 竟 似乎 完全 那么 这么 多么 "
    "就是 正是 也是 都是 活 宛如 犹如 好似 像是 不 没 没有 会 能 要 在 把 被 让 使 得".split()
)
CLOSERS = frozenset("一样 一般 般 似的 似地 那样 这样 样 一 似".split())



def _is_punct(token) -> bool:
    return token.is_punct or not any(ch.isalnum() for ch in token.text)


def simile_components(sent: Span) -> List[Span]:
    """Comparator, tenor and vehicle spans of one sentence by the module's
    rules (doc-level token offsets); empty without a 像-word."""
    comp = next((t for t in sent if COMPARATOR_CHAR in t.text), None)
    if comp is None:
        return []
    doc = sent.doc
    found = [Span(doc, comp.i, comp.i + 1, label="comparator")]
    for i in range(comp.i - 1, sent.start - 1, -1):
        if _is_punct(doc[i]):
            break
        if doc[i].text not in FUNCTION_WORDS:
            found.append(Span(doc, i, i + 1, label="tenor"))
            break
    last: Optional[int] = None
    for i in range(comp.i + 1, sent.end):
        if _is_punct(doc[i]) or doc[i].text in CLOSERS:
            break
        last = i
    if last is not None:
        found.append(Span(doc, last, last + 1, label="vehicle"))
    return sorted(found, key=lambda s: s.start)


class SimileRules:
    """Rule baseline component (rules in the module docstring). Writes the
    same outputs as ``rhetoric_textcat`` (``sent._.rhetoric``,
    ``doc.spans["rhetoric"]``/``["rhetoric_form"]``/``["rhetoric_content"]``)
    and ``rhetoric_components`` (``doc.spans["rhetoric_components"]``)."""

    def __init__(self, name: str = "rhetoric_simile_rules") -> None:
        self.name = name

    def __call__(self, doc: Doc) -> Doc:
        groups = {key: [] for key in LEVEL_SPAN_KEYS.values()}
        components: List[Span] = []
        for sent in sentence_spans(doc):
            parts = simile_components(sent)
            if parts:
                sent._.rhetoric = {"coarse": {"metaphor": 1.0}, "form": {"simile": 1.0}, "content": {}}
                groups["rhetoric"].append(Span(doc, sent.start, sent.end, label="metaphor"))
                groups["rhetoric_form"].append(Span(doc, sent.start, sent.end, label="simile"))
                components.extend(parts)
            else:
                sent._.rhetoric = {lv: {"literal": 1.0} for lv in ("coarse", "form", "content")}
        mark_one_sentence(doc)
        for key, spans in groups.items():
            doc.spans[key] = SpanGroup(doc, name=key, spans=spans, attrs={"scores": numpy.ones(len(spans), dtype="f")})
        doc.spans[COMPONENTS_KEY] = SpanGroup(
            doc, name=COMPONENTS_KEY, spans=components, attrs={"scores": numpy.ones(len(components), dtype="f")}
        )
        return doc

    def pipe(self, docs: Iterable[Doc], batch_size: int = 128) -> Iterable[Doc]:
        for doc in docs:
            yield self(doc)

    def score(self, examples, **kwargs):
        """Both the classification and the component scores."""
        from ..scorers.classification import score_rhetoric_classification
        from ..scorers.components import score_rhetoric_components

        return {**score_rhetoric_classification(examples), **score_rhetoric_components(examples)}


@Language.factory("rhetoric_simile_rules", assigns=["doc.spans", "span._.rhetoric"])
def make_simile_rules(nlp: Language, name: str) -> SimileRules:
    """Factory of :class:`SimileRules`."""
    return SimileRules(name)
