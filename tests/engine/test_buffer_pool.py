"""The session's buffer pool: kernels' outputs reuse the memory of released intermediates from run to run, never a buffer anything still refers to."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.context import BufferPool

from ..helpers import run_in_threads


def _cnn(c: int = 16, hw: int = 48) -> bytes:
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((c, c, 3, 3)) / (3 * c)).astype(np.float32), f"w{i}")
             for i in range(3)]
    nodes = [
        helper.make_node("Conv", ["x", "w0"], ["a"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["a"], ["r"]),
        helper.make_node("Conv", ["r", "w1"], ["b"], pads=[1, 1, 1, 1]),
        helper.make_node("Sigmoid", ["b"], ["s"]),
        helper.make_node("Mul", ["b", "s"], ["silu"]),
        helper.make_node("Add", ["silu", "a"], ["res"]),
        helper.make_node("Conv", ["res", "w2"], ["d"], pads=[1, 1, 1, 1]),
        helper.make_node("Reshape", ["d", "flat"], ["y"]),  # an output that is a view of an intermediate
        helper.make_node("MaxPool", ["res"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
    ]
    inits.append(numpy_helper.from_array(np.array([1, -1], np.int64), "flat"))
    g = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, c, hw, hw])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
                           helper.make_tensor_value_info("p", TensorProto.FLOAT, None)], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _feeds(n: int, c: int = 16, hw: int = 48) -> list[np.ndarray]:
    rng = np.random.default_rng(1)
    return [rng.standard_normal((1, c, hw, hw)).astype(np.float32) for _ in range(n)]


def test_runs_reuse_the_pool_and_give_the_reference_values():
    model = _cnn()
    ref = onnxrt.InferenceSession(model, _options(fast_paths=False))
    sess = onnxrt.InferenceSession(model)
    pool = sess._engine._context.pool
    xs = _feeds(12)
    kept = []
    for i, x in enumerate(xs):
        before = x.copy()
        got = sess.run(None, {"x": x})
        np.testing.assert_array_equal(x, before)  # the feed is never the pool's
        kept.append((got, [g.copy() for g in got]))
        if i == 5:
            made, reused = pool.made, pool.reused
    # steady state: the intermediates' buffers come from the pool; new ones only for what
    # the caller kept (the output y views its Conv's buffer)
    runs = len(xs) - 6
    assert pool.reused - reused >= 3 * runs and pool.made - made <= 4 * runs
    for x, (got, copies) in zip(xs, kept):
        expected = ref.run(None, {"x": x})
        for g, c, e in zip(got, copies, expected):
            # the outputs of every run belong to the caller: later runs never wrote into them
            np.testing.assert_array_equal(g, c)
            assert g.dtype == np.float32 and g.shape == e.shape
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def _options(**kw):
    so = onnxrt.SessionOptions()
    for k, v in kw.items():
        setattr(so, k, v)
    return so


def test_concurrent_runs_of_one_session_agree_with_single_runs():
    model = _cnn()
    sess = onnxrt.InferenceSession(model)
    xs = _feeds(8)
    expected = [sess.run(None, {"x": x}) for x in xs]

    def work(i: int) -> None:
        for _ in range(6):
            got = sess.run(None, {"x": xs[i]})
            for g, e in zip(got, expected[i]):
                np.testing.assert_array_equal(g, e)

    assert run_in_threads(work, 8) == []


def test_a_buffer_comes_back_only_when_nothing_refers_to_it():
    pool = BufferPool()

    def fresh():
        return pool.empty((64, 1024), np.float32)

    a = fresh()
    assert a.dtype == np.float32 and a.shape == (64, 1024) and a.flags.c_contiguous and a.flags.writeable
    view = a[3:]
    pool.release(a)
    assert pool.held == 0  # a view of its buffer is alive
    del view
    other = a
    pool.release(a)
    assert pool.held == 0  # another name holds the value
    del other
    pool.release(a)
    assert pool.held == a.base.shape[0] == 64 * 1024 * 4
    del a
    b = pool.empty((1024, 64), np.float32)  # same bytes: the same buffer
    assert pool.reused == 1 and pool.held == 0 and b.shape == (1024, 64)
    # small arrays and foreign arrays are not the pool's
    small = pool.empty((8,), np.float64)
    assert small.base is None
    pool.release(np.zeros(1 << 20, np.uint8)[:10])
    assert pool.held == 0


def test_the_pool_holds_at_most_its_limit(monkeypatch):
    monkeypatch.setattr(BufferPool, "LIMIT", 3 * 65536)
    pool = BufferPool()
    arrays = [pool.empty((16384,), np.float32) for _ in range(5)]
    while arrays:
        v = arrays.pop()
        pool.release(v)
        del v
    assert pool.held == 3 * 65536 and len(pool._free[65536]) == 3


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.uint8])
def test_pool_arrays_of_every_dtype(dtype):
    pool = BufferPool()
    a = pool.empty((3, 50000), dtype)
    a[...] = 7
    assert a.dtype == dtype and a.shape == (3, 50000) and a.flags.c_contiguous and (a == 7).all()
