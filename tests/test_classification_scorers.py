"""Scorers of rhetoric classification and component extraction: hand-computed
values, scikit-learn and seqeval, on toy docs and real simile sentences."""
from __future__ import annotations

from pathlib import Path

import pytest
import spacy
from seqeval.metrics import classification_report, f1_score, precision_score, recall_score
from spacy.tokens import Doc, Span
from spacy.training import Example

from spacy_rhetoric.corpora.simile import read_simile
from spacy_rhetoric.scorers.classification import (
    mapping_correct,
    score_rhetoric_classification,
    set_scores,
)
from spacy_rhetoric.scorers.components import score_rhetoric_components, spans_to_bio, strict_span_scores
from spacy_rhetoric.components.simile_rules import SimileRules

NLP = spacy.blank("zh")


def test_set_scores_hand_computed():
    pairs = [
        ({"metaphor"}, {"metaphor"}),
        ({"metaphor", "hyperbole"}, {"metaphor"}),
        (set(), {"hyperbole"}),
        ({"literal"}, {"literal"}),
        ({"parallelism"}, {"metaphor"}),
    ]
    s = set_scores(pairs, "x")
    # tp: metaphor 2, literal 1 -> 3; fp: hyperbole 1, metaphor 1 -> 2; fn: hyperbole 1, parallelism 1 -> 2
    assert s["x_em"] == pytest.approx(2 / 5)
    assert s["x_micro_p"] == pytest.approx(3 / 5)
    assert s["x_micro_r"] == pytest.approx(3 / 5)
    assert s["x_micro_f"] == pytest.approx(3 / 5)
    # per label P/R: metaphor 2/3, 1; hyperbole 0, 0; literal 1, 1; parallelism 0, 0
    assert s["x_macro_p"] == pytest.approx((2 / 3 + 0 + 1 + 0) / 4)
    assert s["x_macro_r"] == pytest.approx((1 + 0 + 1 + 0) / 4)
    assert s["x_macro_f"] == pytest.approx((0.8 + 0 + 1 + 0) / 4)
    assert s["x_per_type"]["metaphor"]["f"] == pytest.approx(0.8)


def test_set_scores_match_sklearn():
    from sklearn.metrics import precision_recall_fscore_support
    from sklearn.preprocessing import MultiLabelBinarizer

    pairs = [({"a", "b"}, {"a"}), ({"c"}, {"b", "c"}), ({"a"}, {"a"}), ({"b"}, {"c"}), ({"a", "c"}, {"a", "b", "c"})]
    s = set_scores(pairs, "x")
    mlb = MultiLabelBinarizer(classes=["a", "b", "c"])
    y_true = mlb.fit_transform([g for g, _ in pairs])
    y_pred = mlb.transform([p for _, p in pairs])
    for avg in ("micro", "macro"):
        p, r, f, _ = precision_recall_fscore_support(y_true, y_pred, average=avg, zero_division=0)
        assert (s[f"x_{avg}_p"], s[f"x_{avg}_r"], s[f"x_{avg}_f"]) == pytest.approx((p, r, f))


def _doc(words, sent_starts, spans):
    doc = Doc(NLP.vocab, words=words, spaces=[False] * len(words), sent_starts=sent_starts)
    for key, items in spans.items():
        doc.spans[key] = [Span(doc, s, e, label=lab) for s, e, lab in items]
    return doc


