"""Sessions under concurrent load and across processes: threads, pickling."""

from __future__ import annotations

import pickle
import threading

import numpy as np
from onnx import TensorProto

import onnxrt
from onnxrt.cli import demo_model_path

from ..helpers import make_single_node_model, run_in_threads


def _feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(0, 32, size=(1, 6)).astype(np.int64)}


def test_one_session_eight_threads_fifty_runs():
    sess = onnxrt.InferenceSession(demo_model_path())
    expected = {seed: sess.run(None, _feeds(seed)) for seed in range(8)}
    results: dict[tuple[int, int], list[np.ndarray]] = {}

    def worker(seed: int) -> None:
        for i in range(50):
            results[(seed, i)] = sess.run(None, _feeds(seed))

    errors = run_in_threads(worker, 8)
    assert not errors, errors
    assert len(results) == 400
    for (seed, _), outs in results.items():
        for got, want in zip(outs, expected[seed]):
            np.testing.assert_array_equal(got, want)
            assert got.dtype == want.dtype


def test_session_pickles_and_the_copy_runs():
    sess = onnxrt.InferenceSession(demo_model_path())
    copy = pickle.loads(pickle.dumps(sess))
    feeds = _feeds(3)
    for a, b in zip(sess.run(None, feeds), copy.run(None, feeds)):
        np.testing.assert_array_equal(a, b)
    assert [i.name for i in copy.get_inputs()] == ["ids"]
    oinf = pickle.loads(pickle.dumps(onnxrt.OnnxInference(demo_model_path())))
    np.testing.assert_array_equal(oinf.run(feeds)["histogram"], sess.run(["histogram"], feeds)[0])


