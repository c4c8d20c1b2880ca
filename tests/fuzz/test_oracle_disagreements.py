"""Where an oracle departs from the spec, proven on the smallest case the fuzzer found.

Each test runs one node through onnxrt and the oracle, asserts onnxrt's value (derived
here from the spec's text) and the oracle's different value. tests/fuzz/_known.py lets the
differential fuzzer accept exactly these situations; when a new oracle release fixes one,
its test fails and the entry goes. A few cases are ambiguous in the spec: the test then
says which reading onnxrt takes and why (onnxruntime's, per the project's rule, unless the
spec's text or function body settles it).
"""

from __future__ import annotations

import math
import warnings

import ml_dtypes
import numpy as np
import pytest

from ._gen import Node, P
from ._harness import Case, build_model, run_onnxrt, run_ort, run_reference

pytest.importorskip("onnxruntime")
F32, F64 = np.float32, np.float64
FLT_LOWEST = float(np.finfo(np.float32).min)


def outputs(runtime: str, op: str, opset: int, inputs: list, n_out: int = 1, **attrs) -> list[np.ndarray]:
    """The node's outputs in one runtime ('onnxrt', 'reference' or 'onnxruntime')."""
    case = Case(op, opset, Node(list(inputs), attrs, n_out))
    model, feeds, _ = build_model(case, strict=False)
    run = {"onnxrt": run_onnxrt, "reference": run_reference, "onnxruntime": run_ort}[runtime]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return [np.asarray(o) for o in run(model, feeds)]


def same(a: np.ndarray, b: object, dtype: object = None) -> None:
    b = np.asarray(b, dtype=dtype if dtype is not None else np.asarray(a).dtype)
    assert a.shape == b.shape, (a.shape, b.shape)
    assert a.dtype == b.dtype, (a.dtype, b.dtype)
    if a.dtype == object:
        assert a.tolist() == b.tolist()
    else:
        np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------------------
# onnx.reference
# ---------------------------------------------------------------------------------------


def test_reference_erf_float64_in_float32():
    # Erf's T includes tensor(double); the reference evaluates math.erf through
    # np.vectorize(otypes=["f"]), a float32 result cast back: erf(0.8) loses its last 29 bits.
    # Gelu's reference calls the same function.
    x = np.array([0.8], F64)
    same(outputs("onnxrt", "Erf", 13, [x])[0], [math.erf(0.8)])
    ref = outputs("reference", "Erf", 13, [x])[0]
    same(ref, [float(np.float32(math.erf(0.8)))])
    assert ref[0] != math.erf(0.8)
    gelu = 0.5 * (1 + math.erf(1 / math.sqrt(2)))
    assert abs(outputs("onnxrt", "Gelu", 20, [np.array([1.0], F64)])[0][0] - gelu) < 1e-15
    assert abs(outputs("reference", "Gelu", 20, [np.array([1.0], F64)])[0][0] - gelu) > 1e-9


def test_gelu_tanh_float64_constants():
    # "y = 0.5 * x * (1 + Tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))": onnxrt evaluates the
    # formula in double for double inputs. Both oracles go through the context-dependent
    # function body, whose constants are float32 (about 1e-8 away).
    x = np.array([1.0], F64)
    want = 0.5 * (1 + math.tanh(math.sqrt(2 / math.pi) * (1 + 0.044715)))
    assert abs(outputs("onnxrt", "Gelu", 20, [x], approximate="tanh")[0][0] - want) < 1e-15
    for oracle in ("reference", "onnxruntime"):
        got = outputs(oracle, "Gelu", 20, [x], approximate="tanh")[0][0]
        assert 1e-9 < abs(got - want) < 1e-7


def test_reference_hardswish_float64_alpha():
    # "y = x * max(0, min(1, alpha * x + beta)) ... where alpha = 1/6 and beta = 0.5": the
    # reference goes through HardSigmoid's float attribute, i.e. float32(1/6), for doubles too.
    x = np.array([1.0], F64)
    same(outputs("onnxrt", "HardSwish", 22, [x])[0], [1.0 * (1.0 / 6.0 + 0.5)])
    same(outputs("reference", "HardSwish", 22, [x])[0], [1.0 * (float(np.float32(1.0 / 6.0)) + 0.5)])


@pytest.mark.parametrize("op", ["Softmax", "LogSoftmax", "Hardmax"])
def test_reference_softmax_family_before_13(op):
    # Before 13: "The input does not need to explicitly be a 2D vector; rather, it will be
    # coerced into one ... [a_0 * ... * a_{k-1}, a_k * ... * a_{n-1}]" with k = axis (default 1).
    # X of shape (1, 2, 1) becomes one row of 2 values; the reference works along axis 1
    # alone, whose rows have a single value each.
    x = np.array([[[0.0], [1.0]]], F32)
    row = np.array([0.0, 1.0])
    want = {
        "Softmax": np.exp(row) / np.exp(row).sum(),
        "LogSoftmax": row - np.log(np.exp(row).sum()),
        "Hardmax": np.array([0.0, 1.0]),
    }[op].reshape(1, 2, 1)
    np.testing.assert_allclose(outputs("onnxrt", op, 11, [x])[0], want, rtol=1e-6)
    # the reference: a softmax of one value (1, log 0, the arg max of one value)
    same(outputs("reference", op, 11, [x])[0], {"Softmax": [[[1.0], [1.0]]], "LogSoftmax": [[[0.0], [0.0]]], "Hardmax": [[[1.0], [1.0]]]}[op])
    np.testing.assert_allclose(outputs("onnxruntime", op, 11, [x])[0], want, rtol=1e-6)


def test_reference_reduce_sum_square_widens_integers():
    # ReduceSumSquare's output is T, the input's type; the reference returns numpy's widened sum.
    x = np.array([3, 4], np.int32)
    same(outputs("onnxrt", "ReduceSumSquare", 18, [x])[0], [25], np.int32)
    same(outputs("reference", "ReduceSumSquare", 18, [x])[0], [25], np.int64)
    same(outputs("onnxruntime", "ReduceSumSquare", 18, [x])[0], [25], np.int32)


def test_reduce_mean_of_empty_set():
    # The spec gives the value of an empty reduction for Sum (0), Prod (1), Max, Min and the
    # Log* operators but not for ReduceMean: onnxrt follows onnxruntime (0); the reference
    # divides 0 by 0 (NaN, INT_MIN once cast to int32). LayerNormalization's statistics over
    # an empty set follow (its function body is ReduceMean): mean 0, InvStdDev
    # 1/sqrt(epsilon); onnxruntime refuses that case.
    x = np.zeros((0,), F32)
    same(outputs("onnxrt", "ReduceMean", 18, [x])[0], [0.0])
    assert np.isnan(outputs("reference", "ReduceMean", 18, [x])[0]).all()
    same(outputs("onnxruntime", "ReduceMean", 18, [x])[0], [0.0])
    xi = np.zeros((0,), np.int32)
    same(outputs("onnxrt", "ReduceMean", 18, [xi])[0], [0])
    same(outputs("onnxruntime", "ReduceMean", 18, [xi])[0], [0])
    same(outputs("reference", "ReduceMean", 18, [xi])[0], [np.iinfo(np.int32).min])
    ln = outputs("onnxrt", "LayerNormalization", 17, [x, np.ones(1, F32)], n_out=3, axis=0)
    same(ln[1], [0.0])
    np.testing.assert_allclose(ln[2], [1 / math.sqrt(1e-5)], rtol=1e-6)
    assert np.isnan(outputs("reference", "LayerNormalization", 17, [x, np.ones(1, F32)], n_out=3, axis=0)[1]).all()


def test_squeeze_with_empty_axes():
    # Squeeze-13: "If axes is not provided, all the single dimensions will be removed": the
    # spec does not say what an empty axes tensor means. onnxrt follows onnxruntime (every
    # single dimension goes, as for Reduce* without noop_with_empty_axes); the reference
    # squeezes nothing.
    x = np.array([[1.5]], F32)
    axes = P(np.zeros(0, np.int64))
    same(outputs("onnxrt", "Squeeze", 13, [x, axes])[0], 1.5)
    same(outputs("reference", "Squeeze", 13, [x, axes])[0], [[1.5]])
    same(outputs("onnxruntime", "Squeeze", 13, [x, axes])[0], 1.5)


def test_reference_unsqueeze_1_unsorted_axes():
    # "Dimension indices in axes are as seen in the output tensor": axes [1, 0] on shape [2]
    # put ones at output axes 0 and 1, shape [1, 1, 2]. The reference inserts them one by one
    # in the given order.
    x = np.array([1.0, 2.0], F32)
    same(outputs("onnxrt", "Unsqueeze", 1, [x], axes=[1, 0])[0], [[[1.0, 2.0]]])
    same(outputs("reference", "Unsqueeze", 1, [x], axes=[1, 0])[0], [[[1.0], [2.0]]])
    same(outputs("onnxruntime", "Unsqueeze", 1, [x], axes=[1, 0])[0], [[[1.0, 2.0]]])
    # Unsqueeze-11: a negative axis counts from the end of the output (rank 4): -3 is 1
    y = np.ones((2, 1), F32)
    assert outputs("onnxrt", "Unsqueeze", 11, [y], axes=[-3, 2])[0].shape == (2, 1, 1, 1)
    assert outputs("onnxruntime", "Unsqueeze", 11, [y], axes=[-3, 2])[0].shape == (2, 1, 1, 1)
    assert outputs("reference", "Unsqueeze", 11, [y], axes=[-3, 2])[0].shape == (1, 2, 1, 1)


