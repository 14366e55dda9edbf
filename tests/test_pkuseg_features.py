"""The shipped tokenizer (``spacy_rhetoric.ChineseTokenizer.v1``) segments as
spaCy's ``zh`` tokenizer with the same pkuseg model does: the same feature
indices, the same node scores bit for bit, the same words on every PSE-I
essay."""
from __future__ import annotations

import pickle
from pathlib import Path

import pytest
import spacy
from spacy.lang.zh import ChineseTokenizer as SpacyChineseTokenizer

from spacy_rhetoric.corpora.pse_i import essay_text
from spacy_rhetoric.tokenizer.pkuseg_features import PkusegFeatures
from spacy_rhetoric.tokenizer.chinese import TOKENIZER, ChineseTokenizer

ROOT = Path(__file__).resolve().parents[1]
PKUSEG = ROOT / "pipelines" / "zh_rhetoric" / "tokenizer"
# what real input holds besides Chinese prose: numbers and letters (which
# pkuseg normalises), its renamed keyword characters, full-width forms,
# control characters, emoji, whitespace of every kind
ODD_TEXTS = [
    "", "   ", "\n\r\n", "中", "中国", "abc DEF 123", "我有100元，ＵＳＢ和3.14。", "-._,|/*:",
    "\x00中\x00国", "😀今天天气真好😀", "第1、2、3名", "我\u3000们\t一起", "Hello, world! 你好世界",
    "**Num**Letter**noWord", "春天像刚落地的娃娃，从头到脚都是新的，它生长着。" * 40,
]


@pytest.fixture(scope="module")
def tokenizers():
    """(spaCy's tokenizer, ours), both loaded from the shipped pkuseg model."""
    vocab = spacy.blank("zh").vocab
    theirs = SpacyChineseTokenizer(vocab, segmenter="pkuseg")
    ours = ChineseTokenizer(vocab, segmenter="pkuseg")
    theirs.from_disk(PKUSEG)
    ours.from_disk(PKUSEG)
    assert ours._pkuseg_features() is not None
    return theirs, ours


@pytest.fixture(scope="module")
def essays(pse_dir):
    return [essay_text(path) for path in sorted((pse_dir / "xml").glob("*.xml"))]


def _pieces(tokenizer, texts):
    """The pieces spacy-pkuseg tags: the text split at whitespace and at the
    user dictionary's words."""
    seg = tokenizer.pkuseg_seg
    for text in texts:
        for chunk in text.split():
            words, is_word, _ = seg.preprocesser.solve(chunk)
            yield from (w for w, known in zip(words, is_word) if not known)


def _words(tokenizer, text):
    return [(t.text, t.whitespace_) for t in tokenizer(text)]


def test_same_words_as_spacy_on_every_pse_essay(tokenizers, essays):
    theirs, ours = tokenizers
    assert len(essays) == 409
    for text in essays + ODD_TEXTS:
        assert _words(ours, text) == _words(theirs, text), text[:40]


def test_same_features_and_node_scores_as_spacy_pkuseg(tokenizers, essays):
    from spacy_pkuseg.inference import getLogYY

    theirs, _ = tokenizers
    seg = theirs.pkuseg_seg
    features = PkusegFeatures.from_segmenter(seg)
    extractor, model = seg.feature_extractor, seg.model
    pieces = list(_pieces(theirs, essays[:20] + ODD_TEXTS))
    columns, starts = features.feature_indices(pieces)
    scores, _ = features.node_scores(pieces)
    for piece, start in zip(pieces, starts):
        nodes = list(extractor.normalize_text(piece))
        expected = [extractor.get_node_features_idx(i, nodes) for i in range(len(nodes))]
        got = [[int(c[start + i]) for c in columns if c[start + i] != features.absent] for i in range(len(nodes))]
        assert got == expected, piece
        expected_scores, _ = getLogYY(expected, model.n_tag, model.n_feature * model.n_tag, model.w, 1.0)
        assert scores[start : start + len(piece)].tolist() == expected_scores.tolist(), piece


