"""RG with a base LM: the few-shot completion prompt, ``complete()`` on a
tiny random local model, the generator's completion style, LoRA on the
completion format, ``generate-records`` with resume, and the real Gemma 3
270M asset when it has been built (``spacy project run generator-model``)."""
from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
import torch

from spacy_rhetoric.components.rhetoric_generator import RhetoricGenerator
from spacy_rhetoric.llm.completion import (
    builtin_shots,
    completion_target,
    parse_completion,
    render_rg_completion,
    select_shots,
)
from spacy_rhetoric.llm.finetune import IGNORE_INDEX, FinetuneConfig, encode_example, finetune
from spacy_rhetoric.llm.openai_compatible import OpenAICompatibleBackend
from spacy_rhetoric.llm.records import read_jsonl, write_jsonl
from spacy_rhetoric.llm.rg_batch import generate_records, sample_records, written_ids
from spacy_rhetoric.llm.sampling import Sampling
from spacy_rhetoric.llm.tasks import make_rhetoric_generation_task
from spacy_rhetoric.llm.transformers_backend import TransformersBackend
from tiny_llm import build_tiny_chat_model, real_records

GEMMA = Path(__file__).resolve().parents[1] / "assets" / "generators" / "gemma-3-270m"


@pytest.fixture(scope="module")
def records(simile_dir, cmdag_dir):
    return real_records(simile_dir, cmdag_dir, n_simile=8, n_cmdag=2)


@pytest.fixture(scope="module")
def tiny_base(tmp_path_factory, records):
    """A tiny random Qwen2 whose character vocabulary covers the completion prompts."""
    torch.set_num_threads(1)
    shots = {d: select_shots(records, d, 2) for d in ("metaphor", "personification", "hyperbole")}
    texts = [render_rg_completion(r.rhetoric, r.object, r.previous_sentences, shots[r.rhetoric]) + completion_target(r) for r in records]
    texts += [render_rg_completion(d, "月光", ["上文。"], shots[d]) for d in shots]
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "base", texts, max_chars=400, hidden_size=32, layers=2, heads=2)


def test_prompt_shows_shots_and_leaves_the_request_open(records):
    shots = select_shots(records, "metaphor", 3)
    prompt = render_rg_completion("metaphor", "秋天的落叶", ["我走在回家的路上。"], shots)
    assert prompt.endswith("本体：秋天的落叶\n句子：")
    assert "上文：我走在回家的路上。" in prompt
    for shot in shots:
        assert f"本体：{shot.object.strip()}\n句子：{shot.target.strip()}\n" in prompt
    assert render_rg_completion("hyperbole", "作业").endswith("上文：（无）\n修辞：夸张\n夸张对象：作业\n句子：")
    with pytest.raises(ValueError):
        render_rg_completion("litotes", "我们")
    with pytest.raises(ValueError):
        render_rg_completion("metaphor", "  ")


def test_shots_are_seeded_and_topped_up_with_our_own(records):
    assert select_shots(records, "metaphor", 3, seed=1) == select_shots(records, "metaphor", 3, seed=1)
    assert all(len(s.target) <= 40 for s in select_shots(records, "metaphor", 5))
    # The derived records are all metaphors: other devices use the project's examples.
    own = select_shots(records, "personification", 2)
    assert own == [r for r in builtin_shots() if r.rhetoric == "personification"][:2]
    assert {r.rhetoric for r in builtin_shots()} == {"metaphor", "personification", "hyperbole", "parallelism"}


@pytest.mark.parametrize(
    "raw,expected,error",
    [
        ("月亮像小船。\n\n上文：……", "月亮像小船。", None),
        ("句子：月亮像小船。", "月亮像小船。", None),
        ("  \n月亮像小船。", None, "empty answer"),
        ("", None, "empty answer"),
    ],
)
def test_parse_completion_keeps_the_first_line_only(raw, expected, error):
    parsed = parse_completion(raw)
    assert (parsed.generation, parsed.error, parsed.raw) == (expected, error, raw)


def test_complete_stops_at_the_line_break(tiny_base, records):
    backend = TransformersBackend(str(tiny_base), device="cpu", seed=3, top_p=0.9, repetition_penalty=1.1)
    prompts = [render_rg_completion(r.rhetoric, r.object, r.previous_sentences) for r in records[:3]]
    answers = backend.complete(prompts, n=2, temperature=1.0, max_new_tokens=10)
    again = TransformersBackend(str(tiny_base), device="cpu", seed=3, top_p=0.9, repetition_penalty=1.1)
    assert [[c.text for c in cs] for cs in answers] == [[c.text for c in cs] for cs in again.complete(prompts, n=2, temperature=1.0, max_new_tokens=10)]
    for cs in answers:
        assert len(cs) == 2
        for c in cs:
            assert c.ok and math.isfinite(c.logprob) and 0 < c.n_tokens <= 10
            assert "\n" not in c.text[:-1]  # at most the stop itself, at the end
            assert (c.meta["finish_reason"] == "stop") == c.text.endswith("\n")
    with pytest.raises(ValueError, match=r"\[R005\]"):
        _no_template_chat(tiny_base)