def test_reference_shape_end_below_rank():
    # Shape-15: "Negative value means counting dimensions from the back ... If the resulting
    # axis is out of range, it will be clamped to [0, r]": end=-4 on rank 3 clamps to 0.
    x = np.zeros((1, 2, 3), F32)
    same(outputs("onnxrt", "Shape", 15, [x], end=-4)[0], np.zeros(0, np.int64))
    same(outputs("reference", "Shape", 15, [x], end=-4)[0], [1, 2], np.int64)
    same(outputs("onnxruntime", "Shape", 15, [x], end=-4)[0], np.zeros(0, np.int64))


def test_reference_clip_omitted_bounds():
    # Clip 11+: min and max "default to numeric_limits::lowest() and numeric_limits::max()":
    # -inf becomes the lowest finite float (onnxruntime agrees); the reference leaves it.
    x = np.array([-np.inf, 1.0, np.inf], F32)
    same(outputs("onnxrt", "Clip", 13, [x])[0], [FLT_LOWEST, 1.0, -FLT_LOWEST])
    same(outputs("onnxruntime", "Clip", 13, [x])[0], [FLT_LOWEST, 1.0, -FLT_LOWEST])
    same(outputs("reference", "Clip", 13, [x])[0], [-np.inf, 1.0, np.inf])
    # onnxruntime's float16 kernel of Clip-11 leaves them too (its Clip-12 and later clamp)
    h = x.astype(np.float16)
    same(outputs("onnxrt", "Clip", 11, [h])[0], [-65504.0, 1.0, 65504.0])
    same(outputs("onnxruntime", "Clip", 11, [h])[0], [-np.inf, 1.0, np.inf])
    same(outputs("onnxruntime", "Clip", 12, [h])[0], [-65504.0, 1.0, 65504.0])


def test_reference_zero_of_strings():
    # Trilu zeroes the other elements and Pad's constant_value "defaults to 0, empty string,
    # or False": a string tensor's zero is "" (tensor(string) holds strings only); the
    # reference writes the integer 0 into both.
    x = np.array([["a", "b"], ["c", "d"]], dtype=object)
    same(outputs("onnxrt", "Trilu", 14, [x])[0], np.array([["a", "b"], ["", "d"]], dtype=object))
    ref = outputs("reference", "Trilu", 14, [x])[0]
    assert ref[1, 0] == 0 and not isinstance(ref[1, 0], str)
    y = np.array(["a"], dtype=object)
    same(outputs("onnxrt", "Pad", 13, [y, P(np.array([0, 1]))])[0], np.array(["a", ""], dtype=object))
    ref = outputs("reference", "Pad", 13, [y, P(np.array([0, 1]))])[0]
    assert ref[1] == 0 and not isinstance(ref[1], str)


def test_reference_prelu_nan_slope():
    # PRelu: "f(x) = slope * x for x < 0, f(x) = x for x >= 0": the slope does not touch
    # x >= 0 (onnxruntime agrees); the reference multiplies everywhere, NaN * 0 = NaN.
    x = np.array([0.0, 1.0, -1.0], F32)
    slope = np.full(3, np.nan, F32)
    np.testing.assert_array_equal(outputs("onnxrt", "PRelu", 16, [x, slope])[0], [0.0, 1.0, np.nan])
    np.testing.assert_array_equal(outputs("onnxruntime", "PRelu", 16, [x, slope])[0], [0.0, 1.0, np.nan])
    np.testing.assert_array_equal(outputs("reference", "PRelu", 16, [x, slope])[0], [np.nan, 1.0, np.nan])
    inf_slope = [np.array([0.0, -1.0], F32), np.array([np.inf, np.inf], F32)]
    same(outputs("onnxrt", "PRelu", 16, inf_slope)[0], [0.0, -np.inf])
    np.testing.assert_array_equal(outputs("reference", "PRelu", 16, inf_slope)[0], [np.nan, -np.inf])


def test_reference_average_pool_drops_nan():
    # The average of a window holding a NaN is NaN (onnxruntime agrees); the reference skips it.
    x = np.array([[[np.nan, 1.0]]], F32)
    assert np.isnan(outputs("onnxrt", "AveragePool", 11, [x], kernel_shape=[2])[0]).all()
    assert np.isnan(outputs("onnxruntime", "AveragePool", 11, [x], kernel_shape=[2])[0]).all()
    same(outputs("reference", "AveragePool", 11, [x], kernel_shape=[2])[0], [[[1.0]]])


def test_reference_instance_norm_float16_statistics():
    # y = scale * (x - mean) / sqrt(variance + epsilon) + B per instance and channel. For
    # x = [3.7, 3.67] in float16 the variance (2.2e-4) is mostly cancellation error when the
    # statistics are computed in float16, as the reference does; onnxrt computes them in
    # float32 (onnxruntime agrees) and rounds once.
    x = np.array([[[3.7, 3.67]]], np.float16)
    args = [x, np.array([-3.555], np.float16), np.array([2.66], np.float16)]
    xd = x.astype(F64)
    exact = -3.555 * (xd - xd.mean()) / np.sqrt(xd.var() + 1e-5) + 2.66
    got = outputs("onnxrt", "InstanceNormalization", 6, args)[0]
    np.testing.assert_allclose(got.astype(F64), exact, rtol=2e-3, atol=2e-3)
    np.testing.assert_allclose(outputs("onnxruntime", "InstanceNormalization", 6, args)[0].astype(F64), exact, rtol=2e-3, atol=2e-3)
    ref = outputs("reference", "InstanceNormalization", 6, args)[0].astype(F64)
    assert np.abs(ref - exact).max() > 0.05
    # GroupNormalization-18 (its reference body does the same) over rows [-3.672, -3.867]
    g = [np.array([[1.096, -1.842], [-3.672, -3.867]], np.float16), np.array([2.506], np.float16), np.array([3.303], np.float16)]
    gd = g[0].astype(F64)
    exact = 2.506 * (gd - gd.mean(axis=1, keepdims=True)) / np.sqrt(gd.var(axis=1, keepdims=True) + 1e-5) + 3.303
    np.testing.assert_allclose(outputs("onnxrt", "GroupNormalization", 18, g, num_groups=1)[0].astype(F64), exact, rtol=2e-3, atol=2e-3)
    assert np.abs(outputs("reference", "GroupNormalization", 18, g, num_groups=1)[0].astype(F64) - exact).max() > 0.2


def test_reference_one_hot_recomputes_values():
    # "The locations represented by the index values ... will have 'on_value'": the value
    # itself. The reference computes off + (on - off) * hot in float32, one rounding away.
    values = np.array([3.6037095, -2.846723], F32)
    args = [np.array([0], np.int64), np.array(1, np.int64), values]
    same(outputs("onnxrt", "OneHot", 11, args)[0], [[values[1]]])
    ref = outputs("reference", "OneHot", 11, args)[0]
    assert ref[0, 0] != values[1] and abs(float(ref[0, 0]) - float(values[1])) < 1e-6
    same(outputs("onnxruntime", "OneHot", 11, args)[0], [[values[1]]])
    # with a NaN on_value the recomputation spreads it to the off values too
    nan_on = [np.array([0, 5], np.int64), np.array(1, np.int64), np.array([-3.25, np.nan], F32)]
    np.testing.assert_array_equal(outputs("onnxrt", "OneHot", 11, nan_on)[0], [[np.nan], [-3.25]])
    np.testing.assert_array_equal(outputs("reference", "OneHot", 11, nan_on)[0], [[np.nan], [np.nan]])
    inf_off = [np.array([0, 5], np.int64), np.array(1, np.int64), np.array([-np.inf, 1.5], F32)]
    np.testing.assert_array_equal(outputs("onnxrt", "OneHot", 11, inf_off)[0], [[1.5], [-np.inf]])
    assert np.isnan(outputs("reference", "OneHot", 11, inf_off)[0]).all()


def test_cast_bool_to_string():
    # Cast does not say how a bool is written as a string or read from one; onnxrt follows
    # onnxruntime ("1", "0", as the bool-to-number rule {1, 0}; "0" reads as the number 0,
    # false), the reference writes Python's "True"/"False" and takes any non-empty string as
    # true.
    x = np.array([True, False])
    same(outputs("onnxrt", "Cast", 13, [x], to=8)[0], np.array(["1", "0"], dtype=object))
    same(outputs("onnxruntime", "Cast", 13, [x], to=8)[0], np.array(["1", "0"], dtype=object))
    assert outputs("reference", "Cast", 13, [x], to=8)[0].tolist() == ["True", "False"]
    s = np.array(["0", "1"], dtype=object)
    same(outputs("onnxrt", "Cast", 13, [s], to=9)[0], [False, True])
    same(outputs("onnxruntime", "Cast", 13, [s], to=9)[0], [False, True])
    same(outputs("reference", "Cast", 13, [s], to=9)[0], [True, True])


