"""The verifier's object threshold: the dev pairs it is chosen on, the
sweep and the choice, and `rhetoric tune object-thresholds` on real dev
requests of the annotated essays with the shipped pipeline."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy
from typer.testing import CliRunner

from spacy_rhetoric.cli import app
from spacy_rhetoric.research.object_thresholds import GRID, choose, labelled_pairs, sweep
from spacy_rhetoric.llm.records import RGRecord, essay_rg_records, write_jsonl

ROOT = Path(__file__).resolve().parents[1]
ANNOTATED_DEV = ROOT / "annotations" / "pse-i-cerd" / "dev.jsonl"
PIPELINE = ROOT / "pipelines" / "zh_rhetoric"


def rg(device, obj, target, essay="1", para=0, sents=(0,)):
    return RGRecord(device, obj, target, [], meta={"essay": essay, "para": para, "sents": list(sents)})


def test_pairs_are_the_device_against_other_objects_not_the_same_sentence():
    recs = [rg("personification", "春风", "春风微笑着。", sents=(0,)),
            rg("metaphor", "春风", "春风微笑着。", sents=(0,)),  # the same sentence: left out
            rg("metaphor", "月光", "月光像纱。", sents=(1,)),
            rg("hyperbole", "白发", "白发三千丈。", sents=(2,)),
            rg("parallelism", "我爱", "我爱花；我爱雨；我爱叶。", sents=(3,))]  # names no object
    pairs = labelled_pairs(recs, "personification")
    assert [(r.object, gold) for r, gold in pairs] == [("春风", True), ("月光", False), ("白发", False)]
    with pytest.raises(ValueError, match="names no object"):
        labelled_pairs(recs, "parallelism")
    with pytest.raises(ValueError, match="no hyperbole request"):
        labelled_pairs(recs[:3], "hyperbole")


def test_the_lowest_threshold_with_the_stated_precision_is_chosen():
    rows = ([{"gold": True, "device": True, "component": True, "best": 0.9}]  # passes at every threshold
            + [{"gold": True, "device": True, "component": False, "best": b} for b in (0.32, 0.12, 0.07)]
            + [{"gold": False, "device": True, "component": False, "best": b} for b in (0.11, 0.06)]
            + [{"gold": True, "device": False, "component": False, "best": 0.8}])  # the device rule still holds
    table = sweep(rows)
    assert list(table) == [*GRID, 1.01]
    assert table[1.01]["tp"] == 1 and table[1.01]["fp"] == 0 and table[1.01]["fn"] == 4
    assert (table[0.3]["tp"], table[0.1]["tp"], table[0.1]["fp"], table[0.05]["fp"]) == (2, 3, 1, 2)
    assert table[0.1]["p"] == pytest.approx(0.75) and table[0.05]["r"] == pytest.approx(4 / 5)
    assert choose(table, 0.75) == 0.1
    assert choose(table, 0.65) == 0.05 and table[0.05]["p"] == pytest.approx(4 / 6)
    assert choose(table, 1.0) == 0.15
    # no threshold reaches it: the components alone
    assert choose(sweep([{"gold": False, "device": True, "component": True, "best": 0.9}]), 0.5) == 1.01


def test_tune_object_thresholds_on_dev_requests(tmp_path):
    if not PIPELINE.is_dir():
        pytest.skip("pipelines/zh_rhetoric not found")
    recs = essay_rg_records(ANNOTATED_DEV, k=2)
    chosen = ([r for r in recs if r.rhetoric == "personification"][:8]
              + [r for r in recs if r.rhetoric == "metaphor"][:8])
    requests = tmp_path / "dev.jsonl"
    write_jsonl(chosen, requests)
    out, report = tmp_path / "pipe", tmp_path / "report.json"
    result = CliRunner().invoke(app, ["tune", "object-thresholds", str(PIPELINE), str(out), "--requests", str(requests),
                                      "--min-precision", "0.5", "--report", str(report)])
    assert result.exit_code == 0, result.output
    data = json.loads(report.read_text(encoding="utf8"))
    assert data["positives"] == 8 and data["pairs"] <= 16 and set(data["table"]) == {*(f"{t:.2f}" for t in GRID), "components_alone"}
    cfg = json.loads((out / "rhetoric_components" / "cfg").read_text(encoding="utf8"))
    expected = {} if data["chosen"] is None else {"personification_object": data["chosen"]}
    assert cfg["object_thresholds"] == expected
    # only that component's settings change; the folder loads and the shipped one is untouched
    assert spacy.load(out).get_pipe("rhetoric_components").cfg["object_thresholds"] == expected
    shipped = json.loads((PIPELINE / "rhetoric_components" / "cfg").read_text(encoding="utf8"))
    assert {k: v for k, v in cfg.items() if k != "object_thresholds"} == {k: v for k, v in shipped.items() if k != "object_thresholds"}
    # tuning another device keeps this one's threshold
    again = CliRunner().invoke(app, ["tune", "object-thresholds", str(out), str(out), "--requests", str(requests),
                                     "--device", "metaphor", "--min-precision", "0.01"])
    assert again.exit_code == 0, again.output
    both = json.loads((out / "rhetoric_components" / "cfg").read_text(encoding="utf8"))["object_thresholds"]
    assert {k: v for k, v in both.items() if k != "tenor"} == expected and "tenor" in both


def test_tune_object_thresholds_refuses_bad_settings(tmp_path):
    requests = tmp_path / "dev.jsonl"
    write_jsonl([rg("metaphor", "月光", "月光像纱。")], requests)
    runner = CliRunner()
    bad = runner.invoke(app, ["tune", "object-thresholds", str(tmp_path), str(tmp_path / "o"), "--requests", str(requests),
                              "--min-precision", "0"])
    assert bad.exit_code == 1 and "--min-precision" in bad.output
    none = runner.invoke(app, ["tune", "object-thresholds", str(tmp_path), str(tmp_path / "o"), "--requests", str(requests)])
    assert none.exit_code == 1 and "no personification request" in none.output
