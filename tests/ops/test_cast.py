"""Cast, CastLike and BitCast: every type pair, saturate, round_mode, strings, sub-byte types, versions."""

from __future__ import annotations

import itertools
import warnings

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import TensorProto, helper

from onnxrt.backend import run_node
from onnxrt.dtypes import np_dtype, onnx_type
from onnxrt.errors import InvalidAttributeError, InvalidTypeError, KernelError
from onnxrt.ops_cpu.op_bitcast import bitcast
from onnxrt.ops_cpu.op_cast import cast, to_float8e8m0, to_string

from .test_elementwise import f64, ort_run

TP = TensorProto
BF16 = np.dtype(ml_dtypes.bfloat16)
E4M3FN, E4M3FNUZ = np.dtype(ml_dtypes.float8_e4m3fn), np.dtype(ml_dtypes.float8_e4m3fnuz)
E5M2, E5M2FNUZ = np.dtype(ml_dtypes.float8_e5m2), np.dtype(ml_dtypes.float8_e5m2fnuz)
E8M0 = np.dtype(ml_dtypes.float8_e8m0fnu)


def cast_run(x: np.ndarray, to: int, opset: int = 25, **attrs) -> np.ndarray:
    node = helper.make_node("Cast", ["x"], ["y"], to=to, **attrs)
    return run_node(node, [x], opset_version=opset)[0]


# ----------------------------------------------------------------------------------------
# every pair of the standard types, against onnxruntime
# ----------------------------------------------------------------------------------------

STANDARD = [TP.BOOL, TP.INT8, TP.UINT8, TP.INT16, TP.UINT16, TP.INT32, TP.UINT32, TP.INT64, TP.UINT64,
            TP.FLOAT16, TP.FLOAT, TP.DOUBLE]
# values every standard type holds (bool aside: nonzero becomes True)
COMMON = np.array([[0, 1, 3], [7, 100, 127]])


@pytest.mark.parametrize("src,dst", list(itertools.product(STANDARD, STANDARD)), ids=lambda t: TP.DataType.Name(t))
def test_standard_pairs_match_onnxruntime(src, dst):
    x = COMMON.astype(np_dtype(src))
    y = cast_run(x, dst, opset=21)
    expected = ort_run("Cast", x, opset=21, to=dst)
    assert y.dtype == np_dtype(dst) and y.shape == x.shape
    np.testing.assert_array_equal(y, expected)


def _cast28_types() -> list[int]:
    from onnx import defs

    from onnxrt.dtypes import elem_from_name

    (t1,) = [c for c in defs.get_schema("Cast", 28).type_constraints if c.type_param_str == "T1"]
    return sorted(elem_from_name(s[len("tensor("):-1]) for s in t1.allowed_type_strs)


@pytest.mark.parametrize("saturate", [0, 1])
@pytest.mark.parametrize("src", _cast28_types(), ids=TP.DataType.Name)
def test_every_pair_of_cast_28(src, saturate):
    """Every source type to every target type Cast 28 allows (26 x 26): dtype, shape and the value 1."""
    sdt = np_dtype(src)
    x = np.array([["1"], ["1"]], dtype=object) if sdt == object else np.ones((2, 1)).astype(sdt)
    for dst in _cast28_types():
        y = cast_run(x, dst, opset=28, saturate=saturate)
        ddt = np_dtype(dst)
        assert y.dtype == ddt and y.shape == (2, 1), (TP.DataType.Name(dst), y.dtype)
        if ddt == object:
            assert y.tolist() == [["1"], ["1"]]
        else:
            np.testing.assert_array_equal(y.astype(np.float64), np.ones((2, 1)), err_msg=TP.DataType.Name(dst))


@pytest.mark.parametrize("src", [TP.FLOAT, TP.DOUBLE, TP.FLOAT16, TP.INT64, TP.INT8, TP.UINT64, TP.BOOL], ids=TP.DataType.Name)
def test_numbers_to_strings_match_onnxruntime(src):
    values = {
        TP.FLOAT: [0.1, 3.14159265, 1e-5, 1e20, 100, -0.0, np.nan, np.inf, -np.inf, 123456789, 1 / 3],
        TP.DOUBLE: [0.1, 1 / 3, 1e300, 2.5e-310, -7.25, np.nan, -np.inf],
        TP.FLOAT16: [0.1, 3.14, 65504, -0.0, np.nan, np.inf],
        TP.INT64: [-5, 0, 2**62, -(2**63)],
        TP.INT8: [-128, 0, 127],
        TP.UINT64: [0, 2**64 - 1],
        TP.BOOL: [True, False],
    }[src]
    x = np.array(values, dtype=np_dtype(src))
    y = cast_run(x, TP.STRING, opset=21)
    assert y.dtype == object and all(isinstance(s, str) for s in y)
    np.testing.assert_array_equal(y, ort_run("Cast", x, opset=21, to=TP.STRING).astype(object))


def test_float_to_string_format():
    y = to_string(np.array([314.15926, 0.5, 1e-7, np.nan, np.inf, -np.inf, -0.0], np.float32))
    assert list(y) == ["314.15927", "0.5", "1e-07", "NaN", "INF", "-INF", "-0"]


