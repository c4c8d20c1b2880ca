"""FusedElementwise: the optimiser's grouping of element-wise chains (onnxrt.optim.fuse_elementwise),
its reference kernel (the nodes' own kernels in turn) and the compiled loop generated per program."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto as T
from onnx import helper

import onnxrt

from .fastpath_check import check_path

F32_EPS = float(np.finfo(np.float32).eps)


def _model(nodes, inputs, consts=(), opset=17, outputs=("y",), dtype=T.FLOAT):
    g = helper.make_graph(
        nodes, "chain",
        [helper.make_tensor_value_info(n, dtype, s) for n, s in inputs],
        [helper.make_tensor_value_info(o, dtype, None) for o in outputs],
        [helper.make_tensor(n, dtype, np.shape(v), np.ravel(v)) for n, v in consts],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _n(op, ins, out, **atts):
    return helper.make_node(op, ins, [out], **atts)


def _steps(sess: onnxrt.OnnxInference) -> list[str]:
    return [st.op_type for st in sess.plan.steps]


def _unoptimised(model, feeds):
    """The outputs of the graph as written, on the reference kernels."""
    so = onnxrt.SessionOptions()
    so.fast_paths = False
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    return onnxrt.OnnxInference(model, options=so).run(feeds)


S = [2, 8, 24, 24]
#: (name, nodes, constants, extra inputs (name, shape)): the exporters' chains
CHAINS = [
    ("silu", [_n("Sigmoid", ["x"], "s"), _n("Mul", ["x", "s"], "y")], [], []),
    ("gelu_erf", [_n("Div", ["x", "sq2"], "d"), _n("Erf", ["d"], "e"), _n("Add", ["e", "one"], "a"),
                  _n("Mul", ["x", "a"], "m"), _n("Mul", ["m", "half"], "y")],
     [("sq2", np.float32(1.4142135)), ("one", np.float32(1)), ("half", np.float32(0.5))], []),
    ("gelu_tanh", [_n("Pow", ["x", "three"], "p"), _n("Mul", ["p", "c"], "pc"), _n("Add", ["x", "pc"], "in"),
                   _n("Mul", ["in", "k"], "ik"), _n("Tanh", ["ik"], "t"), _n("Add", ["t", "one"], "t1"),
                   _n("Mul", ["x", "t1"], "xt"), _n("Mul", ["xt", "half"], "y")],
     [("three", np.float32(3)), ("c", np.float32(0.044715)), ("k", np.float32(0.7978846)), ("one", np.float32(1)),
      ("half", np.float32(0.5))], []),
    ("hardswish_decomposed", [_n("Add", ["x", "three"], "a"), _n("Clip", ["a", "zero", "six"], "c"),
                              _n("Div", ["c", "six"], "d"), _n("Mul", ["x", "d"], "y")],
     [("three", np.float32(3)), ("zero", np.float32(0)), ("six", np.float32(6))], []),
    ("norm_tail", [_n("Sqrt", ["v"], "sd"), _n("Div", ["x", "sd"], "n"), _n("Mul", ["n", "gamma"], "g"),
                   _n("Add", ["g", "beta"], "y")],
     [("gamma", np.linspace(0.5, 2, 24, dtype=np.float32)), ("beta", np.linspace(-1, 1, 24, dtype=np.float32))],
     [("v", [2, 8, 24, 1])]),
    ("se_gate", [_n("HardSigmoid", ["g"], "h", alpha=1 / 6, beta=0.5), _n("Mul", ["x", "h"], "y")], [],
     [("g", [2, 8, 1, 1])]),
    ("misc", [_n("Abs", ["x"], "a"), _n("Neg", ["a"], "b"), _n("Exp", ["b"], "c"), _n("Max", ["c", "x"], "d"),
              _n("Min", ["d", "q"], "e"), _n("LeakyRelu", ["e"], "f", alpha=0.1), _n("Relu", ["f"], "g"),
              _n("Mul", ["g", "x"], "h"), _n("HardSwish", ["h"], "i"), _n("Add", ["i", "two"], "j"),
              _n("Reciprocal", ["j"], "y")],
     [("two", np.float32(2))], [("q", [24])]),
]


def _feeds(extra, seed=0):
    rng = np.random.default_rng(seed)
    feeds = {"x": (rng.standard_normal(S) * 4).astype(np.float32)}
    for name, shape in extra:
        feeds[name] = (rng.random(shape) + 0.5).astype(np.float32)
    return feeds


@pytest.mark.parametrize("case", CHAINS, ids=[c[0] for c in CHAINS])
def test_a_chain_becomes_one_node_with_the_values_of_the_nodes(case):
    name, nodes, consts, extra = case
    model = _model(nodes, [("x", S)] + extra, consts)
    feeds = _feeds(extra)
    so = onnxrt.SessionOptions()
    so.fast_paths = False
    sess = onnxrt.OnnxInference(model, options=so)
    assert _steps(sess) == ["FusedElementwise"], _steps(sess)
    got = sess.run(feeds)["y"]
    expected = _unoptimised(model, feeds)["y"]
    assert got.dtype == np.float32 and got.shape == expected.shape == tuple(S)
    if name == "gelu_tanh":
        # Pow(x, 3) became (x * x) * x: two roundings instead of pow's one
        np.testing.assert_allclose(got, expected, rtol=8 * F32_EPS, atol=8 * F32_EPS)
    else:
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("case", CHAINS, ids=[c[0] for c in CHAINS])
def test_the_compiled_loop_agrees_with_the_reference(case):
    name, nodes, consts, extra = case
    model = _model(nodes, [("x", S)] + extra, consts)
    # exp, tanh, sigmoid and erf within a few ulp, carried through the chain's products
    check_path(model, _feeds(extra, 1), "FusedElementwise", "compiled program", rtol=32 * F32_EPS, atol=1e-6)


def test_special_values_flow_through_the_compiled_loop():
    nodes = [_n("Sigmoid", ["x"], "s"), _n("Mul", ["x", "s"], "m"), _n("Tanh", ["m"], "t"), _n("Add", ["t", "x"], "y")]
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-30, -1e-30, 20.0, -20.0, 90.0, -90.0] * 100, np.float32)
    fast, ref = check_path(_model(nodes, [("x", [x.size])]), {"x": x}, "FusedElementwise", "compiled program",
                           rtol=16 * F32_EPS, atol=1e-30)
    np.testing.assert_array_equal(np.isnan(fast[0]), np.isnan(ref[0]))


def test_clip_with_attributes_and_without_bounds():
    x = np.linspace(-10, 10, 4096, dtype=np.float32)
    m6 = _model([_n("Clip", ["x"], "c", min=-2.0, max=3.0), _n("Mul", ["c", "x"], "y")], [("x", [4096])], opset=10)
    check_path(m6, {"x": x}, "FusedElementwise", "compiled program")
    m13 = _model([_n("Clip", ["x", "", "hi"], "c"), _n("Neg", ["c"], "n"), _n("Clip", ["n"], "y")],
                 [("x", [4096])], [("hi", np.float32(1.5))])
    check_path(m13, {"x": x}, "FusedElementwise", "compiled program")


def test_a_value_read_outside_or_an_output_is_not_fused_through():
    nodes = [_n("Sigmoid", ["x"], "s"), _n("Mul", ["x", "s"], "m"), _n("Exp", ["m"], "y"), _n("Neg", ["s"], "z")]
    sess = onnxrt.OnnxInference(_model(nodes, [("x", S)], outputs=("y", "z")))
    # s is read by Neg as well: Mul and Exp fuse, Sigmoid and Neg stay
    assert sorted(_steps(sess)) == ["FusedElementwise", "Neg", "Sigmoid"]
    feeds = _feeds([])
    got, expected = sess.run(feeds), _unoptimised(_model(nodes, [("x", S)], outputs=("y", "z")), feeds)
    for k in ("y", "z"):
        np.testing.assert_allclose(got[k], expected[k], rtol=32 * F32_EPS)
    nodes = [_n("Sigmoid", ["x"], "s"), _n("Mul", ["x", "s"], "y"), _n("Exp", ["y"], "z")]
    sess = onnxrt.OnnxInference(_model(nodes, [("x", S)], outputs=("y", "z")))
    assert "FusedElementwise" in _steps(sess) and len(_steps(sess)) == 2


def test_other_types_are_left_to_their_nodes():
    nodes = [_n("Sigmoid", ["x"], "s"), _n("Mul", ["x", "s"], "y")]
    sess = onnxrt.OnnxInference(_model(nodes, [("x", S)], dtype=T.DOUBLE))
    assert _steps(sess) == ["Sigmoid", "Mul"]
    x = np.random.default_rng(0).standard_normal(S)
    y = sess.run({"x": x})["y"]
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-14)


def test_a_broadcast_the_loop_cannot_index_runs_the_reference():
    # b broadcasts along axes 0 and 2 but not 1 and 3: not one block of axes
    nodes = [_n("Mul", ["x", "b"], "m"), _n("Sigmoid", ["m"], "y")]
    model = _model(nodes, [("x", S), ("b", [1, 8, 1, 24])])
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal(S).astype(np.float32), "b": rng.standard_normal([1, 8, 1, 24]).astype(np.float32)}
    sess = onnxrt.OnnxInference(model)
    sess.run(feeds)
    y = sess.run(feeds)["y"]
    assert {r["path"] for r in sess.fast_paths() if r["op_type"] == "FusedElementwise"} == {"reference"}
    # (the reference Sigmoid inside: the unfused graph's own values, bit for bit)
    np.testing.assert_array_equal(y, _unoptimised(model, feeds)["y"])


def test_a_chain_of_more_nodes_than_a_group_takes_is_split():
    nodes = [_n("Neg", ["x" if i == 0 else f"v{i - 1}"], f"v{i}" if i < 29 else "y") for i in range(30)]
    model = _model(nodes, [("x", [64])])
    sess = onnxrt.OnnxInference(model)
    assert _steps(sess) == ["FusedElementwise"] * 3
    x = np.arange(64, dtype=np.float32)
    np.testing.assert_array_equal(sess.run({"x": x})["y"], x)


def test_the_fused_node_keeps_the_type_rules_of_its_nodes():
    # x declares no element type: the chain is not fused (its type is unknown), and an
    # integer feed breaks Sigmoid's rule as unfused
    g = helper.make_graph([_n("Sigmoid", ["x"], "s"), _n("Mul", ["x", "s"], "y")], "g",
                          [helper.make_tensor_value_info("x", T.FLOAT, S)], [helper.make_tensor_value_info("y", T.FLOAT, None)])
    sess = onnxrt.OnnxInference(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    with pytest.raises(onnxrt.errors.OnnxRuntimeError):
        sess.run({"x": np.zeros(S, np.int32)})


# -- a chain fused into the convolution before it (fuse_chain_epilogue) ------------------------


def _conv_chain_model(chain: str, x_shape, cout: int, kernel=(1, 1), group: int = 1, residual: bool = False,
                      extra_reader: bool = False, **conv_atts):
    """Conv (+ Add of a residual) followed by one of CHAINS's single-input chains."""
    rng = np.random.default_rng(2)
    cin = x_shape[1]
    w = (rng.standard_normal((cout, cin // group) + tuple(kernel)) * 0.3).astype(np.float32)
    b = rng.standard_normal(cout).astype(np.float32)
    name, nodes, consts, _ = next(c for c in CHAINS if c[0] == chain)
    conv_out = "cv" if not residual else "cv0"
    body = [helper.make_node("Conv", ["x", "w", "b"], [conv_out], group=group, **conv_atts)]
    if residual:
        body.append(_n("Add", ["cv0", "z"], "cv"))
    renamed = []
    for node in nodes:  # the chain reads the convolution's output
        n = helper.make_node(node.op_type, ["cv" if i == "x" else i for i in node.input], list(node.output))
        n.attribute.extend(node.attribute)
        renamed.append(n)
    outputs = ["y"] + (["cv"] if extra_reader else [])
    inputs = [("x", list(x_shape))]
    if residual:
        inputs.append(("z", None))
    g = helper.make_graph(
        body + renamed, "conv_chain",
        [helper.make_tensor_value_info(n, T.FLOAT, s) for n, s in inputs],
        [helper.make_tensor_value_info(o, T.FLOAT, None) for o in outputs],
        [helper.make_tensor("w", T.FLOAT, w.shape, w.ravel()), helper.make_tensor("b", T.FLOAT, b.shape, b)]
        + [helper.make_tensor(n, T.FLOAT, np.shape(v), np.ravel(v)) for n, v in consts],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def _conv_out_shape(model, x):
    return _unoptimised(model, {"x": x})["y"].shape


@pytest.mark.parametrize("chain", ["silu", "gelu_erf", "gelu_tanh", "hardswish_decomposed"])
@pytest.mark.parametrize("x_shape, cout, kernel, group, atts, path", [
    ((1, 16, 40, 40), 48, (1, 1), 1, {}, "prepared 1x1"),  # the team's blocks by columns
    ((1, 96, 12, 12), 384, (1, 1), 1, {}, "prepared 1x1"),  # by rows
    ((1, 48, 30, 30), 48, (3, 3), 48, {"pads": [1] * 4}, "prepared depthwise"),
    ((1, 40, 31, 31), 40, (5, 5), 40, {"pads": [2] * 4, "strides": [2, 2]}, "prepared depthwise"),
    ((1, 48, 1, 1), 96, (1, 1), 1, {}, "prepared small 1x1"),
    ((2, 16, 20, 20), 24, (1, 1), 1, {}, "1x1"),  # two images: the frame applies the chain after
    ((1, 8, 20, 20), 16, (3, 3), 1, {"pads": [1] * 4}, "prepared im2col"),  # a kind without chains in its parts
])
def test_a_chain_after_a_convolution_runs_in_its_kernels(chain, x_shape, cout, kernel, group, atts, path):
    model = _conv_chain_model(chain, x_shape, cout, kernel, group, **atts)
    x = np.random.default_rng(3).standard_normal(x_shape).astype(np.float32)
    sess = onnxrt.OnnxInference(model)
    assert _steps(sess) == ["FusedConv"]  # the chain went into the convolution
    fused = sess.plan.steps[0]
    ref = _unoptimised(model, {"x": x})["y"]
    if path == "prepared im2col":
        path = "im2col compiled"  # the chain keeps it from the prepared entry; the frame applies it
    # the convolution's sums (depth C/group * K, float32) in another order, then the chain's few ulp
    depth = x_shape[1] // group * int(np.prod(kernel))
    atol = 4 * depth * F32_EPS * float(np.abs(ref).max() + 1)
    fast, reference = check_path(model, {"x": x}, "FusedConv", path, rtol=32 * F32_EPS, atol=atol)
    assert fast[0].shape == ref.shape and fast[0].dtype == np.float32
    np.testing.assert_allclose(fast[0], ref, rtol=32 * F32_EPS, atol=atol)
    # the fused node's reference kernel: the convolution's, then the chain's nodes, as the graph
    # (bits apart only where the grouping wrote Pow(x, 3) as two products: 2 ulp of the cube)
    np.testing.assert_allclose(reference[0], ref, rtol=8 * F32_EPS, atol=8 * F32_EPS * float(np.abs(ref).max()))
    assert fused.op_type == "FusedConv"


def test_a_chain_after_a_residual_joins_the_fused_convolution():
    model = _conv_chain_model("silu", (1, 32, 16, 16), 32, residual=True)
    rng = np.random.default_rng(4)
    feeds = {"x": rng.standard_normal((1, 32, 16, 16)).astype(np.float32),
             "z": rng.standard_normal((1, 32, 16, 16)).astype(np.float32)}
    sess = onnxrt.OnnxInference(model)
    assert _steps(sess) == ["FusedConv"]
    sess.run(feeds)
    got = sess.run(feeds)["y"]
    ref = _unoptimised(model, feeds)["y"]
    assert got.shape == ref.shape and got.dtype == np.float32
    np.testing.assert_allclose(got, ref, rtol=32 * F32_EPS, atol=4 * 32 * F32_EPS * float(np.abs(ref).max() + 1))


def test_a_convolution_read_elsewhere_keeps_its_chain_apart():
    model = _conv_chain_model("silu", (1, 16, 20, 20), 24, extra_reader=True)
    x = np.random.default_rng(5).standard_normal((1, 16, 20, 20)).astype(np.float32)
    sess = onnxrt.OnnxInference(model)
    assert _steps(sess) == ["Conv", "FusedElementwise"]
    got = sess.run({"x": x})
    ref = _unoptimised(model, {"x": x})
    for k in ("y", "cv"):
        np.testing.assert_allclose(got[k], ref[k], rtol=32 * F32_EPS, atol=1e-5)


def test_a_chain_reading_another_tensor_is_not_fused_into_the_convolution():
    # Mul(c, v) with v a feed: the convolution's parts could not read v
    rng = np.random.default_rng(6)
    w = rng.standard_normal((8, 4, 1, 1)).astype(np.float32)
    g = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["c"]), _n("Exp", ["c"], "s"), _n("Mul", ["s", "v"], "y")], "g",
        [helper.make_tensor_value_info("x", T.FLOAT, [1, 4, 8, 8]), helper.make_tensor_value_info("v", T.FLOAT, [1, 8, 8, 8])],
        [helper.make_tensor_value_info("y", T.FLOAT, None)], [helper.make_tensor("w", T.FLOAT, w.shape, w.ravel())])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxrt.OnnxInference(model)
    assert _steps(sess) == ["Conv", "FusedElementwise"]
    feeds = {"x": rng.standard_normal((1, 4, 8, 8)).astype(np.float32), "v": rng.standard_normal((1, 8, 8, 8)).astype(np.float32)}
    np.testing.assert_allclose(sess.run(feeds)["y"], _unoptimised(model, feeds)["y"], rtol=32 * F32_EPS, atol=1e-6)
