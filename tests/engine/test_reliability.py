"""Bad models, bad feeds, kernel failures and absurd allocations: onnxrt's own errors, naming the node."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.errors import AllocationError, InvalidAttributeError, KernelError

from ..helpers import make_single_node_model

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _run_single(op, inputs, feeds, outputs=(("y", F, None),), opset=18, **atts):
    model = make_single_node_model(op, list(inputs), list(outputs), opset=opset, node_name=f"the_{op.lower()}", **atts)
    return onnxrt.InferenceSession(model).run(None, feeds)


def test_constant_of_shape_of_2_pow_60_fails_fast():
    with pytest.raises(AllocationError, match=r"Node 'the_constantofshape' \(ConstantOfShape\).*above the limit"):
        _run_single("ConstantOfShape", [("shape", I64, [2])], {"shape": np.array([2**30, 2**30], np.int64)})


def test_tile_and_expand_to_huge_shapes_fail_fast():
    with pytest.raises(AllocationError, match=r"'the_tile' \(Tile\)"):
        _run_single("Tile", [("x", F, [2, 2]), ("r", I64, [2])], {"x": np.ones((2, 2), np.float32), "r": np.array([2**31, 2**31], np.int64)})
    with pytest.raises(AllocationError, match=r"'the_expand' \(Expand\)"):
        _run_single("Expand", [("x", F, [1]), ("s", I64, [3])], {"x": np.ones(1, np.float32), "s": np.array([2**25, 2**25, 2**25], np.int64)})


def test_session_cap_on_tensor_bytes():
    model = make_single_node_model("ConstantOfShape", [("shape", I64, [1])], [("y", F, None)], node_name="cos")
    opts = onnxrt.SessionOptions()
    opts.max_tensor_bytes = 1000
    sess = onnxrt.InferenceSession(model, opts)
    (ok,) = sess.run(None, {"shape": np.array([100], np.int64)})  # 400 bytes of float32 zeros... as float32
    assert ok.shape == (100,) and ok.dtype == np.float32
    with pytest.raises(AllocationError, match="above the limit of 1000 bytes"):
        sess.run(None, {"shape": np.array([1000], np.int64)})
    # without the cap the same request runs
    (big,) = onnxrt.InferenceSession(model).run(None, {"shape": np.array([1000], np.int64)})
    assert big.shape == (1000,)


def test_impossible_reshape_names_node_and_shapes():
    with pytest.raises(KernelError) as exc:
        _run_single("Reshape", [("x", F, [2, 3]), ("s", I64, [2])], {"x": np.zeros((2, 3), np.float32), "s": np.array([4, 2], np.int64)})
    msg = str(exc.value)
    assert "'the_reshape' (Reshape)" in msg and "float32[2,3]" in msg and "int64[2]" in msg


def test_broadcast_mismatch_names_node():
    with pytest.raises(KernelError, match=r"'the_add' \(Add\) failed on inputs \[a: float32\[2,3\], b: float32\[4\]\]"):
        _run_single("Add", [("a", F, [2, 3]), ("b", F, [4])], {"a": np.zeros((2, 3), np.float32), "b": np.zeros(4, np.float32)})


def test_gather_index_out_of_range_names_index():
    with pytest.raises(onnxrt.IndexOutOfRangeError, match=r"'the_gather' \(Gather\).*holds 5, out of range \[-3, 2\]"):
        _run_single("Gather", [("x", F, [3]), ("i", I64, [1])], {"x": np.zeros(3, np.float32), "i": np.array([5], np.int64)})


def test_repeated_axis_in_transpose_permutation():
    model = make_single_node_model("Transpose", [("x", F, [2, 3])], [("y", F, None)], node_name="tr", perm=[0, 0])
    with pytest.raises((InvalidAttributeError, KernelError), match=r"'tr' \(Transpose\)"):
        onnxrt.InferenceSession(model).run(None, {"x": np.zeros((2, 3), np.float32)})


def test_nan_and_empty_feeds_flow_as_the_spec_says():
    (y,) = _run_single("Relu", [("x", F, [None])], {"x": np.array([np.nan, -1.0, 2.0], np.float32)}, outputs=(("y", F, [None]),))
    assert np.isnan(y[0]) and y[1] == 0 and y[2] == 2 and y.dtype == np.float32
    (y,) = _run_single("Relu", [("x", F, [None])], {"x": np.zeros(0, np.float32)}, outputs=(("y", F, [None]),))
    assert y.shape == (0,) and y.dtype == np.float32


def test_sequence_where_tensor_expected():
    # a list fed to a tensor input is converted as onnxruntime converts it: [array] is [1, 2]
    with pytest.raises(onnxrt.InvalidFeedError, match=r"Input 'x' expects rank 1 \(shape \[2\]\), got rank 2 \(shape \[1, 2\]\)"):
        _run_single("Relu", [("x", F, [2])], {"x": [np.zeros(2, np.float32)]})


def test_wrong_attribute_value_rejected_at_load():
    model = make_single_node_model("ScatterElements", [("d", F, [2]), ("i", I64, [1]), ("u", F, [1])], [("y", F, None)], node_name="sc", reduction="median")
    with pytest.raises(InvalidAttributeError, match=r"Node 'sc' \(ScatterElements\): attribute 'reduction' is 'median'"):
        onnxrt.InferenceSession(model)


def test_unknown_domain_named_at_load():
    model = make_single_node_model("Foo", [("x", F, [2])], [("y", F, None)], domain="com.unknown", node_name="foo")
    with pytest.raises(onnxrt.UnsupportedOperatorError, match=r"'foo' uses operator 'Foo' of domain 'com.unknown'"):
        onnxrt.InferenceSession(model)


def test_model_content_is_never_executed(tmp_path):
    # a string initializer holding Python source stays data
    payload = "__import__('os').system('touch " + str(tmp_path / "pwned") + "')"
    t = numpy_helper.from_array(np.array([payload], dtype=object), "s")
    graph = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["y"])], "g", [], [helper.make_tensor_value_info("y", TensorProto.STRING, [1])], [t]
    )
    (y,) = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])).run(None, {})
    assert y.tolist() == [payload]
    assert not (tmp_path / "pwned").exists()
