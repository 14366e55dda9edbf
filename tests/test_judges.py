"""LLM judges against the in-process fake OpenAI-compatible server on 127.0.0.1:
scripted answers for every turn, a malformed answer and a timeout; the staged
judge's transcript order is inspected on the recorded requests."""
from __future__ import annotations

import json

import pytest

from fake_openai import FakeOpenAIServer, malformed, slow, valid
from spacy_rhetoric.errors import JudgeParseError
from spacy_rhetoric.research.judges import (
    DIMENSIONS,
    GenerationItem,
    MetaphorJudge,
    PairwiseRanker,
    SingleAnswerRater,
    better_rate,
    parse_json_object,
)
from spacy_rhetoric.llm.openai_compatible import OpenAICompatibleBackend

GOOD = "她的笑容像春天的阳光。"
BROKEN = "时间像一条河，带走了童年。"
SLOW = "思念是一根细细的线。"
SCORES = {"novelty": 6, "relevance": 8, "clarity": 9, "literariness": 7, "cultural_fit": 8}
ZH = {key: zh for key, zh, _ in DIMENSIONS}


def backend(srv, **kw):
    kw.setdefault("timeout", 2.0)
    kw.setdefault("max_retries", 0)
    return OpenAICompatibleBackend(srv.base_url, "judge", api_key_env=None, backoff=0.01, **kw)


def turn_of(body) -> str:
    last = body["messages"][-1]["content"]
    if "源域" in last and "多维度" in last:
        return "prepare"
    if "汇总" in last:
        return "integrate"
    for key, zh in ZH.items():
        if f"只评估“{zh}”" in last:
            return key
    raise AssertionError(f"unexpected prompt: {last[:60]}")


def staged_responder(body):
    """Answers by turn; BROKEN gets a malformed clarity answer, SLOW a late
    novelty answer (past the client timeout)."""
    sentence = next(s for s in (GOOD, BROKEN, SLOW) if s in body["messages"][0]["content"])
    turn = turn_of(body)
    if turn == "prepare":
        return valid(json.dumps({"source_domain": "自然现象", "target_domain": "人的表情", "mapping": "温暖映射到亲切"}, ensure_ascii=False))
    if turn == "integrate":
        return valid("```json\n" + json.dumps({"scores": SCORES, "total": 38, "summary": "贴切而温暖"}, ensure_ascii=False) + "\n```")
    if sentence == BROKEN and turn == "clarity":
        return malformed("明确性我给八分，因为比较清楚。")
    if sentence == SLOW and turn == "novelty":
        return slow(1.5, json.dumps({"analysis": "x", "score": 5, "reason": "y"}))
    return valid(json.dumps({"analysis": f"{ZH[turn]}分析", "score": SCORES[turn], "reason": f"{ZH[turn]}理由"}, ensure_ascii=False))


def test_staged_judge_turns_order_malformed_and_timeout():
    with FakeOpenAIServer(default=staged_responder) as srv:
        results = MetaphorJudge(backend(srv, timeout=0.5)).__call__([GOOD, BROKEN, SLOW])
    good, broken, slow_ = results
    # every turn answered for GOOD
    assert good.error is None and good.scores == SCORES
    assert good.total == sum(SCORES.values()) == 38
    assert good.reasons["literariness"] == "文学性理由" and good.analyses["novelty"] == "创新性分析"
    assert good.domains["source_domain"] == "自然现象" and good.summary == "贴切而温暖"
    assert good.warnings == []
    # the transcript alternates user/assistant in the documented turn order
    roles = [m["role"] for m in good.transcript]
    assert roles == ["user", "assistant"] * len(MetaphorJudge.TURNS)
    user_turns = [turn_of({"messages": [m]}) for m in good.transcript if m["role"] == "user"]
    assert user_turns == list(MetaphorJudge.TURNS)
    # the server saw the growing conversation: each request of GOOD extends the previous one
    good_reqs = [r.body for r in srv.requests if GOOD in r.body["messages"][0]["content"]]
    assert [len(b["messages"]) for b in good_reqs] == [1, 3, 5, 7, 9, 11, 13]
    assert [turn_of(b) for b in good_reqs] == list(MetaphorJudge.TURNS)
    assert all(b["temperature"] == 0.0 for b in good_reqs)
    for earlier, later in zip(good_reqs, good_reqs[1:]):
        assert later["messages"][: len(earlier["messages"])] == earlier["messages"]
    # malformed clarity answer: reported, stops the conversation, keeps what parsed
    assert broken.error.startswith("turn clarity: answer is not JSON")
    assert broken.scores == {"novelty": 6, "relevance": 8} and broken.total is None
    assert not any(BROKEN in r.body["messages"][0]["content"] and turn_of(r.body) == "literariness" for r in srv.requests)
    # timeout on the novelty turn
    assert slow_.error.startswith("turn novelty: backend: timeout")
    assert slow_.scores == {} and slow_.domains


