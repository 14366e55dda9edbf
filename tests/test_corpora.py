"""Converters on the real corpora: published counts, round trips, validation."""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from xml.etree import ElementTree

import pytest
import spacy
from spacy.tokens import DocBin

from spacy_rhetoric import parallelisms
from spacy_rhetoric.corpora.cerd import read_cerd
from spacy_rhetoric.corpora.cmdag import convert_cmdag, locate, read_cmdag
from spacy_rhetoric.corpora.pse_i import essay_text, read_essay, read_splits
from spacy_rhetoric.corpora.simile import comparator_index, read_simile
from spacy_rhetoric.errors import CorpusFormatError


@pytest.fixture(scope="module")
def nlp():
    return spacy.blank("zh")


def _docs(path: Path, nlp):
    return list(DocBin().from_disk(path).get_docs(nlp.vocab))


def _xml_parallelisms(path: Path):
    """Parallelisms straight from the XML: {(para, par_id): [[word texts of each branch]]}."""
    groups = defaultdict(lambda: defaultdict(list))
    for para in ElementTree.parse(path).getroot().iter("para"):
        for word in para.iter("word"):
            if word.get("parallelism_id_1") is not None:
                groups[(para.get("id"), word.get("parallelism_id_1"))][word.get("branch_id_1")].append(word.text)
    return sorted(sorted(tuple(b) for b in branches.values()) for branches in groups.values())


def test_pse_i_counts_match_published(pse_docbins, nlp):
    expected = {"train": 286, "dev": 40, "optimization": 41, "test": 42}
    totals = defaultdict(int)
    for split, n_essays in expected.items():
        docs = _docs(pse_docbins / f"{split}.spacy", nlp)
        assert len({d.user_data["essay_id"] for d in docs}) == n_essays
        groups = [p for d in docs for p in parallelisms(d)]
        totals["words"] += sum(len(d) for d in docs)
        totals["parallelisms"] += len(groups)
        totals["branches"] += sum(len(p) for p in groups)
    assert dict(totals) == {"words": 241_203, "parallelisms": 786, "branches": 2_153}


def test_pse_i_docbin_round_trip_keeps_every_branch_and_grouping(pse_dir, pse_docbins, nlp):
    """All 409 essays: branches and groupings read back equal the XML's."""
    by_essay = defaultdict(list)
    for split in ("train", "dev", "optimization", "test"):
        for doc in _docs(pse_docbins / f"{split}.spacy", nlp):
            by_essay[doc.user_data["essay_id"]].append(doc)
    assert len(by_essay) == 409
    for essay_id, docs in by_essay.items():
        got = sorted(
            sorted(tuple(t.text for t in branch) for branch in group) for doc in docs for group in parallelisms(doc)
        )
        assert got == _xml_parallelisms(pse_dir / "xml" / f"{essay_id}.xml"), essay_id
        for doc in docs:
            for span in doc.spans["parallelism"]:
                assert span.label_ == "branch" and span in doc.spans[span.id_]


def test_pse_i_sentences_and_sentence_level_gold(pse_dir, nlp):
    docs = read_essay(pse_dir / "xml" / "1.xml", nlp.vocab)
    para = docs[1]
    assert [s.text for s in para.sents][0].startswith("如果和谐是一片汪洋大海")
    assert {s.label_ for s in para.spans["rhetoric"]} == {"parallelism"}
    assert para.user_data["rhetoric_annotated"]["coarse"] == ["parallelism"]
    assert read_splits(pse_dir)["test"][:1] == ["328.xml"]


def test_simile_counts_match_published(simile_docbins, nlp):
    sizes = {"train": (7262, 3315), "dev": (1813, 786), "test": (2262, 987)}
    for split, (n_sent, n_simile) in sizes.items():
        docs = _docs(simile_docbins / f"{split}.spacy", nlp)
        assert len(docs) == n_sent
        assert sum(d.cats["form/simile"] for d in docs) == n_simile
    assert sum(n for n, _ in sizes.values()) == 11_337 and sum(s for _, s in sizes.values()) == 5_088


