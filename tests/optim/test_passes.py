"""Each optimisation pass: it fires on its pattern, and results equal the unoptimised graph's."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt import GraphOptimizationLevel as L

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info(n, t, s) for n, t, s in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _sessions(model):
    out = {}
    for level in (L.ORT_DISABLE_ALL, L.ORT_ENABLE_BASIC, L.ORT_ENABLE_ALL):
        opts = onnxrt.SessionOptions()
        opts.graph_optimization_level = level
        out[level] = onnxrt.InferenceSession(model, opts)
    return out


def _check_equal(model, feeds, rtol=1e-5, atol=1e-6):
    sessions = _sessions(model)
    ref = sessions[L.ORT_DISABLE_ALL].run(None, feeds)
    for level, sess in sessions.items():
        for a, b in zip(sess.run(None, feeds), ref):
            assert a.dtype == b.dtype and a.shape == b.shape
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
    return sessions


def _ops(sess):
    return [st.op_type for st in sess.engine.plan.steps]


def test_disable_all_keeps_graph_as_written():
    model = _model([helper.make_node("Identity", ["x"], ["y"])], [("x", F, [2])], [("y", F, [2])])
    s = _sessions(model)
    assert _ops(s[L.ORT_DISABLE_ALL]) == ["Identity"]
    assert s[L.ORT_DISABLE_ALL].engine.plan.applied_passes == []


def test_identity_and_dropout_removed():
    model = _model(
        [
            helper.make_node("Identity", ["x"], ["a"]),
            helper.make_node("Dropout", ["a"], ["b"]),
            helper.make_node("Relu", ["b"], ["c"]),
            helper.make_node("Identity", ["c"], ["y"]),
        ],
        [("x", F, [3])],
        [("y", F, [3])],
    )
    s = _check_equal(model, {"x": np.array([-1, 0, 2], np.float32)})
    assert _ops(s[L.ORT_ENABLE_BASIC]) == ["Relu"]
    assert s[L.ORT_ENABLE_BASIC].engine.plan.steps[0].node.output[0] == "y"
    # the values removed are still visible on request (from the plan as written)
    (a,) = s[L.ORT_ENABLE_ALL].run(["a"], {"x": np.array([-1, 0, 2], np.float32)})
    np.testing.assert_array_equal(a, [-1, 0, 2])


def test_dropout_with_used_mask_is_kept():
    model = _model([helper.make_node("Dropout", ["x"], ["y", "m"])], [("x", F, [3])], [("y", F, [3]), ("m", TensorProto.BOOL, [3])])
    s = _check_equal(model, {"x": np.ones(3, np.float32)})
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["Dropout"]


def test_dropout_with_a_named_mask_nothing_reads_is_removed():
    # squeezenet's opset-9 Dropout names its mask; nothing reads it, so the node goes
    model = _model(
        [helper.make_node("Dropout", ["x"], ["d", "m"], ratio=0.5), helper.make_node("Relu", ["d"], ["y"])],
        [("x", F, [3])],
        [("y", F, [3])],
        opset=9,
    )
    x = np.array([-1, 0, 2], np.float32)
    s = _check_equal(model, {"x": x})
    assert _ops(s[L.ORT_ENABLE_BASIC]) == ["Relu"]
    # the mask stays visible on request: onnxruntime's zeros for versions 7 and 10, which leave
    # it unspecified (of x's type before opset 10)
    (m,) = s[L.ORT_ENABLE_ALL].run(["m"], {"x": x})
    assert m.dtype == np.float32 and m.shape == (3,)
    np.testing.assert_array_equal(m, [0, 0, 0])


def test_constant_folding_and_dead_nodes():
    model = _model(
        [
            helper.make_node("ConstantOfShape", ["shape"], ["w"], value=numpy_helper.from_array(np.array([0.5], np.float32))),
            helper.make_node("Mul", ["w", "two"], ["w2"]),
            helper.make_node("Add", ["x", "w2"], ["y"]),
            helper.make_node("Neg", ["x"], ["unused"]),
        ],
        [("x", F, [2, 3])],
        [("y", F, [2, 3])],
        [("shape", np.array([2, 3], np.int64)), ("two", np.array(2.0, np.float32))],
    )
    s = _check_equal(model, {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})
    assert _ops(s[L.ORT_ENABLE_BASIC]) == ["Add"]
    plan = s[L.ORT_ENABLE_BASIC].engine.plan
    assert {"fold_constants", "remove_dead_nodes"} <= set(plan.applied_passes)
    assert "shape" not in plan.initializers  # constants nothing reads are dropped


def test_shape_chain_folding():
    # Reshape(x, Concat(Gather(Shape(x), 0), [-1])) with a static input shape folds to a constant shape
    model = _model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Gather", ["s", "zero"], ["n"], axis=0),
            helper.make_node("Unsqueeze", ["n", "axes"], ["n1"]),
            helper.make_node("Concat", ["n1", "minus1"], ["shape"], axis=0),
            helper.make_node("Reshape", ["x", "shape"], ["y"]),
        ],
        [("x", F, [2, 3, 4])],
        [("y", F, [2, 12])],
        [("zero", np.array(0, np.int64)), ("axes", np.array([0], np.int64)), ("minus1", np.array([-1], np.int64))],
    )
    s = _check_equal(model, {"x": np.arange(24, dtype=np.float32).reshape(2, 3, 4)})
    assert _ops(s[L.ORT_ENABLE_BASIC]) == ["Reshape"]


def test_overridable_initializer_is_not_folded():
    graph = helper.make_graph(
        [helper.make_node("Add", ["c", "c"], ["y"])],
        "g",
        [helper.make_tensor_value_info("c", F, [2])],
        [helper.make_tensor_value_info("y", F, [2])],
        [numpy_helper.from_array(np.ones(2, np.float32), "c")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    sess = onnxrt.InferenceSession(model)
    np.testing.assert_array_equal(sess.run(None, {})[0], [2, 2])
    np.testing.assert_array_equal(sess.run(None, {"c": np.array([3, 4], np.float32)})[0], [6, 8])


def _conv_inits(rng, cout=4, cin=3):
    return [
        ("W", rng.standard_normal((cout, cin, 3, 3)).astype(np.float32)),
        ("B", rng.standard_normal(cout).astype(np.float32)),
    ]


def test_conv_batchnorm_folding_and_relu_fusion():
    rng = np.random.default_rng(0)
    inits = _conv_inits(rng) + [
        ("scale", rng.uniform(0.5, 2, 4).astype(np.float32)),
        ("bias", rng.standard_normal(4).astype(np.float32)),
        ("mean", rng.standard_normal(4).astype(np.float32)),
        ("var", rng.uniform(0.5, 2, 4).astype(np.float32)),
    ]
    model = _model(
        [
            helper.make_node("Conv", ["x", "W", "B"], ["c"], pads=[1, 1, 1, 1]),
            helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], epsilon=1e-3),
            helper.make_node("Relu", ["bn"], ["y"]),
        ],
        [("x", F, [1, 3, 8, 8])],
        [("y", F, [1, 4, 8, 8])],
        inits,
    )
    s = _check_equal(model, {"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)}, rtol=1e-4, atol=1e-5)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedConv"]
    assert _ops(s[L.ORT_ENABLE_BASIC]) == ["Conv", "BatchNormalization", "Relu"]


def test_conv_per_channel_mul_add_folding():
    rng = np.random.default_rng(1)
    inits = _conv_inits(rng) + [("k", rng.standard_normal((4, 1, 1)).astype(np.float32)), ("a", rng.standard_normal((1, 4, 1, 1)).astype(np.float32))]
    model = _model(
        [
            helper.make_node("Conv", ["x", "W", "B"], ["c"]),
            helper.make_node("Mul", ["c", "k"], ["m"]),
            helper.make_node("Add", ["a", "m"], ["y"]),
        ],
        [("x", F, [2, 3, 6, 6])],
        [("y", F, [2, 4, 4, 4])],
        inits,
    )
    s = _check_equal(model, {"x": rng.standard_normal((2, 3, 6, 6)).astype(np.float32)}, rtol=1e-4, atol=1e-5)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["Conv"]


def test_matmul_add_into_gemm_and_transpose_folding():
    rng = np.random.default_rng(2)
    model = _model(
        [
            helper.make_node("Transpose", ["w"], ["wt"], perm=[1, 0]),
            helper.make_node("MatMul", ["x", "wt"], ["m"]),
            helper.make_node("Add", ["m", "b"], ["z"]),
            helper.make_node("Sigmoid", ["z"], ["y"]),
        ],
        [("x", F, [5, 6]), ("w", F, [3, 6])],
        [("y", F, [5, 3])],
        [("b", rng.standard_normal(3).astype(np.float32))],
    )
    feeds = {"x": rng.standard_normal((5, 6)).astype(np.float32), "w": rng.standard_normal((3, 6)).astype(np.float32)}
    s = _check_equal(model, feeds)
    ops = _ops(s[L.ORT_ENABLE_ALL])
    assert ops == ["FusedGemm"], ops
    gemm = s[L.ORT_ENABLE_ALL].engine.plan.steps[0]
    assert gemm.op.atts_value.get("transB") == 1


def test_matmul_with_unknown_rank_is_not_turned_into_gemm():
    rng = np.random.default_rng(3)
    model = _model(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
        [("x", F, None)],
        [("y", F, None)],
        [("w", rng.standard_normal((4, 2)).astype(np.float32)), ("b", rng.standard_normal(2).astype(np.float32))],
    )
    s = _check_equal(model, {"x": rng.standard_normal((3, 5, 4)).astype(np.float32)})
    # not a Gemm (rank 2 only): onnxrt's MatMulAdd, a product and its column bias, takes any rank
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["MatMulAdd"]
    for x in (rng.standard_normal(4), rng.standard_normal((2, 3, 5, 4))):
        x = x.astype(np.float32)
        got = s[L.ORT_ENABLE_ALL].run(None, {"x": x})[0]
        ref = s[L.ORT_DISABLE_ALL].run(None, {"x": x})[0]
        assert got.dtype == np.float32 and got.shape == ref.shape == x.shape[:-1] + (2,)
        np.testing.assert_allclose(got, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [[2, 64, 48], [1, 7, 7, 48], [64, 48]])
@pytest.mark.parametrize("bias_first", [False, True])
def test_linear_layer_on_a_stack_of_rows_into_matmul_add(shape, bias_first):
    """MatMul(A, constant B) + constant C of B's column count: MatMulAdd for A of rank 3 and
    more (rank 2 becomes Gemm), the same values as the unfused graph, for float32 (fast path)
    and float64 (reference)."""
    rng = np.random.default_rng(21)
    for dt, tp in ((np.float32, F), (np.float64, TensorProto.DOUBLE)):
        w = (rng.standard_normal((48, 96)) / 8).astype(dt)
        b = rng.standard_normal(96).astype(dt)
        add = helper.make_node("Add", ["b", "m"] if bias_first else ["m", "b"], ["z"])
        model = _model([helper.make_node("MatMul", ["x", "w"], ["m"]), add, helper.make_node("Tanh", ["z"], ["y"])],
                       [("x", tp, shape)], [("y", tp, None)], [("w", w), ("b", b)])
        x = rng.standard_normal(shape).astype(dt)
        s = _check_equal(model, {"x": x}, rtol=1e-5, atol=1e-6)
        ops = _ops(s[L.ORT_ENABLE_ALL])
        assert ops[0] in (("Gemm", "FusedGemm") if len(shape) == 2 else ("MatMulAdd",)), ops
        for _ in range(3):  # the compiled paths from the session's second run
            (y,) = s[L.ORT_ENABLE_ALL].run(None, {"x": x})
        expected = np.tanh(x.astype(np.float64) @ w.astype(np.float64) + b)
        assert y.dtype == dt and y.shape == tuple(shape[:-1]) + (96,)
        np.testing.assert_allclose(y, expected, rtol=0, atol=48 * 4 * np.finfo(dt).eps * 8)


def test_matmul_add_is_left_when_its_rules_differ():
    """Not fused: the product read elsewhere, a 2-D or non-constant C, a non-constant B, C of
    another type than A (Add would refuse it: the unfused graph's error stays)."""
    rng = np.random.default_rng(22)
    w = rng.standard_normal((8, 4)).astype(np.float32)
    shape = [2, 3, 8]
    cases = [
        ([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"]),
          helper.make_node("Relu", ["m"], ["r"])], [("b", rng.standard_normal(4).astype(np.float32))], ["y", "r"]),
        ([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b2"], ["y"])],
         [("b2", rng.standard_normal((3, 4)).astype(np.float32))], ["y"]),
        ([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "x2"], ["y"])], [], ["y"]),
    ]
    for nodes, inits, outs in cases:
        inputs = [("x", F, shape)] + ([("x2", F, [4])] if any("x2" in n.input for n in nodes) else [])
        model = _model(nodes, inputs, [(o, F, None) for o in outs], [("w", w)] + inits)
        feeds = {"x": rng.standard_normal(shape).astype(np.float32)}
        if len(inputs) > 1:
            feeds["x2"] = rng.standard_normal(4).astype(np.float32)
        s = _check_equal(model, feeds)
        assert "MatMulAdd" not in _ops(s[L.ORT_ENABLE_ALL])
    # B fed at run time
    model = _model([helper.make_node("MatMul", ["x", "wf"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
                   [("x", F, shape), ("wf", F, [8, 4])], [("y", F, None)], [("b", rng.standard_normal(4).astype(np.float32))])
    s = _check_equal(model, {"x": rng.standard_normal(shape).astype(np.float32), "wf": w})
    assert "MatMulAdd" not in _ops(s[L.ORT_ENABLE_ALL])
    # C of another type: Add's type rule refuses it, fused or not
    model = _model([helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["y"])],
                   [("x", F, shape)], [("y", F, None)], [("w", w), ("b", rng.standard_normal(4))])
    with pytest.raises(onnxrt.OnnxRuntimeError):
        onnxrt.InferenceSession(model).run(None, {"x": rng.standard_normal(shape).astype(np.float32)})


def test_matmul_add_kernel_refuses_a_bias_of_another_shape():
    from onnx import helper as h

    node = h.make_node("MatMulAdd", ["a", "b", "c"], ["y"], domain="onnxrt", since_version=13)
    g = h.make_graph([node], "g", [h.make_tensor_value_info(n, F, None) for n in "abc"], [h.make_tensor_value_info("y", F, None)])
    m = h.make_model(g, opset_imports=[h.make_opsetid("", 17), h.make_opsetid("onnxrt", 1)])
    sess = onnxrt.InferenceSession(m)
    a = np.ones((2, 3, 4), np.float32)
    b = np.ones((4, 5), np.float32)
    (y,) = sess.run(None, {"a": a, "b": b, "c": np.arange(5, dtype=np.float32)})
    np.testing.assert_array_equal(y, np.broadcast_to(4 + np.arange(5, dtype=np.float32), (2, 3, 5)))
    with pytest.raises(onnxrt.OnnxRuntimeError, match="C must be a vector of B's 5 columns"):
        sess.run(None, {"a": a, "b": b, "c": np.ones((1, 5), np.float32)})


@pytest.mark.parametrize("act, atts, extra", [("Relu", {}, []), ("LeakyRelu", {"alpha": 0.2}, []), ("Clip", {}, ["lo", "hi"]), ("HardSigmoid", {}, [])])
def test_activation_fusion_variants(act, atts, extra):
    rng = np.random.default_rng(4)
    inits = _conv_inits(rng) + [("lo", np.array(-0.5, np.float32)), ("hi", np.array(0.7, np.float32))]
    model = _model(
        [helper.make_node("Conv", ["x", "W", "B"], ["c"]), helper.make_node(act, ["c"] + extra, ["y"], **atts)],
        [("x", F, [1, 3, 5, 5])],
        [("y", F, [1, 4, 3, 3])],
        inits,
    )
    s = _check_equal(model, {"x": rng.standard_normal((1, 3, 5, 5)).astype(np.float32)}, rtol=1e-5, atol=1e-6)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedConv"]


def test_intermediate_values_come_from_the_graph_as_written():
    rng = np.random.default_rng(5)
    model = _model(
        [helper.make_node("Conv", ["x", "W", "B"], ["c"]), helper.make_node("Relu", ["c"], ["y"])],
        [("x", F, [1, 3, 5, 5])],
        [("y", F, [1, 4, 3, 3])],
        _conv_inits(rng),
    )
    oinf = onnxrt.OnnxInference(model)
    x = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    full = oinf.run({"x": x}, intermediate=True)
    np.testing.assert_allclose(np.maximum(full["c"], 0), full["y"], rtol=1e-6)
    assert [st.op_type for st in oinf.plan.steps] == ["FusedConv"]


def test_batchnorm_then_per_channel_mul_add_fold_into_its_scale_and_bias():
    rng = np.random.default_rng(6)
    c = 5
    inits = [
        ("scale", rng.uniform(0.5, 2, c).astype(np.float32)),
        ("bias", rng.standard_normal(c).astype(np.float32)),
        ("mean", rng.standard_normal(c).astype(np.float32)),
        ("var", rng.uniform(0.5, 2, c).astype(np.float32)),
        ("k", rng.standard_normal((c, 1, 1)).astype(np.float32)),
        ("a", rng.standard_normal((1, c, 1, 1)).astype(np.float32)),
    ]
    model = _model(
        [
            helper.make_node("Relu", ["x"], ["r"]),  # not a Conv: the batch norm stays
            helper.make_node("BatchNormalization", ["r", "scale", "bias", "mean", "var"], ["bn"]),
            helper.make_node("Mul", ["bn", "k"], ["m"]),
            helper.make_node("Add", ["a", "m"], ["y"]),
        ],
        [("x", F, [2, c, 4, 3])],
        [("y", F, [2, c, 4, 3])],
        inits,
    )
    s = _check_equal(model, {"x": rng.standard_normal((2, c, 4, 3)).astype(np.float32)}, rtol=1e-5, atol=1e-5)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["Relu", "BatchNormalization"]
    assert "fold_bn_affine" in s[L.ORT_ENABLE_ALL].engine.plan.applied_passes


def test_training_batchnorm_of_opset_6_is_not_folded():
    rng = np.random.default_rng(7)
    inits = _conv_inits(rng) + [(n, rng.uniform(0.5, 2, 4).astype(np.float32)) for n in ("scale", "bias", "mean", "var")]
    model = _model(
        [
            helper.make_node("Conv", ["x", "W", "B"], ["c"]),
            helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["y"]),
        ],
        [("x", F, [2, 3, 5, 5])],
        [("y", F, [2, 4, 3, 3])],
        inits,
        opset=6,
    )
    s = _check_equal(model, {"x": rng.standard_normal((2, 3, 5, 5)).astype(np.float32)}, rtol=1e-4, atol=1e-5)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["Conv", "BatchNormalization"]


def test_batchnorm_add_and_sum_fuse_with_relu_without_touching_their_inputs():
    rng = np.random.default_rng(8)
    c = 3
    inits = [(n, rng.uniform(0.5, 2, c).astype(np.float32)) for n in ("scale", "bias", "mean", "var")]
    model = _model(
        [
            helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn"]),
            helper.make_node("Relu", ["bn"], ["r1"]),
            helper.make_node("Add", ["r1", "x"], ["s"]),
            helper.make_node("Relu", ["s"], ["r2"]),
            helper.make_node("Sum", ["r2"], ["one"]),  # Sum of one input may return it
            helper.make_node("Relu", ["one"], ["r3"]),
            helper.make_node("Add", ["r3", "r2"], ["y"]),
        ],
        [("x", F, [2, c, 4, 4])],
        [("y", F, [2, c, 4, 4])],
        inits,
    )
    s = _check_equal(model, {"x": rng.standard_normal((2, c, 4, 4)).astype(np.float32)})
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedBatchNormalization", "FusedAdd", "FusedSum", "Add"]


@pytest.mark.parametrize("part", [None, 64])
def test_fused_batchnorm_relu_single_pass_equals_the_two_nodes(part, monkeypatch):
    # the compiled pass computes x * a + b and the Relu together (rows split over the pool
    # when forced): the same bits as BatchNormalization then Relu, -0 and NaN kept
    from onnxrt.fastpaths import _fastmath as fm

    if part is not None:
        monkeypatch.setattr(fm, "JIT_PART", part)
    rng = np.random.default_rng(11)
    c = 6
    inits = [("scale", rng.uniform(-2, 2, c).astype(np.float32)), ("bias", rng.uniform(-1, 1, c).astype(np.float32)),
             ("mean", rng.uniform(-1, 1, c).astype(np.float32)), ("var", rng.uniform(0.5, 2, c).astype(np.float32))]
    model = _model(
        [helper.make_node("BatchNormalization", ["x", "scale", "bias", "mean", "var"], ["bn"]), helper.make_node("Relu", ["bn"], ["y"])],
        [("x", F, [2, c, 9, 11])],
        [("y", F, [2, c, 9, 11])],
        inits,
    )
    x = rng.standard_normal((2, c, 9, 11)).astype(np.float32)
    x[0, 1, 2, 3] = np.nan
    x[1, 4, 0, 0] = np.inf
    x[1, 2, 5, 5] = -np.inf
    sessions = _sessions(model)
    assert _ops(sessions[L.ORT_ENABLE_ALL]) == ["FusedBatchNormalization"]
    (want,) = sessions[L.ORT_DISABLE_ALL].run(None, {"x": x})
    (got,) = sessions[L.ORT_ENABLE_ALL].run(None, {"x": x})
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    assert np.isnan(got[0, 1, 2, 3]) and (got >= 0).sum() == got.size - 1


def _mlp(widths, relus, trans_b=(), bias=(), extra_output=None, opset=17):
    """MatMul + Add (+ Relu) layers, or Gemm with transB for the indices in ``trans_b``."""
    rng = np.random.default_rng(len(widths))
    nodes, inits, prev = [], [], "x"
    for i, (k, n) in enumerate(zip(widths, widths[1:])):
        out = "y" if i == len(widths) - 2 else f"h{i}"
        pre = f"p{i}" if relus[i] else out
        if i in trans_b:
            inits.append((f"w{i}", (rng.standard_normal((n, k)) / np.sqrt(k)).astype(np.float32)))
            ins = [prev, f"w{i}"] + ([f"b{i}"] if i not in bias else [])
            nodes.append(helper.make_node("Gemm", ins, [pre], transB=1))
        else:
            inits.append((f"w{i}", (rng.standard_normal((k, n)) / np.sqrt(k)).astype(np.float32)))
            nodes.append(helper.make_node("MatMul", [prev, f"w{i}"], [f"m{i}"]))
            nodes.append(helper.make_node("Add", [f"m{i}", f"b{i}"], [pre]))
        if i not in bias:
            inits.append((f"b{i}", (rng.standard_normal(n) * 0.1).astype(np.float32)))
        if relus[i]:
            nodes.append(helper.make_node("Relu", [pre], [out]))
        prev = out
    outputs = [("y", F, ["N", widths[-1]])] + ([(extra_output, F, None)] if extra_output else [])
    return _model(nodes, [("x", F, ["N", widths[0]])], outputs, inits, opset=opset)


@pytest.mark.parametrize("rows", [1, 3, 40])
def test_dense_layers_chain_into_one_node(rows, monkeypatch):
    """MatMul + Add (+ Relu) and Gemm layers (transposed B, no bias) become one DenseChain:
    one compiled call for a few float32 rows, the layers' own kernels for more (40 rows)."""
    from onnxrt import native as _jit

    model = _mlp([32, 64, 48, 48, 10], relus=[1, 1, 0, 1], trans_b={1, 2}, bias={2})
    feeds = {"x": np.random.default_rng(rows).standard_normal((rows, 32)).astype(np.float32)}
    calls = []
    k = _jit.kernels()
    if k is not None:
        real = k.dense_chain
        monkeypatch.setattr(k, "dense_chain", lambda *a: calls.append(1) or real(*a))
    s = _check_equal(model, feeds)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["DenseChain"]
    assert "fuse_dense_chain" in s[L.ORT_ENABLE_ALL].engine.plan.applied_passes
    chain = s[L.ORT_ENABLE_ALL].engine.plan.steps[0].op
    assert chain._trans_b == [0, 1, 1, 0] and chain._relus == [1, 1, 0, 1]
    assert len(calls) == (1 if rows <= 16 and k is not None else 0)
    # each layer is computed as the separate (fused) Gemm nodes compute it: identical bits
    from onnxrt import optim

    monkeypatch.setattr(optim, "PASSES", [p for p in optim.PASSES if p[1] != "fuse_dense_chain"])
    opts = onnxrt.SessionOptions()
    opts.graph_optimization_level = L.ORT_ENABLE_ALL
    layers = onnxrt.InferenceSession(model, opts)
    assert _ops(layers) == ["FusedGemm", "FusedGemm", "Gemm", "FusedGemm"]
    (want,) = layers.run(None, feeds)
    (got,) = s[L.ORT_ENABLE_ALL].run(None, feeds)
    assert got.dtype == np.float32 and got.shape == (rows, 10)
    np.testing.assert_array_equal(got, want)


def test_dense_chain_stops_where_a_value_is_read_elsewhere_or_not_float32():
    model = _mlp([8, 8, 8, 8], relus=[1, 1, 1], extra_output="h0")
    s = _check_equal(model, {"x": np.ones((2, 8), np.float32)})
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedGemm", "DenseChain"]
    single = _mlp([8, 8], relus=[1])
    assert _ops(_sessions(single)[L.ORT_ENABLE_ALL]) == ["FusedGemm"]


def _residual_model(kind, z_shape=(1, 8, 10, 10), second_conv=False, extra_reader=False):
    """x -> Conv (3x3, or 1x1 8->8) -> Add/Sum with z (or a second conv's output) -> Relu."""
    rng = np.random.default_rng(5)
    inits = [("w", rng.standard_normal((8, 4, 3, 3)).astype(np.float32)), ("b", rng.standard_normal(8).astype(np.float32))]
    nodes = [helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1])]
    other = "z"
    if second_conv:
        inits.append(("w2", rng.standard_normal((8, 4, 1, 1)).astype(np.float32)))
        nodes.append(helper.make_node("Conv", ["x", "w2"], ["c2"]))
        other = "c2"
    ins = ["c", other] if kind != "Sum-reversed" else [other, "c"]
    nodes.append(helper.make_node("Add" if kind == "Add" else "Sum", ins, ["s"]))
    nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    outputs = [("y", F, None)] + ([("c", F, None)] if extra_reader else [])
    inputs = [("x", F, [1, 4, 10, 10])] + ([("z", F, list(z_shape))] if not second_conv else [])
    return _model(nodes, inputs, outputs, inits)


