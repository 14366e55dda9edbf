"""Contract of ``rhetoric_generator`` on a tiny random local model (no corpus,
no server, nothing downloaded).

The model is ``tests/tiny_llm.py``'s random Qwen2-style chat model, its
vocabulary the characters of the inline prompts below; its answers are
meaningless, so the contract is about plumbing: ``nlp.add_pipe`` with a
local ``Transformers.v1`` model, ``nlp.initialize``, the documented
``doc._.rhetoric_suggestions`` entries, identical suggestions (greedy
decoding) after the pipeline's disk and bytes round trips, settings kept by
the component's own ``to_disk``/``from_disk``, and the documented errors. The
component has nothing to train and no scorer.
"""
from __future__ import annotations

from typing import List

import pytest
import spacy
from thinc.api import ConfigValidationError

from spacy_rhetoric.llm.prompts import render_rg_prompt
from tiny_llm import build_tiny_chat_model

NAME = "rhetoric_generator"
TEXT = "今天晚上很安静。我走到窗前。月光照在地上。"
REQUESTS = [
    {"sentence": 2, "rhetoric": "metaphor", "object": "月光"},
    {"sentence": 1, "rhetoric": "personification", "object": "窗"},
]
#: The keys of one entry of ``doc._.rhetoric_suggestions`` (module docstring
#: of the component).
ENTRY_KEYS = {
    "sentence", "start_char", "end_char", "text", "rhetoric", "object", "candidates", "failures", "skipped",
    "n_verified", "verification", "budget_exhausted",
}


@pytest.fixture(scope="module")
def model_path(tmp_path_factory):
    sents = TEXT.split("。")
    texts = [render_rg_prompt(r["rhetoric"], r["object"], [s + "。" for s in sents[: r["sentence"]]])
             for r in REQUESTS]
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "model", texts, max_chars=300,
                                 hidden_size=32, layers=2, heads=2)


def make_nlp(model_path, **config):
    nlp = spacy.blank("zh")
    nlp.add_pipe("clause_segmenter")
    nlp.add_pipe(NAME, config={
        "model": {"@llm_backends": "spacy_rhetoric.Transformers.v1", "model_path": str(model_path)},
        "sampling": {"n_candidates": 1, "temperature": 0.0, "max_new_tokens": 8},
        "task": {"rewrite": False},
        **config,
    })
    return nlp


def suggestions(nlp, text: str = TEXT, requests=REQUESTS) -> List[dict]:
    doc = nlp(text, component_cfg={NAME: {"requests": requests}})
    return doc._.rhetoric_suggestions


def test_rhetoric_generator_initialize_needs_no_examples_and_changes_nothing(model_path):
    nlp = make_nlp(model_path)
    before = suggestions(nlp)
    nlp.initialize()
    assert suggestions(nlp) == before


def test_rhetoric_generator_writes_the_documented_entries(model_path):
    nlp = make_nlp(model_path)
    got = suggestions(nlp)
    doc = nlp.make_doc(TEXT)
    sents = ["今天晚上很安静。", "我走到窗前。", "月光照在地上。"]
    assert [e["sentence"] for e in got] == [r["sentence"] for r in REQUESTS]
    for entry, request in zip(got, REQUESTS):
        assert set(entry) == ENTRY_KEYS
        assert entry["rhetoric"] == request["rhetoric"] and entry["object"] == request["object"]
        assert entry["text"] == sents[request["sentence"]] == doc.text[entry["start_char"]:entry["end_char"]]
        assert entry["skipped"] is None
        # one greedy answer: a candidate, or its raw text as a failure
        assert len(entry["candidates"]) + len(entry["failures"]) == 1
        for failure in entry["failures"]:
            assert set(failure) == {"raw", "error"} and failure["error"].startswith(("unparseable", "empty"))
    assert nlp("")._.rhetoric_suggestions == []


def test_rhetoric_generator_round_trips_to_disk_and_bytes(model_path, tmp_path):
    nlp = make_nlp(model_path)
    before = suggestions(nlp)
    nlp.to_disk(tmp_path / "pipeline")
    assert suggestions(spacy.load(tmp_path / "pipeline")) == before
    from_bytes = spacy.util.load_model_from_config(nlp.config, auto_fill=True, validate=True)
    from_bytes.from_bytes(nlp.to_bytes())
    assert suggestions(from_bytes) == before
    # the component's own settings file carries a changed setting
    nlp.get_pipe(NAME).cfg["max_sentence_chars"] = 5
    nlp.get_pipe(NAME).to_disk(tmp_path / "component")
    fresh = make_nlp(model_path)
    fresh.get_pipe(NAME).from_disk(tmp_path / "component")
    assert [e["skipped"] for e in suggestions(fresh)] == ["sentence longer than max_sentence_chars=5"] * 2


def test_rhetoric_generator_refuses_bad_requests_and_flat_settings(model_path):
    nlp = make_nlp(model_path)
    with pytest.raises(IndexError, match="R011"):
        suggestions(nlp, requests=[{"sentence": 9, "rhetoric": "metaphor", "object": "月光"}])
    with pytest.raises(ConfigValidationError):
        make_nlp(model_path, temperature=0.0)
