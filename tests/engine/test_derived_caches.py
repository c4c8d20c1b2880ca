"""Caches of derived data (Winograd's weights, packed dense layers, folded statistics) never serve stale results."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt import native as _jit
from onnxrt.fastpaths import conv as fp
from onnxrt.fastpaths.conv import WINO_MIN_CHANNELS

from ..ops.conv_table import conv_op, run

C = WINO_MIN_CHANNELS  # input channels from which a 3x3 unit-stride convolution goes by Winograd
M, H = 32, 16  # 16x16 maps: 2x2 tiles waste nothing
_EPS = float(np.finfo(np.float32).eps)


def _winograd_available() -> bool:
    return _jit.kernels() is not None and fp.blas_sgemm_address() is not None


needs_winograd = pytest.mark.skipif(not _winograd_available(), reason="Winograd needs the compiled kernels and BLAS")


def _reference(x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The 3x3 convolution (pads 1) in float64 and the same sum over |x| |w| (the scale of
    its rounding errors)."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    taps = np.lib.stride_tricks.sliding_window_view(xp, (3, 3), axis=(2, 3))  # (1, C, H, W, 3, 3)
    w64 = w.astype(np.float64)
    return np.einsum("nchwij,mcij->nmhw", taps, w64), np.einsum("nchwij,mcij->nmhw", np.abs(taps), np.abs(w64))


def _check(y: np.ndarray, x: np.ndarray, w: np.ndarray) -> None:
    # float32 sums of 9 C products, or Winograd's: its transforms add at most 4 (input) and
    # 9/4 (weights) times the magnitudes before the 16 products of depth C and the output
    # transform's 4 terms; 16 (4 * 4) times the depth's eps on sum |x| |w| bounds both paths
    # with room, where stale weights are off by the whole result (O(1) per element here)
    ref, scale = _reference(x, w)
    assert y.shape == ref.shape and y.dtype == np.float32
    bound = 16 * 9 * C * _EPS * scale + 1e-30
    assert np.all(np.abs(y - ref) <= bound), float(np.max(np.abs(y - ref) - bound))


def _model(w_init: np.ndarray | None = None) -> onnx.ModelProto:
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])]
    inits = []
    if w_init is None:
        inputs.append(helper.make_tensor_value_info("w", TensorProto.FLOAT, [M, C, 3, 3]))
    else:
        inits.append(numpy_helper.from_array(w_init, "w"))
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], kernel_shape=[3, 3], pads=[1, 1, 1, 1])],
        "g", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=8)


def _readonly_view(buf: bytearray) -> np.ndarray:
    # read-only all the way down (its base is a read-only memoryview, no array), yet the
    # bytearray under it can still be written: a weight store the caller updates in place
    w = np.frombuffer(memoryview(buf).toreadonly(), np.float32).reshape(M, C, 3, 3)
    assert not w.flags.writeable
    return w


def _conv_steps(sess) -> list:
    return [st.op for st in sess._engine.plan.steps if "Conv" in st.op.onnx_node.op_type]


@needs_winograd
def test_feed_weights_updated_in_place_between_runs_and_sessions():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    w1 = rng.standard_normal((M, C, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((M, C, 3, 3)).astype(np.float32)
    buf = bytearray(w1.tobytes())
    w = _readonly_view(buf)
    model = _model()
    sess = onnxrt.InferenceSession(model.SerializeToString())
    (y,) = sess.run(None, {"x": x, "w": w})
    _check(y, x, w1)
    assert all(op.weights_cache is None for op in _conv_steps(sess))  # a feed: nothing kept
    buf[:] = w2.tobytes()  # the same array, new contents
    (y,) = sess.run(None, {"x": x, "w": w})
    _check(y, x, w2)
    # a new session given the same array: nothing derived from it outlives the other session's run
    other = onnxrt.InferenceSession(model.SerializeToString())
    buf[:] = w1.tobytes()
    (y,) = other.run(None, {"x": x, "w": w})
    _check(y, x, w1)
    (y,) = sess.run(None, {"x": x, "w": w})
    _check(y, x, w1)


@needs_winograd
def test_feed_weights_updated_in_place_through_conv():
    # a node whose W is a feed, through Conv's table: nothing derived from W outlives the call
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    w1 = rng.standard_normal((M, C, 3, 3)).astype(np.float32)
    w2 = rng.standard_normal((M, C, 3, 3)).astype(np.float32)
    buf = bytearray(w1.tobytes())
    w = _readonly_view(buf)
    op = conv_op(pads=[1, 1, 1, 1], const=False)
    y, path = run(x, w, op=op)
    _check(y, x, w1)
    assert "winograd" not in path and op.weights_cache is None
    buf[:] = w2.tobytes()
    _check(run(x, w, op=op)[0], x, w2)
    _check(run(x, w, pads=[1, 1, 1, 1], const=False)[0], x, w2)


@needs_winograd
def test_initializer_weights_transformed_once(monkeypatch):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    w = rng.standard_normal((M, C, 3, 3)).astype(np.float32)
    k = _jit.kernels()
    calls = []
    transform = k.wino_weights

    def counted(wc, u):
        calls.append(wc.shape)
        return transform(wc, u)

    monkeypatch.setattr(k, "wino_weights", counted)
    # optimisations off: the Conv node itself, its W the plan's initializer
    opts = onnxrt.SessionOptions()
    opts.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxrt.InferenceSession(_model(w).SerializeToString(), opts)
    (op,) = _conv_steps(sess)
    assert op.const_inputs == frozenset({1})
    for _ in range(3):
        (y,) = sess.run(None, {"x": x})
        _check(y, x, w)
    assert calls == [(M, C, 3, 3)]  # Winograd taken, its transform computed once for three runs
    held, u = op.weights_cache["winograd"]
    assert held is sess._engine.plan.initializers["w"] and u.shape == (16, M, C) and u.dtype == np.float32
    # another session of the same model keeps its own transform (nothing shared between sessions)
    other = onnxrt.InferenceSession(_model(w).SerializeToString(), opts)
    (y,) = other.run(None, {"x": x})
    _check(y, x, w)
    assert len(calls) == 2 and _conv_steps(other)[0].weights_cache["winograd"][1] is not u


@needs_winograd
def test_new_weights_never_get_a_freed_array_s_transform():
    # arrays made and freed in turn (ids reused): each result is its own weights'
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    op = conv_op(pads=[1, 1, 1, 1])  # one node, its W a constant given anew each time
    for i in range(4):
        w = rng.standard_normal((M, C, 3, 3)).astype(np.float32)
        w.flags.writeable = False
        y, path = run(x, w, op=op)
        _check(y, x, w)
        assert "winograd" in path and op.weights_cache["winograd"][0] is w
        del w
    for i in range(4):  # sessions with initializer weights, built and dropped in turn
        w = rng.standard_normal((M, C, 3, 3)).astype(np.float32)
        sess = onnxrt.InferenceSession(_model(w).SerializeToString())
        (y,) = sess.run(None, {"x": x})
        _check(y, x, w)
        del sess


def test_batch_normalization_feed_statistics_updated_in_place():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    names = ["scale", "b", "mean", "var"]
    graph = helper.make_graph(
        [helper.make_node("BatchNormalization", ["x"] + names, ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4, 4])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, [3]) for n in names],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]).SerializeToString())
    bufs = {n: bytearray(np.ones(3, np.float32).tobytes()) for n in names}
    feeds = {n: np.frombuffer(memoryview(bufs[n]).toreadonly(), np.float32) for n in names}
    for trial in range(2):
        vals = {n: rng.uniform(0.5, 2.0, 3).astype(np.float32) for n in names}
        for n in names:
            bufs[n][:] = vals[n].tobytes()
        (y,) = sess.run(None, {"x": x, **feeds})
        a = vals["scale"].astype(np.float64) / np.sqrt(vals["var"].astype(np.float64) + 1e-5)
        ref = (x - vals["mean"].reshape(3, 1, 1)) * a.reshape(3, 1, 1) + vals["b"].reshape(3, 1, 1)
        # a few float32 roundings of values of magnitude |x - mean| a + |b|
        bound = 8 * _EPS * (np.abs(x - vals["mean"].reshape(3, 1, 1)) * a.reshape(3, 1, 1) + np.abs(vals["b"]).reshape(3, 1, 1))
        assert y.dtype == np.float32 and y.shape == x.shape
        assert np.all(np.abs(y - ref) <= bound + 1e-30)


def test_dense_chain_feed_weights_updated_in_place():
    # Gemm + Relu -> Gemm as one DenseChain node (the optimiser writes it for constant
    # weights; here its weights are feeds): its packed copy of the weights is for constants only
    rng = np.random.default_rng(5)
    x = rng.standard_normal((2, 8)).astype(np.float32)
    shapes = {"w1": (8, 6), "c1": (6,), "w2": (6, 4), "c2": (4,)}
    graph = helper.make_graph(
        [helper.make_node("DenseChain", ["x", *shapes], ["y"], domain="onnxrt", trans_b=[0, 0], relus=[1, 0])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 8])]
        + [helper.make_tensor_value_info(n, TensorProto.FLOAT, list(s)) for n, s in shapes.items()],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    opsets = [helper.make_opsetid("", 13), helper.make_opsetid("onnxrt", 1)]
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=opsets).SerializeToString())
    assert [st.op.onnx_node.op_type for st in sess._engine.plan.steps] == ["DenseChain"]
    bufs = {n: bytearray(np.zeros(s, np.float32).tobytes()) for n, s in shapes.items()}
    feeds = {n: np.frombuffer(memoryview(bufs[n]).toreadonly(), np.float32).reshape(s) for n, s in shapes.items()}
    for trial in range(2):
        vals = {n: rng.standard_normal(s).astype(np.float32) for n, s in shapes.items()}
        for n in shapes:
            bufs[n][:] = vals[n].tobytes()
        (y,) = sess.run(None, {"x": x, **feeds})
        v = {n: a.astype(np.float64) for n, a in vals.items()}
        h = x @ v["w1"] + v["c1"]
        ref = np.maximum(h, 0) @ v["w2"] + v["c2"]
        scale = (np.abs(np.maximum(h, 0)) @ np.abs(v["w2"]) + np.abs(v["c2"])
                 + (np.abs(x) @ np.abs(v["w1"]) + np.abs(v["c1"])) @ np.abs(v["w2"]))
        assert y.dtype == np.float32 and y.shape == (2, 4)
        assert np.all(np.abs(y - ref) <= 16 * _EPS * scale)  # depths 8 and 6: a few ulps each


@needs_winograd
def test_fused_and_concatenated_convolutions_keep_their_constant_transforms(monkeypatch):
    # Conv + Relu twice into a Concat: the optimiser's FusedConv nodes inside a ConvConcat,
    # each segment told that its W is a model constant
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, C, H, H)).astype(np.float32)
    ws = [rng.standard_normal((M, C, 3, 3)).astype(np.float32) for _ in range(2)]
    nodes = []
    for i in range(2):
        nodes += [helper.make_node("Conv", ["x", f"w{i}"], [f"c{i}"], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
    nodes.append(helper.make_node("Concat", ["r0", "r1"], ["y"], axis=1))
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, C, H, H])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, f"w{i}") for i, w in enumerate(ws)],
    )
    k = _jit.kernels()
    calls = []
    transform = k.wino_weights
    monkeypatch.setattr(k, "wino_weights", lambda wc, u: (calls.append(wc.shape), transform(wc, u))[1])
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString())
    (step,) = sess._engine.plan.steps
    assert step.op.onnx_node.op_type == "ConvConcat"
    for _ in range(2):
        (y,) = sess.run(None, {"x": x})
        ref0, scale0 = _reference(x, ws[0])
        ref1, scale1 = _reference(x, ws[1])
        ref, scale = np.concatenate([ref0, ref1], axis=1), np.concatenate([scale0, scale1], axis=1)
        assert y.shape == (1, 2 * M, H, H) and y.dtype == np.float32
        assert np.all(np.abs(y - np.maximum(ref, 0)) <= 16 * 9 * C * _EPS * scale)  # Relu adds no error
    assert calls == [(M, C, 3, 3)] * 2  # each segment's weights transformed once
    assert [spec._inner.weights_cache["winograd"][0] is w for spec, w in
            zip(step.op._convs, (sess._engine.plan.initializers["w0"], sess._engine.plan.initializers["w1"]))] == [True, True]
