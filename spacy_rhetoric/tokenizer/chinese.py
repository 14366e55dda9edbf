"""Word segmentation: spaCy's ``zh`` tokenizer with a spacy-pkuseg model
trained on the gold LTP words of our corpora (DESIGN §2).

Why train our own: PSE-I and the simile corpus are segmented with LTP
conventions, and the components are trained on those words; at inference the
tokenizer should produce the same kind of words. Without a model the ``zh``
tokenizer falls back to character segmentation (spaCy's ``segmenter =
"char"``): every character is a token, which the components accept but were
not trained on, so accuracy drops.

Word-level P/R/F compares the character spans of the words (Emerson 2005,
the SIGHAN bakeoff measure): a predicted word is correct when a gold word has
the same start and end.
"""
from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Tuple

import spacy
from spacy import util
from spacy.lang.zh import ChineseTokenizer as SpacyChineseTokenizer
from spacy.lang.zh import Segmenter
from spacy.language import Language
from spacy.tokens import Doc

from .pkuseg_features import PkusegFeatures

TOKENIZER = "spacy_rhetoric.ChineseTokenizer.v1"


class ChineseTokenizer(SpacyChineseTokenizer):
    """spaCy's ``zh`` tokenizer, with the pkuseg segmenter's features
    computed by :class:`~spacy_rhetoric.tokenizer.pkuseg_features.PkusegFeatures`
    and its post-processing by :class:`~spacy_rhetoric.tokenizer.pkuseg_merges.WordMerges`:
    the same words, 2.6x as fast (the tokenizer alone on the 42 PSE-I test
    essays: 59,949 → 155,847 chars/s, `benchmark pipeline`). The char and
    jieba segmenters, and a pkuseg model the tables cannot reproduce, run
    spaCy's code unchanged.
    """

    _features: Optional[PkusegFeatures] = None
    _features_of: object = None

    def __call__(self, text: str) -> Doc:
        features = self._pkuseg_features()
        if features is None:
            return super().__call__(text)
        words, spaces = util.get_words_and_spaces(features.cut(text), text)
        return Doc(self.vocab, words=words, spaces=spaces)

    def _pkuseg_features(self) -> Optional[PkusegFeatures]:
        # built for the segmenter in place now: initialize and from_disk
        # replace it
        if self.segmenter != Segmenter.pkuseg or self.pkuseg_seg is None:
            return None
        if self._features_of is not self.pkuseg_seg:
            self._features = PkusegFeatures.from_segmenter(self.pkuseg_seg)
            self._features_of = self.pkuseg_seg
        return self._features

    def from_bytes(self, data: bytes, **kwargs) -> "ChineseTokenizer":
        super().from_bytes(data, **kwargs)
        self._pkuseg_features()
        return self

    def from_disk(self, path, **kwargs) -> "ChineseTokenizer":
        super().from_disk(path, **kwargs)
        self._pkuseg_features()
        return self


@spacy.registry.tokenizers(TOKENIZER)
def create_chinese_tokenizer(segmenter: Segmenter = Segmenter.char) -> Callable[[Language], ChineseTokenizer]:
    """The tokenizer of the shipped pipelines: ``spacy.zh.ChineseTokenizer.v1``
    with the faster pkuseg features."""

    def chinese_tokenizer_factory(nlp: Language) -> ChineseTokenizer:
        return ChineseTokenizer(nlp.vocab, segmenter=segmenter)

    return chinese_tokenizer_factory


def make_nlp(pkuseg_model: Optional[Path] = None) -> Language:
    """A blank ``zh`` pipeline whose tokenizer uses ``pkuseg_model`` (a folder
    written by :func:`train_pkuseg`) or, when None, character segmentation.

    Raises FileNotFoundError if ``pkuseg_model`` does not exist.
    """
    if pkuseg_model is None:
        return spacy.blank("zh")
    if not Path(pkuseg_model).exists():
        raise FileNotFoundError(f"pkuseg model not found: {pkuseg_model}")
    nlp = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": TOKENIZER, "segmenter": "pkuseg"}}})
    nlp.tokenizer.initialize(pkuseg_model=str(pkuseg_model))
    return nlp


def sentence_words(docs: Iterable[Doc]) -> Iterable[List[str]]:
    """Gold words of every sentence of ``docs`` (whitespace tokens dropped)."""
    for doc in docs:
        for sent in doc.sents:
            words = [t.text for t in sent if not t.is_space]
            if words:
                yield words


def write_segmentation_file(sentences: Iterable[Sequence[str]], path: Path) -> int:
    """Write pkuseg's training format: one sentence a line, words separated by
    single spaces. Returns the number of lines."""
    n = 0
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w", encoding="utf8") as fh:
        for words in sentences:
            fh.write(" ".join(w.replace(" ", "") for w in words) + "\n")
            n += 1
    return n


def train_pkuseg(
    train_file: Path, test_file: Path, output_dir: Path, iterations: int = 10, feature_trim: int = 0
) -> Path:
    """Train a spacy-pkuseg model; returns ``output_dir``.

    feature_trim: keep only features seen more than this many times in the
        training data (pkuseg's ``featureTrim``); 1 drops singleton features,
        which shrinks the model to a fraction of its size.
    pkuseg writes scratch files to ``./temp`` of the working directory, so
    training runs inside a temporary directory.
    """
    import spacy_pkuseg
    from spacy_pkuseg.config import config as pkuseg_config

    pkuseg_config.featureTrim = feature_trim

    train_file, test_file, output_dir = (Path(p).resolve() for p in (train_file, test_file, output_dir))
    with tempfile.TemporaryDirectory() as tmp, _chdir(tmp):
        spacy_pkuseg.train(str(train_file), str(test_file), str(output_dir), train_iter=iterations)
    return output_dir


@contextlib.contextmanager
def _chdir(path: str):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _char_spans(words: Sequence[str]) -> set:
    spans, pos = set(), 0
    for w in words:
        spans.add((pos, pos + len(w)))
        pos += len(w)
    return spans


def segmentation_prf(gold: Iterable[Sequence[str]], pred: Iterable[Sequence[str]]) -> Dict[str, float]:
    """Micro word-level precision, recall and F1 of ``pred`` against ``gold``
    (aligned sentences of words; their characters must agree).

    Raises ValueError if a sentence's characters differ between the two.
    """
    tp = n_gold = n_pred = 0
    for g, p in zip(gold, pred, strict=True):
        if "".join(g) != "".join(p):
            raise ValueError(f"sentences differ: {''.join(g)[:40]!r} vs {''.join(p)[:40]!r}")
        gs, ps = _char_spans(g), _char_spans(p)
        tp += len(gs & ps)
        n_gold += len(gs)
        n_pred += len(ps)
    precision = tp / n_pred if n_pred else 0.0
    recall = tp / n_gold if n_gold else 0.0
    f = 2 * precision * recall / (precision + recall) if precision + recall else 0.0
    return {"words_p": precision, "words_r": recall, "words_f": f, "gold_words": n_gold}


def segment(nlp: Language, sentences: Iterable[Sequence[str]]) -> Tuple[List[List[str]], List[List[str]]]:
    """Re-segment the concatenated gold sentences with ``nlp``'s tokenizer;
    returns ``(gold, predicted)`` word lists."""
    gold = [list(s) for s in sentences]
    pred = [[t.text for t in nlp.make_doc("".join(s)) if not t.is_space] for s in gold]
    return gold, pred
