"""The convolutions' declared fast paths (onnxrt.fastpaths.conv) against their reference kernels.

Each entry of Conv's table (also FusedConv's and ConvConcat's segments'), and ConvTranspose's
and ConvConcat's own, is taken by a model whose inputs make it apply; the session must pick it
and agree with a session on the reference kernels within float32 rounding of the sums.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

from onnxrt import dispatch
from onnxrt.fastpaths import conv as fp
from onnxrt.ops_cpu.op_conv import conv
from onnxrt.ops_cpu.op_conv_transpose import conv_transpose
from tests.ops.fastpath_check import check_path, f32_sum_tol

F, D = TensorProto.FLOAT, TensorProto.DOUBLE
_ELEM = {np.dtype(np.float32): F, np.dtype(np.float64): D}


def _conv_model(x_shape, w, b=None, dtype=np.float32, relu=False, op="Conv", **atts):
    """Conv (+ Relu: the optimiser makes it a FusedConv) with W and B as initializers."""
    elem = _ELEM[np.dtype(dtype)]
    inits = [numpy_helper.from_array(w.astype(dtype), "w")]
    ins = ["x", "w"]
    if b is not None:
        inits.append(numpy_helper.from_array(b.astype(dtype), "b"))
        ins.append("b")
    nodes = [helper.make_node(op, ins, ["c" if relu else "y"], **atts)]
    if relu:
        nodes.append(helper.make_node("Relu", ["c"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", elem, list(x_shape))],
                              [helper.make_tensor_value_info("y", elem, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _bound(x, w, b, depth_factor: float = 1.0, **atts) -> float:
    """K * eps * max sum |x| |w| (+ |b|): two float32 orders of a sum of K = C/group * prod(K) terms."""
    depth = w.shape[1] * int(np.prod(w.shape[2:]))
    scale = conv(np.abs(x).astype(np.float64), np.abs(w).astype(np.float64),
                 None if b is None else np.abs(b).astype(np.float64), **atts)
    return f32_sum_tol(int(depth * depth_factor) + 1, float(scale.max()))


#: path -> (x shape, w shape, attributes, dtype, with a bias): inputs that make it apply
_CONV_CASES = {
    "prepared 1x1": ((1, 128, 28, 28), (64, 128, 1, 1), {}, np.float32, True),
    "prepared small 1x1": ((1, 144, 1, 1), (6, 144, 1, 1), {}, np.float32, True),
    "prepared grouped 1x1": ((1, 128, 28, 28), (128, 32, 1, 1), {"group": 4}, np.float32, True),
    "prepared depthwise": ((1, 96, 28, 28), (96, 1, 3, 3), {"group": 96, "pads": [1] * 4}, np.float32, True),
    "prepared winograd": ((1, 64, 28, 28), (48, 64, 3, 3), {"pads": [1] * 4}, np.float32, True),
    "prepared im2col": ((1, 16, 30, 30), (64, 16, 3, 3), {"pads": [1] * 4}, np.float32, True),
    "pointwise groups on the team": ((2, 128, 28, 28), (128, 32, 1, 1), {"group": 4}, np.float32, True),
    "1x1": ((2, 16, 12, 12), (24, 16, 1, 1), {"strides": [2, 2]}, np.float32, True),
    "depthwise compiled": ((2, 32, 20, 20), (32, 1, 3, 3), {"group": 32, "pads": [1, 0, 2, 1]}, np.float32, True),
    "depthwise": ((2, 8, 10, 11), (16, 1, 3, 3), {"group": 8, "strides": [2, 1]}, np.float64, False),
    "winograd": ((2, 64, 16, 16), (40, 64, 3, 3), {"pads": [1] * 4}, np.float32, True),
    "bands": ((1, 8, 60, 60), (16, 8, 3, 3), {"pads": [1] * 4}, np.float32, True),
    "im2col compiled": ((2, 8, 20, 20), (12, 4, 3, 3), {"group": 2, "strides": [2, 2], "dilations": [1, 2]},
                        np.float32, True),
    "im2col same": ((2, 8, 21), (6, 8, 3), {"pads": [1, 1]}, np.float32, True),
    "im2col": ((2, 4, 7, 6, 5), (6, 2, 3, 2, 3), {"group": 2, "strides": [2, 1, 1], "pads": [1, 0, 1, 0, 1, 1]},
               np.float32, False),
}


@pytest.mark.parametrize("path", sorted(_CONV_CASES))
def test_each_entry_of_conv_s_table(path):
    xs, ws, atts, dtype, with_bias = _CONV_CASES[path]
    rng = np.random.default_rng(len(path))
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(ws[0]).astype(dtype) if with_bias else None
    factor = 16.0 if "winograd" in path else 1.0  # Winograd's transforms: see fastpaths.conv.winograd
    tol = _bound(x, w, b, factor, **atts) if dtype == np.float32 else 1e-12 * float(np.abs(x).max() * np.abs(w).sum())
    fast, ref = check_path(_conv_model(xs, w, b, dtype, **atts), {"x": x}, "Conv", path, atol=tol)
    want = conv(x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64), **atts)
    assert fast[0].shape == want.shape and fast[0].dtype == dtype
    np.testing.assert_allclose(fast[0], want, rtol=0, atol=2 * tol)


def _compiled_inputs(seed: int, xs, ws) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """float32 X, W and B of these shapes (a test of compiled paths: skipped without them)."""
    if fp.native.kernels() is None:
        pytest.skip("no compiled kernels")
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32),
            rng.standard_normal(ws[0]).astype(np.float32))


@pytest.mark.parametrize("path, xs, ws, atts", [
    ("prepared im2col", (1, 16, 30, 30), (64, 16, 3, 3), {"pads": [1] * 4}),
    ("prepared winograd", (1, 64, 28, 28), (48, 64, 3, 3), {"pads": [1] * 4}),
    ("bands", (2, 8, 60, 60), (16, 8, 3, 3), {"pads": [1] * 4}),
    ("depthwise compiled", (2, 32, 20, 20), (32, 1, 3, 3), {"group": 32, "pads": [1] * 4}),
])
def test_fused_conv_takes_the_same_table(path, xs, ws, atts):
    """Conv + Relu is one FusedConv node: its paths are Conv's entries, the bias and Relu in the epilogue."""
    x, w, b = _compiled_inputs(7, xs, ws)
    factor = 16.0 if "winograd" in path else 1.0
    fast, _ = check_path(_conv_model(xs, w, b, relu=True, **atts), {"x": x}, "FusedConv", path,
                         atol=_bound(x, w, b, factor, **atts))
    assert (fast[0] >= 0).all() and (fast[0] == 0).any()


