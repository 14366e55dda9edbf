"""Small pipelines from the project's configs, and real documents, shared by
the rhetoric classifier tests."""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import List, Sequence

import spacy
from spacy.language import Language
from spacy.tokens import Doc
from spacy.training import Example
from thinc.api import fix_random_seed

from spacy_rhetoric.corpora.readers import gold_word_example

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "components.tok2vec.model.embed.width": 32,
    "components.tok2vec.model.embed.rows": [500, 200, 200],
    "components.tok2vec.model.encode.width": 32,
    "components.tok2vec.model.encode.depth": 1,
}


def tiny_pipeline(config: str = "rhetoric_cpu.cfg", **overrides) -> Language:
    """A pipeline from ``configs/experiments/<config>`` (or ``configs/<config>``)
    with a tiny tok2vec."""
    path = ROOT / "configs" / "experiments" / config
    cfg = spacy.util.load_config(path if path.is_file() else ROOT / "configs" / config, overrides={**TINY, **overrides}, interpolate=False)
    return spacy.util.load_model_from_config(cfg, auto_fill=True, validate=True)


@lru_cache(maxsize=2)
def simile_docs(simile_dir: Path, split: str = "Train", n: int = 80) -> tuple:
    """The first ``n`` sentences of a simile split as reference Docs."""
    from spacy_rhetoric.corpora.simile import read_simile, sentence_to_doc

    vocab = spacy.blank("zh").vocab
    path = next(Path(simile_dir).glob(f"*-{split}.tsv"))
    docs = []
    for sent in read_simile(path):
        docs.append(sentence_to_doc(vocab, path, sent))
        if len(docs) == n:
            break
    return tuple(docs)


def pse_docs(pse_dir: Path, n: int = 20) -> List[Doc]:
    """The first ``n`` paragraphs of the PSE-I test split."""
    from pse_cache import split_docs

    return list(split_docs(Path(pse_dir), "test")[:n])


def examples_for(nlp: Language, refs: Sequence[Doc]) -> List[Example]:
    return [gold_word_example(nlp, ref) for ref in refs]


def train(nlp: Language, examples: List[Example], steps: int = 5, seed: int = 0) -> Language:
    """Initialise and run ``steps`` updates over all ``examples``."""
    fix_random_seed(seed)
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(steps):
        nlp.update(examples, sgd=optimizer, drop=0.0)
    return nlp


def write_annotation_dir(folder: Path, records) -> Path:
    """``folder/ann/train.jsonl`` with ``records`` one JSON object a line
    (an annotation folder as the corpus converters read it)."""
    import json

    ann = folder / "ann"
    ann.mkdir(exist_ok=True)
    (ann / "train.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf8")
    return ann
