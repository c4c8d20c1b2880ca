"""The element-wise operators' declared fast paths (onnxrt.fastpaths.elementwise) against their reference kernels.

Each test builds a one-node model whose input makes one path apply, checks that the
session picked it (``OnnxInference.fast_paths()``) and compares its outputs with a session
on the reference kernels (``SessionOptions.fast_paths = False``). Tolerances come from the
accuracy the kernels state (onnxrt.fastpaths._fastmath) plus the reference's own rounding
(numpy's float32 exp/expm1/logaddexp and scipy's erf/erfc: about 1 ulp each); the
paths that run the same IEEE operations as the reference must give its bits.
"""

from __future__ import annotations

import contextlib

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt import dispatch, native
from onnxrt.fastpaths import elementwise as ew
from onnxrt.fastpaths import _fastmath as fm
from tests.helpers import make_single_node_model
from tests.ops.fastpath_check import check_path, picked

F, F16, BF16 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.BFLOAT16
_NP = {F: np.dtype(np.float32), F16: np.dtype(np.float16), BF16: np.dtype(ml_dtypes.bfloat16)}
ULP32 = float(np.finfo(np.float32).eps)  # 2**-23: one ulp relative, at the bottom of a binade
#: one ulp of the narrow types: a float32 result off by a few ulp may round to the neighbour
ULP_NARROW = {F16: 2.0**-10, BF16: 2.0**-7}
#: 300K elements: over 2 * fm.JIT_PART, so the compiled twins run on the team / the pool
N = 300_000
#: special values every path must keep as the reference does
SPECIAL = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, -1e-40, 88.0, -88.0, 100.0, -100.0, 3.4e38, -3.4e38]

# op -> (opset, attributes, the path's stated error bound in float32 ulp relative to the
# float64 value, plus the reference's: the sum bounds their distance)
CASES = {
    "Erf": (13, {}, 1 + 2),  # fm.erf 1 ulp; scipy's float32 erf about 1-2
    "Sigmoid": (13, {}, 3 + 3),  # both are exp(x) / (1 + exp(x)): 3 ulp each (their exp differs)
    "Elu": (22, {"alpha": 0.5}, 2 + 2),  # fm.expm1_neg 1 ulp (+1 for alpha), np.expm1 1 ulp (+1)
    "Selu": (22, {}, 2 + 3),  # gamma alpha rounded once against twice
    "Celu": (28, {"alpha": 2.0}, 3 + 3),  # one more rounding each for x / alpha
    "Softplus": (22, {}, 3 + 1),  # fm.softplus 3 ulp, logaddexp 1
}


def _model(op, elem, shape, opset, **attrs):
    return make_single_node_model(op, [("x", elem, list(shape))], [("y", elem, list(shape))], opset=opset, **attrs)


def _input(elem, n=N, scale=3.0, seed=0):
    x = np.random.default_rng(seed).standard_normal(n) * scale
    x[: len(SPECIAL)] = SPECIAL
    with np.errstate(over="ignore"):  # 3.4e38 is inf in float16
        return x.astype(_NP[elem])


def _rtol(elem, ulps):
    return ulps * ULP32 if elem == F else ULP_NARROW[elem]


@contextlib.contextmanager
def _compiled(on: bool):
    """Compiled kernels as the test asks: on (ONNXRT_JIT=1 in the suite: the paths' second
    run has them), or off for this thread (the numpy paths' turn)."""
    if on:
        yield
    else:
        with native.disabled():
            yield


def _check(op, elem, path, opset, attrs, rtol, n=N, compiled=True, atol=0.0):
    x = _input(elem, n)
    with _compiled(compiled):
        fast, ref = check_path(_model(op, elem, x.shape, opset, **attrs), {"x": x}, op, path, rtol=rtol,
                               atol=atol, optimize=False)
    y = fast[0]
    assert y.dtype == x.dtype and y.shape == x.shape
    # the special values come out as the reference's (NaN where it is NaN, signed zeros, infinities)
    sy, sr = y[: len(SPECIAL)].astype(np.float64), ref[0][: len(SPECIAL)].astype(np.float64)
    np.testing.assert_array_equal(np.isnan(sy), np.isnan(sr))
    big = np.abs(sr) == np.inf
    np.testing.assert_array_equal(sy[big], sr[big])
    return x, y


# -- _fastmath's kernels: compiled twins and numpy polynomials ------------------------------------------