def test_profiling_session_pickles(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    opts = onnxrt.SessionOptions()
    opts.enable_profiling = True
    sess = onnxrt.InferenceSession(demo_model_path(), opts)
    sess.run(None, _feeds(0))
    copy = pickle.loads(pickle.dumps(sess))
    copy.run(None, _feeds(1))
    assert copy.end_profiling().endswith(".json")
    assert sess.end_profiling().endswith(".json")


def test_returned_arrays_are_not_reused_by_later_runs():
    sess = onnxrt.InferenceSession(demo_model_path())
    first = sess.run(None, _feeds(0))
    kept = [a.copy() for a in first]
    sess.run(None, _feeds(1))
    for a, b in zip(first, kept):
        np.testing.assert_array_equal(a, b)


def test_blas_threads_in_runs_large_products_boosted_medium_ones_single_pool_loops_single(monkeypatch):
    """A run with large tensors holds BLAS at one thread (kernels' own medium products never
    wake its threads); parallel.matmul gives its large products BLAS's threads for their
    duration, runs medium ones on one thread, and never boosts inside a pool loop; a small
    graph leaves BLAS alone; intra_op_num_threads=1 keeps one thread throughout; the
    library's own setting comes back every time, also with runs on several threads."""
    from threadpoolctl import threadpool_info

    from onnxrt import parallel

    def blas():
        return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)

    before = blas()
    seen = []

    def probe(st, args, res, dt):
        seen.append((st.op_type, blas()))

    products = []
    real_plain = parallel._plain

    def plain(a, b, out):
        products.append((a.shape[-2] * a.shape[-1] * b.shape[-1], blas()))
        return real_plain(a, b, out)

    monkeypatch.setattr(parallel, "_plain", plain)
    n = 256
    # float64: float32 products of a large run go to the team of compiled workers instead
    # (test_team), one single-threaded BLAS call per block
    big = make_single_node_model("MatMul", [("A", TensorProto.DOUBLE, [n, n]), ("B", TensorProto.DOUBLE, [n, n])],
                                 [("Y", TensorProto.DOUBLE, [n, n])])
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)) for _ in range(2))
    (y,) = onnxrt.OnnxInference(big).run({"A": a, "B": b}, trace=probe).values()
    np.testing.assert_allclose(y, a @ b, rtol=1e-12, atol=1e-9)
    assert seen == [("MatMul", 1)]  # held at one thread for the run
    if parallel.KERNEL_THREADS > 1 and before > 1:
        assert products == [(n * n * n, min(before, parallel.KERNEL_THREADS))]  # boosted for the product
    assert blas() == before
    # a medium product in a run: one thread; a large one inside a pool loop: no boost
    products.clear()
    m = 64
    with parallel.RunScope(None, eager=True):
        parallel.matmul(a[:m, :m], b[:m, :])  # 1M multiply-adds
        parallel.parallel_for(2, lambda lo, hi: parallel.matmul(a, b), work_per_item=1 << 30)
    assert [t for _, t in products] == [1] * len(products) and len(products) >= 2
    assert blas() == before
    # a small graph leaves BLAS alone
    seen.clear()
    small = make_single_node_model("MatMul", [("A", TensorProto.FLOAT, [1, 8]), ("B", TensorProto.FLOAT, [8, 8])],
                                   [("Y", TensorProto.FLOAT, [1, 8])])
    onnxrt.OnnxInference(small).run({"A": a[:1, :8].astype(np.float32), "B": b[:8, :8].astype(np.float32)}, trace=probe)
    assert seen == [("MatMul", before)]
    # intra_op_num_threads=1: one thread throughout, products included
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 1
    products.clear()
    np.testing.assert_allclose(onnxrt.InferenceSession(big.SerializeToString(), so).run(None, {"A": a, "B": b})[0],
                               a @ b, rtol=1e-4, atol=1e-3)
    assert products and all(t == 1 for _, t in products)
    assert blas() == before
    sess = onnxrt.InferenceSession(big)
    threads = [threading.Thread(target=lambda: [sess.run(None, {"A": a, "B": b}) for _ in range(10)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert blas() == before


def test_pool_loops_without_blas_leave_its_thread_count_alone(monkeypatch):
    from onnxrt import parallel

    calls = []
    monkeypatch.setattr(parallel, "_blas_enter", lambda n: calls.append(("enter", n)))
    monkeypatch.setattr(parallel, "_blas_exit", lambda n: calls.append(("exit", n)))
    done = np.zeros(8, np.int64)

    def chunk(lo: int, hi: int) -> None:
        done[lo:hi] += 1

    parallel.parallel_for(8, chunk, work_per_item=1 << 30, threads=2, blas=False)
    assert calls == [] and done.tolist() == [1] * 8
    parallel.parallel_for(8, chunk, work_per_item=1 << 30, threads=2)
    assert calls == [("enter", 1), ("exit", 1)] and done.tolist() == [2] * 8


def test_runs_of_plans_without_blas_kernels_leave_its_thread_count_alone(monkeypatch):
    """A large run whose kernels never call BLAS (OpRun.uses_blas False: element-wise
    tables, reductions, Softmax, layout operators) does not set BLAS's thread count; one
    with a MatMul holds it at one thread, and so does a custom kernel (True by default)."""
    from onnxrt import parallel
    from onnxrt.ops_cpu._op import OpRun

    calls = []
    monkeypatch.setattr(parallel, "_blas_enter", lambda n: calls.append(("enter", n)))
    monkeypatch.setattr(parallel, "_blas_exit", lambda n: calls.append(("exit", n)))
    n = 256
    x = np.random.default_rng(1).standard_normal((n, n)).astype(np.float32)
    F = TensorProto.FLOAT
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    cases = (
        ("Sigmoid", {}, 1 / (1 + np.exp(-x))),
        ("Softmax", {"axis": -1}, e / e.sum(axis=-1, keepdims=True)),
        ("ReduceSum", {"keepdims": 1}, x.sum(dtype=np.float64).reshape(1, 1)),
        ("Transpose", {"perm": [1, 0]}, x.T),
    )
    for op, atts, want in cases:
        model = make_single_node_model(op, [("X", F, [n, n])], [("Y", F, None)], **atts)
        sess = onnxrt.InferenceSession(model.SerializeToString())
        assert sess._engine.plan.uses_blas is False
        (y,) = sess.run(None, {"X": x})
        assert y.dtype == np.float32 and y.shape == want.shape
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-3)
        assert calls == [], op
    mm = make_single_node_model("MatMul", [("A", F, [n, n]), ("B", F, [n, n])], [("Y", F, [n, n])])
    sess = onnxrt.InferenceSession(mm.SerializeToString())
    assert sess._engine.plan.uses_blas is True
    (y,) = sess.run(None, {"A": x, "B": x})
    np.testing.assert_allclose(y, x @ x, rtol=1e-4, atol=1e-3)
    assert calls[0] == ("enter", 1) and calls[-1] == ("exit", 1)
    assert OpRun.uses_blas is True


def test_parallel_matmul_equals_numpy():
    from onnxrt import parallel

    rng = np.random.default_rng(0)
    for sa, sb in [((64, 576), (576, 3136)), ((2, 3, 64, 20), (20, 3000)), ((300, 70), (70,)), ((5, 7), (7, 3)), ((4, 1, 33, 40), (3, 40, 700)),
                   ((520, 900), (900, 49)), ((1000, 600), (600, 50))]:  # the last two split by rows
        a = rng.standard_normal(sa).astype(np.float32)
        b = rng.standard_normal(sb).astype(np.float32)
        got, want = parallel.matmul(a, b), np.matmul(a, b)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
