"""Documents analysed in pieces with normalised line endings
(``spacy_rhetoric.analysis.pieces``): the cuts, the offset maps, and ``analyze`` on
real PSE-I essays with the shipped pipeline."""
from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import spacy
from spacy.language import Language

from spacy_rhetoric.analysis.io import read_pse_essay
from spacy_rhetoric.analysis.driver import analyze
from spacy_rhetoric.corpora.pse_i import read_splits
from spacy_rhetoric.analysis.pieces import merge_bodies, normalize_line_endings, piece_bounds

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "zh_rhetoric"


# --- contracts on inline texts ---------------------------------------------------------


def test_pieces_are_paragraphs_then_sentences_then_a_hard_cut():
    paragraphs = ["一二三。\n", "五六七。\n", "甲乙丙丁戊己庚辛。壬癸子丑。\n", "寅卯辰巳午未申酉戌亥天地\n", "好"]
    text = "".join(paragraphs)
    bounds = piece_bounds(text, 10)
    assert [text[s:e] for s, e in bounds] == [
        "一二三。\n五六七。\n",  # two whole paragraphs fit
        "甲乙丙丁戊己庚辛。", "壬癸子丑。\n",  # a long paragraph cut after its sentences
        "寅卯辰巳午未申酉戌亥", "天地\n", "好",  # a sentence longer than a piece cut at the bound
    ]
    assert piece_bounds(text, 1000) == [(0, len(text))]
    assert piece_bounds("", 5) == [(0, 0)]
    with pytest.raises(ValueError):
        piece_bounds(text, 0)


def test_sentence_cuts_keep_closing_quotes_with_their_sentence():
    text = "他说：“你好！”我们走吧。好的"
    bounds = piece_bounds(text, 9)
    assert [text[s:e] for s, e in bounds] == ["他说：“你好！”", "我们走吧。好的"]


def test_line_endings_are_normalised_and_offsets_mapped_back():
    original = "题目\r\n第一段。\r第二段\n"
    norm = normalize_line_endings(original)
    assert norm.text == "题目\n第一段。\n第二段\n"
    # every start and end in the normalised text maps to the same place in the original
    for start, end, piece in [(0, 2, "题目"), (3, 7, "第一段。"), (8, 11, "第二段"), (2, 3, "\r\n"), (0, 12, original)]:
        assert norm.text[start:end].replace("\n", "") == original[norm.to_original(start):norm.to_original(end)].replace("\r", "").replace("\n", "")
        assert original[norm.to_original(start):norm.to_original(end)] == piece
    plain = normalize_line_endings("无换行")
    assert plain.text is plain.original and plain.to_original(2) == 2


def test_merged_body_renumbers_parallelisms_and_recounts():
    norm = normalize_line_endings("甲乙\r\n丙丁")
    bounds = [(0, 3), (3, 5)]
    body = lambda text, n: {  # noqa: E731 - a record body of one piece
        "text": text, "n_chars": len(text), "n_tokens": 2,
        "sentences": [{"start": 0, "end": 2, "text": text[:2], "coarse": {"parallelism": 0.9}, "form": {}, "content": {}}],
        "components": [], "clauses": [{"start": 0, "end": 2}],
        "parallelisms": [{"id": f"parallelism_{n}", "kind": "in_paragraph",
                          "branches": [{"start": 0, "end": 1, "text": text[0]}, {"start": 1, "end": 2, "text": text[1]}]}],
        "summary": {},
    }
    merged = merge_bodies(norm, bounds, [body("甲乙\n", 1), body("丙丁", 1)])
    assert merged["text"] == "甲乙\r\n丙丁" and merged["n_chars"] == 6 and merged["n_tokens"] == 4
    assert [(s["start"], s["end"], s["text"]) for s in merged["sentences"]] == [(0, 2, "甲乙"), (4, 6, "丙丁")]
    assert [g["id"] for g in merged["parallelisms"]] == ["parallelism_1", "parallelism_2"]
    assert [b["text"] for g in merged["parallelisms"] for b in g["branches"]] == ["甲", "乙", "丙", "丁"]
    assert merged["summary"]["sentences"] == 2 and merged["summary"]["parallelisms"] == 2
    assert merged["summary"]["coarse"] == {"parallelism": 2}
    assert list(merged) == list(body("丙丁", 1))  # the keys in record_body's order


# --- analyze on real essays ------------------------------------------------------------


@pytest.fixture(scope="module")
def nlp(shared_data: Path) -> Language:
    if not PIPELINE.is_dir():
        pytest.skip(f"shipped pipeline not found at {PIPELINE}")
    return spacy.load(PIPELINE)


@pytest.fixture(scope="module")
def essays(pse_dir: Path):
    return [read_pse_essay(pse_dir / "xml" / name) for name in read_splits(pse_dir)["test"]]


