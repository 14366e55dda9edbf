"""Robustness of the assembled pipeline.

The pipeline is the small one of ``tests/tiny_pipeline.py``: real components
(pkuseg tokenizer, clause segmenter, rhetoric_textcat, rhetoric_components,
parallelism_linker) trained a few steps on real documents and assembled with
``spacy_rhetoric.packaging``; the inputs are real PSE-I test essays plus the
edge cases of DESIGN §5.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy

from spacy_rhetoric import parallelisms
from spacy_rhetoric.analysis.driver import analyze_docs
from spacy_rhetoric.analysis.io import InputDoc
from spacy_rhetoric.analysis.records import SCHEMA, doc_to_record
from spacy_rhetoric.evaluation.benchmark import pse_test_texts

from tiny_pipeline import build

EDGE_TEXTS = {
    "empty": "",
    "whitespace": "  \n\t \u3000 \n",
    "english": "The quick brown fox jumps over the lazy dog. Life is like a box of chocolates, you never know.",
    "traditional": "我的心像一隻小鳥，飛向藍天。時間就像流水，一去不復返；歲月就像刀，刻下皺紋。",
    "emoji": "今天天气真好😀！我的心像🐦一样飞翔🚀，开心😂😂。👍",
    "mixed": "他说：“Hello，世界！”\r\n3.14、1,000 和 12:30……——",
}


@pytest.fixture(scope="module")
def pipeline_path(shared_data: Path) -> Path:
    return build(shared_data)


@pytest.fixture(scope="module")
def nlp(pipeline_path: Path):
    return spacy.load(pipeline_path)


@pytest.fixture(scope="module")
def essays(pse_dir: Path):
    data = pse_test_texts(pse_dir, "test")
    return data["texts"][:3]


def records(nlp, texts, **kwargs):
    items = [InputDoc(str(i), None, t) for i, t in enumerate(texts)]
    return [doc_to_record(doc, item.id) for item, doc in analyze_docs(nlp, items, **kwargs)]


def test_assembled_order_and_self_contained(nlp):
    assert nlp.pipe_names == ["clause_segmenter", "parallelism_linker", "rhetoric_textcat", "rhetoric_components"]
    assert nlp.meta["lang"] == "zh" and nlp.meta["name"] == "rhetoric"
    assert "tok2vec" not in nlp.pipe_names  # listeners replaced by own copies
    assert nlp.config["nlp"]["tokenizer"]["segmenter"] == "pkuseg"
    for name in ("rhetoric_textcat", "rhetoric_components", "parallelism_linker"):
        arch = nlp.config["components"][name]["model"]["tok2vec"]["@architectures"]
        assert arch != "spacy.Tok2VecListener.v1", name


def test_n_process_2_matches_one_process(nlp, essays):
    texts = essays + list(EDGE_TEXTS.values())
    one = records(nlp, texts, n_process=1, batch_size=2)
    two = records(nlp, texts, n_process=2, batch_size=2)
    assert one == two
    assert sum(len(r["sentences"]) for r in one) > 20


def test_to_disk_from_disk_identical(nlp, essays, tmp_path):
    nlp.to_disk(tmp_path / "copy")
    again = spacy.load(tmp_path / "copy")
    assert again.pipe_names == nlp.pipe_names
    assert records(again, essays) == records(nlp, essays)
    docs = list(nlp.pipe(essays[:1]))
    docs2 = list(again.pipe(essays[:1]))
    assert [t.text for t in docs[0]] == [t.text for t in docs2[0]]
    assert [[(b.start, b.end) for b in p] for p in parallelisms(docs[0])] == [
        [(b.start, b.end) for b in p] for p in parallelisms(docs2[0])
    ]


def test_saved_pipeline_is_portable(pipeline_path):
    text = (pipeline_path / "config.cfg").read_text(encoding="utf8") + (pipeline_path / "meta.json").read_text(encoding="utf8")
    assert "/tmp" not in text and str(Path.home()) + "/" not in text
    meta = json.loads((pipeline_path / "meta.json").read_text(encoding="utf8"))
    assert meta["license"] == "CC BY-SA 4.0"
    assert {s["license"] for s in meta["sources"]} >= {"CC BY-SA 4.0"}
    assert (pipeline_path / "tokenizer" / "pkuseg_model").is_dir()


@pytest.mark.parametrize("name", sorted(EDGE_TEXTS))
def test_edge_texts_give_valid_analysis(nlp, name):
    text = EDGE_TEXTS[name]
    (record,) = records(nlp, [text])
    assert record["schema"] == SCHEMA and record["text"] == text
    check_offsets(record)
    if not text.strip():
        assert record["sentences"] == record["components"] == record["parallelisms"] == record["clauses"] == []


def test_one_megabyte_essay(nlp, essays):
    unit = "\n".join(essays)
    text = unit * (1_000_000 // len(unit.encode("utf8")) + 1)
    assert len(text.encode("utf8")) >= 1_000_000 and len(text) < nlp.max_length
    (record,) = records(nlp, [text])
    check_offsets(record)
    assert record["n_chars"] == len(text)
    assert record["sentences"][-1]["end"] <= len(text)
    assert len(record["sentences"]) > 1000


def test_longer_than_max_length_is_a_clear_error(nlp):
    with pytest.raises(ValueError, match="max_length"):
        records(nlp, ["好" * (nlp.max_length + 1)])


def check_offsets(record):
    text = record["text"]
    for sent in record["sentences"]:
        assert text[sent["start"]:sent["end"]] == sent["text"]
        assert set(sent) >= {"coarse", "form", "content"}
    for comp in record["components"]:
        assert text[comp["start"]:comp["end"]] == comp["text"]
    for group in record["parallelisms"]:
        for branch in group["branches"]:
            assert text[branch["start"]:branch["end"]] == branch["text"]
    for clause in record["clauses"]:
        assert 0 <= clause["start"] < clause["end"] <= len(text)


def test_benchmark_pipelines_reports_every_figure(pse_dir):
    """The benchmark command's figures on real essays: best and median,
    chars/s, the tokenizer alone, component shares that sum to 1, load time."""
    from conftest import ROOT
    from spacy_rhetoric.evaluation.benchmark import benchmark_pipelines

    texts = pse_test_texts(pse_dir)["texts"][:2]
    result = benchmark_pipelines([ROOT / "pipelines" / "zh_rhetoric"], texts, n_processes=[1], repeat=2)
    (run,) = result["results"]
    (row,) = run["rows"]
    assert row["n_process"] == 1 and len(row["seconds_all"]) == 2
    assert row["speedup_vs_fewest_processes_best"] == row["speedup_vs_fewest_processes_median"] == 1.0
    assert row["seconds_best"] <= row["seconds_median"]
    assert row["chars_per_second_best"] == pytest.approx(sum(map(len, texts)) / row["seconds_best"])
    assert run["words"] > 0 and run["load_seconds"] > 0 and run["tokenizer"]["chars_per_second_best"] > 0
    assert set(run["components"]) == {"tokenizer", *run["pipeline"]}
    assert sum(c["share"] for c in run["components"].values()) == pytest.approx(1.0)
    with pytest.raises(ValueError):
        benchmark_pipelines([ROOT / "pipelines" / "zh_rhetoric"], texts, repeat=0)


def test_process_speedups_are_ratios_of_seconds_to_the_fewest_processes():
    from spacy_rhetoric.evaluation.benchmark import add_process_speedups

    rows = add_process_speedups([{"n_process": 1, "seconds_best": 1.5, "seconds_median": 1.6},
                                 {"n_process": 2, "seconds_best": 1.0, "seconds_median": 1.28}])
    assert [r["speedup_vs_fewest_processes_best"] for r in rows] == [1.0, 1.5]
    assert [r["speedup_vs_fewest_processes_median"] for r in rows] == [1.0, 1.25]


def test_benchmark_latency_times_the_service_on_long_essays(pse_dir):
    """The latency command's essays are real essays cut to --chars, test
    split first; every request is answered and timed after one warm-up."""
    from conftest import ROOT
    from spacy_rhetoric.evaluation.benchmark import benchmark_latency, long_essays

    essays = long_essays(pse_dir, chars=1000, n=7)
    assert [len(t) for t in essays["texts"]] == [1000] * 7
    assert [i.split("/")[0] for i in essays["ids"]] == ["test"] * 5 + ["dev"] * 2  # the test split has 5
    full = dict(zip(pse_test_texts(pse_dir, "test")["ids"], pse_test_texts(pse_dir, "test")["texts"]))
    assert full[essays["ids"][0].split("/")[1]].startswith(essays["texts"][0])
    result = benchmark_latency([ROOT / "pipelines" / "zh_rhetoric"], essays["texts"][:2], repeat=2)
    (run,) = result["results"]
    assert run["requests"] == 4 and run["version"]
    assert 0 < run["p50_seconds"] <= run["p95_seconds"] <= run["max_seconds"]
    with pytest.raises(ValueError, match="only"):
        long_essays(pse_dir, chars=100_000, n=1)
