"""`rhetoric generate` with the defaults, as a new user calls it: a base LM
(no chat template, like the Gemma 3 270M asset) gets completion prompts
without being told, and a model that cannot be used is one line on stderr.
Tiny randomly initialised local models stand in for the real ones."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from spacy_rhetoric.cli import app
from spacy_rhetoric.cli.generate import resolve_prompt_style
from spacy_rhetoric.llm.prompts import render_rg_prompt
from tiny_llm import build_tiny_chat_model

runner = CliRunner()


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """A tiny chat model and the same model with its chat template removed (a base LM)."""
    root = tmp_path_factory.mktemp("tiny")
    texts = [render_rg_prompt(d, "月光", ["上文。"]) + "月光像一层薄纱。月光在窗前跳舞。" for d in ("metaphor", "personification", "hyperbole")]
    chat = build_tiny_chat_model(root / "chat", texts, max_chars=300, hidden_size=32, layers=2, heads=2)
    base = root / "base"
    base.mkdir()
    for f in Path(chat).iterdir():
        (base / f.name).write_bytes(f.read_bytes())
    config = json.loads((base / "tokenizer_config.json").read_text(encoding="utf8"))
    config.pop("chat_template", None)
    (base / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False), encoding="utf8")
    for extra in base.glob("chat_template*"):
        extra.unlink()
    return Path(chat), base


def test_auto_prompt_style(models):
    chat, base = models
    assert resolve_prompt_style("auto", str(chat)) == "instruction"
    assert resolve_prompt_style("auto", str(base)) == "completion"
    assert resolve_prompt_style("auto", None) == "instruction"
    assert resolve_prompt_style("instruction", str(base)) == "instruction"


def test_base_model_works_with_the_defaults(models):
    _, base = models
    result = runner.invoke(app, ["generate", "--rhetoric", "metaphor", "--object", "月光", "--model-path", str(base),
                                 "--n", "2", "--max-new-tokens", "8", "--seed", "0"])
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) == 2


def test_unusable_model_is_one_line_on_stderr(models, tmp_path):
    _, base = models
    missing = runner.invoke(app, ["generate", "--rhetoric", "metaphor", "--object", "月光", "--model-path", str(tmp_path / "none")])
    assert missing.exit_code == 1 and len(missing.stderr.splitlines()) == 1
    assert "R019" in missing.stderr and "spacy project run generator-model" in missing.stderr
    assert "Traceback" not in missing.stderr
    no_adapter = runner.invoke(app, ["generate", "--rhetoric", "metaphor", "--object", "月光", "--model-path", str(base),
                                     "--adapter-path", str(tmp_path / "adapter")])
    assert no_adapter.exit_code == 1 and len(no_adapter.stderr.splitlines()) == 1
    assert "spacy project run finetune-generator-rhetoric" in no_adapter.stderr
    forced = runner.invoke(app, ["generate", "--rhetoric", "metaphor", "--object", "月光", "--model-path", str(base),
                                 "--prompt-style", "instruction", "--max-new-tokens", "4"])
    assert forced.exit_code == 1 and len(forced.stderr.splitlines()) == 1 and "R005" in forced.stderr


PIPELINE = Path(__file__).resolve().parents[1] / "pipelines" / "zh_rhetoric"


def test_candidates_are_verified_by_the_analyser(models):
    _, base = models
    common = ["generate", "--rhetoric", "metaphor", "--object", "月光", "--model-path", str(base), "--n", "3",
              "--max-new-tokens", "8", "--seed", "0"]
    result = runner.invoke(app, common + ["--analyser", str(PIPELINE), "--weights", "analyser=1,fluency=0",
                                          "--time-budget", "60", "--round-size", "2"])
    assert result.exit_code == 0, result.stderr
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(lines) <= 3 and all(isinstance(c["verified"], bool) for c in lines if c["error"] is None)
    assert all(c["reason"] for c in lines if c["verified"] is False)
    summary = result.stderr.strip().splitlines()[-1]
    assert "verified by" in summary or summary.startswith("rhetoric generate: none of the 3 candidates drawn was verified")
    off = runner.invoke(app, common + ["--no-verify"])
    assert off.exit_code == 0 and all(json.loads(line)["verified"] is None for line in off.stdout.splitlines())
    assert "not verified" in off.stderr
    led = runner.invoke(app, common + ["--no-verify", "--lead", "device"])
    assert led.exit_code == 0 and all(json.loads(line)["text"].startswith("月光") for line in led.stdout.splitlines())


def test_bad_verification_settings_are_one_line_on_stderr(models, tmp_path):
    _, base = models
    common = ["generate", "--rhetoric", "metaphor", "--object", "月光", "--model-path", str(base), "--n", "1",
              "--max-new-tokens", "4"]
    for extra, expected in ((["--weights", "beauty=1"], "unknown ranking weight"),
                            (["--weights", "analyser"], "not name=value"),
                            (["--analyser", str(tmp_path / "no-pipeline")], "cannot load pipeline"),
                            (["--lead", "verb"], "lead must be one of")):
        result = runner.invoke(app, common + extra)
        assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1, result.stderr
        assert expected in result.stderr and "Traceback" not in result.stderr


def test_suggestion_sheet_of_one_device(tmp_path: Path):
    rows = Path(__file__).resolve().parents[1] / "metrics" / "suggestions" / "gemma-lora-lead.jsonl"
    sheet, key = tmp_path / "sheet.jsonl", tmp_path / "key.jsonl"
    result = runner.invoke(app, ["research", "suggestion-sheet", str(rows), "--sheet", str(sheet), "--key", str(key),
                                 "--per-device", "5", "--human-per-device", "2", "--device", "parallelism"])
    assert result.exit_code == 0, result.output
    items = [json.loads(line) for line in sheet.read_text(encoding="utf8").splitlines()]
    assert len(items) == 7 and {item["rhetoric"] for item in items} == {"parallelism"}
    assert "device" in items[0] and items[0]["device"] is None  # to be answered
    bad = runner.invoke(app, ["research", "suggestion-sheet", str(rows), "--sheet", str(sheet), "--key", str(key), "--device", "irony"])
    assert bad.exit_code == 1 and "unknown --device irony" in bad.output


def test_time_suggestions_times_requests_of_every_device(models, tmp_path):
    """`rhetoric benchmark suggestions`: requests spread over the devices, each
    timed at every N with the analyser verifying, written as JSON."""
    from spacy_rhetoric.llm.records import essay_rg_records, write_jsonl

    _, base = models
    annotated = Path(__file__).resolve().parents[1] / "annotations" / "pse-i-cerd" / "test.jsonl"
    write_jsonl(essay_rg_records(annotated, k=1), tmp_path / "requests.jsonl")
    out = tmp_path / "latency.json"
    result = runner.invoke(app, ["benchmark", "suggestions", str(tmp_path / "requests.jsonl"), "-o", str(out), "--model-path", str(base),
                                 "--analyser", str(PIPELINE), "--n-shots", "0", "--k", "1", "--per-device", "1",
                                 "--latency-sample", "4", "--ns", "1,2", "--max-new-tokens", "4", "--lead", "device"])
    assert result.exit_code == 0, result.stderr
    timed = json.loads(out.read_text(encoding="utf8"))
    assert timed["analyser"] == str(PIPELINE) and sum(timed["devices"].values()) == 4 and len(timed["devices"]) == 4
    assert sorted(timed["latency"]) == ["1", "2"]
    assert all(x["requests"] == 4 and 0 < x["p50"] <= x["p95"] for x in timed["latency"].values())


def test_unreachable_server_fails_and_blames_the_backend(monkeypatch):
    # Nothing listens on the discard port: every request fails to connect.
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    result = runner.invoke(app, ["generate", "--rhetoric", "metaphor", "--object", "月光", "--base-url",
                                 "http://127.0.0.1:9/v1", "--timeout", "1", "--n", "2", "--no-verify"])
    assert result.exit_code == 1 and len(result.stderr.splitlines()) == 1, result.stderr
    assert "R022" in result.stderr and "connection error" in result.stderr
    assert "analyser did not find" not in result.stderr and not result.stdout.strip()
