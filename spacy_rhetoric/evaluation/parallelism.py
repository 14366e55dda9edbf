"""Evaluation report, error analysis and benchmarks for the parallelism linker.

- :func:`error_categories`: the error categories of Bothwell et al. 2023,
  Appendix G (Table 13): false positive / false negative parallelisms, and
  false positive / false negative / false mixture at branch and word level.
- :func:`evaluate_linker`: EPM / MPBM / MBAWO / MWO P/R/F (§5, Appendix B)
  plus the error counts on a DocBin with gold words (e.g. the PSE-I test
  split), written as JSON and Markdown.
- :func:`benchmark_linker` (words/second on one CPU core, peak RSS) and
  :func:`benchmark_scorer` (our scorer vs ``pyrallelism``).
"""
from __future__ import annotations

import json
import random
import resource
import time
from collections import Counter
from pathlib import Path
from typing import Dict, Iterable, List, Sequence, Tuple

import numpy
from scipy.optimize import linear_sum_assignment

from ..scorers.parallelism import METRICS, Groups, score_groups
from ..spangroups import parallelism_offsets

#: Appendix G categories, in the column order of the paper's Table 13.
CATEGORIES: Tuple[str, ...] = (
    "parallelism_fp", "parallelism_fn",
    "branch_fp", "branch_fn", "branch_fm",
    "word_fp", "word_fn", "word_fm",
)

#: Published best PSE-I test F1 (Bothwell et al. 2023, Table 3; frozen Chinese BERT-wwm).
PUBLISHED_F1 = {"epm": 0.434, "mpbm": 0.549, "mbawo": 0.685, "mwo": 0.720}


def _overlap_matrix(a: Sequence[Tuple[int, int]], b: Sequence[Tuple[int, int]]) -> numpy.ndarray:
    """Word overlap of every pair of branches, Ints2d (len(a), len(b))."""
    if not a or not b:
        return numpy.zeros((len(a), len(b)), dtype="int64")
    x, y = numpy.array(a), numpy.array(b)
    return numpy.clip(numpy.minimum(x[:, None, 1], y[None, :, 1]) - numpy.maximum(x[:, None, 0], y[None, :, 0]), 0, None)


def _words(group: Sequence[Tuple[int, int]]) -> set:
    return {i for s, e in group for i in range(s, e)}


def _kind(extra: bool, missing: bool, level: str) -> str:
    return f"{level}_fm" if extra and missing else f"{level}_fp" if extra else f"{level}_fn"


def _pair_category(hyp: Sequence[Tuple[int, int]], ref: Sequence[Tuple[int, int]]) -> str:
    """Category of a matched (overlapping) hypothesis/reference pair, or ``""``
    when they are identical: branch level if a branch of either side overlaps
    no branch of the other, else word level (§G: categorised once per pair,
    at the coarsest level that differs)."""
    if sorted(hyp) == sorted(ref):
        return ""
    ov = _overlap_matrix(hyp, ref)
    rows, cols = linear_sum_assignment(ov, maximize=True)
    matched = [(r, c) for r, c in zip(rows, cols) if ov[r, c] > 0]
    extra = len(hyp) > len(matched)
    missing = len(ref) > len(matched)
    if extra or missing:
        return _kind(extra, missing, "branch")
    extra_w = missing_w = False
    for r, c in matched:
        h, g = set(range(*hyp[r])), set(range(*ref[c]))
        extra_w |= bool(h - g)
        missing_w |= bool(g - h)
    return _kind(extra_w, missing_w, "word")


def error_categories(hypotheses: Groups, references: Groups) -> Counter:
    """Appendix G error counts of one document.

    Hypothesis and reference parallelisms are paired by a maximum word-overlap
    matching (Kuhn-Munkres); a pair sharing no word counts as unmatched. An
    unmatched hypothesis is a false-positive parallelism, an unmatched
    reference a false-negative one. A matched, non-identical pair gets one
    category: ``branch_*`` when some branch on one side overlaps no branch on
    the other (fp: extra hypothesis branches, fn: missing reference branches,
    fm: both), otherwise ``word_*`` from the word differences of the paired
    branches. Returns a Counter over :data:`CATEGORIES` (plus ``"correct"``
    for identical pairs).
    """
    counts: Counter = Counter({c: 0 for c in CATEGORIES})
    counts["correct"] = 0
    hyp = [sorted(map(tuple, h)) for h in hypotheses]
    ref = [sorted(map(tuple, r)) for r in references]
    scores = numpy.array([[len(_words(h) & _words(r)) for r in ref] for h in hyp], dtype="int64").reshape(len(hyp), len(ref))
    pairs = []
    if scores.size:
        rows, cols = linear_sum_assignment(scores, maximize=True)
        pairs = [(r, c) for r, c in zip(rows, cols) if scores[r, c] > 0]
    counts["parallelism_fp"] += len(hyp) - len(pairs)
    counts["parallelism_fn"] += len(ref) - len(pairs)
    for r, c in pairs:
        counts[_pair_category(hyp[r], ref[c]) or "correct"] += 1
    return counts