def test_reference_cast_fnuz_infinity():
    # Cast 19's table (saturate=1): "Inf | FLT_MAX | NaN | FLT_MAX | NaN" for E4M3FN, E4M3FNUZ,
    # E5M2, E5M2FNUZ: an infinity becomes NaN in the FNUZ types. The reference saturates it.
    x = np.array([np.inf, 1e6], F32)
    got = outputs("onnxrt", "Cast", 19, [x], to=18)[0]
    assert np.isnan(float(got[0])) and float(got[1]) == 240.0
    assert outputs("reference", "Cast", 19, [x], to=18)[0].astype(F32).tolist() == [240.0, 240.0]


def test_reference_log_sum_exp_infinity():
    # ReduceLogSumExp over no axis (noop_with_empty_axes) is log(exp(x)) = x: inf stays inf
    # (onnxruntime agrees); the reference subtracts the maximum first, inf - inf = NaN.
    x = np.array([np.inf, 3.5], F32)
    args = [x, P(np.zeros(0, np.int64))]
    same(outputs("onnxrt", "ReduceLogSumExp", 18, args, noop_with_empty_axes=1)[0], [np.inf, 3.5])
    same(outputs("onnxruntime", "ReduceLogSumExp", 18, args, noop_with_empty_axes=1)[0], [np.inf, 3.5])
    np.testing.assert_array_equal(outputs("reference", "ReduceLogSumExp", 18, args, noop_with_empty_axes=1)[0], [np.nan, 3.5])


def test_reference_max_pool_asymmetric_pads():
    # pads is "[x1_begin, x2_begin...x1_end, x2_end,...]": [0, 0, 1, 1] pads the end of both
    # axes of a 3x3 image, giving 3x3 windows of 2x2. The reference reads it as (begin, end)
    # pairs per axis.
    x = np.arange(9, dtype=F32).reshape(1, 1, 3, 3)
    want = [[[[4.0, 5.0, 5.0], [7.0, 8.0, 8.0], [7.0, 8.0, 8.0]]]]
    same(outputs("onnxrt", "MaxPool", 12, [x], kernel_shape=[2, 2], pads=[0, 0, 1, 1])[0], want)
    same(outputs("onnxruntime", "MaxPool", 12, [x], kernel_shape=[2, 2], pads=[0, 0, 1, 1])[0], want)
    assert outputs("reference", "MaxPool", 12, [x], kernel_shape=[2, 2], pads=[0, 0, 1, 1])[0].shape == (1, 1, 2, 4)
    y = np.array([[[0.8, -1.4]]], F32)
    same(outputs("onnxrt", "MaxPool", 1, [y], kernel_shape=[2], pads=[0, 1])[0], [[[0.8, -1.4]]])
    same(outputs("reference", "MaxPool", 1, [y], kernel_shape=[2], pads=[0, 1])[0], [[[0.8]]])
    # symmetric pads fare no better: an empty batch gets 1 window instead of 2 + 2 - 2 + 1 = 3
    e = np.zeros((0, 1, 2), F32)
    assert outputs("onnxrt", "MaxPool", 10, [e], kernel_shape=[2], pads=[1, 1])[0].shape == (0, 1, 3)
    assert outputs("onnxruntime", "MaxPool", 10, [e], kernel_shape=[2], pads=[1, 1])[0].shape == (0, 1, 3)
    assert outputs("reference", "MaxPool", 10, [e], kernel_shape=[2], pads=[1, 1])[0].shape == (0, 1, 1)


def test_reference_det_float64():
    # Det's output has T, the input's type (bfloat16 here); the reference returns float64.
    x = np.array([[2.0, 1.0], [1.0, 3.0]], ml_dtypes.bfloat16)
    same(outputs("onnxrt", "Det", 22, [x])[0], 5.0, ml_dtypes.bfloat16)
    assert outputs("reference", "Det", 22, [x])[0].dtype == np.float64


def test_reference_conv_transpose_group_bias():
    # Y[:, m] receives B[m]; with two groups of one channel the reference adds B[0] to both.
    x = np.array([[[1.0], [2.0]]], F32)
    w = np.array([[[1.0]], [[10.0]]], F32)
    b = np.array([1.0, 2.0], F32)
    same(outputs("onnxrt", "ConvTranspose", 11, [x, w, b], group=2)[0], [[[1 + 1.0], [20 + 2.0]]])
    same(outputs("reference", "ConvTranspose", 11, [x, w, b], group=2)[0], [[[2.0], [21.0]]])
    same(outputs("onnxruntime", "ConvTranspose", 11, [x, w, b], group=2)[0], [[[2.0], [22.0]]])


def test_conv_transpose_output_shape_above_natural():
    # "total_padding[i] = stride[i] * (input_size[i] - 1) + output_padding[i] + ((kernel_shape[i]
    # - 1) * dilations[i] + 1) - output_shape[i] ... Else: pads[start_i] = total_padding[i] -
    # (total_padding[i]/2); pads[end_i] = (total_padding[i]/2)". x = [1, 2], w = [1, 10],
    # stride 3: the natural output [1, 10, 0, 2, 20] is 5 long. output_shape 7 gives a total of
    # -2, pads -1 and -1: one new pixel on each side. onnxrt applies the formula (a conformance
    # case with a total of -1 needs it); both oracles append the two pixels at the end, and
    # onnxruntime also does so under SAME_UPPER.
    x = np.array([[[1.0, 2.0]]], F32)
    w = np.array([[[1.0, 10.0]]], F32)
    same(outputs("onnxrt", "ConvTranspose", 22, [x, w], strides=[3], output_shape=[7])[0], [[[0, 1, 10, 0, 2, 20, 0]]])
    for oracle in ("reference", "onnxruntime"):
        same(outputs(oracle, "ConvTranspose", 22, [x, w], strides=[3], output_shape=[7])[0], [[[1, 10, 0, 2, 20, 0, 0]]])
    upper = dict(strides=[3], output_shape=[7], auto_pad="SAME_UPPER")
    same(outputs("onnxrt", "ConvTranspose", 22, [x, w], **upper)[0], [[[0, 1, 10, 0, 2, 20, 0]]])
    same(outputs("reference", "ConvTranspose", 22, [x, w], **upper)[0], [[[0, 1, 10, 0, 2, 20, 0]]])
    same(outputs("onnxruntime", "ConvTranspose", 22, [x, w], **upper)[0], [[[1, 10, 0, 2, 20, 0, 0]]])


def test_reference_conv_dilation_holes():
    # A dilated kernel reads x[o + k * d]: with d = 2 the output reads x[0] and x[2], never
    # x[1]. The reference multiplies a kernel widened with zeros, 0 * NaN = NaN.
    x = np.array([[[1.0, np.nan, 4.0]]], F32)
    w = np.array([[[1.0, 10.0]]], F32)
    same(outputs("onnxrt", "Conv", 11, [x, w], dilations=[2])[0], [[[41.0]]])
    same(outputs("onnxruntime", "Conv", 11, [x, w], dilations=[2])[0], [[[41.0]]])
    assert np.isnan(outputs("reference", "Conv", 11, [x, w], dilations=[2])[0]).all()


def test_reference_average_pool_1_counts_pads():
    # AveragePool-1 has no count_include_pad: "The output of each pooling window is divided by
    # the number of elements exclude pad" (count_include_pad, default 0, came at 7), for
    # explicit pads and SAME_* alike.
    x = np.array([[[4.0]]], F32)
    same(outputs("onnxrt", "AveragePool", 1, [x], kernel_shape=[2], pads=[0, 1])[0], [[[4.0]]])
    same(outputs("reference", "AveragePool", 1, [x], kernel_shape=[2], pads=[0, 1])[0], [[[2.0]]])
    same(outputs("onnxrt", "AveragePool", 7, [x], kernel_shape=[2], pads=[0, 1])[0], [[[4.0]]])
    y = np.array([[[1.0, 3.0]]], F32)
    same(outputs("onnxrt", "AveragePool", 1, [y], kernel_shape=[2], auto_pad="SAME_UPPER")[0], [[[2.0, 3.0]]])
    same(outputs("reference", "AveragePool", 1, [y], kernel_shape=[2], auto_pad="SAME_UPPER")[0], [[[2.0, 1.5]]])


def test_reference_unique_unsorted():
    # sorted=0: "Outputs are ... in the order of the first occurrence of the values in the
    # input". The reference sorts [0.5, -1] anyway.
    x = np.array([0.5, -1.0], F32)
    same(outputs("onnxrt", "Unique", 11, [x], sorted=0)[0], [0.5, -1.0])
    same(outputs("onnxruntime", "Unique", 11, [x], sorted=0)[0], [0.5, -1.0])
    same(outputs("reference", "Unique", 11, [x], sorted=0)[0], [-1.0, 0.5])


def test_reference_quantize_16bit_division():
    # Before 23 the spec does not say in which precision x / y_scale is computed; onnxrt
    # divides in float32 (90.5 / 0.8984375 = 100.73 -> 101), the reference in bfloat16
    # (100.5 -> 100, half to even). From 23 the division runs in y_scale's type (the
    # 'precision' attribute's default), and onnxrt agrees with the reference.
    bf = ml_dtypes.bfloat16
    args = [np.array([90.5], bf), np.array(0.8984375, bf), np.array(0, np.int8)]
    same(outputs("onnxrt", "QuantizeLinear", 21, args)[0], [101])
    same(outputs("reference", "QuantizeLinear", 21, args)[0], [100])
    same(outputs("onnxrt", "QuantizeLinear", 23, args)[0], [100])
    same(outputs("reference", "QuantizeLinear", 23, args)[0], [100])
    # float16, with an infinity beside (which saturates to 127 in onnxrt, -128 in the reference)
    h = [np.array([127.44, np.inf], np.float16), np.array(1.71, np.float16), np.array(0, np.int8)]
    same(outputs("onnxrt", "QuantizeLinear", 19, h)[0], [75, 127])
    same(outputs("reference", "QuantizeLinear", 19, h)[0], [74, -128])


