"""OneThreadBLASOps: numpy's BLAS on one thread for the pipelines' matrix
products, set by the ``[nlp.after_pipeline_creation]`` callback."""
from __future__ import annotations

import pickle
from pathlib import Path

import numpy
import pytest
from thinc.api import NumpyOps

from spacy_rhetoric.runtime.cpu_ops import OneThreadBLASOps, use_one_thread_blas

ROOT = Path(__file__).resolve().parents[1]
PIPELINES = sorted(p.parent for p in (ROOT / "pipelines").glob("*/config.cfg"))


def _blas_threads():
    from threadpoolctl import threadpool_info

    return [info["num_threads"] for info in threadpool_info() if info["user_api"] == "blas"]


@pytest.mark.parametrize("trans1,trans2", [(False, False), (True, False), (False, True), (True, True)])
def test_gemm_equals_thincs_within_rounding(trans1, trans2):
    rng = numpy.random.default_rng(0)
    x = rng.normal(size=(7, 5) if not trans1 else (5, 7)).astype("f")
    y = rng.normal(size=(5, 3) if not trans2 else (3, 5)).astype("f")
    expected = NumpyOps().gemm(x, y, trans1=trans1, trans2=trans2)
    got = OneThreadBLASOps().gemm(x, y, trans1=trans1, trans2=trans2)
    assert got.shape == (7, 3)
    numpy.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)
    out = numpy.zeros((7, 3), dtype="f")
    OneThreadBLASOps().gemm(x, y, out=out, trans1=trans1, trans2=trans2)
    numpy.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5)


def test_the_users_blas_threads_are_restored():
    before = _blas_threads()
    OneThreadBLASOps().gemm(numpy.ones((4, 4), dtype="f"), numpy.ones((4, 4), dtype="f"))
    assert _blas_threads() == before


def test_threads_running_products_at_once_restore_the_users_setting():
    # a service's worker threads may multiply at the same time
    from concurrent.futures import ThreadPoolExecutor

    before = _blas_threads()
    x = numpy.ones((64, 64), dtype="f")
    ops = OneThreadBLASOps()
    with ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: ops.gemm(x, x), range(200)))
    assert _blas_threads() == before


@pytest.mark.skipif(not hasattr(__import__("os"), "fork"), reason="needs fork")
def test_a_child_forked_while_another_thread_enters_a_product_does_not_hang():
    # nlp.pipe(n_process=2) forks; a service thread may be multiplying then
    import multiprocessing

    from spacy_rhetoric.runtime import cpu_ops

    def child(queue):
        out = OneThreadBLASOps().gemm(numpy.ones((4, 4), dtype="f"), numpy.ones((4, 4), dtype="f"))
        queue.put(float(out[0, 0]))

    ctx = multiprocessing.get_context("fork")
    queue = ctx.Queue()
    with cpu_ops._lock:  # as while another thread enters or leaves a product
        proc = ctx.Process(target=child, args=(queue,))
        proc.start()
        proc.join(timeout=60)
    alive = proc.is_alive()
    if alive:
        proc.kill()
    assert not alive and proc.exitcode == 0 and queue.get(timeout=5) == 4.0


def test_pickles_for_spawned_workers():
    ops = pickle.loads(pickle.dumps(OneThreadBLASOps()))
    assert isinstance(ops, OneThreadBLASOps) and not ops.use_blis


def test_callback_replaces_numpy_ops_only():
    import spacy
    from thinc.api import Linear

    nlp = spacy.blank("zh")
    tok2vec = nlp.add_pipe("tok2vec")
    nlp.initialize()
    other = Linear(2, 2)

    class Foreign(NumpyOps):  # stands for ops of another kind (e.g. a GPU's)
        pass

    other.ops = Foreign()
    use_one_thread_blas(nlp)
    assert all(isinstance(node.ops, OneThreadBLASOps) for node in tok2vec.model.walk())
    assert type(other.ops) is Foreign


@pytest.mark.parametrize("pipeline", PIPELINES, ids=[p.name for p in PIPELINES])
def test_shipped_pipelines_use_it_and_answer_as_with_blis(pipeline: Path, pse_dir: Path):
    import spacy

    from test_same_answer import annotations, essay_texts, max_difference

    texts = essay_texts(pse_dir)[:3]
    nlp = spacy.load(pipeline)
    assert nlp.config["nlp"]["after_pipeline_creation"] == {"@callbacks": "spacy_rhetoric.one_thread_blas_ops.v1"}
    numpy_nodes = [node for _, proc in nlp.components if hasattr(proc, "model") for node in proc.model.walk()
                   if isinstance(node.ops, NumpyOps)]
    assert numpy_nodes and all(isinstance(node.ops, OneThreadBLASOps) for node in numpy_nodes)
    nlp("今天的天气像春天一样温暖。")
    ours = [annotations(d) for d in nlp.pipe(texts)]
    blis = spacy.load(pipeline, config={"nlp": {"after_pipeline_creation": None}})
    assert not any(isinstance(node.ops, OneThreadBLASOps) for _, proc in blis.components
                   if hasattr(proc, "model") for node in proc.model.walk())
    theirs = [annotations(d) for d in blis.pipe(texts)]
    assert max(max_difference(a, b) for a, b in zip(ours, theirs)) <= 1e-4
