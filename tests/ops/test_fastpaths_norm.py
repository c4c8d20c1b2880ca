"""BatchNormalization, FusedBatchNormalization and LayerNormalization's declared fast paths
(onnxrt.fastpaths.norm) against the reference kernels."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from tests.ops.fastpath_check import check_path, picked

F = TensorProto.FLOAT


def _bn_model(shape, relu: bool, opset=15):
    c = shape[1]
    rng = np.random.default_rng(4)
    inits = [numpy_helper.from_array(v.astype(np.float32), n) for n, v in (
        ("s", rng.standard_normal(c)), ("b", rng.standard_normal(c)), ("m", rng.standard_normal(c)),
        ("v", rng.uniform(0.5, 2.0, c)))]
    nodes = [helper.make_node("BatchNormalization", ["x", "s", "b", "m", "v"], ["t" if relu else "y"], epsilon=1e-3)]
    if relu:
        nodes.append(helper.make_node("Relu", ["t"], ["y"]))
    g = helper.make_graph(nodes, "bn", [helper.make_tensor_value_info("x", F, list(shape))],
                          [helper.make_tensor_value_info("y", F, list(shape))], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("shape", [(1, 16, 20, 20), (2, 64, 56, 56), (3, 5, 7)])
def test_batch_normalization_compiled_affine(shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    fast, _ = check_path(_bn_model(shape, False), {"x": x}, "BatchNormalization", "compiled affine")
    assert fast[0].dtype == np.float32 and fast[0].shape == shape
    # y = x * a + b with a, b folded in float64 and rounded to float32: two roundings from float64's result
    rng = np.random.default_rng(4)
    s, b, m = (rng.standard_normal(shape[1]) for _ in range(3))
    v = rng.uniform(0.5, 2.0, shape[1])
    a = s.astype(np.float32) / np.sqrt(v.astype(np.float32).astype(np.float64) + 1e-3)
    exact = x.astype(np.float64) * a.reshape(1, -1, *([1] * (len(shape) - 2))) + (
        b.astype(np.float32) - m.astype(np.float32) * a).reshape(1, -1, *([1] * (len(shape) - 2)))
    np.testing.assert_allclose(fast[0], exact, rtol=4 * 2**-24, atol=8 * 2**-24 * np.abs(exact).max())


@pytest.mark.parametrize("shape", [(1, 16, 20, 20), (2, 32, 30, 30)])
def test_fused_batch_normalization_relu_compiled_affine(shape):
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    sess = onnxrt.OnnxInference(_bn_model(shape, True))
    assert [s.op_type for s in sess.plan.steps] == ["FusedBatchNormalization"]
    fast, _ = check_path(_bn_model(shape, True), {"x": x}, "FusedBatchNormalization", "compiled affine relu")
    assert fast[0].dtype == np.float32 and fast[0].shape == shape and (fast[0] >= 0).all()


def test_batch_normalization_training_and_infinite_folds_stay_on_the_reference():
    shape = (2, 4, 5, 5)
    x = np.random.default_rng(2).standard_normal(shape).astype(np.float32)
    model = _bn_model(shape, False)
    model.graph.initializer[3].CopyFrom(numpy_helper.from_array(np.array([0, 1, 1, 1], np.float32), "v"))
    model.graph.node[0].attribute[0].f = 0.0  # epsilon 0 and a zero variance: an infinite scale
    sess = onnxrt.OnnxInference(model)
    sess.run({"x": x})
    y = sess.run({"x": x})["y"]
    assert picked(sess, "BatchNormalization") == {"compiled affine"}  # picked, then declined per call
    so = onnxrt.SessionOptions()
    so.fast_paths = False
    expected = onnxrt.OnnxInference(model, options=so).run({"x": x})["y"]
    np.testing.assert_array_equal(y, expected)
    assert np.isinf(y[:, 0]).any() and y.dtype == np.float32


@pytest.mark.parametrize("shape, axis, bias, scale_shape", [((4, 128, 768), -1, True, (768,)), ((8, 10, 12), 1, False, (10, 12)),
                                                            ((6, 33), -1, True, (1, 33))])
def test_layer_normalization_compiled_rows(shape, axis, bias, scale_shape):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal(shape) * 3 + 10).astype(np.float32)
    inits = [numpy_helper.from_array(rng.standard_normal(scale_shape).astype(np.float32), "s")]
    ins = ["x", "s"]
    if bias:
        inits.append(numpy_helper.from_array(rng.standard_normal(scale_shape).astype(np.float32), "b"))
        ins.append("b")
    node = helper.make_node("LayerNormalization", ins, ["y", "mean", "inv"], axis=axis, epsilon=1e-5)
    stat = [d if i < axis % len(shape) else 1 for i, d in enumerate(shape)]
    g = helper.make_graph([node], "ln", [helper.make_tensor_value_info("x", F, list(shape))],
                          [helper.make_tensor_value_info("y", F, list(shape)), helper.make_tensor_value_info("mean", F, stat),
                           helper.make_tensor_value_info("inv", F, stat)], inits)
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    # normalised values of magnitude <= ~5, scaled by |s| <= ~4: a few float32 ulp of 20 apart
    fast, ref = check_path(model, {"x": x}, "LayerNormalization", "compiled rows", rtol=1e-5, atol=64 * 2**-24 * 20)
    assert [a.shape for a in fast] == [shape, tuple(stat), tuple(stat)]
    assert all(a.dtype == np.float32 for a in fast)
