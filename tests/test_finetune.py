"""LoRA fine-tuning on real derived RG records with a tiny random Qwen2 model:
loss goes down, checkpoints resume, and the saved adapter reloads through
``spacy_rhetoric.Transformers.v1`` to identical outputs."""
from __future__ import annotations

import json

import pytest
import torch

from spacy_rhetoric.llm.finetune import IGNORE_INDEX, FinetuneConfig, encode_example, finetune, latest_checkpoint
from spacy_rhetoric.llm.prompts import format_answer, rg_messages
from spacy_rhetoric.llm.transformers_backend import TransformersBackend
from tiny_llm import real_records, tiny_model


@pytest.fixture(scope="module")
def setup(tmp_path_factory, simile_dir, cmdag_dir):
    torch.set_num_threads(1)
    records = real_records(simile_dir, cmdag_dir, n_simile=6, n_cmdag=2)
    root = tmp_path_factory.mktemp("ft")
    return records, tiny_model(root / "base", records), root


def test_answer_only_labels(setup):
    records, base, _ = setup
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(base, local_files_only=True)
    ids, labels = encode_example(tok, records[-1])
    answer = [t for t in labels if t != IGNORE_INDEX]
    first = labels.index(next(t for t in labels if t != IGNORE_INDEX))
    assert all(t == IGNORE_INDEX for t in labels[:first]) and labels[first:] == ids[first:]
    text = tok.decode(answer, skip_special_tokens=True)
    assert json.loads(text.strip()) == {"generation": records[-1].target} or "<unk>" in tok.decode(answer)


def test_loss_goes_down_and_adapter_reloads_identically(setup):
    records, base, root = setup
    out = root / "run"
    cfg = FinetuneConfig(lr=1e-2, batch_size=4, micro_batch_size=2, max_steps=12, save_every=6, r=8, alpha=8, threads=1)
    summary = finetune(base, records, out, cfg, progress=False)
    losses = summary["losses"]
    assert len(losses) == 12 and sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.05
    assert summary["n_records"] == len(records) and summary["tokens_per_second"] > 0
    assert (out / "adapter" / "adapter_config.json").exists()
    assert (out / "adapter" / "adapter_model.safetensors").exists()
    cfg_json = json.loads((out / "adapter" / "adapter_config.json").read_text())
    assert cfg_json["r"] == 8 and cfg_json["lora_alpha"] == 8 and cfg_json["peft_type"] == "LORA"
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    assert [e["step"] for e in log] == list(range(1, 13))

    convs = [rg_messages(r.rhetoric, r.object, r.previous_sentences) for r in records[:3]]
    tuned = TransformersBackend(str(base), str(out / "adapter"), device="cpu")
    again = TransformersBackend(str(base), str(out / "adapter"), device="cpu", batch_size=1)
    plain = TransformersBackend(str(base), device="cpu")
    a = tuned.chat(convs, n=1, temperature=0.0, max_new_tokens=12)
    b = again.chat(convs, n=1, temperature=0.0, max_new_tokens=12)
    assert [c[0].text for c in a] == [c[0].text for c in b]
    assert [c[0].logprob for c in a] == pytest.approx([c[0].logprob for c in b], abs=1e-4)
    # The adapter changed the model: the reference answers became more likely.
    answers = [format_answer(r.target) for r in records[:3]]
    tuned_lp = sum(lp for lp, _ in tuned.score(convs, answers))
    plain_lp = sum(lp for lp, _ in plain.score(convs, answers))
    assert tuned_lp > plain_lp


def test_resume_continues_from_checkpoint(setup):
    records, base, root = setup
    out = root / "resume"
    cfg = FinetuneConfig(lr=1e-2, batch_size=2, micro_batch_size=2, max_steps=4, save_every=2, r=4, alpha=4, threads=1)
    full = finetune(base, records, root / "straight", cfg, progress=False)
    finetune(base, records, out, cfg, progress=False, stop_after=2)  # "interrupted"
    assert latest_checkpoint(out).name == "checkpoint-2"
    resumed = finetune(base, records, out, cfg, resume=True, progress=False)
    assert resumed["start_step"] == 2 and len(resumed["losses"]) == 2
    # Same data order and optimizer state: the resumed steps match the straight run.
    assert resumed["losses"] == pytest.approx(full["losses"][2:], rel=1e-4)


def test_bad_settings(setup):
    records, base, root = setup
    with pytest.raises(ValueError):
        finetune(base, records, root / "bad", FinetuneConfig(batch_size=3, micro_batch_size=2), progress=False)
    with pytest.raises(ValueError):
        finetune(base, records, root / "bad", FinetuneConfig(max_length=5, max_steps=1), progress=False)
    with pytest.raises(OSError):
        finetune(root / "no-such-model", records, root / "bad", FinetuneConfig(max_steps=1), progress=False)