def test_pool_same_dilated():
    # auto_pad SAME_*: "output_shape[i] = ceil(input_shape[i] / strides[i])", and the padding
    # makes the windows of the dilated kernel ((k-1)*d+1 = 3 wide here) fit: total pad 2, one on
    # each side. Windows of x = [1, 5, 2] are {pad, 5}, {1, 2}, {5, pad}. onnxruntime returns
    # 2 values; the reference pads for the undilated kernel (1, at the end).
    x = np.array([[[1.0, 5.0, 2.0]]], F32)
    attrs = dict(kernel_shape=[2], dilations=[2], auto_pad="SAME_UPPER")
    same(outputs("onnxrt", "MaxPool", 12, [x], **attrs)[0], [[[5.0, 2.0, 5.0]]])
    same(outputs("onnxruntime", "MaxPool", 12, [x], **attrs)[0], [[[2.0, 5.0]]])
    y = np.array([[[0.82177013, -1.3812797, -2.754159]]], F32)
    lp = outputs("onnxrt", "LpPool", 18, [y], **attrs)[0]
    np.testing.assert_allclose(lp, [[[abs(y[0, 0, 1]), math.hypot(y[0, 0, 0], y[0, 0, 2]), abs(y[0, 0, 1])]]], rtol=1e-6)
    np.testing.assert_allclose(
        outputs("reference", "LpPool", 18, [y], **attrs)[0], [[[math.hypot(y[0, 0, 0], y[0, 0, 2]), abs(y[0, 0, 1]), 0.0]]], rtol=1e-6
    )


def test_reference_pool_same_negative_pad():
    # SAME with a stride above the window: pad_shape = (ceil(2/2) - 1) * 2 + 1 - 2 = -1, which
    # the pads attribute could not hold ("greater than or equal to 0"). auto_pad comes from
    # TensorFlow's SAME, whose padding is max(0, ...): no padding, the window starts at 0. The
    # three runtimes read Conv that way; for pooling the reference crops (negative padding),
    # and onnxruntime refuses the case or crops (MaxPool with Indices, LpPool). onnxrt keeps
    # Conv's reading for every sliding window.
    x = np.array([[[1.0, 5.0]]], F32)
    for mode in ("SAME_UPPER", "SAME_LOWER"):
        same(outputs("onnxrt", "MaxPool", 12, [x], kernel_shape=[1], strides=[2], auto_pad=mode)[0], [[[1.0]]])
        same(outputs("reference", "MaxPool", 12, [x], kernel_shape=[1], strides=[2], auto_pad=mode)[0], [[[5.0]]])
    for runtime in ("onnxrt", "reference", "onnxruntime"):
        same(outputs(runtime, "Conv", 11, [x, np.ones((1, 1, 1), F32)], strides=[2], auto_pad="SAME_UPPER")[0], [[[1.0]]])
    y = np.array([[[0.8, -1.4, -2.8]]], F32)
    attrs = dict(kernel_shape=[1], strides=[3], auto_pad="SAME_UPPER")
    got = outputs("onnxrt", "MaxPool", 8, [y], n_out=2, **attrs)
    same(got[0], [[[0.8]]])
    same(got[1], [[[0]]], np.int64)
    ort = outputs("onnxruntime", "MaxPool", 8, [y], n_out=2, **attrs)
    same(ort[0], [[[-1.4]]])
    same(ort[1], [[[1]]], np.int64)
    same(outputs("onnxruntime", "LpPool", 11, [y], **attrs)[0], [[[1.4]]])


def test_max_with_nan():
    # The spec never says how a NaN compares inside max/min-like operators. onnxrt: Reduce*,
    # ArgMax/ArgMin and the scatter reductions propagate NaN (IEEE 754 maximum, numpy, the
    # reference, and onnxruntime's own elementwise Max); MaxPool ignores NaN among numbers as
    # onnxruntime does, and gives NaN for a window of NaN only.
    # onnxruntime's answers depend on where the NaN sits:
    for x, ort in (([np.nan, 1, 2], np.nan), ([1, np.nan, 2], 2.0)):
        assert np.isnan(outputs("onnxrt", "ReduceMax", 18, [np.array(x, F32)])[0]).all()
        got = outputs("onnxruntime", "ReduceMax", 18, [np.array(x, F32)])[0]
        assert (np.isnan(got) if np.isnan(ort) else got == ort).all()
    same(outputs("onnxrt", "ArgMax", 13, [np.array([1, np.nan, 2], F32)])[0], [1], np.int64)
    same(outputs("onnxruntime", "ArgMax", 13, [np.array([1, np.nan, 2], F32)])[0], [2], np.int64)
    lse = np.array([[3.5, np.inf, np.nan]], F32)  # log(sum(exp(x))) of a NaN is NaN
    assert np.isnan(outputs("onnxrt", "ReduceLogSumExp", 18, [lse])[0]).all()
    same(outputs("onnxruntime", "ReduceLogSumExp", 18, [lse])[0], [[np.inf]])
    scatter = [np.array([np.nan, 1], F32), P(np.array([[0], [1]])), np.array([1, np.nan], F32)]
    assert np.isnan(outputs("onnxrt", "ScatterND", 18, scatter, reduction="max")[0]).all()
    ort = outputs("onnxruntime", "ScatterND", 18, scatter, reduction="max")[0]
    assert ort[0] == 1.0 and np.isnan(ort[1])
    scatter_e = [np.array([np.nan, 1], F32), P(np.array([0, 1])), np.array([1, np.nan], F32)]
    assert np.isnan(outputs("onnxrt", "ScatterElements", 18, scatter_e, reduction="max")[0]).all()
    ref = outputs("reference", "ScatterElements", 18, scatter_e, reduction="max")[0]
    assert np.isnan(ref[0]) and ref[1] == 1.0
    # Hardmax: onnxrt marks the NaN (numpy's argmax, as the reference); onnxruntime marks
    # nothing when the NaN comes first, the first number otherwise
    same(outputs("onnxrt", "Hardmax", 13, [np.array([np.nan, 0.0], F32)])[0], [1.0, 0.0])
    same(outputs("onnxruntime", "Hardmax", 13, [np.array([np.nan, 0.0], F32)])[0], [0.0, 0.0])
    same(outputs("onnxruntime", "Hardmax", 13, [np.array([0.0, np.nan], F32)])[0], [1.0, 0.0])
    # GlobalMaxPool follows MaxPool in onnxrt (NaN among numbers ignored); onnxruntime
    # returns the NaN when it comes last in a longer row, the reference when it comes first
    row = np.array([[[-0.0, 1.73, -1.18, np.nan]]], F32)
    same(outputs("onnxrt", "GlobalMaxPool", 1, [row])[0], [[[1.73]]])
    assert np.isnan(outputs("onnxruntime", "GlobalMaxPool", 1, [row])[0]).all()
    planes = np.array([1.37, 2.9, -2.4, -1.9, -1.7, np.nan, -np.inf, -0.8, np.nan, 2.57, -0.1, -1.8], F32).reshape(1, 1, 2, 2, 3)
    same(outputs("onnxrt", "GlobalMaxPool", 1, [planes])[0], np.full((1, 1, 1, 1, 1), 2.9, F32))
    same(outputs("onnxruntime", "GlobalMaxPool", 1, [planes])[0], np.full((1, 1, 1, 1, 1), 2.57, F32))  # not even the max
    first = np.array([[[[np.nan, 1.37, 0.26]]]], F32)
    same(outputs("onnxrt", "GlobalMaxPool", 1, [first])[0], [[[[1.37]]]])
    assert np.isnan(outputs("reference", "GlobalMaxPool", 1, [first])[0]).all()
    # MaxPool: onnxruntime returns the lowest float for a window of NaN, a value not in it;
    # the reference propagates a NaN only when it comes first in the window.
    pool = np.array([[[np.nan, 1.0, 2.0, np.nan, np.nan, np.nan]]], F32)
    got = outputs("onnxrt", "MaxPool", 12, [pool], kernel_shape=[2], strides=[2])[0]
    np.testing.assert_array_equal(got, [[[1.0, 2.0, np.nan]]])
    np.testing.assert_array_equal(outputs("onnxruntime", "MaxPool", 12, [pool], kernel_shape=[2], strides=[2])[0], [[[1.0, 2.0, FLT_LOWEST]]])
    np.testing.assert_array_equal(outputs("reference", "MaxPool", 12, [pool], kernel_shape=[2], strides=[2])[0], [[[np.nan, 2.0, np.nan]]])


