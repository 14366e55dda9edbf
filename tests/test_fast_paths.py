"""The array-based fast paths give what the plain per-token definitions give.

Each fast path is checked against the straightforward code it
replaced, written out here as the reference, on random text with line
breaks, carriage returns and spaces, and on real PSE-I essays.
"""
from __future__ import annotations

from difflib import SequenceMatcher
from typing import List, Optional, Tuple

import numpy
import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.pipeline.spancat import SpanCategorizer
from thinc.api import get_current_ops

from spacy_rhetoric.annotation import ParagraphClipper
from spacy_rhetoric.components.rhetoric_components import device_ngrams
from spacy_rhetoric.ml import cross_paragraph as cp

CJK = st.characters(min_codepoint=0x4E00, max_codepoint=0x4E40)
MIXED = st.text(alphabet=st.one_of(CJK, st.sampled_from(list("，。！？；：“”\n\r\t 　abc123"))), max_size=120)


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("zh")


def reference_clip(doc, start: int, end: int) -> Optional[Tuple[int, int]]:
    """The per-token definition of ``clip_to_paragraph``."""
    pieces: List[Tuple[int, int]] = []
    piece_start = start
    for i in range(start, end + 1):
        if i == end or "\n" in doc[i].text or "\r" in doc[i].text:
            s, e = piece_start, i
            while s < e and doc[s].is_space:
                s += 1
            while e > s and doc[e - 1].is_space:
                e -= 1
            if s < e:
                pieces.append((s, e))
            piece_start = i + 1
    return max(pieces, key=lambda p: (p[1] - p[0], -p[0])) if pieces else None


@settings(max_examples=60, deadline=None, derandomize=True)
@given(text=MIXED)
def test_paragraph_clipper_equals_per_token_definition(text):
    doc = spacy.blank("zh").make_doc(text)
    clip = ParagraphClipper(doc)
    for start in range(len(doc) + 1):
        for end in range(start, len(doc) + 1):
            assert clip(start, end) == reference_clip(doc, start, end), (text, start, end)


def test_paragraph_clipper_on_an_essay(nlp, pse_dir):
    from spacy_rhetoric.analysis.io import iter_inputs

    text = next(item.text for item in iter_inputs([pse_dir], split="test"))
    doc = nlp.make_doc(text.replace("\n", "\r\n", 2))
    clip = ParagraphClipper(doc)
    assert clip.breaks, "the essay has paragraphs"
    for sent in doc.sents if doc.has_annotation("SENT_START") else [doc[:]]:
        assert clip(sent.start, sent.end) == reference_clip(doc, sent.start, sent.end)
    for start in range(0, len(doc), 7):
        end = min(len(doc), start + 40)
        assert clip(start, end) == reference_clip(doc, start, end)


@settings(max_examples=40, deadline=None, derandomize=True)
@given(text=MIXED, cut=st.lists(st.integers(min_value=0, max_value=60), max_size=6))
def test_device_ngrams_equal_per_token_loop(text, cut):
    doc = spacy.blank("zh").make_doc(text)
    bounds = sorted({min(c, len(doc)) for c in cut} | {0, len(doc)})
    doc.spans["rhetoric"] = [doc[a:b] for a, b in zip(bounds, bounds[1:]) if b > a]
    for span in doc.spans["rhetoric"]:
        span.label_ = "metaphor"
    sizes = [1, 2, 3, 5]
    expected = []
    edge = [not (t.is_punct or t.is_space) for t in doc]
    for span in sorted(doc.spans["rhetoric"], key=lambda s: (s.start, s.end)):
        for size in sizes:
            expected += [(i, i + size) for i in range(span.start, span.end - size + 1) if edge[i] and edge[i + size - 1]]
    got = device_ngrams([doc], sizes, "rhetoric", get_current_ops())
    assert [tuple(r) for r in got.dataXd.tolist()] == expected
    assert got.lengths.tolist() == [len(expected)]