def run(nlp, texts, **kwargs):
    """``analyze`` over ``texts`` given as .txt files' contents (written
    with their line endings as they are)."""
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        paths = []
        for i, text in enumerate(texts):
            path = Path(folder) / f"{i:03d}.txt"
            path.write_bytes(text.encode("utf8"))
            paths.append(path)
        out = io.StringIO()
        analyze(paths, out, model=nlp, progress=False, **kwargs)
    # split on \n alone: a record may hold \r or U+2028, which splitlines() also breaks on
    return [json.loads(line) for line in out.getvalue().split("\n") if line]


def devices(record):
    """``(sentence text, coarse labels above 0.5)`` of each sentence."""
    return [(s["text"], sorted(k for k, v in s["coarse"].items() if v >= 0.5)) for s in record["sentences"]]


def check_offsets(record):
    text = record["text"]
    assert record["n_chars"] == len(text)
    for key in ("sentences", "components"):
        for span in record[key]:
            assert text[span["start"]:span["end"]] == span["text"]
    for group in record["parallelisms"]:
        for branch in group["branches"]:
            assert text[branch["start"]:branch["end"]] == branch["text"]
    for clause in record["clauses"]:
        assert 0 <= clause["start"] < clause["end"] <= len(text)


@pytest.mark.parametrize("ending", ["\r", "\r\n"])
def test_other_line_endings_give_the_devices_of_unix_ones(nlp, essays, ending):
    # the test essays with most paragraphs: titles and unpunctuated lines are what broke
    picked = sorted(essays, key=lambda t: -t.count("\n"))[:3]
    unix = run(nlp, picked)
    other = run(nlp, [t.replace("\n", ending) for t in picked])
    for u, o, text in zip(unix, other, picked):
        assert o["text"] == text.replace("\n", ending)
        check_offsets(o)
        assert devices(o) == devices(u)
        assert o["summary"] == u["summary"]
        if ending == "\r":  # same length: the same offsets
            assert [(s["start"], s["end"]) for s in o["sentences"]] == [(s["start"], s["end"]) for s in u["sentences"]]


def test_a_title_line_ended_by_a_lone_carriage_return_is_a_sentence(nlp):
    text = "我的妈妈\r妈妈的手像一把伞，为我遮风挡雨。\r她的笑容像阳光一样温暖"
    [record] = run(nlp, [text])
    check_offsets(record)
    assert [s["text"] for s in record["sentences"]] == ["我的妈妈", "妈妈的手像一把伞，为我遮风挡雨。", "她的笑容像阳光一样温暖"]
    assert [(s["start"], s["end"]) for s in record["sentences"]] == [(0, 4), (5, 21), (22, 33)]


@pytest.fixture()
def piece_sizes(nlp):
    """The length of every text the pipeline is given, in order."""
    sizes = []
    name = "test_piece_sizes"

    @Language.component(name)
    def record_size(doc):
        sizes.append(len(doc.text))
        return doc

    nlp.add_pipe(name, first=True)
    try:
        yield sizes
    finally:
        nlp.remove_pipe(name)


def test_a_long_text_goes_to_the_pipeline_in_bounded_pieces(nlp, essays, piece_sizes):
    long_paragraph = "".join(t.replace("\n", "") for t in essays[:4])  # one paragraph of 4 essays
    run_on = "像" * 2500  # one "sentence" of 2,500 characters
    text = "\n".join(essays[4:10]) + "\n" + long_paragraph + "\n" + run_on + "\n" + essays[10]
    [record] = run(nlp, [text], piece_chars=1200)
    assert max(piece_sizes) <= 1200 and sum(piece_sizes) == len(text)
    assert len(piece_sizes) >= len(text) // 1200
    check_offsets(record)
    assert record["text"] == text
    starts = [s["start"] for s in record["sentences"]]
    assert starts == sorted(starts) and len(set(starts)) == len(starts)
    # the sentences of the whole essays, analysed in pieces of whole paragraphs, are those of the essays alone
    alone = run(nlp, essays[4:7])
    head = [s["text"] for s in record["sentences"]][:sum(len(r["sentences"]) for r in alone)]
    assert head == [s["text"] for r in alone for s in r["sentences"]]


def test_pieces_of_one_document_across_two_processes(nlp, essays):
    texts = ["\n".join(essays[:12]), essays[12], "\n".join(essays[13:20])]
    one = run(nlp, texts, piece_chars=2000)
    two = run(nlp, texts, piece_chars=2000, n_process=2, batch_size=2)
    without_path = lambda records: [{k: v for k, v in r.items() if k != "path"} for r in records]  # noqa: E731
    assert without_path(one) == without_path(two)
    for record in two:
        check_offsets(record)
