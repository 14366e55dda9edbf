"""rhetoric_generator: end to end through a spaCy pipeline on a tiny random
Qwen2 model, reranking and failure reporting with the fake OpenAI server,
policies, bad input, and that no API key reaches a saved pipeline or log."""
from __future__ import annotations

import logging
from pathlib import Path

import pytest
import spacy
from spacy.util import registry
from thinc.api import ConfigValidationError

from fake_openai import FakeOpenAIServer, malformed, status, valid
from spacy_rhetoric.components.rhetoric_generator import RhetoricGenerator
from spacy_rhetoric.llm.prompts import RG_DEVICES, rg_messages
from tiny_llm import real_records, tiny_model

ROOT = Path(__file__).resolve().parents[1]

SECRET = "sk-gen-test-91c0ffee-NEVER-WRITE-ME"
ENV = "RHETORIC_GEN_TEST_KEY"


@pytest.fixture(scope="module")
def records(simile_dir, cmdag_dir):
    return real_records(simile_dir, cmdag_dir)


@pytest.fixture(scope="module")
def tiny_path(tmp_path_factory, records):
    return tiny_model(tmp_path_factory.mktemp("tiny") / "model", records)


def _nlp(backend_cfg, **cfg):
    nlp = spacy.blank("zh")
    nlp.add_pipe("sentencizer", config={"punct_chars": ["。", "！", "？"]})
    nlp.add_pipe("rhetoric_generator", config={"model": backend_cfg, **cfg})
    return nlp


def test_end_to_end_tiny_transformers(tiny_path, records):
    rec = next(r for r in records if r.source == "cmdag")
    text = "。".join(s.rstrip("。") for s in rec.previous_sentences) + "。" + rec.target
    backend_cfg = {"@llm_backends": "spacy_rhetoric.Transformers.v1", "model_path": str(tiny_path)}
    nlp = _nlp(backend_cfg, sampling={"n_candidates": 2, "temperature": 0.0, "max_new_tokens": 16}, task={"rewrite": False})
    n_sents = len(list(nlp(text).sents))
    target = n_sents - 1
    doc = nlp(text, component_cfg={"rhetoric_generator": {"requests": [{"sentence": target, "rhetoric": "metaphor", "object": rec.object}]}})
    (sugg,) = doc._.rhetoric_suggestions
    assert sugg["sentence"] == target and sugg["object"] == rec.object and sugg["skipped"] is None
    assert len(sugg["candidates"]) + len(sugg["failures"]) >= 1
    # Whatever came back is exactly the model's own answer: rerun the backend.
    gen = nlp.get_pipe("rhetoric_generator")
    sents = [s.text for s in doc.sents]
    conv = rg_messages("metaphor", rec.object, sents[max(0, target - 3):target])
    raw = [c.text for c in gen.backend.chat([conv], n=2, temperature=0.0, max_new_tokens=16)[0]]
    got = [c["raw"] for c in sugg["candidates"]] + [f["raw"] for f in sugg["failures"]]
    assert sorted(got) == sorted(raw) or set(got) <= set(raw)
    for failure in sugg["failures"]:  # a random model rarely writes valid JSON
        assert failure["error"].startswith(("unparseable", "empty"))
    # The same public API outside a pipeline, deterministic at temperature 0.
    a = gen.generate(doc, "personification", "花朵", n=1)
    b = gen.generate([s.text for s in doc.sents], "personification", "花朵", n=1)
    assert [c.raw for c in a] == [c.raw for c in b] and len(a) == 1


