"""evaluate-generation's KenLM perplexity, jiagu sentiment consistency,
rhetoric success rate and "not available" logical consistency.

KenLM runs on a tiny ARPA 3-gram model written here; jiagu is the real
classifier; the success rate uses the shipped ``pipelines/zh_rhetoric`` on a
simile of the simile corpus Test split (read at test time) and a literal
sentence. Tests that need kenlm or jiagu skip, saying so, without them
(``pip install -e '.[generation]'``)."""
from __future__ import annotations

import itertools
import json
import math
from pathlib import Path

import pytest

from spacy_rhetoric.errors import CorpusFormatError
from spacy_rhetoric.research.generation import NOT_AVAILABLE, evaluate_generation, read_generation_jsonl
from spacy_rhetoric.llm.rhetoric_success import check_record, object_matches, success_summary

ROOT = Path(__file__).resolve().parents[1]
PIPELINE = ROOT / "pipelines" / "zh_rhetoric"
NEGATIVE = "他的心像冰一样冷，让人害怕"
POSITIVE = "她的笑容像阳光一样温暖，让人快乐"

# log10 probabilities and backoffs; every n-gram of 月亮 像 小船 is listed
ARPA = """\\data\\
ngram 1=9
ngram 2=4
ngram 3=1

\\1-grams:
-1.5\t<unk>\t0
-99\t<s>\t-0.5
-1.0\t</s>\t0
-0.8\t月亮\t-0.3
-1.2\t月\t0
-1.2\t亮\t0
-0.7\t像\t-0.2
-1.1\t小船\t-0.1
-1.3\t船\t0

\\2-grams:
-0.2\t<s> 月亮\t0
-0.3\t月亮 </s>\t0
-0.4\t月亮 像\t-0.1
-0.5\t像 小船\t0

\\3-grams:
-0.05\t月亮 像 小船

\\end\\
"""


@pytest.fixture(scope="module")
def tiny_lm(tmp_path_factory):
    kenlm = pytest.importorskip("kenlm", reason="kenlm not installed: pip install -e '.[generation]'")
    path = tmp_path_factory.mktemp("kenlm") / "tiny.arpa"
    path.write_text(ARPA, encoding="utf8")
    return kenlm.Model(str(path))


@pytest.fixture(scope="module")
def jiagu_sentiment():
    pytest.importorskip("jiagu", reason="jiagu not installed: pip install -e '.[generation]'")
    from spacy_rhetoric.llm.hauser import JiaguSentiment

    return JiaguSentiment()


@pytest.fixture(scope="module")
def rhetoric_nlp():
    from spacy_rhetoric.llm.rhetoric_success import load_rhetoric_model

    return load_rhetoric_model(str(PIPELINE))


def write_jsonl(path: Path, records) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records), encoding="utf8")
    return path


# -- KenLM ------------------------------------------------------------------------


def test_kenlm_perplexity_by_hand(tiny_lm):
    from spacy_rhetoric.llm.ngram_lm import score_text

    # <s> 月亮 </s>: log10 P = -0.2 (月亮|<s>) - 0.3 (</s>|月亮), 2 tokens
    counts = score_text(tiny_lm, "月亮")
    assert counts.segmented == [["月亮"]]
    assert counts.summary()["perplexity"] == pytest.approx(10 ** (0.5 / 2), rel=1e-5)
    # the trigram 月亮 像 小船 is used: -0.2 - 0.4 - 0.05, then </s>|像 小船 backs
    # off twice: b(像 小船) = 0, b(小船) = -0.1, P(</s>) = -1.0
    counts = score_text(tiny_lm, "月亮像小船")
    assert counts.segmented == [["月亮", "像", "小船"]]
    assert counts.log10_prob == pytest.approx(-0.2 - 0.4 - 0.05 - 0.1 - 1.0, abs=1e-5)
    assert counts.tokens == 4 and counts.words == 3 and counts.oov == 0


def test_lattice_segmentation_is_the_most_probable(tiny_lm):
    from spacy_rhetoric.llm.ngram_lm import segment_clause

    def splits(text):
        for cuts in itertools.product([False, True], repeat=len(text) - 1):
            words, start = [], 0
            for i, cut in enumerate(cuts, start=1):
                if cut:
                    words.append(text[start:i])
                    start = i
            words.append(text[start:])
            if all(len(w) == 1 or w in tiny_lm for w in words):
                yield words

    for text in ("月亮像小船", "小船像月亮", "月亮船", "亮月亮"):
        best = max(splits(text), key=lambda ws: tiny_lm.score(" ".join(ws), bos=True, eos=True))
        assert segment_clause(tiny_lm, text) == best, text


