"""Paragraph-wise encoding (``spacy_rhetoric/ml/paragraphs.py``): the layer
equals ``spacy.Tok2Vec.v2`` on one paragraph and runs paragraphs apart; the
transformer span getter restarts at line breaks; and, the way users call the
shipped pipelines, a paragraph gets the same analysis alone as inside its
essay, and a heading line no longer takes the labels of the paragraph below
it."""
from __future__ import annotations

from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from thinc.api import Config

from spacy_rhetoric.ml.paragraphs import configure_paragraph_strided_spans, paragraph_bounds

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted(p.parent for p in (ROOT / "pipelines").glob("*/config.cfg"))
TOLERANCE = 1e-5

TOK2VEC = """
[model]
@architectures = "{arch}"

[model.embed]
@architectures = "spacy.MultiHashEmbed.v2"
width = 16
attrs = ["NORM","PREFIX","SUFFIX"]
rows = [200,100,100]
include_static_vectors = false

[model.encode]
@architectures = "spacy_rhetoric.CNNBiLSTMEncoder.v1"
width = 16
cnn_depth = 1
window_size = 1
maxout_pieces = 2
lstm_depth = 1
dropout = 0.0
"""


def _doc(nlp, pieces):
    words = [w for p in pieces for w in p]
    return Doc(nlp.vocab, words=words, spaces=[False] * len(words))


def _model(arch: str):
    from spacy.util import registry

    return registry.resolve(Config().from_str(TOK2VEC.format(arch=arch)))["model"]


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("zh")


def test_paragraph_bounds_cover_every_token_once(nlp):
    doc = _doc(nlp, [["题", "目"], ["\n"], ["第", "一", "段", "。"], ["\n", "\n", " "], ["第", "二"]])
    assert paragraph_bounds(doc) == [(0, 2), (2, 3), (3, 7), (7, 10), (10, 12)]
    assert paragraph_bounds(_doc(nlp, [["一", "句", "。"]])) == [(0, 3)]
    assert paragraph_bounds(_doc(nlp, [["一", "。", "\n"]])) == [(0, 2), (2, 3)]
    assert paragraph_bounds(_doc(nlp, [["一", " ", "\n", "二"]])) == [(0, 1), (1, 3), (3, 4)]
    assert paragraph_bounds(Doc(nlp.vocab, words=[])) == [(0, 0)]
    # A space without a line break does not end a paragraph.
    assert paragraph_bounds(_doc(nlp, [["甲", " ", "乙"]])) == [(0, 3)]


def test_layer_equals_tok2vec_on_a_paragraph_and_splits_an_essay(nlp):
    plain, para = _model("spacy.Tok2Vec.v2"), _model("spacy_rhetoric.ParagraphTok2Vec.v1")
    p1, p2 = ["他", "的", "笑", "容", "像", "花", "。", "\n"], ["月", "亮", "像", "船", "。"]
    essay = _doc(nlp, [p1, p2])
    plain.initialize(X=[essay])
    para.from_bytes(plain.to_bytes())  # same node layout: the weights load unchanged
    single = _doc(nlp, [p2])
    assert numpy.array_equal(para.predict([single])[0], plain.predict([single])[0])
    Y = para.predict([essay])[0]
    assert Y.shape == (len(essay), 16)
    # each paragraph is encoded as the same text without its line break
    alone = plain.predict([_doc(nlp, [p1[:-1]]), _doc(nlp, [["\n"]]), _doc(nlp, [p2])])
    assert numpy.allclose(Y, numpy.concatenate(alone), atol=1e-6)
    assert not numpy.allclose(Y, plain.predict([essay])[0], atol=1e-3)
    # Gradients reach the embeddings through the split.
    Yt, backprop = para.begin_update([essay, single])
    backprop([numpy.ones_like(y) for y in Yt])
    grads = [g for node in para.walk() for name in node.param_names if node.has_grad(name) for g in [node.get_grad(name)]]
    assert grads and any(float(numpy.abs(g).sum()) > 0 for g in grads)


def test_transformer_windows_restart_at_line_breaks(nlp):
    get_spans = configure_paragraph_strided_spans(window=4, stride=3)
    doc = _doc(nlp, [list("一二三四五六"), ["\n"], list("七八")])
    spans = get_spans([doc])[0]
    assert [(s.start, s.end) for s in spans] == [(0, 4), (3, 6), (6, 7), (7, 9)]
    covered = {i for s in spans for i in range(s.start, s.end)}
    assert covered == set(range(len(doc)))
    with pytest.raises(ValueError):
        configure_paragraph_strided_spans(window=2, stride=3)


def _sentences(doc, offset: int = 0):
    """(start, end, labels) of every sentence; every sentence must carry
    the classifier's labels (a missing ``_.rhetoric`` fails here)."""
    out = []
    for s in doc.sents:
        assert s._.rhetoric and s._.rhetoric.get("coarse"), f"no labels on {s.text!r}"
        labels = {lv: {k: float(v) for k, v in s._.rhetoric[lv].items()} for lv in ("coarse", "form", "content")}
        out.append((s.start_char - offset, s.end_char - offset, labels))
    return out


