"""HAUSER sub-scores, quality, reranker; tiny local classifiers; real similes."""
import math

import pytest
import torch
from spacy.util import registry
from transformers import AutoModelForSequenceClassification, AutoTokenizer

from spacy_rhetoric.corpora.simile import read_simile, split_path, tag_spans
from spacy_rhetoric.llm import hauser
from spacy_rhetoric.llm.hauser import (
    Components,
    HauserScorer,
    SequenceClassifier,
    creativity,
    informativeness,
    minmax,
    quality_scores,
    relevance,
    rerank,
    rule_components,
)
from spacy_rhetoric.llm.kb import SimileKB, build_kb
from tiny_models import tiny_classifier


@pytest.fixture(scope="module")
def kb(simile_dir):
    return build_kb([split_path(simile_dir, "train")])


@pytest.fixture(scope="module")
def nli_path(tmp_path_factory):
    return tiny_classifier(tmp_path_factory.mktemp("nli"), ["ENTAILMENT", "NEUTRAL", "CONTRADICTION"], seed=1)


@pytest.fixture(scope="module")
def senti_path(tmp_path_factory):
    return tiny_classifier(tmp_path_factory.mktemp("senti"), ["negative", "positive"], seed=2)


def test_minmax_and_quality_hand_values():
    assert minmax([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert minmax([7.0, 7.0]) == [0.5, 0.5]
    groups = ["a", "a", "a", "b", "b"]
    rel = [0, 10, 5, 3, 3]  # group b all equal -> 0.5
    log = [0.2, 0.4, 0.6, 0.9, 0.1]
    sen = [-0.5, 0.5, 0.0, 0.2, 0.4]
    q = quality_scores(rel, log, sen, groups)
    expected = [
        1 / 2 * 0.0 + 1 / 3 * 0.0 + 1 / 6 * 0.0,
        1 / 2 * 1.0 + 1 / 3 * 0.5 + 1 / 6 * 1.0,
        1 / 2 * 0.5 + 1 / 3 * 1.0 + 1 / 6 * 0.5,
        1 / 2 * 0.5 + 1 / 3 * 1.0 + 1 / 6 * 0.0,
        1 / 2 * 0.5 + 1 / 3 * 0.0 + 1 / 6 * 1.0,
    ]
    assert q == pytest.approx(expected)
    # skipped sub-scores: remaining weights rescaled (here relevance alone)
    assert quality_scores(rel, None, None, groups) == pytest.approx([0.0, 1.0, 0.5, 0.5, 0.5])
    # the paper's default weights (3/6, 2/6, 1/6) give the same as (1/2, 1/3, 1/6)
    assert quality_scores(rel, log, sen, groups, (3 / 6, 2 / 6, 1 / 6)) == pytest.approx(expected)


def test_quality_errors():
    with pytest.raises(ValueError, match="at least one"):
        quality_scores(None, None, None, [0])
    with pytest.raises(ValueError, match="align"):
        quality_scores([1, 2], None, None, [0])
    with pytest.raises(ValueError, match="weights"):
        quality_scores([1], None, None, [0], (1, 1))
    with pytest.raises(ValueError, match="finite"):
        quality_scores([float("nan")], None, None, [0])


def test_relevance_creativity_informativeness(kb):
    n_v = kb.vehicle_frequency("蝴蝶")
    assert n_v > 0
    assert creativity(["蝴蝶"], kb) == pytest.approx(-math.log(n_v + 1))
    assert creativity(["从未见过的喻体词"], kb) == 0.0
    assert creativity([], kb) is None
    two = creativity(["蝴蝶", "从未见过的喻体词"], kb)
    assert two == pytest.approx(-math.log(n_v / 2 + 1))
    t, v = next(iter(kb.pair_counts))
    assert relevance([(t, v), ("无", "无")], kb) == pytest.approx(kb.pair_counts[(t, v)] / 2)
    assert relevance([], kb) == 0.0
    assert informativeness([2, 3]) == 2.5 and informativeness([]) is None


def test_rule_components():
    c = rule_components("她的笑容像春天的阳光一样温暖。")
    assert c.vehicles == ["春天的阳光"] and c.pairs == [("她的笑容", "春天的阳光")]
    assert c.vehicle_end == len("她的笑容像春天的阳光")
    assert rule_components("月亮弯弯，好像小船。", tenor="月亮").pairs == [("月亮", "小船")]
    assert rule_components("今天天气很好。") == Components()


def test_real_similes_rank_above_unseen(kb, simile_dir):
    """On real TEST-split similes, the KB knows common vehicles: a simile whose
    rule-extracted vehicle is frequent in the train split gets lower creativity
    than an unseen one."""
    path = split_path(simile_dir, "test")
    seen = unseen = None
    for sent in read_simile(path):
        if sent.label != "simile":
            continue
        text = "".join(sent.words)
        gold_vehicles = ["".join(sent.words[s:e]) for s, e, lab in tag_spans(path, sent) if lab == "vehicle"]
        c = creativity(gold_vehicles, kb)
        if c is not None and c < -2 and seen is None:
            seen = text
        if c == 0.0 and unseen is None:
            unseen = text
        if seen and unseen:
            break
    assert seen and unseen
    scorer = HauserScorer(kb)
    rows = scorer.score_group([seen, unseen])
    assert all(set(r) == {"relevance", "logical", "sentiment", "quality", "creativity", "informativeness"} for r in rows)
    assert rows[0]["logical"] is None and rows[0]["sentiment"] is None
    assert any("logical consistency skipped" in n for n in scorer.notices)


def test_classifiers_and_consistency(kb, nli_path, senti_path):
    nli = SequenceClassifier(str(nli_path), {"contradiction": "contradiction"})  # case-insensitive
    senti = SequenceClassifier(str(senti_path), {"negative": "negative", "positive": 1})
    literal = "月亮挂在天上。"
    cands = ["月亮像小船挂在天上。", "月亮像一面镜子。"]
    got = hauser.logical_consistency(nli, [literal] * 2, cands)
    tok = AutoTokenizer.from_pretrained(nli_path)
    model = AutoModelForSequenceClassification.from_pretrained(nli_path)
    with torch.no_grad():
        probs = torch.softmax(model(**tok([literal] * 2, cands, padding=True, return_tensors="pt")).logits, -1)
    assert got == pytest.approx((1 - probs[:, 2]).tolist(), abs=1e-6)
    cs = hauser.sentiment_consistency(senti, [literal] * 2, cands)
    pl = senti.probs([literal])[0]
    a = 0 if pl[0] >= pl[1] else 1
    assert cs == pytest.approx([p[a] - pl[a] for p in senti.probs(cands)], abs=1e-6)
    scorer = HauserScorer(kb, nli=nli, sentiment=senti)
    rows = scorer.score_group(cands, literal=literal, tenor="月亮")
    assert rows[0]["logical"] == pytest.approx(got[0], abs=1e-6)
    q = quality_scores([r["relevance"] for r in rows], [r["logical"] for r in rows], [r["sentiment"] for r in rows], [0, 0])
    assert [r["quality"] for r in rows] == pytest.approx(q)
    with pytest.raises(ValueError, match="not among the model's labels"):
        SequenceClassifier(str(nli_path), {"contradiction": "refutes"})


def test_registered_reranker(kb, tmp_path, nli_path):
    kb_path = tmp_path / "kb.json"
    kb.to_disk(kb_path)
    make = registry.misc.get("spacy_rhetoric.HauserReranker.v1")
    scorer = make(kb_path=str(kb_path), nli_model=str(nli_path), nli_contradiction_label="CONTRADICTION")
    cands = ["我像蚂蚁一样渺小。", "我像一座从未有人见过的灯塔。", "我很渺小。"]
    scores = scorer(cands, context=["世界很大。"], rhetoric="metaphor", object="我", logprobs=[None] * 3)
    assert len(scores) == 3 and all(0.0 <= s <= 1.0 for s in scores)
    ranked = rerank(cands, scores)
    assert sorted(c for c, _ in ranked) == sorted(cands)
    assert scorer([], context=[], rhetoric="metaphor", object="我", logprobs=[]) == []
