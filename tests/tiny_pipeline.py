"""A small assembled pipeline for the analyze / robustness tests.

Built once per test session from the project's own CPU configs
(``configs/experiments/rhetoric_cpu.cfg``, ``configs/experiments/parallelism_cpu.cfg``) with smaller
widths, trained for a few steps on a few real documents (simile sentences and
PSE-I paragraphs from ``../shared/data``), saved as two separate source
pipelines (each with its own tok2vec) and assembled with
:func:`spacy_rhetoric.packaging.assemble_to_disk`. Nothing depends on the
gitignored ``training/`` or ``corpus/`` folders.
"""
from __future__ import annotations

import tempfile
from functools import lru_cache
from pathlib import Path
from typing import List, Tuple

import spacy
from spacy.tokens import Doc
from spacy.util import load_config

ROOT = Path(__file__).resolve().parents[1]
SMALL = {
    "components.tok2vec.model.embed.width": 32,
    "components.tok2vec.model.embed.rows": [500, 250, 250],
    "components.tok2vec.model.encode.width": 32,
    "components.tok2vec.model.encode.depth": 1,
}


def real_docs(shared_data: Path, n_simile: int = 120, n_essays: int = 3) -> Tuple[List[Doc], List[Doc]]:
    """The first ``n_simile`` training sentences of the simile corpus and the
    paragraphs of the first ``n_essays`` PSE-I training essays."""
    from itertools import islice

    from spacy_rhetoric.corpora.pse_i import read_essay, read_splits
    from spacy_rhetoric.corpora.simile import read_simile, sentence_to_doc, split_path

    vocab = spacy.blank("zh").vocab
    path = split_path(shared_data / "simile", "train")
    simile = [sentence_to_doc(vocab, path, s) for s in islice(read_simile(path), n_simile)]
    pse = shared_data / "pse-i"
    names = read_splits(pse)["train"][:n_essays]
    paras = [d for name in names for d in read_essay(pse / "xml" / name, vocab)]
    return simile, paras


def _train(config_path: Path, overrides: dict, docs: List[Doc], steps: int, out: Path) -> None:
    from spacy_rhetoric.corpora.readers import gold_word_example

    config = load_config(config_path, overrides=overrides, interpolate=True)
    nlp = spacy.util.load_model_from_config(config, auto_fill=True, validate=True)
    examples = [gold_word_example(nlp, d) for d in docs]
    optimizer = nlp.initialize(lambda: examples)
    for step in range(steps):
        batch = examples[(step * 8) % len(examples):][:8] or examples[:8]
        nlp.update(batch, sgd=optimizer, drop=0.1)
    nlp.to_disk(out)


def _train_pkuseg(docs: List[Doc], out: Path) -> Path:
    """A spacy-pkuseg model trained for one iteration on the docs' gold words."""
    from spacy_rhetoric.tokenizer.chinese import sentence_words, train_pkuseg, write_segmentation_file

    write_segmentation_file(sentence_words(docs), out / "train.txt")
    write_segmentation_file(sentence_words(docs[-5:]), out / "dev.txt")
    return train_pkuseg(out / "train.txt", out / "dev.txt", out / "model", iterations=1)


@lru_cache(maxsize=1)
def build(shared_data: Path) -> Path:
    """Folder of the assembled test pipeline (built once per process)."""
    from spacy_rhetoric.packaging import assemble_to_disk

    root = Path(tempfile.mkdtemp(prefix="tiny_rhetoric_"))
    simile, paras = real_docs(shared_data)
    _train(ROOT / "configs" / "experiments" / "rhetoric_cpu.cfg", SMALL, simile + paras[:6], 6, root / "src_rhetoric")
    par_small = {**SMALL, "components.parallelism_linker.model.hidden_width": 32}
    _train(ROOT / "configs" / "experiments" / "parallelism_cpu.cfg", par_small, paras, 4, root / "src_parallelism")
    pkuseg = _train_pkuseg(simile + paras, root / "pkuseg")
    sources = {
        "rhetoric_textcat": root / "src_rhetoric",
        "rhetoric_components": root / "src_rhetoric",
        "parallelism_linker": root / "src_parallelism",
    }
    assemble_to_disk(root / "zh_rhetoric", sources, pkuseg_model=pkuseg, corpora=["pse-i", "simile"])
    return root / "zh_rhetoric"