def test_classification_scorer_masks_and_maps():
    words = ["他", "像", "风", "。", "花", "笑", "了", "。", "天", "很", "蓝", "。"]
    starts = [True, False, False, False, True, False, False, False, True, False, False, False]
    ref = _doc(words, starts, {"rhetoric": [(0, 4, "metaphor"), (4, 8, "personification")],
                               "rhetoric_form": [(0, 4, "simile"), (4, 8, "verb")]})
    ref.user_data["rhetoric_annotated"] = {"coarse": ["metaphor", "personification", "literal"],
                                           "form": ["simile", "verb", "literal"], "content": []}
    pred = _doc(words, starts, {
        # sentence 1 right; sentence 2 adds an unannotated hyperbole (ignored)
        # and misses its form label; sentence 3 wrongly metaphor
        "rhetoric": [(0, 4, "metaphor"), (4, 8, "personification"), (4, 8, "hyperbole"), (8, 12, "metaphor")],
        "rhetoric_form": [(0, 4, "simile"), (4, 8, "direct_hyperbole"), (8, 12, "metaphor")],
    })
    s = score_rhetoric_classification([Example(pred, ref)])
    assert s["rhetoric_n_sents"] == 3
    # coarse: gold {metaphor},{personification},{literal}; pred {metaphor},{personification},{metaphor}
    assert s["rhetoric_coarse_em"] == pytest.approx(2 / 3)
    assert s["rhetoric_coarse_micro_p"] == pytest.approx(2 / 3)
    assert s["rhetoric_coarse_micro_r"] == pytest.approx(2 / 3)
    # form: gold {simile},{verb},{literal}; pred {simile},{},{metaphor->unannotated: {}}
    assert s["rhetoric_form_em"] == pytest.approx(1 / 3)
    assert s["rhetoric_form_micro_p"] == pytest.approx(1.0)
    assert s["rhetoric_form_micro_r"] == pytest.approx(1 / 3)
    assert s["rhetoric_content_micro_f"] is None
    # mapping (predictions only): s1 ok; s2 personification lacks a form child;
    # s3 metaphor -> metaphor ok. Content: no content labels -> only literal would map.
    assert s["rhetoric_form_mapping"] == pytest.approx(2 / 3)
    assert s["rhetoric_content_mapping"] == 0.0


def test_mapping_correct():
    assert mapping_correct({"metaphor"}, {"simile"}, "form")
    assert not mapping_correct({"metaphor", "hyperbole"}, {"simile"}, "form")
    assert mapping_correct({"literal"}, {"literal"}, "content")
    assert not mapping_correct({"hyperbole"}, {"concrete"}, "content")


def _simile_docs(simile_dir: Path, n: int):
    from spacy_rhetoric.corpora.simile import sentence_to_doc

    path = next(simile_dir.glob("*-Test.tsv"))
    docs = []
    for s in read_simile(path):
        docs.append(sentence_to_doc(NLP.vocab, path, s))
        if len(docs) == n:
            break
    return docs


@pytest.fixture(scope="module")
def rule_examples(simile_dir):
    refs = _simile_docs(simile_dir, 150)
    rules = SimileRules()
    examples = []
    for ref in refs:
        pred = Doc(NLP.vocab, words=[t.text for t in ref], spaces=[False] * len(ref))
        examples.append(Example(rules(pred), ref))
    return examples


def test_component_scorer_equals_seqeval(rule_examples):
    y_true = [spans_to_bio(eg.reference, eg.reference.spans["rhetoric_components"]) for eg in rule_examples]
    y_pred = [spans_to_bio(eg.predicted, eg.predicted.spans["rhetoric_components"]) for eg in rule_examples]
    s = score_rhetoric_components(rule_examples)
    assert s["rhetoric_components_p"] == pytest.approx(precision_score(y_true, y_pred))
    assert s["rhetoric_components_r"] == pytest.approx(recall_score(y_true, y_pred))
    assert s["rhetoric_components_f"] == pytest.approx(f1_score(y_true, y_pred))
    assert s["rhetoric_components_macro_f"] == pytest.approx(f1_score(y_true, y_pred, average="macro"))
    report = classification_report(y_true, y_pred, output_dict=True)
    for label, vals in s["rhetoric_components_per_type"].items():
        assert vals["p"] == pytest.approx(report[label]["precision"])
        assert vals["r"] == pytest.approx(report[label]["recall"])
        assert vals["f"] == pytest.approx(report[label]["f1-score"])
    assert set(s["rhetoric_components_per_type"]) == {"comparator", "tenor", "vehicle"}


