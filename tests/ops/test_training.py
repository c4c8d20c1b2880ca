"""ai.onnx.preview.training: the optimizers against their pseudo code, Gradient against finite differences."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_training import Adagrad, Adam, Momentum, unbroadcast

TRAIN = "ai.onnx.preview.training"
F, D = TensorProto.FLOAT, TensorProto.DOUBLE


def _node(op: str, n_in: int, n_out: int, **atts) -> onnx.NodeProto:
    return helper.make_node(op, [f"i{k}" for k in range(n_in)], [f"o{k}" for k in range(n_out)], domain=TRAIN, **atts)


# --- optimizers: the spec's pseudo code, written out in float64 ------------------------------


def spec_adagrad(r, t, x, g, h, norm, eps, decay):
    r_ = r / (1 + t * decay)
    g_reg = norm * x + g
    h_new = h + g_reg * g_reg
    return x - r_ * g_reg / (np.sqrt(h_new) + eps), h_new


def spec_adam(r, t, x, g, v, h, norm, post, alpha, beta, eps):
    g_reg = norm * x + g
    v_new = alpha * v + (1 - alpha) * g_reg
    h_new = beta * h + (1 - beta) * g_reg * g_reg
    r_ = r * np.sqrt(1 - beta**t) / (1 - alpha**t) if t > 0 else r
    x_new = x - r_ * v_new / (np.sqrt(h_new) + eps)
    return (1 - post) * x_new, v_new, h_new


def spec_momentum(r, t, x, g, v, norm, alpha, beta, nesterov):
    g_reg = norm * x + g
    b = beta if t > 0 else 1
    v_new = alpha * v + b * g_reg
    x_new = x - r * (g_reg + alpha * v_new) if nesterov else x - r * v_new
    return x_new, v_new


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("t", [0, 3])
def test_adagrad_multiple_tensors(dtype, t):
    rng = np.random.default_rng(0)
    xs = [rng.standard_normal(s).astype(dtype) for s in ((3,), (2, 2))]
    gs = [rng.standard_normal(x.shape).astype(dtype) for x in xs]
    hs = [rng.uniform(0.1, 1, x.shape).astype(dtype) for x in xs]
    op = Adagrad(_node("Adagrad", 8, 4, norm_coefficient=0.01, epsilon=1e-5, decay_factor=0.1))
    res = op.run(np.array(0.1, np.float32), np.array(t, np.int64), *xs, *gs, *hs)
    assert len(res) == 4
    for k in range(2):
        f32 = lambda v: float(np.float32(v))  # noqa: E731  (R and the attributes are float32)
        x_new, h_new = spec_adagrad(f32(0.1), t, *(a[k].astype(np.float64) for a in (xs, gs, hs)), f32(0.01), f32(1e-5), f32(0.1))
        for got, want in ((res[k], x_new), (res[2 + k], h_new)):
            assert got.dtype == dtype and got.shape == xs[k].shape
            np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == np.float32 else 1e-12)


@pytest.mark.parametrize("t", [0, 1, 7])
def test_adam_multiple_tensors_and_post_regularization(t):
    rng = np.random.default_rng(1)
    xs = [rng.standard_normal(3).astype(np.float64), rng.standard_normal((2, 3)).astype(np.float64)]
    gs, vs, hs = ([rng.uniform(0.1, 1, x.shape) for x in xs] for _ in range(3))
    atts = dict(norm_coefficient=0.001, norm_coefficient_post=0.02, alpha=0.9, beta=0.95, epsilon=1e-7)
    op = Adam(_node("Adam", 10, 6, **atts))
    res = op.run(np.array(0.05), np.array(t, np.int64), *xs, *gs, *vs, *hs)
    for k in range(2):
        want = spec_adam(0.05, t, xs[k], gs[k], vs[k], hs[k], 0.001, 0.02, 0.9, 0.95, 1e-7)
        for j in range(3):
            np.testing.assert_allclose(res[2 * j + k], want[j], rtol=1e-6)


@pytest.mark.parametrize("mode", ["standard", "nesterov"])
@pytest.mark.parametrize("t", [0, 2])
def test_momentum(mode, t):
    rng = np.random.default_rng(2)
    x, g, v = (rng.standard_normal((2, 3)).astype(np.float32) for _ in range(3))
    op = Momentum(_node("Momentum", 5, 2, norm_coefficient=0.01, alpha=0.9, beta=0.5, mode=mode))
    x_new, v_new = op.run(np.array(0.1, np.float32), np.array(t, np.int64), x, g, v)
    want = spec_momentum(0.1, t, x.astype(np.float64), g, v, 0.01, 0.9, 0.5, mode == "nesterov")
    assert x_new.dtype == np.float32 and v_new.dtype == np.float32
    np.testing.assert_allclose(x_new, want[0], rtol=1e-5)
    np.testing.assert_allclose(v_new, want[1], rtol=1e-5)


def test_optimizer_errors():
    with pytest.raises(InvalidAttributeError, match=r"'mode' is 'adam'"):
        Momentum(_node("Momentum", 5, 2, norm_coefficient=0.0, alpha=0.9, beta=0.5, mode="adam"))
    with pytest.raises(InvalidAttributeError, match="misses the required attribute 'alpha'"):
        Momentum(_node("Momentum", 5, 2, norm_coefficient=0.0, beta=0.5, mode="standard"))
    op = Adagrad(_node("Adagrad", 4, 2))
    with pytest.raises(KernelError, match="3 groups of equal size, got 2 tensors"):
        op.run(np.array(0.1), np.array(0), np.zeros(2), np.zeros(2))


def test_optimizer_in_a_model_does_not_modify_its_inputs():
    node = helper.make_node("Momentum", ["R", "T", "X", "G", "V"], ["X2", "V2"], domain=TRAIN,
                            norm_coefficient=0.0, alpha=0.9, beta=1.0, mode="standard")
    graph = helper.make_graph(
        [node], "m",
        [helper.make_tensor_value_info("R", F, []), helper.make_tensor_value_info("T", TensorProto.INT64, [])]
        + [helper.make_tensor_value_info(n, F, [2]) for n in "XGV"],
        [helper.make_tensor_value_info(n, F, [2]) for n in ("X2", "V2")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(TRAIN, 1)])
    m.ir_version = 8
    feeds = {"R": np.array(0.5, np.float32), "T": np.array(1, np.int64), "X": np.ones(2, np.float32),
             "G": np.ones(2, np.float32), "V": np.zeros(2, np.float32)}
    x2, v2 = onnxrt.InferenceSession(m.SerializeToString()).run(None, feeds)
    np.testing.assert_allclose(v2, [1, 1])
    np.testing.assert_allclose(x2, [0.5, 0.5])
    assert feeds["X"].tolist() == [1, 1] and feeds["V"].tolist() == [0, 0]


# --- Gradient ------------------------------------------------------------------------------------


def _gradient_model(nodes, inputs, xs, y, zs=(), extra_outputs=(), inits=()) -> onnx.ModelProto:
    atts = {"zs": list(zs)} if zs else {}
    grad = helper.make_node("Gradient", list(xs) + list(zs), [f"d_{x}" for x in xs], domain=TRAIN, name="grad",
                            xs=list(xs), y=y, **atts)
    graph = helper.make_graph(
        list(nodes) + [grad], "grad_model",
        [helper.make_tensor_value_info(n, D, s) for n, s in inputs],
        [helper.make_tensor_value_info(y, D, None)] + [helper.make_tensor_value_info(f"d_{x}", D, None) for x in xs]
        + [helper.make_tensor_value_info(n, D, None) for n in extra_outputs],
        list(inits),
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(TRAIN, 1)])
    m.ir_version = 8
    return m


def _numeric_grad(model: onnx.ModelProto, feeds: dict, x: str, y: str, eps: float = 1e-6) -> np.ndarray:
    """Central differences of sum(y) with respect to feed ``x`` (the oracle)."""
    graph = helper.make_graph(
        [n for n in model.graph.node if n.op_type != "Gradient"], "fwd", list(model.graph.input),
        [helper.make_tensor_value_info(y, D, None)], list(model.graph.initializer),
    )
    fwd = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    fwd.ir_version = 8
    sess = onnxrt.InferenceSession(fwd.SerializeToString())
    base = feeds[x]
    out = np.zeros_like(base)
    for idx in np.ndindex(base.shape):  # the oracle may loop: a handful of elements
        plus, minus = base.copy(), base.copy()
        plus[idx] += eps
        minus[idx] -= eps
        fp = sess.run(None, {**feeds, x: plus})[0].sum()
        fm = sess.run(None, {**feeds, x: minus})[0].sum()
        out[idx] = (fp - fm) / (2 * eps)
    return out


def test_gradient_of_the_simple_models():
    m = _gradient_model(
        [helper.make_node("Add", ["a", "b"], ["c"]), helper.make_node("Mul", ["c", "a"], ["d"])],
        [("a", []), ("b", [])], ["a", "b"], "d",
    )
    d, da, db = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"a": np.array(1.0), "b": np.array(2.0)})
    assert float(d) == 3.0 and float(da) == 4.0 and float(db) == 1.0
    assert da.dtype == np.float64 and da.shape == ()


def test_gradient_matches_finite_differences_with_broadcasting():
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"]),
        helper.make_node("Add", ["h", "bias"], ["hb"]),
        helper.make_node("Tanh", ["hb"], ["t"]),
        helper.make_node("Sigmoid", ["t"], ["s"]),
        helper.make_node("Div", ["s", "w2"], ["q"]),
        helper.make_node("Sub", ["q", "x0"], ["r"]),
        helper.make_node("Relu", ["r"], ["u"]),
        helper.make_node("Mul", ["u", "u"], ["y"]),
    ]
    inputs = [("x", [3, 4]), ("w", [4, 2]), ("bias", [2]), ("w2", [1, 2]), ("x0", [])]
    m = _gradient_model(nodes, inputs, ["x", "w", "bias", "w2"], "y", zs=["x0"])
    rng = np.random.default_rng(3)
    feeds = {"x": rng.standard_normal((3, 4)), "w": rng.standard_normal((4, 2)), "bias": rng.standard_normal(2),
             "w2": rng.uniform(0.5, 2, (1, 2)), "x0": np.array(-0.3)}
    res = onnxrt.InferenceSession(m.SerializeToString()).run(None, feeds)
    for name, got in zip(["x", "w", "bias", "w2"], res[1:]):
        assert got.shape == feeds[name].shape and got.dtype == np.float64
        np.testing.assert_allclose(got, _numeric_grad(m, feeds, name, "y"), rtol=1e-5, atol=1e-7)


def test_gradient_with_respect_to_an_intermediate_and_an_unused_input():
    nodes = [helper.make_node("Mul", ["a", "b"], ["h"]), helper.make_node("Exp", ["h"], ["y"])]
    grad = helper.make_node("Gradient", ["h_value", "b"], ["dh", "db"], domain=TRAIN, xs=["h", "b"], y="y")
    graph = helper.make_graph(
        nodes + [grad], "g",
        [helper.make_tensor_value_info(n, D, [2]) for n in ("a", "b", "h_value")],
        [helper.make_tensor_value_info(n, D, None) for n in ("y", "dh", "db")],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid(TRAIN, 1)])
    m.ir_version = 8
    hv = np.array([0.5, -1.0])
    y, dh, db = onnxrt.InferenceSession(m.SerializeToString()).run(
        None, {"a": np.array([1.0, 2.0]), "b": np.array([3.0, 4.0]), "h_value": hv}
    )
    np.testing.assert_allclose(dh, np.exp(hv))  # evaluated at the value given to the node
    np.testing.assert_array_equal(db, [0.0, 0.0])  # y does not depend on b once h is given


def test_gradient_reads_initializers_of_the_graph():
    nodes = [helper.make_node("Mul", ["x", "k"], ["y"])]
    m = _gradient_model(nodes, [("x", [2])], ["x"], "y", inits=[helper.make_tensor("k", D, [2], [3.0, -2.0])])
    _, dx = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"x": np.array([1.0, 1.0])})
    np.testing.assert_array_equal(dx, [3.0, -2.0])


def test_gradient_errors():
    nodes = [helper.make_node("Cos", ["x"], ["y"])]
    m = _gradient_model(nodes, [("x", [2])], ["x"], "y")
    with pytest.raises(InvalidAttributeError, match=r"cannot differentiate operator 'Cos'"):
        onnxrt.InferenceSession(m.SerializeToString())
    grad = helper.make_node("Gradient", ["x"], ["dx"], domain=TRAIN, xs=["x"], y="y")
    from onnxrt.ops_cpu.op_training import Gradient

    with pytest.raises(InvalidAttributeError, match="build it inside a model"):
        Gradient(grad)


def test_unbroadcast():
    g = np.ones((2, 3, 4))
    assert unbroadcast(g, (3, 1)).tolist() == [[8.0]] * 3
    assert unbroadcast(g, ()).shape == () and float(unbroadcast(g, ())) == 24.0
    assert unbroadcast(g, (2, 3, 4)) is g