def test_kenlm_clauses_and_oov(tiny_lm):
    from spacy_rhetoric.llm.ngram_lm import clauses, kenlm_perplexity

    assert clauses("月亮，像 小船！ABC") == ["月亮", "像", "小船", "ABC"]
    corpus, per_text = kenlm_perplexity(["月亮ABC", "", "，。"], tiny_lm)
    assert per_text[0].segmented == [["月亮", "ABC"]] and per_text[0].oov == 1
    assert per_text[1].tokens == per_text[2].tokens == 0
    assert corpus["words"] == 2 and corpus["oov_rate"] == 0.5
    # OOV excluded: only 月亮|<s> and </s>|ABC remain
    oov_log10 = per_text[0].oov_log10_prob
    assert oov_log10 == pytest.approx(-0.3 - 1.5)  # b(月亮) + P(<unk>)
    assert corpus["perplexity_excl_oov"] == pytest.approx(10 ** ((0.2 + 1.0) / 2), rel=1e-5)
    assert corpus["perplexity"] > corpus["perplexity_excl_oov"]


def test_missing_kenlm_file_says_how_to_get_it(tmp_path):
    from spacy_rhetoric.llm.ngram_lm import load_kenlm

    with pytest.raises(FileNotFoundError, match="kenlm-model"):
        load_kenlm(tmp_path / "none.lm")


# -- HAUSER sentiment consistency with jiagu -------------------------------------------------


def test_jiagu_polarity(jiagu_sentiment):
    (neg, pos), (neg2, pos2) = jiagu_sentiment.probs([NEGATIVE, POSITIVE])
    assert neg > 0.5 > pos and pos2 > 0.5 > neg2
    assert neg + pos == pytest.approx(1.0) and neg2 + pos2 == pytest.approx(1.0)


def test_sentiment_consistency_follows_the_literal(jiagu_sentiment):
    from spacy_rhetoric.llm.hauser import sentiment_consistency

    literal = "他的心很冷，让人害怕。"
    keep, flip = sentiment_consistency(jiagu_sentiment, [literal] * 2, [NEGATIVE, POSITIVE])
    p_literal = jiagu_sentiment.probs([literal])[0][0]
    assert p_literal > 0.5  # a = negative
    assert keep == pytest.approx(jiagu_sentiment.probs([NEGATIVE])[0][0] - p_literal)
    assert keep > flip and -1.0 <= flip <= keep <= 1.0


# -- rhetoric success rate --------------------------------------------------------------------


def _record(devices, components):
    sentence = {"coarse": {d: 0.9 for d in devices} or {"literal": 0.9}, "form": {}, "content": {}}
    return {"sentences": [sentence], "components": [{"label": lab, "text": t} for lab, t in components]}


def test_success_rules_without_a_pipeline():
    assert object_matches("我的妈妈", "妈妈") and object_matches("日记", "小日记") and not object_matches("", "妈妈")
    simile = _record(["metaphor"], [("tenor", "我的妈妈"), ("vehicle", "灯塔")])
    assert check_record(simile, "metaphor", "妈妈")["success"] is True
    wrong = check_record(simile, "metaphor", "爸爸")
    assert (wrong["success"], wrong["device"], wrong["object"]) == (False, True, False)
    # the object must be the device's object component: a vehicle does not count
    assert check_record(simile, "metaphor", "灯塔")["object"] is False
    person = check_record(_record(["personification"], [("personification_object", "花儿")]), "personification", "花儿")
    assert person["success"] is True
    para = check_record(_record(["parallelism"], []), "parallelism", "我们")
    assert para["object"] is None and para["success"] is True
    assert check_record(_record([], []), "metaphor", "")["object"] is None
    checks = [{"success": True, "device": True, "object": True}, {"success": False, "device": True, "object": False},
              {"success": True, "device": True, "object": None}]
    summary = success_summary(checks, ["metaphor", "metaphor", "parallelism"])
    assert summary["rhetoric_success_rate"] == pytest.approx(2 / 3)
    assert summary["rhetoric_object_rate"] == 0.5 and summary["rhetoric_device_rate"] == 1.0
    assert summary["rhetoric_success_rate.metaphor"] == 0.5 and summary["rhetoric_candidates.metaphor"] == 2
    assert summary["rhetoric_object_rate.parallelism"] is None


def _first_test_simile_with_tenor(simile_dir: Path, tenor: str):
    from spacy_rhetoric.corpora.simile import read_simile, tag_spans

    path = next(simile_dir.glob("*-Test.tsv"))
    for sent in read_simile(path):
        tenors = ["".join(sent.words[a:b]) for a, b, label in tag_spans(path, sent) if label == "tenor"]
        if sent.label == "simile" and tenors == [tenor]:
            return "".join(sent.words)
    pytest.fail(f"no Test simile with the tenor {tenor}")


def test_success_with_the_shipped_pipeline(simile_dir, rhetoric_nlp):
    from spacy_rhetoric.analysis.records import single_torch_thread
    from spacy_rhetoric.llm.rhetoric_success import check_docs

    simile = _first_test_simile_with_tenor(simile_dir, "妈妈")
    literal = "我今天早上七点去学校上课。"
    with single_torch_thread():
        docs = list(rhetoric_nlp.pipe([simile, literal]))
    hit, miss = check_docs(docs, "metaphor", "妈妈")
    assert hit["success"] and hit["device"] and hit["object"], hit
    assert "妈妈" in hit["objects"] and "metaphor" in hit["devices"]
    assert miss["success"] is False and miss["device"] is False and miss["devices"] == []


