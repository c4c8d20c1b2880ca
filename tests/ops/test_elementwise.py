"""Element-wise math: unary, binary, variadic, comparison and bitwise operators (values, shapes, dtypes, versions)."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import helper

import onnxrt
from onnxrt.backend import run_node
from onnxrt.dtypes import onnx_type
from onnxrt.errors import InvalidAttributeError, InvalidTypeError, KernelError
from onnxrt.ops_cpu import family_binary, family_compare, family_unary

BF16 = np.dtype(ml_dtypes.bfloat16)
FLOATS = [np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64), BF16]
SIGNED = [np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64)]
UNSIGNED = [np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64)]


def run(op: str, *inputs: np.ndarray, opset: int = 22, **attrs) -> np.ndarray:
    """One node run through the whole engine (schema type checks included); its first output."""
    node = helper.make_node(op, [f"x{i}" for i in range(len(inputs))], ["y"], **attrs)
    return run_node(node, list(inputs), opset_version=opset)[0]


def ort_run(op: str, *inputs: np.ndarray, opset: int = 22, **attrs) -> np.ndarray:
    """The same node through onnxruntime (the oracle)."""
    ort = pytest.importorskip("onnxruntime")
    names = [f"x{i}" for i in range(len(inputs))]
    node = helper.make_node(op, names, ["y"], **attrs)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info(n, onnx_type(v.dtype), v.shape) for n, v in zip(names, inputs)],
        [helper.make_empty_tensor_value_info("y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, dict(zip(names, inputs)))[0]


def f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


# ----------------------------------------------------------------------------------------
# unary
# ----------------------------------------------------------------------------------------

X = np.array([[-2.5, -1.0, -0.5, 0.0], [0.25, 0.5, 1.5, 3.0]])
UNIT = np.array([[-0.9, -0.5, -0.1, 0.0], [0.1, 0.3, 0.7, 0.95]])
POS = np.array([[0.1, 0.5, 1.0, 1.5], [2.0, 3.0, 10.0, 100.0]])
GE1 = np.array([[1.0, 1.1, 1.5, 2.0], [3.0, 10.0, 50.0, 100.0]])

# op -> (reference on float64, sample, opset)
UNARY_CASES = {
    "Abs": (np.abs, X, 13),
    "Neg": (np.negative, X, 13),
    "Exp": (np.exp, X, 13),
    "Log": (np.log, POS, 13),
    "Sqrt": (np.sqrt, POS, 13),
    "Reciprocal": (lambda v: 1.0 / v, POS, 13),
    "Ceil": (np.ceil, X, 13),
    "Floor": (np.floor, X, 13),
    "Round": (np.round, X, 22),
    "Sign": (np.sign, X, 13),
    "Sin": (np.sin, X, 22),
    "Cos": (np.cos, X, 22),
    "Tan": (np.tan, X, 22),
    "Asin": (np.arcsin, UNIT, 22),
    "Acos": (np.arccos, UNIT, 22),
    "Atan": (np.arctan, X, 22),
    "Sinh": (np.sinh, X, 22),
    "Cosh": (np.cosh, X, 22),
    "Tanh": (np.tanh, X, 13),
    "Asinh": (np.arcsinh, X, 22),
    "Acosh": (np.arccosh, GE1, 22),
    "Atanh": (np.arctanh, UNIT, 22),
    "Erf": (np.vectorize(math.erf), X, 13),
    "Relu": (lambda v: np.where(v > 0, v, 0.0), X, 14),
    "Sigmoid": (lambda v: 1.0 / (1.0 + np.exp(-v)), X, 13),
}


@pytest.mark.parametrize("dtype", FLOATS, ids=str)
@pytest.mark.parametrize("op", sorted(UNARY_CASES))
def test_unary_float_types(op, dtype):
    ref, sample, opset = UNARY_CASES[op]
    x = sample.astype(dtype)
    y = run(op, x, opset=opset)
    assert y.dtype == dtype and y.shape == x.shape
    expected = ref(f64(x))
    tol = {np.dtype(np.float64): 1e-12, np.dtype(np.float32): 1e-6}.get(dtype, 1e-2)
    np.testing.assert_allclose(f64(y), expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("op", ["Abs", "Neg", "Sign", "Relu"])
@pytest.mark.parametrize("dtype", SIGNED, ids=str)
def test_unary_signed_integers(op, dtype):
    x = np.array([-7, -1, 0, 1, 5], dtype=dtype)
    ref = {"Abs": np.abs, "Neg": np.negative, "Sign": np.sign, "Relu": lambda v: np.maximum(v, 0)}[op]
    y = run(op, x, opset=14)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, ref(x.astype(np.int64)))


def test_unary_keeps_shape_for_empty_and_scalar_inputs():
    for x in (np.zeros((0, 3), np.float32), np.array(2.0, np.float32)):
        y = run("Exp", x)
        assert y.shape == x.shape and y.dtype == np.float32
    np.testing.assert_allclose(run("Exp", np.array(2.0, np.float32)), np.exp(np.float32(2.0)))


@pytest.mark.parametrize("op", ["Add", "Div", "Pow", "Mod", "Max", "Min", "Sum", "Mean", "Equal", "Sigmoid", "Erf", "Relu", "IsInf"])
def test_0d_operands_give_0d_arrays(op):
    a = np.array(7.0, np.float32)
    b = np.array(2.0, np.float32)
    inputs = (a,) if op in ("Sigmoid", "Erf", "Relu", "IsInf") else (a, b)
    attrs = {"fmod": 1} if op == "Mod" else {}
    y = run(op, *inputs, opset=16, **attrs)
    assert isinstance(y, np.ndarray) and y.shape == ()
    if op in ("Max", "Min", "Sum", "Mean"):
        y3 = run(op, a, b, b, opset=16)
        assert isinstance(y3, np.ndarray) and y3.shape == ()
    ia = np.array(-7, np.int32)
    assert run("Div", ia, np.array(2, np.int32), opset=16).tolist() == -3


def test_round_halves_to_even():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, -4.5, 2.3, 0.9, -0.0, np.inf, np.nan], np.float32)
    y = run("Round", x, opset=11)
    np.testing.assert_array_equal(y, [0, 2, 2, -0.0, -2, -4, 2, 1, -0.0, np.inf, np.nan])
    assert np.signbit(y[3]) and np.signbit(y[8])


def test_sign_of_zero_and_nan():
    y = run("Sign", np.array([-0.0, 0.0, np.nan, -3.0, 7.0], np.float32))
    np.testing.assert_array_equal(y, [0, 0, np.nan, -1, 1])
    np.testing.assert_array_equal(run("Sign", np.array([0, 3, 200], np.uint8)), np.array([0, 1, 1], np.uint8))


def test_erf_integer_inputs_before_opset_13_truncate():
    y = run("Erf", np.array([-3, -1, 0, 1, 3], np.int32), opset=9)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [0, 0, 0, 0, 0])  # erf(+-3) = +-0.99998 -> 0 toward zero
    with pytest.raises(InvalidTypeError):
        run("Erf", np.array([1], np.int32), opset=13)  # Erf 13 allows floats only


def test_sigmoid_is_relatively_accurate_far_in_the_tails():
    x = np.array([-80.0, -60.0, -20.0, 0.0, 20.0, 100.0], np.float32)
    y = run("Sigmoid", x)
    expected = 1.0 / (1.0 + np.exp(-f64(x)))
    np.testing.assert_allclose(f64(y), expected, rtol=1e-6, atol=0)
    # below -88 the value is subnormal: exp(x) / (1 + exp(x)) keeps it (1 / (1 + exp(-x)) gave 0)
    y = run("Sigmoid", np.array([-100.0, -1e4, -np.inf, np.nan], np.float32))
    np.testing.assert_array_equal(y, [np.float32(np.exp(-100.0)), 0.0, 0.0, np.nan])
    y16 = run("Sigmoid", np.array([-15.0, -12.0], np.float16))  # exp(15) overflows float16
    assert y16.dtype == np.float16 and np.all(y16 > 0)


@pytest.mark.parametrize("opset", [10, 20])
def test_isinf_detect_flags(opset):
    x = np.array([-np.inf, -1.0, 0.0, np.inf, np.nan], np.float32)
    np.testing.assert_array_equal(run("IsInf", x, opset=opset), [True, False, False, True, False])
    np.testing.assert_array_equal(run("IsInf", x, opset=opset, detect_negative=0), [False, False, False, True, False])
    np.testing.assert_array_equal(run("IsInf", x, opset=opset, detect_positive=0), [True, False, False, False, False])
    y = run("IsInf", x, opset=opset, detect_positive=0, detect_negative=0)
    assert y.dtype == bool and not y.any() and y.shape == x.shape


def test_isnan_isinf_float8():
    x = np.array([1.0, np.nan, np.inf, -2.0], np.float32).astype(ml_dtypes.float8_e5m2)
    np.testing.assert_array_equal(run("IsNaN", x, opset=20), [False, True, False, False])
    np.testing.assert_array_equal(run("IsInf", x, opset=20), [False, False, True, False])
    e4 = np.array([1.0, np.nan], np.float32).astype(ml_dtypes.float8_e4m3fn)  # no infinity in e4m3fn
    np.testing.assert_array_equal(run("IsInf", e4, opset=20), [False, False])
    with pytest.raises(InvalidTypeError):
        run("IsNaN", x, opset=13)  # float 8 types arrive with IsNaN 20


def test_not_and_bitwise_not():
    np.testing.assert_array_equal(run("Not", np.array([True, False])), [False, True])
    for dt in SIGNED + UNSIGNED:
        x = np.array([0, 1, 5, 100], dtype=dt)
        y = run("BitwiseNot", x, opset=18)
        assert y.dtype == dt
        np.testing.assert_array_equal(y, ~x)
    np.testing.assert_array_equal(run("BitwiseNot", np.array([0, 255], np.uint8), opset=18), [255, 0])


def test_unary_rejects_types_the_schema_forbids():
    with pytest.raises(InvalidTypeError):
        run("Abs", np.array([1], np.int32), opset=1)  # Abs 6 adds integers
    with pytest.raises(InvalidTypeError):
        run("Relu", np.array([1], np.int32), opset=13)  # Relu 14 adds signed integers
    with pytest.raises(InvalidTypeError):
        run("Exp", np.array([1], np.int64))


def test_kernels_never_write_into_their_inputs():
    x = np.array([-1.5, 0.5, 2.0], np.float32)
    x.flags.writeable = False  # any write into the input would raise
    for op in ("Sigmoid", "Relu", "Exp", "Erf", "Neg"):
        family_unary.__dict__[op](helper.make_node(op, ["x"], ["y"])).run(x)
    node = helper.make_node("Div", ["a", "b"], ["y"])
    a = np.array([7, -7], np.int32)
    a.flags.writeable = False
    family_binary.Div(node).run(a, a)


# ----------------------------------------------------------------------------------------
# binary arithmetic
# ----------------------------------------------------------------------------------------

NUMERIC14 = FLOATS + SIGNED + UNSIGNED


@pytest.mark.parametrize("dtype", NUMERIC14, ids=str)
@pytest.mark.parametrize("op,ref", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply)])
def test_arithmetic_every_type_with_broadcasting(op, ref, dtype):
    a = np.arange(12).reshape(3, 4).astype(dtype)
    b = np.array([1, 2, 3, 4]).astype(dtype)
    y = run(op, a, b, opset=14)
    assert y.dtype == dtype and y.shape == (3, 4)
    np.testing.assert_array_equal(f64(y), f64(ref(a, b)))


def test_arithmetic_wraps_on_integer_overflow():
    y = run("Add", np.array([127, -128], np.int8), np.array([1, -1], np.int8), opset=14)
    np.testing.assert_array_equal(y, np.array([-128, 127], np.int8))
    y = run("Mul", np.array([200], np.uint8), np.array([2], np.uint8), opset=14)
    np.testing.assert_array_equal(y, np.array([144], np.uint8))


def test_no_silent_promotion():
    with pytest.raises(InvalidTypeError, match="same type"):
        run("Add", np.ones(2, np.float32), np.ones(2, np.float64))
    with pytest.raises(InvalidTypeError):
        run("Add", np.ones(2, np.int8), np.ones(2, np.int8), opset=13)  # int8 arrives with Add 14
    with pytest.raises(InvalidTypeError):
        run("Div", np.ones(2, bool), np.ones(2, bool))


def test_multidirectional_broadcasting():
    a = np.arange(3, dtype=np.float32).reshape(3, 1)
    b = np.arange(4, dtype=np.float32).reshape(1, 4)
    y = run("Add", a, b)
    assert y.shape == (3, 4)
    np.testing.assert_array_equal(y, a + b)
    with pytest.raises(KernelError):
        run("Add", np.ones((2, 3), np.float32), np.ones((4,), np.float32))


@pytest.mark.parametrize("op", ["Add", "Sub", "Mul", "Div", "Pow", "Equal", "Less", "Greater", "And"])
def test_legacy_broadcast_attributes_before_opset_7(op):
    dtype = bool if op == "And" else np.int32 if op == "Equal" else np.float32  # Equal 1: bool and integers
    a = (np.arange(24).reshape(2, 3, 4) % 3 + 1).astype(dtype)
    b = (np.arange(3) % 2 + 1).astype(dtype)
    ref = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide, "Pow": np.power,
           "Equal": np.equal, "Less": np.less, "Greater": np.greater, "And": np.logical_and}[op]
    y = run(op, a, b, opset=6, broadcast=1, axis=1)  # B of shape (3,) aligned with A's axis 1
    np.testing.assert_array_equal(y, ref(a, b.reshape(3, 1)))
    b4 = (np.arange(4) % 2 + 1).astype(dtype)
    np.testing.assert_array_equal(run(op, a, b4, opset=6, broadcast=1), ref(a, b4))  # suffix matching
    with pytest.raises(KernelError, match="same shape"):
        run(op, a, b4, opset=6)  # broadcast=0 needs equal shapes
    with pytest.raises(KernelError, match="must broadcast"):
        run(op, b4, a, opset=6, broadcast=1)  # B larger than A


def test_consumed_inputs_of_opset_1_is_accepted_and_ignored():
    y = run("Add", np.ones(2, np.float32), np.ones(2, np.float32), opset=1, consumed_inputs=[0, 0])
    np.testing.assert_array_equal(y, [2.0, 2.0])
    np.testing.assert_array_equal(run("Relu", np.array([-1.0, 1.0], np.float32), opset=1, consumed_inputs=[0]), [0, 1])


@pytest.mark.parametrize("dtype", SIGNED, ids=str)
def test_integer_div_truncates_toward_zero(dtype):
    a = np.array([7, -7, 7, -7, 6, -6, 0], dtype=dtype)
    b = np.array([2, 2, -2, -2, 3, 3, 5], dtype=dtype)
    y = run("Div", a, b, opset=14)
    assert y.dtype == dtype
    np.testing.assert_array_equal(y, [3, -3, -3, 3, 2, -2, 0])


def test_unsigned_div_and_division_by_zero():
    np.testing.assert_array_equal(run("Div", np.array([7, 255], np.uint8), np.array([2, 16], np.uint8), opset=14), [3, 15])
    with pytest.raises(KernelError, match="division by zero"):
        run("Div", np.array([1, 2], np.int32), np.array([1, 0], np.int32))
    y = run("Div", np.array([1.0, -1.0, 0.0], np.float32), np.zeros(3, np.float32))
    np.testing.assert_array_equal(y, [np.inf, -np.inf, np.nan])


def test_mod_integer_semantics():
    a = np.array([-4, 7, 5, 4, -7, 8], np.int32)
    b = np.array([2, -3, 8, -2, 3, 5], np.int32)
    np.testing.assert_array_equal(run("Mod", a, b, opset=13), [0, -2, 5, 0, 2, 3])  # sign of the divisor
    np.testing.assert_array_equal(run("Mod", a, b, opset=13, fmod=1), [0, 1, 5, 0, -1, 3])  # sign of the dividend
    np.testing.assert_array_equal(run("Mod", np.array([7], np.uint8), np.array([3], np.uint8)), [1])
    with pytest.raises(KernelError, match="division by zero"):
        run("Mod", a, np.zeros_like(a))


def test_mod_float_semantics_by_version():
    a = np.array([-4.3, 7.2, 5.0, -7.5], np.float32)
    b = np.array([2.1, -3.4, 8.0, 2.0], np.float32)
    np.testing.assert_allclose(run("Mod", a, b, opset=13, fmod=1), np.fmod(a, b))
    with pytest.raises(KernelError, match="fmod=1"):
        run("Mod", a, b, opset=13)  # before 28, floats need fmod=1
    y = run("Mod", a, b, opset=28)  # A - floor(A / B) * B
    np.testing.assert_allclose(f64(y), f64(a) - np.floor(f64(a) / f64(b)) * f64(b), rtol=1e-5)
    # Mod 28's special cases with fmod=0
    x = np.array([0.0, -0.0, np.inf, 3.0, 3.0, -3.0, 3.0, np.nan], np.float64)
    d = np.array([-2.0, 2.0, 2.0, 0.0, np.inf, np.inf, -np.inf, 1.0], np.float64)
    y = run("Mod", x, d, opset=28)
    np.testing.assert_array_equal(y, [-0.0, 0.0, np.nan, np.nan, 3.0, np.inf, -np.inf, np.nan])
    assert np.signbit(y[0]) and not np.signbit(y[1])
    with pytest.raises(InvalidAttributeError):
        run("Mod", a, b, opset=28, fmod=2)


def test_pow_types():
    np.testing.assert_array_equal(run("Pow", np.array([1, 2, 3], np.int32), np.array([4.0, 5.0, 6.0], np.float32), opset=15), [1, 32, 729])
    np.testing.assert_array_equal(run("Pow", np.array([2, 3, 7], np.int64), np.array([0.5, 2.5, 1.5], np.float32), opset=15), [1, 15, 18])
    y = run("Pow", np.array([2.0, 3.0], np.float32), np.array([3, 2], np.int64), opset=15)
    assert y.dtype == np.float32
    np.testing.assert_array_equal(y, [8.0, 9.0])
    # negative integer exponents: truncation of the real power, as onnxruntime
    np.testing.assert_array_equal(run("Pow", np.array([2, 1, -1, 2], np.int32), np.array([-1, -1, -1, 3], np.int32), opset=15), [0, 1, -1, 8])
    # exact 64-bit integer powers (float64 would round)
    np.testing.assert_array_equal(run("Pow", np.array([3], np.int64), np.array([39], np.int64), opset=15), [3**39])
    np.testing.assert_array_equal(run("Pow", np.array([3], np.int64), np.array([2], np.uint8), opset=15), [9])
    y = run("Pow", np.array([1.5], ml_dtypes.bfloat16), np.array([2.0], np.float32), opset=15)
    assert y.dtype == BF16 and float(y[0]) == 2.25


@pytest.mark.parametrize("dtype", [np.int8, np.int32, np.int64], ids=str)
def test_bitshift_signed_semantics_of_opset_28(dtype):
    bits = np.dtype(dtype).itemsize * 8
    x = np.array([1, -1, 64, -16, 5, -5], dtype)
    left = run("BitShift", x, np.array([3, 1, 1, 2, -1, bits], dtype), opset=28, direction="LEFT")
    expected = np.array([8, -2, 128, -64, 0, 0]).astype(dtype)  # bits pushed past the sign are lost
    np.testing.assert_array_equal(left, expected)
    right = run("BitShift", x, np.array([0, 3, 2, 2, -1, bits + 3], dtype), opset=28, direction="RIGHT")
    np.testing.assert_array_equal(right, np.array([1, -1, 16, -4, 0, -1], dtype))  # arithmetic shift


def test_bitshift_unsigned_and_errors():
    x = np.array([16, 4, 1], np.uint8)
    np.testing.assert_array_equal(run("BitShift", x, np.array([1, 2, 8], np.uint8), opset=11, direction="RIGHT"), [8, 1, 0])
    np.testing.assert_array_equal(run("BitShift", x, np.array([1, 2, 7], np.uint8), opset=11, direction="LEFT"), [32, 16, 128])
    with pytest.raises(InvalidTypeError):
        run("BitShift", np.array([1], np.int32), np.array([1], np.int32), opset=11, direction="LEFT")
    with pytest.raises(InvalidAttributeError, match="direction"):
        run("BitShift", x, x, opset=11, direction="UP")


@pytest.mark.parametrize("op,ref", [("BitwiseAnd", np.bitwise_and), ("BitwiseOr", np.bitwise_or), ("BitwiseXor", np.bitwise_xor)])
@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED, ids=str)
def test_bitwise(op, ref, dtype):
    a = np.array([[0, 1, 6, 100]], dtype)
    b = np.array([[3], [12]], dtype)
    y = run(op, a, b, opset=18)
    assert y.dtype == dtype and y.shape == (2, 4)
    np.testing.assert_array_equal(y, ref(a, b))


# ----------------------------------------------------------------------------------------
# variadic
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("op", ["Max", "Min"])
def test_max_min_propagate_nan(op):
    a = np.array([1.0, np.nan, 3.0, np.nan], np.float32)
    b = np.array([np.nan, 2.0, 1.0, np.nan], np.float32)
    y = run(op, a, b, opset=13)
    np.testing.assert_array_equal(y, [np.nan, np.nan, 3.0 if op == "Max" else 1.0, np.nan])
    np.testing.assert_array_equal(y, ort_run(op, a, b, opset=13))


@pytest.mark.parametrize("op,ref", [("Max", np.maximum), ("Min", np.minimum), ("Sum", np.add)])
def test_variadic_three_inputs_broadcast(op, ref):
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.array([5.0, 0.0, 2.0], np.float32)
    c = np.array([[1.0], [4.0]], np.float32)
    y = run(op, a, b, c, opset=13)
    assert y.shape == (2, 3) and y.dtype == np.float32
    np.testing.assert_array_equal(y, ref(ref(a, b), c))


def test_mean_and_single_input():
    a = np.array([1.0, 2.0], np.float64)
    b = np.array([3.0, 6.0], np.float64)
    c = np.array([[2.0], [5.0]], np.float64)
    np.testing.assert_allclose(run("Mean", a, b, c, opset=13), (a + b + c) / 3)
    for op in ("Max", "Min", "Sum", "Mean"):
        np.testing.assert_array_equal(run(op, a, opset=13), a)
    y = run("Mean", np.array([1, 2], np.float16), np.array([2, 2], np.float16), opset=13)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, [1.5, 2.0])


@pytest.mark.parametrize("dtype", SIGNED + UNSIGNED, ids=str)
def test_max_min_integers(dtype):
    a = np.array([1, 100, 7], dtype)
    b = np.array([50, 2, 7], dtype)
    np.testing.assert_array_equal(run("Max", a, b, opset=12), [50, 100, 7])
    np.testing.assert_array_equal(run("Min", a, b, opset=12), [1, 2, 7])
    with pytest.raises(InvalidTypeError):
        run("Max", a, b, opset=8)  # integers arrive with Max 12


def test_variadic_needs_equal_shapes_before_opset_8():
    a = np.ones((2, 3), np.float32)
    b = np.ones((3,), np.float32)
    np.testing.assert_array_equal(run("Sum", a, b, opset=8), np.full((2, 3), 2.0))
    with pytest.raises(KernelError, match="same shape"):
        run("Sum", a, b, opset=6)


# ----------------------------------------------------------------------------------------
# comparisons and logic
# ----------------------------------------------------------------------------------------

CMP = {"Equal": np.equal, "Greater": np.greater, "GreaterOrEqual": np.greater_equal, "Less": np.less, "LessOrEqual": np.less_equal}


@pytest.mark.parametrize("dtype", FLOATS + SIGNED + UNSIGNED, ids=str)
@pytest.mark.parametrize("op", sorted(CMP))
def test_comparisons(op, dtype):
    a = np.array([[1, 5, 3], [4, 4, 0]]).astype(dtype)
    b = np.array([4, 5, 1]).astype(dtype)
    y = run(op, a, b, opset=16 if op.endswith("Equal") and op != "Equal" else 13)
    assert y.dtype == bool and y.shape == (2, 3)
    np.testing.assert_array_equal(y, CMP[op](f64(a), f64(b)))


@pytest.mark.parametrize("op", sorted(CMP))
def test_comparisons_with_nan_are_false(op):
    a = np.array([np.nan, 1.0, np.nan], np.float32)
    b = np.array([np.nan, np.nan, 1.0], np.float32)
    y = run(op, a, b, opset=16)
    assert not y.any()


def test_equal_strings_and_bool():
    a = np.array(["a", "bc", ""], dtype=object)
    b = np.array(["a", "b", ""], dtype=object)
    y = run("Equal", a, b, opset=19)
    assert y.dtype == bool
    np.testing.assert_array_equal(y, [True, False, True])
    np.testing.assert_array_equal(run("Equal", a, np.array(["bc"], dtype=object), opset=19), [False, True, False])
    with pytest.raises(InvalidTypeError):
        run("Equal", a, b, opset=13)  # strings arrive with Equal 19
    np.testing.assert_array_equal(run("Equal", np.array([True, False]), np.array([True, True])), [True, False])


@pytest.mark.parametrize("op,ref", [("And", np.logical_and), ("Or", np.logical_or), ("Xor", np.logical_xor)])
def test_logical(op, ref):
    a = np.array([[True, False, True, False]])
    b = np.array([[True], [False]])
    y = run(op, a, b)
    assert y.dtype == bool and y.shape == (2, 4)
    np.testing.assert_array_equal(y, ref(a, b))
    with pytest.raises(InvalidTypeError):
        run(op, np.array([1], np.int32), np.array([1], np.int32))


def test_family_tables_are_one_row_per_operator():
    names = [s.name for s in family_unary.UNARY + family_binary.BINARY + family_binary.VARIADIC + family_compare.COMPARE]
    assert len(names) == len(set(names))
    assert {"Acos", "Erf", "BitwiseNot", "Pow", "Mod", "BitShift", "Mean", "LessOrEqual", "Xor"} <= set(names)


# ----------------------------------------------------------------------------------------
# differential tests against onnxruntime
# ----------------------------------------------------------------------------------------

_shapes = st.sampled_from([((3, 4), (4,)), ((2, 1, 3), (4, 1)), ((5,), (5,)), ((2, 3), ()), ((0, 3), (3,))])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(["Add", "Sub", "Mul", "Div", "Max", "Min", "Greater", "Equal", "LessOrEqual"]),
    shapes=_shapes,
    data=st.data(),
)
def test_binary_float32_matches_onnxruntime(op, shapes, data):
    elements = st.floats(-1e3, 1e3, width=32, allow_nan=False).filter(lambda v: v == 0 or abs(v) > 1e-3)
    a = data.draw(hnp.arrays(np.float32, shapes[0], elements=elements))
    b = data.draw(hnp.arrays(np.float32, shapes[1], elements=elements.filter(lambda v: op != "Div" or v != 0)))
    y = run(op, a, b, opset=16)
    expected = ort_run(op, a, b, opset=16)
    assert y.dtype == expected.dtype and y.shape == expected.shape
    np.testing.assert_allclose(f64(y), f64(expected), rtol=1e-6)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(["Div", "Mod", "Add", "Mul", "Sub"]),
    fmod=st.sampled_from([0, 1]),
    dtype=st.sampled_from([np.int32, np.int64]),
    data=st.data(),
)
def test_integer_arithmetic_matches_onnxruntime(op, fmod, dtype, data):
    a = data.draw(hnp.arrays(dtype, (6,), elements=st.integers(-1000, 1000)))
    b = data.draw(hnp.arrays(dtype, (6,), elements=st.integers(-50, 50).filter(lambda v: v != 0)))
    attrs = {"fmod": fmod} if op == "Mod" else {}
    y = run(op, a, b, opset=14, **attrs)
    expected = ort_run(op, a, b, opset=14, **attrs)
    assert y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    op=st.sampled_from(["Exp", "Log", "Sqrt", "Tanh", "Sigmoid", "Erf", "Sin", "Atan", "Floor", "Ceil", "Round", "Abs", "Reciprocal"]),
    x=hnp.arrays(np.float32, st.sampled_from([(7,), (2, 3), (0,)]), elements=st.floats(0.0625, 20, width=32)),
    sign=st.sampled_from([1, -1]),
)
def test_unary_float32_matches_onnxruntime(op, x, sign):
    if op not in ("Log", "Sqrt"):
        x = (x * sign).astype(np.float32)
    y = run(op, x, opset=13)
    expected = ort_run(op, x, opset=13)
    assert y.dtype == expected.dtype and y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=2e-6, atol=1e-7)


def test_chained_model():
    """Add, Mul and Sigmoid chained in a model, run through the engine's public class."""
    nodes = [helper.make_node("Add", ["a", "b"], ["s"]), helper.make_node("Mul", ["s", "a"], ["m"]), helper.make_node("Sigmoid", ["m"], ["y"])]
    f = onnx.TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("a", f, [2, 3]), helper.make_tensor_value_info("b", f, [3])],
        [helper.make_tensor_value_info("y", f, [2, 3])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    a = np.arange(6, dtype=np.float32).reshape(2, 3) / 4
    b = np.array([-1.0, 0.0, 1.0], np.float32)
    y = onnxrt.OnnxInference(model.SerializeToString()).run({"a": a, "b": b})["y"]
    np.testing.assert_allclose(y, 1 / (1 + np.exp(-((a + b) * a))), rtol=1e-6)


@pytest.mark.parametrize("op,ufunc", [("Add", np.add), ("Sub", np.subtract), ("Mul", np.multiply), ("Div", np.divide)])
@pytest.mark.parametrize("row_shape", [(128,), (1, 128), (1, 1, 1, 128)], ids=lambda s: "x".join(map(str, s)))
@pytest.mark.parametrize("row_first", [False, True])
def test_float32_row_broadcast_runs_the_compiled_loop(op, ufunc, row_shape, row_first, monkeypatch):
    """float32 arithmetic whose smaller input is a row along the last axis (a bias) runs one
    compiled pass; its IEEE results equal numpy's bit for bit, inf, NaN and 0 divisors included."""
    from onnxrt import native as _jit

    k = _jit.kernels()
    if k is None:
        pytest.skip("numba is not installed")
    calls = []
    real = k.rows_op
    monkeypatch.setattr(k, "rows_op", lambda *a: calls.append(a[3:]) or real(*a))
    rng = np.random.default_rng(len(row_shape))
    full = rng.standard_normal((3, 50, 128)).astype(np.float32)
    row = rng.standard_normal(row_shape).astype(np.float32)
    full[0, 0, :4] = [np.inf, -np.inf, np.nan, 0.0]
    row.reshape(-1)[4:8] = [0.0, -0.0, np.inf, np.nan]
    a, b = (row, full) if row_first else (full, row)
    got = run(op, a, b)
    with np.errstate(all="ignore"):
        want = ufunc(a, b)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    assert calls == [({"Add": 0, "Sub": 1, "Mul": 2, "Div": 3}[op], row_first)]


def test_float32_relu_compiled_keeps_nan_and_negative_zero(monkeypatch):
    from onnxrt import native as _jit

    k = _jit.kernels()
    if k is None:
        pytest.skip("numba is not installed")
    calls = []
    real = k.relu
    monkeypatch.setattr(k, "relu", lambda *a: calls.append(1) or real(*a))
    x = np.random.default_rng(0).standard_normal((200, 200)).astype(np.float32)
    x[0, [0, 2, 4]] = [np.nan, -0.0, -np.inf]
    y = run("Relu", x[:, ::2])  # a strided view: copied once, then one compiled pass
    want = np.clip(x[:, ::2], 0, np.inf)
    assert y.dtype == np.float32 and y.shape == (200, 100) and calls == [1]
    np.testing.assert_array_equal(y, want)
    assert np.isnan(y[0, 0]) and np.signbit(y[0, 1]) and y[0, 2] == 0
