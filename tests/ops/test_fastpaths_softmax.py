"""Softmax/LogSoftmax's declared fast paths (onnxrt.fastpaths.softmax) against the reference kernel."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

from tests.helpers import make_single_node_model
from tests.ops.fastpath_check import check_path

F = TensorProto.FLOAT


def _model(op, shape, elem=F, opset=13, **attrs):
    return make_single_node_model(op, [("x", elem, list(shape))], [("y", elem, list(shape))], opset=opset, **attrs)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("shape, axis, opset", [((8, 1000), -1, 13), ((4, 3, 64), 2, 13), ((6, 4, 20), 1, 11),
                                                ((300, 40, 30), -1, 13)])
def test_compiled_rows(op, shape, axis, opset):
    x = (np.random.default_rng(1).standard_normal(shape) * 4).astype(np.float32)
    fast, ref = check_path(_model(op, shape, opset=opset, axis=axis), {"x": x}, op, "compiled rows",
                           rtol=4e-6, atol=5e-7 if op == "LogSoftmax" else 1e-30)
    # each probability is exp(x - max) / sum: within a few ulp of the float64 result
    lane = int(np.prod(shape[axis:])) if opset < 13 else shape[axis]
    xx = x.reshape(-1, lane).astype(np.float64)
    e = np.exp(xx - xx.max(axis=1, keepdims=True))
    exact = (np.log(e / e.sum(axis=1, keepdims=True)) if op == "LogSoftmax" else e / e.sum(axis=1, keepdims=True))
    np.testing.assert_allclose(fast[0].reshape(-1, lane), exact, rtol=1e-5, atol=1e-6 if op == "LogSoftmax" else 1e-30)


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax"])
@pytest.mark.parametrize("dtype, elem", [(np.float64, TensorProto.DOUBLE), (np.float32, F)])
def test_pool_lanes(op, dtype, elem):
    """Lanes along axis 1 of a 256K+ element input: the pool's blocks give the reference's bits."""
    shape = (64, 128, 40)
    x = (np.random.default_rng(2).standard_normal(shape) * 3).astype(dtype)
    fast, _ = check_path(_model(op, shape, elem, axis=1), {"x": x}, op, "pool lanes")
    assert fast[0].dtype == dtype and fast[0].shape == shape
    s = np.exp(fast[0]).sum(axis=1) if op == "LogSoftmax" else fast[0].sum(axis=1)
    np.testing.assert_allclose(s, 1.0, rtol=128 * np.finfo(dtype).eps * 4)


def test_small_and_first_axis_inputs_stay_on_the_reference():
    from tests.ops.fastpath_check import picked
    import onnxrt

    x = np.ones((4, 8), np.float32)
    sess = onnxrt.OnnxInference(_model("Softmax", (4, 8), axis=-1))
    sess.run({"x": x})
    y = sess.run({"x": x})["y"]
    assert picked(sess, "Softmax") == {"reference"}
    np.testing.assert_array_equal(y, np.full((4, 8), 0.125, np.float32))
    x = np.ones((600, 500), np.float32)
    sess = onnxrt.OnnxInference(_model("Softmax", (600, 500), axis=0))
    sess.run({"x": x})
    y = sess.run({"x": x})["y"]
    assert picked(sess, "Softmax") == {"reference"} and y.dtype == np.float32
    np.testing.assert_allclose(y, 1 / 600, rtol=1e-6)
