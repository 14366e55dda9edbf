"""Stacking rhetoric_textcat components trained on different corpora."""
from __future__ import annotations

import spacy

from spacy_rhetoric.components.rhetoric_textcat import merge_decisions
from spacy_rhetoric.packaging import assemble_to_disk

import tiny_pipeline


def test_merge_decisions_hand_computed():
    lit = {"coarse": {"literal": 0.8}, "form": {"literal": 0.8}, "content": {"literal": 0.8}}
    lit2 = {"coarse": {"literal": 0.6}, "form": {"literal": 0.6}, "content": {"literal": 0.6}}
    simile = {"coarse": {"metaphor": 0.9}, "form": {"simile": 0.7}, "content": {}}
    par = {"coarse": {"parallelism": 0.6}, "form": {}, "content": {}}
    assert merge_decisions(lit, lit2) == lit2
    assert merge_decisions(lit, par) == {"coarse": {"parallelism": 0.6}, "form": {}, "content": {}}
    both = merge_decisions(simile, par)
    assert both == {"coarse": {"metaphor": 0.9, "parallelism": 0.6}, "form": {"simile": 0.7}, "content": {}}
    again = merge_decisions(simile, {"coarse": {"metaphor": 0.95}, "form": {"simile": 0.5}, "content": {}})
    assert again["coarse"] == {"metaphor": 0.95} and again["form"] == {"simile": 0.7}


def test_assembled_second_textcat_merges_and_survives_disk(shared_data, tmp_path):
    root = tiny_pipeline.build(shared_data).parent
    src = root / "src_rhetoric"
    nlp = assemble_to_disk(tmp_path / "nlp", {"rhetoric_textcat": [src, src]})
    assert nlp.pipe_names == ["clause_segmenter", "rhetoric_textcat", "rhetoric_textcat_2"]
    reloaded = spacy.load(tmp_path / "nlp")
    assert not reloaded.get_pipe("rhetoric_textcat").merge
    assert reloaded.get_pipe("rhetoric_textcat_2").merge

    text = "阳光像一层薄薄的金纱。我们需要勇气，我们需要坚持。"
    stacked = [s._.rhetoric for s in reloaded(text).sents]
    with reloaded.select_pipes(disable=["rhetoric_textcat_2"]):
        single = [s._.rhetoric for s in reloaded(text).sents]
    assert stacked == single  # the same model twice: the union changes nothing

    # decisions already on a sentence (from another classifier) are kept
    doc = reloaded.make_doc(text)
    for name, proc in reloaded.pipeline[:2]:
        doc = proc(doc)
    first = list(doc.sents)[0]
    first._.rhetoric = {"coarse": {"parallelism": 0.99}, "form": {}, "content": {}}
    doc = reloaded.get_pipe("rhetoric_textcat_2")(doc)
    first = list(doc.sents)[0]
    assert first._.rhetoric["coarse"].get("parallelism") == 0.99
    assert "literal" not in first._.rhetoric["coarse"]
    assert any(s.label_ == "parallelism" and s.start == first.start for s in doc.spans["rhetoric"])