@pytest.mark.parametrize("dst", [TP.FLOAT, TP.DOUBLE, TP.FLOAT16])
def test_strings_to_floats(dst):
    s = np.array(["3.14", "1000", "1e-5", "1E8", "+INF", "inf", "-INF", "NaN", "nan", "-nan", " 7", "-0", "Infinity"], dtype=object)
    y = cast_run(s, dst)
    assert y.dtype == np_dtype(dst)
    expected = np.array([3.14, 1000, 1e-5, 1e8, np.inf, np.inf, -np.inf, np.nan, np.nan, np.nan, 7, -0.0, np.inf]).astype(np_dtype(dst))
    np.testing.assert_array_equal(y, expected)
    if dst != TP.FLOAT16:
        np.testing.assert_array_equal(y, ort_run("Cast", s[:-1], opset=21, to=dst).tolist() + [np.inf])


def test_strings_to_integers_and_bool():
    s = np.array(["100", "-7", "100.5", "9223372036854775807", "1e3", "-2.9"], dtype=object)
    np.testing.assert_array_equal(cast_run(s, TP.INT64), [100, -7, 100, 2**63 - 1, 1000, -2])
    np.testing.assert_array_equal(cast_run(np.array(["18446744073709551615", "3"], dtype=object), TP.UINT64), [2**64 - 1, 3])
    # integers wrap into narrower types, as onnxruntime does
    np.testing.assert_array_equal(cast_run(np.array(["300", "-1"], dtype=object), TP.UINT8), [44, 255])
    np.testing.assert_array_equal(cast_run(np.array(["300", "-1"], dtype=object), TP.INT8), ort_run("Cast", np.array(["300", "-1"], dtype=object), opset=21, to=TP.INT8))
    np.testing.assert_array_equal(cast_run(np.array(["0", "2", "-0.0", "nan"], dtype=object), TP.BOOL), [False, True, False, True])
    np.testing.assert_array_equal(cast_run(np.array(["0x10"], dtype=object), TP.FLOAT), [16.0])
    with pytest.raises(KernelError, match="Hello"):
        cast_run(np.array(["1", "Hello World!"], dtype=object), TP.FLOAT)
    with pytest.raises(KernelError, match="integer"):
        cast_run(np.array(["inf"], dtype=object), TP.INT32)


def test_strings_to_float8_saturate_and_string_identity():
    s = np.array(["1e6", "-inf", "0.5", "nan"], dtype=object)
    y = cast_run(s, TP.FLOAT8E4M3FN)
    np.testing.assert_array_equal(f64(y), [448, -448, 0.5, np.nan])
    y = cast_run(s, TP.FLOAT8E4M3FN, saturate=0)
    np.testing.assert_array_equal(f64(y), [np.nan, np.nan, 0.5, np.nan])
    same = cast_run(np.array(["a", "b"], dtype=object), TP.STRING)
    assert list(same) == ["a", "b"]


def test_float_to_int_truncates_and_wraps_like_onnxruntime():
    x = np.array([2.7, -2.7, 0.5, -0.5, 300.0, -300.0], np.float32)
    for to in (TP.INT8, TP.UINT8, TP.INT32, TP.INT64):
        np.testing.assert_array_equal(cast_run(x, to), ort_run("Cast", x, opset=21, to=to))
    np.testing.assert_array_equal(cast_run(x, TP.INT8), [2, -2, 0, 0, 44, -44])


def test_integer_to_integer_keeps_the_low_bits():
    np.testing.assert_array_equal(cast_run(np.array([200, -200, 40000], np.int32), TP.INT8), [-56, 56, 64])
    np.testing.assert_array_equal(cast_run(np.array([-1], np.int64), TP.UINT32), [2**32 - 1])
    np.testing.assert_array_equal(cast_run(np.array([2**63], np.uint64), TP.INT64), [-(2**63)])


def test_to_bool_and_from_bool():
    x = np.array([0.0, -0.0, 0.1, np.nan, -np.inf], np.float32)
    np.testing.assert_array_equal(cast_run(x, TP.BOOL), [False, False, True, True, True])
    np.testing.assert_array_equal(cast_run(np.array([True, False]), TP.FLOAT8E5M2).astype(np.float32), [1.0, 0.0])
    np.testing.assert_array_equal(cast_run(np.array([True, False]), TP.INT4).astype(np.int8), [1, 0])
    np.testing.assert_array_equal(cast_run(np.array([1.0, 0.0], np.float32).astype(E4M3FN), TP.BOOL), [True, False])


def test_bfloat16_round_trips():
    x = np.array([0.47892547, 1.0, -3.5, np.nan, np.inf, 1e38], np.float32)
    y = cast_run(x, TP.BFLOAT16)
    assert y.dtype == BF16
    np.testing.assert_array_equal(f64(y), f64(x.astype(BF16)))  # round to nearest even
    np.testing.assert_array_equal(cast_run(y, TP.FLOAT), y.astype(np.float32))
    np.testing.assert_array_equal(cast_run(y, TP.FLOAT16), y.astype(np.float32).astype(np.float16))
    np.testing.assert_array_equal(cast_run(np.array([1.5, -2.5], BF16), TP.INT32), [1, -2])


# ----------------------------------------------------------------------------------------
# float 8 types: the spec's saturate tables
# ----------------------------------------------------------------------------------------