@pytest.mark.parametrize("kind", ["Add", "Sum", "Sum-reversed"])
def test_conv_takes_the_residual_of_the_sum_after_it(kind):
    rng = np.random.default_rng(6)
    feeds = {"x": rng.standard_normal((1, 4, 10, 10)).astype(np.float32), "z": rng.standard_normal((1, 8, 10, 10)).astype(np.float32)}
    s = _check_equal(_residual_model(kind), feeds)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedConv"]
    step = s[L.ORT_ENABLE_ALL].engine.plan.steps[0]
    assert step.op.atts_value["activation"] == "Relu" and len(step.op.onnx_node.input) == 4
    assert "fuse_conv_residual" in s[L.ORT_ENABLE_ALL].engine.plan.applied_passes


def test_conv_residual_variants():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((1, 4, 10, 10)).astype(np.float32)
    # two convolutions: the later one takes the other's output as its residual
    s = _check_equal(_residual_model("Sum", second_conv=True), {"x": x})
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["Conv", "FusedConv"]
    # a residual that broadcasts: numpy adds it
    s = _check_equal(_residual_model("Add", z_shape=(1, 8, 1, 1)), {"x": x, "z": rng.standard_normal((1, 8, 1, 1)).astype(np.float32)})
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedConv"]
    # the convolution's output is read elsewhere: not fused
    s = _check_equal(_residual_model("Add", extra_reader=True), {"x": x, "z": rng.standard_normal((1, 8, 10, 10)).astype(np.float32)})
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["Conv", "FusedAdd"]