def test_reference_max_pool_indices_across_images():
    # MaxPool's Indices "are computed as flatten 1-D tensor ... in [0, N x C x D1 x ... x Dn)":
    # the second image's only value has index 1 (onnxruntime agrees); the reference restarts
    # at 0 for every image.
    x = np.array([[[0.8]], [[-1.4]]], F32)
    got = outputs("onnxrt", "MaxPool", 8, [x], n_out=2, kernel_shape=[1])
    same(got[1], [[[0]], [[1]]], np.int64)
    same(outputs("onnxruntime", "MaxPool", 8, [x], n_out=2, kernel_shape=[1])[1], [[[0]], [[1]]], np.int64)
    same(outputs("reference", "MaxPool", 8, [x], n_out=2, kernel_shape=[1])[1], [[[0]], [[0]]], np.int64)
    # three spatial axes (1, 2, 3): the maximum at (0, 1, 1) is flat index 0*6 + 1*3 + 1 = 4
    y = np.array([0.8, -1.4, -2.8, -2.9, 1.9, 2.5], F32).reshape(1, 1, 1, 2, 3)
    same(outputs("onnxrt", "MaxPool", 10, [y], n_out=2, kernel_shape=[1, 2, 1])[1], [[[[[0, 4, 5]]]]], np.int64)
    same(outputs("onnxruntime", "MaxPool", 10, [y], n_out=2, kernel_shape=[1, 2, 1])[1], [[[[[0, 4, 5]]]]], np.int64)
    same(outputs("reference", "MaxPool", 10, [y], n_out=2, kernel_shape=[1, 2, 1])[1], [[[[[0, 2, 3]]]]], np.int64)


def test_pool_windows_wholly_in_padding():
    # Kernel 2 dilated by 2 over one value with a pad on each side reads only padding. The
    # spec has no value for such a window; onnxrt's max is that of an empty set as ReduceMax
    # defines it (-inf) and its average is 0 as onnxruntime's; onnxruntime's max is the lowest
    # float, the reference gives NaN for both.
    x = np.array([[[0.8]]], F32)
    attrs = dict(kernel_shape=[2], dilations=[2], pads=[1, 1])
    same(outputs("onnxrt", "MaxPool", 10, [x], **attrs)[0], [[[-np.inf]]])
    same(outputs("onnxruntime", "MaxPool", 10, [x], **attrs)[0], [[[FLT_LOWEST]]])
    assert np.isnan(outputs("reference", "MaxPool", 10, [x], **attrs)[0]).all()
    same(outputs("onnxrt", "AveragePool", 19, [x], **attrs)[0], [[[0.0]]])
    same(outputs("onnxruntime", "AveragePool", 19, [x], **attrs)[0], [[[0.0]]])
    assert np.isnan(outputs("reference", "AveragePool", 19, [x], **attrs)[0]).all()


def test_reference_lp_pool_drops_nan():
    # LpPool: (sum |x|^p)^(1/p) over the window; a NaN makes it NaN (onnxruntime agrees), the
    # reference skips it.
    x = np.array([[[np.nan, 1.0]]], F32)
    assert np.isnan(outputs("onnxrt", "LpPool", 18, [x], kernel_shape=[2])[0]).all()
    assert np.isnan(outputs("onnxruntime", "LpPool", 18, [x], kernel_shape=[2])[0]).all()
    np.testing.assert_allclose(outputs("reference", "LpPool", 18, [x], kernel_shape=[2])[0], [[[math.sqrt(2)]]], rtol=1e-6)


def test_reference_global_max_pool_not_2d():
    # GlobalMaxPool: Y is "(N x C x 1 x 1 ...)", one 1 per spatial axis; the reference's result
    # always has rank 4: one spatial axis is dropped, three get a fourth.
    x = np.array([[[1.0, 3.0, 2.0]], [[0.0, -1.0, 5.0]]], F32)
    same(outputs("onnxrt", "GlobalMaxPool", 1, [x])[0], [[[3.0]], [[5.0]]])
    same(outputs("reference", "GlobalMaxPool", 1, [x])[0], [[3.0], [5.0]])
    x3 = np.array([[[[[1.0, 3.0]]]]], F32)
    same(outputs("onnxrt", "GlobalMaxPool", 1, [x3])[0], np.full((1, 1, 1, 1, 1), 3.0))
    same(outputs("reference", "GlobalMaxPool", 1, [x3])[0], np.full((1, 1, 1, 1, 1, 1), 3.0))
    same(outputs("onnxruntime", "GlobalMaxPool", 1, [x3])[0], np.full((1, 1, 1, 1, 1), 3.0))


def test_reference_max_pool_same_lower():
    # SAME_LOWER: "In case the padding is an odd number, the extra padding is added at the
    # beginning". x = [0.8, 1, 2, 3], kernel 3, stride 2: 2 outputs, padding 1 at the
    # beginning, windows {pad, 0.8, 1} and {1, 2, 3}. The reference pads at the end; with a
    # stride of 2 and a kernel of 1 it even returns one output for three inputs (ceil(3/2) = 2).
    x = np.array([[[0.8, 1.0, 2.0, 3.0]]], F32)
    attrs = dict(kernel_shape=[3], strides=[2], auto_pad="SAME_LOWER")
    same(outputs("onnxrt", "MaxPool", 12, [x], **attrs)[0], [[[1.0, 3.0]]])
    same(outputs("onnxruntime", "MaxPool", 12, [x], **attrs)[0], [[[1.0, 3.0]]])
    same(outputs("reference", "MaxPool", 12, [x], **attrs)[0], [[[2.0, 3.0]]])
    y = np.array([[[0.8, 1.0, 2.0]]], F32)
    attrs = dict(kernel_shape=[1], strides=[2], auto_pad="SAME_LOWER")
    same(outputs("onnxrt", "MaxPool", 12, [y], **attrs)[0], [[[0.8, 2.0]]])
    same(outputs("reference", "MaxPool", 12, [y], **attrs)[0], [[[1.0]]])


def test_reference_lp_pool_valid_dilated():
    # VALID: "ceil((input_spatial_shape[i] - {kernelSpatialShape} + 1) / strides_spatial_shape[i])"
    # with the dilated kernel, 3 - 3 + 1 = 1 window {1, 3}. The reference's LpPool and
    # AveragePool count the undilated kernel (2 windows, the second one empty); its MaxPool
    # does not.
    x = np.array([[[[1.0], [2.0], [3.0]]]], F32)
    attrs = dict(kernel_shape=[2, 1], dilations=[2, 1], auto_pad="VALID")
    np.testing.assert_allclose(outputs("onnxrt", "LpPool", 18, [x], **attrs)[0], [[[[math.sqrt(10)]]]], rtol=1e-6)
    np.testing.assert_allclose(outputs("onnxruntime", "LpPool", 18, [x], **attrs)[0], [[[[math.sqrt(10)]]]], rtol=1e-6)
    np.testing.assert_allclose(outputs("reference", "LpPool", 18, [x], **attrs)[0], [[[[math.sqrt(10)], [0.0]]]], rtol=1e-6)
    same(outputs("reference", "MaxPool", 12, [x], **attrs)[0], [[[[3.0]]]])
    same(outputs("onnxrt", "AveragePool", 19, [x], **attrs)[0], [[[[2.0]]]])
    assert outputs("reference", "AveragePool", 19, [x], **attrs)[0].shape == (1, 1, 2, 1)


def test_reference_max_pool_valid_ceil_mode():
    # VALID with ceil_mode=1: the spec gives the VALID length and ceil_mode separately;
    # onnxrt follows onnxruntime, whose ceil_mode adds the window starting at the last
    # value (2 windows of [0.8, -1.4, -2.8]); the reference keeps the VALID length 1.
    x = np.array([[[0.8, -1.4, -2.8]]], F32)
    attrs = dict(kernel_shape=[2], strides=[2], auto_pad="VALID", ceil_mode=1)
    same(outputs("onnxrt", "MaxPool", 10, [x], **attrs)[0], [[[0.8, -2.8]]])
    same(outputs("onnxruntime", "MaxPool", 10, [x], **attrs)[0], [[[0.8, -2.8]]])
    same(outputs("reference", "MaxPool", 10, [x], **attrs)[0], [[[0.8]]])


def test_reference_lp_pool_ceil_mode():
    # ceil_mode=1 adds a last window that starts inside the input and runs past its end; it
    # holds the values inside the input only (onnxruntime agrees): [3] -> 3. The reference
    # fills the missing cells with the edge value: sqrt(3^2 + 3^2).
    x = np.array([[[1.0, 2.0, 3.0]]], F32)
    attrs = dict(kernel_shape=[2], strides=[2], ceil_mode=1)
    np.testing.assert_allclose(outputs("onnxrt", "LpPool", 18, [x], **attrs)[0], [[[math.sqrt(5), 3.0]]], rtol=1e-6)
    np.testing.assert_allclose(outputs("onnxruntime", "LpPool", 18, [x], **attrs)[0], [[[math.sqrt(5), 3.0]]], rtol=1e-6)
    np.testing.assert_allclose(outputs("reference", "LpPool", 18, [x], **attrs)[0], [[[math.sqrt(5), math.sqrt(18)]]], rtol=1e-6)
    # AveragePool: with 2 pads at the beginning, windows of 3 and stride 3 over [0.8, -1.4],
    # ceil_mode adds the window starting at the second value: averages 0.8 and -1.4 over the
    # cells inside the input; the reference gives NaN and 0.8
    y = np.array([[[[0.8], [-1.4]]]], F32)
    avg = dict(kernel_shape=[3, 1], strides=[3, 1], pads=[2, 0, 0, 0], ceil_mode=1)
    same(outputs("onnxrt", "AveragePool", 10, [y], **avg)[0], [[[[0.8], [-1.4]]]])
    same(outputs("onnxruntime", "AveragePool", 10, [y], **avg)[0], [[[[0.8], [-1.4]]]])
    np.testing.assert_array_equal(outputs("reference", "AveragePool", 10, [y], **avg)[0], np.array([[[[np.nan], [0.8]]]], F32))


