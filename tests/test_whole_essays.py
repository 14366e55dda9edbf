"""Whole-essay evaluation (``spacy_rhetoric/research/whole_essays.py``) on
real PSE-I test essays with the shipped CPU pipeline: the essay is read as
``rhetoric analyze`` reads it, cutting the prediction back keeps every gold
paragraph's text, sentences and sentence labels, and a one-paragraph essay
scores exactly as its paragraph does with ``nlp.evaluate``."""
from __future__ import annotations

from pathlib import Path

import pytest
import spacy
from spacy.tokens import Doc, Span

from spacy_rhetoric.analysis.io import read_pse_essay
from spacy_rhetoric.corpora.pse_i import read_essay, read_splits
from spacy_rhetoric.research import whole_essays as we
from spacy_rhetoric.spangroups import parallelism_offsets, set_parallelisms

ROOT = Path(__file__).resolve().parents[1]
CPU_PIPELINE = ROOT / "pipelines" / "zh_rhetoric"
ESSAYS = 2  # the two shortest test essays


@pytest.fixture(scope="module")
def nlp():
    return spacy.load(CPU_PIPELINE)


@pytest.fixture(scope="module")
def essays(pse_dir: Path, nlp):
    """``(xml path, paragraph docs)`` of the shortest PSE-I test essays."""
    paths = [pse_dir / "xml" / name for name in read_splits(pse_dir)["test"]]
    read = [(p, read_essay(p, nlp.vocab)) for p in paths]
    read.sort(key=lambda item: sum(len(d) for d in item[1]))
    return read[:ESSAYS]


def _scores_without_speed(scores):
    return {k: v for k, v in scores.items() if k != "speed"}


def test_essay_text_is_what_analyze_reads(nlp, essays):
    for path, paragraphs in essays:
        doc, ranges = we.essay_doc(nlp, paragraphs)
        assert doc.text == we.essay_text(paragraphs) == read_pse_essay(path)
        assert [doc.text[a:b] for a, b in ranges] == [p.text for p in paragraphs]


@pytest.mark.parametrize("before", [False, True], ids=["shipped", "before"])
def test_cut_keeps_every_paragraph(nlp, essays, before):
    model = we.load_encoders(CPU_PIPELINE, before=before) if before else nlp
    refs = [d for _, paragraphs in essays for d in paragraphs]
    assert len(we.group_essays(refs)) == ESSAYS and len(refs) > ESSAYS
    predicted, cut = we.predict_essays(model, refs)
    assert cut["essays"] == ESSAYS
    for pred, ref in zip(predicted, refs):
        assert pred.text == ref.text
        assert [t.text for t in pred] == [t.text for t in ref]
        # gold sentences survive; every sentence keeps its Span._.rhetoric
        assert [t.is_sent_start for t in pred] == [t.is_sent_start for t in ref]
        assert all(s._.rhetoric is not None for s in pred.sents)
        for key in ("rhetoric", "rhetoric_form", "rhetoric_content", "rhetoric_components"):
            group = pred.spans[key]
            assert len(group.attrs["scores"]) == len(group)
        for branches in parallelism_offsets(pred):
            assert len(branches) >= 2 and all(0 <= s < e <= len(pred) for s, e in branches)
    scores = we.score_predictions(model, predicted, refs)
    assert 0.0 <= scores["parallelism_epm_f"] <= 1.0


def test_one_paragraph_essay_scores_as_its_paragraph(nlp, essays):
    _, paragraphs = essays[0]
    # a real paragraph with a parallelism, as an essay of its own
    ref = next(p for p in paragraphs if parallelism_offsets(p))
    paragraph_scores, paragraph_docs = we.evaluate_paragraphs(nlp, [ref])
    predicted, cut = we.predict_essays(nlp, [ref])
    assert cut["essays"] == 1
    assert we.prediction_signature(predicted[0]) == we.prediction_signature(paragraph_docs[0])
    essay_scores = we.score_predictions(nlp, predicted, [ref])
    assert _scores_without_speed(essay_scores) == _scores_without_speed(paragraph_scores)
    assert paragraph_scores["parallelism_epm_f"] is not None


def test_cut_clips_line_breaks_and_drops_crossing_spans():
    nlp = spacy.blank("zh")
    if not Span.has_extension("rhetoric"):
        Span.set_extension("rhetoric", default=None)
    words = ["他", "笑", "。", "\n", "月", "像", "船", "。"]
    doc = Doc(nlp.vocab, words=words, spaces=[False] * 8, sent_starts=[True, False, False, False, True, False, False, False])
    doc[0:4]._.rhetoric = {"coarse": {"metaphor": 0.9}}  # a sentence ending with the line break
    doc.spans["rhetoric"] = [Span(doc, 0, 3, "metaphor"), Span(doc, 2, 6, "metaphor")]
    doc.spans["rhetoric"].attrs["scores"] = [0.9, 0.8]
    set_parallelisms(doc, [[(0, 2), (4, 6)], [(4, 5), (5, 7)]])
    first, counts = we.cut_prediction(doc, 0, 3)
    assert first.text == "他笑。"
    assert first[0:3]._.rhetoric == {"coarse": {"metaphor": 0.9}}
    assert [(s.text, s.label_) for s in first.spans["rhetoric"]] == [("他笑。", "metaphor")]
    assert list(first.spans["rhetoric"].attrs["scores"]) == [0.9]
    assert parallelism_offsets(first) == []  # one branch of a split parallelism is dropped
    assert counts == {"dropped_spans": 1, "split_parallelisms": 1, "dropped_parallelisms": 1, "dropped_extensions": 0}
    second, _ = we.cut_prediction(doc, 4, 8)
    assert parallelism_offsets(second) == [[(0, 1), (1, 3)]]
    assert [t.is_sent_start for t in second] == [True, False, False, False]


def test_before_overrides_name_the_old_encoders():
    from spacy.util import load_config

    cpu = we.before_overrides(load_config(CPU_PIPELINE / "config.cfg"))
    assert cpu == {"components.tok2vec.model.@architectures": "spacy.Tok2Vec.v2"}
    trf = we.before_overrides(load_config(ROOT / "pipelines" / "zh_rhetoric_trf" / "config.cfg"))
    # the transformer, the static-vector encoder the averaged models' second members share,
    # and the one the averaged parallelism linker's second member carries
    assert trf == {"components.transformer.model.get_spans.@span_getters": "spacy-transformers.strided_spans.v1",
                   "components.tok2vec.model.@architectures": "spacy.Tok2Vec.v2",
                   "components.parallelism_linker.model.second.tok2vec.@architectures": "spacy.Tok2Vec.v2"}
