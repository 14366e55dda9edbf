"""EPM / MPBM / MBAWO / MWO: parity with pyrallelism (the reference implementation)."""
import random

import pytest
import spacy
from hypothesis import given, settings
from hypothesis import strategies as st
from spacy.tokens import Doc
from spacy.training import Example

from spacy_rhetoric.evaluation.parallelism import reference_scores
from spacy_rhetoric.scorers.parallelism import (
    METRICS,
    document_counts,
    prf_from_sizes,
    score_groups,
    score_parallelism,
)
from spacy_rhetoric.runtime.threads import torch_threads
from spacy_rhetoric.spangroups import parallelism_offsets, set_parallelisms

from pse_cache import first_essays, split_docs


@pytest.fixture(autouse=True, scope="module")
def _one_torch_thread():
    """The BiLSTM on one thread: on a shared 2-core machine more threads are ~30x slower."""
    with torch_threads(1):
        yield


def _assert_parity(pairs):
    ours, ref = score_groups(pairs), reference_scores(pairs)
    for metric in METRICS:
        for key in ("score", "hyp_size", "ref_size"):
            assert ours[metric][key] == ref[metric][key], (metric, key)
        for key in ("p", "r", "f"):
            assert abs(ours[metric][key] - float(ref[metric][key])) <= 1e-9, (metric, key)
    return ours


def _perturb(groups, n_words, rng):
    """Drop, shift, split and invent branches and parallelisms."""
    out = []
    for group in groups:
        if rng.random() < 0.15:
            continue
        new = []
        for start, end in group:
            if rng.random() < 0.1:
                continue
            if rng.random() < 0.3:
                start = min(max(0, start + rng.randint(-2, 2)), end - 1)
            if rng.random() < 0.3:
                end = min(n_words, max(start + 1, end + rng.randint(-2, 2)))
            new.append((start, end))
        if rng.random() < 0.1 and len(new) > 2:
            out.append(new[:1] + new[2:])
            new = new[1:2] + new[:1]
        out.append(new)
    if n_words > 12 and rng.random() < 0.3:
        a = rng.randrange(0, n_words - 10)
        out.append([(a, a + 3), (a + 4, a + 7), (a + 8, a + 10)])
    return out


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_parity_on_pse_test_split_with_perturbed_references(pse_dir, seed):
    rng = random.Random(seed)
    docs = split_docs(pse_dir, "test")
    assert len({d.user_data["essay_id"] for d in docs}) == 42
    pairs = [(_perturb(parallelism_offsets(d), len(d), rng), parallelism_offsets(d)) for d in docs]
    scores = _assert_parity(pairs)
    assert 0.0 < scores["epm"]["f"] < 1.0 and 0.0 < scores["mbawo"]["f"] < 1.0


def test_gold_against_itself_is_perfect(pse_dir):
    docs = split_docs(pse_dir, "test")
    pairs = [(parallelism_offsets(d), parallelism_offsets(d)) for d in docs]
    scores = _assert_parity(pairs)
    assert all(scores[m]["f"] == 1.0 for m in METRICS)
    assert scores["epm"]["ref_size"] == 81 and scores["mpbm"]["ref_size"] == 220


def test_parity_with_model_predictions(pse_dir):
    """A tiny linker trained for two steps predicts many (mostly wrong)
    parallelisms on the 42 test essays: a demanding parity case."""
    from test_parallelism_linker import TINY_MODEL

    spacy.util.fix_random_seed(0)
    nlp = spacy.blank("zh")
    nlp.add_pipe("parallelism_linker", config={"model": TINY_MODEL})
    train = [d for d in first_essays(pse_dir, "train", 20) if len(d) < 150][:60]
    examples = [Example(Doc(nlp.vocab, words=[t.text for t in d]), d) for d in train]
    optimizer = nlp.initialize(lambda: examples)
    for _ in range(2):
        nlp.update(examples, sgd=optimizer)
    docs = split_docs(pse_dir, "test")
    predicted = nlp.pipe(Doc(nlp.vocab, words=[t.text for t in d]) for d in docs)
    pairs = [(parallelism_offsets(p), parallelism_offsets(d)) for p, d in zip(predicted, docs)]
    assert sum(len(h) for h, _ in pairs) > 100
    _assert_parity(pairs)


