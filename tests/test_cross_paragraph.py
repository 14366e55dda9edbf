"""Parallelisms across paragraphs: the pse-original converter, the
``cross_paragraph_linker`` component, its scorer, and real essays through
``nlp(text)``, ``rhetoric analyze`` and ``/analyze`` (PSE-I test essay 372:
three paragraphs opening 当…的时候，温暖就是…, and the headings 温暖是手 /
温暖是爱 / 温暖是家)."""
from __future__ import annotations

import json
from pathlib import Path
from typing import Dict, List

import numpy
import pytest
import spacy
from spacy.tokens import Doc, DocBin
from spacy.training import Example
from typer.testing import CliRunner

from spacy_rhetoric.cli import app
from spacy_rhetoric.components.cross_paragraph_linker import link_groups
from spacy_rhetoric.corpora.pse_original import convert_pse_original, essay_doc, read_essay
from spacy_rhetoric.errors import CorpusFormatError
from spacy_rhetoric.ml.cross_paragraph import N_FEATURES, pair_features, paragraph_openings
from spacy_rhetoric.scorers.cross_paragraph import score_cross_groups
from spacy_rhetoric.spangroups import CROSS_PARAGRAPH, IN_PARAGRAPH, parallelisms, set_parallelisms

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted(p.parent for p in (ROOT / "pipelines").glob("*/config.cfg"))
ESSAY_372 = [["当路人在无助的困境中彷徨", "当人们在绝望的悬崖边蹒跚", "当游子在寒冷，孤独的夜里徘徊"],
             ["温暖是手", "温暖是爱", "温暖是家"]]


@pytest.fixture(scope="module")
def original_dir(shared_data: Path) -> Path:
    return shared_data / "pse-original"


def test_essay_372_chains(original_dir):
    essay = read_essay(original_dir / "372.xml")
    assert essay.groups["cross_paragraph"] == [[(1, 0), (2, 0), (3, 0)], [(6, 0), (8, 0), (10, 0)]]
    assert essay.problems.total() == 0
    doc = essay_doc(spacy.blank("zh"), essay)
    groups = parallelisms(doc, kind=CROSS_PARAGRAPH)
    assert [[b.text[:len(p)] for b, p in zip(g, want)] for g, want in zip(groups, ESSAY_372)] == ESSAY_372
    assert parallelisms(doc, kind=IN_PARAGRAPH) == []


@pytest.mark.parametrize("name", ["12.xml", "367.xml", "392.xml"])
def test_malformed_chains_are_repaired_and_counted(original_dir, name):
    essay = read_essay(original_dir / name)
    assert essay.problems.total() > 0
    assert all(len(g) >= 2 for groups in essay.groups.values() for g in groups)


def test_converter_counts_and_leaves_out_the_dubious_files(original_dir, pse_dir, tmp_path):
    stats = convert_pse_original(original_dir, pse_dir, tmp_path, spacy.blank("zh"))
    assert stats["test"]["essays"] == 42 and stats["test"]["essays_with_cross_paragraph"] == 18
    assert stats["dubious"]["essays"] == 2
    assert sum(stats[s]["essays"] for s in ("train", "dev", "optimization", "test")) == 407
    docs = list(DocBin().from_disk(tmp_path / "test.spacy").get_docs(spacy.blank("zh").vocab))
    kinds = {g.attrs.get("kind") for d in docs for k, g in d.spans.items() if k.startswith("parallelism_")}
    assert kinds == {CROSS_PARAGRAPH}  # the kind survives a DocBin


def test_bad_type_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.xml"
    bad.write_text('<doc>\n<para id="0">\n<sent id="0" type="sideways">甲。</sent>\n</para>\n</doc>\n', encoding="utf8")
    with pytest.raises(CorpusFormatError, match=r"bad\.xml.*line 3"):
        read_essay(bad)
    broken = tmp_path / "broken.xml"
    broken.write_text("<doc><para>", encoding="utf8")
    with pytest.raises(CorpusFormatError, match="broken.xml"):
        read_essay(broken)


def test_kinds_are_checked():
    doc = spacy.blank("zh")("甲乙丙丁")
    with pytest.raises(ValueError):
        set_parallelisms(doc, [[(0, 1), (2, 3)]], kinds=["sideways"])
    set_parallelisms(doc, [[(0, 1), (2, 3)], [(1, 2), (3, 4)]], kinds=[CROSS_PARAGRAPH, IN_PARAGRAPH])
    assert [len(parallelisms(doc, kind=k)) for k in (IN_PARAGRAPH, CROSS_PARAGRAPH, None)] == [1, 1, 2]


def test_link_groups_by_average_linkage():
    pairs = [(0, 1), (0, 2), (1, 2), (0, 3), (1, 3), (2, 3)]
    probs = numpy.asarray([0.9, 0.8, 0.7, 0.1, 0.2, 0.3], dtype="f")
    assert link_groups(4, pairs, probs, 0.5) == [[0, 1, 2]]
    assert link_groups(4, pairs, probs, 0.95) == []


