"""Reference metrics: sacrebleu/rouge-score on Chinese, perplexity and BERTScore
with tiny random local models built by the test."""
import math

import pytest
import torch
from transformers import AutoModelForCausalLM, AutoTokenizer

from spacy_rhetoric.research.reference import bertscore, bleu, perplexity, reference_metrics, rouge_l
from tiny_models import tiny_causal_lm, tiny_encoder

REFS = ["月亮像一只小船挂在天上。", "她的笑容像春天的阳光。"]


def test_bleu_character_level():
    assert bleu(REFS, REFS, 4) == pytest.approx(100.0)
    # same characters, one changed: 11 of 12 unigrams match
    cand = ["月亮像一只小船挂在天边。", "她的笑容像春天的阳光。"]
    b2, b4 = bleu(cand, REFS, 2), bleu(cand, REFS, 4)
    assert 0 < b4 < b2 < 100
    assert bleu(["完全不同的句子"], ["月亮"], 2) == 0.0
    with pytest.raises(ValueError, match="references"):
        bleu(["a"], [], 2)


def test_rouge_l_characters():
    # LCS of 月亮像小船 / 月亮像一只小船 is 5 chars: P = 5/5, R = 5/7
    p, r = 1.0, 5 / 7
    assert rouge_l(["月亮像小船"], ["月亮像一只小船"]) == pytest.approx(100 * 2 * p * r / (p + r))
    assert rouge_l(["月 亮"], ["月亮"]) == pytest.approx(100.0)


def test_perplexity_matches_manual(tmp_path):
    path = str(tiny_causal_lm(tmp_path / "lm"))
    texts = ["月亮像小船", "星星"]
    ppl = perplexity(texts, path)
    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForCausalLM.from_pretrained(path).eval()
    nll, n = 0.0, 0
    for t in texts:
        ids = torch.tensor([[tok.cls_token_id] + tok(t, add_special_tokens=False)["input_ids"]])
        with torch.no_grad():
            out = model(ids, labels=ids)
        nll += float(out.loss) * (ids.shape[1] - 1)
        n += ids.shape[1] - 1
    assert ppl == pytest.approx(math.exp(nll / n), rel=1e-5)
    assert 1.0 < ppl < 10 * tok.vocab_size
    with pytest.raises(FileNotFoundError, match="missing"):
        perplexity(texts, str(tmp_path / "missing"))


def test_bertscore_local_encoder(tmp_path):
    path = str(tiny_encoder(tmp_path / "enc"))
    same = bertscore(REFS, REFS, path)
    assert same["F1"] == pytest.approx(100.0, abs=1e-3)
    other = bertscore(["今天天气很好。", "我们去上学。"], REFS, path)
    assert other["F1"] < same["F1"]
    all_ = reference_metrics(REFS, REFS, encoder_path=path)
    assert set(all_) == {"bleu2", "bleu4", "rougeL", "bertscore_P", "bertscore_R", "bertscore_F1"}
    assert reference_metrics([], []) == {}
