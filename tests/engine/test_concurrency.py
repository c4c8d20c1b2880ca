"""Sessions under concurrent load and across processes: threads, pickling."""

from __future__ import annotations

import pickle
import threading

import numpy as np
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.cli import demo_model_path

from ..helpers import make_single_node_model


def _feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {"ids": rng.integers(0, 32, size=(1, 6)).astype(np.int64)}


def test_one_session_eight_threads_fifty_runs():
    sess = onnxrt.InferenceSession(demo_model_path())
    expected = {seed: sess.run(None, _feeds(seed)) for seed in range(8)}
    errors: list[BaseException] = []
    results: dict[tuple[int, int], list[np.ndarray]] = {}
    barrier = threading.Barrier(8)

    def worker(seed: int) -> None:
        try:
            barrier.wait()
            for i in range(50):
                results[(seed, i)] = sess.run(None, _feeds(seed))
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=worker, args=(s,)) for s in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
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


def test_blas_keeps_its_threads_in_runs_is_capped_by_intra_op_threads_and_single_in_pool_loops():
    """Matrix products run on BLAS's own threads in a default run; a session with
    intra_op_num_threads=1 runs BLAS on one thread; loops split over onnxrt's pool run it
    single-threaded in their chunks; the library's own setting comes back every time, also
    with runs on several threads."""
    from threadpoolctl import threadpool_info

    from onnxrt import parallel

    def blas():
        return max((i["num_threads"] for i in threadpool_info() if i["user_api"] == "blas"), default=1)

    seen = []

    def probe(st, args, res, dt):
        seen.append((st.op_type, blas()))

    before = blas()
    n = 256
    big = make_single_node_model("MatMul", [("A", TensorProto.FLOAT, [n, n]), ("B", TensorProto.FLOAT, [n, n])],
                                 [("Y", TensorProto.FLOAT, [n, n])])
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((n, n)).astype(np.float32) for _ in range(2))
    (y,) = onnxrt.OnnxInference(big).run({"A": a, "B": b}, trace=probe).values()
    np.testing.assert_allclose(y, a @ b, rtol=1e-4, atol=1e-3)
    assert seen == [("MatMul", before)]
    assert blas() == before
    seen.clear()
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 1
    sess1 = onnxrt.InferenceSession(big.SerializeToString(), so)
    with parallel.RunScope(1):  # what the session's run enters
        assert blas() == 1
        inside = []
        parallel.parallel_for(8, lambda lo, hi: inside.append(blas()), work_per_item=1 << 30)
        assert inside and set(inside) == {1}
    assert blas() == before
    np.testing.assert_allclose(sess1.run(None, {"A": a, "B": b})[0], a @ b, rtol=1e-4, atol=1e-3)
    assert blas() == before
    # a loop split over the pool: one BLAS thread in its chunks, restored after
    inside = []
    parallel.parallel_for(8, lambda lo, hi: inside.append(blas()), work_per_item=1 << 30)
    if parallel.KERNEL_THREADS > 1:
        assert set(inside) == {1}
    assert blas() == before
    sess = onnxrt.InferenceSession(big)
    threads = [threading.Thread(target=lambda: [sess.run(None, {"A": a, "B": b}) for _ in range(10)]) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert blas() == before


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