@pytest.mark.parametrize("path, xs, ws, atts", [
    ("prepared 1x1", (1, 64, 20, 20), (96, 64, 1, 1), {}),
    ("prepared depthwise", (1, 48, 20, 20), (48, 1, 3, 3), {"group": 48, "pads": [1] * 4}),
    ("prepared im2col", (1, 16, 30, 30), (64, 16, 3, 3), {"pads": [1] * 4}),
])
def test_a_relu_without_bias_takes_the_prepared_entries(path, xs, ws, atts):
    """Conv without B + Relu (convolutions whose normalisation an exporter folded away): the
    parts' epilogue applies the Relu alone."""
    x, w, _ = _compiled_inputs(13, xs, ws)
    fast, _ = check_path(_conv_model(xs, w, None, relu=True, **atts), {"x": x}, "FusedConv", path,
                         atol=_bound(x, w, None, **atts))
    want = np.maximum(conv(x.astype(np.float64), w.astype(np.float64), None, **atts), 0)
    assert fast[0].shape == want.shape and fast[0].dtype == np.float32
    np.testing.assert_allclose(fast[0], want, rtol=0, atol=2 * _bound(x, w, None, **atts))
    assert (fast[0] >= 0).all() and (fast[0] == 0).any()


@pytest.mark.parametrize("act, attrs", [("Sigmoid", {}), ("HardSigmoid", {"alpha": 1 / 6, "beta": 0.5}), ("Relu", {}),
                                         ("LeakyRelu", {"alpha": 0.1})])
@pytest.mark.parametrize("xs, ws", [((1, 48, 1, 1), (1152, 48, 1, 1)), ((1, 96, 3, 3), (24, 96, 1, 1))])
def test_a_squeeze_excitation_conv_takes_the_small_prepared_entry_with_its_activation(act, attrs, xs, ws):
    """A 1x1 below the team's size (a squeeze-excitation's gate on one pixel) with any fused
    activation: one product, then the bias and the activation, as the frame applies them."""
    x, w, b = _compiled_inputs(11, xs, ws)
    model = _conv_model(xs, w, b)
    model.graph.node[0].output[0] = "c"
    model.graph.node.append(helper.make_node(act, ["c"], ["y"], **attrs))
    fast, _ = check_path(model, {"x": x}, "FusedConv", "prepared small 1x1", atol=_bound(x, w, b))
    want = conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64))
    assert fast[0].shape == want.shape and fast[0].dtype == np.float32
    if act == "Sigmoid":
        np.testing.assert_allclose(fast[0], 1 / (1 + np.exp(-want)), rtol=1e-5, atol=_bound(x, w, b))


def _fire_model(n: int):
    """squeezenet's fire module: a 1x1 squeeze, then a 1x1 and a 3x3 expand concatenated."""
    rng = np.random.default_rng(3)
    inits = {name: rng.standard_normal(shape).astype(np.float32) * 0.3 for name, shape in [
        ("ws", (8, 16, 1, 1)), ("bs", (8,)), ("w1", (24, 8, 1, 1)), ("b1", (24,)), ("w3", (20, 8, 3, 3)), ("b3", (20,))]}
    nodes = [helper.make_node("Conv", ["x", "ws", "bs"], ["s"]), helper.make_node("Relu", ["s"], ["sr"]),
             helper.make_node("Conv", ["sr", "w1", "b1"], ["e1"]), helper.make_node("Relu", ["e1"], ["r1"]),
             helper.make_node("Conv", ["sr", "w3", "b3"], ["e3"], pads=[1] * 4), helper.make_node("Relu", ["e3"], ["r3"]),
             helper.make_node("Concat", ["r1", "r3"], ["y"], axis=1)]
    graph = helper.make_graph(nodes, "fire", [helper.make_tensor_value_info("x", F, [n, 16, 30, 30])],
                              [helper.make_tensor_value_info("y", F, None)],
                              [numpy_helper.from_array(v, k) for k, v in inits.items()])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("n, path", [(1, "blocks"), (2, "segments")])
