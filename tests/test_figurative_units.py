"""ConFiguRe figurative units: the converter, the scorer, the component's
contract on inline examples, and the shipped pipelines on raw text."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy
from spacy.tokens import Span
from spacy.training import Example

from spacy_rhetoric.components.figurative_units import TAGS, decode_units, encode_units, typed_bio_mask
from spacy_rhetoric.corpora.configure import (
    FIGURATIVE_UNITS_KEY, choose_dev_works, convert_configure, parse_fos, passage_to_doc, read_configure, read_split,
    split_passages, work_of,
)
from spacy_rhetoric.errors import CorpusFormatError
from spacy_rhetoric.scorers.figurative_units import score_figurative_units, score_unit_sets, unit_key
from spacy_rhetoric.taxonomy import CONFIGURE_FIGURES

ROOT = Path(__file__).resolve().parents[1]

# Written for these tests: a question, a repeated clause, a simile.
PASSAGES = {
    "晚风集_片段1": {
        "fragment": "你难道不知道吗？他笑着说。谢谢，谢谢，真是太感谢了。",
        "units": [
            {"figurativeUnit": "你难道不知道吗？", "fos": "问语", "begin": 0, "end": 8, "annotator": "1"},
            {"figurativeUnit": "谢谢，谢谢，真是太感谢了。", "fos": "反复(Repetition)", "begin": 13, "end": 26, "annotator": "1"},
        ],
    },
    "山居笔记_片段2": {
        "fragment": "月亮像一只银盘，挂在天上。我们慢慢地走回家。",
        "units": [{"figurativeUnit": "月亮像一只银盘，", "fos": "比喻（Metaphor/Simile）", "begin": 0, "end": 8, "annotator": "2"}],
    },
}


def _write(tmp_path: Path, data) -> Path:
    path = tmp_path / "configure.json"
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf8")
    return path


@pytest.mark.parametrize("value,label", [
    ("比喻", "metaphor"), ("比喻(Metaphor/Simile)", "metaphor"), ("比喻（Metaphor/Simile）", "metaphor"),
    ("Simile", "metaphor"), ("问语", "rhetorical_question"), ("Rhetorical question", "rhetorical_question"),
    ("rhetorical_question", "rhetorical_question"), ("引语 (Quote)", "quote"), ("通感", "synaesthesia"),
    ("比喻(Irony)", None), ("双关", None), (3, None),
])
def test_parse_fos_reads_chinese_names_with_or_without_glosses(value, label):
    assert parse_fos(value) == label


def test_every_figure_type_parses_from_its_chinese_name():
    assert {parse_fos(zh) for zh in CONFIGURE_FIGURES.values()} == set(CONFIGURE_FIGURES)


def test_converter_writes_units_with_english_labels_and_chinese_names(tmp_path):
    passages = read_configure(_write(tmp_path, PASSAGES))
    assert [p.work for p in passages] == ["晚风集", "山居笔记"]
    doc = passage_to_doc(spacy.blank("zh"), passages[0])
    group = doc.spans[FIGURATIVE_UNITS_KEY]
    assert [(s.start_char, s.end_char, s.label_) for s in group] == [(0, 8, "rhetorical_question"), (13, 26, "repetition")]
    assert group.attrs["label_zh"]["repetition"] == "反复"
    assert doc.user_data["work"] == "晚风集"
    split = tmp_path / "split.json"
    split.write_text(json.dumps({"train": ["晚风集"], "dev": ["山居笔记"]}, ensure_ascii=False), encoding="utf8")
    stats = convert_configure(_write(tmp_path, PASSAGES), tmp_path / "out", spacy.blank("zh"), split)
    assert (stats["train"].units, stats["dev"].units) == (2, 1)
    from spacy.tokens import DocBin

    docs = list(DocBin().from_disk(tmp_path / "out" / "dev.spacy").get_docs(spacy.blank("zh").vocab))
    assert [s.label_ for s in docs[0].spans[FIGURATIVE_UNITS_KEY]] == ["metaphor"]


@pytest.mark.parametrize("mutate,message", [
    (lambda d: d["晚风集_片段1"].pop("fragment"), "'fragment'"),
    (lambda d: d["晚风集_片段1"].__setitem__("units", {}), "'units'"),
    (lambda d: d["晚风集_片段1"]["units"][1].__setitem__("fos", "双关"), "unknown figure type"),
    (lambda d: d["晚风集_片段1"]["units"][1].__setitem__("end", 99), "outside the fragment"),
    (lambda d: d["晚风集_片段1"]["units"][1].__setitem__("begin", "13"), "integers"),
    (lambda d: d["晚风集_片段1"]["units"][1].pop("begin"), "missing field"),
    (lambda d: d["晚风集_片段1"]["units"][1].__setitem__("figurativeUnit", "别的"), "not the text"),
])
def test_malformed_passage_names_file_and_key(tmp_path, mutate, message):
    data = json.loads(json.dumps(PASSAGES))
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(CorpusFormatError) as err:
        read_configure(path)
    assert str(path) in str(err.value) and "晚风集_片段1" in str(err.value) and message in str(err.value)


def test_a_file_that_is_not_an_object_names_the_file(tmp_path):
    path = _write(tmp_path, [1, 2])
    with pytest.raises(CorpusFormatError, match="configure.json"):
        read_configure(path)


def test_dev_works_are_chosen_the_same_way_every_time(tmp_path):
    passages = read_configure(_write(tmp_path, PASSAGES))
    assert choose_dev_works(passages, tries=50) == choose_dev_works(passages, tries=50)
    assert work_of("春风沉醉的晚上-郁达夫_片段449") == "春风沉醉的晚上-郁达夫"


def test_real_validation_split_converts_and_the_committed_split_covers_it(shared_data):
    path = shared_data / "configure" / "valid.json"
    if not path.exists():
        pytest.skip("ConFiguRe valid.json not found")
    passages = read_configure(path)
    assert len(passages) == 419 and sum(len(p.units) for p in passages) == 886
    parts = split_passages(passages, read_split(ROOT / "configs" / "configure_split.json"))
    assert sum(len(p.units) for p in parts["train"]) == 663
    assert sum(len(p.units) for p in parts["dev"]) == 223
    assert not {p.work for p in parts["train"]} & {p.work for p in parts["dev"]}
    dev_types = {u.label for p in parts["dev"] for u in p.units}
    assert dev_types == set(CONFIGURE_FIGURES)
    doc = passage_to_doc(spacy.blank("zh"), parts["dev"][0])
    assert len(doc.spans[FIGURATIVE_UNITS_KEY]) == len(parts["dev"][0].units)


def test_unit_key_ignores_edge_punctuation():
    text = "“好，好，好！”他说。"
    assert unit_key(text, 0, 8) == (1, 6)
    assert unit_key(text, 1, 6) == (1, 6)


def test_unit_scores_follow_the_definitions():
    gold = [(0, 5, "metaphor"), (6, 10, "rhetorical_question"), (12, 20, "parallelism")]
    pred = [(0, 5, "metaphor"), (6, 10, "quote"), (13, 18, "parallelism"), (30, 35, "metaphor")]
    s = score_unit_sets([(gold, pred)])
    assert s["extraction_p"] == 0.5 and s["extraction_r"] == 2 / 3
    assert s["recognition_p"] == 0.25 and s["recognition_r"] == 1 / 3
    # per type F1: metaphor 2/3, quote 0, rhetorical_question 0, parallelism 0
    assert s["recognition_macro_f"] == pytest.approx((2 / 3) / 4)
    assert s["overlap_p"] == 0.5 and s["overlap_r"] == 2 / 3


def test_tags_encode_and_decode_units_and_the_mask_forbids_bad_transitions():
    tags = encode_units([(0, 1, "metaphor"), (1, 2, "quote"), (3, 3, "quote")], 5)
    assert tags == ["B-metaphor", "I-metaphor", "O", "B-quote", "O"]
    assert decode_units(tags) == [(0, 1, "metaphor"), (3, 3, "quote")]
    start, trans, _ = typed_bio_mask(list(TAGS))
    index = {t: i for i, t in enumerate(TAGS)}
    assert not start[index["I-quote"]] and start[index["B-quote"]]
    assert trans[index["B-quote"], index["I-quote"]] and not trans[index["B-metaphor"], index["I-quote"]]
    assert not trans[index["O"], index["I-quote"]]


def _contract_nlp():
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe("figurative_units", config={"model": {"hidden_width": 32, "dropout": 0.0}})
    return nlp


def _examples(nlp):
    ref_nlp = spacy.blank("zh")
    out = []
    for passage in read_configure_inline():
        ref = passage_to_doc(ref_nlp, passage)
        out.append(Example(nlp.get_pipe("clause_segmenter")(nlp.make_doc(passage.fragment)), ref))
    return out


def read_configure_inline():
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        return read_configure(_write(Path(tmp), PASSAGES))


def test_component_overfits_inline_examples_and_round_trips(tmp_path):
    nlp = _contract_nlp()
    examples = _examples(nlp)
    optimizer = nlp.initialize(lambda: examples)
    pipe = nlp.get_pipe("figurative_units")
    assert pipe.labels == TAGS
    for _ in range(150):
        losses = pipe.update(examples, sgd=optimizer)
    assert losses["figurative_units"] < 1.0
    texts = [eg.reference.text for eg in examples]
    gold = [[(s.start_char, s.end_char, s.label_) for s in eg.reference.spans[FIGURATIVE_UNITS_KEY]] for eg in examples]
    predicted = [[(s.start_char, s.end_char, s.label_) for s in doc.spans[FIGURATIVE_UNITS_KEY]] for doc in nlp.pipe(texts)]
    assert predicted == gold
    assert nlp(texts[0]).spans[FIGURATIVE_UNITS_KEY].attrs["label_zh"]["rhetorical_question"] == "问语"
    scores = nlp.evaluate(examples)
    assert scores["figurative_units_recognition_f"] == 1.0
    assert scores["spans_figurative_units_f"] == 1.0
    nlp.to_disk(tmp_path / "nlp")
    loaded = spacy.load(tmp_path / "nlp")
    assert [[(s.start_char, s.end_char, s.label_) for s in doc.spans[FIGURATIVE_UNITS_KEY]] for doc in loaded.pipe(texts)] == gold
    # task 2: the type of given units
    doc = loaded(texts[0])
    assert loaded.get_pipe("figurative_units").classify_units(doc, [(0, 8), (13, 26)]) == ["rhetorical_question", "repetition"]
    # b_bias: a large one starts a unit at every clause
    loaded.get_pipe("figurative_units").cfg["b_bias"] = 1e3
    doc = loaded(texts[0])
    assert len(doc.spans[FIGURATIVE_UNITS_KEY]) == len(doc.spans["clauses"])


def test_add_to_pipeline_bumps_the_patch_or_writes_the_given_version(tmp_path):
    """add-figurative-units bumps the target's patch version; a build that
    rebuilds a released pipeline passes the version it ships."""
    from spacy_rhetoric.ml.figurative_training import add_to_pipeline

    source = _contract_nlp()
    source.initialize(lambda: _examples(source))
    source.to_disk(tmp_path / "source")
    target = spacy.blank("zh")
    target.add_pipe("clause_segmenter")
    target.meta["version"] = "0.4.4"
    target.to_disk(tmp_path / "target")
    assert add_to_pipeline(tmp_path / "source", tmp_path / "target") == "0.4.5"
    assert add_to_pipeline(tmp_path / "source", tmp_path / "target", version="0.4.8") == "0.4.8"
    loaded = spacy.load(tmp_path / "target")
    assert loaded.pipe_names == ["clause_segmenter", "figurative_units"] and loaded.meta["version"] == "0.4.8"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["source", "target"]


def test_component_needs_clauses_and_leaves_empty_docs_alone():
    nlp = _contract_nlp()
    examples = _examples(nlp)
    nlp.initialize(lambda: examples)
    assert list(nlp("").spans[FIGURATIVE_UNITS_KEY]) == []
    pipe = nlp.get_pipe("figurative_units")
    with pytest.raises(ValueError, match="clause_segmenter"):
        pipe(nlp.make_doc("没有分句的文本。"))


def test_initialize_without_any_doc_raises():
    nlp = _contract_nlp()
    with pytest.raises(ValueError, match="E923"):
        nlp.get_pipe("figurative_units").initialize(lambda: [Example(nlp.make_doc(""), nlp.make_doc(""))])


def test_scorer_is_registered_and_returns_none_without_gold():
    scorer = spacy.registry.scorers.get("spacy_rhetoric.figurative_units_scorer.v1")()
    nlp = spacy.blank("zh")
    doc = nlp.make_doc("天很蓝。")
    scores = scorer([Example(doc, nlp.make_doc("天很蓝。"))])
    assert scores["figurative_units_recognition_f"] is None


def test_record_lists_figurative_units_with_chinese_names():
    from spacy_rhetoric.corpora.configure import set_figurative_units
    from spacy_rhetoric.analysis.records import doc_to_record

    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    doc = nlp("你难道不知道吗？月亮像一只银盘。")
    set_figurative_units(doc, [Span(doc, 8, 16, label="metaphor"), Span(doc, 0, 8, label="rhetorical_question")])
    record = doc_to_record(doc, "d1")
    assert record["figurative_units"] == [
        {"start": 0, "end": 8, "label": "rhetorical_question", "label_zh": "问语"},
        {"start": 8, "end": 16, "label": "metaphor", "label_zh": "比喻"},
    ]
    assert doc_to_record(nlp("天很蓝。"), "d2")["figurative_units"] == []


# Written for this test in the pattern of a textbook 排比 (three parallel
# comma-separated clauses, each a simile), not quoted from any text.
PARALLEL_SIMILES = "蓝的像海，绿的像玉，金的像阳光。"


@pytest.mark.parametrize("name", ["zh_rhetoric", "zh_rhetoric_trf"])
def test_shipped_pipelines_find_the_figures_of_three_parallel_similes(name):
    path = ROOT / "pipelines" / name
    if not (path / "figurative_units").is_dir():
        pytest.skip(f"{path} has no figurative_units")
    doc = spacy.load(path)(PARALLEL_SIMILES)
    units = [(s.text, s.label_) for s in doc.spans[FIGURATIVE_UNITS_KEY]]
    # the trained model marks each clause as a simile (比喻); it does not
    # (yet) label the three together as one 排比 unit
    assert units == [("蓝的像海，", "metaphor"), ("绿的像玉，", "metaphor"), ("金的像阳光。", "metaphor")]
