"""MaxPool and AveragePool's declared fast path (onnxrt.fastpaths.pool) against the reference kernel."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from tests.ops.fastpath_check import check_path, picked


def _model(op, elem=TensorProto.FLOAT, outputs=("y",), **attrs):
    node = helper.make_node(op, ["x"], list(outputs), **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", elem, None)],
                          [helper.make_tensor_value_info(o, TensorProto.INT64 if o == "i" else elem, None) for o in outputs])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])


CASES = [  # (attributes, shape): the general loop, stride 2 3x3 (pool2d_s2), same-size (pool2d_same)
    (dict(kernel_shape=[2, 3], strides=[1, 2], pads=[1, 0, 0, 1], dilations=[2, 1]), (2, 5, 17, 14)),
    (dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]), (1, 64, 112, 112)),
    (dict(kernel_shape=[3, 3], strides=[1, 1], pads=[1, 1, 1, 1]), (1, 64, 56, 56)),
    (dict(kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1), (2, 3, 10, 10)),
]


@pytest.mark.parametrize("attrs, shape", CASES)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_compiled_2d(op, attrs, shape):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    x[0, 0, :3, :3] = np.nan  # a NaN-only window: NaN
    x[-1, -1, -1, :] = -np.inf
    if op == "AveragePool" and attrs.get("strides") == [2, 2] and attrs.get("pads"):
        attrs = {**attrs, "count_include_pad": 1}
    k = int(np.prod(attrs["kernel_shape"]))
    # max: exact; average: a float32 sum of k window cells in another order, times one
    # inverse count: k * eps * max|x| (the cells are unit normals, below 6)
    tol = 0 if op == "MaxPool" else k * float(np.finfo(np.float32).eps) * 6
    with np.errstate(invalid="ignore"):
        fast, _ = check_path(_model(op, **attrs), {"x": x}, op, "compiled 2-D", rtol=0, atol=tol)
    assert fast[0].dtype == np.float32 and fast[0].ndim == 4 and fast[0].shape[:2] == shape[:2]
    assert np.isnan(fast[0][0, 0, 0, 0])


def test_compiled_2d_float16_and_non_contiguous_inputs():
    x = np.random.default_rng(1).standard_normal((2, 4, 20, 20)).astype(np.float16)
    fast, _ = check_path(_model("MaxPool", TensorProto.FLOAT16, kernel_shape=[3, 3], strides=[2, 2]), {"x": x},
                         "MaxPool", "compiled 2-D")
    assert fast[0].dtype == np.float16 and fast[0].shape == (2, 4, 9, 9)
    view = np.random.default_rng(2).standard_normal((2, 4, 20, 20)).astype(np.float32).transpose(0, 1, 3, 2)
    fast, _ = check_path(_model("MaxPool", kernel_shape=[3, 3], strides=[2, 2]), {"x": view}, "MaxPool", "compiled 2-D")
    np.testing.assert_array_equal(fast[0][0, 0, 0, 0], view[0, 0, :3, :3].max())


def test_indices_lp_and_global_windows_stay_on_the_reference():
    x = np.random.default_rng(3).standard_normal((1, 2, 7, 7)).astype(np.float32)
    for model, op in ((_model("MaxPool", outputs=("y", "i"), kernel_shape=[2, 2]), "MaxPool"),
                      (_model("MaxPool", kernel_shape=[7, 7]), "MaxPool"),
                      (_model("AveragePool", kernel_shape=[3, 3, 3]), "AveragePool")):
        sess = onnxrt.OnnxInference(model)
        feed = x if op != "AveragePool" else x[..., None].repeat(3, -1)
        sess.run({"x": feed})
        y = sess.run({"x": feed})["y"]
        assert picked(sess, op) == {"reference"} and y.dtype == np.float32
    # the 3-D average: a float32 sum of 27 cells (27 * eps relative of the float64 mean's magnitude)
    np.testing.assert_allclose(y[..., 0, 0, 0], feed[..., :3, :3, :3].mean(axis=(2, 3, 4), dtype=np.float64),
                               rtol=27 * 2**-23, atol=27 * 2**-23 * 4)
