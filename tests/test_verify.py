"""Verified suggestions: the verification rule on analysis records, ranking
and the "none verified" path with a tiny random model and a stub analyser,
the shipped pipeline as analyser, held-out requests from the annotated test
essays, and the real Gemma 3 270M asset when it has been built."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
import spacy
import torch

from spacy_rhetoric.components.rhetoric_generator import RhetoricGenerator
from spacy_rhetoric.evaluation.suggestions import held_out_requests, percentiles, request_rows, summarize
from spacy_rhetoric.llm.base import Completion
from spacy_rhetoric.llm.completion import BRANCH_BREAKS, Lead, builtin_shots, make_lead, render_rg_completion
from spacy_rhetoric.llm.records import essay_rg_records, write_jsonl
from spacy_rhetoric.llm.sampling import Sampling
from spacy_rhetoric.llm.tasks import CompletionRGTask, RGRequest, make_rhetoric_generation_task
from spacy_rhetoric.llm.transformers_backend import TransformersBackend
from spacy_rhetoric.llm.verify import (SCORED_SPANS, Verifier, check_weights, in_context, pipeline_analyser, rank_score,
                                       repeated_clause, verify, verify_record)
from tiny_llm import build_tiny_chat_model

ROOT = Path(__file__).resolve().parents[1]
GEMMA = ROOT / "assets" / "generators" / "gemma-3-270m"
ANNOTATED_TEST = ROOT / "annotations" / "pse-i-cerd" / "test.jsonl"
ANNOTATED_DEV = ROOT / "annotations" / "pse-i-cerd" / "dev.jsonl"
PIPELINE = ROOT / "pipelines" / "zh_rhetoric"


def record(text, sentences=(), components=(), parallelisms=()):
    """An analysis record with just the fields verification reads."""
    return {"text": text, "sentences": list(sentences), "components": list(components),
            "parallelisms": [{"id": f"p{i}", "kind": "intra", "branches": b} for i, b in enumerate(parallelisms)]}


def span(text, whole, label=None, score=None, **extra):
    start = whole.index(text)
    out = {"start": start, "end": start + len(text), "text": text, **extra}
    if label:
        out.update(label=label, score=score)
    return out


# --- the rule ------------------------------------------------------------------------------


def test_context_is_analysed_but_only_the_candidate_counts():
    text, start = in_context(["天上的云像棉花糖。"], "月光静静地照着小路。")
    assert text == "天上的云像棉花糖。月光静静地照着小路。" and start == len("天上的云像棉花糖。")
    # a context that does not end a sentence: the candidate starts on its own line
    assert in_context(["我们在唱歌"], "歌声飞出了窗外。") == ("我们在唱歌\n歌声飞出了窗外。", 6)
    assert in_context([], "候选。") == ("候选。", 0)
    # the metaphor and its tenor are in the context only: not verified
    rec = record(text, [span("天上的云像棉花糖。", text, coarse={"metaphor": 0.9}),
                        span("月光静静地照着小路。", text, coarse={})],
                 [span("云", text, "tenor", 0.8)])
    verdict = verify_record(rec, start, "metaphor", "云")
    assert verdict.verified is False and verdict.device is False and verdict.evidence == []
    assert verdict.reason == "no metaphor (比喻) found"


def test_metaphor_needs_the_object_as_tenor_and_evidence_is_in_candidate_offsets():
    text, start = in_context(["放学了。"], "月光像一层薄纱，铺在小路上。")
    sent = span("月光像一层薄纱，铺在小路上。", text, coarse={"metaphor": 0.9, "personification": 0.6})
    comps = [span("月光", text, "tenor", 0.8), span("像", text, "comparator", 0.99), span("薄纱", text, "vehicle", 0.7)]
    verdict = verify_record(record(text, [sent], comps), start, "metaphor", "月光")
    assert verdict.verified and verdict.device and verdict.object and verdict.reason == ""
    assert verdict.analyser_score == pytest.approx(0.9 * 0.8)
    candidate = text[start:]
    for piece in verdict.evidence:
        assert candidate[piece["start"]:piece["end"]] == piece["text"]
    assert [p["label"] for p in verdict.evidence] == ["metaphor", "tenor", "comparator", "vehicle"]
    # containment: 我的月光 matches 月光; another tenor does not
    assert verify_record(record(text, [sent], comps), start, "metaphor", "今晚的月光").verified
    wrong = verify_record(record(text, [sent], comps), start, "metaphor", "小路")
    assert wrong.verified is False and wrong.device and wrong.object is False
    assert wrong.reason == "小路 is not the tenor found (月光)"
    # personification is found too, but without its object component
    pers = verify_record(record(text, [sent], comps), start, "personification", "月光")
    assert pers.device and pers.object is False and "none found" in pers.reason


def test_parallelism_needs_three_branches_inside_the_candidate():
    cand = "我爱春天的花，我爱夏天的雨，我爱秋天的叶。"
    text, start = in_context(["我喜欢四季。"], cand)
    branches = [span(b, text) for b in ("我爱春天的花", "我爱夏天的雨", "我爱秋天的叶")]
    sents = [span(cand, text, coarse={"parallelism": 0.7})]
    verdict = verify_record(record(text, sents, parallelisms=[branches]), start, "parallelism", "我爱")
    assert verdict.verified and verdict.object is None and verdict.analyser_score == pytest.approx(0.7)
    assert [p["text"] for p in verdict.evidence if p["label"] == "branch"] == ["我爱春天的花", "我爱夏天的雨", "我爱秋天的叶"]
    two = verify_record(record(text, sents, parallelisms=[branches[:2]]), start, "parallelism", "我爱")
    assert two.verified is False and two.reason == "2 branches linked, 3 needed"
    assert verify_record(record(text, sents, parallelisms=[branches[:2]]), start, "parallelism", "我爱",
                         min_branches=2).verified



def test_identical_branches_are_repetition_not_parallelism():
    # a LoRA draw the linker groups as three branches: the same clause three times
    cand = "是理想；是理想；是理想。"
    text, start = in_context(["我们都有梦想。"], cand)
    sents = [span(cand, text, coarse={"parallelism": 0.9})]
    at = [start + i for i in range(len(cand)) if cand.startswith("是理想", i)]
    same = [{"text": "是理想", "start": a, "end": a + 3} for a in at]
    verdict = verify_record(record(text, sents, parallelisms=[same]), start, "parallelism", "是")
    assert verdict.verified is False and verdict.analyser_score == 0
    assert verdict.reason == "3 branches linked, 1 of them different, 3 needed"
    # branches that differ only in punctuation or quotes are the same branch
    cand = "有“情”之人；有情之人；有情之人，真好。"
    text, start = in_context([], cand)
    quoted = [{"text": t, "start": start + cand.index(t), "end": start + cand.index(t) + len(t)} for t in ("有“情”之人", "有情之人")]
    quoted.append({"text": "有情之人", "start": start + 12, "end": start + 16})
    assert verify_record(record(text, [span(cand, text, coarse={"parallelism": 0.9})], parallelisms=[quoted]),
                         start, "parallelism", "有").verified is False

def test_a_parallelism_may_repeat_its_marker_clause():
    """A marker that is a clause of its own (a dev essay's human sentence)
    begins every linked branch and may repeat; the same clause repeated in
    a metaphor, or in a parallelism whose branches do not all begin with it,
    is a loop."""
    cand = "也许很多时候，我们都忘了欣赏自己；也许很多时候，我们都太爱想象；也许很多时候，我们都会不知所措。"
    pieces = [p + "；" if i < 2 else p for i, p in enumerate(cand.rstrip("。").split("；"))]

    def linker(texts):  # an analyser that links the three branches of the candidate
        out = []
        for text in texts:
            start = text.index(cand)
            branches = [{"text": p.rstrip("；"), "start": start + cand.index(p), "end": start + cand.index(p) + len(p.rstrip("；"))}
                        for p in pieces]
            sent = {"start": start, "end": len(text), "text": cand, "coarse": {"parallelism": 0.9}}
            out.append(record(text, [sent], parallelisms=[branches]))
        return out

    (verdict,) = verify(linker, ["我们常常忙碌。"], "parallelism", "也许", [cand])
    assert verdict.verified is True and verdict.reason == ""
    assert repeated_clause([], cand) == "repeats the clause 也许很多时候"  # without the linker's branches

    def unlinked(texts):
        return [record(t, [{"start": 0, "end": len(t), "text": t, "coarse": {"metaphor": 0.9}}]) for t in texts]

    (verdict,) = verify(unlinked, [], "metaphor", "也许", [cand])
    assert verdict.verified is False and "repeats the clause 也许很多时候" in verdict.reason


def test_a_looping_or_copied_candidate_is_not_verified():
    def everything(texts):  # an analyser that finds a metaphor on 芥子 in every candidate sentence
        out = []
        for text in texts:
            start = text.rindex("芥子虽小")  # each candidate opens with it
            tenor = {"label": "tenor", "score": 0.9, "start": start, "end": start + 2, "text": "芥子"}
            sent = {"start": start, "end": len(text), "text": text[start:], "coarse": {"metaphor": 0.9}}
            out.append(record(text, [sent], [tenor]))
        return out

    looping = "芥子虽小，但它是生命的根基，是人类生命的根基，是人类生命的根基。"
    copied = "芥子虽小，却能容下须弥山。"
    fine = "芥子虽小，却像一粒种子，藏着整座山林。"
    verdicts = verify(everything, ["上文：芥子纳须弥。", "芥子虽小，却能容下须弥山。"], "metaphor", "芥子", [looping, copied, fine])
    assert [v.verified for v in verdicts] == [False, False, True]
    assert verdicts[0].reason == "repeats the clause 是人类生命的根基" and verdicts[0].analyser_score == 0
    assert verdicts[1].reason == "copies the clause 却能容下须弥山 from the context"
    assert verdicts[0].evidence  # what the analyser found is still shown
    # branches share their marker, not whole clauses; clauses under 5 characters (芥子虽小, 我爱) may recur
    assert repeated_clause([], "我爱春天的花，我爱夏天的雨，我爱秋天的叶。") == ""
    assert repeated_clause([], "春天来了，春天来了，真好。") == ""
    assert repeated_clause([], "春天来了啊，春天来了啊。") == "repeats the clause 春天来了啊"
    # quotation marks inside a clause do not hide a loop (a LoRA draw for a parallelism request)
    looped = "因为有“因为有”的道理，因为有“因为有”的道理，因为有“因为有”的道理……"
    assert repeated_clause([], looped) == "repeats the clause 因为有因为有的道理"
    assert repeated_clause(["他说：“我爱春天的花”。"], "我爱春天的花，我爱夏天的雨。") == "copies the clause 我爱春天的花 from the context"
    # a loop too short for a clause (a LoRA draw for a personification request)
    assert repeated_clause([], "时间悄悄地悄地地地地地地地地地") == "repeats 地 9 times in a row"
    assert repeated_clause([], "未知悄悄地悄地悄地悄地悄地悄地") == "repeats 悄地 6 times in a row"
    assert repeated_clause([], "哈哈哈哈，层层叠叠的山，悄悄地走了。") == ""


def test_weights_are_checked_and_combined():
    assert check_weights({"fluency": 0.5}) == {"analyser": 1.0, "fluency": 0.5, "reranker": 0.1}
    with pytest.raises(ValueError, match="unknown"):
        check_weights({"beauty": 1})
    with pytest.raises(ValueError, match=">= 0"):
        check_weights({"analyser": -1})
    verdict = verify_record(record("x", []), 0, "metaphor", "x")
    assert rank_score(verdict, -4.0, -1.0, {"analyser": 1, "fluency": 0.5, "reranker": 2}) == pytest.approx(-4.0)
    assert rank_score(verdict, None, None, {"analyser": 1}) == 0.0


# --- the generator with a tiny random model and a stub analyser -----------------------------


@pytest.fixture(scope="module")
def tiny_model(tmp_path_factory):
    torch.set_num_threads(1)
    shots = builtin_shots()
    texts = [render_rg_completion(d, "月光", ["上文。"], [s for s in shots if s.rhetoric == d]) for d in
             ("metaphor", "personification", "hyperbole", "parallelism")]
    return build_tiny_chat_model(tmp_path_factory.mktemp("tiny") / "base", texts, max_chars=300, hidden_size=32,
                                 layers=2, heads=2)


def stub_score(cand):
    return 0.3 + (sum(map(ord, cand)) % 50) / 100


def parity_stub(calls):
    """Verifies a candidate when its first character has an even code
    point, with a metaphor score from its characters (``stub_score``); the
    requested object is its tenor."""

    def analyse(texts):
        calls.append(list(texts))
        out = []
        for text in texts:
            cand_start = len("上文。") if text.startswith("上文。") else 0
            cand = text[cand_start:]
            coarse = {"metaphor": stub_score(cand)} if cand and ord(cand[0]) % 2 == 0 else {}
            comps = [{"label": "tenor", "start": cand_start, "end": cand_start + 2, "text": "月光", "score": 1.0}] if coarse else []
            out.append(record(text, [{"start": cand_start, "end": len(text), "text": cand, "coarse": coarse}], comps))
        return out

    return analyse


def tiny_generator(path, n=8):
    backend = TransformersBackend(str(path), seed=0, top_p=1.0)
    return RhetoricGenerator(None, backend, task=make_rhetoric_generation_task(prompt_style="completion"),
                             sampling=Sampling(n_candidates=n, temperature=1.5, max_new_tokens=12),
                             verifier=Verifier(analyser=None))


def test_verified_first_ranked_by_score_then_unverified(tiny_model):
    gen = tiny_generator(tiny_model)
    calls = []
    gen.set_analyser(parity_stub(calls))
    result = gen.suggest(["上文。"], "metaphor", "月光", 8)
    ok = [c for c in result.candidates if c.ok]
    assert result.n_drawn == 8 and len(result.drawn) == 8 and result.verification == "on"
    assert len(calls) == 1 and len(calls[0]) == len(ok)  # one analyser call for all candidates
    verified = [c for c in ok if c.verified]
    unverified = [c for c in ok if c.verified is False]
    assert verified and unverified, [c.text for c in ok]  # the seeded draw has both kinds
    assert ok == verified + unverified
    assert [c.score for c in verified] == sorted((c.score for c in verified), reverse=True)
    assert all(c.evidence and c.evidence[0]["label"] == "metaphor" for c in verified)
    assert all(c.reason == "no metaphor (比喻) found" for c in unverified)
    assert result.n_verified == len(verified)
    assert result.message().startswith(f"{len(verified)} of 8 candidates drawn verified")
    # weights of one request: the analyser alone orders the verified ones by their metaphor score
    alone = gen.suggest(["上文。"], "metaphor", "月光", 8, weights={"fluency": 0, "reranker": 0})
    top = [c for c in alone.candidates if c.verified]
    assert [stub_score(c.text) for c in top] == sorted((stub_score(c.text) for c in top), reverse=True)


def test_none_verified_is_said_plainly(tiny_model):
    gen = tiny_generator(tiny_model, n=3)
    gen.set_analyser(lambda texts: [record(t, [{"start": 0, "end": len(t), "text": t, "coarse": {}}]) for t in texts])
    result = gen.suggest("上文。", "personification", "月光")
    assert result.n_verified == 0 and all(c.verified is False for c in result.candidates if c.ok)
    assert result.message().startswith("none of the 3 candidates drawn was verified")
    # verification off: candidates come back unchecked, and it says so
    gen.cfg["verify"] = False
    off = gen.suggest("上文。", "personification", "月光")
    assert all(c.verified is None for c in off.candidates) and "not verified" in off.message()


def test_time_budget_stops_drawing_between_rounds(tiny_model):
    gen = tiny_generator(tiny_model, n=6)
    gen.cfg["round_size"] = 2
    gen.set_analyser(lambda texts: [record(t, []) for t in texts])
    # a budget already spent after the first round: one round of 2, flagged
    spent = gen.suggest("上文。", "metaphor", "月光", time_budget=1e-9)
    assert spent.n_drawn == 2 and spent.budget_exhausted and "time budget" in spent.message()
    full = gen.suggest("上文。", "metaphor", "月光", time_budget=0)
    assert full.n_drawn == 6 and not full.budget_exhausted
    with pytest.raises(ValueError):
        gen.suggest("上文。", "metaphor", "月光", time_budget=-1)


def test_lead_begins_every_answer_and_turns_over_rounds(tiny_model):
    gen = tiny_generator(tiny_model, n=6)
    gen.cfg.update(round_size=4, lead="device")
    gen.set_analyser(lambda texts: [record(t, []) for t in texts])
    drawn = gen.suggest("上文。", "metaphor", "月光").drawn
    # candidate j begins with the tenor and the j-th comparator, also across rounds (4 + 2)
    leads = ["月光像", "月光仿佛", "月光是", "月光如同", "月光像", "月光仿佛"]
    assert len(drawn) == 6 and [d[: len(lead)] for d, lead in zip(drawn, leads)] == leads
    # a personification's candidates begin with its object and a person's word in turn
    drawn = gen.suggest("上文。", "personification", "小溪").drawn
    leads = ["小溪悄悄地", "小溪向我们", "小溪微笑着", "小溪温柔地", "小溪悄悄地", "小溪向我们"]
    assert len(drawn) == 6 and [d[: len(lead)] for d, lead in zip(drawn, leads)] == leads
    assert make_lead("hyperbole", "月光", "device") == Lead() == make_lead("metaphor", "月光", "none")
    assert make_lead("personification", "月光", "device").texts == ("月光悄悄地", "月光向我们", "月光微笑着", "月光温柔地")
    assert make_lead("personification", "月光", "none") == Lead()
    assert make_lead("parallelism", " 我爱 ", "device") == Lead(marker="我爱", branches=3, separator="；")
    with pytest.raises(ValueError, match="lead"):
        make_lead("metaphor", "月光", "object")
    with pytest.raises(ValueError, match="completion"):
        make_rhetoric_generation_task(prompt_style="instruction", lead="device")


class ClauseBackend:
    """A stand-in LM that writes one clause per call: 花开，/ 雨落；/ 叶黄。
    then a line break, so branch-led answers can be checked exactly."""

    def __init__(self):
        self.prompts, self.decoding = [], []

    def complete(self, prompts, *, n=1, stop="\n", **decoding):
        assert stop == "\n" or "。" in stop  # a sentence break also ends a branch before the last
        self.prompts.append(list(prompts))
        self.decoding.append(decoding)
        clauses = {0: "花开，", 1: "雨落；", 2: "叶黄。\n"}
        return [[Completion(clauses[p.rsplit("句子：", 1)[1].count("我爱") - 1] if stop != "\n" else "叶黄。\n",
                            logprob=-1.0, n_tokens=2)
                 for _ in range(n)] for p in prompts]


def test_a_parallelism_lead_begins_three_branches_with_the_marker():
    backend = ClauseBackend()
    task = CompletionRGTask(lead="device")
    prompts = task.generate_prompts([RGRequest([], "parallelism", "我爱")])
    answers = task.call(backend, prompts, n=2)
    # the lead sets the branches apart with ；, whatever break the model wrote
    assert [c.text for c in answers[0]] == ["我爱花开；我爱雨落；我爱叶黄。\n"] * 2
    assert answers[0][0].logprob == -3.0 and answers[0][0].n_tokens == 6  # the forced markers are not scored
    # one call per branch: both samples together, each continuing its own text
    assert [len(p) for p in backend.prompts] == [1, 2, 2] and backend.prompts[2][0].endswith("我爱花开；我爱雨落；我爱")
    # no branch may begin with a break, so none is the marker alone
    assert all(d["not_first"] == BRANCH_BREAKS and "，" in d["not_first"] for d in backend.decoding)
    # the first two branches may not end the line (so the answer reaches its third); the last may
    assert [d.get("never") for d in backend.decoding] == [("\n",), ("\n",), None]
    assert [p.generation for p in task.parse_responses(answers)[0]] == ["我爱花开；我爱雨落；我爱叶黄。"] * 2


def test_a_named_object_may_pass_by_the_object_threshold():
    text, start = in_context(["春天到了。"], "春风微笑着走过田野。")
    sent = span("春风微笑着走过田野。", text, coarse={"personification": 0.7})
    # no personification_object component over its own threshold
    bare = verify_record(record(text, [sent]), start, "personification", "春风")
    assert bare.verified is False and bare.reason == "春风 is not the personification_object found (none found)"
    rec = record(text, [sent])
    rec[SCORED_SPANS] = [span("春风", text, "personification_object", 0.3), span("田野", text, "personification_object", 0.6),
                         {"label": "personification_object", "start": 0, "end": 2, "text": "春天", "score": 0.9}]
    verdict = verify_record(rec, start, "personification", "春风")
    assert verdict.verified and verdict.object and verdict.analyser_score == pytest.approx(0.7 * 0.3)
    assert verdict.evidence[-1] == {"label": "personification_object", "text": "春风", "start": 0, "end": 2, "score": 0.3}
    # a scored span of the context, or another object, does not count
    assert verify_record(rec, start, "personification", "春天").verified is False
    assert verify_record(rec, start, "personification", "阳光").object is False
    # nor does it stand in for the device
    rec["sentences"] = [span("春风微笑着走过田野。", text, coarse={})]
    assert verify_record(rec, start, "personification", "春风").device is False


# --- the shipped pipeline as analyser --------------------------------------------------------


@pytest.fixture(scope="module")
def nlp():
    if not PIPELINE.is_dir():
        pytest.skip("pipelines/zh_rhetoric not found")
    return spacy.load(PIPELINE)


def test_pipeline_analyser_verifies_a_simile_in_its_context(nlp):
    analyse = pipeline_analyser(nlp)
    verdicts = verify(analyse, ["放学了，我一个人走在回家的路上。"], "metaphor", "月光",
                      ["月光像一层薄纱，轻轻地铺在小路上。", "我回到家，打开了灯。"])
    assert verdicts[0].verified, verdicts[0]
    assert {"metaphor", "tenor"} <= {p["label"] for p in verdicts[0].evidence}
    assert verdicts[1].verified is False and verdicts[1].device is False


def test_pipeline_analyser_records_are_the_users_records_plus_scored_object_spans(nlp):
    """The analyser runs the component head once: its records equal what
    nlp(text) gives a user, and the spans it scores for named objects are
    those of the pipeline's object thresholds, in the text's offsets."""
    from spacy_rhetoric.analysis.records import doc_to_record

    rows = [json.loads(line) for line in ANNOTATED_DEV.open(encoding="utf8")][:14]
    text = "".join(("\n" if i and r["para"] != rows[i - 1]["para"] else "") + r["text"] for i, r in enumerate(rows))
    texts = [text, "春风微笑着走过田野，小草向我们点头。"]
    records = pipeline_analyser(nlp)(texts)
    comp = nlp.get_pipe("rhetoric_components")
    limits = comp.cfg["object_thresholds"]
    assert limits, "the shipped pipeline verifies with an object threshold"
    for t, rec in zip(texts, records):
        spans = rec.pop(SCORED_SPANS)
        assert rec == doc_to_record(nlp(t), rec["id"])
        for s in spans:
            assert t[s["start"]:s["end"]] == s["text"] and s["score"] >= limits[s["label"]]
    # with a threshold of 0 every suggested span is scored: a superset
    local = spacy.load(PIPELINE)
    local.get_pipe("rhetoric_components").cfg["object_thresholds"] = {"personification_object": 0.0}
    everything = pipeline_analyser(local)(texts)
    for rec, full in zip(records, everything):
        kept = {(s["start"], s["end"]) for s in full[SCORED_SPANS]}
        assert {(s["start"], s["end"]) for s in rec.get(SCORED_SPANS, [])} <= kept


def test_object_thresholds_are_checked():
    blank = spacy.blank("zh", config={"nlp": {"tokenizer": {"@tokenizers": "spacy.zh.ChineseTokenizer", "segmenter": "char"}}})
    with pytest.raises(ValueError, match="personification_object"):
        blank.add_pipe("rhetoric_components", config={"object_thresholds": {"personification_object": 1.5}})
    with pytest.raises(ValueError, match="not_a_label"):
        blank.add_pipe("rhetoric_components", config={"object_thresholds": {"not_a_label": 0.2}})
    # docs without a suggested span: the head scores a (0, 0) array
    import numpy
    from thinc.types import Ragged

    comp = blank.add_pipe("rhetoric_components")
    nothing = (Ragged(numpy.zeros((0, 2), dtype="i"), numpy.zeros(2, dtype="i")), numpy.zeros((0, 0), dtype="f"))
    assert comp.scored_spans([blank.make_doc("一"), blank.make_doc("二")], nothing, {"personification_object": 0.0}) == [[], []]


def test_generator_in_the_analysing_pipeline_verifies_with_the_components_before_it(nlp, tiny_model):
    local = spacy.load(PIPELINE)
    gen = local.add_pipe("rhetoric_generator", config={
        "model": {"@llm_backends": "spacy_rhetoric.Transformers.v1", "model_path": str(tiny_model), "seed": 0},
        "task": {"prompt_style": "completion"}, "sampling": {"n_candidates": 2, "max_new_tokens": 8}})
    result = gen.suggest("上文。", "metaphor", "月光")
    assert result.verification == "on" and all(c.verified is not None for c in result.candidates if c.ok)


# --- held-out requests and the evaluation rows ----------------------------------------------


def test_requests_from_the_annotated_test_essays_topped_up_from_dev(tmp_path):
    from collections import Counter

    stats = Counter()
    test = essay_rg_records(ANNOTATED_TEST, k=3, stats=stats)
    by_device = Counter(r.rhetoric for r in test)
    assert set(by_device) == {"metaphor", "personification", "hyperbole", "parallelism"}
    for rec in test:
        assert rec.object and rec.object in rec.target or rec.rhetoric == "parallelism"
        assert len(rec.previous_sentences) <= 3 and rec.meta["essay"]
    write_jsonl(test, tmp_path / "test.jsonl")
    write_jsonl(essay_rg_records(ANNOTATED_DEV, k=3), tmp_path / "dev.jsonl")
    picked = held_out_requests([tmp_path / "test.jsonl", tmp_path / "dev.jsonl"], per_device=20, seed=0)
    counts = Counter(r.rhetoric for r in picked)
    assert counts == {"metaphor": 20, "personification": 20, "parallelism": 20, "hyperbole": 20}
    hyper = [r for r in picked if r.rhetoric == "hyperbole"]
    assert sum(r.meta["file"] == "test.jsonl" for r in hyper) == by_device["hyperbole"] < 20  # all of test first
    assert picked == held_out_requests([tmp_path / "test.jsonl", tmp_path / "dev.jsonl"], per_device=20, seed=0)


def test_request_rows_count_success_at_each_n(tiny_model):
    gen = tiny_generator(tiny_model, n=4)
    gen.set_analyser(parity_stub([]))
    requests = [r for r in essay_rg_records(ANNOTATED_TEST, k=1) if r.rhetoric == "metaphor"][:3]
    rows = list(request_rows(gen, requests, [1, 4], batch=2, progress=False))
    assert [r["id"] for r in rows] == [0, 1, 2]
    for row in rows:
        verified = {c["text"] for c in row["candidates"] if c["verified"]}
        assert row["success"]["4"] == any(t in verified for t in row["drawn"][:4])
        assert row["success"]["1"] == (row["drawn"][0] in verified)
        assert row["success"]["4"] or not row["success"]["1"]
    summary = summarize(rows, [1, 4])
    assert summary["all"]["requests"] == 3 and summary["metaphor"]["success@4"] >= summary["metaphor"]["success@1"]
    assert percentiles([1.0, 2.0, 3.0, 4.0]) == {"p50": 2.5, "p95": 3.85, "mean": 2.5}


def test_reverify_judges_the_same_draws_again(nlp):
    """Re-verification keeps the draws and their order: success at N is
    about the first N drawn answers under the new analyser, and the returned
    answer is a verified one when there is one."""
    from spacy_rhetoric.evaluation.suggestions import reverify_rows

    drawn = ["我回到家，打开了灯。", "月光像一层薄纱，轻轻地铺在小路上。", "月光像一层薄纱，轻轻地铺在小路上。", ""]
    rows = [{"id": 7, "rhetoric": "metaphor", "object": "月光", "context": ["放学了，我一个人走在回家的路上。"],
             "human": "h", "meta": {}, "drawn": drawn},
            {"id": 8, "rhetoric": "metaphor", "object": "月光", "context": ["放学了，我一个人走在回家的路上。"],
             "human": drawn[1], "meta": {}, "drawn": drawn[:1]}]
    out, other = reverify_rows(rows, pipeline_analyser(nlp), [1, 2, 4], progress=False)
    # the human sentence is judged like a draw: the verifier's recall on real text
    assert out["human_verified"] is False and other["human_verified"] is True
    assert summarize([out, other], [1])["metaphor"]["human_verified"] == 0.5
    assert out["id"] == 7 and out["drawn"] == drawn
    assert out["success"] == {"1": False, "2": True, "4": True}
    assert out["returned"] == drawn[1] and out["returned_verified"] is True
    assert [c["text"] for c in out["candidates"]] == drawn[:2]
    assert summarize([out], [1, 2])["metaphor"]["success@2"] == 1.0
    # the samples table shows the returned answer (not the first drawn) with its evidence
    from spacy_rhetoric.evaluation.suggestions import samples_markdown

    table = samples_markdown([out, other], n=2).splitlines()
    assert table[2].startswith("| metaphor | 月光 | 月光像一层薄纱，轻轻地铺在小路上。 | yes | tenor 月光")
    assert table[3].startswith("| metaphor | 月光 | 我回到家，打开了灯。 | no | no metaphor")


# --- the real model -----------------------------------------------------------------------------


@pytest.mark.skipif(not (GEMMA / "model.safetensors").exists(),
                    reason="Gemma 3 270M asset not built (spacy project run generator-model)")
def test_real_gemma_suggestions_are_verified_by_the_shipped_pipeline(nlp):
    backend = TransformersBackend(str(GEMMA), seed=0, top_p=0.9, repetition_penalty=1.1)
    gen = RhetoricGenerator(None, backend, task=make_rhetoric_generation_task(prompt_style="completion"),
                            sampling=Sampling(n_candidates=4, temperature=0.8, max_new_tokens=48),
                            verifier=Verifier(analyser=None))
    analyse = pipeline_analyser(nlp)
    gen.set_analyser(analyse)
    context = ["放学后，我一个人走在回家的路上。"]
    result = gen.suggest(context, "metaphor", "月光", 4)
    assert result.n_drawn == 4 and result.verification == "on"
    ok = [c for c in result.candidates if c.ok]
    assert ok and ok == sorted(ok, key=lambda c: (c.verified is True, c.score), reverse=True)
    # each verdict is the shipped pipeline's own: re-analysing gives the same one
    again = verify(analyse, context, "metaphor", "月光", [c.text for c in ok])
    assert [v.verified for v in again] == [c.verified for c in ok]
    print(json.dumps(result.to_dict(), ensure_ascii=False)[:2000])


# --- the blind read -----------------------------------------------------------------------------


def fake_rows():
    rows = []
    for i in range(12):
        device = ("metaphor", "parallelism")[i % 2]
        rows.append({"id": i, "rhetoric": device, "object": f"对象{i}", "context": ["上文。"], "human": f"人写的句子{i}。",
                     "returned": f"生成的句子{i}。" if i != 4 else None, "returned_verified": i % 3 == 0})
    return rows


def test_blind_sheet_hides_the_groups_and_scores_them(tmp_path):
    from spacy_rhetoric.corpora.jsonio import iter_jsonl_objects
    from spacy_rhetoric.errors import CorpusFormatError
    from spacy_rhetoric.research.blind_read import QUESTIONS, agreement, make_sheet, read_answers, score, write_jsonl

    sheet, key = make_sheet(fake_rows(), per_device=3, human_per_device=2, seed=0)
    assert (sheet, key) == make_sheet(fake_rows(), per_device=3, human_per_device=2, seed=0)
    assert len(sheet) == len(key) == 10 and [s["item"] for s in sheet] == [k["item"] for k in key] == list(range(1, 11))
    for item in sheet:  # what the reader sees: no system, no verdict
        assert set(item) == {"item", "context", "rhetoric", "object", "sentence", "note", *QUESTIONS}
    humans = [s["sentence"] for s, k in zip(sheet, key) if k["group"] == "human"]
    assert len(humans) == 4 and all(h.startswith("人写的句子") for h in humans)
    assert all(s["sentence"] != "None" and s["sentence"] for s in sheet)  # a request with no answer is not drawn
    # answers: every item yes for device, fluent only for the human ones
    answered = [{**s, "device": True, "fluent": k["group"] == "human", "fits": True} for s, k in zip(sheet, key)]
    write_jsonl(answered, tmp_path / "sheet.jsonl")
    result = score(read_answers(tmp_path / "sheet.jsonl"), key)
    assert result["metaphor/human"] == {"items": 2, "device": 1.0, "fluent": 1.0, "fits": 1.0}
    assert result["metaphor/returned"]["items"] == 3 and result["metaphor/returned"]["fluent"] == 0.0
    # an unanswered item names the file and line; a missing item is an error
    write_jsonl(sheet[:1], tmp_path / "blank.jsonl")
    with pytest.raises(CorpusFormatError, match="blank.jsonl.*line 1|line 1.*blank.jsonl"):
        read_answers(tmp_path / "blank.jsonl")
    with pytest.raises(ValueError, match="not answered"):
        score(read_answers(tmp_path / "sheet.jsonl"), key + [{"item": 99, "group": "human", "rhetoric": "metaphor"}])
    assert len(list(iter_jsonl_objects(tmp_path / "sheet.jsonl"))) == 10
    # a second reader who differs on one fluency answer: agreement and kappa per question
    other = [{**a, "fluent": not a["fluent"]} if a["item"] == 1 else a for a in answered]
    write_jsonl(other, tmp_path / "second.jsonl")
    both = agreement(read_answers(tmp_path / "sheet.jsonl"), read_answers(tmp_path / "second.jsonl"))
    assert both["items"] == 10 and both["fluent"]["agreement"] == 0.9 and both["fits"]["agreement"] == 1.0
    assert 0 < both["fluent"]["kappa"] < 1 and both["device"]["kappa"] != both["device"]["kappa"]  # nan: all yes
