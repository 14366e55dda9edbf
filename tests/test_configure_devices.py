"""ConFiguRe's four CERD devices as sentence labels (configure_devices)."""
from __future__ import annotations

import spacy

from spacy_rhetoric.annotation import annotated_labels, gold_sentence_labels
from spacy_rhetoric.corpora.configure import Passage, Unit
from spacy_rhetoric.corpora.configure_devices import passage_doc, sentence_offsets


def test_sentences_end_after_their_punctuation_and_closing_quotes():
    assert sentence_offsets("他说：“好。”然后走了！又来……尾巴") == [(0, 7), (7, 12), (12, 16), (16, 18)]
    assert sentence_offsets("") == []


def test_a_sentence_gets_a_device_its_unit_covers_and_not_one_it_only_touches():
    text = "风在唱歌。他跑得比火箭还快，真的。我们走吧。"
    units = (Unit(0, 5, "personification"),      # the whole first sentence
             Unit(5, 13, "hyperbole"),            # a clause of the second
             Unit(16, 22, "parallelism"),         # the third, starting at the second's 。: touches the second
             Unit(17, 22, "metonymy"))            # not a CERD device
    doc = passage_doc(spacy.blank("zh"), Passage("书-作者_片段1", text, units))
    sents = list(doc.sents)
    assert [s.text for s in sents] == ["风在唱歌。", "他跑得比火箭还快，真的。", "我们走吧。"]
    known = annotated_labels(doc)
    labels = [gold_sentence_labels(doc, s, known) for s in sents]
    assert labels == [{"coarse/personification"}, {"coarse/hyperbole"}, {"coarse/parallelism"}]
    assert known == {"coarse/metaphor", "coarse/personification", "coarse/hyperbole", "coarse/parallelism"}
    assert doc.user_data["work"] == "书-作者"
