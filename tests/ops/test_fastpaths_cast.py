"""Cast and CastLike's declared fast paths (onnxrt.fastpaths.cast) against the reference kernel (numpy's astype)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt import native
from tests.helpers import make_single_node_model
from tests.ops.fastpath_check import check_path, picked

F, H = TensorProto.FLOAT, TensorProto.FLOAT16


def _values(n: int, dtype) -> np.ndarray:
    rng = np.random.default_rng(n)
    if dtype == np.float32:  # normal, subnormal-half, overflowing and special values
        x = (rng.standard_normal(n) * np.exp2(rng.integers(-30, 20, n))).astype(np.float32)
        x[:6] = [np.nan, np.inf, -np.inf, -0.0, 65520.0, 65519.0]
        return x
    return rng.integers(0, 1 << 16, n, dtype=np.uint16).view(np.float16)  # every kind of half, NaNs included


@pytest.mark.parametrize("n", [5000, 1 << 17])
@pytest.mark.parametrize("src, dst", [(F, H), (H, F)])
def test_cast_f16_bits(n, src, dst):
    sdt, ddt = (np.float32, np.float16) if src == F else (np.float16, np.float32)
    x = _values(n, sdt)
    model = make_single_node_model("Cast", [("x", src, [n])], [("y", dst, [n])], opset=19, to=dst)
    fast, _ = check_path(model, {"x": x}, "Cast", "compiled f16 bits")
    assert fast[0].dtype == ddt and fast[0].shape == (n,)
    np.testing.assert_array_equal(fast[0].view(np.uint16 if ddt == np.float16 else np.uint32),
                                  x.astype(ddt).view(np.uint16 if ddt == np.float16 else np.uint32))


def test_castlike_f16_bits_and_the_numpy_passes():
    n = 1 << 17
    x = _values(n, np.float32)
    node = helper.make_node("CastLike", ["x", "t"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", F, [n]), helper.make_tensor_value_info("t", H, [1])],
                          [helper.make_tensor_value_info("y", H, [n])])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)])
    feeds = {"x": x, "t": np.zeros(1, np.float16)}
    fast, _ = check_path(model, feeds, "CastLike", "compiled f16 bits")
    np.testing.assert_array_equal(fast[0].view(np.uint16), x.astype(np.float16).view(np.uint16))
    # compiled kernels off for this thread: the numpy passes on the bits
    sess = onnxrt.OnnxInference(model)
    with native.disabled():
        sess.run(feeds)
        y = sess.run(feeds)["y"]
    assert picked(sess, "CastLike") == {"f16 bits"} and y.dtype == np.float16
    np.testing.assert_array_equal(y.view(np.uint16), x.astype(np.float16).view(np.uint16))


def test_small_and_other_casts_stay_on_the_reference():
    x = np.arange(2000, dtype=np.float32)
    sess = onnxrt.OnnxInference(make_single_node_model("Cast", [("x", F, [2000])], [("y", TensorProto.DOUBLE, [2000])],
                                                       opset=19, to=TensorProto.DOUBLE))
    sess.run({"x": x})
    y = sess.run({"x": x})["y"]
    assert picked(sess, "Cast") == {"reference"} and y.dtype == np.float64
    np.testing.assert_array_equal(y, x)
    x = np.arange(100, dtype=np.float32)
    sess = onnxrt.OnnxInference(make_single_node_model("Cast", [("x", F, [100])], [("y", H, [100])], opset=19, to=H))
    sess.run({"x": x})
    assert picked(sess, "Cast") == {"reference"} and sess.run({"x": x})["y"].dtype == np.float16