def _no_template_chat(path):
    backend = TransformersBackend(str(path), device="cpu")
    backend.tokenizer.chat_template = None
    backend.chat([[{"role": "user", "content": "你好"}]])


def test_generator_completion_style(tiny_base, records, tmp_path):
    shots_file = tmp_path / "shots.jsonl"
    write_jsonl(records, shots_file)
    backend = TransformersBackend(str(tiny_base), device="cpu", seed=0)
    gen = RhetoricGenerator(None, backend,
                            task=make_rhetoric_generation_task(prompt_style="completion", shots_path=str(shots_file), n_shots=2),
                            sampling=Sampling(n_candidates=3, temperature=1.0, max_new_tokens=8))
    assert [s["target"] for s in gen.cfg["shots"]["metaphor"]] == [s.target for s in select_shots(records, "metaphor", 2)]
    cands = gen.generate(["上文。"], "metaphor", "月光")
    assert cands
    for c in cands:
        if c.ok:
            assert c.text == c.raw.split("\n", 1)[0].strip() and c.text
        else:
            assert c.error == "empty answer" and c.text == ""
    gen.to_disk(tmp_path / "gen")
    loaded = RhetoricGenerator(None, backend).from_disk(tmp_path / "gen")
    assert loaded.cfg["prompt_style"] == "completion" and loaded.cfg["shots"] == gen.cfg["shots"]
    with pytest.raises(ValueError, match=r"\[R004\]"):
        RhetoricGenerator(None, OpenAICompatibleBackend("http://127.0.0.1:9/v1", "m"), task=gen.task)
    with pytest.raises(ValueError, match=r"\[R003\]"):
        make_rhetoric_generation_task(prompt_style="poem")


def test_lora_on_the_completion_format(tiny_base, records, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_base, local_files_only=True)
    ids, labels = encode_example(tok, records[0], prompt_style="completion")
    answer = [t for t in labels if t != IGNORE_INDEX]
    assert labels[-len(answer):] == ids[-len(answer):] and tok.decode(answer).endswith("\n")
    assert tok.decode(ids[: len(ids) - len(answer)]).endswith("句子：")
    with pytest.raises(ValueError):
        encode_example(tok, records[0], prompt_style="poem")
    cfg = FinetuneConfig(lr=3e-2, batch_size=2, micro_batch_size=2, max_steps=15, save_every=5, r=8, alpha=8,
                         threads=1, prompt_style="completion")
    summary = finetune(tiny_base, records[:2], tmp_path / "lora", cfg, progress=False)
    losses = summary["losses"]
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.05
    tuned = TransformersBackend(str(tiny_base), str(tmp_path / "lora" / "adapter"), device="cpu")
    out = tuned.complete([render_rg_completion("metaphor", records[0].object)], max_new_tokens=6)
    assert out[0][0].ok and out[0][0].n_tokens <= 6


def test_generate_records_sample_human_and_resume(tiny_base, records, tmp_path):
    pairs = sample_records(records, 5, seed=0)
    assert pairs == sample_records(records, 5, seed=0) and [i for i, _ in pairs] == sorted(i for i, _ in pairs)
    human = tmp_path / "human.jsonl"
    assert generate_records(pairs, human, system="human", progress=False) == 5
    rows = [json.loads(line) for line in human.read_text(encoding="utf8").splitlines()]
    assert [r["candidates"] for r in rows] == [[rec.target] for _, rec in pairs]
    assert rows[0]["condition"] == {"rhetoric": pairs[0][1].rhetoric, "object": pairs[0][1].object}

    gen = RhetoricGenerator(None, TransformersBackend(str(tiny_base), device="cpu", seed=0),
                            task=make_rhetoric_generation_task(prompt_style="completion", n_shots=1),
                            sampling=Sampling(n_candidates=1, temperature=1.0, max_new_tokens=6))
    out = tmp_path / "tiny.jsonl"
    generate_records(pairs, out, system="tiny", generator=gen, batch_size=2, progress=False)
    full = out.read_text(encoding="utf8").splitlines()
    # An interruption in the middle of line 4: resume writes the missing records only.
    out.write_text("\n".join(full[:3]) + "\n" + full[3][:20], encoding="utf8")
    assert written_ids(out) == {i for i, _ in pairs[:3]}
    generate_records(pairs, out, system="tiny", generator=gen, batch_size=2, resume=True, progress=False)
    ids = [json.loads(line)["id"] for line in out.read_text(encoding="utf8").splitlines()]
    assert sorted(ids) == [i for i, _ in pairs]
    row = json.loads(full[0])
    assert row["prompt"].endswith("句子：") and row["system"] == "tiny"
    assert len(row["candidates"]) + len(row["failures"]) == 1
    with pytest.raises(ValueError, match=r"\[R012\]"):
        generate_records(pairs, tmp_path / "x.jsonl", system="model")


