"""Gemm, FusedGemm and DenseChain's declared fast paths (onnxrt.fastpaths.gemm) against the reference kernels."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from tests.ops.fastpath_check import check_path, f32_sum_tol, picked

F = TensorProto.FLOAT


def _layers_model(layers, rows, relus, trans_b=0, bias_2d=False):
    """x -> Gemm (+ Relu) -> ... with constant weights; the optimiser turns one layer with Relu
    into FusedGemm and several into DenseChain."""
    rng = np.random.default_rng(len(layers))
    nodes, inits, cur = [], [], "x"
    for i, ((k, n), relu) in enumerate(zip(layers, relus)):
        w = (rng.standard_normal((n, k) if trans_b else (k, n)) / np.sqrt(k)).astype(np.float32)
        c = rng.standard_normal((1, n) if bias_2d else n).astype(np.float32)
        inits += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(c, f"c{i}")]
        out = f"h{i}" if relu else f"y{i}"
        nodes.append(helper.make_node("Gemm", [cur, f"w{i}", f"c{i}"], [out], transB=trans_b))
        if relu:
            nodes.append(helper.make_node("Relu", [out], [f"y{i}"]))
        cur = f"y{i}"
    g = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", F, [rows, layers[0][0]])],
                          [helper.make_tensor_value_info(cur, F, [rows, layers[-1][1]])], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)])


def _tol(x, layers):
    # each layer's outputs are sums of K products in another order than BLAS's: K * eps * sum|a*b|
    # (inputs of unit scale, weights of 1/sqrt(K)), compounded over the layers
    k = max(k for k, _ in layers)
    return f32_sum_tol(k, np.sqrt(k) * float(np.abs(x).max()) + 1) * 4 ** len(layers)


@pytest.mark.parametrize("rows, trans_b, bias_2d", [(1, 0, False), (4, 1, False), (16, 0, True)])
def test_gemm_compiled_dense(rows, trans_b, bias_2d):
    x = np.random.default_rng(0).standard_normal((rows, 64)).astype(np.float32)
    layers = [(64, 100)]
    fast, _ = check_path(_layers_model(layers, rows, [0], trans_b, bias_2d), {"x": x}, "Gemm", "compiled dense",
                         rtol=0, atol=_tol(x, layers))
    assert fast[0].shape == (rows, 100) and fast[0].dtype == np.float32


def test_fused_gemm_relu_compiled_dense():
    x = np.random.default_rng(1).standard_normal((3, 128)).astype(np.float32)
    model = _layers_model([(128, 60)], 3, [1], trans_b=1)
    assert [s.op_type for s in onnxrt.OnnxInference(model).plan.steps] == ["FusedGemm"]
    fast, _ = check_path(model, {"x": x}, "FusedGemm", "compiled dense relu", rtol=0, atol=_tol(x, [(128, 60)]))
    assert fast[0].shape == (3, 60) and fast[0].dtype == np.float32 and (fast[0] >= 0).all() and (fast[0] == 0).any()


def test_dense_chain_compiled_chain():
    layers = [(32, 64), (64, 64), (64, 48), (48, 10)]
    x = np.random.default_rng(2).standard_normal((2, 32)).astype(np.float32)
    model = _layers_model(layers, 2, [1, 1, 1, 0])
    assert [s.op_type for s in onnxrt.OnnxInference(model).plan.steps] == ["DenseChain"]
    fast, _ = check_path(model, {"x": x}, "DenseChain", "compiled chain", rtol=0, atol=_tol(x, layers))
    assert fast[0].shape == (2, 10) and fast[0].dtype == np.float32


def test_many_rows_and_other_types_stay_on_the_reference():
    x = np.random.default_rng(3).standard_normal((40, 64)).astype(np.float32)
    model = _layers_model([(64, 100)], 40, [0])
    sess = onnxrt.OnnxInference(model)
    sess.run({"x": x})
    y = sess.run({"x": x})["y0"]
    assert picked(sess, "Gemm") == {"reference"} and y.shape == (40, 100) and y.dtype == np.float32
    w = numpy_helper.to_array(model.graph.initializer[0])
    c = numpy_helper.to_array(model.graph.initializer[1])
    np.testing.assert_allclose(y, x @ w + c, rtol=1e-5, atol=_tol(x, [(64, 100)]))
