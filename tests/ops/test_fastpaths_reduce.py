"""The reductions' declared fast path (onnxrt.fastpaths.reduce: compiled row sums) against the reference kernels."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from tests.ops.fastpath_check import check_path, f32_sum_tol, picked

F = TensorProto.FLOAT


def _model(op: str, shape, axes, keepdims: int, opset: int, axes_input: bool):
    x = helper.make_tensor_value_info("x", F, list(shape))
    y = helper.make_tensor_value_info("y", F, None)
    inits, inputs = [], ["x"]
    attrs = {"keepdims": keepdims}
    if axes_input:
        inits.append(helper.make_tensor("axes", TensorProto.INT64, [len(axes)], list(axes)))
        inputs.append("axes")
    else:
        attrs["axes"] = list(axes)
    node = helper.make_node(op, inputs, ["y"], **attrs)
    graph = helper.make_graph([node], "g", [x], [y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("op", ["ReduceMean", "ReduceSum"])
@pytest.mark.parametrize("shape, axes", [((1, 1152, 7, 7), (2, 3)), ((2, 96, 56, 56), (-1, -2)), ((128, 768), (1,)),
                                         ((3, 4, 5, 300), (1, 2, 3))])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize("opset, axes_input", [(13, False), (18, True)])
def test_row_sums_agree_with_the_reference(op, shape, axes, keepdims, opset, axes_input):
    if op == "ReduceSum" and not axes_input and opset >= 13:
        opset = 11  # ReduceSum takes its axes as an input from 13
    x = np.random.default_rng(7).standard_normal(shape).astype(np.float32) + np.float32(0.5)
    n = int(np.prod([shape[a] for a in axes]))
    # two summation orders of n float32 terms: n eps sum|x| apart at most (then / n for the mean)
    magnitude = float(np.abs(x).reshape(-1, n).sum(axis=1).max())
    atol = f32_sum_tol(n, magnitude) / (n if op == "ReduceMean" else 1)
    fast, ref = check_path(_model(op, shape, axes, keepdims, opset, axes_input), {"x": x}, op, "compiled row sums",
                           rtol=4 * float(np.finfo(np.float32).eps), atol=atol, optimize=False)
    lead = shape[: len(shape) - len(axes)]
    assert fast[0].shape == (lead + (1,) * len(axes) if keepdims else lead) and fast[0].dtype == np.float32
    expected = x.astype(np.float64).reshape(-1, n).sum(axis=1) / (n if op == "ReduceMean" else 1)
    np.testing.assert_allclose(fast[0].reshape(-1), expected, rtol=1e-5, atol=atol)


def test_axes_given_at_run_time_are_read_on_every_call():
    # a non-constant axes input: the executor settled for one value declines another
    x = np.random.default_rng(8).standard_normal((2, 64, 60)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("ReduceMean", ["x", "axes"], ["y"], keepdims=1)], "g",
                              [helper.make_tensor_value_info("x", F, list(x.shape)),
                               helper.make_tensor_value_info("axes", TensorProto.INT64, [1])],
                              [helper.make_tensor_value_info("y", F, None)])
    sess = onnxrt.OnnxInference(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    for _ in range(2):
        y = sess.run({"x": x, "axes": np.array([2], np.int64)})["y"]
    assert "compiled row sums" in picked(sess, "ReduceMean")
    np.testing.assert_allclose(y, x.mean(axis=2, keepdims=True), rtol=1e-6, atol=1e-6)
    y1 = sess.run({"x": x, "axes": np.array([1], np.int64)})["y"]  # the same key, other axes
    assert y1.shape == (2, 1, 60) and y1.dtype == np.float32
    np.testing.assert_allclose(y1, x.mean(axis=1, keepdims=True), rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape, axes", [((1, 64, 8, 8), (1,)), ((4, 4), (1,)), ((1, 64, 32, 32), (0, 2))])
def test_other_axes_and_small_inputs_stay_on_the_reference(shape, axes):
    x = np.random.default_rng(9).standard_normal(shape).astype(np.float32)
    sess = onnxrt.OnnxInference(_model("ReduceMean", shape, axes, 1, 13, False))
    sess.run({"x": x})
    y = sess.run({"x": x})["y"]
    assert "compiled row sums" not in picked(sess, "ReduceMean")
    np.testing.assert_allclose(y, x.mean(axis=axes, keepdims=True), rtol=1e-5, atol=1e-6)
