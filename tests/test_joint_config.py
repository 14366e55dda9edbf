"""configs/zh_rhetoric_cpu.cfg: the whole pipeline with ONE shared tok2vec,
trained a few steps on real documents of every corpus at once (PSE-I CERD,
PSE-I, simile, CMC), with each component learning only what a doc's corpus
annotates; saved and loaded back with the same answers."""
from __future__ import annotations

from collections import Counter
from itertools import islice
from pathlib import Path

import numpy
import pytest
import spacy

from rhetoric_helpers import examples_for, simile_docs, train

ROOT = Path(__file__).resolve().parents[1]
TINY = {
    "components.tok2vec.model.embed.width": 32,
    "components.tok2vec.model.embed.rows": [500, 200, 200],
    "components.tok2vec.model.encode.width": 32,
    "components.tok2vec.model.encode.cnn_depth": 1,
    "components.parallelism_linker.model.hidden_width": 32,
}


def joint_pipeline(vectors: Path, config: str = "zh_rhetoric_cpu.cfg"):
    """The config's pipeline, small, with ``vectors`` as its static vectors
    (the shipped table, assets/vectors/zh_synonyms, is not in a clone)."""
    cfg = spacy.util.load_config(ROOT / "configs" / config, overrides={**TINY, "paths.vectors": str(vectors)},
                                 interpolate=False)
    return spacy.util.load_model_from_config(cfg, auto_fill=True, validate=True)


@pytest.fixture(scope="module")
def small_vectors(corpus_docs, tmp_path_factory) -> Path:
    """A vectors table (width 20) for half of the corpus words, seeded random
    values: what the static-vector path needs, without the 50,000-row asset."""
    words = sorted({t.text for docs in corpus_docs.values() for d in docs for t in d if not t.is_space})[::2]
    rng = numpy.random.default_rng(0)
    nlp = spacy.blank("zh")
    for word in words:
        nlp.vocab.set_vector(word, rng.normal(size=20).astype("float32"))
    out = tmp_path_factory.mktemp("vectors") / "zh_small"
    nlp.to_disk(out)
    return out


@pytest.fixture(scope="module")
def corpus_docs(shared_data: Path):
    """A few real documents of each corpus the config names."""
    from spacy_rhetoric.corpora.cmc import read_cmc, sentence_to_doc
    from spacy_rhetoric.corpora.pse_i import read_essay
    from spacy_rhetoric.corpora.pse_i_cerd import read_annotated

    vocab = spacy.blank("zh").vocab
    stats: Counter = Counter()
    cerd = read_annotated(ROOT / "annotations" / "pse-i-cerd" / "test.jsonl", shared_data / "pse-i", vocab, stats)[:6]
    pse = read_essay(shared_data / "pse-i" / "xml" / "312.xml", vocab)[:6]
    simile = list(simile_docs(shared_data / "simile", n=12))
    nlp = spacy.blank("zh")
    cmc = [sentence_to_doc(nlp, s) for s in islice(read_cmc(shared_data / "cmc" / "train.tsv"), 12)]
    return {"pse-i-cerd": cerd, "pse-i": pse, "simile": simile, "cmc": cmc}


def test_one_shared_tok2vec(small_vectors):
    nlp = joint_pipeline(small_vectors)
    assert nlp.pipe_names == ["tok2vec", "clause_segmenter", "parallelism_linker", "rhetoric_textcat", "rhetoric_components"]
    listeners = {name for name in nlp.pipe_names if hasattr(nlp.get_pipe(name), "model")
                 and any(hasattr(n, "upstream_name") for n in nlp.get_pipe(name).model.walk())}
    assert listeners == {"rhetoric_textcat", "rhetoric_components", "parallelism_linker"}