@pytest.mark.parametrize("op", sorted(CASES))
@pytest.mark.parametrize("elem", [F, F16, BF16], ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_fastmath_paths(op, elem, compiled):
    opset, attrs, ulps = CASES[op]
    path = "compiled float32 loop" if compiled else "numpy polynomial"
    # the numpy kernels start at their crossover sizes: N is above every one
    _check(op, elem, path, opset, attrs, _rtol(elem, ulps), compiled=compiled, atol=1e-37)


@pytest.mark.parametrize("elem", [F, F16, BF16], ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_gelu_paths(elem, compiled):
    # fm.gelu: 2 ulp for x >= 0, 4 on [-1, 0), growing to 40 ulp (2e-6) at x = -5.5; the
    # reference 0.5 x erfc(-x / sqrt 2) rounds x / sqrt 2 first, whose relative error
    # reaches erfc's value as 2 u^2 eps (about 30 ulp at x = -5.5): 2e-6 + 30 ulp together
    path = "compiled float32 loop" if compiled else "numpy polynomial"
    rtol = 2e-6 + 30 * ULP32 if elem == F else ULP_NARROW[elem]
    _check("Gelu", elem, path, 20, {}, rtol, compiled=compiled, atol=1e-37)


@pytest.mark.parametrize("op, opset, attrs", [("Mish", 18, {}), ("Swish", 24, {"alpha": 0.75}),
                                              ("Gelu", 20, {"approximate": "tanh"})])
@pytest.mark.parametrize("compiled", [True, False], ids=["compiled", "numpy"])
def test_float16_cast_paths_give_the_reference_bits(op, opset, attrs, compiled):
    # the float32 formula is the reference's; _fastmath's casts are bit-exact with numpy's
    path = "float16 compiled casts" if compiled else "float16 bit casts"
    _check(op, F16, path, opset, attrs, 0.0, compiled=compiled)


@pytest.mark.parametrize("op", ["Erf", "Sigmoid", "Softplus"])
def test_numpy_polynomials_start_at_their_crossover_size(op):
    """Below fm.MIN_SIZE / fm.ERF_MIN_SIZE / fm.CAST_MIN_SIZE elements the numpy kernels
    lose to numpy's own ufuncs: the reference runs; from that size on, the polynomial."""
    opset, attrs, _ = CASES[op]
    threshold = {"Erf": fm.ERF_MIN_SIZE, "Sigmoid": fm.CAST_MIN_SIZE, "Softplus": fm.MIN_SIZE}[op]
    with native.disabled():
        for n, expected in ((threshold - 1, "reference"), (threshold, "numpy polynomial")):
            x = _input(F, n)
            sess = onnxrt.OnnxInference(_model(op, F, x.shape, opset, **attrs))
            y = sess.run({"x": x})["y"]
            assert y.shape == x.shape and y.dtype == x.dtype
            assert picked(sess, op) == {expected}


def test_attributes_outside_the_kernels_domain_take_the_reference():
    # Celu's fast clip assumes alpha > 0; an infinite Elu alpha has no fast form
    x = _input(F)
    for op, opset, attrs in (("Celu", 12, {"alpha": -1.5}), ("Elu", 22, {"alpha": float("inf")})):
        sess = onnxrt.OnnxInference(_model(op, F, x.shape, opset, **attrs))
        y = sess.run({"x": x})["y"]
        assert picked(sess, op) == {"reference"}
        assert y.shape == x.shape and y.dtype == np.float32
    xd = x.astype(np.float64)
    with np.errstate(all="ignore"):
        expected = np.maximum(xd, 0) + np.minimum(0, -1.5 * np.expm1(xd / -1.5))
    y = onnxrt.OnnxInference(_model("Celu", F, x.shape, 12, alpha=-1.5)).run({"x": x})["y"]
    # the rounding of x / alpha scales expm1's relative error by |x / alpha| (<= 6.7 here)
    small = np.abs(xd) <= 10
    np.testing.assert_allclose(y[small], expected[small], rtol=(6.7 + 3) * ULP32, atol=1e-37)


# -- Relu, the transcendental ufuncs, the row broadcasts ----------------------------------------------


def test_relu_compiled_loop_gives_the_reference_bits():
    _, y = _check("Relu", F, "compiled float32 loop", 14, {}, 0.0, n=ew.RELU_JIT_SIZE + 7)
    assert y.shape == (ew.RELU_JIT_SIZE + 7,)


@pytest.mark.parametrize("op, ufunc", [("Exp", np.exp), ("Tanh", np.tanh), ("Log", np.log), ("Sin", np.sin)])
@pytest.mark.parametrize("elem, dtype", [(F, np.float32), (TensorProto.DOUBLE, np.float64)], ids=["float32", "float64"])
def test_transcendental_pool_split_stays_in_the_reference_and_gives_the_ufuncs_bits(op, ufunc, elem, dtype):
    # declaring the split as a path would tax every small call with the dispatcher's lookup
    from onnxrt.ops_cpu import family_unary

    n = 2 * family_unary._CHUNK + 1001
    x = np.abs(np.random.default_rng(3).standard_normal(n)).astype(dtype) + dtype(0.1)
    sess = onnxrt.OnnxInference(_model(op, elem, x.shape, 13))
    y = sess.run({"x": x})["y"]
    assert y.dtype == dtype and y.shape == (n,)
    np.testing.assert_array_equal(y, ufunc(x))
    assert dispatch.paths_for(op) == [] and sess.fast_paths() == []


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("row_first", [False, True])
def test_row_broadcast_gives_the_reference_bits(op, row_first):
    rng = np.random.default_rng(4)
    full = rng.standard_normal((300, 1, 97)).astype(np.float32)
    row = (rng.standard_normal((1, 97)) + 3).astype(np.float32)
    a, b = (row, full) if row_first else (full, row)
    model = make_single_node_model(op, [("a", F, list(a.shape)), ("b", F, list(b.shape))], [("y", F, None)], opset=14)
    fast, _ = check_path(model, {"a": a, "b": b}, op, "compiled row broadcast", optimize=False)
    assert fast[0].shape == (300, 1, 97) and fast[0].dtype == np.float32


def test_small_and_other_inputs_stay_on_the_reference():
    cases = [
        ("Erf", 13, {}, np.ones(100, np.float32)),
        ("Sigmoid", 13, {}, np.ones(fm.JIT_MIN_SIZE, np.float64)),  # float64: no kernel
        ("Relu", 14, {}, np.ones(ew.RELU_JIT_SIZE - 1, np.float32)),
        ("Mish", 18, {}, np.ones(fm.CAST_MIN_SIZE, np.float32)),  # float32 Mish is the reference's formula
    ]
    elems = {np.dtype(np.float32): F, np.dtype(np.float64): TensorProto.DOUBLE}
    for op, opset, attrs, x in cases:
        sess = onnxrt.OnnxInference(_model(op, elems[x.dtype], x.shape, opset, **attrs))
        sess.run({"x": x})
        y = sess.run({"x": x})["y"]
        assert y.shape == x.shape and y.dtype == x.dtype
        # below every path's min_size the dispatcher runs the reference without recording a choice
        assert picked(sess, op) <= {"reference"}, op
    # same shapes (no row), and a legacy broadcast, keep numpy's ufunc
    a = np.ones((200, 100), np.float32)
    model = make_single_node_model("Add", [("a", F, [200, 100]), ("b", F, [200, 100])], [("y", F, None)], opset=14)
    sess = onnxrt.OnnxInference(model)
    np.testing.assert_array_equal(sess.run({"a": a, "b": a})["y"], a + a)
    assert picked(sess, "Add") == {"reference"}


def test_every_declared_path_has_a_first_line_and_the_modules_table_knows_it():
    from onnxrt.fastpaths import MODULES

    for op in ("Erf", "Sigmoid", "Elu", "Selu", "Celu", "Softplus", "Gelu", "Mish", "Swish", "Relu", "Add", "Div"):
        assert MODULES[("", op)] == "elementwise"
        paths = dispatch.paths_for(op)
        assert paths and all(p.doc and p.module == "onnxrt.fastpaths.elementwise" for p in paths), op


def _reference_options():
    so = onnxrt.SessionOptions()
    so.fast_paths = False
    return so


def _pow_model(exponent, elem, feed_exponent=False, y_shape=()):
    from onnx import numpy_helper

    dt = {F: np.float32, TensorProto.DOUBLE: np.float64, TensorProto.FLOAT16: np.float16}[elem]
    node = helper.make_node("Pow", ["x", "e"], ["y"])
    inputs = [helper.make_tensor_value_info("x", elem, None)]
    inits = []
    if feed_exponent:
        inputs.append(helper.make_tensor_value_info("e", elem, list(y_shape)))
    else:
        inits.append(numpy_helper.from_array(np.full(y_shape, exponent, dt), "e"))
    graph = helper.make_graph([node], "g", inputs, [helper.make_tensor_value_info("y", elem, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15)]), dt


@pytest.mark.parametrize("exponent", [2.0, 3.0])
@pytest.mark.parametrize("elem", [F, TensorProto.DOUBLE])
def test_pow_small_constant_exponent_by_products(exponent, elem):
    model, dt = _pow_model(exponent, elem)
    sess = onnxrt.OnnxInference(model)
    ref = onnxrt.OnnxInference(model, options=_reference_options())
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((3, 64, 33)) * 4).astype(dt)
    x[0, 0, :4] = [0.0, -0.0, np.inf, -np.inf]
    sess.run({"x": x})
    y = sess.run({"x": x})["y"]
    want = ref.run({"x": x})["y"]
    assert picked(sess, "Pow") == {"square or cube by products"}
    assert y.shape == x.shape and y.dtype == want.dtype == dt
    # (x * x) * x rounds twice, within 2u |x|^3 of the cube; pow() within 1 ulp (<= 2u |x|^3)
    eps = float(np.finfo(dt).eps)
    finite = np.isfinite(want)
    bound = 2.01 * eps * np.abs(x.astype(np.float64)[finite]) ** exponent
    assert np.all(np.abs(y[finite].astype(np.float64) - want[finite]) <= bound)
    np.testing.assert_array_equal(y[~finite], want[~finite])
    np.testing.assert_array_equal(np.signbit(y[0, 0, :4]), np.signbit(want[0, 0, :4]))


@pytest.mark.parametrize("case", ["non-integer", "fed", "float16", "higher rank"])
def test_pow_other_exponents_stay_on_the_reference(case):
    exponent, elem, fed, y_shape = {"non-integer": (2.5, F, False, ()), "fed": (3.0, F, True, ()),
                                    "float16": (3.0, TensorProto.FLOAT16, False, ()),
                                    "higher rank": (3.0, F, False, (1, 1, 1, 1))}[case]
    model, dt = _pow_model(exponent, elem, fed, y_shape)
    sess = onnxrt.OnnxInference(model)
    x = np.abs(np.random.default_rng(8).standard_normal((2, 5, 7))).astype(dt)
    feeds = {"x": x, "e": np.full(y_shape, exponent, dt)} if fed else {"x": x}
    y = sess.run(feeds)["y"]
    np.testing.assert_allclose(y, np.power(x.astype(np.float64), np.full(y_shape, exponent)).astype(dt),
                               rtol=4 * float(np.finfo(dt).eps))
    assert y.dtype == dt and y.shape == np.broadcast_shapes(x.shape, y_shape)
    assert picked(sess, "Pow") <= {"reference"}


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div"])
@pytest.mark.parametrize("col_first", [False, True])
@pytest.mark.parametrize("full_shape, col_shape", [((2, 96, 9, 11), (1, 96, 1, 1)), ((1, 40, 28, 28), (40, 1, 1)),
                                                   ((3, 5, 64, 70), (5, 64, 1))])
def test_channel_broadcast_gives_the_reference_bits(op, col_first, full_shape, col_shape):
    # one value per channel (or per block of axes) broadcast along the inner axes: a
    # squeeze-excitation's scale; the same IEEE operation per element as numpy's
    rng = np.random.default_rng(5)
    full = rng.standard_normal(full_shape).astype(np.float32)
    col = (rng.standard_normal(col_shape) + 3).astype(np.float32)
    full[0, 0, 0, :3] = [np.nan, np.inf, -0.0]
    a, b = (col, full) if col_first else (full, col)
    model = make_single_node_model(op, [("a", F, list(a.shape)), ("b", F, list(b.shape))], [("y", F, None)], opset=14)
    fast, _ = check_path(model, {"a": a, "b": b}, op, "compiled channel broadcast", optimize=False)
    assert fast[0].shape == full_shape and fast[0].dtype == np.float32


@pytest.mark.parametrize("shapes", [((300, 1, 97), (1, 97)), ((1, 96, 14, 14), (1, 1, 1, 1)), ((1, 96, 14, 14), (1, 96, 1, 14)),
                                    ((4, 96, 70), (4, 1, 70))])
def test_channel_broadcast_leaves_other_shapes(shapes):
    # a row, a scalar, axes that are not one block (twice)
    rng = np.random.default_rng(6)
    a, b = (rng.standard_normal(s).astype(np.float32) for s in shapes)
    model = make_single_node_model("Mul", [("a", F, list(a.shape)), ("b", F, list(b.shape))], [("y", F, None)], opset=14)
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxrt.OnnxInference(model, options=so)
    sess.run({"a": a, "b": b})
    y = sess.run({"a": a, "b": b})["y"]
    assert "compiled channel broadcast" not in picked(sess, "Mul")
    np.testing.assert_array_equal(y, a * b)