F8_INPUT = np.array([0.0, -0.0, np.nan, np.inf, -np.inf, 1e6, -1e6, 0.4789, 449.0, 500.0], np.float32)
# saturate=1, Cast 23+: inf -> +-FLT_MAX for every float 8 type
SAT = {
    TP.FLOAT8E4M3FN: [0, -0.0, np.nan, 448, -448, 448, -448, 0.46875, 448, 448],
    TP.FLOAT8E4M3FNUZ: [0, 0, np.nan, 240, -240, 240, -240, 0.46875, 240, 240],
    TP.FLOAT8E5M2: [0, -0.0, np.nan, 57344, -57344, 57344, -57344, 0.5, 448, 512],
    TP.FLOAT8E5M2FNUZ: [0, 0, np.nan, 57344, -57344, 57344, -57344, 0.5, 448, 512],
}
NOSAT = {
    TP.FLOAT8E4M3FN: [0, -0.0, np.nan, np.nan, np.nan, np.nan, np.nan, 0.46875, 448, np.nan],
    TP.FLOAT8E4M3FNUZ: [0, 0, np.nan, np.nan, np.nan, np.nan, np.nan, 0.46875, np.nan, np.nan],
    TP.FLOAT8E5M2: [0, -0.0, np.nan, np.inf, -np.inf, np.inf, -np.inf, 0.5, 448, 512],
    TP.FLOAT8E5M2FNUZ: [0, 0, np.nan, np.nan, np.nan, np.nan, np.nan, 0.5, 448, 512],
}


@pytest.mark.parametrize("src", [np.float32, np.float16, np.float64], ids=str)
@pytest.mark.parametrize("to", sorted(SAT), ids=TP.DataType.Name)
def test_float8_saturate_tables(to, src):
    x = F8_INPUT.astype(src)
    for saturate, table in ((1, SAT), (0, NOSAT)):
        y = cast_run(x, to, saturate=saturate)
        assert y.dtype == np_dtype(to)
        got = y.astype(np.float32)
        np.testing.assert_array_equal(got, np.array(table[to], np.float32), err_msg=f"saturate={saturate}")
        want = np.array(table[to], np.float32)
        real = ~np.isnan(want)  # signed zeros matter; the sign of a NaN does not
        np.testing.assert_array_equal(np.signbit(got[real]), np.signbit(want[real]))


@pytest.mark.parametrize("opset", [19, 21])
def test_float8_fnuz_infinity_was_nan_before_cast_23(opset):
    x = np.array([np.inf, -np.inf, 1e6], np.float32)
    np.testing.assert_array_equal(cast_run(x, TP.FLOAT8E4M3FNUZ, opset=opset).astype(np.float32), [np.nan, np.nan, 240])
    np.testing.assert_array_equal(cast_run(x, TP.FLOAT8E5M2FNUZ, opset=opset).astype(np.float32), [np.nan, np.nan, 57344])
    np.testing.assert_array_equal(cast_run(x, TP.FLOAT8E4M3FN, opset=opset).astype(np.float32), [448, -448, 448])


@pytest.mark.parametrize("opset", [19, 23])
def test_float8_saturation_of_a_0d_input(opset):
    # found by tests/fuzz: the clamp of a 0-d input gave a numpy scalar, which the FNUZ
    # infinity rule could not write into
    for to in (TP.FLOAT8E4M3FNUZ, TP.FLOAT8E5M2FNUZ, TP.FLOAT8E4M3FN):
        y = cast_run(np.array(1e6, np.float32), to, opset=opset)
        assert y.shape == () and y.dtype == np_dtype(to)
        assert float(y) == float(ml_dtypes.finfo(np_dtype(to)).max)
    y = cast_run(np.array(np.inf, np.float32), TP.FLOAT8E4M3FNUZ, opset=opset)
    assert y.shape == () and (np.isnan(float(y)) if opset < 23 else float(y) == 240.0)


def test_float8_between_float8_types_and_integers():
    x = np.array([1.0, 3.5, 57344.0, -20000.0], np.float32).astype(E5M2)
    np.testing.assert_array_equal(cast_run(x, TP.FLOAT8E4M3FN).astype(np.float32), [1.0, 3.5, 448, -448])
    np.testing.assert_array_equal(cast_run(x, TP.INT32), [1, 3, 57344, -20480])
    np.testing.assert_array_equal(cast_run(np.array([1000, -3], np.int32), TP.FLOAT8E4M3FN).astype(np.float32), [448, -3])


def test_float8_rejected_before_cast_19():
    with pytest.raises(InvalidAttributeError, match="does not allow"):
        cast_run(np.zeros(2, np.float32), TP.FLOAT8E4M3FN, opset=13)
    with pytest.raises(InvalidTypeError):
        cast_run(np.zeros(2, E4M3FN), TP.FLOAT, opset=13)


# ----------------------------------------------------------------------------------------
# float8e8m0: round_mode and saturate
# ----------------------------------------------------------------------------------------

E8_INPUT = np.array([0.0, 0.124, 0.25, 1.1, 1.5, 3.0, 5.9, 2.0**127 * 1.5, np.inf, np.nan, 2.0**-130], np.float32)


