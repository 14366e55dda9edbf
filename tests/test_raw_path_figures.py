"""The raw-path evaluation on HYPO-cn (sentence accuracy) and on ConFiguRe's
held-out works (CERD devices against figurative units by character overlap)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_rhetoric.cli import app
from spacy_rhetoric.corpora.configure import read_split
from spacy_rhetoric.evaluation.raw_path import (CONFIGURE_SPLIT, GoldDoc, GoldUnit, figure_match, read_gold,
                                                score_accuracy, score_figures, score_records, score_unit_devices)

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "zh_rhetoric"


def _sent(start, end, *devices):
    return {"start": start, "end": end, "coarse": {d: 0.9 for d in devices} or {"literal": 0.9}}


def test_accuracy_counts_both_right_answers():
    gold = [GoldDoc(f"t{i}", "甲乙丙。", [GoldUnit(0, 4, {"coarse": {lab}})], {"coarse": frozenset({"hyperbole"})},
                    accuracy=True) for i, lab in enumerate(["hyperbole", "hyperbole", "literal", "literal"])]
    records = [{"sentences": [_sent(0, 4, *devs)]} for devs in (["hyperbole"], [], [], ["hyperbole", "metaphor"])]
    assert score_accuracy(gold, records) == {"hyperbole": {"accuracy": 0.5, "n_units": 4}}
    assert score_accuracy([GoldDoc("x", "甲", [GoldUnit(0, 1, {"coarse": {"literal"}})], {})], [{"sentences": []}]) is None


def test_a_sentence_a_unit_only_touches_does_not_match_it():
    assert figure_match((0, 10), (2, 6))          # the unit inside the sentence
    assert figure_match((4, 8), (0, 20))          # the sentence inside a long unit
    assert not figure_match((9, 20), (0, 10))     # one shared character of ten
    assert figure_match((5, 20), (0, 10))         # half of the unit


def test_figures_precision_per_sentence_recall_per_unit():
    text = "月亮像小船。风在唱歌，树在跳舞。他高兴极了。"
    gold = [GoldDoc("p", text, [], {}, figures=[("metaphor", 0, 6), ("personification", 6, 11),
                                               ("personification", 11, 16), ("metonymy", 16, 22)])]
    records = [{"sentences": [_sent(0, 6, "metaphor"), _sent(6, 16, "personification"),
                              _sent(16, 22, "personification", "hyperbole")]}]
    s = score_figures(gold, records)["per_device"]
    assert s["metaphor"] == {"p": 1.0, "r": 1.0, "f": 1.0, "predicted": 1, "support": 1}
    # one sentence holds both personification units; the sentence over a 借代 unit is a false positive
    assert (s["personification"]["p"], s["personification"]["r"]) == (0.5, 1.0)
    assert s["hyperbole"] == {"p": 0.0, "r": 0.0, "f": 0.0, "predicted": 1, "support": 0}
    micro = score_figures(gold, records)["micro"]
    assert (micro["predicted"], micro["support"]) == (4, 3)


def test_predicted_units_against_gold_sentences_by_overlap():
    # four gold sentences: 排比 spread over two, a simile, a literal one
    text = "山朗润起来了。水涨起来了。月亮像小船。他回家了。"
    coarse = frozenset({"metaphor", "personification", "hyperbole", "parallelism"})
    units = [GoldUnit(0, 7, {"coarse": {"parallelism"}}), GoldUnit(7, 13, {"coarse": {"parallelism", "personification"}}),
             GoldUnit(13, 19, {"coarse": {"metaphor"}}), GoldUnit(19, 24, {"coarse": {"literal"}})]
    gold = [GoldDoc("e", text, units, {"coarse": coarse})]
    found = [{"start": 0, "end": 13, "label": "parallelism"},    # one unit over both parallelism sentences
             {"start": 13, "end": 19, "label": "hyperbole"},     # the simile read as hyperbole
             {"start": 18, "end": 24, "label": "metaphor"},      # touches the simile by one character of six
             {"start": 19, "end": 24, "label": "rhetorical_question"}]
    s = score_unit_devices(gold, [{"figurative_units": found}])
    assert s["per_device"]["parallelism"] == {"p": 1.0, "r": 1.0, "f": 1.0, "predicted": 1, "support": 2}
    assert s["per_device"]["metaphor"] == {"p": 0.0, "r": 0.0, "f": 0.0, "predicted": 1, "support": 1}
    assert s["per_device"]["hyperbole"] == {"p": 0.0, "r": 0.0, "f": 0.0, "predicted": 1, "support": 0}
    assert (s["per_device"]["personification"]["predicted"], s["per_device"]["personification"]["support"]) == (0, 1)
    # micro: 1 of 3 predicted units right, 2 of 4 gold sentences found
    assert (s["micro"]["p"], s["micro"]["r"]) == (pytest.approx(1 / 3), 0.5)
    assert s["micro"]["f"] == pytest.approx(0.4)
    counts = s["predicted_per_type"]
    assert len(counts) == 12 and sum(counts.values()) == 4 and counts["rhetorical_question"] == 1 and counts["quote"] == 0
    # a corpus scoring only parallelism gets only that device; none scored, no section
    only = score_unit_devices([GoldDoc("e", text, units, {"coarse": frozenset({"parallelism"})})], [{"figurative_units": found}])
    assert list(only["per_device"]) == ["parallelism"]
    assert score_unit_devices([GoldDoc("e", text, units, {})], [{"figurative_units": found}]) is None
    record = {"sentences": [], "components": [], "parallelisms": [], "figurative_units": found}
    assert "figurative_units" not in score_records(gold, [record])
    assert score_records(gold, [record], figurative_units=True)["figurative_units"] == s


def _fixture(tmp_path: Path) -> Path:
    shared = tmp_path / "data"
    (shared / "hypo-cn").mkdir(parents=True)
    for split in ("train", "valid"):
        (shared / "hypo-cn" / f"{split}.1").write_text("我等了一万年。\n书堆得比山还高。\n", encoding="utf8")
        (shared / "hypo-cn" / f"{split}.0").write_text("我等了一个小时。\n", encoding="utf8")
    dev_work, train_work = read_split(CONFIGURE_SPLIT)["dev"][0], read_split(CONFIGURE_SPLIT)["train"][0]
    fragment = "小草偷偷地从土里钻出来。他的嗓门大得能把屋顶掀翻。"
    passages = {
        f"{dev_work}_片段1": {"fragment": fragment, "units": [
            {"figurativeUnit": fragment[:12], "fos": "比拟", "begin": 0, "end": 12, "annotator": "1"},
            {"figurativeUnit": fragment[12:], "fos": "夸张", "begin": 12, "end": len(fragment), "annotator": "1"}]},
        f"{train_work}_片段2": {"fragment": "不读。", "units": []},
    }
    (shared / "configure").mkdir()
    (shared / "configure" / "valid.json").write_text(json.dumps(passages, ensure_ascii=False), encoding="utf8")
    return shared


def test_gold_of_the_fixture(tmp_path):
    shared = _fixture(tmp_path)
    hypo = read_gold("hypo-cn", shared, ROOT / "annotations" / "pse-i-cerd", "test")
    assert [g.units[0].labels["coarse"] for g in hypo] == [{"hyperbole"}, {"hyperbole"}, {"literal"}]
    conf = read_gold("configure", shared, ROOT / "annotations" / "pse-i-cerd", "dev")
    assert len(conf) == 1 and conf[0].figures == [("personification", 0, 12), ("hyperbole", 12, 25)]


@pytest.mark.skipif(not (PIPELINE / "config.cfg").is_file(), reason="shipped pipeline not here")
def test_evaluate_raw_on_hypo_cn_and_configure(tmp_path):
    shared = _fixture(tmp_path)
    out = tmp_path / "raw.json"
    result = CliRunner().invoke(app, ["evaluate", "raw", str(PIPELINE), "-c", "hypo-cn", "-c", "configure",
                                      "--shared", str(shared), "-o", str(out)])
    assert result.exit_code == 0, result.output
    said = " ".join(result.output.split())  # independent of the terminal's width
    assert "hyperbole sentence accuracy (3)" in said
    assert "figurative units personification (1 gold" in said
    scores = json.loads(out.read_text(encoding="utf8"))["corpora"]
    assert scores["hypo-cn"]["split"] == "valid" and scores["hypo-cn"]["raw"]["n_texts"] == 3
    assert 0.0 <= scores["hypo-cn"]["raw"]["accuracy"]["hyperbole"]["accuracy"] <= 1.0
    figures = scores["configure"]["raw"]["figures"]
    assert figures["per_device"]["hyperbole"]["support"] == 1 and figures["micro"]["support"] == 2
    # the shipped pipeline has the figurative_units component: its units against HYPO-cn's hyperbole sentences
    units = scores["hypo-cn"]["raw"]["figurative_units"]
    assert list(units["per_device"]) == ["hyperbole"] and units["per_device"]["hyperbole"]["support"] == 2
    assert "figurative units predicted per type:" in said
    assert scores["configure"]["raw"]["figurative_units"] is None  # no gold sentence units
