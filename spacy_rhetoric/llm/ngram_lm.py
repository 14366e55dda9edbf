"""Perplexity of Chinese text under a KenLM word n-gram model, with the
segmentation the model itself prefers.

The model we use is ``zh_CN.lm`` of the Debian package
``libime-data-language-model`` (libime 1.0.16, LGPL-2.1+; fetched by the
``kenlm-model`` command of ``project.yml``): a KenLM binary (quantised array
trie) 3-gram model over 164,887 words. Its vocabulary is its own unigram
list: Han-character strings only (7,972 single characters, words up to 13
characters) plus ``<unk>``; no punctuation, digits or Latin letters, and no
sentence markers ``<s>`` / ``</s>`` (libime opens it with
``sentence_marker_missing = SILENT``). We query the vocabulary through
``word in model``, so no separate dictionary file is needed.

Segmentation (:func:`segment_clause`): libime turns pinyin into text by
searching a lattice of dictionary words for the path its LM scores highest;
we segment each clause the same way. Every split of the clause into
vocabulary words is a path (a single unit is always allowed, so a character
the model does not know becomes one OOV word); the path with the highest LM
log-probability is found exactly by Viterbi search with recombination on
KenLM's state, which holds only the context the model can still use. Why not
the project's pkuseg tokenizer or forward maximum matching: on the first 300
sentences of the simile Test split, pkuseg (LTP conventions) leaves 5.8 % of
its words outside the vocabulary (e.g. 平静下来) against 0.13 % here, and
forward maximum matching gives a perplexity of 5,472 against 997 here and
separates real sentences from the same characters shuffled less well
(perplexity ratio 2.7 against 10.5). The most probable path is a lower bound
of the text's probability summed over all segmentations, so these
perplexities are comparable with each other, not with another segmenter's.

Units: the text is cut into clauses at every non-word character (Python's
``\\W`` and ``_``: punctuation, symbols, spaces), which the model has never
seen; each clause is scored from the null context (or from ``<s>`` up to
``</s>`` when the model has sentence markers). Inside a clause, each Han
character is a unit and each run of other word characters (Latin letters,
digits) is one unit.

Formulas (KenLM ``query``'s summary): over the N scored tokens of all texts,
PPL = 10^(−(1/N) Σ log10 P(w_i | w_{i−2}, w_{i−1})) with the model's backoff
probabilities, OOV words scored as ``<unk>`` ("including OOVs"); the same
without the OOV tokens ("excluding OOVs"); OOV rate = OOV words / words.
Tokens are words (plus ``</s>`` per clause when the model has markers).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Dict, List, Sequence, Tuple, Union

_NON_WORD = re.compile(r"[\W_]+")
_HAN = "\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
_UNIT = re.compile(f"[{_HAN}]|[^{_HAN}]+")


def load_kenlm(path: Union[str, Path]):
    """A ``kenlm.Model`` of the ARPA or KenLM binary file ``path``.
    Raises FileNotFoundError when there is no such file, ImportError (with
    the install hint) when the ``kenlm`` package is missing."""
    if not Path(path).is_file():
        raise FileNotFoundError(f"KenLM model not found: {path} (run `python -m spacy project run kenlm-model`)")
    try:
        import kenlm
    except ImportError as err:
        raise ImportError("--kenlm needs the kenlm package: pip install -e '.[generation]'") from err
    return kenlm.Model(str(path))


def clauses(text: str) -> List[str]:
    """The clauses of ``text``: maximal runs of word characters."""
    return [c for c in _NON_WORD.split(text) if c]


def has_markers(model) -> bool:
    """Whether the model's vocabulary has the sentence markers."""
    return "<s>" in model and "</s>" in model


def _start_state(model, markers: bool):
    import kenlm

    state = kenlm.State()
    (model.BeginSentenceWrite if markers else model.NullContextWrite)(state)
    return state


def segment_clause(model, clause: str) -> List[str]:
    """The most probable split of ``clause`` (no spaces) into words of the
    model's vocabulary (see the module docstring). [] for ''."""
    import kenlm

    units = _UNIT.findall(clause)
    markers = has_markers(model)
    # best[j]: KenLM state after units[:j] -> (log10 prob, i, previous state, word)
    best: List[Dict] = [dict() for _ in range(len(units) + 1)]
    best[0][_start_state(model, markers)] = (0.0, None, None, None)
    for i in range(len(units)):
        words = [("".join(units[i:j]), j) for j in range(i + 1, len(units) + 1)]
        words = [(w, j) for w, j in words if j == i + 1 or w in model]
        for state, (score, *_) in best[i].items():
            for word, j in words:
                out = kenlm.State()
                total = score + model.BaseScore(state, word, out)
                if out not in best[j] or total > best[j][out][0]:
                    best[j][out] = (total, i, state, word)
    return _backtrack(model, best, markers)


def _backtrack(model, best: List[Dict], markers: bool) -> List[str]:
    import kenlm

    if len(best) == 1:
        return []

    def final(state) -> float:
        return best[-1][state][0] + (model.BaseScore(state, "</s>", kenlm.State()) if markers else 0.0)

    state, j, words = max(best[-1], key=final), len(best) - 1, []
    while j > 0:
        _, i, prev, word = best[j][state]
        words.append(word)
        state, j = prev, i
    return words[::-1]


@dataclass
class NgramCounts:
    """Sums over scored text: ``log10_prob`` (all tokens), ``oov_log10_prob``
    (OOV tokens only), ``tokens``, ``words``, ``oov`` (OOV words)."""

    log10_prob: float = 0.0
    oov_log10_prob: float = 0.0
    tokens: int = 0
    words: int = 0
    oov: int = 0
    segmented: List[List[str]] = field(default_factory=list)

    def add(self, other: "NgramCounts") -> None:
        self.log10_prob += other.log10_prob
        self.oov_log10_prob += other.oov_log10_prob
        self.tokens += other.tokens
        self.words += other.words
        self.oov += other.oov

    def summary(self) -> Dict[str, float]:
        """``perplexity`` (including OOVs), ``perplexity_excl_oov``,
        ``oov_rate`` (fraction of words), ``words``; perplexities are None
        when nothing was scored."""
        kept = self.tokens - self.oov
        return {
            "perplexity": 10.0 ** (-self.log10_prob / self.tokens) if self.tokens else None,
            "perplexity_excl_oov": 10.0 ** (-(self.log10_prob - self.oov_log10_prob) / kept) if kept else None,
            "oov_rate": self.oov / self.words if self.words else None,
            "words": self.words,
        }


def score_text(model, text: str) -> NgramCounts:
    """Counts of one text: each clause segmented by :func:`segment_clause`
    and scored by KenLM's ``full_scores``."""
    counts = NgramCounts()
    markers = has_markers(model)
    for clause in clauses(text):
        words = segment_clause(model, clause)
        counts.segmented.append(words)
        for log10_prob, _, oov in model.full_scores(" ".join(words), bos=markers, eos=markers):
            counts.log10_prob += log10_prob
            counts.tokens += 1
            if oov:
                counts.oov += 1
                counts.oov_log10_prob += log10_prob
        counts.words += len(words)
    return counts


def kenlm_perplexity(texts: Sequence[str], model) -> Tuple[Dict[str, float], List[NgramCounts]]:
    """Corpus summary (see :meth:`NgramCounts.summary`; tokens pooled over
    all texts) and the counts of each text, aligned with ``texts``."""
    per_text = [score_text(model, t) for t in texts]
    total = NgramCounts()
    for counts in per_text:
        total.add(counts)
    return total.summary(), per_text
