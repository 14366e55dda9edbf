"""The user's path is the measured path: raw essays in, character offsets out,
one sentence unit from training to report.

Real PSE-I test essays go through both shipped pipelines the way users call
them (``nlp(text)``, ``rhetoric analyze``); the tests fail when a branch lies
in a sentence not labelled parallelism, or when the sentences at inference
are not the ``<sent>`` units the classifier is trained on. The scoring
functions of ``evaluation/raw_path.py`` are checked on hand-made records.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy
import pytest
import spacy
from typer.testing import CliRunner

from spacy_rhetoric.cli import app
from spacy_rhetoric.evaluation.raw_path import (
    GoldDoc,
    GoldUnit,
    assign_sentences,
    branch_to_words,
    consistency,
    predict_raw,
    read_gold,
    read_pse_i,
    score_components,
    score_parallelism,
    score_records,
    score_sentences,
)

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted(p.parent for p in (ROOT / "pipelines").glob("*/config.cfg"))
#: Essay 328 holds 人生是…；人生是…；人生亦是…。 (three branches in one 。-sentence).
ESSAYS = ("328", "372", "134")


@pytest.fixture(scope="module", params=PIPELINES, ids=lambda p: p.name)
def nlp(request):
    return spacy.load(request.param)


@pytest.fixture(scope="module")
def gold(pse_dir: Path):
    return [g for g in read_pse_i(pse_dir, "test") if g.id in ESSAYS]


def test_sentences_at_inference_are_the_training_units(nlp, gold):
    # the classifier is trained on PSE-I's <sent> units (rhetoric_textcat
    # reads the reference sentences); nlp(text) must cut the same units
    for g in gold:
        doc = nlp(g.text)
        got = [(s.start_char, s.end_char) for s in doc.sents]
        got = [(a, b - (len(doc.text[a:b]) - len(doc.text[a:b].rstrip()))) for a, b in got]
        assert got == [(u.start, u.end) for u in g.units], g.id


def test_no_branch_outside_a_parallelism_sentence(nlp, gold):
    records = predict_raw(nlp, gold)
    counts = consistency(records)
    assert counts["branches"] > 0
    assert counts["branches_outside_parallelism_sentences"] == 0
    for g, rec in zip(gold, records):
        for group in rec["parallelisms"]:
            for b in group["branches"]:
                holders = [s for s in rec["sentences"] if s["start"] < b["end"] and b["start"] < s["end"]]
                assert holders and all("parallelism" in s["coarse"] for s in holders)
                # ... with a form and a content under it
                assert all(set(s["form"]) & {"structure_parallelism", "sentence_parallelism"} for s in holders)
                assert all(set(s["content"]) & {"coordination", "subordination", "gradation"} for s in holders)


def test_essay_328_branches_are_their_own_sentences(nlp, gold):
    text = next(g.text for g in gold if g.id == "328")
    doc = nlp(text)
    heads = [s.text.strip() for s in doc.sents if s.text.startswith(("人生是", "人生亦是"))]
    assert len(heads) == 3 and all(h.endswith(("；", "。")) for h in heads)
    # the title, a line of its own, is labelled from its own words
    first = next(iter(doc.sents))
    assert first.text.strip() == "绚丽的人生" and first._.rhetoric["coarse"]


def test_analyze_record_uses_the_same_units(gold, pse_dir, tmp_path):
    out = tmp_path / "out.jsonl"
    essay = pse_dir / "xml" / "328.xml"
    result = CliRunner().invoke(app, ["analyze", str(essay), "--model", str(PIPELINES[0]), "-o", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text(encoding="utf8").splitlines()[0])
    g = next(g for g in gold if g.id == "328")
    assert record["text"] == g.text
    assert [(s["start"], s["end"]) for s in record["sentences"]] == [(u.start, u.end) for u in g.units]
    assert consistency([record])["branches_outside_parallelism_sentences"] == 0


def test_linker_rule_forces_parallelism_with_fine_labels():
    nlp = spacy.load(PIPELINES[0])
    textcat = nlp.get_pipe("rhetoric_textcat")
    probs = numpy.full(len(textcat.labels), 0.01, dtype="f")
    probs[textcat.labels.index("form/structure_parallelism")] = 0.2
    probs[textcat.labels.index("content/gradation")] = 0.1
    assert list(textcat.decode(probs)["coarse"]) == ["literal"]
    forced = textcat.decode(probs, force=("parallelism",))
    assert list(forced["coarse"]) == ["parallelism"]
    assert list(forced["form"]) == ["structure_parallelism"]
    assert list(forced["content"]) == ["gradation"]


def _doc(units, **kw):
    text = kw.pop("text", "甲乙丙丁。戊己庚辛；壬癸。")
    return GoldDoc("t", text, units, kw.pop("scored", {"coarse": frozenset({"metaphor", "parallelism"})}), **kw)


def test_each_predicted_sentence_goes_to_the_unit_it_overlaps_most():
    units = [GoldUnit(0, 5, {"coarse": {"metaphor"}}), GoldUnit(5, 10, {"coarse": {"parallelism"}}),
             GoldUnit(10, 13, {"coarse": {"literal"}})]
    sents = [{"start": 0, "end": 7, "coarse": {"metaphor": 0.9}},   # 5 chars in unit 0, 2 in unit 1
             {"start": 7, "end": 13, "coarse": {"parallelism": 0.8}}]  # 3 in unit 1, 3 in unit 2: the earlier
    given = assign_sentences(units, sents)
    assert [len(g) for g in given] == [1, 1, 0]
    scores = score_sentences([_doc(units)], [{"sentences": sents}])["all"]
    per = scores["sents_coarse_per_type"]
    assert per["metaphor"]["f"] == 1.0 and per["parallelism"]["f"] == 1.0
    assert scores["n_units"] == 3


def test_headings_are_scored_apart():
    text = "春天\n春天像娃娃。"
    units = [GoldUnit(0, 2, {"coarse": {"literal"}}, heading=True), GoldUnit(3, 9, {"coarse": {"metaphor"}})]
    sents = [{"start": 0, "end": 2, "coarse": {"metaphor": 0.6}}, {"start": 3, "end": 9, "coarse": {"metaphor": 0.7}}]
    scores = score_sentences([_doc(units, text=text)], [{"sentences": sents}])
    assert scores["body"]["sents_coarse_micro_p"] == 1.0
    assert scores["headings"]["sents_coarse_micro_p"] == 0.0
    assert scores["all"]["sents_coarse_micro_p"] == 0.5


def test_components_strict_and_overlap():
    gold = [_doc([GoldUnit(0, 13, {"coarse": {"metaphor"}})], components=[("tenor", 0, 2), ("vehicle", 3, 5)],
                 component_labels=frozenset({"tenor", "vehicle"}))]
    pred = {"components": [{"label": "tenor", "start": 0, "end": 2}, {"label": "vehicle", "start": 2, "end": 4},
                           {"label": "vehicle", "start": 8, "end": 9}]}
    s = score_components(gold, [pred])
    assert s["strict"]["per_type"]["tenor"]["f"] == 1.0
    assert s["strict"]["per_type"]["vehicle"]["p"] == 0.0
    assert s["overlap"]["per_type"]["vehicle"]["p"] == 0.5 and s["overlap"]["per_type"]["vehicle"]["r"] == 1.0


def test_branches_map_to_gold_words_by_characters():
    words = [(0, 2), (2, 3), (3, 5), (5, 6)]
    starts = [w[0] for w in words]
    assert branch_to_words((1, 3), words, starts) == (0, 2)
    assert branch_to_words((3, 6), words, starts) == (2, 4)
    assert branch_to_words((6, 8), words, starts) is None
    gold = [_doc([], words=words, parallelisms=[[(0, 2), (2, 4)]])]
    exact = {"parallelisms": [{"branches": [{"start": 0, "end": 3}, {"start": 3, "end": 6}]}]}
    assert score_parallelism(gold, [exact])["epm"]["f"] == 1.0
    shifted = {"parallelisms": [{"branches": [{"start": 0, "end": 2}, {"start": 3, "end": 6}]}]}
    assert score_parallelism(gold, [shifted])["epm"]["f"] == 0.0


def test_cerd_gold_matches_the_essay_text(shared_data: Path):
    gold = read_gold("pse-i-cerd", shared_data, ROOT / "annotations" / "pse-i-cerd", "test")
    assert len(gold) == 42
    for g in gold:
        assert all(g.text[u.start:u.end].strip() for u in g.units)
        assert all(g.text[s:e] for _, s, e in g.components)
    # the same records as test.jsonl, in the same number
    n = sum(1 for _ in open(ROOT / "annotations" / "pse-i-cerd" / "test.jsonl", encoding="utf8"))
    assert sum(len(g.units) for g in gold) == n


def test_score_records_rejects_misaligned_input():
    with pytest.raises(ValueError):
        score_records([_doc([])], [])


def test_score_records_scores_analyze_output(pse_dir, tmp_path):
    out = tmp_path / "out.jsonl"
    essays = [str(pse_dir / "xml" / f"{e}.xml") for e in ESSAYS[:2]]
    runner = CliRunner()
    assert runner.invoke(app, ["analyze", *essays, "--model", str(PIPELINES[0]), "-o", str(out), "--no-progress"]).exit_code == 0
    result = runner.invoke(app, ["evaluate", "records", str(out), "--corpus", "pse-i-cerd", "--shared", str(pse_dir.parent),
                                 "--annotations", str(ROOT / "annotations" / "pse-i-cerd")])
    assert result.exit_code == 0, result.output
    assert "40 pse-i-cerd test texts have no record" in result.output
    assert "sentences: parallelism" in result.output and "coarse micro" in result.output
    empty = tmp_path / "none.jsonl"
    empty.write_text(json.dumps({"schema": "x", "id": "nope", "text": ""}) + "\n", encoding="utf8")
    bad = runner.invoke(app, ["evaluate", "records", str(empty), "--shared", str(pse_dir.parent),
                              "--annotations", str(ROOT / "annotations" / "pse-i-cerd")])
    assert bad.exit_code == 1 and "no analysis record matches" in bad.output


def test_tuning_on_the_raw_dev_path_sets_thresholds_per_device_and_component(shared_data):
    """tune-thresholds-raw on a few real dev essays and simile sentences: each
    tuned label gets a grid value nearest 0.5 within 0.01 of its best F1, and
    the thresholds stay set in the components."""
    from spacy_rhetoric.evaluation.raw_path import (nearest_half, read_gold, tune_component_thresholds_raw,
                                                    tune_thresholds_raw)

    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric")
    devs = [read_gold("pse-i-cerd", shared_data, ROOT / "annotations" / "pse-i-cerd", "dev")[:6],
            read_gold("simile", shared_data, ROOT / "annotations" / "pse-i-cerd", "dev")[:150]]
    grid = [0.3, 0.5, 0.7]
    coarse = tune_thresholds_raw(nlp, devs, grid=grid)
    assert "metaphor" in coarse
    comps = tune_component_thresholds_raw(nlp, devs, grid=grid)
    assert "tenor" in comps
    for label, r in {**coarse, **comps}.items():
        assert set(r["grid"]) == set(grid) and r["threshold"] == nearest_half(r["grid"], 0.01)
    assert nlp.get_pipe("rhetoric_textcat").cfg["thresholds"]["coarse/metaphor"] == coarse["metaphor"]["threshold"]
    assert nlp.get_pipe("rhetoric_components").cfg["thresholds"]["tenor"] == comps["tenor"]["threshold"]
    assert nearest_half({0.3: 0.80, 0.5: 0.795, 0.7: 0.6}, 0.01) == 0.5


def test_linker_bias_is_tuned_on_the_dev_essays_that_annotate_parallelism(shared_data):
    """tune_linker_bias_raw on a few real dev essays (simile sentences, which
    annotate no parallelism, are left out): every grid value is scored, the
    smallest within 0.01 of the best is set in the linker's cfg; no
    parallelism gold at all is an error."""
    from spacy_rhetoric.evaluation.raw_path import read_gold, tune_linker_bias_raw

    nlp = spacy.load(ROOT / "pipelines" / "zh_rhetoric")
    essays = read_gold("pse-i-cerd", shared_data, ROOT / "annotations" / "pse-i-cerd", "dev")[:6]
    similes = read_gold("simile", shared_data, ROOT / "annotations" / "pse-i-cerd", "dev")[:20]
    r = tune_linker_bias_raw(nlp, [essays, similes], grid=[0.0, 0.3, 5.0])
    assert r["texts"] == 6 and set(r["grid"]) == {0.0, 0.3, 5.0}
    assert r["o_bias"] == min(b for b, f in r["grid"].items() if f >= max(r["grid"].values()) - 0.01)
    assert r["grid"][5.0] < r["grid"][0.0]  # every word in a branch is worse than the trained decoding
    assert nlp.get_pipe("parallelism_linker").cfg["o_bias"] == r["o_bias"]
    with pytest.raises(ValueError, match="no dev text annotates parallelism"):
        tune_linker_bias_raw(nlp, [similes])