def test_reference_slice_backward_start_below():
    # Slice: "starts[i] is clamped into the range ... [0, dims[axes[i]]-1] for negative
    # stepping" after adding dims to a negative value: start -5 on 3 elements is -2, clamped
    # to 0, and the backward slice holds element 0. The reference passes -5 to numpy, which
    # gives nothing.
    x = np.arange(3, dtype=F32)
    args = [x, P(np.array([-5])), P(np.array([-(2**63)])), None, P(np.array([-1]))]
    same(outputs("onnxrt", "Slice", 13, args)[0], [0.0])
    same(outputs("onnxruntime", "Slice", 13, args)[0], [0.0])
    same(outputs("reference", "Slice", 13, args)[0], np.zeros(0, F32))


def test_reference_resize_nearest_float64_coordinates():
    # nearest, half_pixel, floor, scale 0.6 over 4 values: output 1 reads x_original =
    # (1 + 0.5) / 0.6 - 0.5 = 2 -> x[2]. onnxrt computes the coordinate in float32 as
    # onnxruntime does (1.5f / 0.6f is 2.5f); the reference divides in float64 by the float32
    # scale 0.60000002, lands on 1.9999999 and floors it to x[1]. The spec's scale is 0.6.
    x = np.array([1.1, -1.8, -3.7, -3.9], F32)
    args = [x, None, P(np.array([0.6], F32))]
    same(outputs("onnxrt", "Resize", 13, args, mode="nearest", nearest_mode="floor")[0], [1.1, -3.7])
    same(outputs("onnxruntime", "Resize", 13, args, mode="nearest", nearest_mode="floor")[0], [1.1, -3.7])
    same(outputs("reference", "Resize", 13, args, mode="nearest", nearest_mode="floor")[0], [1.1, -1.8])


def test_reference_resize_pytorch_half_pixel_to_one():
    # pytorch_half_pixel: "x_original = length_resized > 1 ? (x_resized + 0.5) / scale - 0.5 : 0":
    # an output of length 1 reads coordinate 0, x[0] = 1 (onnxruntime agrees). The reference
    # applies the first branch.
    x = np.array([[[[1.0, 2.0, 3.0]]]], F32)
    args = [x, None, P(np.array([1, 1, 1, 0.5], F32))]
    for mode in ("linear", "cubic"):
        kw = dict(mode=mode, coordinate_transformation_mode="pytorch_half_pixel")
        same(outputs("onnxrt", "Resize", 13, args, **kw)[0], [[[[1.0]]]])
        same(outputs("onnxruntime", "Resize", 13, args, **kw)[0], [[[[1.0]]]])
        assert outputs("reference", "Resize", 13, args, **kw)[0][0, 0, 0, 0] != 1.0


def test_reference_lrn():
    # LRN: square_sum[n, c] sums x^2 over channels [c - floor((size-1)/2), c + ceil((size-1)/2)],
    # Y = X / (bias + alpha / size * square_sum) ^ beta. With size 1, alpha = beta = bias = 1:
    # Y = x / (1 + x^2). The reference returns channels after the first unchanged.
    x = np.arange(1, 4, dtype=F32).reshape(1, 3, 1, 1)
    want = (x / (1 + x * x)).astype(F32)
    np.testing.assert_allclose(outputs("onnxrt", "LRN", 13, [x], size=1, alpha=1.0, beta=1.0, bias=1.0)[0], want, rtol=1e-6)
    np.testing.assert_allclose(outputs("reference", "LRN", 13, [x], size=1, alpha=1.0, beta=1.0, bias=1.0)[0], [[[[0.5]], [[2.0]], [[3.0]]]])
    # for doubles the reference goes through float32 on the way (a relative 1e-8 off)
    y = np.array([[[[1.0956935, -1.84170629]]]], F64)
    want = y / (1 + 0.5 / 3 * y * y) ** 0.75
    np.testing.assert_allclose(outputs("onnxrt", "LRN", 13, [y], size=3, alpha=0.5)[0], want, rtol=1e-14)
    ref = outputs("reference", "LRN", 13, [y], size=3, alpha=0.5)[0]
    assert 1e-9 < np.abs(ref / want - 1).max() < 1e-6


def test_reference_lp_normalization_l1():
    # p = 1 divides by the L1 norm sum(|x|); the reference divides by sum(x).
    x = np.array([[1.0, -3.0]], F32)
    same(outputs("onnxrt", "LpNormalization", 1, [x], p=1)[0], [[0.25, -0.75]])
    same(outputs("reference", "LpNormalization", 1, [x], p=1)[0], [[-0.5, 1.5]])
    same(outputs("onnxruntime", "LpNormalization", 1, [x], p=1)[0], [[0.25, -0.75]])


def test_reference_batch_normalization_9():
    # Inference: Y = (X - mean) / sqrt(var + epsilon) * scale + B = (1 + 3) / 2 * 1 + 0 = 2.
    # The reference's version 9 does not return that (it divides by sqrt(var / 0.9)).
    args = [np.array([[1.0]], F32), np.array([1.0], F32), np.array([0.0], F32), np.array([-3.0], F32), np.array([4.0], F32)]
    same(outputs("onnxrt", "BatchNormalization", 9, args, epsilon=0.0)[0], [[2.0]])
    same(outputs("onnxruntime", "BatchNormalization", 9, args, epsilon=0.0)[0], [[2.0]])
    ref = outputs("reference", "BatchNormalization", 9, args, epsilon=0.0)[0]
    np.testing.assert_allclose(ref, [[4 / math.sqrt(4 / 0.9)]], rtol=1e-6)
    same(outputs("reference", "BatchNormalization", 15, args, epsilon=0.0)[0], [[2.0]])


@pytest.mark.parametrize("dtype", [np.float64, np.float16])
def test_reference_layer_normalization_stats_type(dtype):
    # Mean and InvStdDev have type U, constrained to float32 and bfloat16 (stash_type 1 by
    # default); the reference returns them in X's type.
    x = np.array([[1.0, 2.0]], dtype)
    args = [x, np.ones(2, dtype)]
    got = outputs("onnxrt", "LayerNormalization", 17, args, n_out=3)
    assert [o.dtype for o in got] == [dtype, np.float32, np.float32]
    assert [o.dtype for o in outputs("reference", "LayerNormalization", 17, args, n_out=3)] == [dtype] * 3
    assert [o.dtype for o in outputs("onnxruntime", "LayerNormalization", 17, args, n_out=3)][1:] == [np.float32] * 2


def test_resize_integer_truncates():
    # The spec does not say how an interpolated integer is rounded; onnxrt truncates like
    # onnxruntime, the reference rounds. [4, 3] halved (half_pixel) is 3.5 there.
    x = np.array([[[[4, 3]]]], np.uint8)
    sizes = P(np.array([1, 1, 1, 1], np.int64))
    args = [x, None, None, sizes]
    same(outputs("onnxrt", "Resize", 13, args, mode="linear")[0], [[[[3]]]])
    same(outputs("onnxruntime", "Resize", 13, args, mode="linear")[0], [[[[3]]]])
    same(outputs("reference", "Resize", 13, args, mode="linear")[0], [[[[4]]]])
    # truncation also turns a rounding below an exact integer into one less: rows [2, 1] and
    # [4, 4] at x_original = (0 + 0.5) / 0.6 - 0.5 = 1/3 give 2 + 2/3 and exactly 2; onnxrt
    # gets 2, onnxruntime's float32 arithmetic lands below 2 and truncates to 1
    y = np.array([[[[2, 1], [4, 4]]]], np.uint8)
    args = [y, None, P(np.array([1, 1, 0.6, 1], F32))]
    same(outputs("onnxrt", "Resize", 18, args, mode="linear")[0], [[[[2, 2]]]])
    same(outputs("onnxruntime", "Resize", 18, args, mode="linear")[0], [[[[2, 1]]]])
    # antialias: the filtered values of this halving are exactly -0.5625 and -2.4375 (float32
    # agrees everywhere); onnxrt truncates (0, -2), the reference rounds (-1, -2), onnxruntime's
    # int8 antialias path returns (1, 0)
    z = np.array([[[[3, 1, 0, -2], [-2, -4, -4, -4]]]], np.int8)
    args = [z, None, P(np.array([1, 1, 0.5, 0.5], F32))]
    np.testing.assert_array_equal(outputs("onnxrt", "Resize", 18, [z.astype(F32)] + args[1:], mode="linear", antialias=1)[0], [[[[-0.5625, -2.4375]]]])
    same(outputs("onnxrt", "Resize", 18, args, mode="linear", antialias=1)[0], [[[[0, -2]]]])
    same(outputs("reference", "Resize", 18, args, mode="linear", antialias=1)[0], [[[[-1, -2]]]])
    same(outputs("onnxruntime", "Resize", 18, args, mode="linear", antialias=1)[0], [[[[1, 0]]]])