def _gold_docs(nlp, data_path: Path) -> Tuple[list, list]:
    """Reference docs from a DocBin and fresh docs with the same (gold) words."""
    from spacy.tokens import Doc, DocBin

    refs = [d for d in DocBin().from_disk(data_path).get_docs(nlp.vocab) if len(d)]
    inputs = [Doc(nlp.vocab, words=[t.text for t in d], spaces=[bool(t.whitespace_) for t in d]) for d in refs]
    return refs, inputs


def evaluate_linker(model_path: Path, data_path: Path, output: Path, batch_size: int = 64, threads: int = 1) -> Dict:
    """Score a trained pipeline with a ``parallelism_linker`` on gold words.

    Writes ``output`` (JSON: the four metrics' P/R/F and counts, the Appendix G
    error counts, corpus counts, words/second) and ``output`` with suffix
    ``.md`` (a Markdown report beside the published numbers). Returns the
    JSON dict. ``threads``: torch threads for prediction (the BiLSTM is
    much slower with threads competing for shared cores). Raises
    OSError/ValueError from spaCy for a missing model or corpus.
    """
    import spacy
    import torch

    torch.set_num_threads(threads)
    nlp = spacy.load(model_path)
    refs, inputs = _gold_docs(nlp, data_path)
    start = time.perf_counter()
    predicted = list(nlp.pipe(inputs, batch_size=batch_size))
    seconds = time.perf_counter() - start
    pairs = [(parallelism_offsets(p), parallelism_offsets(r)) for p, r in zip(predicted, refs)]
    scores = score_groups(pairs)
    errors: Counter = Counter()
    for hyp, ref in pairs:
        errors.update(error_categories(hyp, ref))
    essays = {r.user_data.get("essay_id") for r in refs}
    result = {
        "model": str(model_path),
        "data": str(data_path),
        "linker": nlp.get_pipe("parallelism_linker").cfg.get("tagset") + "-" + nlp.get_pipe("parallelism_linker").cfg.get("link"),
        "documents": len(refs),
        "essays": len(essays - {None}),
        "words": sum(len(r) for r in refs),
        "reference_parallelisms": sum(len(r) for _, r in pairs),
        "predicted_parallelisms": sum(len(h) for h, _ in pairs),
        "metrics": scores,
        "errors": {k: int(errors[k]) for k in (*CATEGORIES, "correct")},
        "seconds": seconds,
        "words_per_second": sum(len(r) for r in refs) / seconds if seconds else None,
    }
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(json.dumps(result, indent=2), encoding="utf8")
    output.with_suffix(".md").write_text(report_markdown(result), encoding="utf8")
    return result


def report_markdown(result: Dict) -> str:
    """Markdown report of an :func:`evaluate_linker` result."""
    lines = [
        f"# Parallelism linker on {result['data']}",
        "",
        f"{result['documents']} paragraphs of {result['essays']} essays, {result['words']} words; "
        f"{result['reference_parallelisms']} reference and {result['predicted_parallelisms']} predicted parallelisms; "
        f"scheme {result['linker']}.",
        "",
        "| metric | P | R | F1 | published best F1 |",
        "|---|---|---|---|---|",
    ]
    for m in METRICS:
        v = result["metrics"][m]
        lines.append(f"| {m.upper()} | {v['p']:.3f} | {v['r']:.3f} | {v['f']:.3f} | {PUBLISHED_F1[m]:.3f} |")
    lines += ["", "Error categories (Bothwell et al. 2023, Appendix G):", "",
              "| " + " | ".join((*CATEGORIES, "correct")) + " |", "|" + "---|" * (len(CATEGORIES) + 1),
              "| " + " | ".join(str(result["errors"][k]) for k in (*CATEGORIES, "correct")) + " |", ""]
    return "\n".join(lines)