@pytest.mark.skipif(not (GEMMA / "model.safetensors").exists(), reason="Gemma 3 270M asset not built (spacy project run generator-model)")
def test_real_gemma_asset_generates():
    meta = json.loads((GEMMA / "asset.json").read_text(encoding="utf8"))
    assert "Gemma Terms of Use" in meta["license"] and meta["parameters"] > 250_000_000
    backend = TransformersBackend(str(GEMMA), device="cpu", seed=0, top_p=0.9, repetition_penalty=1.1)
    gen = RhetoricGenerator(None, backend, task=make_rhetoric_generation_task(prompt_style="completion"),
                            sampling=Sampling(n_candidates=1, temperature=0.8, max_new_tokens=24))
    cands = gen.generate([], "metaphor", "月亮")
    assert len(cands) == 1 and cands[0].raw
    assert cands[0].ok == bool(cands[0].raw.split("\n", 1)[0].strip())


def test_benchmark_generation_counts_generated_tokens(tiny_base, records):
    from spacy_rhetoric.evaluation.benchmark import benchmark_generation

    gen = RhetoricGenerator(None, TransformersBackend(str(tiny_base), device="cpu", seed=0),
                            task=make_rhetoric_generation_task(prompt_style="completion", n_shots=1),
                            sampling=Sampling(n_candidates=1, temperature=1.0, max_new_tokens=5))
    result = benchmark_generation(gen, records[:4], batch_size=2)
    assert result["records"] == 4 and 4 <= result["tokens"] <= 20 and result["seconds"] > 0
    assert result["tokens_per_second"] == pytest.approx(result["tokens"] / result["seconds"])
    with pytest.raises(ValueError):
        benchmark_generation(gen, [])


def test_generation_samples_are_drawn_not_chosen(records, tmp_path):
    from spacy_rhetoric.llm.rg_batch import samples_markdown

    pairs = sample_records(records, 6, seed=0)
    a, b = tmp_path / "a.jsonl", tmp_path / "b.jsonl"
    generate_records(pairs, a, system="human", progress=False)
    generate_records(pairs[:4], b, system="human", progress=False)  # b holds fewer ids
    page = samples_markdown([a, b], n=3, seed=1)
    assert page == samples_markdown([a, b], n=3, seed=1)
    shown = [int(line.split()[2].rstrip(":")) for line in page.splitlines() if line.startswith("## record")]
    assert len(shown) == 3 and set(shown) <= {i for i, _ in pairs[:4]}
    assert page.count("**human**") == 6


ROOT = Path(__file__).resolve().parents[1]
ADAPTER = ROOT / "training" / "generator-gemma-rhetoric" / "adapter"
KENLM = ROOT / "assets" / "kenlm" / "zh_CN.lm"


@pytest.mark.skipif(not (GEMMA / "model.safetensors").exists() or not (ADAPTER / "adapter_config.json").exists()
                    or not KENLM.exists(),
                    reason="Gemma asset, its LoRA adapter or the KenLM model not built (spacy project run generator-model, "
                           "finetune-generator-rhetoric, kenlm-model)")
def test_serve_suggests_with_the_gemma_config(monkeypatch):
    """The README's example: ``rhetoric serve --generator-config configs/generator_gemma.cfg``."""
    pytest.importorskip("fastapi")
    import spacy
    from fastapi.testclient import TestClient

    from spacy_rhetoric.serve import create_app

    monkeypatch.chdir(ROOT)  # the config's paths are relative to the project
    app = create_app(spacy.load(ROOT / "pipelines" / "zh_rhetoric"), generator_config=ROOT / "configs" / "generator_gemma.cfg")
    client = TestClient(app)
    assert client.get("/health").json()["suggest"] is True
    res = client.post("/suggest", json={"text": "放学了。月亮升起来了。", "sentence": 1, "rhetoric": "metaphor", "object": "月亮", "n": 1})
    assert res.status_code == 200, res.text
    body = res.json()
    assert body["object"] == "月亮" and len(body["candidates"]) == 1 and body["candidates"][0]["text"]
    assert body["candidates"][0]["text"].startswith("月亮像")  # the config's device lead: tenor and first comparator
    # verified by the served pipeline, ranked with KenLM fluency
    assert body["verification"] == "on" and isinstance(body["candidates"][0]["verified"], bool)
    assert body["candidates"][0]["fluency"] < 0