def test_rule_baseline_sentence_scores_hand_counted(rule_examples):
    """Every test sentence contains 像, so the rule predicts simile everywhere:
    P = share of similes, R = 1."""
    n = len(rule_examples)
    n_sim = sum(eg.reference.cats["form/simile"] == 1.0 for eg in rule_examples)
    assert all(any("像" in t.text for t in eg.reference) for eg in rule_examples)
    s = score_rhetoric_classification(rule_examples)
    assert s["rhetoric_form_per_type"]["simile"]["p"] == pytest.approx(n_sim / n)
    assert s["rhetoric_form_per_type"]["simile"]["r"] == pytest.approx(1.0)
    assert s["rhetoric_coarse_micro_p"] == pytest.approx(n_sim / n)
    # literal is not annotated by the simile corpus: EM counts only the metaphor decision
    assert s["rhetoric_coarse_em"] == pytest.approx(n_sim / n)


def test_form_mapping_rate(rule_examples):
    """§5.2 by hand: a simile sentence counts when the prediction has a
    comparator, a tenor and a vehicle inside it."""
    considered = satisfied = 0
    for eg in rule_examples:
        if eg.reference.cats["form/simile"] == 1.0:
            considered += 1
            found = {s.label_ for s in eg.predicted.spans["rhetoric_components"]}
            satisfied += {"comparator", "tenor", "vehicle"} <= found
    s = score_rhetoric_components(rule_examples)
    assert s["rhetoric_components_form_mapping"] == pytest.approx(satisfied / considered)


def test_strict_spans_unannotated_and_empty():
    assert strict_span_scores([])["rhetoric_components_f"] is None
    words = ["他", "像", "风"]
    ref = _doc(words, [True, False, False], {"rhetoric_components": [(0, 1, "tenor")]})
    ref.user_data["rhetoric_annotated"] = {"components": ["tenor"]}
    pred = _doc(words, [True, False, False], {"rhetoric_components": [(0, 1, "tenor"), (2, 3, "vehicle")]})
    s = score_rhetoric_components([Example(pred, ref)])
    assert s["rhetoric_components_p"] == 1.0  # the vehicle type is not annotated: ignored


def test_spans_to_bio_rejects_overlap():
    doc = _doc(["一", "二", "三"], [True, False, False], {})
    with pytest.raises(ValueError, match="Overlapping"):
        spans_to_bio(doc, [Span(doc, 0, 2, label="tenor"), Span(doc, 1, 3, label="vehicle")])


def test_component_scorer_reads_the_spans_key_it_is_given():
    """``Pipe.score`` passes the component's ``spans_key``: a pipeline that
    writes components under another key is scored there, not at the default."""
    doc = NLP.make_doc("他的笑容像阳光一样温暖")
    ref, pred = doc.copy(), doc.copy()
    for d in (ref, pred):
        d.spans["comp"] = [Span(d, 0, 1, label="tenor"), Span(d, 3, 5, label="vehicle")]
    scores = score_rhetoric_components([Example(pred, ref)], spans_key="comp")
    assert scores["rhetoric_components_f"] == 1.0
    assert scores["spans_comp_f"] == 1.0
    pred.spans["comp"] = [pred.spans["comp"][0]]
    assert score_rhetoric_components([Example(pred, ref)], spans_key="comp")["rhetoric_components_r"] == 0.5


def test_macro_with_zero_division_one_matches_sklearn():
    """CERD's code averages with scikit-learn's zero_division=1.0: a label
    never predicted has P 1.0 (not 0.0)."""
    from sklearn.metrics import precision_recall_fscore_support
    from sklearn.preprocessing import MultiLabelBinarizer

    pairs = [({"metaphor"}, {"metaphor"}), ({"hyperbole"}, {"literal"}), ({"literal"}, {"literal"}),
             ({"metaphor", "parallelism"}, {"metaphor"})]
    s = set_scores(pairs, "x")
    labels = sorted({lab for g, p in pairs for lab in g | p})
    mlb = MultiLabelBinarizer(classes=labels)
    gold = mlb.fit_transform([g for g, _ in pairs])
    pred = mlb.transform([p for _, p in pairs])
    p, r, f, _ = precision_recall_fscore_support(gold, pred, average="macro", zero_division=1.0)
    assert s["x_macro_zd1"] == pytest.approx({"p": p, "r": r, "f": f})
    assert s["x_macro_p"] < s["x_macro_zd1"]["p"]