# -- the whole command ------------------------------------------------------------------------


def test_cli_all_new_metrics(tmp_path, tiny_lm, jiagu_sentiment, simile_dir):
    from typer.testing import CliRunner

    from spacy_rhetoric.cli import app

    simile = _first_test_simile_with_tenor(simile_dir, "妈妈")
    arpa = tmp_path / "tiny.arpa"
    arpa.write_text(ARPA, encoding="utf8")
    data = write_jsonl(tmp_path / "gen.jsonl", [
        {"condition": {"rhetoric": "metaphor", "object": "妈妈"}, "reference": simile,
         "candidates": [simile, "我今天早上七点去学校上课。"]},
        {"condition": {"rhetoric": "metaphor", "object": "心"}, "reference": "", "literal": "他的心很冷，让人害怕。",
         "candidates": [NEGATIVE, POSITIVE]},
        # every answer failed to parse: no candidate, and a failed request
        {"condition": {"rhetoric": "metaphor", "object": "月亮"}, "reference": "", "candidates": [],
         "failures": [{"raw": "", "error": "empty answer"}]},
    ])
    out = tmp_path / "out.json"
    res = CliRunner().invoke(app, ["research", "evaluate-generation", str(data), str(out), "--kenlm", str(arpa),
                                   "--sentiment", "jiagu", "--rhetoric-model", str(PIPELINE)])
    assert res.exit_code == 0, res.output
    result = json.loads(out.read_text(encoding="utf8"))
    summary, recs = result["summary"], result["records"]
    assert summary["candidates"] == 4 and summary["kenlm_words"] > 0 and 0 < summary["kenlm_oov_rate"] <= 1
    assert math.isfinite(summary["kenlm_perplexity"])
    # HAUSER c_s: against the reference (cut after its vehicle) for record 1, the literal for record 2
    assert [r.get("sentiment_counterpart") for r in recs] == ["reference", "literal", None]
    keep, flip = (c["sentiment_consistency"] for c in recs[1]["candidates"])
    assert keep > flip
    assert summary["hauser_logical_consistency"] == NOT_AVAILABLE
    assert any(n.startswith("HAUSER logical consistency") and NOT_AVAILABLE in n for n in result["notices"])
    assert recs[0]["candidates"][0]["rhetoric_success"]["success"] is True
    assert recs[0]["candidates"][1]["rhetoric_success"]["success"] is False
    assert summary["rhetoric_candidates.metaphor"] == 4
    assert summary["rhetoric_success_rate"] == pytest.approx(
        sum(c["rhetoric_success"]["success"] for r in recs for c in r["candidates"]) / 4)
    assert summary["records"] == 3 and summary["records_without_candidate"] == 1
    requests_ok = sum(any(c["rhetoric_success"]["success"] for c in r["candidates"]) for r in recs)
    assert summary["rhetoric_success_rate_of_requests"] == pytest.approx(requests_ok / 3) and requests_ok >= 1
    report = out.with_suffix(".md").read_text(encoding="utf8")
    for name in ("perplexity, KenLM n-gram", "KenLM OOV rate", "HAUSER sentiment consistency",
                 "HAUSER logical consistency c_l | `hauser_logical_consistency` | not available", "rhetoric success rate"):
        assert name in report


def test_logical_consistency_not_available_without_nli(tmp_path, jiagu_sentiment):
    data = write_jsonl(tmp_path / "gen.jsonl", [
        {"condition": {"rhetoric": "metaphor", "object": "心"}, "literal": "他的心很冷。", "candidates": [NEGATIVE]}])
    result = evaluate_generation(data, tmp_path / "out.json", sentiment="jiagu", progress=False)
    assert result["summary"]["hauser_logical_consistency"] == NOT_AVAILABLE
    assert "logical" not in result["records"][0]["candidates"][0]  # never approximated per candidate
    assert sum("logical consistency" in n for n in result["notices"]) == 1


def test_malformed_line_names_file_and_line(tmp_path):
    good = {"condition": {"rhetoric": "metaphor", "object": "月亮"}, "candidates": ["月亮像小船。"]}
    bad = write_jsonl(tmp_path / "bad.jsonl", [good, {**good, "literal": ["不是字符串"]}])
    with pytest.raises(CorpusFormatError, match=r"bad\.jsonl, line 2: 'literal' must be a string"):
        read_generation_jsonl(bad)
    (tmp_path / "broken.jsonl").write_text(json.dumps(good) + "\n\n{broken\n", encoding="utf8")
    with pytest.raises(CorpusFormatError, match=r"broken\.jsonl, line 3: invalid JSON"):
        read_generation_jsonl(tmp_path / "broken.jsonl")