def test_pair_features_are_bounded():
    f = pair_features("温暖是手", "温暖是爱", 2)
    assert len(f) == N_FEATURES and all(0.0 <= x <= 1.0 for x in f)
    assert f[0] > pair_features("温暖是手", "今天下雨了。", 2)[0]


def test_scorer_hand_computed():
    a, b, c, d = (0, 2), (5, 7), (9, 11), (13, 15)
    hyp, ref = [[a, b, c]], [[a, b], [c, d]]
    s = score_cross_groups([(hyp, ref)], "x")
    assert s["x_link_p"] == pytest.approx(1 / 3) and s["x_link_r"] == pytest.approx(1 / 2)
    assert s["x_group_p"] == 0.0 and s["x_group_r"] == 0.0


def _essay(nlp, paragraphs: List[str], groups: List[List[int]]) -> Example:
    text = "\n".join(paragraphs)
    ref = nlp.make_doc(text)
    starts, pos = [], 0
    for p in paragraphs:
        starts.append((pos, pos + len(p)))
        pos += len(p) + 1
    spans = [[ref.char_span(*starts[i]) for i in g] for g in groups]
    set_parallelisms(ref, [[(s.start, s.end) for s in g] for g in spans], kinds=[CROSS_PARAGRAPH] * len(spans))
    return Example(nlp.make_doc(text), ref)


def test_overfitting_and_io(tmp_path):
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe("cross_paragraph_linker", config={"threshold": 0.5})
    examples = [
        _essay(nlp, ["春天来了", "春天是花。", "今天下雨，我们在家。", "春天是草。", "春天是风。"], [[1, 3, 4]]),
        _essay(nlp, ["我的老师", "他教我写字。", "老师的手很暖。", "下课了。"], []),
    ]
    optimizer = nlp.initialize(lambda: examples)
    losses: Dict[str, float] = {}
    for _ in range(200):
        nlp.update(examples, sgd=optimizer, losses=losses, annotates=["clause_segmenter"])
    doc = nlp(examples[0].reference.text)
    assert [[b.text for b in g] for g in parallelisms(doc, kind=CROSS_PARAGRAPH)] == [["春天是花。", "春天是草。", "春天是风。"]]
    assert parallelisms(nlp(examples[1].reference.text)) == []
    nlp.to_disk(tmp_path / "p")
    again = spacy.load(tmp_path / "p")
    assert [[b.text for b in g] for g in parallelisms(again(examples[0].reference.text))] == [["春天是花。", "春天是草。", "春天是风。"]]
    assert nlp.evaluate(examples)["cross_paragraph_group_f"] == 1.0


def test_openings_are_paragraph_first_sentences():
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    doc = nlp("标题\n第一句。第二句。\n  第三段。")
    assert [c[2] for c in paragraph_openings(doc)] == ["标题", "第一句。", "第三段。"]


@pytest.fixture(scope="module", params=PIPELINES, ids=lambda p: p.name)
def shipped(request):
    return spacy.load(request.param)


def test_essay_372_through_nlp(shipped, pse_dir):
    from spacy_rhetoric.analysis.io import read_pse_essay

    doc = shipped(read_pse_essay(pse_dir / "xml" / "372.xml"))
    found = [[b.text for b in g] for g in parallelisms(doc, kind=CROSS_PARAGRAPH)]
    for want in ESSAY_372:
        assert any(len(g) == 3 and all(b.startswith(w) for b, w in zip(g, want)) for g in found), found
    for group in parallelisms(doc, kind=CROSS_PARAGRAPH):
        for branch in group:
            sent = next(s for s in doc.sents if s.start <= branch.start < s.end)
            assert "parallelism" in sent._.rhetoric["coarse"]


def test_essay_372_through_analyze_and_the_service(pse_dir, tmp_path):
    from fastapi.testclient import TestClient

    from spacy_rhetoric.analysis.io import read_pse_essay
    from spacy_rhetoric.serve import create_app

    out = tmp_path / "out.jsonl"
    result = CliRunner().invoke(app, ["analyze", str(pse_dir / "xml" / "372.xml"), "--model", str(PIPELINES[0]),
                                      "-o", str(out), "--no-progress"])
    assert result.exit_code == 0, result.output
    record = json.loads(out.read_text(encoding="utf8"))
    cross = [g for g in record["parallelisms"] if g["kind"] == CROSS_PARAGRAPH]
    assert len(cross) >= 2 and record["summary"]["cross_paragraph_parallelisms"] == len(cross)
    html = tmp_path / "out.html"
    CliRunner().invoke(app, ["analyze", str(pse_dir / "xml" / "372.xml"), "--model", str(PIPELINES[0]),
                             "--format", "html", "-o", str(html), "--no-progress"])
    assert 'data-parallelism-kind="cross_paragraph"' in html.read_text(encoding="utf8")
    client = TestClient(create_app(spacy.load(PIPELINES[0])))
    served = client.post("/analyze", json={"text": read_pse_essay(pse_dir / "xml" / "372.xml")}).json()
    assert [g["branches"] for g in served["parallelisms"] if g["kind"] == CROSS_PARAGRAPH] == [g["branches"] for g in cross]