def test_generate_reranks_by_logprob_and_reports_failures():
    replies = valid(
        '{"generation": "月光像一层薄纱。"}', '{"generation": "月光像一层薄纱。"}',
        'Here: {"generation": "月光如水"}', "no json", logprobs=[-1.0, -1.0],
    )
    with FakeOpenAIServer(default=replies) as srv:
        nlp = _nlp({"@llm_backends": "spacy_rhetoric.OpenAICompatible.v1", "base_url": srv.base_url,
                    "model": "m", "api_key_env": None, "logprobs": True})
        gen = nlp.get_pipe("rhetoric_generator")
        out = gen.generate("今天晚上很安静。我走到窗前。", "metaphor", "月光", n=4)
    texts = [c.text for c in out if c.ok]
    # Same total logprob: the longer sentence scores higher per character; the duplicate is merged.
    # Unverified here (a blank pipeline has no analyser): the score is the reranker's term alone.
    assert texts == ["月光像一层薄纱。", "月光如水"]
    assert out[1].repaired and out[0].score == pytest.approx(0.1 * -2 / 8) and out[1].score == pytest.approx(0.1 * -2 / 4)
    assert out[0].verified is None and "no rhetoric_textcat" in out[0].reason
    assert [c.raw for c in out if not c.ok] == ["no json"] and out[-1].score is None
    prompt = srv.requests[0].body["messages"][0]["content"]
    assert "月光" in prompt and "我走到窗前。" in prompt and "比喻" in prompt


def test_literal_policy_and_objects_from_components():
    with FakeOpenAIServer(default=valid('{"generation": "星星像眼睛。"}')) as srv:
        nlp = _nlp({"@llm_backends": "spacy_rhetoric.OpenAICompatible.v1", "base_url": srv.base_url,
                    "model": "m", "api_key_env": None}, policy="literal", sampling={"n_candidates": 1})
        doc = nlp.make_doc("花儿对我笑。星星很亮。我很开心。")
        for name, proc in nlp.pipeline[:-1]:
            doc = proc(doc)
        sents = list(doc.sents)
        doc.spans["rhetoric"] = [doc[sents[0].start:sents[0].end]]
        doc.spans["rhetoric"][0].label_ = "personification"
        doc.spans["rhetoric_components"] = [doc.char_span(6, 8, label="tenor")]
        doc = nlp.get_pipe("rhetoric_generator")(doc)
    sugg = doc._.rhetoric_suggestions
    assert [s["sentence"] for s in sugg] == [1, 2]
    assert sugg[0]["object"] == "星星" and sugg[0]["candidates"][0]["text"] == "星星像眼睛。"
    assert sugg[1]["object"] is None and "no tenor" in sugg[1]["skipped"] and not sugg[1]["candidates"]
    assert len(srv.requests) == 1
    assert "可以在这句原文的基础上改写：星星很亮。" in srv.requests[0].body["messages"][0]["content"]


def test_bad_input():
    with FakeOpenAIServer() as srv:
        nlp = _nlp({"@llm_backends": "spacy_rhetoric.OpenAICompatible.v1", "base_url": srv.base_url,
                    "model": "m", "api_key_env": None}, policy="all", sampling={"n_candidates": 1},
                   task={"max_sentence_chars": 20})
        assert nlp("")._.rhetoric_suggestions == []
        assert nlp("   ")._.rhetoric_suggestions == []
        with pytest.raises(IndexError):
            nlp("一句话。", component_cfg={"rhetoric_generator": {"sentences": [3]}})
        long_doc = nlp("长" * 50 + "。")
        assert "max_sentence_chars" in long_doc._.rhetoric_suggestions[0]["skipped"] or \
            long_doc._.rhetoric_suggestions[0]["object"] is None
        gen = nlp.get_pipe("rhetoric_generator")
        with pytest.raises(ValueError):
            gen.generate("上文。", "litotes", "我们")
        with pytest.raises(ValueError):
            gen.generate("上文。", "metaphor", "  ")
        # English text still gets a prompt; the answer is whatever the server says.
        out = gen.generate("The moon was bright.", "metaphor", "moon", n=1)
        assert out[0].ok and out[0].text == "默认回答"
    with pytest.raises(ValueError):
        _nlp({"@llm_backends": "spacy_rhetoric.OpenAICompatible.v1", "base_url": "http://x", "model": "m"},
             policy="sometimes")