@pytest.mark.parametrize(
    "mode,saturate,expected",
    [
        ("up", 1, [2.0**-127, 0.125, 0.25, 2, 2, 4, 8, 2.0**127, 2.0**127, np.nan, 2.0**-127]),
        ("down", 1, [2.0**-127, 0.0625, 0.25, 1, 1, 2, 4, 2.0**127, 2.0**127, np.nan, 2.0**-127]),
        ("nearest", 1, [2.0**-127, 0.125, 0.25, 1, 2, 4, 4, 2.0**127, 2.0**127, np.nan, 2.0**-127]),
        ("nearest", 0, [np.nan, 0.125, 0.25, 1, 2, 4, 4, np.nan, np.nan, np.nan, np.nan]),
        ("up", 0, [2.0**-127, 0.125, 0.25, 2, 2, 4, 8, np.nan, np.nan, np.nan, 2.0**-127]),
        ("down", 0, [np.nan, 0.0625, 0.25, 1, 1, 2, 4, 2.0**127, np.nan, np.nan, np.nan]),
    ],
)
def test_float8e8m0_round_modes(mode, saturate, expected):
    y = cast_run(E8_INPUT, TP.FLOAT8E8M0, round_mode=mode, saturate=saturate)
    assert y.dtype == E8M0
    np.testing.assert_array_equal(y.astype(np.float64), np.array(expected, np.float64))


def test_float8e8m0_from_other_types_and_back():
    np.testing.assert_array_equal(to_float8e8m0(np.array([3, 1024], np.int64)).astype(np.float32), [4, 1024])
    np.testing.assert_array_equal(to_float8e8m0(np.array([2.0**200], np.float64)).astype(np.float32), [2.0**127])
    np.testing.assert_array_equal(to_float8e8m0(np.array([-1.0], np.float32)).view(np.uint8), [255])  # unspecified: NaN
    y = cast_run(np.array([0.25, 8.0], np.float32).astype(E8M0), TP.FLOAT16)
    np.testing.assert_array_equal(y, np.array([0.25, 8.0], np.float16))
    with pytest.raises(InvalidAttributeError, match="round_mode"):
        cast_run(E8_INPUT, TP.FLOAT8E8M0, round_mode="zero")


# ----------------------------------------------------------------------------------------
# 4-bit, 2-bit and 6-bit types
# ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "to,bits,signed",
    [(TP.INT4, 4, True), (TP.UINT4, 4, False), (TP.INT2, 2, True), (TP.UINT2, 2, False)],
    ids=["int4", "uint4", "int2", "uint2"],
)
def test_sub_byte_integers_wrap(to, bits, signed):
    x = np.arange(-9, 16).astype(np.float32)
    y = cast_run(x, to)
    assert y.dtype == np_dtype(to)
    low = x.astype(np.int64) & ((1 << bits) - 1)
    expected = np.where(low >= (1 << (bits - 1)), low - (1 << bits), low) if signed else low
    np.testing.assert_array_equal(y.astype(np.int64), expected)
    back = cast_run(y, TP.INT8)
    np.testing.assert_array_equal(back, expected.astype(np.int8))
    np.testing.assert_array_equal(cast_run(y, TP.FLOAT16), expected.astype(np.float16))
    np.testing.assert_array_equal(cast_run(np.array([2.7, -2.7], np.float32), to).astype(np.int64) % (1 << bits), np.array([2, -2]) % (1 << bits))


def test_float4e2m1():
    x = np.array([0.48, 0.25, 1.05, -3.5, -8.0, 9.0, 1e6, 1e-7, np.inf, -np.inf, -4.0, 0.75], np.float32)
    y = cast_run(x, TP.FLOAT4E2M1)
    # no infinity in float4e2m1: out-of-range values and infinities clamp to +-6; ties to even
    np.testing.assert_array_equal(y.astype(np.float32), [0.5, 0.0, 1.0, -4.0, -6.0, 6.0, 6.0, 0.0, 6.0, -6.0, -4.0, 1.0])
    np.testing.assert_array_equal(cast_run(y, TP.FLOAT), y.astype(np.float32))


def test_float6_types_of_cast_28():
    x = np.array([0.3, 1.0, 100.0, -100.0], np.float32)
    y = cast_run(x, TP.FLOAT6E2M3, opset=28)
    assert y.dtype == np_dtype(TP.FLOAT6E2M3)
    np.testing.assert_array_equal(y.astype(np.float32), [0.25, 1.0, 7.5, -7.5])
    y = cast_run(x, TP.FLOAT6E3M2, opset=28)
    np.testing.assert_array_equal(y.astype(np.float32), [0.3125, 1.0, 28.0, -28.0])
    with pytest.raises(InvalidAttributeError):
        cast_run(x, TP.FLOAT6E2M3, opset=25)


# ----------------------------------------------------------------------------------------
# onnxrt's own encodings at the edges: expected codes derived here from the code tables
# ----------------------------------------------------------------------------------------

#: the float targets encoded by onnxrt: name -> (dtype, element type, width of a code)
MINIFLOATS = {
    "e4m3fn": (E4M3FN, TP.FLOAT8E4M3FN, 8),
    "e4m3fnuz": (E4M3FNUZ, TP.FLOAT8E4M3FNUZ, 8),
    "e5m2": (E5M2, TP.FLOAT8E5M2, 8),
    "e5m2fnuz": (E5M2FNUZ, TP.FLOAT8E5M2FNUZ, 8),
    "e2m1": (np.dtype(ml_dtypes.float4_e2m1fn), TP.FLOAT4E2M1, 4),
    "e2m3": (np.dtype(ml_dtypes.float6_e2m3fn), TP.FLOAT6E2M3, 6),
    "e3m2": (np.dtype(ml_dtypes.float6_e3m2fn), TP.FLOAT6E3M2, 6),
}
_NO_INF_NAN = ("e2m1", "e2m3", "e3m2")
_FNUZ_NAMES = ("e4m3fnuz", "e5m2fnuz")