def test_resize_infinity_and_zero_weights():
    # Not fuzzed (the fuzzer gives Resize finite values): where an infinity gets a zero weight,
    # 0 * inf = NaN if the implementation multiplies it at all. onnxrt multiplies the two
    # neighbours of each axis in turn (the spec's per-axis interpolation), onnxruntime's
    # bilinear kernel multiplies all four, the reference skips the zero weights, and clips
    # infinities to the largest float.
    x = np.array([[1.0, 2.0], [3.0, np.inf]], F32)
    scales = P(np.array([0.5, 1.0], F32))
    args = [x, None, scales]
    kw = dict(mode="linear", coordinate_transformation_mode="asymmetric")
    np.testing.assert_array_equal(outputs("onnxrt", "Resize", 13, args, **kw)[0], [[1.0, np.nan]])
    np.testing.assert_array_equal(outputs("onnxruntime", "Resize", 13, args, **kw)[0], [[np.nan, np.nan]])
    np.testing.assert_array_equal(outputs("reference", "Resize", 13, args, **kw)[0], [[1.0, 2.0]])
    # nearest picks one value: no weights, no NaN (the reference still multiplies by them)
    near = [np.array([[1.0, np.inf]], F32), None, P(np.array([1.0, 0.5], F32))]
    same(outputs("onnxrt", "Resize", 13, near, mode="nearest")[0], [[1.0]])
    same(outputs("onnxruntime", "Resize", 13, near, mode="nearest")[0], [[1.0]])
    assert np.isnan(outputs("reference", "Resize", 13, near, mode="nearest")[0]).all()


def test_reference_quantize_infinity():
    # QuantizeLinear saturates: "saturate to [-128, 127]" for int8; +inf / scale rounds to +inf,
    # which saturates to 127 (onnxruntime agrees). The reference casts inf to the lowest value,
    # whether x is infinite or the scale is 0.
    x = np.array([np.inf, -np.inf], F32)
    args = [x, np.array(1.0, F32), np.array(0, np.int8)]
    same(outputs("onnxrt", "QuantizeLinear", 13, args)[0], [127, -128])
    same(outputs("onnxruntime", "QuantizeLinear", 13, args)[0], [127, -128])
    same(outputs("reference", "QuantizeLinear", 13, args)[0], [-128, -128])
    zero_scale = [np.array([-2.0, 1.75], F32), np.array(0.0, F32), np.array(0, np.int8)]
    same(outputs("onnxrt", "QuantizeLinear", 13, zero_scale)[0], [-128, 127])
    same(outputs("onnxruntime", "QuantizeLinear", 13, zero_scale)[0], [-128, 127])
    same(outputs("reference", "QuantizeLinear", 13, zero_scale)[0], [-128, -128])


def test_dropout_mask_before_12():
    # Dropout 7 and 10 run in inference mode only and the specification leaves their mask's
    # value open ("the output mask"). The reference marks every element kept (booleans, even
    # for Dropout-7 whose mask has type T); onnxruntime fills zeros (False for Dropout-10), and
    # onnxrt follows onnxruntime there (the rule for what the spec leaves open, and what the
    # exported models users compare with onnxruntime expect). From version 12 the mask is
    # defined (all kept in inference), and all three agree.
    x = np.array([1.5, 2.0], F32)
    got = outputs("onnxrt", "Dropout", 7, [x], n_out=2)
    same(got[1], [0.0, 0.0])
    assert got[1].dtype == np.float32
    assert outputs("reference", "Dropout", 7, [x], n_out=2)[1].dtype == np.bool_
    same(outputs("onnxruntime", "Dropout", 7, [x], n_out=2)[1], [0.0, 0.0])
    same(outputs("onnxrt", "Dropout", 10, [x], n_out=2)[1], [False, False])
    same(outputs("onnxruntime", "Dropout", 10, [x], n_out=2)[1], [False, False])
    same(outputs("reference", "Dropout", 10, [x], n_out=2)[1], [True, True])
    same(outputs("onnxrt", "Dropout", 13, [x], n_out=2)[1], [True, True])
    same(outputs("onnxruntime", "Dropout", 13, [x], n_out=2)[1], [True, True])


# ---------------------------------------------------------------------------------------
# onnxruntime
# ---------------------------------------------------------------------------------------


def test_onnxruntime_nonzero_of_scalar():
    # NonZero: "for scalar input, NonZero produces output shape (0, N) instead of (1, N)".
    x = np.array(2.0, F32)
    same(outputs("onnxrt", "NonZero", 13, [x])[0], np.zeros((0, 1), np.int64))
    same(outputs("reference", "NonZero", 13, [x])[0], np.zeros((0, 1), np.int64))
    same(outputs("onnxruntime", "NonZero", 13, [x])[0], [[0]], np.int64)


def test_onnxruntime_shrink_float64_in_float32():
    # Shrink: y = x - bias for x > lambd; onnxruntime's double kernel rounds through float32.
    x = np.array([1.1], F64)
    same(outputs("onnxrt", "Shrink", 9, [x], lambd=0.5)[0], [1.1])
    same(outputs("onnxruntime", "Shrink", 9, [x], lambd=0.5)[0], [float(np.float32(1.1))])


def test_onnxruntime_log_softmax_nonfinite_float64():
    # LogSoftmax-13's function body: X - max(X) = [-inf, NaN, -inf] (inf - inf), its exp
    # [0, NaN, 0], Log(ReduceSum) = NaN, Y = (X - max) - NaN = NaN everywhere; a NaN in the
    # row makes every step NaN too. onnxruntime's double kernel gives -inf beside the NaN for
    # the infinity and finite values for the NaN (its float kernel gives NaN).
    x = np.array([[1.0, np.inf, 2.0]], F64)
    assert np.isnan(outputs("onnxrt", "LogSoftmax", 13, [x])[0]).all()
    assert np.isnan(outputs("reference", "LogSoftmax", 13, [x])[0]).all()
    np.testing.assert_array_equal(outputs("onnxruntime", "LogSoftmax", 13, [x])[0], [[-np.inf, np.nan, -np.inf]])
    assert np.isnan(outputs("onnxruntime", "LogSoftmax", 13, [x.astype(F32)])[0]).all()
    y = np.array([[1.0, np.nan, 2.0]], F64)
    assert np.isnan(outputs("onnxrt", "LogSoftmax", 13, [y])[0]).all()
    ort = outputs("onnxruntime", "LogSoftmax", 13, [y])[0]
    assert np.isfinite(ort[0, 0]) and np.isfinite(ort[0, 2])


def test_onnxruntime_mvn_constant_group():
    # "(X-EX)/sqrt(E(X-EX)^2)", the function body adding 1e-9 to the deviation: a group of
    # equal values gives 0 / 1e-9 = 0. onnxruntime gives NaN.
    x = np.full((1, 1, 1, 2), 3.0, F32)
    same(outputs("onnxrt", "MeanVarianceNormalization", 13, [x])[0], np.zeros((1, 1, 1, 2)))
    same(outputs("reference", "MeanVarianceNormalization", 13, [x])[0], np.zeros((1, 1, 1, 2)))
    assert np.isnan(outputs("onnxruntime", "MeanVarianceNormalization", 13, [x])[0]).all()


def test_onnxruntime_instance_norm_infinite_scale():
    # y = scale * (x - mean) / sqrt(variance + epsilon) + B with scale = inf: +-inf. onnxruntime
    # folds the statistics into x * (scale / std) + (B - mean * scale / std), inf - inf = NaN.
    args = [np.array([[[1.0, 2.0]]], F32), np.array([np.inf], F32), np.array([0.0], F32)]
    same(outputs("onnxrt", "InstanceNormalization", 6, args)[0], [[[-np.inf, np.inf]]])
    same(outputs("reference", "InstanceNormalization", 6, args)[0], [[[-np.inf, np.inf]]])
    assert np.isnan(outputs("onnxruntime", "InstanceNormalization", 6, args)[0]).all()
    # BatchNormalization: Y = (X - mean) / sqrt(var + epsilon) * scale + B, folded the same way
    bn = [np.array([[-2.0], [0.0]], F32), np.array([np.inf], F32), np.array([0.0], F32), np.array([-1.0], F32), np.array([1.0], F32)]
    same(outputs("onnxrt", "BatchNormalization", 15, bn, epsilon=0.0)[0], [[-np.inf], [np.inf]])
    same(outputs("reference", "BatchNormalization", 15, bn, epsilon=0.0)[0], [[-np.inf], [np.inf]])
    assert np.isnan(outputs("onnxruntime", "BatchNormalization", 15, bn, epsilon=0.0)[0]).all()


def test_onnxruntime_instance_norm_folding():
    # One value per channel: x - mean = 0 and y = B exactly. onnxruntime computes
    # x * a + (B - mean * a) with a = scale / sqrt(0 + 1e-5) = -1008, which cancels to 1e-4 off.
    args = [np.array([[[3.3954961]]], F32), np.array([-3.1890612], F32), np.array([0.02671647], F32)]
    same(outputs("onnxrt", "InstanceNormalization", 6, args)[0], [[[0.02671647]]])
    same(outputs("reference", "InstanceNormalization", 6, args)[0], [[[0.02671647]]])
    ort = outputs("onnxruntime", "InstanceNormalization", 6, args)[0]
    assert 1e-5 < abs(float(ort[0, 0, 0]) - 0.02671647) < 1e-3