def test_api_key_never_saved_logged_or_raised(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv(ENV, SECRET)
    echo = status(401, body=f'{{"error": "bad key {SECRET}"}}')
    with FakeOpenAIServer([valid('{"generation": "好"}'), echo], default=echo) as srv:
        nlp = _nlp({"@llm_backends": "spacy_rhetoric.OpenAICompatible.v1", "base_url": srv.base_url,
                    "model": "m", "api_key_env": ENV, "max_retries": 0}, sampling={"n_candidates": 1})
        with caplog.at_level(logging.DEBUG):
            ok = nlp("月光很亮。", component_cfg={"rhetoric_generator": {"requests": [{"sentence": 0, "rhetoric": "metaphor", "object": "月光"}]}})
            bad = nlp("月光很亮。", component_cfg={"rhetoric_generator": {"requests": [{"sentence": 0, "rhetoric": "metaphor", "object": "月光"}]}})
        assert srv.requests[0].headers["Authorization"] == f"Bearer {SECRET}"
    assert ok._.rhetoric_suggestions[0]["candidates"][0]["text"] == "好"
    err = bad._.rhetoric_suggestions[0]["failures"][0]["error"]
    assert "HTTP 401" in err and SECRET not in err
    assert SECRET not in caplog.text
    nlp.to_disk(tmp_path / "pipe")
    files = [p for p in (tmp_path / "pipe").rglob("*") if p.is_file()]
    assert files and all(SECRET.encode() not in p.read_bytes() for p in files)
    assert ENV in (tmp_path / "pipe" / "config.cfg").read_text()
    reloaded = spacy.load(tmp_path / "pipe")
    gen = reloaded.get_pipe("rhetoric_generator")
    assert gen.backend.api_key_env == ENV and gen.cfg["n_candidates"] == 1
    assert SECRET not in repr(gen.backend) and SECRET not in str(vars(gen.backend))


def test_logprob_reranker_registered():
    scorer = registry.misc.get("spacy_rhetoric.LogprobReranker.v1")(length_normalize=False)
    kw = dict(context=[], rhetoric="metaphor", object="x")
    assert scorer(["aa", "b", "c"], logprobs=[-2.0, -1.0, None], **kw) == [-2.0, -1.0, -3.0]
    assert scorer(["a"], logprobs=[None], **kw) == [0.0]


# --- the config: a task, a model, the sampling and verifier blocks ---------------------------

#: What the earlier flat default config resolved to: the blocks give the same settings.
DEFAULT_SETTINGS = {
    "policy": "none", "rhetorics": ["metaphor"],
    "prompt_style": "instruction", "language": "zh", "n_context": 3, "rewrite": True, "max_sentence_chars": 300,
    "lead": "none", "shots": {},
    "n_candidates": 3, "temperature": 0.7, "max_new_tokens": 96, "time_budget": 0.0, "round_size": 0,
    "verify": True, "analyser": "self", "weights": {"analyser": 1.0, "fluency": 0.1, "reranker": 0.1},
    "kenlm_path": None, "min_branches": 3,
}


def test_the_factory_takes_a_task_a_model_and_two_blocks():
    nlp = spacy.blank("zh")
    gen = nlp.add_pipe("rhetoric_generator")
    block = nlp.config["components"]["rhetoric_generator"]
    assert sorted(block) == ["factory", "model", "policy", "rhetorics", "sampling", "task", "verifier"]
    assert block["task"]["@llm_tasks"] == "spacy_rhetoric.RhetoricGeneration.v1"
    assert block["model"]["@llm_backends"] == "spacy_rhetoric.OpenAICompatible.v1"
    assert block["sampling"]["@misc"] == "spacy_rhetoric.GenerationSampling.v1"
    assert block["verifier"]["@misc"] == "spacy_rhetoric.SuggestionVerifier.v1"
    assert block["verifier"]["reranker"]["@misc"] == "spacy_rhetoric.LogprobReranker.v1"
    assert gen.cfg == DEFAULT_SETTINGS
    assert gen.task.prompt_style == "instruction" and gen.sampling.n_candidates == 3 and gen.verifier.reranker is gen.reranker
    # a block given in part keeps the defaults of the rest
    part = spacy.blank("zh").add_pipe("rhetoric_generator", config={
        "sampling": {"n_candidates": 5}, "verifier": {"weights": {"fluency": 0.5}}, "task": {"n_context": 1}})
    assert part.cfg == {**DEFAULT_SETTINGS, "n_candidates": 5, "n_context": 1,
                        "weights": {"analyser": 1.0, "fluency": 0.5, "reranker": 0.1}}
    assert part._clip_context(["一。", "二。"]) == ["二。"]
    for config, code in (({"sampling": {"n_candidates": 0}}, "R007"), ({"task": {"prompt_style": "poem"}}, "R003"),
                         ({"task": {"lead": "device"}}, "R018"), ({"task": {"language": "fr"}}, "R008"),
                         ({"verifier": {"min_branches": 1}}, "R007"), ({"policy": "sometimes"}, "R009")):
        with pytest.raises(ValueError, match=rf"\[{code}\]"):
            spacy.blank("zh").add_pipe("rhetoric_generator", config=config)
    with pytest.raises(ValueError, match="unknown ranking weight"):
        spacy.blank("zh").add_pipe("rhetoric_generator", config={"verifier": {"weights": {"beauty": 1.0}}})


def test_the_shipped_gemma_config_builds_its_generator():
    from spacy_rhetoric.llm.transformers_backend import TransformersBackend
    from spacy_rhetoric.serve.app import build_generator

    gen = build_generator(ROOT / "configs" / "generator_gemma.cfg")  # nothing is loaded yet
    assert gen.cfg == {**DEFAULT_SETTINGS, "prompt_style": "completion", "n_context": 2, "rewrite": False,
                       "lead": "device", "shots": {d: [] for d in RG_DEVICES}, "n_candidates": 8, "temperature": 0.8,
                       "max_new_tokens": 64, "kenlm_path": "assets/kenlm/zh_CN.lm"}
    backend = gen.backend
    assert isinstance(backend, TransformersBackend) and backend.model_path == "assets/generators/gemma-3-270m"
    assert (backend.adapter_path, backend.batch_size, backend.top_p, backend.repetition_penalty, backend.seed) == \
        ("training/generator-gemma-rhetoric/adapter", 8, 0.9, 1.1, 0)


def test_a_flat_config_names_the_block_of_each_setting(tmp_path):
    from spacy_rhetoric.serve.app import build_generator

    path = tmp_path / "generator.cfg"
    path.write_text("""[components]

[components.rhetoric_generator]
factory = "rhetoric_generator"
policy = "none"
n_candidates = 2
temperature = 0.0
prompt_style = "instruction"
kenlm_path = null

[components.rhetoric_generator.backend]
@llm_backends = "spacy_rhetoric.OpenAICompatible.v1"
base_url = "http://127.0.0.1:9/v1"
""", encoding="utf8")
    with pytest.raises(ValueError, match=r"\[R023\]") as err:
        build_generator(path)
    message = str(err.value)
    assert "n_candidates, temperature -> [components.rhetoric_generator.sampling]" in message
    assert "prompt_style -> [components.rhetoric_generator.task]" in message
    assert "kenlm_path -> [components.rhetoric_generator.verifier]" in message
    assert "the backend block -> [components.rhetoric_generator.model]" in message and "policy" not in message
    # spaCy refuses them too, in nlp.add_pipe and spacy.load
    with pytest.raises(ConfigValidationError, match="temperature"):
        spacy.blank("zh").add_pipe("rhetoric_generator", config={"temperature": 0.5})