def _fire_model(n=1, dtype=TensorProto.FLOAT, extra_reader=False, plain=False, opset=17):
    """squeezenet's fire module: squeeze 1x1 + Relu, then expand 1x1 and 3x3 (+ Relu), concatenated."""
    rng = np.random.default_rng(11)
    npt = np.float16 if dtype == TensorProto.FLOAT16 else np.float32
    inits = [
        ("ws", (rng.standard_normal((8, 16, 1, 1)) * 0.3).astype(npt)), ("bs", rng.standard_normal(8).astype(npt)),
        ("w1", (rng.standard_normal((12, 8, 1, 1)) * 0.3).astype(npt)), ("b1", rng.standard_normal(12).astype(npt)),
        ("w3", (rng.standard_normal((40, 8, 3, 3)) * 0.1).astype(npt)),
    ]
    nodes = [
        helper.make_node("Conv", ["x", "ws", "bs"], ["s0"]), helper.make_node("Relu", ["s0"], ["s"]),
        helper.make_node("Conv", ["s", "w1", "b1"], ["e1c"]), helper.make_node("Relu", ["e1c"], ["e1"]),
        helper.make_node("Conv", ["s", "w3"], ["e3"], pads=[1, 1, 1, 1]),
        helper.make_node("Concat", ["e1", "s" if plain else "e3"] + (["e3"] if plain else []), ["y"], axis=1),
    ]
    outputs = [("y", dtype, None)] + ([("e3", dtype, None)] if extra_reader else [])
    return _model(nodes, [("x", dtype, [n, 16, 9, 9])], outputs, inits, opset)