def code_table(name: str) -> tuple[list[int], list[float]]:
    """The codes with the sign bit clear whose value is finite, increasing, decoded to float64, followed by a
    virtual code one past the largest (its value one spacing of the top binade further): the neighbour a
    value beyond the largest finite one rounds to, "[x] > FLT_MAX" when it wins."""
    dt, _, bits = MINIFLOATS[name]
    codes = np.arange(1 << (bits - 1), dtype=np.uint8)
    vals = codes.view(dt).astype(np.float64)
    keep = np.isfinite(vals)
    codes, vals = [int(c) for c in codes[keep]], [float(v) for v in vals[keep]]
    assert all(b > a for a, b in zip(vals, vals[1:]))
    return codes + [codes[-1] + 1], vals + [vals[-1] + (vals[-1] - vals[-2])]


def reference_code(name: str, x: float | int, saturate: bool) -> int | str:
    """The code the Cast spec gives to the exact value ``x``: the nearest entry of the table, ties to the
    even code (the even last mantissa bit), then the spec's tables; 'nan' where the result is a NaN
    (checked apart, its code being a choice)."""
    from bisect import bisect_left
    from fractions import Fraction

    codes, vals = code_table(name)
    bits = MINIFLOATS[name][2]
    if isinstance(x, float) and np.isnan(x):
        return "nan"
    neg = x < 0 or (isinstance(x, float) and np.signbit(x))
    a = abs(x)
    if a == np.inf:
        over = True
    else:
        i = bisect_left(vals, a)
        if i < len(vals) and vals[i] == a:
            k = i
        elif i == len(vals):
            k = len(vals) - 1
        else:
            lo, hi = Fraction(a) - Fraction(vals[i - 1]), Fraction(vals[i]) - Fraction(a)
            k = i - 1 if lo < hi or (lo == hi and codes[i - 1] % 2 == 0) else i
        over = k == len(vals) - 1
    if over:
        if saturate or name in _NO_INF_NAN:
            mag = codes[-2]
        elif name == "e5m2":
            mag = 0x7C  # infinity
        else:
            return "nan"
    else:
        mag = codes[k]
    if name in _FNUZ_NAMES and mag == 0:
        return 0  # no negative zero
    return mag | ((1 << (bits - 1)) if neg else 0)


def edge_values(name: str, src: np.dtype) -> np.ndarray:
    """Every value of the type, every midpoint (ties, the half of the smallest subnormal, the boundary above
    the largest value), their neighbours in ``src``, far values, -0, +-inf, +-NaN, both signs."""
    _, vals = code_table(name)
    base = list(vals) + [(a + b) / 2 for a, b in zip(vals, vals[1:])]
    base += [vals[1] / 4, 2 * vals[-1], 1e4 * vals[-1], 1e30, float(np.finfo(src).tiny), float(np.finfo(src).max)]
    with np.errstate(over="ignore"):
        v = np.array(base, np.float64).astype(src)
        v = np.concatenate([v, np.nextafter(v, src.type(np.inf)), np.nextafter(v, src.type(0))])
    v = np.concatenate([v, -v, np.array([np.inf, -np.inf, np.nan, -np.nan, np.finfo(src).smallest_subnormal], src)])
    return v


def assert_codes(name: str, x: np.ndarray, y: np.ndarray, saturate: bool, fnuz_inf_is_nan: bool = False) -> None:
    """``y`` (the encoding of ``x``) against :func:`reference_code`, NaN by the spec's rules."""
    dt, _, bits = MINIFLOATS[name]
    assert y.dtype == dt and y.shape == x.shape
    got = y.reshape(-1).view(np.uint8)
    top = 1 << (bits - 1)
    for xi, g in zip(x.reshape(-1).tolist(), got.tolist()):
        exp = reference_code(name, xi, saturate)
        if fnuz_inf_is_nan and name in _FNUZ_NAMES and abs(xi) == np.inf:
            exp = "nan"
        if exp != "nan":
            assert g == exp, (name, xi, saturate, hex(g), hex(exp))
        elif name in _NO_INF_NAN:
            assert g == top, (name, xi, hex(g))  # onnxrt's choice: NaN becomes -0
        elif name in _FNUZ_NAMES:
            assert g == 0x80, (name, xi, hex(g))  # the one NaN
        else:
            # E4M3FN: S.1111.111; E5M2: S.11111.xx, xx != 0; the sign follows x (-NaN, -Inf -> -NaN)
            assert (g & 0x7F) == 0x7F if name == "e4m3fn" else (g & 0x7C) == 0x7C and (g & 3), (name, xi, hex(g))
            assert bool(g & 0x80) == bool(np.signbit(xi)), (name, xi, hex(g))
    decoded = y.astype(np.float64).reshape(-1)
    assert np.isnan(decoded).tolist() == [
        reference_code(name, xi, saturate) == "nan" or (fnuz_inf_is_nan and name in _FNUZ_NAMES and abs(xi) == np.inf)
        for xi in x.reshape(-1).tolist()
    ] or name in _NO_INF_NAN