def test_batches_of_a_few_characters_give_the_same_words(tokenizers, essays, monkeypatch):
    import spacy_rhetoric.tokenizer.pkuseg_features as features
    import spacy_rhetoric.tokenizer.pkuseg_merges as merges

    theirs, ours = tokenizers
    monkeypatch.setattr(features, "BATCH_CHARS", 50)
    monkeypatch.setattr(merges, "BATCH_CHARS", 50)
    for text in essays[:5] + ODD_TEXTS:
        assert _words(ours, text) == _words(theirs, text), text[:40]


def test_user_dictionary_words_are_kept(tokenizers):
    theirs, ours = tokenizers
    text = "他说荷塘月色真美，荷塘月色令人难忘。"
    for tokenizer in (theirs, ours):
        tokenizer.pkuseg_update_user_dict(["荷塘月色"])
    try:
        assert "荷塘月色" in [t.text for t in ours(text)]
        assert _words(ours, text) == _words(theirs, text)
    finally:
        for tokenizer in (theirs, ours):
            tokenizer.pkuseg_update_user_dict([], reset=True)


def test_falls_back_to_spacy_pkuseg_where_the_tables_would_differ(tokenizers, monkeypatch):
    from spacy_pkuseg.config import config

    theirs, _ = tokenizers
    monkeypatch.setattr(config, "numLetterNorm", False)
    assert PkusegFeatures.from_segmenter(theirs.pkuseg_seg) is None
    fresh = ChineseTokenizer(spacy.blank("zh").vocab, segmenter="pkuseg")
    fresh.from_disk(PKUSEG)
    assert fresh._pkuseg_features() is None
    assert _words(fresh, "我有100元。") == _words(theirs, "我有100元。")


def test_shipped_pipelines_use_it_and_keep_it_through_serialisation():
    for folder in sorted(p.parent for p in (ROOT / "pipelines").glob("*/config.cfg")):
        nlp = spacy.load(folder)
        assert nlp.config["nlp"]["tokenizer"] == {"@tokenizers": TOKENIZER, "segmenter": "pkuseg"}
        assert isinstance(nlp.tokenizer, ChineseTokenizer)
        text = "春天像刚落地的娃娃，从头到脚都是新的。"
        words = [t.text for t in nlp.tokenizer(text)]
        copy = pickle.loads(pickle.dumps(nlp.tokenizer))
        again = ChineseTokenizer(nlp.vocab, segmenter="pkuseg").from_bytes(nlp.tokenizer.to_bytes())
        for tokenizer in (copy, again):
            assert tokenizer._pkuseg_features() is not None
            assert [t.text for t in tokenizer(text)] == words


def test_char_segmenter_is_spacys():
    vocab = spacy.blank("zh").vocab
    ours = ChineseTokenizer(vocab, segmenter="char")
    theirs = SpacyChineseTokenizer(vocab, segmenter="char")
    assert ours._pkuseg_features() is None
    for text in ODD_TEXTS:
        assert _words(ours, text) == _words(theirs, text)


def test_substring_hashes_do_not_depend_on_where_the_string_stands():
    """Equal substrings hash equal wherever they stand, astral characters and
    NUL included; the word filter keeps every word of the list."""
    import numpy

    from spacy_rhetoric.tokenizer.substring_hashes import SubstringHashes, contains_sorted, hashes_of

    words = ["春天", "娃娃", "😀好", "\x00中", "新的一年"]
    text = "春天像刚落地的娃娃😀好\x00中，新的一年春天"
    hashes = SubstringHashes(text)
    spans = [(a, b) for a in range(len(text)) for b in range(a, len(text) + 1)]
    values = hashes.of(numpy.array([a for a, _ in spans]), numpy.array([b for _, b in spans]))
    by_string = {}
    for (a, b), value in zip(spans, values.tolist()):
        by_string.setdefault(text[a:b], set()).add(value)
    assert all(len(seen) == 1 for seen in by_string.values())
    assert len({next(iter(seen)) for seen in by_string.values()}) == len(by_string)  # no collision here
    known = numpy.sort(hashes_of(words))
    found = {text[a:b] for (a, b), hit in zip(spans, contains_sorted(known, values)) if hit}
    assert found == set(words)
    assert not contains_sorted(hashes_of([]), values).any()