def _close(a, b) -> bool:
    if [(x[0], x[1]) for x in a] != [(y[0], y[1]) for y in b]:
        return False
    for (_, _, x), (_, _, y) in zip(a, b):
        if {lv: set(v) for lv, v in x.items()} != {lv: set(v) for lv, v in y.items()}:
            return False
        if any(abs(x[lv][k] - y[lv][k]) > TOLERANCE for lv in x for k in x[lv]):
            return False
    return True


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.name for p in PIPELINES])
def test_a_paragraph_gets_the_same_analysis_alone_and_in_its_essay(pipeline: Path, pse_dir: Path):
    from spacy_rhetoric.analysis.io import iter_inputs

    essay = next(item.text for item in iter_inputs([pse_dir], split="test") if item.text.startswith("绚丽的人生\n"))
    nlp = spacy.load(pipeline)
    whole = nlp(essay)
    start = essay.index("\n") + 1
    end = essay.index("\n", start) + 1
    paragraph = nlp(essay[start:end])
    inside = [s for s in _sentences(whole, start) if 0 <= s[0] < end - start]
    assert _close(_sentences(paragraph), inside)
    # The heading line is classified from its own words only.
    heading = nlp(essay[:start])
    assert _close(_sentences(heading), [s for s in _sentences(whole) if s[0] < start])


def test_linker_decodes_each_paragraph_on_its_own(pse_dir: Path):
    """The linker's Viterbi runs per paragraph: on a real essay its path is
    the concatenation of the paragraphs' own paths, and on a single
    paragraph it is exactly the whole-doc path (published figures unchanged)."""
    from spacy_rhetoric.analysis.io import iter_inputs
    from spacy_rhetoric.ml.crf import crf_decode

    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric")
    essay = next(item.text for item in iter_inputs([pse_dir], split="test") if item.text.startswith("绚丽的人生\n"))
    doc = nlp.make_doc(essay)
    for _, proc in nlp.pipeline[:-1]:
        doc = proc(doc)
    linker = nlp.get_pipe("parallelism_linker")
    emissions = linker.model.predict([doc])[0]
    crf = linker.model.get_ref("crf")
    bounds = paragraph_bounds(doc)
    assert len(bounds) > 3
    # the decoder reads the emissions with the shipped o_bias against O
    pieces = crf_decode(crf, linker._biased([emissions[a:b] for a, b in bounds]), linker._mask())
    assert linker._decode([doc], [emissions]) == [[t for p in pieces for t in p]]
    a, b = next((a, b) for a, b in bounds if b - a > 20)
    paragraph = doc[a:b].as_doc()
    assert linker._decode([paragraph], [emissions[a:b]]) == crf_decode(crf, linker._biased([emissions[a:b]]), linker._mask())


def _char_groups(doc, offset: int = 0):
    from spacy_rhetoric.spangroups import parallelism_offsets

    return [[(doc[a].idx - offset, doc[b - 1].idx + len(doc[b - 1]) - offset) for a, b in group]
            for group in parallelism_offsets(doc)]


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.name for p in PIPELINES])
def test_linker_reads_each_paragraph_on_its_own(pipeline: Path, pse_dir: Path):
    """The linker's BiLSTM and repetition features run per paragraph
    (predict_by_paragraph): on a real essay every paragraph gets the same
    emissions and parallelisms alone as inside the essay, and a single
    paragraph gets the emissions of the plain model."""
    from spacy_rhetoric.analysis.io import iter_inputs
    from spacy_rhetoric.ml.parallelism_tagger import predict_by_paragraph
    from spacy_rhetoric.spangroups import parallelism_offsets

    nlp = spacy.load(pipeline)
    linker = nlp.get_pipe("parallelism_linker")
    essay = next(item.text for item in iter_inputs([pse_dir], split="test") if item.text.startswith("绚丽的人生\n"))
    whole = nlp(essay)
    assert len(paragraph_bounds(whole)) > 3 and len(parallelism_offsets(whole)) >= 1
    emissions = predict_by_paragraph(linker.model, [whole])[0]
    start, n_checked = 0, 0
    for line in essay.split("\n"):
        end = start + len(line)
        if line.strip():
            alone = nlp(line)
            inside = [g for g in _char_groups(whole, start) if 0 <= g[0][0] < end - start]
            assert _char_groups(alone) == inside, line[:20]
            t0 = whole.char_span(start, end).start
            assert [t.text for t in whole[t0:t0 + len(alone)]] == [t.text for t in alone]
            own = predict_by_paragraph(linker.model, [alone])[0]
            assert own.shape[0] == len(alone)
            numpy.testing.assert_allclose(own, emissions[t0:t0 + len(alone)], atol=1e-3)
            numpy.testing.assert_allclose(own, linker.model.predict([alone])[0], atol=1e-4)
            n_checked += 1
        start = end + 1
    assert n_checked >= 4