def test_simile_gold_spans_and_comparator(simile_dir, simile_docbins, nlp):
    docs = _docs(simile_docbins / "test.spacy", nlp)
    similes = [d for d in docs if d.cats["coarse/metaphor"]]
    literal = [d for d in docs if not d.cats["coarse/metaphor"]]
    assert all("像" in s.text for d in similes for s in d.spans["rhetoric_components"] if s.label_ == "comparator")
    assert all(len([s for s in d.spans["rhetoric_components"] if s.label_ == "comparator"]) == 1 for d in similes)
    assert not any(s.label_ == "comparator" for d in literal for s in d.spans["rhetoric_components"])
    assert [s.label_ for s in similes[0].spans["rhetoric"]] == ["metaphor"]
    assert [s.label_ for s in similes[0].spans["rhetoric_form"]] == ["simile"]
    first = next(read_simile(next(simile_dir.glob("*-Test.tsv"))))
    assert first.label == "literal" and first.words[:3] == ["让", "大家", "像"]


def test_comparator_is_the_xiang_nearest_before_the_vehicle():
    words = ["他", "像", "风", "一样", "跑", "好像", "一阵", "风"]
    assert comparator_index(words, [(0, 1, "tenor"), (6, 8, "vehicle")]) == 5
    assert comparator_index(words, []) == 1
    assert comparator_index(["没有"], []) is None


def test_cmdag_located_and_not_located_are_counted(cmdag_dir, tmp_path, nlp):
    stats = convert_cmdag(cmdag_dir, tmp_path, nlp)
    assert stats["test"].records == 3447 and stats["val"].records == 3446
    for s in stats.values():
        assert s.located + s.not_located == s.records
    assert (stats["val"].located, stats["test"].located) == (1987, 2507)
    docs = _docs(tmp_path / "test.spacy", nlp)
    assert sum(len(d.spans["rhetoric_components"]) for d in docs) > 0
    for doc in docs:
        for span in doc.spans["rhetoric_components"]:
            assert span.label_ in ("tenor", "vehicle")


def test_cmdag_locate_rule():
    assert locate("火是一份痛苦的赠礼。", "火", "痛苦的赠礼") == ((0, 1), (4, 9))
    assert locate("火是一份痛苦的赠礼。", "火", "痛苦的惩罚") is None
    assert locate("abc", "", "b") is None


@pytest.mark.parametrize(
    "content, fragment",
    [
        ('[{"metaphor_id": 1, "context": "x"}]', "record 0: missing field"),
        ('[{"metaphor_id": 1, "context": 3, "tenor": "a", "vehicle": "b", "ground": "", "sub_id": 0}]', "record 0"),
        ('[\n{"metaphor_id": 1,,}]', "line 2"),
    ],
)
def test_cmdag_malformed_names_file_and_place(tmp_path, content, fragment):
    path = tmp_path / "bad.json"
    path.write_text(content, encoding="utf8")
    with pytest.raises(CorpusFormatError, match="bad.json") as err:
        read_cmdag(path)
    assert fragment in str(err.value)


@pytest.mark.parametrize(
    "content, line",
    [
        ("simile\n像\tO\n\nmaybe\n", 4),
        ("literal\n像\tO\n我\tzz\n", 3),
        ("literal\n像 O\n", 2),
        ("simile\n他\ttb\n像\tO\n", 1),
    ],
)
def test_simile_malformed_names_file_and_line(tmp_path, content, line, nlp):
    from spacy_rhetoric.corpora.simile import sentence_to_doc

    path = tmp_path / "bad-Train.tsv"
    path.write_text(content, encoding="utf8")
    with pytest.raises(CorpusFormatError, match=rf"bad-Train.tsv, line {line}\b"):
        for sent in read_simile(path):
            sentence_to_doc(nlp.vocab, path, sent)


@pytest.mark.parametrize(
    "content, line",
    [
        ("<doc><para id='0'><sent id='0'>\n<word id='0'>a</word\n</sent></para></doc>", 3),
        ("<doc><para id='0'><sent id='0'>\n<word id='0' parallelism_id_1='0'>a</word></sent></para></doc>", 2),
        ("<doc><para id='0'><sent id='0'><word id='0' parallelism_id_1='0' branch_id_1='1'>a</word>\n"
         "<word id='1'>b</word><word id='2' parallelism_id_1='0' branch_id_1='1'>c</word></sent></para></doc>", 1),
    ],
)
def test_pse_i_malformed_names_file_and_line(tmp_path, content, line, nlp):
    path = tmp_path / "9.xml"
    path.write_text(content, encoding="utf8")
    with pytest.raises(CorpusFormatError, match=rf"9.xml, line {line}\b"):
        read_essay(path, nlp.vocab)
    with pytest.raises(CorpusFormatError, match=rf"9.xml, line {line}\b"):
        essay_text(path)  # what `rhetoric analyze` reads: the same checks