def test_word_columns_equal_a_lookup_of_every_substring(tokenizers, essays):
    """The hash-filtered word ids equal a plain lookup of every substring of
    each length, on essays and odd texts (never empty there: pieces are
    followed by a gap)."""
    import numpy

    features = tokenizers[1]._pkuseg_features()
    get = features.word_id.get
    for text in ["".join(essays[:3]).replace("\n", ""), *filter(None, ODD_TEXTS)]:
        n = len(text)
        columns = features._word_columns(text, n)
        starting = numpy.asarray(columns[len(features.lengths) : 2 * len(features.lengths)]).T  # the w1. block
        plain = numpy.asarray([[features.words["w1."][get(text[j : j + length], 0)] if j + length <= n else
                                features.words["w1."][0] for length in features.lengths] for j in range(n)])
        assert numpy.array_equal(starting.reshape(plain.shape), plain)


def _postprocesser(common, other):
    from spacy_pkuseg import Postprocesser

    post = Postprocesser(None, None)
    post.do_process, post.common_words, post.other_words = True, set(common), set(other)
    return post


def test_word_merges_equal_spacy_pkuseg_post_processing_on_dense_merges():
    """Random word lists over a few characters, built from the runs that
    are listed, so that merges are frequent: runs of every length, merges
    inside merges (runs of more than 7 words as tagged), the parts test,
    overlapping runs, lists of 0 to 40 words; compared with spacy-pkuseg's
    own ``post_process`` in batches of several lists."""
    import random

    from spacy_rhetoric.tokenizer.pkuseg_merges import WordMerges

    rng = random.Random(24)
    alphabet = "春天来了花开"
    for case in range(300):
        pieces = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 2))) for _ in range(30)]
        runs = [[rng.choice(pieces) for _ in range(rng.randint(2, 7))] for _ in range(40)]
        # a listed run and more words: merged only after the run is (runs of 8+ words)
        runs += [run + [rng.choice(pieces) for _ in range(rng.randint(1, 3))] for run in rng.sample(runs, 15)]
        listed = {"".join(run) for run in runs} | set(rng.sample(pieces, 5))  # single words: the parts test
        common = set(rng.sample(sorted(listed), 10)) if case % 2 else set()
        post = _postprocesser(common, listed - common)

        def sentence():
            words = []
            while len(words) < rng.randint(0, 40):
                words += rng.choice(runs) if rng.random() < 0.5 else [rng.choice(pieces)]
            return words

        sents = [sentence() for _ in range(rng.randint(1, 6))]
        want = [post(list(sent)) for sent in sents]
        assert WordMerges(post)(sents) == want, (case, sents)


def test_word_merges_follow_changes_to_the_word_sets_and_do_nothing_when_off():
    from spacy_rhetoric.tokenizer.pkuseg_merges import WordMerges

    post = _postprocesser([], ["春天"])
    merges = WordMerges(post)
    assert merges([["春", "天", "来"]]) == [["春天", "来"]]
    post.other_words.add("天来")
    assert merges([["春", "天", "来", "天", "来"]]) == [["春天", "来", "天来"]]
    eight = list("甲乙丙丁戊己庚辛")  # 7 words merged, then the 8-word run
    post.other_words |= {"".join(eight[:7]), "".join(eight)}
    assert merges([eight]) == [["".join(eight)]]
    post.do_process = False
    assert merges([["春", "天"]]) == [["春", "天"]]
