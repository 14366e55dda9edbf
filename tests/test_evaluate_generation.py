"""evaluate-generation end to end: JSONL in, JSON + report out, judges on the fake server."""
import json

import pytest
from typer.testing import CliRunner

from fake_openai import FakeOpenAIServer, valid
from spacy_rhetoric.cli import app
from spacy_rhetoric.errors import CorpusFormatError
from spacy_rhetoric.research.generation import read_generation_jsonl

RECORD = {"context": ["天上挂着月亮。"], "condition": {"rhetoric": "metaphor", "object": "月亮"},
          "reference": "弯弯的月亮像小船。", "candidates": ["月亮像一只小船。", "月亮像一个大玉盘。"]}


def test_cli_with_kb_and_rating_judge(tmp_path, simile_dir):
    data = tmp_path / "gen.jsonl"
    data.write_text(json.dumps(RECORD, ensure_ascii=False) + "\n", encoding="utf8")
    kb = tmp_path / "kb.json"
    runner = CliRunner()
    train = next(simile_dir.glob("*-Train.tsv"))
    assert runner.invoke(app, ["convert", "simile-kb", str(kb), "--simile", str(train)]).exit_code == 0
    out = tmp_path / "out.json"
    with FakeOpenAIServer(default=valid('{"score": 4, "reason": "贴切"}')) as srv:
        res = runner.invoke(app, ["research", "evaluate-generation", str(data), str(out), "--kb", str(kb), "--judge", "rating",
                                  "--base-url", srv.base_url, "--judge-model", "judge"])
    assert res.exit_code == 0, res.output
    result = json.loads(out.read_text(encoding="utf8"))
    cands = result["records"][0]["candidates"]
    assert [c["judge_rating"]["value"] for c in cands] == [4.0, 4.0]
    assert cands[0]["bleu2"] > cands[1]["bleu2"]
    assert result["summary"]["judge_rating"] == 4.0 and result["summary"]["judge_rating_failures"] == 0
    assert cands[0]["hauser"]["creativity"] is not None
    assert "月亮像一只小船。" in out.with_suffix(".md").read_text(encoding="utf8")


def test_malformed_jsonl_names_file_and_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(RECORD, ensure_ascii=False) + "\n" + '{"candidates": "不是列表"}\n', encoding="utf8")
    with pytest.raises(CorpusFormatError, match=r"bad.jsonl, line 2: 'candidates'"):
        read_generation_jsonl(bad)