def test_code_tables_match_the_spec():
    """The decoded tables the reference relies on: sizes, largest values, smallest subnormals."""
    expected = {  # (finite non-negative codes, largest value, smallest subnormal, virtual next value)
        "e4m3fn": (127, 448.0, 2.0**-9, 480.0),
        "e4m3fnuz": (128, 240.0, 2.0**-10, 256.0),
        "e5m2": (124, 57344.0, 2.0**-16, 65536.0),
        "e5m2fnuz": (128, 57344.0, 2.0**-17, 65536.0),
        "e2m1": (8, 6.0, 0.5, 8.0),
        "e2m3": (32, 7.5, 0.125, 8.0),
        "e3m2": (32, 28.0, 0.0625, 32.0),
    }
    for name, (n, top, sub, nxt) in expected.items():
        codes, vals = code_table(name)
        assert (len(codes) - 1, vals[-2], vals[1], vals[-1]) == (n, top, sub, nxt), name


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("src", [np.float32, np.float64, np.float16], ids=lambda t: np.dtype(t).name)
@pytest.mark.parametrize("name", list(MINIFLOATS))
def test_float_encodings_at_the_edges(name, src, saturate):
    dt, elem, _ = MINIFLOATS[name]
    x = edge_values(name, np.dtype(src))
    x = x.reshape(2, -1) if x.size % 2 == 0 else x
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no numpy warning may leak out of the kernel
        y = cast_run(x, elem, opset=28, saturate=saturate)
    assert_codes(name, x, y, bool(saturate))
    z = cast(x.reshape(-1)[:1].reshape(()), dt, bool(saturate))  # a 0-d input stays 0-d
    assert z.shape == () and z.dtype == dt
    assert_codes(name, x.reshape(-1)[:1].reshape(()), z, bool(saturate))


@pytest.mark.parametrize("name", ["e4m3fnuz", "e5m2fnuz"])
def test_fnuz_encodings_of_cast_19(name):
    x = edge_values(name, np.dtype(np.float32))
    for saturate in (1, 0):
        y = cast_run(x, MINIFLOATS[name][1], opset=19, saturate=saturate)
        assert_codes(name, x, y, bool(saturate), fnuz_inf_is_nan=True)