def test_integration_disagreement_is_a_warning():
    def responder(body):
        turn = turn_of(body)
        if turn == "prepare":
            return valid('{"source_domain": "a", "target_domain": "b", "mapping": "c"}')
        if turn == "integrate":
            return valid(json.dumps({"scores": {**SCORES, "novelty": 9}, "total": 41, "summary": "s"}))
        return valid(json.dumps({"analysis": "a", "score": SCORES[turn], "reason": "r"}))

    with FakeOpenAIServer(default=responder) as srv:
        (j,) = MetaphorJudge(backend(srv))([GOOD])
    assert j.total == 38 and j.error is None
    assert any("novelty" in w for w in j.warnings) and any("41" in w for w in j.warnings)


def test_best_of_group_and_stability():
    def responder(body):
        content = body["messages"][-1]["content"]
        if "选出这一组" in content:
            return valid('{"best": 2, "reason": "第二句最新颖"}') if "甲" in content else valid('{"best": 7, "reason": "?"}')
        return staged_responder(body)

    with FakeOpenAIServer(default=responder) as srv:
        judge = MetaphorJudge(backend(srv))
        choices = judge.best_of_group([["甲像山。", GOOD, "乙像水。"], ["丙像风。", "丁像雨。", "戊像雷。"]])
        report = judge.stability([GOOD, BROKEN], k=3)
    assert choices[0].best == 1 and choices[0].reason == "第二句最新颖"
    assert choices[1].best is None and "invalid value 7" in choices[1].error
    assert report[0]["identical"] and report[0]["totals"] == [38, 38, 38]
    assert report[0]["total_stdev"] == 0.0 and report[0]["max_dimension_spread"] == 0
    assert not report[1]["identical"] and len(report[1]["failures"]) == 3
    with pytest.raises(ValueError, match="at least 2"):
        judge.best_of_group([["只有一句。"]])
    with pytest.raises(ValueError, match="k ≥ 2"):
        judge.stability([GOOD], k=1)


def test_cerd_rating_and_pairwise():
    item = GenerationItem("月亮像一只小船。", "metaphor", "月亮", ["夜深了。", "天上挂着月亮。"], "弯弯的月亮像小船。")
    script = [
        valid('{"score": 4, "reason": "比喻贴切"}'),
        valid('{"score": 9, "reason": "超出范围"}'),
        malformed("四分"),
        valid('{"better": "A", "reason": "更生动"}'),
        valid('{"better": "tie", "reason": "差不多"}'),
        valid('{"better": "C", "reason": "?"}'),
    ]
    with FakeOpenAIServer(script) as srv:
        b = OpenAICompatibleBackend(srv.base_url, "judge", api_key_env=None, timeout=2.0, max_retries=0, concurrency=1)
        ratings = SingleAnswerRater(b)([item] * 3)
        ranks = PairwiseRanker(b)([item] * 3)
    assert ratings[0].value == 4.0 and ratings[0].reason == "比喻贴切"
    assert ratings[1].value is None and "invalid value 9" in ratings[1].error
    assert ratings[2].value is None and "not JSON" in ratings[2].error and ratings[2].answer == "四分"
    assert [r.value for r in ranks] == [1.0, 0.5, None]
    assert better_rate(ranks) == 0.75
    prompt = srv.requests[0].body["messages"][0]["content"]
    assert "比喻" in prompt and "本体是“月亮”" in prompt and "天上挂着月亮。" in prompt
    pair_prompt = srv.requests[3].body["messages"][0]["content"]
    assert "句子A：月亮像一只小船。" in pair_prompt and "句子B：弯弯的月亮像小船。" in pair_prompt
    with pytest.raises(ValueError, match="reference"):
        PairwiseRanker(b)([GenerationItem("x")])


def test_parse_json_object_strictness():
    check = {"score": lambda v: isinstance(v, int)}
    assert parse_json_object('```json\n{"score": 3}\n```', check) == {"score": 3}
    for bad, why in [('分数：{"score": 3}', "not JSON"), ("[1]", "not a JSON object"), ('{"s": 1}', "lacks field"), ('{"score": "3"}', "invalid value")]:
        with pytest.raises(JudgeParseError, match=why):
            parse_json_object(bad, check)
