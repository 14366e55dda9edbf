"""Our scorers also fill the keys that `spacy evaluate` prints."""
from __future__ import annotations

import spacy
from spacy.tokens import Span
from spacy.training import Example

from spacy_rhetoric.corpora.docbin import ANNOTATED_KEY, mark_single_sentence
from spacy_rhetoric.scorers.classification import score_rhetoric_classification
from spacy_rhetoric.scorers.components import score_rhetoric_components


def _pair():
    nlp = spacy.blank("zh")
    gold = mark_single_sentence(nlp.make_doc("时间像流水"))
    gold.spans["rhetoric_components"] = [Span(gold, 0, 2, "tenor"), Span(gold, 2, 3, "comparator"), Span(gold, 3, 5, "vehicle")]
    gold.spans["rhetoric"] = [Span(gold, 0, 5, "metaphor")]
    gold.cats = {"coarse/metaphor": 1.0}
    gold.user_data[ANNOTATED_KEY] = {"coarse": ["metaphor"], "form": [], "content": [],
                                     "components": ["comparator", "tenor", "vehicle"]}
    pred = mark_single_sentence(nlp.make_doc("时间像流水"))
    pred.spans["rhetoric_components"] = [Span(pred, 0, 2, "tenor"), Span(pred, 3, 4, "vehicle")]
    pred.spans["rhetoric"] = [Span(pred, 0, 5, "metaphor")]
    return Example(pred, gold)


def test_component_scores_under_spacy_span_keys():
    scores = score_rhetoric_components([_pair()])
    assert scores["spans_rhetoric_components_p"] == scores["rhetoric_components_p"] == 0.5
    assert scores["spans_rhetoric_components_r"] == 1 / 3
    assert set(scores["spans_rhetoric_components_per_type"]) == {"comparator", "tenor", "vehicle"}


def test_classification_scores_under_spacy_textcat_keys():
    scores = score_rhetoric_classification([_pair()])
    assert scores["cats_score"] == scores["rhetoric_coarse_micro_f"] == 1.0
    assert "coarse" in scores["cats_score_desc"]