@pytest.mark.parametrize("name", list(MINIFLOATS))
def test_float_encodings_of_integers(name):
    _, vals = code_table(name)
    top = int(vals[-2])
    ints = sorted({0, 1, 2, 3, 5, 7, 9, 17, 33, 100, 1000, top - 1, top, top + 1, int(vals[-1]) - 1, int(vals[-1]),
                   int(vals[-1]) + 1, (top + int(vals[-1])) // 2, (top + int(vals[-1])) // 2 + 1, 2**31 - 1})
    for itype in (np.int32, np.int64, np.int16, np.uint8, np.uint64):
        info = np.iinfo(itype)
        vs = [v for v in ints if v <= info.max] + [-v for v in ints if -v >= info.min]
        x = np.array(vs, itype)
        for saturate in (1, 0):
            y = cast_run(x, MINIFLOATS[name][1], opset=28, saturate=saturate)
            assert_codes(name, x, y, bool(saturate))


def test_float_encoding_examples():
    """A few values worked by hand from the spec's tables."""
    def codes(x, to, saturate=1, dtype=np.float32):
        return cast_run(np.array(x, dtype), to, opset=28, saturate=saturate).view(np.uint8).tolist()

    # E4M3FN: 464 is the tie between 448 (S.1111.110) and the NaN slot 480: even -> 448; above it overflows
    assert codes([464.0, 464.00003, -464.00003], TP.FLOAT8E4M3FN) == [0x7E, 0x7E, 0xFE]
    assert codes([464.0, 464.00003, -464.00003], TP.FLOAT8E4M3FN, 0) == [0x7E, 0x7F, 0xFF]
    # E5M2: 61440 is the tie between 57344 (S.11110.11, odd) and 2**16: overflow, +inf without saturate
    assert codes([61440.0, 61439.996, -61440.0], TP.FLOAT8E5M2, 0) == [0x7C, 0x7B, 0xFC]
    # smallest subnormals: E4M3FN 2**-9; its half ties to 0 (even), a bit more rounds up; 1.5 ulps -> 2 ulps
    assert codes([2.0**-10, 2.0**-10 * 1.0001, 3 * 2.0**-10, -(2.0**-10)], TP.FLOAT8E4M3FN) == [0, 1, 2, 0x80]
    # FNUZ: -0 and negative values rounding to 0 are +0; NaN is 0x80
    assert codes([-0.0, -(2.0**-12), np.nan, -np.nan], TP.FLOAT8E4M3FNUZ) == [0, 0, 0x80, 0x80]
    # float4e2m1: 5 ties 4 (S.11.0) and 6 (S.11.1) -> 4; 7 ties 6 and the virtual 8 -> 6 (clamped); inf -> 6
    assert codes([5.0, 2.5, 0.25, 0.75, 7.0, 100.0, -np.inf, np.nan], TP.FLOAT4E2M1) == [6, 4, 0, 2, 7, 7, 15, 8]
    # float6e3m2: subnormal step 1/16, 28 the largest; float6e2m3: step 1/8, 7.5 the largest
    assert codes([1 / 32, 3 / 32, 30.0, 31.0], TP.FLOAT6E3M2) == [0, 2, 31, 31]
    assert codes([1 / 16, 3 / 16, 7.75, -9.0], TP.FLOAT6E2M3) == [0, 2, 31, 63]
    # empty and non-contiguous inputs keep their shape
    for to in (TP.FLOAT8E5M2, TP.FLOAT4E2M1, TP.INT4, TP.UINT2):
        y = cast_run(np.zeros((0, 3), np.float32), to)
        assert y.shape == (0, 3) and y.dtype == np_dtype(to)
        x = np.arange(12, dtype=np.float32).reshape(3, 4) - 5.5
        y = cast_run(x.T, to)
        assert y.shape == (4, 3) and y.dtype == np_dtype(to)
        np.testing.assert_array_equal(y, cast_run(np.ascontiguousarray(x.T), to))


# sub-byte integers: integer sources keep the low bits, float sources truncate then wrap

SUB_BYTE = {"int4": (TP.INT4, 4, True), "uint4": (TP.UINT4, 4, False), "int2": (TP.INT2, 2, True), "uint2": (TP.UINT2, 2, False)}


def wrap(v: int, bits: int, signed: bool) -> int:
    low = v % (1 << bits)  # Python's modulo of the exact integer: the low bits
    return low - (1 << bits) if signed and low >= 1 << (bits - 1) else low


@pytest.mark.parametrize("name", list(SUB_BYTE))
def test_sub_byte_integers_from_integers_keep_the_low_bits(name):
    to, bits, signed = SUB_BYTE[name]
    for itype in (np.int8, np.uint8, np.int16, np.int32, np.int64, np.uint64):
        info = np.iinfo(itype)
        vs = sorted({int(info.min), int(info.max), *range(max(int(info.min), -40), min(int(info.max), 40) + 1)})
        x = np.array(vs, itype).reshape(1, -1)
        y = cast_run(x, to)
        assert y.dtype == np_dtype(to) and y.shape == x.shape
        assert y.astype(np.int64).reshape(-1).tolist() == [wrap(v, bits, signed) for v in vs], itype
    # from the other sub-byte types and bool
    for src_name, (src, sbits, ssigned) in SUB_BYTE.items():
        vs = list(range(-(1 << (sbits - 1)), 1 << (sbits - 1))) if ssigned else list(range(1 << sbits))
        x = np.array(vs, np.int64).astype(np_dtype(src))
        y = cast_run(x, to)
        assert y.dtype == np_dtype(to)
        assert y.astype(np.int64).tolist() == [wrap(v, bits, signed) for v in vs], src_name
    y = cast_run(np.array([[True, False]]), to)
    assert y.dtype == np_dtype(to) and y.shape == (1, 2) and y.astype(np.int64).tolist() == [[1, 0]]


@pytest.mark.parametrize("name", list(SUB_BYTE))
def test_sub_byte_integers_from_floats_truncate_then_wrap(name):
    to, bits, signed = SUB_BYTE[name]
    base = [0.0, -0.0, 0.5, -0.5, 0.99, 1.5, -1.5, 2.5, -2.5, 2.7, -2.7, 7.9, -8.9, 8.0, 9.0, 15.5, 16.0, -16.5,
            300.7, -300.7, 1e10 + 3, 2.0**31 + 5, 2.0**62 + 2**40, 2.0**63, -(2.0**63), 2.0**64 + 2**12, 1e30, -1e300]
    for src in (np.float32, np.float64, np.float16):
        with np.errstate(over="ignore"):
            x = np.array(base, np.float64).astype(src)
        x = np.concatenate([x, np.array([np.nan, -np.nan, np.inf, -np.inf], src)])
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            y = cast_run(x, to)
        assert y.dtype == np_dtype(to) and y.shape == x.shape
        # the exact truncation of each finite value (Python's int() of a float is exact), then the low bits;
        # NaN and +-inf, undefined in the spec, give 0
        expected = [wrap(int(v), bits, signed) if np.isfinite(v) else 0 for v in x.astype(np.float64).tolist()]
        assert y.astype(np.int64).tolist() == expected, src
    # the ml_dtypes floats truncate the same way
    x = np.array([448.0, -3.5, 20.0, -0.0], np.float32).astype(E4M3FN)
    assert cast_run(x, to).astype(np.int64).tolist() == [wrap(v, bits, signed) for v in (448, -3, 20, 0)]


# ----------------------------------------------------------------------------------------
# versions, attributes, CastLike
# ----------------------------------------------------------------------------------------


def test_cast_1_names_its_type():
    node = helper.make_node("Cast", ["x"], ["y"], to="INT32")
    (y,) = run_node(node, [np.array([1.7, -2.2], np.float32)], opset_version=1)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [1, -2])
    with pytest.raises(InvalidAttributeError, match="type name"):
        run_node(helper.make_node("Cast", ["x"], ["y"], to="REAL"), [np.zeros(1, np.float32)], opset_version=1)


def test_cast_target_types_follow_the_version():
    with pytest.raises(InvalidAttributeError):
        cast_run(np.zeros(2, np.float32), TP.STRING, opset=6)  # strings arrive with Cast 9
    with pytest.raises(InvalidAttributeError):
        cast_run(np.zeros(2, np.float32), TP.INT4, opset=19)  # int4 with 21
    with pytest.raises(InvalidAttributeError):
        cast_run(np.zeros(2, np.float32), TP.INT2, opset=24)  # int2 with 25
    with pytest.raises(InvalidAttributeError):
        cast_run(np.zeros(2, np.float32), TP.FLOAT, saturate=3)
    np.testing.assert_array_equal(cast_run(np.array([1.5], np.float32), TP.DOUBLE, opset=6), [1.5])


def test_castlike():
    x = np.array([1.7, -2.2, 500.0], np.float32)
    node = helper.make_node("CastLike", ["x", "t"], ["y"])
    (y,) = run_node(node, [x, np.zeros(0, np.int8)], opset_version=21)
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, [1, -2, -12])
    (y,) = run_node(node, [x, np.array(["a"], dtype=object)], opset_version=21)
    assert list(y) == ["1.7", "-2.2", "500"]
    node = helper.make_node("CastLike", ["x", "t"], ["y"], saturate=0)
    (y,) = run_node(node, [x, np.zeros(1, E4M3FN)], opset_version=21)
    np.testing.assert_array_equal(y.astype(np.float32), [1.75, -2.25, np.nan])
    node = helper.make_node("CastLike", ["x", "t"], ["y"], round_mode="down")
    (y,) = run_node(node, [x, np.zeros(1, E8M0)], opset_version=25)
    np.testing.assert_array_equal(y.astype(np.float32), [1.0, np.nan, 256.0])


