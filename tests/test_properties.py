"""Property tests of every shipped pipeline on random text: CJK, ASCII,
emoji, control characters, very long lines, punctuation only.

Whatever the text: no exception; every span inside the doc; no component or
branch that is empty or starts/ends with whitespace; the branches of a
parallelism are at least two, non-overlapping and in document order;
every score is within [0, 1].
"""
from __future__ import annotations

import math
from functools import lru_cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import spacy_rhetoric

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted(p.parent for p in (ROOT / "pipelines").glob("*/config.cfg"))

CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x9FFF)
PUNCT = st.sampled_from(list("，。！？；：…—“”‘’、《》（）!?.,;:\"'()\n\r\t 　"))
EMOJI = st.characters(min_codepoint=0x1F300, max_codepoint=0x1FAFF)
CONTROL = st.characters(min_codepoint=0, max_codepoint=0x1F)
ESSAYISH = st.text(alphabet=st.one_of(CJK, CJK, CJK, PUNCT), max_size=400)
TEXTS = st.one_of(
    ESSAYISH,
    st.text(max_size=200),
    st.text(alphabet=st.one_of(CJK, PUNCT, EMOJI, CONTROL, st.characters(max_codepoint=0x7F)), max_size=300),
    st.text(alphabet=PUNCT, max_size=200),
    # parallel clauses with a repeated marker, so the linker has work to do
    st.builds(lambda marker, items, end: "，".join(marker + item for item in items) + end,
              st.text(alphabet=CJK, min_size=1, max_size=3), st.lists(st.text(alphabet=CJK, min_size=1, max_size=8), min_size=2, max_size=6),
              st.sampled_from(["。", "！", "", "\n", " "])),
    st.builds(lambda piece, n: piece * n, st.text(alphabet=st.one_of(CJK, PUNCT), min_size=1, max_size=12),
              st.integers(min_value=100, max_value=600)),
)


@lru_cache(maxsize=None)
def load(path: Path):
    import spacy

    return spacy.load(path)


def check_doc(doc) -> None:
    n = len(doc)
    for key, group in doc.spans.items():
        for span in group:
            assert 0 <= span.start <= span.end <= n, key
        scores = group.attrs.get("scores")
        if scores is not None:
            assert all(0.0 <= float(s) <= 1.0 and not math.isnan(float(s)) for s in scores), key
        if key in ("rhetoric_components", "parallelism"):
            for span in group:
                assert span.text.strip() == span.text and span.text, (key, span.text)
        if key in ("rhetoric", "rhetoric_form", "rhetoric_content"):
            # a labelled sentence is a sentence of doc.sents, never whitespace only
            sents = {(s.start, s.end) for s in doc.sents}
            for span in group:
                assert (span.start, span.end) in sents and span.text.strip(), (key, span.text)
    for branches in spacy_rhetoric.parallelisms(doc):
        assert len(branches) >= 2
        for a, b in zip(branches, branches[1:]):
            assert a.end <= b.start, "branches overlap or are out of document order"
    for sent in doc.sents if doc.has_annotation("SENT_START") else []:
        value = sent._.rhetoric if sent.has_extension("rhetoric") else None
        value = value or {}
        for labels in [*(value.get(lv, {}) for lv in ("coarse", "form", "content")), *value.get("scores", {}).values()]:
            assert all(0.0 <= float(s) <= 1.0 for s in labels.values())


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.name for p in PIPELINES])
@settings(max_examples=80, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(text=TEXTS)
def test_any_text_gives_a_well_formed_analysis(pipeline: Path, text: str):
    check_doc(load(pipeline)(text))


def test_clip_to_paragraph():
    import spacy

    from spacy_rhetoric.annotation import clip_to_paragraph

    doc = spacy.blank("zh").make_doc("绚丽的人生\n人生是漫长的等待")
    newline = next(t.i for t in doc if "\n" in t.text)
    assert clip_to_paragraph(doc, 0, len(doc)) == (newline + 1, len(doc))
    assert clip_to_paragraph(doc, 0, newline + 1) == (0, newline)
    assert clip_to_paragraph(doc, newline, newline + 1) is None


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.name for p in PIPELINES])
def test_real_essays_spans_stay_in_their_paragraph(pipeline: Path, pse_dir: Path):
    """A line break ends a paragraph: on the 42 PSE-I test essays (one line
    per paragraph, the title on the first line) no branch or component
    crosses one or has whitespace at an edge, and a labelled sentence holds
    one only at its end (its sentence's, as in ``doc.sents``)."""
    from spacy_rhetoric.analysis.io import iter_inputs

    texts = [item.text for item in iter_inputs([pse_dir], split="test")]
    n_branches = 0
    for doc in load(pipeline).pipe(texts):
        check_doc(doc)
        for key in ("parallelism", "rhetoric_components", "rhetoric", "rhetoric_form", "rhetoric_content"):
            for span in doc.spans.get(key, []):
                sentence = key in ("rhetoric", "rhetoric_form", "rhetoric_content")
                assert "\n" not in (span.text.rstrip() if sentence else span.text), (key, span.text)
                n_branches += key == "parallelism"
    assert n_branches > 0
