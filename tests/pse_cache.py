"""Cached PSE-I paragraphs read from ../shared/data (shared by the parallelism tests)."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import List, Tuple

import spacy
from spacy.tokens import Doc
from spacy.vocab import Vocab


@lru_cache(maxsize=1)
def vocab() -> Vocab:
    return spacy.blank("zh").vocab


@lru_cache(maxsize=8)
def split_docs(pse_dir: Path, split: str) -> Tuple[Doc, ...]:
    """Paragraph docs of one split (``train``, ``dev``, ``optimization``, ``test``)."""
    from spacy_rhetoric.corpora.pse_i import iter_split, read_splits

    files = read_splits(pse_dir)[split]
    return tuple(doc for _, docs in iter_split(pse_dir, files, vocab()) for doc in docs)


def all_docs(pse_dir: Path) -> List[Doc]:
    """Every paragraph of every PSE-I essay (all four splits)."""
    return [d for split in ("train", "dev", "optimization", "test") for d in split_docs(pse_dir, split)]


@lru_cache(maxsize=8)
def first_essays(pse_dir: Path, split: str, n_essays: int) -> Tuple[Doc, ...]:
    """Paragraph docs of the first ``n_essays`` essays of a split (cheap to read)."""
    from spacy_rhetoric.corpora.pse_i import iter_split, read_splits

    files = read_splits(pse_dir)[split][:n_essays]
    return tuple(doc for _, docs in iter_split(pse_dir, files, vocab()) for doc in docs)