def test_cast_kernel_returns_the_input_for_the_same_type_and_never_writes_it():
    x = np.array([1.5, np.inf], np.float32)
    x.flags.writeable = False
    assert cast(x, np.float32) is x
    for dt in (np.int32, E4M3FN, E8M0, np.dtype(ml_dtypes.int4), object, bool):
        cast(x, dt)
    assert x.tolist() == [1.5, np.inf]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    x=hnp.arrays(np.float32, st.sampled_from([(6,), (2, 3), (0, 2)]), elements=st.floats(-1e4, 1e4, width=32)),
    to=st.sampled_from([TP.INT32, TP.INT64, TP.INT16, TP.FLOAT16, TP.DOUBLE, TP.BOOL, TP.STRING]),
)
def test_float32_casts_match_onnxruntime(x, to):
    y = cast_run(x, to, opset=21)
    expected = ort_run("Cast", x, opset=21, to=to)
    assert y.shape == x.shape
    if to == TP.STRING:
        assert list(y.reshape(-1)) == list(expected.reshape(-1))
    else:
        assert y.dtype == np_dtype(to)
        np.testing.assert_array_equal(f64(y), f64(expected))


# ----------------------------------------------------------------------------------------
# BitCast
# ----------------------------------------------------------------------------------------


def bitcast_run(x: np.ndarray, to: int) -> np.ndarray:
    return run_node(helper.make_node("BitCast", ["x"], ["y"], to=to), [x], opset_version=26)[0]


def test_bitcast_values():
    x = np.array([[1.0, -2.0], [0.5, np.inf]], np.float32)
    y = bitcast_run(x, TP.INT32)
    assert y.dtype == np.int32 and y.shape == (2, 2)
    np.testing.assert_array_equal(y, [[0x3F800000, -0x40000000], [0x3F000000, 0x7F800000]])
    np.testing.assert_array_equal(bitcast_run(y, TP.FLOAT), x)
    np.testing.assert_array_equal(bitcast_run(np.array([-1, 127, -128], np.int8), TP.UINT8), [255, 127, 128])
    np.testing.assert_array_equal(bitcast_run(np.array([True, False]), TP.UINT8), [1, 0])
    np.testing.assert_array_equal(bitcast_run(np.array([1.0], np.float16), TP.INT16), [0x3C00])
    np.testing.assert_array_equal(bitcast_run(np.array([1.0], BF16), TP.FLOAT16).view(np.uint16), [0x3F80])
    np.testing.assert_array_equal(bitcast_run(np.array([1.0], np.float32).astype(E4M3FN), TP.UINT8), [0x38])
    z = np.array([1 + 2j], np.complex64)
    np.testing.assert_array_equal(bitcast_run(z, TP.INT64), z.view(np.int64))
    assert bitcast_run(np.array(2.5, np.float64), TP.UINT64).shape == ()


def test_bitcast_sub_byte_types():
    x = np.array([-1, -8, 7, 0], np.int8).astype(ml_dtypes.int4)
    y = bitcast_run(x, TP.UINT4)
    np.testing.assert_array_equal(y.astype(np.uint8), [15, 8, 7, 0])
    f4 = bitcast_run(x, TP.FLOAT4E2M1)
    np.testing.assert_array_equal(f4.astype(np.float32), [-6.0, -0.0, 6.0, 0.0])  # 0b1111 = -6, 0b1000 = -0
    np.testing.assert_array_equal(bitcast_run(np.array([3, 1], np.uint8).astype(ml_dtypes.uint2), TP.INT2).astype(np.int8), [-1, 1])


def test_bitcast_errors():
    with pytest.raises(KernelError, match="bit width"):
        bitcast_run(np.zeros(2, np.float32), TP.INT64)
    with pytest.raises(KernelError, match="bit width"):
        bitcast(np.zeros(2, np.uint8), ml_dtypes.int4)
    with pytest.raises(InvalidAttributeError):
        bitcast_run(np.zeros(2, np.float32), TP.STRING)
    with pytest.raises(InvalidTypeError):
        bitcast_run(np.array(["a"], dtype=object), TP.INT8)


def test_onnx_type_of_every_cast_target_is_known():
    for code in (TP.FLOAT8E8M0, TP.FLOAT4E2M1, TP.INT2, TP.UINT2, TP.FLOAT6E3M2):
        assert onnx_type(np_dtype(code)) == code