@st.composite
def _doc_pairs(draw):
    def groups():
        return draw(st.lists(st.lists(st.tuples(st.integers(0, 25), st.integers(1, 6)).map(lambda t: (t[0], t[0] + t[1])),
                                      min_size=1, max_size=4), max_size=4))
    return [(groups(), groups()) for _ in range(draw(st.integers(1, 3)))]


@settings(max_examples=150, deadline=None)
@given(_doc_pairs())
def test_parity_on_random_inputs(pairs):
    """Arbitrary (even overlapping or single-branch) parallelisms."""
    _assert_parity(pairs)


def test_paper_example_and_edge_cases():
    ref = [[(0, 3), (5, 7), (9, 13)]]
    hyp = [[(0, 3), (5, 7), (9, 13)], [(20, 22), (23, 25)]]  # §5: one exact match, one spurious
    assert document_counts(hyp, ref, "epm") == (1, 2, 1)
    assert prf_from_sizes(1, 2, 1) == pytest.approx((0.5, 1.0, 2 / 3))
    assert document_counts([[(0, 3), (5, 7)]], ref, "mpbm") == (2, 2, 3)
    assert document_counts([[(0, 3), (20, 22)]], ref, "mpbm") == (0, 2, 3)  # one shared branch earns nothing
    assert document_counts([[(0, 2), (5, 6)]], ref, "mbawo") == (3, 3, 9)
    assert document_counts([[(0, 2), (20, 21)]], ref, "mbawo") == (0, 3, 9)
    assert document_counts([[(0, 2), (20, 21)]], ref, "mwo") == (2, 3, 9)
    assert document_counts([], [], "epm") == (0, 0, 0) and prf_from_sizes(0, 0, 0) == (0.0, 0.0, 0.0)
    with pytest.raises(ValueError, match="Unknown metric"):
        document_counts([], [], "bleu")


def test_spacy_scorer_and_alignment():
    nlp = spacy.blank("zh")
    words = ["我们", "爱", "和平", "，", "我们", "爱", "自由", "。"]
    ref = Doc(nlp.vocab, words=words)
    set_parallelisms(ref, [[(0, 3), (4, 7)]])
    pred = Doc(nlp.vocab, words=words)
    set_parallelisms(pred, [[(0, 3), (4, 7)]])
    scores = score_parallelism([Example(pred, ref)])
    assert {f"parallelism_{m}_{p}" for m in METRICS for p in "prf"} == set(scores)
    assert all(v == 1.0 for v in scores.values())
    # characters as predicted tokens: branches are aligned to the reference words
    chars = Doc(nlp.vocab, words=list("".join(words)))
    set_parallelisms(chars, [[(0, 5), (6, 11)]])
    assert score_parallelism([Example(chars, ref)])["parallelism_epm_f"] == 1.0


def test_appendix_g_error_categories():
    from spacy_rhetoric.evaluation.parallelism import CATEGORIES, error_categories

    ref = [[(0, 3), (4, 7), (8, 11)], [(20, 22), (23, 25)], [(40, 42), (43, 45)]]
    hyp = [
        [(0, 3), (4, 7)],  # one reference branch missing -> branch FN
        [(20, 22), (23, 26)],  # one word too many -> word FP
        [(60, 62), (63, 65)],  # overlaps nothing -> parallelism FP
    ]  # (40, 42), (43, 45) found by nothing -> parallelism FN
    counts = error_categories(hyp, ref)
    assert counts["branch_fn"] == 1 and counts["word_fp"] == 1
    assert counts["parallelism_fp"] == 1 and counts["parallelism_fn"] == 1
    assert sum(counts[c] for c in CATEGORIES) == 4 and counts["correct"] == 0
    assert error_categories(ref, ref)["correct"] == 3
    mixed = error_categories([[(0, 2), (4, 7), (30, 33)]], [[(0, 3), (4, 7), (8, 11)]])
    assert mixed["branch_fm"] == 1  # an extra hypothesis branch and a missing reference branch
    words = error_categories([[(1, 4), (4, 7)]], [[(0, 3), (4, 7)]])
    assert words["word_fm"] == 1  # word 0 missing, word 3 extra
    assert error_categories([[(0, 3), (4, 6)]], [[(0, 3), (4, 7)]])["word_fn"] == 1
