"""Reference-based metrics for rhetoric generation (CERD RG, ``papers/000_*``
§4.2, Table 7): BLEU-2/4, ROUGE-L, perplexity, BERTScore.

Units and segmentation, stated once:

- BLEU-n: corpus BLEU from sacrebleu with ``tokenize="zh"`` (each CJK
  character is a token, other text split as in sacrebleu's 13a), n-gram order
  ``max_ngram_order=n``, uniform weights, brevity penalty; in percent (0–100).
- ROUGE-L: rouge-score's LCS F-measure over *characters* (a character
  tokenizer: every non-space character is a token), averaged over sentence
  pairs; in percent.
- Perplexity: exp of the mean token negative log-likelihood (natural log)
  under a local causal LM (a path; nothing is downloaded), over all tokens of
  all texts (each text scored after the tokenizer's BOS token when it has one).
- BERTScore: bert-score's P/R/F1 with a local encoder path and an explicit
  layer; in percent. No baseline rescaling (that needs downloaded files).

Empty candidate lists give an empty result dict; a candidate list not aligned
with the references raises ValueError.
"""
from __future__ import annotations

import math
from typing import Dict, List, Optional, Sequence

from ..llm.hauser import require_local_model


def _check(candidates: Sequence[str], references: Sequence[str]) -> None:
    if len(candidates) != len(references):
        raise ValueError(f"{len(candidates)} candidates but {len(references)} references")


def bleu(candidates: Sequence[str], references: Sequence[str], max_order: int) -> float:
    """Corpus BLEU-``max_order`` in percent (sacrebleu, ``tokenize="zh"``).
    Raises ValueError on misaligned inputs or max_order < 1."""
    from sacrebleu.metrics import BLEU

    _check(candidates, references)
    if max_order < 1:
        raise ValueError(f"max_order must be ≥ 1, got {max_order}")
    metric = BLEU(tokenize="zh", max_ngram_order=max_order, effective_order=False)
    return float(metric.corpus_score(list(candidates), [list(references)]).score)


class CharTokenizer:
    """rouge-score tokenizer: one token per non-space character."""

    def tokenize(self, text: str) -> List[str]:
        return [ch for ch in text if not ch.isspace()]


def rouge_l(candidates: Sequence[str], references: Sequence[str]) -> float:
    """Mean character-level ROUGE-L F-measure in percent (rouge-score)."""
    from rouge_score import rouge_scorer

    _check(candidates, references)
    if not candidates:
        return 0.0
    scorer = rouge_scorer.RougeScorer(["rougeL"], tokenizer=CharTokenizer())
    scores = [scorer.score(ref, cand)["rougeL"].fmeasure for cand, ref in zip(candidates, references)]
    return 100.0 * sum(scores) / len(scores)


def perplexity(texts: Sequence[str], model_path: str, *, max_length: int = 512, device: str = "cpu") -> float:
    """exp(mean NLL per predicted token) of ``texts`` under the causal LM at
    ``model_path`` (local only). Texts are cut to ``max_length`` tokens.
    Raises ValueError when no text has a token to predict;
    FileNotFoundError when the path is not a folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    require_local_model(model_path)
    tok = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(model_path, local_files_only=True).to(device).eval()
    bos = tok.bos_token_id if tok.bos_token_id is not None else getattr(tok, "cls_token_id", None)
    nll, count = 0.0, 0
    for text in texts:
        ids = tok(text, add_special_tokens=False)["input_ids"][: max_length - 1]
        if bos is not None:
            ids = [bos] + ids
        if len(ids) < 2:
            continue
        input_ids = torch.tensor([ids], device=device)
        with torch.no_grad():
            logits = model(input_ids).logits[0, :-1].float()
        nll += float(torch.nn.functional.cross_entropy(logits, input_ids[0, 1:], reduction="sum"))
        count += len(ids) - 1
    if count == 0:
        raise ValueError("no text has a token to score")
    return math.exp(nll / count)


def bertscore(
    candidates: Sequence[str],
    references: Sequence[str],
    model_path: str,
    *,
    num_layers: Optional[int] = None,
    batch_size: int = 16,
    device: str = "cpu",
) -> Dict[str, float]:
    """Mean BERTScore P/R/F1 in percent with the local encoder ``model_path``
    (bert-score package). ``num_layers``: the hidden layer to use, default
    the model's last. Returns ``{"P", "R", "F1"}``."""
    import bert_score
    from transformers import AutoConfig

    _check(candidates, references)
    require_local_model(model_path)
    if num_layers is None:
        num_layers = AutoConfig.from_pretrained(model_path, local_files_only=True).num_hidden_layers
    p, r, f = bert_score.score(
        list(candidates), list(references), model_type=model_path, num_layers=num_layers,
        batch_size=batch_size, device=device, lang=None, rescale_with_baseline=False, verbose=False,
    )
    return {"P": 100.0 * float(p.mean()), "R": 100.0 * float(r.mean()), "F1": 100.0 * float(f.mean())}


def reference_metrics(
    candidates: Sequence[str],
    references: Sequence[str],
    *,
    lm_path: Optional[str] = None,
    encoder_path: Optional[str] = None,
) -> Dict[str, float]:
    """BLEU-2, BLEU-4, ROUGE-L and, when the model paths are given,
    perplexity (of the candidates) and BERTScore. {} for no candidates."""
    _check(candidates, references)
    if not candidates:
        return {}
    out = {
        "bleu2": bleu(candidates, references, 2),
        "bleu4": bleu(candidates, references, 4),
        "rougeL": rouge_l(candidates, references),
    }
    if lm_path:
        out["perplexity"] = perplexity(candidates, lm_path)
    if encoder_path:
        out.update({f"bertscore_{k}": v for k, v in bertscore(candidates, references, encoder_path).items()})
    return out