def test_joint_training_on_every_corpus_and_io(corpus_docs, small_vectors, tmp_path):
    nlp = joint_pipeline(small_vectors)
    refs = [d for docs in corpus_docs.values() for d in docs]
    examples = examples_for(nlp, refs)
    train(nlp, examples, steps=3)
    # the static vectors were loaded and are read by the shared tok2vec
    assert nlp.vocab.vectors.shape[1] == 20 and nlp.vocab.vectors.shape[0] > 50
    assert any(node.name == "static_vectors" for node in nlp.get_pipe("tok2vec").model.walk())
    textcat = nlp.get_pipe("rhetoric_textcat")
    # every corpus contributes labels: CERD's fine labels, CMC's disjunction
    assert {"coarse/personification", "coarse/hyperbole", "form/verb", "coarse/parallelism"} <= set(textcat.cfg["trained_labels"])
    scores = nlp.evaluate(examples)
    assert "rhetoric_coarse_micro_f" in scores and "parallelism_epm_f" in scores and "rhetoric_components_f" in scores
    texts = [d.text for d in refs[:10]]
    before = [d.to_json()["spans"] for d in nlp.pipe(texts)]
    nlp.to_disk(tmp_path / "joint")
    loaded = spacy.load(tmp_path / "joint")
    assert loaded.vocab.vectors.shape == nlp.vocab.vectors.shape
    after = [d.to_json()["spans"] for d in loaded.pipe(texts)]
    assert before == after
    for a, b in zip(nlp.pipe(texts), loaded.pipe(texts)):
        for sa, sb in zip(a.sents, b.sents):
            for level in sa._.rhetoric:
                assert sa._.rhetoric[level].keys() == sb._.rhetoric[level].keys()
                for k, v in sa._.rhetoric[level].items():
                    assert v == pytest.approx(sb._.rhetoric[level][k], abs=1e-5)


def test_linker_is_not_taught_by_corpora_without_parallelism(corpus_docs, small_vectors):
    """Updating the joint pipeline on simile and CMC docs only (no
    parallelism annotation) leaves the linker's own layers unchanged, while
    the textcat does learn from them."""
    nlp = joint_pipeline(small_vectors)
    all_refs = [d for docs in corpus_docs.values() for d in docs]
    optimizer = nlp.initialize(lambda: examples_for(nlp, all_refs))
    linker = nlp.get_pipe("parallelism_linker")
    head = linker.model.get_ref("output_layer")
    before_linker = head.get_param("W").copy()
    before_textcat = nlp.get_pipe("rhetoric_textcat").model.to_bytes()
    no_parallelism = examples_for(nlp, corpus_docs["simile"] + corpus_docs["cmc"])
    losses = {}
    nlp.update(no_parallelism, sgd=optimizer, losses=losses)
    assert losses["parallelism_linker"] == 0.0
    numpy.testing.assert_array_equal(head.get_param("W"), before_linker)
    assert nlp.get_pipe("rhetoric_textcat").model.to_bytes() != before_textcat


def test_parallelism_crops_give_each_parallelism_its_sentences_alone(corpus_docs, tmp_path):
    """The reader's parallelism_crops on real PSE-I paragraphs: each crop is
    the sentences of one parallelism with its branches' words unchanged, it
    annotates parallelism only, and a paragraph without one gives none."""
    from spacy.tokens import DocBin

    from spacy_rhetoric.corpora.readers import create_corpora_reader, crop_parallelisms
    from spacy_rhetoric.spangroups import parallelism_offsets

    paragraphs = corpus_docs["pse-i"]
    with_groups = [d for d in paragraphs if parallelism_offsets(d)]
    assert with_groups and len(with_groups) < len(paragraphs)
    for doc in paragraphs:
        crops = crop_parallelisms(doc)
        if not parallelism_offsets(doc):
            assert crops == []
        for crop in crops:
            assert crop.user_data["rhetoric_annotated"]["coarse"] == ("parallelism",)
            assert not crop.user_data["rhetoric_annotated"]["components"]
            groups = parallelism_offsets(crop)
            assert groups and crop.text in doc.text
            offset = doc.text.index(crop.text)
            for group in groups:
                assert all(crop[s:e].text == doc.char_span(crop[s:e].start_char + offset,
                                                           crop[s:e].end_char + offset).text for s, e in group)
    path = tmp_path / "pse.spacy"
    DocBin(docs=paragraphs, store_user_data=True).to_disk(path)
    nlp = spacy.blank("zh")
    plain = list(create_corpora_reader([str(path)])(nlp))
    cropped = list(create_corpora_reader([str(path)], parallelism_crops=True)(nlp))
    n_crops = sum(len(crop_parallelisms(d)) for d in paragraphs)
    assert n_crops and len(cropped) == len(plain) + n_crops