def test_conv_concat_paths(n, path):
    """One image: each segment's path writes its block of the output; two: the segments, then Concat."""
    x = np.random.default_rng(4).standard_normal((n, 16, 30, 30)).astype(np.float32)
    # the sums have depth 8 x 9 of terms of magnitude |s| 0.3 with |s| up to ~10: a loose float32 bound
    fast, ref = check_path(_fire_model(n), {"x": x}, "ConvConcat", path, atol=f32_sum_tol(73, 30.0))
    assert fast[0].shape == (n, 44, 30, 30) and (fast[0] >= 0).all()


def _transpose_model(x_shape, w, dtype, **atts):
    elem = _ELEM[np.dtype(dtype)]
    graph = helper.make_graph([helper.make_node("ConvTranspose", ["x", "w"], ["y"], **atts)], "g",
                              [helper.make_tensor_value_info("x", elem, list(x_shape))],
                              [helper.make_tensor_value_info("y", elem, None)],
                              [numpy_helper.from_array(w.astype(dtype), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("path, xs, ws, atts, dtype", [
    ("col2im compiled", (2, 8, 9, 7), (8, 6, 4, 4), {"strides": [2, 2], "pads": [1, 1, 1, 1]}, np.float32),
    ("col2im compiled", (1, 4, 5, 6), (4, 3, 3, 2), {"dilations": [2, 1], "output_padding": [0, 0]}, np.float32),
    ("col2im phased", (2, 4, 9), (4, 3, 4), {"strides": [3], "pads": [1, 2], "output_padding": [1]}, np.float32),
    ("col2im phased", (1, 4, 5, 6), (4, 2, 3, 3), {"strides": [2, 3], "group": 2, "output_padding": [1, 0]},
     np.float64),
])
def test_conv_transpose_paths(path, xs, ws, atts, dtype):
    """The scatter-add of ConvTranspose's columns: the compiled loop (2-D float32) and the
    phase planes (strides): each output sums the same taps in the same order as the reference."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    # each output: at most prod(K) taps, each a sum of C/group products
    depth = xs[1] // atts.get("group", 1) * int(np.prod(ws[2:]))
    scale = float(np.abs(x).max() * np.abs(w).max()) * depth
    tol = f32_sum_tol(depth, scale) if dtype == np.float32 else 1e-13 * scale
    fast, _ = check_path(_transpose_model(xs, w, dtype, **atts), {"x": x}, "ConvTranspose", path, atol=tol)
    want = conv_transpose(x.astype(np.float64), w.astype(np.float64), **atts)
    assert fast[0].shape == want.shape and fast[0].dtype == dtype
    np.testing.assert_allclose(fast[0], want, rtol=0, atol=2 * tol)


def test_the_table_is_one_ordered_list_shared_by_conv_and_fused_conv():
    """Conv and FusedConv declare the same entries in the same order (one table), prepared first."""
    names = [p.name for p in dispatch.paths_for("Conv")]
    assert names == [p.name for p in dispatch.paths_for("FusedConv", "onnxrt")]
    assert [p.fn for p in dispatch.paths_for("Conv")] == [p.fn for p in dispatch.paths_for("FusedConv", "onnxrt")]
    assert names[:6] == ["prepared 1x1", "prepared small 1x1", "prepared grouped 1x1", "prepared depthwise",
                         "prepared winograd", "prepared im2col"]
    assert all(p.prepared == p.name.startswith("prepared") for p in dispatch.paths_for("Conv"))
    assert names[-1] == "im2col" and not dispatch.paths_for("Conv")[-1].native
    assert set(names) == set(_CONV_CASES)
    for p in dispatch.paths_for("Conv") + dispatch.paths_for("ConvTranspose") + dispatch.paths_for("ConvConcat", "onnxrt"):
        assert p.doc and p.module == fp.__name__


def test_feed_weights_never_take_winograd_or_a_prepared_executor():
    """W a feed (it may change between runs): the direct entries; nothing derived from W is kept."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
    w = rng.standard_normal((48, 64, 3, 3)).astype(np.float32)
    graph = helper.make_graph([helper.make_node("Conv", ["x", "w"], ["y"], pads=[1] * 4)], "g",
                              [helper.make_tensor_value_info("x", F, [1, 64, 28, 28]),
                               helper.make_tensor_value_info("w", F, [48, 64, 3, 3])],
                              [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    fast, _ = check_path(model, {"x": x, "w": w}, "Conv", "im2col compiled", atol=_bound(x, w, None, pads=[1] * 4))
    assert fast[0].shape == (1, 48, 28, 28)