@pytest.mark.parametrize("n, dtype", [(1, TensorProto.FLOAT), (2, TensorProto.FLOAT), (1, TensorProto.FLOAT16)])
def test_convolutions_write_into_the_concatenation_that_reads_them(n, dtype, monkeypatch):
    """Convolutions read only by a Concat along channels become one ConvConcat: with one
    float32 image each convolution's product lands in its block of the output (no
    concatenation copy); two images or float16 concatenate the separate results."""
    from onnxrt.fastpaths import conv as fp

    writes = []
    real = fp.segment_dispatchers

    def spy(op):  # each segment's convolution through Conv's table, given its block as ``out``
        def wrap(d):
            def call(*inputs):
                y = d(*inputs)
                if inputs[4] is not None:
                    writes.append(y[0].__array_interface__["data"][0] == inputs[4].__array_interface__["data"][0])
                return y

            return None if d is None else call

        return [wrap(d) for d in real(op)]

    monkeypatch.setattr(fp, "segment_dispatchers", spy)
    npt = np.float16 if dtype == TensorProto.FLOAT16 else np.float32
    x = np.random.default_rng(12).standard_normal((n, 16, 9, 9)).astype(npt)
    s = _check_equal(_fire_model(n, dtype), {"x": x}, rtol=1e-3 if npt == np.float16 else 1e-5, atol=1e-3 if npt == np.float16 else 1e-5)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedConv", "ConvConcat"]
    assert "fuse_concat_convs" in s[L.ORT_ENABLE_ALL].engine.plan.applied_passes
    writes.clear()
    y = s[L.ORT_ENABLE_ALL].run(None, {"x": x})[0]
    assert y.shape == (n, 52, 9, 9) and y.dtype == npt
    # both convolutions wrote their blocks in place (1x1 and 3x3), or none was asked to
    assert writes == ([True, True] if n == 1 and npt == np.float32 else [])
    want = ort_run(_fire_model(n, dtype), {"x": x})
    np.testing.assert_allclose(y.astype(np.float32), want.astype(np.float32), rtol=1e-3 if npt == np.float16 else 1e-4,
                               atol=1e-2 if npt == np.float16 else 1e-4)


