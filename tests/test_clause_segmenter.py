"""Clause segmenter: real essay text, edge cases, scorer."""
from __future__ import annotations

import pytest
import spacy
from spacy.training import Example

from spacy_rhetoric.corpora.pse_i import read_essay
from spacy_rhetoric.scorers.clauses import score_clauses


@pytest.fixture(scope="module")
def nlp():
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    return nlp


def clauses(nlp, text):
    doc = nlp(text)  # keep the doc alive while its span group is read
    return [c.text for c in doc.spans["clauses"]]


def sents(nlp, text):
    return [s.text for s in nlp(text).sents]


def test_real_essay_paragraph(nlp, pse_dir):
    para = read_essay(pse_dir / "xml" / "1.xml", nlp.vocab)[1]
    doc = nlp(para.text)
    got = [c.text for c in doc.spans["clauses"]]
    assert got[:4] == ["如果和谐是一片汪洋大海，", "那么助人就是无数条河流，", "汇入大海，", "如果和谐是一曲美妙乐章，"]
    assert "".join(got) == para.text.replace(" ", "")
    # ； ends a sentence, as it ends PSE-I's <sent>: the classifier's training unit
    assert [s.text for s in doc.sents] == [s.text for s in para.sents]


def test_gold_sentences_of_test_essays_are_recovered_with_ltp_punctuation(pse_dir):
    nlp = spacy.blank("zh")
    seg = nlp.add_pipe("clause_segmenter")  # the default punctuation is the <sent> unit
    examples = []
    for name in ("328.xml", "134.xml", "336.xml"):
        for gold in read_essay(pse_dir / "xml" / name, nlp.vocab):
            examples.append(Example(seg(nlp.make_doc(gold.text)), gold))
    scores = score_clauses(examples)
    assert scores["sent_boundary_p"] > 0.95 and scores["sent_boundary_r"] > 0.9
    assert scores["clause_boundary_f"] is None  # PSE-I has no gold clauses


def test_closing_quotes_stay_with_their_clause(nlp):
    text = "他说：“我们走吧！”然后离开了。"
    assert clauses(nlp, text) == ["他说：", "“我们走吧！”", "然后离开了。"]
    assert sents(nlp, text) == ["他说：“我们走吧！”", "然后离开了。"]


def test_nested_quotes_and_brackets(nlp):
    text = "老师说：“他问‘你来吗？’”（真的。）好吧"
    assert clauses(nlp, text) == ["老师说：", "“他问‘你来吗？’”", "（真的。）", "好吧"]


def test_ellipsis_dash_and_mixed_ascii_fullwidth(nlp):
    text = "天很蓝,云很白……真美——对吧?是的!"
    assert clauses(nlp, text) == ["天很蓝,", "云很白……", "真美——", "对吧?", "是的!"]
    assert sents(nlp, text) == ["天很蓝,云很白……", "真美——对吧?", "是的!"]


def test_semicolon_ends_a_sentence_as_in_the_annotation(nlp):
    text = "人生是等待，意绪悠闲；人生是思索，道路坎坷；人生亦是奋进。"
    assert sents(nlp, text) == ["人生是等待，意绪悠闲；", "人生是思索，道路坎坷；", "人生亦是奋进。"]


def test_numbers_are_not_split(nlp):
    assert clauses(nlp, "圆周率是3.14，时间是12:30。") == ["圆周率是3.14，", "时间是12:30。"]


def test_newlines_end_clauses_and_sentences(nlp):
    text = "第一段没有标点\n\n第二段，有标点。"
    assert clauses(nlp, text) == ["第一段没有标点", "第二段，", "有标点。"]
    assert [s.strip() for s in sents(nlp, text)] == ["第一段没有标点", "第二段，有标点。"]


@pytest.mark.parametrize("text", ["", "   ", "\n\n", "。。！", "……——"])
def test_no_content_gives_no_clauses(nlp, text):
    doc = nlp(text)
    assert list(doc.spans["clauses"]) == []


def test_no_punctuation_is_one_clause(nlp):
    assert clauses(nlp, "没有任何标点的一段文字") == ["没有任何标点的一段文字"]


def test_leading_punctuation_joins_the_first_clause(nlp):
    assert clauses(nlp, "，，开头是标点，后面。") == ["，，开头是标点，", "后面。"]


def test_clauses_never_empty_and_cover_all_content(nlp, pse_dir):
    text = "".join(d.text for d in read_essay(pse_dir / "xml" / "12.xml", nlp.vocab))
    doc = nlp(text)
    spans = list(doc.spans["clauses"])
    assert all(len(s) and not s[0].is_space and not s[-1].is_space for s in spans)
    assert all(a.end <= b.start for a, b in zip(spans, spans[1:]))
    covered = {i for s in spans for i in range(s.start, s.end)}
    assert all(t.i in covered for t in doc if not t.is_space)


def test_one_megabyte_input(nlp):
    unit = "春天来了，花儿像笑脸一样开放。\n"
    text = unit * (1_000_000 // len(unit.encode("utf8")) + 1)
    assert len(text.encode("utf8")) >= 1_000_000
    doc = nlp(text)
    assert len(doc.spans["clauses"]) == 2 * text.count("\n")
    assert len(list(doc.sents)) == text.count("\n")


def test_custom_punctuation_and_word_tokens(nlp):
    custom = spacy.blank("zh")
    custom.add_pipe("clause_segmenter", config={"clause_punct": "、", "sentence_punct": "。"})
    assert clauses(custom, "一、二，三。") == ["一、", "二，三。"]
    words = spacy.tokens.Doc(nlp.vocab, words=["我们", "是", "朋友", "，", "对", "吗", "？", "”"], spaces=[False] * 8)
    doc = nlp.get_pipe("clause_segmenter")(words)
    assert [c.text for c in doc.spans["clauses"]] == ["我们是朋友，", "对吗？”"]


def test_scorer_hand_computed(nlp):
    gold = nlp("甲，乙。丙，丁。")
    pred = nlp.make_doc("甲，乙。丙，丁。")
    nlp.get_pipe("clause_segmenter")(pred)
    del pred.spans["clauses"]
    pred.spans["clauses"] = [pred[0:4], pred[4:8]]  # misses both comma boundaries
    scores = score_clauses([Example(pred, gold)])
    # gold boundaries at chars 2, 4, 6; predicted only at 4
    assert scores["clause_boundary_p"] == 1.0
    assert scores["clause_boundary_r"] == pytest.approx(1 / 3)
    assert scores["sent_boundary_f"] == 1.0
