"""Transpose's declared fast path (onnxrt.fastpaths.transpose) against the reference kernel."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto

import onnxrt
from tests.helpers import make_single_node_model
from tests.ops.fastpath_check import check_path, picked


@pytest.mark.parametrize("shape, perm", [((300, 200), [1, 0]), ((4, 64, 90), [0, 2, 1]), ((2, 3, 50, 70), [0, 1, 3, 2]),
                                         ((2, 6, 40, 50), [0, 2, 3, 1])])
@pytest.mark.parametrize("dtype, elem", [(np.float32, TensorProto.FLOAT), (np.int32, TensorProto.INT32)])
def test_compiled_2d_blocks(shape, perm, dtype, elem):
    """Batched 2-D transposes once merged ((2,6,40,50) by (0,2,3,1) is (2, 6, 2000) swapping the last two): a copy, bit-exact."""
    x = np.random.default_rng(0).integers(-1000, 1000, shape).astype(dtype)
    out = [shape[p] for p in perm]
    model = make_single_node_model("Transpose", [("x", elem, list(shape))], [("y", elem, out)], opset=13, perm=perm)
    fast, _ = check_path(model, {"x": x}, "Transpose", "compiled 2-D blocks")
    assert fast[0].shape == tuple(out) and fast[0].dtype == dtype
    np.testing.assert_array_equal(fast[0], np.transpose(x, perm))


def test_other_permutations_and_types_stay_on_the_reference():
    x = np.arange(2 * 30 * 40 * 50, dtype=np.float64).reshape(2, 30, 40, 50)  # 8-byte values
    model = make_single_node_model("Transpose", [("x", TensorProto.DOUBLE, list(x.shape))],
                                   [("y", TensorProto.DOUBLE, [2, 40, 50, 30])], opset=13, perm=[0, 2, 3, 1])
    sess = onnxrt.OnnxInference(model)
    sess.run({"x": x})
    y = sess.run({"x": x})["y"]
    assert picked(sess, "Transpose") == {"reference"}
    np.testing.assert_array_equal(y, x.transpose(0, 2, 3, 1))
    x32 = x.astype(np.float32)  # (1, 0, 3, 2) swaps two pairs: no batched 2-D transpose
    model = make_single_node_model("Transpose", [("x", TensorProto.FLOAT, list(x.shape))],
                                   [("y", TensorProto.FLOAT, [30, 2, 50, 40])], opset=13, perm=[1, 0, 3, 2])
    sess = onnxrt.OnnxInference(model)
    sess.run({"x": x32})
    y = sess.run({"x": x32})["y"]
    assert picked(sess, "Transpose") == {"reference"} and y.dtype == np.float32
    np.testing.assert_array_equal(y, x32.transpose(1, 0, 3, 2))