def test_concat_with_other_inputs_or_convolutions_read_elsewhere_is_kept():
    x = np.random.default_rng(13).standard_normal((1, 16, 9, 9)).astype(np.float32)
    s = _check_equal(_fire_model(extra_reader=True), {"x": x})
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedConv", "FusedConv", "Conv", "Concat"]
    s = _check_equal(_fire_model(plain=True), {"x": x})  # the squeeze output itself is concatenated too
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedConv", "FusedConv", "Conv", "Concat"]


def ort_run(model, feeds):
    import onnxruntime as ort

    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)[0]


def _shuffle_model(kernel=1, group=4, relu=True, extra_reader=False, second=(1, 4, 24, 14, 14), last=(1, 96, 14, 14),
                   perm=(0, 2, 1, 3, 4), residual=False, n=1):
    """ShuffleNet's unit head: a grouped convolution (+ Relu), then the channel shuffle
    Reshape(N, G, C/G, H, W) -> Transpose(0, 2, 1, 3, 4) -> Reshape(N, C, H, W)."""
    rng = np.random.default_rng(14)
    inits = [("w", (rng.standard_normal((96, 64 // group, kernel, kernel)) * 0.3).astype(np.float32)),
             ("b", rng.standard_normal(96).astype(np.float32)),
             ("t1", np.array(second, np.int64)), ("t2", np.array(last, np.int64))]
    conv_in = ["x", "w", "b"]
    nodes = [helper.make_node("Conv", conv_in, ["c"], group=group, pads=[kernel // 2] * 4)]
    if residual:
        inits.append(("z", rng.standard_normal((n, 96, 14, 14)).astype(np.float32)))
        nodes.append(helper.make_node("Add", ["c", "z"], ["cz"]))
    src = "cz" if residual else "c"
    if relu:
        nodes.append(helper.make_node("Relu", [src], ["r"]))
        src = "r"
    nodes += [helper.make_node("Reshape", [src, "t1"], ["s5"]), helper.make_node("Transpose", ["s5"], ["s5t"], perm=list(perm)),
              helper.make_node("Reshape", ["s5t", "t2"], ["y"])]
    outputs = [("y", F, None)] + ([("s5", F, None)] if extra_reader else [])
    return _model(nodes, [("x", F, [n, 64, 14, 14])], outputs, inits)


@pytest.mark.parametrize("kernel, group, relu", [(1, 4, True), (1, 4, False), (3, 1, True), (1, 2, True)])
def test_channel_shuffle_folds_into_the_convolution_before_it(kernel, group, relu, monkeypatch):
    """The shuffle becomes the convolution's ``shuffle`` attribute: a grouped 1x1
    convolution with the shuffle's groups writes each group's rows at their shuffled
    channels (on the team), others shuffle their result; equal to the three nodes."""
    from onnxrt import parallel
    from onnxrt import native as _jit

    jobs = []
    team = _jit.kernels(_jit.TEAM)
    if team is not None and team.available():
        kept = team.run_kept
        monkeypatch.setattr(team, "run_kept", lambda *a: jobs.append(a[5].__wrapped__.__name__) or kept(*a))
        monkeypatch.setattr(team, "awake", lambda: True)
        monkeypatch.setattr(parallel, "KERNEL_THREADS", 2)
    x = np.random.default_rng(15).standard_normal((1, 64, 14, 14)).astype(np.float32)
    model = _shuffle_model(kernel, group, relu)
    s = _check_equal(model, {"x": x}, rtol=0, atol=0)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["FusedConv"]
    assert "fold_channel_shuffles" in s[L.ORT_ENABLE_ALL].engine.plan.applied_passes
    jobs.clear()
    for _ in range(2):  # the first run prepares the node, the second runs what it prepared
        y = s[L.ORT_ENABLE_ALL].run(None, {"x": x})[0]
        assert y.shape == (1, 96, 14, 14) and y.dtype == np.float32
        np.testing.assert_allclose(y, ort_run(model, {"x": x}), rtol=1e-5, atol=1e-5)
    if team is not None and team.available() and kernel == 1 and group == 4:
        assert jobs == ["pointwise_groups_part"] * 2  # written in place, shuffled
    # channel 1 of the shuffle is the first channel of the second group
    c = np.random.default_rng(15).standard_normal((1, 96, 14, 14)).astype(np.float32)
    np.testing.assert_array_equal(c.reshape(1, 4, 24, 14, 14).transpose(0, 2, 1, 3, 4).reshape(1, 96, 14, 14)[0, 1], c[0, 24])


def test_channel_shuffle_is_kept_when_its_pattern_is_not_whole():
    x = np.random.default_rng(16).standard_normal((1, 64, 14, 14)).astype(np.float32)
    # targets that are a shuffle of another shape of the same size fold, and keep the
    # nodes' semantics (the kernel reshapes as they would)
    _check_equal(_shuffle_model(second=(1, 4, 24, 196, 1), last=(1, 96, 196, 1)), {"x": x}, rtol=0, atol=0)
    for model in [
        _shuffle_model(extra_reader=True),  # the 5-D value is read elsewhere
        _shuffle_model(perm=(0, 1, 2, 4, 3)),  # another transpose
        _shuffle_model(residual=True, relu=False),  # a residual conv
    ]:
        s = _check_equal(model, {"x": x}, rtol=0, atol=0)
        assert "fold_channel_shuffles" not in s[L.ORT_ENABLE_ALL].engine.plan.applied_passes
        assert "Transpose" in _ops(s[L.ORT_ENABLE_ALL])


def test_folded_channel_shuffle_checks_the_convolution_output():
    """The node keeps the three nodes' semantics: an output whose size differs from the
    shuffle's target is an error naming it; one of the same size but another shape (a
    feed of other spatial size) is reshaped as the nodes would."""
    from onnxrt.errors import KernelError
    from onnxrt.ops_cpu.op_conv import conv

    rng = np.random.default_rng(17)
    x = rng.standard_normal((1, 16, 7, 7)).astype(np.float32)
    w = rng.standard_normal((24, 4, 1, 1)).astype(np.float32)
    with pytest.raises(KernelError, match=r"cannot be reshaped to \[1, 4, 6, 5, 5\]"):
        conv(x, w, group=4, shuffle=(1, 4, 6, 5, 5))
    odd = conv(x, w, group=4, shuffle=(1, 4, 6, 49, 1))
    plain = conv(x, w, group=4)
    np.testing.assert_array_equal(odd, plain.reshape(1, 4, 6, 49, 1).transpose(0, 2, 1, 3, 4).reshape(1, 24, 49, 1))


def test_convolutions_into_a_concatenation_follow_weights_of_another_shape():
    """ConvConcat keeps its blocks' layout for inputs and weights of the shapes it last saw:
    weights fed with another output-channel count (a graph input) get a new layout."""
    rng = np.random.default_rng(18)
    nodes = [helper.make_node("Conv", ["x", "w1"], ["a"]), helper.make_node("Conv", ["x", "w3"], ["c"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "c"], ["y"], axis=1)]
    model = _model(nodes, [("x", F, [1, 8, 9, 9]), ("w1", F, None)], [("y", F, None)],
                   [("w3", (rng.standard_normal((6, 8, 3, 3)) * 0.2).astype(np.float32))])
    s = _sessions(model)
    assert _ops(s[L.ORT_ENABLE_ALL]) == ["ConvConcat"]
    x = rng.standard_normal((1, 8, 9, 9)).astype(np.float32)
    for m in (4, 10, 4):
        w1 = rng.standard_normal((m, 8, 1, 1)).astype(np.float32)
        (got,) = s[L.ORT_ENABLE_ALL].run(None, {"x": x, "w1": w1})
        (want,) = s[L.ORT_DISABLE_ALL].run(None, {"x": x, "w1": w1})
        assert got.shape == want.shape == (1, m + 6, 9, 9) and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
