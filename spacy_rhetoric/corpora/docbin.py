"""Reading and writing DocBins the way every converter does."""
from __future__ import annotations

from pathlib import Path
from typing import Iterable, Iterator

from spacy.tokens import Doc, DocBin
from spacy.vocab import Vocab

#: The key under which converters record which labels a corpus annotates:
#: ``{"coarse": [...], "form": [...], "content": [...], "components": [...]}``.
#: Labels missing from it are unknown for that doc, not negative.
ANNOTATED_KEY = "rhetoric_annotated"


def write_docbin(docs: Iterable[Doc], path: Path) -> int:
    """Write ``docs`` (with user data) to ``path``; returns the number of docs."""
    db = DocBin(store_user_data=True)
    n = 0
    for doc in docs:
        db.add(doc)
        n += 1
    path.parent.mkdir(parents=True, exist_ok=True)
    db.to_disk(path)
    return n


def read_docbin(path: Path, vocab: Vocab) -> Iterator[Doc]:
    """Docs of a DocBin written by :func:`write_docbin`."""
    yield from DocBin().from_disk(path).get_docs(vocab)


def mark_single_sentence(doc: Doc) -> Doc:
    """Make the whole doc one sentence (for one-sentence corpus records)."""
    for token in doc:
        token.is_sent_start = token.i == 0
    return doc
