"""Activations, Clip and the Softmax family: spec formulas, attributes, versions, float16/bfloat16, errors."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from onnxrt.errors import InvalidAttributeError, InvalidTypeError, KernelError
from onnxrt.ops_cpu.op_clip import clip
from onnxrt.ops_cpu.op_softmax import hardmax, log_softmax, softmax

from .test_elementwise import f64, onnx_type, ort_run, run

BF16 = np.dtype(ml_dtypes.bfloat16)
X = np.array([[-4.0, -1.5, -0.5, -0.0], [0.0, 0.3, 1.0, 3.5]])
ERF = np.vectorize(math.erf)


def _sig(v):
    return 1.0 / (1.0 + np.exp(-v))


def _softplus(v):
    return np.log1p(np.exp(v))


# op -> (attributes, float64 formula straight from the spec text, opset); the attribute
# values are exact in float32 (ONNX stores float attributes in float32)
CASES = {
    "LeakyRelu": ({"alpha": 0.125}, lambda v: np.where(v < 0, 0.125 * v, v), 16),
    "Elu": ({"alpha": 0.75}, lambda v: np.where(v > 0, v, 0.75 * (np.exp(v) - 1)), 22),
    "Selu": ({"alpha": 1.5, "gamma": 2.0}, lambda v: np.where(v > 0, 2.0 * v, 2.0 * (1.5 * np.exp(v) - 1.5)), 22),
    "Celu": ({"alpha": 2.0}, lambda v: np.maximum(0, v) + np.minimum(0, 2.0 * (np.exp(v / 2.0) - 1)), 28),
    "HardSigmoid": ({"alpha": 0.25, "beta": 0.375}, lambda v: np.maximum(0, np.minimum(1, 0.25 * v + 0.375)), 22),
    "HardSwish": ({}, lambda v: v * np.maximum(0, np.minimum(1, v / 6 + 0.5)), 22),
    "Softplus": ({}, _softplus, 22),
    "Softsign": ({}, lambda v: v / (1 + np.abs(v)), 22),
    "ThresholdedRelu": ({"alpha": 0.25}, lambda v: np.where(v > 0.25, v, 0), 22),
    "Gelu": ({}, lambda v: 0.5 * v * (1 + ERF(v / math.sqrt(2))), 20),
    "Mish": ({}, lambda v: v * np.tanh(_softplus(v)), 22),
    "Swish": ({"alpha": 1.75}, lambda v: v * _sig(1.75 * v), 24),
    "Shrink": ({"lambd": 0.625, "bias": 0.25}, lambda v: np.where(v < -0.625, v + 0.25, np.where(v > 0.625, v - 0.25, 0)), 9),
    "Relu": ({}, lambda v: np.maximum(v, 0), 14),
    "Sigmoid": ({}, _sig, 13),
}


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, BF16], ids=str)
@pytest.mark.parametrize("op", sorted(CASES))
def test_activation_formula(op, dtype):
    attrs, ref, opset = CASES[op]
    x = X.astype(dtype)
    if op == "Shrink" and np.dtype(dtype) == BF16:
        with pytest.raises(InvalidTypeError):  # Shrink 9 predates bfloat16
            run(op, x, opset=opset, **attrs)
        return
    y = run(op, x, opset=opset, **attrs)
    assert y.dtype == np.dtype(dtype) and y.shape == x.shape
    tol = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 2e-6}.get(np.dtype(dtype), 1e-2)
    np.testing.assert_allclose(f64(y), ref(f64(x)), rtol=tol, atol=tol)


@pytest.mark.parametrize("op", sorted(CASES))
def test_activation_of_a_0d_tensor(op):
    """numpy returns scalars for 0-d operands, which out= buffers refuse: 0-d inputs still work."""
    attrs, ref, opset = CASES[op]
    for dtype in (np.float32, np.float16):
        x = np.array(-0.75, dtype)
        y = run(op, x, opset=opset, **attrs)
        assert isinstance(y, np.ndarray) and y.shape == () and y.dtype == np.dtype(dtype)
        np.testing.assert_allclose(f64(y), ref(f64(x)), rtol=2e-3 if dtype == np.float16 else 2e-6)


def test_gelu_tanh_approximation():
    x = np.linspace(-5, 5, 41).astype(np.float32)
    y = run("Gelu", x, opset=20, approximate="tanh")
    v = f64(x)
    expected = 0.5 * v * (1 + np.tanh(math.sqrt(2 / math.pi) * (v + 0.044715 * v**3)))
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-7)
    with pytest.raises(InvalidAttributeError, match="approximate"):
        run("Gelu", x, opset=20, approximate="erf")


def test_activation_defaults_follow_the_schema_of_each_version():
    x = np.array([-1.0, 1.0], np.float32)
    np.testing.assert_allclose(run("LeakyRelu", x, opset=16), [-0.01, 1.0], rtol=1e-6)
    # Selu 1 and 6 have different default constants
    y1 = run("Selu", x, opset=1)
    y6 = run("Selu", x, opset=6)
    np.testing.assert_allclose(y1[1], 1.0507, rtol=1e-6)
    np.testing.assert_allclose(y6[1], 1.05070102214813232421875, rtol=1e-7)
    np.testing.assert_allclose(run("HardSigmoid", x, opset=6), [0.3, 0.7], rtol=1e-6)


def test_activations_large_inputs_do_not_overflow():
    x = np.array([-1000.0, -90.0, 90.0, 1000.0], np.float32)
    np.testing.assert_allclose(run("Softplus", x), [0.0, np.exp(-90.0), 90.0, 1000.0], rtol=1e-6)
    np.testing.assert_allclose(run("Elu", x), [-1.0, -1.0, 90.0, 1000.0])
    np.testing.assert_allclose(run("Mish", x), [-0.0, -90 * np.exp(-90.0), 90.0, 1000.0], rtol=1e-5, atol=1e-30)
    np.testing.assert_allclose(run("Swish", x, opset=24), [-0.0, -90 * _sig(-90.0), 90.0, 1000.0], rtol=1e-5, atol=1e-30)


def test_shrink_integers_compute_in_float_then_truncate():
    x = np.array([-5, -2, -1, 0, 1, 2, 5], np.int32)
    y = run("Shrink", x, opset=9, lambd=1.5, bias=1.5)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, ort_run("Shrink", x, opset=9, lambd=1.5, bias=1.5))
    np.testing.assert_array_equal(y, [-3, 0, 0, 0, 0, 0, 3])
    y = run("Shrink", np.array([0, 3, 200], np.uint8), opset=9, lambd=1.0, bias=1.0)
    np.testing.assert_array_equal(y, np.array([0, 2, 199], np.uint8))


def test_celu_before_28_is_float_only():
    with pytest.raises(InvalidTypeError):
        run("Celu", np.zeros(2, np.float64), opset=12)
    np.testing.assert_allclose(run("Celu", np.array([-1.0], np.float64), opset=28), [np.expm1(-1.0)])


# ----------------------------------------------------------------------------------------
# PRelu
# ----------------------------------------------------------------------------------------


def test_prelu_unidirectional_broadcasting():
    x = np.array([[-2.0, 1.0, -3.0], [4.0, -5.0, 0.0]], np.float32)
    slope = np.array([0.5, 2.0, 3.0], np.float32)
    y = run("PRelu", x, slope, opset=16)
    np.testing.assert_allclose(y, np.where(x < 0, x * slope, x))
    np.testing.assert_array_equal(run("PRelu", x, np.array(0.25, np.float32), opset=16), np.where(x < 0, x / 4, x))
    with pytest.raises(KernelError, match="slope"):
        run("PRelu", x[0], x, opset=16)  # the slope must broadcast to X, not the reverse


def test_prelu_integers_and_legacy_channel_slope():
    x = np.array([-4, 3, -1], np.int32)
    np.testing.assert_array_equal(run("PRelu", x, np.array([2, 2, 3], np.int32), opset=9), [-8, 3, -3])
    # opset 6: a slope of C values applies per channel (axis 1), as PyTorch exports it
    x = np.arange(-12, 12, dtype=np.float32).reshape(2, 3, 4)
    slope = np.array([0.1, 0.2, 0.3], np.float32)
    y = run("PRelu", x, slope, opset=6)
    np.testing.assert_allclose(y, np.where(x < 0, x * slope.reshape(3, 1), x))


# ----------------------------------------------------------------------------------------
# Clip
# ----------------------------------------------------------------------------------------


def test_clip_attributes_before_11():
    x = np.array([-3.0, -0.5, 0.25, 4.0], np.float32)
    np.testing.assert_array_equal(run("Clip", x, opset=6, min=-1.0, max=1.0), [-1.0, -0.5, 0.25, 1.0])
    np.testing.assert_array_equal(run("Clip", x, opset=6), x)  # defaults are -/+FLT_MAX
    np.testing.assert_array_equal(run("Clip", x, opset=1, max=0.0), [-3.0, -0.5, 0.0, 0.0])  # absent min: open
    x16 = x.astype(np.float16)
    np.testing.assert_array_equal(run("Clip", x16, opset=6, min=-1.0), np.maximum(x16, -1))


def test_clip_inputs_from_11():
    x = np.array([-3.0, -0.5, 0.25, 4.0, np.nan], np.float32)
    lo, hi = np.array(-1.0, np.float32), np.array(1.0, np.float32)
    np.testing.assert_array_equal(run("Clip", x, lo, hi, opset=13), [-1.0, -0.5, 0.25, 1.0, np.nan])
    np.testing.assert_array_equal(run("Clip", x, lo, opset=13), [-1.0, -0.5, 0.25, 4.0, np.nan])
    from onnx import helper

    from onnxrt.backend import run_node

    (y,) = run_node(helper.make_node("Clip", ["x", "", "hi"], ["y"]), {"x": x, "hi": hi})
    np.testing.assert_array_equal(y, [-3.0, -0.5, 0.25, 1.0, np.nan])
    # min > max: every value becomes max (Clip 13)
    np.testing.assert_array_equal(run("Clip", x[:4], np.array(2.0, np.float32), np.array(1.0, np.float32)), [1.0] * 4)
    with pytest.raises(KernelError, match="scalar"):
        run("Clip", x, np.array([0.0, 1.0], np.float32))


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, BF16], ids=str)
def test_clip_omitted_bounds_are_type_limits(dtype):
    # "They default to numeric_limits::lowest() and numeric_limits::max()": infinities clamp
    # to the largest finite value of the type (found by tests/fuzz; onnxruntime agrees),
    # with the bound fused into a MatMul too
    import onnx
    from onnx import TensorProto, helper

    import onnxrt

    info = ml_dtypes.finfo(dtype)
    x = np.array([-np.inf, np.inf, np.nan, 1.0], np.float64).astype(dtype)
    np.testing.assert_array_equal(f64(run("Clip", x, opset=13)), [float(info.min), float(info.max), np.nan, 1.0])
    np.testing.assert_array_equal(f64(run("Clip", x, np.array(0, dtype), opset=13)), [0.0, float(info.max), np.nan, 1.0])
    elem = onnx_type(np.dtype(dtype))
    nodes = [helper.make_node("MatMul", ["a", "b"], ["m"]), helper.make_node("Clip", ["m", "lo"], ["y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("a", elem, [1, 2])], [helper.make_tensor_value_info("y", elem, None)],
        [onnx.numpy_helper.from_array(np.array([[np.inf], [1.0]]).astype(dtype), "b"),
         onnx.numpy_helper.from_array(np.array(0.0).astype(dtype), "lo")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=9)
    for level in (onnxrt.GraphOptimizationLevel.ORT_ENABLE_ALL, onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL):
        opts = onnxrt.SessionOptions()
        opts.graph_optimization_level = level
        (y,) = onnxrt.InferenceSession(model, opts).run(None, {"a": np.array([[1.0, 2.0]]).astype(dtype)})
        np.testing.assert_array_equal(f64(y), [[float(info.max)]])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8, np.int32, np.int64, np.uint64], ids=str)
def test_clip_integers_from_12(dtype):
    info = np.iinfo(dtype)
    x = np.array([info.min, 0, 5, info.max], dtype)
    y = run("Clip", x, np.array(1, dtype), np.array(6, dtype), opset=12)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, [1, 1, 5, 6])
    np.testing.assert_array_equal(run("Clip", x, opset=13), x)
    with pytest.raises(InvalidTypeError):
        run("Clip", x, opset=11)


def test_clip_kernel_does_not_alias_its_input():
    x = np.array([1.0, 2.0], np.float32)
    y = clip(x)
    assert y is not x and np.array_equal(y, x)
    y = run("Clip", np.array([1.0, 2.0], BF16), np.array(1.5, BF16), opset=13)
    assert y.dtype == BF16
    np.testing.assert_array_equal(f64(y), [1.5, 2.0])


# ----------------------------------------------------------------------------------------
# Softmax, LogSoftmax, Hardmax
# ----------------------------------------------------------------------------------------


def _np_softmax(v, axis):
    e = np.exp(v - v.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
def test_softmax_13_is_per_axis(axis):
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    y = run("Softmax", x, opset=13, axis=axis)
    np.testing.assert_allclose(y, _np_softmax(f64(x), axis), rtol=1e-6)
    ly = run("LogSoftmax", x, opset=13, axis=axis)
    np.testing.assert_allclose(ly, np.log(_np_softmax(f64(x), axis)), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("opset", [1, 11])
def test_softmax_before_13_coerces_to_2d(opset):
    x = np.random.default_rng(1).standard_normal((2, 3, 4)).astype(np.float32)
    y = run("Softmax", x, opset=opset)  # default axis 1: normalised over the 3*4 trailing block
    expected = _np_softmax(f64(x).reshape(2, 12), 1).reshape(2, 3, 4)
    np.testing.assert_allclose(y, expected, rtol=1e-6)
    assert np.allclose(y.sum(axis=(1, 2)), 1.0) and not np.allclose(y.sum(axis=1), 1.0)
    ly = run("LogSoftmax", x, opset=opset, axis=2)
    np.testing.assert_allclose(ly, np.log(_np_softmax(f64(x).reshape(6, 4), 1)).reshape(2, 3, 4), rtol=1e-5, atol=1e-6)
    y0 = run("Softmax", x, opset=opset, axis=0)  # everything in one row
    np.testing.assert_allclose(y0.sum(), 1.0, rtol=1e-6)


def test_softmax_large_values_and_low_precision_types():
    x = np.array([[1000.0, 1001.0, 1002.0], [-1e4, 0.0, 1e4]], np.float32)
    np.testing.assert_allclose(run("Softmax", x), _np_softmax(f64(x), -1), rtol=1e-6)
    np.testing.assert_allclose(run("LogSoftmax", x), [[-2.4076059, -1.4076059, -0.4076059], [-2e4, -1e4, 0.0]], rtol=1e-6)
    small = np.array([[0.0, 1.0, 2.0]], np.float32)
    for dt in (np.float16, BF16):
        y = run("Softmax", small.astype(dt))
        assert y.dtype == np.dtype(dt)
        np.testing.assert_allclose(f64(y), _np_softmax(f64(small), -1), rtol=1e-2)


@pytest.mark.parametrize("dtype", [np.float16, BF16], ids=str)
def test_softmax_low_precision_types_follow_the_function_body(dtype):
    """Exp, ReduceSum and Div in T, each rounded (Softmax-13's body and the conformance data)."""
    x = np.random.default_rng(3).standard_normal((4, 7)).astype(dtype)
    t = x - x.max(axis=-1, keepdims=True)
    e = np.exp(t)
    s = e.sum(axis=-1, keepdims=True)
    np.testing.assert_array_equal(f64(run("Softmax", x)), f64(e / s))
    np.testing.assert_array_equal(f64(run("LogSoftmax", x)), f64(t - np.log(s)))


def test_softmax_errors_and_empty():
    with pytest.raises(KernelError, match="axis"):
        run("Softmax", np.zeros((2, 3), np.float32), opset=13, axis=2)
    y = run("Softmax", np.zeros((0, 3), np.float32))
    assert y.shape == (0, 3) and y.dtype == np.float32
    with pytest.raises(InvalidTypeError):
        run("Softmax", np.zeros((2, 3), BF16), opset=11)


def test_hardmax_first_maximum_wins():
    x = np.array([[3.0, 1.0, 3.0, 2.0], [0.0, 5.0, 5.0, 5.0], [-1.0, -1.0, -1.0, -1.0]], np.float32)
    y = run("Hardmax", x, opset=13)
    np.testing.assert_array_equal(y, [[1, 0, 0, 0], [0, 1, 0, 0], [1, 0, 0, 0]])
    assert y.dtype == np.float32
    y = run("Hardmax", x, opset=13, axis=0)
    np.testing.assert_array_equal(y, [[1, 0, 0, 0], [0, 1, 1, 1], [0, 0, 0, 0]])
    # opset 11: one 1 in the whole coerced row
    x3 = np.arange(24, dtype=np.float64).reshape(2, 3, 4)
    y = run("Hardmax", x3, opset=11)
    assert y.sum() == 2 and y[0, 2, 3] == 1 and y[1, 2, 3] == 1
    np.testing.assert_array_equal(hardmax(x3.astype(np.float16), axis=1, coerce_2d=False).sum(axis=1), np.ones((2, 4)))


def test_softmax_kernels_directly():
    x = np.array([[1.0, 2.0], [3.0, 5.0]])
    np.testing.assert_allclose(softmax(x, axis=0), _np_softmax(x, 0))
    np.testing.assert_allclose(log_softmax(x), np.log(_np_softmax(x, -1)))


@pytest.mark.parametrize("axis", [-1, 1, 0])
def test_large_softmax_split_over_threads_equals_one_call(axis):
    """From 256K elements the lanes are split by blocks of the first axis over the kernel
    pool: every lane gives exactly what one call gives (axis 0 is not split)."""
    from onnxrt.ops_cpu.op_softmax import _softmax_native

    from onnxrt import native as _jit
    from onnxrt.fastpaths.softmax import softmax_compiled, softmax_lanes

    x = np.random.default_rng(3).standard_normal((300, 40, 30)).astype(np.float32) * 5
    k = _jit.kernels()
    for fn, log in ((softmax, False), (log_softmax, True)):
        if axis == -1:  # the last axis runs the compiled loop: the split equals its one call
            y = softmax_compiled(x, 30, log)
            one = np.empty((300 * 40, 30), np.float32)
            k.softmax_rows(x.reshape(-1, 30), x.reshape(-1, 30).max(axis=1), one, log)
            np.testing.assert_array_equal(y, one.reshape(x.shape))
        elif axis > 0:  # the pool's blocks of the first axis
            y = softmax_lanes(x, axis, log)
            np.testing.assert_array_equal(y, _softmax_native(x, axis % 3, log))
        else:
            y = fn(x, axis=axis)
        assert y.dtype == np.float32 and y.shape == x.shape
        np.testing.assert_array_equal(fn(x, axis=axis), _softmax_native(x, axis % 3, log))
    np.testing.assert_allclose(softmax(x, axis=axis).astype(np.float64), _np_softmax(f64(x), axis), rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("log", [False, True])
def test_compiled_softmax_rows_accuracy_and_special_values(log):
    """The numba row loop against the numpy path and float64: NaN or +inf in a row make the whole row NaN
    (as numpy's formula does), -inf entries give 0 (-inf for LogSoftmax), rows are exact to a few ulp."""
    from onnxrt import native as _jit

    rng = np.random.default_rng(5)
    x = (rng.standard_normal((64, 257)) * 30).astype(np.float32)
    x[3, 7] = np.nan
    x[4, 0] = np.inf
    x[5, :200] = -np.inf
    x[6] = -np.inf
    from onnxrt.fastpaths.softmax import softmax_compiled

    fn = log_softmax if log else softmax
    y = softmax_compiled(x, 257, log)
    with np.errstate(invalid="ignore"):
        expected = fn(x)  # the reference kernel
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    for row in (3, 4, 6):
        assert np.isnan(y[row]).all()
    ok = ~np.isnan(expected)
    # LogSoftmax near 0 is (x - max) - log(sum): absolute error of an ulp of log(sum)
    np.testing.assert_allclose(y[ok], expected[ok], rtol=3e-6, atol=5e-7 if log else 1e-37)
    xx = f64(np.delete(x, [3, 4, 6], axis=0))
    with np.errstate(divide="ignore"):
        ref = np.log(_np_softmax(xx, -1)) if log else _np_softmax(xx, -1)
        # x - max rounds in float32 (|x - max| up to ~200 here: 1e-5 relative after exp)
        np.testing.assert_allclose(np.delete(y, [3, 4, 6], axis=0), ref, rtol=1e-5, atol=5e-7 if log else 1e-37)
    assert _jit.kernels() is not None


# ----------------------------------------------------------------------------------------
# differential tests against onnxruntime
# ----------------------------------------------------------------------------------------


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(sorted(set(CASES) - {"Celu", "Swish"}) + ["Softmax", "LogSoftmax", "Hardmax"]),
    x=hnp.arrays(np.float32, st.sampled_from([(5,), (2, 3), (2, 3, 2)]), elements=st.floats(-20, 20, width=32)),
)
def test_activations_match_onnxruntime(op, x):
    attrs = CASES[op][0] if op in CASES else {"axis": 0}
    opset = 22 if op not in ("Gelu", "Shrink") else CASES[op][2]
    y = run(op, x, opset=opset, **attrs)
    expected = ort_run(op, x, opset=opset, **attrs)
    assert y.dtype == expected.dtype and y.shape == expected.shape
    if op == "Hardmax" and len(np.unique(x)) < x.size:
        return  # ties: both pick a first maximum, checked exactly above
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def test_compiled_softmax_keeps_tiny_results_down_to_its_flush():
    """The compiled Softmax (float32 rows of 4096+ along the last axis) flushes exp(x - max)
    to 0 below about 8.6e-39 (x - max < -87.68, where the power of two's bits are 0) and
    keeps the subnormal results above it to float32 rounding; -inf gives 0, a NaN row NaN."""
    from onnxrt import native as _jit

    if _jit.kernels() is None:
        pytest.skip("no numba")
    x = np.full((3, 4096), -200.0, np.float32)
    x[0, :6] = [0.0, -87.0, -87.5, -87.65, -87.72, -np.inf]
    x[1, 7] = np.nan
    x[2] = np.random.default_rng(5).standard_normal(4096).astype(np.float32)
    from onnxrt.fastpaths.softmax import softmax_compiled

    y = softmax_compiled(x, 4096, False)
    assert y.dtype == np.float32 and y.shape == x.shape
    exact = np.exp(f64(x[0, :5]))
    np.testing.assert_allclose(y[0, :3], exact[:3], rtol=1e-6)  # 1, a normal and a subnormal
    assert 0 < y[0, 3] and abs(float(y[0, 3]) - exact[3]) <= 2 * 1.4e-45  # subnormal: within 2 of its steps
    assert y[0, 4] == 0 and y[0, 5] == 0 and (y[0, 6:] == 0).all()
    assert np.isnan(y[1]).all()
    np.testing.assert_allclose(y[2], _np_softmax(f64(x[2]), -1), rtol=2e-6)