def test_onnxruntime_gather_strings():
    # Gather of a string row: onnxruntime copies the first string of the block and leaves the
    # others empty.
    x = np.array([["e", "A"], ["b", "c"]], dtype=object)
    idx = np.array(0, np.int64)
    same(outputs("onnxrt", "Gather", 13, [x, idx], axis=0)[0], np.array(["e", "A"], dtype=object))
    same(outputs("reference", "Gather", 13, [x, idx], axis=0)[0], np.array(["e", "A"], dtype=object))
    same(outputs("onnxruntime", "Gather", 13, [x, idx], axis=0)[0], np.array(["e", ""], dtype=object))


def test_onnxruntime_sign_of_nan_float16():
    # Sign defines 1, -1 and 0 for positive, negative and zero inputs; for NaN every runtime
    # (onnxruntime's float and double kernels too) returns NaN but onnxruntime's float16 kernel,
    # which returns 0.
    x = np.array([np.nan, -2.0], np.float16)
    np.testing.assert_array_equal(outputs("onnxrt", "Sign", 13, [x])[0], [np.nan, -1.0])
    np.testing.assert_array_equal(outputs("onnxruntime", "Sign", 13, [x.astype(F32)])[0], [np.nan, -1.0])
    same(outputs("onnxruntime", "Sign", 13, [x])[0], [0.0, -1.0])


def test_onnxruntime_lrn_nan_spreads():
    # LRN with size 1 reads each channel alone: a NaN in channel 0 cannot reach channel 1.
    # onnxruntime's running sum over channels carries it along.
    x = np.array([np.nan, -1.0], F32).reshape(1, 2, 1, 1)
    got = outputs("onnxrt", "LRN", 13, [x], size=1)[0]
    assert np.isnan(got[0, 0]).all()
    np.testing.assert_allclose(got[0, 1], [[-1.0 / (1 + 1e-4) ** 0.75]], rtol=1e-6)  # x / (bias + alpha * x^2 / size)^beta
    assert np.isnan(outputs("onnxruntime", "LRN", 13, [x], size=1)[0]).all()


def test_onnxruntime_layer_norm_infinity():
    # LayerNormalization's Mean is ReduceMean(X) in the function body: the mean of
    # [-inf, -1, -3] is -inf. onnxruntime returns NaN.
    x = np.array([[-np.inf, -1.0, -3.0]], F32)
    args = [x, np.ones((1, 3), F32)]
    assert outputs("onnxrt", "LayerNormalization", 17, args, n_out=2, axis=0)[1][0, 0] == -np.inf
    assert outputs("reference", "LayerNormalization", 17, args, n_out=2, axis=0)[1][0, 0] == -np.inf
    assert np.isnan(outputs("onnxruntime", "LayerNormalization", 17, args, n_out=2, axis=0)[1]).all()


def test_onnxruntime_integer_reduce_log_sum_exp():
    # log(exp(-8) + exp(-20)) = -7.9999939, truncated to int32 like any float-to-int
    # conversion: -7. onnxruntime computes max + log(sum(exp(x - max))) with the sum kept in
    # int32, each term truncated (exp(-12) -> 0): -8 + log(1) = -8.
    x = np.array([-8, -20], np.int32)
    same(outputs("onnxrt", "ReduceLogSumExp", 18, [x], keepdims=0)[0], -7)
    same(outputs("onnxruntime", "ReduceLogSumExp", 18, [x], keepdims=0)[0], -8)
    y = np.array([-8, -8], np.int32)  # log(2 exp(-8)) = -7.307 -> -7 in both
    same(outputs("onnxruntime", "ReduceLogSumExp", 18, [y], keepdims=0)[0], -7)


def test_onnxruntime_max_pool_minus_infinity():
    # The max of {-inf, -inf} is -inf; onnxruntime starts its max from the lowest float and
    # returns that, a value not in the window.
    x = np.array([[[-np.inf, -np.inf]]], F32)
    same(outputs("onnxrt", "GlobalMaxPool", 1, [x])[0], [[[-np.inf]]])
    same(outputs("onnxruntime", "GlobalMaxPool", 1, [x])[0], [[[FLT_LOWEST]]])
    same(outputs("onnxrt", "MaxPool", 12, [x], kernel_shape=[2])[0], [[[-np.inf]]])
    same(outputs("reference", "MaxPool", 12, [x], kernel_shape=[2])[0], [[[-np.inf]]])
    same(outputs("onnxruntime", "MaxPool", 12, [x], kernel_shape=[2])[0], [[[FLT_LOWEST]]])


def test_onnxruntime_resize_integer_length():
    # tf_crop_and_resize: "x_original = length_resized > 1 ? ... : 0.5 * (start_x + end_x) *
    # (length_original - 1)" with scale = length_resized / length_original, so from a scale
    # input length_resized = 2 * 0.6 = 1.2 (the conformance suite's reading, and the
    # reference's): x_original = 0, x[0]. onnxruntime takes the integer output length 1:
    # 0.5 * 1.25 = 0.625, rounded to x[1].
    x = np.array([[[[1.0, -2.0]]]], F32)
    roi = np.array([0, 0, 0, 0, 1, 1, 1, 1.25], F32)
    scales = np.array([1, 1, 1, 0.6], F32)
    kw = dict(mode="nearest", coordinate_transformation_mode="tf_crop_and_resize")
    same(outputs("onnxrt", "Resize", 11, [x, roi, scales], **kw)[0], [[[[1.0]]]])
    same(outputs("reference", "Resize", 11, [x, roi, scales], **kw)[0], [[[[1.0]]]])
    same(outputs("onnxruntime", "Resize", 11, [x, roi, scales], **kw)[0], [[[[-2.0]]]])
    # sizes under keep_aspect_ratio_policy become one scale (min of sizes / in = 0.5 here):
    # length_resized = 3 * 0.5 = 1.5 on the channel axis, x_original = 1 * 2 / 0.5 = 4 is
    # outside the input (extrapolation_value 0); onnxruntime uses the output length 2 (x[2]).
    y = np.array([3, 1, 0, -2, -2, -4], np.int8).reshape(1, 3, 1, 2)
    args = [y, np.array([0, 0, 0, 0, 1, 1, 1, 1], F32), None, P(np.array([1, 3, 1, 1], np.int64))]
    kw = dict(mode="nearest", coordinate_transformation_mode="tf_crop_and_resize", keep_aspect_ratio_policy="not_larger")
    same(outputs("onnxrt", "Resize", 18, args, **kw)[0], np.array([3, 0], np.int8).reshape(1, 2, 1, 1))
    same(outputs("reference", "Resize", 18, args, **kw)[0], np.array([3, 0], np.int8).reshape(1, 2, 1, 1))
    same(outputs("onnxruntime", "Resize", 18, args, **kw)[0], np.array([3, -2], np.int8).reshape(1, 2, 1, 1))


def test_onnxruntime_resize_roi_ignored():
    # tf_crop_and_resize: x_original = start_x * (length_original - 1) + x_resized * (end_x -
    # start_x) * (length_original - 1) / (length_resized - 1): roi [0.25, 0.75] on [1, -2, 4]
    # samples 0.5, 1, 1.5 -> -0.5, -2, 1 (the reference agrees). onnxruntime returns the
    # uncropped axis.
    x = np.array([[[[1.0, -2.0, 4.0]]]], F32)
    roi = P(np.array([0, 0, 0, 0.25, 1, 1, 1, 0.75], F32))
    args = [x, roi, P(np.array([1, 1, 1, 1], F32))]
    kw = dict(mode="linear", coordinate_transformation_mode="tf_crop_and_resize")
    same(outputs("onnxrt", "Resize", 13, args, **kw)[0], [[[[-0.5, -2.0, 1.0]]]])
    same(outputs("reference", "Resize", 13, args, **kw)[0], [[[[-0.5, -2.0, 1.0]]]])
    same(outputs("onnxruntime", "Resize", 13, args, **kw)[0], [[[[1.0, -2.0, 4.0]]]])


def test_onnxruntime_slice_backward_int_max():
    # Slice-13: "ends[i] is clamped into the range ... [-1, dims[axes[i]]-1] for negative
    # stepping": an end of INT64_MAX is 4 here, and 3 down to 4 (exclusive) is empty.
    # onnxruntime reads INT_MAX as "to the beginning" even for a backward step.
    x = np.arange(5, dtype=F32)
    args = [x, P(np.array([3])), P(np.array([2**63 - 1])), None, P(np.array([-1]))]
    same(outputs("onnxrt", "Slice", 13, args)[0], np.zeros(0, F32))
    same(outputs("reference", "Slice", 13, args)[0], np.zeros(0, F32))
    same(outputs("onnxruntime", "Slice", 13, args)[0], [3.0, 2.0, 1.0, 0.0])


def test_every_known_deviation_is_proven_here():
    # the fuzzer accepts a deviation only if a test of this module proves it
    from ._known import DEVIATIONS

    missing = sorted({d.test for d in DEVIATIONS if not callable(globals().get(d.test))})
    assert not missing, f"deviations without a proving test: {missing}"
