"""spacy_rhetoric.CilinFeatures.v1 and CilinTok2Vec.v1: the layer's contract on
an inline tree, and the real tree where `spacy project run cilin research` wrote it."""
import json
from pathlib import Path

import numpy
import pytest
import spacy
from spacy.tokens import Doc
from spacy.util import registry

from spacy_rhetoric.ml.cilin_features import load_cilin_tree

ASSET = Path(__file__).resolve().parent.parent / "assets" / "cilin" / "cilin_tree.json"

# The shape of cilin's data/cilin_tree.json, cut down: level 1 A 人 / B 物 /
# F 动作, level 2 under them, leaves of words (人 has two senses).
TREE = {
    "A": {"tag": "人", "sub": {
        "a": {"tag": "人-泛称", "sub": {"01": {"tag": "人", "sub": {"A": {"tag": "人", "sub": {
            "01=": ["人", "人士"], "02=": ["老人"]}}}}}},
        "b": {"tag": "人-男女老少", "sub": {"02": {"tag": "老少", "sub": {"B": {"tag": "老少", "sub": {
            "01=": ["人"]}}}}}},
    }},
    "B": {"tag": "物", "sub": {
        "h": {"tag": "植物", "sub": {"01": {"tag": "树", "sub": {"A": {"tag": "树", "sub": {
            "58=": ["槐树", "树"]}}}}}},
    }},
    "F": {"tag": "动作", "sub": {
        "b": {"tag": "下肢动作", "sub": {"03": {"tag": "站", "sub": {"C": {"tag": "站", "sub": {
            "01=": ["站", "站立"]}}}}}},
    }},
}


def write_tree(tmp_path, tree=TREE):
    path = tmp_path / "cilin_tree.json"
    path.write_text(json.dumps(tree, ensure_ascii=False), encoding="utf-8")
    return path


def make_doc(words):
    return Doc(spacy.blank("zh").vocab, words=words)


def lookup_rows(model, doc):
    """The class-share rows before the projection, as {class: share} per token."""
    lookup = model.layers[0]
    classes = lookup.attrs["classes"] + ["<unknown>"]
    rows = lookup.predict([doc])[0]
    return [{classes[i]: round(float(row[i]), 3) for i in numpy.nonzero(row)[0]} for row in rows]


def test_load_cilin_tree_keeps_every_sense(tmp_path):
    table = load_cilin_tree(write_tree(tmp_path))
    assert table["人"] == ["Aa01A01=", "Ab02B01="]
    assert table["槐树"] == ["Bh01A58="]
    assert len(table) == 7


def test_features_shape_classes_suffix_and_unknown(tmp_path):
    model = registry.get("layers", "spacy_rhetoric.CilinFeatures.v1")(str(write_tree(tmp_path)), width=5)
    doc = make_doc(["老槐树", "静静", "地", "站", "着", "，", "人"])
    empty = make_doc([])
    model.initialize(X=[doc])
    outputs = model.predict([doc, empty])
    assert outputs[0].shape == (7, 5)
    assert outputs[1].shape == (0, 5)
    # levels 1 and 2 of this tree: A B F Aa Ab Bh Fb, plus "unknown"
    assert model.layers[0].get_dim("nO") == 8
    rows = lookup_rows(model, doc)
    assert rows[0] == {"B": 1.0, "Bh": 1.0}  # 老槐树: not listed, its suffix 槐树 is
    assert rows[1] == {"<unknown>": 1.0}  # 静静: no suffix listed
    assert rows[3] == {"F": 1.0, "Fb": 1.0}
    assert rows[5] == {"<unknown>": 1.0}
    assert rows[6] == {"A": 1.0, "Aa": 0.5, "Ab": 0.5}  # 人: two senses


def test_level_one_only(tmp_path):
    model = registry.get("layers", "spacy_rhetoric.CilinFeatures.v1")(str(write_tree(tmp_path)), width=3, levels=[1])
    doc = make_doc(["人", "树"])
    model.initialize(X=[doc])
    assert lookup_rows(model, doc) == [{"A": 1.0}, {"B": 1.0}]


def test_serialised_model_needs_no_file(tmp_path):
    path = write_tree(tmp_path)
    model = registry.get("layers", "spacy_rhetoric.CilinFeatures.v1")(str(path), width=4)
    doc = make_doc(["人", "站立", "。"])
    model.initialize(X=[doc])
    expected = model.predict([doc])[0]
    path.unlink()
    loaded = registry.get("layers", "spacy_rhetoric.CilinFeatures.v1")(None, width=4).from_bytes(model.to_bytes())
    numpy.testing.assert_allclose(loaded.predict([doc])[0], expected)


def test_concatenated_to_a_tok2vec(tmp_path):
    tok2vec = registry.get("architectures", "spacy.HashEmbedCNN.v2")(
        width=6, depth=1, embed_size=50, window_size=1, maxout_pieces=2, subword_features=False, pretrained_vectors=None)
    features = registry.get("layers", "spacy_rhetoric.CilinFeatures.v1")(str(write_tree(tmp_path)), width=4)
    model = registry.get("architectures", "spacy_rhetoric.CilinTok2Vec.v1")(tok2vec, features)
    doc = make_doc(["老人", "站", "着"])
    model.initialize(X=[doc])
    output = model.predict([doc])[0]
    assert output.shape == (3, 10)
    numpy.testing.assert_allclose(output[:, :6], tok2vec.predict([doc])[0])
    numpy.testing.assert_allclose(output[:, 6:], features.predict([doc])[0])


def test_errors(tmp_path):
    make = registry.get("layers", "spacy_rhetoric.CilinFeatures.v1")
    doc = make_doc(["人"])
    with pytest.raises(ValueError, match=r"\[R208\].*cilin"):
        make(str(tmp_path / "absent.json")).initialize(X=[doc])
    with pytest.raises(ValueError, match=r"\[R208\]"):
        make(None).initialize(X=[doc])
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"A": {"tag": "人", "sub": {"a": 3}}}), encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[R209\].*Aa"):
        make(str(bad)).initialize(X=[doc])
    bad.write_text("{", encoding="utf-8")
    with pytest.raises(ValueError, match=r"\[R209\]"):
        make(str(bad)).initialize(X=[doc])
    with pytest.raises(ValueError, match=r"\[R210\]"):
        make(None, levels=[4])
    with pytest.raises(ValueError, match=r"\[R210\]"):
        make(None, levels=[])


@pytest.mark.skipif(not ASSET.is_file(), reason="assets/cilin/cilin_tree.json absent (spacy project run cilin research)")
def test_real_tree_classes():
    table = load_cilin_tree(ASSET)
    assert len({code[0] for codes in table.values() for code in codes}) == 12
    assert len({code[:2] for codes in table.values() for code in codes}) == 95
    model = registry.get("layers", "spacy_rhetoric.CilinFeatures.v1")(str(ASSET), width=8)
    doc = make_doc(["老槐树", "张开", "了", "眼睛"])
    model.initialize(X=[doc])
    rows = lookup_rows(model, doc)
    assert rows[0] == {"B": 1.0, "Bh": 1.0}
    assert rows[1] == {"F": 1.0, "Fa": 1.0}
    assert rows[3]["B"] == 1.0