def _peak_rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def benchmark_linker(model_path: Path, data_path: Path, repeats: int = 3, batch_size: int = 64) -> Dict:
    """Words/second of a pipeline with a ``parallelism_linker`` on one CPU
    core (torch and BLAS limited to one thread), over the gold-word docs of
    ``data_path``; best of ``repeats`` passes, plus peak resident memory
    (MB) of this process after loading and after predicting."""
    import spacy
    import torch

    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # only limits BLAS; torch is limited below
        from contextlib import nullcontext as threadpool_limits

    torch.set_num_threads(1)
    with threadpool_limits(1):
        nlp = spacy.load(model_path)
        refs, _ = _gold_docs(nlp, data_path)
        rss_loaded = _peak_rss_mb()
        times = []
        for _ in range(repeats):
            _, inputs = _gold_docs(nlp, data_path)
            start = time.perf_counter()
            for _doc in nlp.pipe(inputs, batch_size=batch_size):
                pass
            times.append(time.perf_counter() - start)
    words = sum(len(r) for r in refs)
    return {
        "documents": len(refs),
        "essays": len({r.user_data.get("essay_id") for r in refs} - {None}),
        "words": words,
        "seconds_best": min(times),
        "words_per_second": words / min(times),
        "peak_rss_mb_after_load": rss_loaded,
        "peak_rss_mb": _peak_rss_mb(),
        "model_size_mb": sum(f.stat().st_size for f in Path(model_path).rglob("*") if f.is_file()) / 2**20,
    }


def _perturbed(groups: Groups, n_words: int, rng: random.Random) -> List[List[Tuple[int, int]]]:
    out = []
    for group in groups:
        new = []
        for s, e in group:
            s = min(max(0, s + rng.randint(-1, 1)), e - 1)
            new.append((s, min(n_words, max(s + 1, e + rng.randint(-1, 1)))))
        out.append(new)
    return out


def reference_scores(pairs: Iterable[Tuple[Groups, Groups]], metrics: Sequence[str] = METRICS) -> Dict[str, Dict[str, float]]:
    """The same scores computed by ``pyrallelism`` itself (the parity tests
    and the scorer's speed benchmark); same return layout as
    :func:`~spacy_rhetoric.scorers.parallelism.score_groups`. pyrallelism is
    not a runtime dependency: it comes with the ``test`` extra. Raises
    ImportError without it."""
    from pyrallelism import evaluate_bipartite_parallelism_metric
    from pyrallelism.primitives.evaluation_metric import get_metric
    from pyrallelism.structures.confusion_matrix import ReducedConfusionMatrix

    pairs = list(pairs)
    result = {}
    for metric in metrics:
        total = ReducedConfusionMatrix()
        for hyp, ref in pairs:
            hyp_dir = {i: set(map(tuple, p)) for i, p in enumerate(hyp)}
            ref_dir = {i: set(map(tuple, p)) for i, p in enumerate(ref)}
            matrix, _ = evaluate_bipartite_parallelism_metric(hyp_dir, ref_dir, get_metric(metric))
            total += matrix
        p, r, f = total.get_statistics()
        result[metric] = {"p": p, "r": r, "f": f, "score": int(total.score),
                          "hyp_size": int(total.hypothesis_count), "ref_size": int(total.reference_count)}
    return result


def benchmark_scorer(data_path: Path, model_path: Path = None, repeats: int = 5, seed: int = 0) -> Dict:
    """Time the four metrics with this package's scorer and with
    ``pyrallelism`` on the same (hypotheses, references) pairs: gold vs
    randomly perturbed gold and, when ``model_path`` is given, gold vs the
    model's predictions. Returns seconds (best of ``repeats``) and the ratio
    pyrallelism / ours per input set; raises AssertionError if the scores
    differ by more than 1e-9."""
    import spacy

    nlp = spacy.load(model_path) if model_path else spacy.blank("zh")
    refs, inputs = _gold_docs(nlp, data_path)
    gold = [parallelism_offsets(r) for r in refs]
    rng = random.Random(seed)
    sets = {"perturbed_gold": [(_perturbed(g, len(r), rng), g) for g, r in zip(gold, refs)]}
    if model_path:
        sets["model_predictions"] = [(parallelism_offsets(p), g) for p, g in zip(nlp.pipe(inputs), gold)]
    result = {}
    for name, pairs in sets.items():
        ours_t, ref_t = [], []
        for _ in range(repeats):
            t = time.perf_counter()
            ours = score_groups(pairs)
            ours_t.append(time.perf_counter() - t)
            t = time.perf_counter()
            ref = reference_scores(pairs)
            ref_t.append(time.perf_counter() - t)
        for m in METRICS:
            for k in ("p", "r", "f"):
                assert abs(ours[m][k] - float(ref[m][k])) <= 1e-9, (name, m, k)
        result[name] = {
            "documents": len(pairs),
            "ours_seconds": min(ours_t),
            "pyrallelism_seconds": min(ref_t),
            "speedup": min(ref_t) / min(ours_t),
            "f1": {m: ours[m]["f"] for m in METRICS},
        }
    return result
