"""Word segmentation: character fallback, pkuseg training on real words, P/R/F."""
from __future__ import annotations

import itertools

import pytest

from spacy_rhetoric.corpora.pse_i import read_essay
from spacy_rhetoric.tokenizer.chinese import (
    make_nlp,
    segment,
    segmentation_prf,
    sentence_words,
    train_pkuseg,
    write_segmentation_file,
)


def test_character_fallback_without_model():
    nlp = make_nlp(None)
    assert [t.text for t in nlp.make_doc("我们是朋友")] == list("我们是朋友")
    with pytest.raises(FileNotFoundError):
        make_nlp("/nonexistent/pkuseg")


def test_prf_hand_computed():
    gold = [["我们", "是", "好", "朋友"]]
    pred = [["我们", "是好", "朋友"]]
    scores = segmentation_prf(gold, pred)
    assert scores["words_p"] == pytest.approx(2 / 3)
    assert scores["words_r"] == pytest.approx(2 / 4)
    assert scores["words_f"] == pytest.approx(2 * (2 / 3) * 0.5 / (2 / 3 + 0.5))
    with pytest.raises(ValueError):
        segmentation_prf([["我"]], [["你"]])


def test_pkuseg_trained_on_real_words_segments_like_ltp(pse_dir, tmp_path):
    vocab = make_nlp().vocab
    essays = [read_essay(p, vocab) for p in sorted((pse_dir / "xml").glob("*.xml"))[:25]]
    sentences = list(sentence_words(itertools.chain.from_iterable(essays)))
    train, test = sentences[:-50], sentences[-50:]
    write_segmentation_file(train, tmp_path / "train.txt")
    write_segmentation_file(test, tmp_path / "test.txt")
    model = train_pkuseg(tmp_path / "train.txt", tmp_path / "test.txt", tmp_path / "model", iterations=2)
    nlp = make_nlp(model)
    gold, pred = segment(nlp, test)
    trained = segmentation_prf(gold, pred)["words_f"]
    chars = segmentation_prf(*segment(make_nlp(None), test))["words_f"]
    assert trained > 0.8 and trained > chars + 0.2
    # the model travels with the pipeline
    nlp.to_disk(tmp_path / "nlp")
    import spacy

    again = spacy.load(tmp_path / "nlp")
    text = "".join(test[0])
    assert [t.text for t in again.make_doc(text)] == [t.text for t in nlp.make_doc(text)]