def test_pse_i_essay_text_is_the_text_of_its_paragraph_docs(pse_dir, nlp):
    # every essay, including 12.xml (dubious upstream) and paragraphs without words
    for path in sorted((pse_dir / "xml").glob("*.xml")):
        assert essay_text(path) == "\n".join(doc.text for doc in read_essay(path, nlp.vocab)), path.name


def _write(tmp_path, records) -> Path:
    path = tmp_path / "cerd.json"
    path.write_text(json.dumps(records, ensure_ascii=False), encoding="utf8")
    return path


def test_cerd_fixture_all_tasks(tmp_path, nlp):
    rc = read_cerd(_write(tmp_path, [{"sentence": "时间像流水。", "rhetoricList": ["比喻", "夸张"]},
                                     {"sentence": "我去上学。", "rhetoricList": None}]), "rc", nlp)
    assert rc[0].cats["coarse/metaphor"] == 1.0 and rc[0].cats["coarse/literal"] == 0.0
    assert rc[1].cats["coarse/literal"] == 1.0 and not rc[1].spans["rhetoric"]
    assert {s.label_ for s in rc[0].spans["rhetoric"]} == {"metaphor", "hyperbole"}

    fc = read_cerd(_write(tmp_path, [{"sentence": "时间像流水。", "rhetoricList": [{"form": "明喻"}]}]), "fc", nlp)
    assert fc[0].cats["form/simile"] == 1.0 and fc[0].cats["coarse/metaphor"] == 1.0
    assert fc[0].user_data["rhetoric_annotated"]["form"][-1] == "literal"

    cc = read_cerd(_write(tmp_path, [{"sentence": "花儿笑了。", "rhetoricList": [{"content": "拟人"}]}]), "cc", nlp)
    assert cc[0].cats["content/personification"] == 1.0 and cc[0].cats["coarse/personification"] == 1.0

    text = "时间像流水。"
    tags = ["B-METAPHOR-TENOR", "I-METAPHOR-TENOR", "B-METAPHOR-COMPARATOR", "B-METAPHOR-VEHICLE", "I-METAPHOR-VEHICLE", "O"]
    ce = read_cerd(_write(tmp_path, [{"sentence": text, "tags": tags}]), "ce", nlp)
    assert [(s.text, s.label_) for s in ce[0].spans["rhetoric_components"]] == [
        ("时间", "tenor"), ("像", "comparator"), ("流水", "vehicle")]

    rg = read_cerd(_write(tmp_path, [{"sentence": "月亮像玉盘。", "previousSentences": ["夜深了。"],
                                      "generationList": [{"rhetoric": "比喻", "object": "月亮"}]}]), "rg", nlp)
    assert rg[0].user_data["generation"]["conditions"] == [{"rhetoric": "metaphor", "object": "月亮"}]


@pytest.mark.parametrize(
    "task, records, fragment",
    [
        ("rc", [{"sentence": "好。", "rhetoricList": ["反语"]}], "record 0: unknown coarse"),
        ("fc", [{"sentence": "好。", "rhetoricList": []}, {"sentence": "", "rhetoricList": []}], "record 1"),
        ("ce", [{"sentence": "好。", "tags": ["O"]}], "record 0: 'tags'"),
        ("ce", [{"sentence": "好。", "tags": ["B-FOO", "O"]}], "record 0: unknown component"),
        ("rg", [{"sentence": "好。", "generationList": []}], "record 0"),
    ],
)
def test_cerd_malformed_names_file_and_record(tmp_path, nlp, task, records, fragment):
    with pytest.raises(CorpusFormatError, match="cerd.json") as err:
        read_cerd(_write(tmp_path, records), task, nlp)
    assert fragment in str(err.value)