def reference_pair_features(a: str, b: str, distance: int) -> List[float]:
    """``pair_features`` as first written: one fresh matcher per pair."""
    full_a, full_b = cp._core(a), cp._core(b)
    ca, cb = full_a[: cp.HEAD], full_b[: cp.HEAD]
    shorter = max(1, min(len(ca), len(cb)))
    prefix = cp._common_prefix(ca, cb)
    suffix = cp._common_prefix(full_a[::-1][: cp.HEAD], full_b[::-1][: cp.HEAD])
    matcher = SequenceMatcher(None, ca, cb, autojunk=False)
    longest = matcher.find_longest_match(0, len(ca), 0, len(cb)).size if ca and cb else 0
    ga, gb = cp._bigrams(ca), cp._bigrams(cb)
    dice = 2 * len(ga & gb) / (len(ga) + len(gb)) if ga and gb else 0.0
    head_a, head_b = a.strip()[-1:] not in cp.SENTENCE_END, b.strip()[-1:] not in cp.SENTENCE_END
    return [min(prefix, 6) / 6, prefix / shorter, min(suffix, 4) / 4, min(longest, 8) / 8, longest / shorter,
            matcher.ratio(), dice, min(len(full_a), len(full_b)) / max(1, len(full_a), len(full_b)),
            float(head_a and head_b), float(head_a != head_b), float(len(full_a) <= 12 and len(full_b) <= 12),
            1.0 / distance, float(bool(ca) and bool(cb) and ca[0] == cb[0]), float(a.count("，") == b.count("，"))]


def test_doc_features_equal_one_matcher_per_pair(nlp, pse_dir):
    from spacy_rhetoric.analysis.io import iter_inputs

    texts = [item.text for item in iter_inputs([pse_dir], split="test")][:12]
    n_pairs = 0
    for text in texts:
        doc = nlp.make_doc(text)
        for i, token in enumerate(doc):  # one sentence per line
            token.is_sent_start = i == 0 or "\n" in doc[i - 1].text
        cands, pairs, feats = cp.doc_features(doc, window=8)
        expected = [reference_pair_features(cands[i][2], cands[j][2], j - i) for i, j in pairs]
        numpy.testing.assert_array_equal(feats, numpy.asarray(expected, dtype="f").reshape(feats.shape))
        n_pairs += len(pairs)
    assert n_pairs > 50
    assert cp.pair_features("温暖是手", "温暖是爱", 2) == reference_pair_features("温暖是手", "温暖是爱", 2)


def test_label_thresholds_equal_spacy_decoding_then_filter(nlp):
    """Per-label thresholds in one array comparison give the spans (and
    order) of spaCy's multi-label decoding at the lowest threshold followed
    by each label's own, including scores exactly at a threshold."""
    from spacy_rhetoric.components.rhetoric_components import RhetoricComponents

    nlp = spacy.blank("zh")
    comp = nlp.add_pipe("rhetoric_components", config={"thresholds": {"tenor": 0.35, "vehicle": 0.7}})
    for label in ("tenor", "vehicle", "comparator"):
        comp.add_label(label)
    doc = nlp.make_doc("我的心像一只小鸟在天空中飞翔")
    rng = numpy.random.default_rng(0)
    n = 30
    starts = rng.integers(0, len(doc) - 1, n)
    indices = numpy.stack([starts, numpy.minimum(starts + rng.integers(1, 4, n), len(doc))], axis=1).astype("i")
    scores = rng.random((n, 3)).astype("f")
    scores[:5] = numpy.float32(0.35)
    scores[5:10] = numpy.float32(0.7)
    scores[10:12] = numpy.float32(0.5)
    got = RhetoricComponents._label_thresholded(comp, doc, indices, scores)

    comp.cfg["threshold"] = 0.35
    spacy_group = SpanCategorizer._make_span_group_multilabel(comp, doc, indices, scores)
    comp.cfg["threshold"] = 0.5
    limits = {"tenor": 0.35, "vehicle": 0.7}
    # as the filter compared them: a float32 score against a Python float
    keep = [bool(spacy_group.attrs["scores"][i] >= limits.get(s.label_, 0.5)) for i, s in enumerate(spacy_group)]
    expected = [(s.start, s.end, s.label_) for s, k in zip(spacy_group, keep) if k]
    assert [(s.start, s.end, s.label_) for s in got] == expected
    numpy.testing.assert_array_equal(got.attrs["scores"], spacy_group.attrs["scores"][numpy.asarray(keep)])
    assert len(expected) > 10
