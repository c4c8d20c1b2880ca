"""Proven oracle deviations from the spec, each recognised narrowly and proven in test_oracle_disagreements.py.

A deviation applies only to one operator, one oracle and the exact situation its predicate
checks (an input pattern, and the shape of the difference where that is what identifies it);
every other difference still fails the fuzzer.
"""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from ._gen import F8, P, is_float
from ._harness import REJECTED, Case, Deviation

# -- reading a case ------------------------------------------------------------------------


def _inputs(case: Case) -> list[np.ndarray | None]:
    return [None if v is None else np.asarray(v.value if isinstance(v, P) else v) for v in case.node.inputs]


def _x(case: Case, i: int = 0) -> np.ndarray | None:
    ins = _inputs(case)
    return ins[i] if i < len(ins) else None


def _attr(case: Case, name: str, default: Any = None) -> Any:
    return case.node.attrs.get(name, default)


def _f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def _floats_with(case: Case, test: Any) -> bool:
    """Whether some float input has an element for which ``test`` holds (np.isnan, np.isinf...)."""
    return any(a is not None and is_float(a.dtype) and a.size and bool(test(_f64(a)).any()) for a in _inputs(case))


def _bad(g: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Positions where two float arrays of one shape really differ: beyond a rounding of
    their type (NaN equals NaN, infinities must match); everywhere when the shapes differ."""
    if np.shape(g) != np.shape(e):
        return np.ones(np.shape(g), dtype=bool)
    rejected = REJECTED.get((id(g), id(e)))
    if rejected is not None:  # the harness's own verdict, with the operator's tolerance
        return rejected
    gf, ef = _f64(g), _f64(e)
    eps = float(np.finfo(np.float32).eps) if not is_float(g.dtype) else float(ml_dtypes.finfo(g.dtype).eps)
    with np.errstate(invalid="ignore"):
        close = np.abs(gf - ef) <= 16 * eps * np.maximum(1.0, np.abs(ef))
    return ~((gf == ef) | (np.isnan(gf) & np.isnan(ef)) | (np.isfinite(gf) & np.isfinite(ef) & close))


def _same_shapes(got: list, exp: list) -> bool:
    return all(np.shape(g) == np.shape(e) for g, e in zip(got, exp))


# -- predicates ----------------------------------------------------------------------------


def nan_involved(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """NaN in the inputs, and every differing float value is NaN on one side: the order of a
    NaN among numbers (max, min, argmax, pooling), which each runtime settles its own way."""
    if not _floats_with(case, np.isnan) or not _same_shapes(got, exp):
        return False
    for g, e in zip(got, exp):
        if is_float(g.dtype) and is_float(e.dtype):
            bad = _bad(g, e)
            if (bad & ~(np.isnan(_f64(g)) | np.isnan(_f64(e)))).any():
                return False
    return True


def float32_rounding_of_float64(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """A float64 input whose result differs from onnxrt's only at float32 precision."""
    x = _x(case)
    if x is None or x.dtype != np.float64 or not _same_shapes(got, exp):
        return False
    for g, e in zip(got, exp):
        gf, ef = _f64(g), _f64(e)
        fin = np.isfinite(gf) & np.isfinite(ef)
        if (_bad(g, e) & ~fin).any():
            return False
        if not np.allclose(gf[fin], ef[fin], rtol=2e-7, atol=2e-7):
            return False
    return True


def gelu_erf_float64(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _attr(case, "approximate", "none") == "none" and float32_rounding_of_float64(case, feeds, got, exp)


def gelu_tanh_float64(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _attr(case, "approximate", "none") == "tanh" and float32_rounding_of_float64(case, feeds, got, exp)


def softmax_axis_not_last(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Versions before 13 coerce the input to 2-D at ``axis``; that equals a softmax along
    ``axis`` only when ``axis`` is the last axis."""
    x = _x(case)
    if case.opset >= 13 or x.ndim == 0:
        return False
    return _attr(case, "axis", 1) % x.ndim != x.ndim - 1


def integer_result_widened(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """An integer result returned in a wider integer type with the same values."""
    return all(
        g.dtype.kind in "iu" and e.dtype.kind in "iu" and g.dtype.itemsize < e.dtype.itemsize
        and np.array_equal(g.astype(e.dtype), e)
        for g, e in zip(got, exp)
    )


def squeeze_empty_axes(case: Case, feeds: dict, got: list, exp: list) -> bool:
    axes = _x(case, 1)
    return case.opset >= 13 and axes is not None and axes.size == 0


def conv_transpose_group_bias(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _attr(case, "group", 1) > 1 and _x(case, 2) is not None


def _transpose_natural(case: Case) -> tuple[list[int], list[int]]:
    """The unpadded output length of a ConvTranspose per axis, and the input lengths times strides."""
    x, w = _x(case), _x(case, 1)
    nd = x.ndim - 2
    kernel = _attr(case, "kernel_shape") or list(w.shape[2:])
    strides = _attr(case, "strides") or [1] * nd
    dil = _attr(case, "dilations") or [1] * nd
    op = _attr(case, "output_padding") or [0] * nd
    natural = [s * (n - 1) + p + (k - 1) * d + 1 for n, s, p, k, d in zip(x.shape[2:], strides, op, kernel, dil)]
    return natural, [n * s for n, s in zip(x.shape[2:], strides)]


def _transpose_totals(case: Case) -> list[int]:
    """total_padding per axis of a ConvTranspose with output_shape (the spec's equation)."""
    natural, _ = _transpose_natural(case)
    out = _attr(case, "output_shape")[-len(natural):]
    return [n - o for n, o in zip(natural, out)]


def conv_transpose_output_shape_reference(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """output_shape above the natural length without auto_pad: the reference adds the extra at the end."""
    if _attr(case, "output_shape") is None or _attr(case, "auto_pad", "NOTSET") != "NOTSET":
        return False
    return any(t < 0 for t in _transpose_totals(case))


def conv_transpose_output_shape_ort(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """onnxruntime puts a negative total padding (and an odd one without auto_pad) at the end,
    and clamps the negative padding of SAME_* (a kernel shorter than the stride) to zero."""
    auto_pad = _attr(case, "auto_pad", "NOTSET")
    if _attr(case, "output_shape") is None:
        natural, same = _transpose_natural(case)
        return auto_pad.startswith("SAME") and any(n < s for n, s in zip(natural, same))
    totals = _transpose_totals(case)
    return any(t < 0 or (auto_pad == "NOTSET" and t % 2) for t in totals)


def average_pool_1_pads(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """AveragePool-1 with padding (explicit or SAME_*): the padding is never counted."""
    return case.opset < 7 and (any(_attr(case, "pads", []) or []) or str(_attr(case, "auto_pad", "")).startswith("SAME"))


def _same_pads(case: Case) -> list[int]:
    x = _x(case)
    nd = x.ndim - 2
    kernel = _attr(case, "kernel_shape")
    strides = _attr(case, "strides") or [1] * nd
    dil = _attr(case, "dilations") or [1] * nd
    return [
        (math.ceil(n / s) - 1) * s + (k - 1) * d + 1 - n for n, s, k, d in zip(x.shape[2:], strides, kernel, dil)
    ]


def pool_same_dilated(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """SAME_* with a dilation: the spec's padding counts the dilated kernel."""
    return str(_attr(case, "auto_pad", "NOTSET")).startswith("SAME") and any(d > 1 for d in _attr(case, "dilations") or [])


def pool_valid_dilated(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """VALID with a dilation: "ceil((input_spatial_shape[i] - {kernelSpatialShape} + 1) /
    strides_spatial_shape[i])" with the dilated kernel."""
    return _attr(case, "auto_pad") == "VALID" and any(d > 1 for d in _attr(case, "dilations") or [])


def neg_inf_max(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """-inf in the input: onnxruntime's max starts from the lowest float, not -inf."""
    if not _floats_with(case, np.isneginf) or got[0].shape != exp[0].shape:
        return False
    g, e = _f64(got[0]), _f64(exp[0])
    lowest = float(np.finfo(got[0].dtype).min) if got[0].dtype.kind == "f" else -np.inf
    return bool((~_bad(got[0], exp[0]) | (np.isneginf(g) & (e == lowest))).all())


def normalized_set_empty(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """LayerNormalization over an empty set of values: the statistics follow ReduceMean of an
    empty set (0, onnxrt's and onnxruntime's value), the reference gets NaN."""
    x = _x(case)
    axis = _attr(case, "axis", -1) % max(x.ndim, 1)
    return math.prod(x.shape[axis:]) == 0 and len(got) > 1 and all(np.isnan(_f64(e)).all() for e in exp[1:])


def quantize_16bit_division(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """QuantizeLinear 19-22 of a 16-bit float: the reference divides in that type, onnxrt in
    float32 (the precision of the division is set by the spec only from 23)."""
    x = _x(case)
    if case.opset >= 23 or x.dtype.itemsize != 2 or not is_float(x.dtype):
        return False
    g, e = got[0], exp[0]
    if g.dtype.kind not in "iu":
        return not _bad(g, e).any() or bool(np.allclose(_f64(g), _f64(e), rtol=0.25))
    return g.shape == e.shape and bool(np.all(np.abs(g.astype(np.int64) - e.astype(np.int64)) <= 1))


def resize_fractional_length(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """align_corners / tf_crop_and_resize with scales (or sizes under a keep_aspect_ratio_policy,
    which turn into one scale): the spec's length_resized is in * scale (the conformance
    suite's reading, fractional when floor() or round() cut the output); onnxruntime divides
    by the integer output length."""
    if _attr(case, "coordinate_transformation_mode") not in ("align_corners", "tf_crop_and_resize"):
        return False
    if _attr(case, "keep_aspect_ratio_policy", "stretch") != "stretch":
        return True
    ins = _inputs(case)
    scales = ins[2] if case.opset >= 11 and len(ins) > 2 else (ins[1] if len(ins) > 1 else None)
    if scales is None or scales.size == 0:
        return False
    x = ins[0]
    axes = _attr(case, "axes") or list(range(x.ndim))
    return any(float(np.float32(x.shape[a]) * np.float32(s)) != math.floor(x.shape[a] * float(s)) for a, s in zip(axes, scales))


def integer_log_sum_exp(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Integer ReduceLogSumExp: onnxruntime sums exp(x - max) in the integer type (each term
    truncated), which can move the truncated result by one."""
    g, e = got[0], exp[0]
    return g.dtype.kind in "iu" and g.shape == e.shape and bool(np.all(np.abs(g.astype(np.int64) - e.astype(np.int64)) <= 1))


def hardmax_nan_rows(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Hardmax rows holding a NaN: which element is "the max" is the runtime's choice."""
    if got[0].shape != exp[0].shape:
        return False
    return not (_bad(got[0], exp[0]) & ~_softmax_rows(case, np.isnan)).any()


def _normalized_exactly(case: Case, x: np.ndarray, scale: np.ndarray, bias: np.ndarray) -> np.ndarray:
    """y = scale * (x - mean) / sqrt(var + epsilon) + B in float64, statistics per instance and
    channel (InstanceNormalization) or group of channels (GroupNormalization; scale and B per
    group at 18, per channel from 21)."""
    n, c = x.shape[:2]
    groups = _attr(case, "num_groups", c) if case.op == "GroupNormalization" else c
    eps = _attr(case, "epsilon", 1e-5)
    xg = x.reshape(n, groups, -1)
    norm = ((xg - xg.mean(axis=2, keepdims=True)) / np.sqrt(xg.var(axis=2, keepdims=True) + eps)).reshape(x.shape)
    per_group = case.op == "GroupNormalization" and case.opset < 21
    if per_group:
        scale, bias = np.repeat(scale, c // groups), np.repeat(bias, c // groups)
    shape = (1, -1) + (1,) * (x.ndim - 2)
    return scale.reshape(shape) * norm + bias.reshape(shape)


def instance_norm_closer_to_formula(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """InstanceNormalization where onnxrt stays within a rounding of the spec's formula
    evaluated in float64 and the oracle does not: the reference computes 16-bit statistics in
    16 bits (cancellation in the variance), onnxruntime folds the statistics into
    x * a + (B - mean * a), which cancels when a is large (a tiny variance)."""
    x, scale, bias = (_f64(_x(case, i)) for i in range(3))
    if not all(np.isfinite(v).all() for v in (x, scale, bias)) or got[0].shape != exp[0].shape:
        return False
    exact = _normalized_exactly(case, x, scale, bias)
    dt = _x(case).dtype
    tol = 8 * float(ml_dtypes.finfo(dt).eps) * np.maximum(1.0, np.abs(exact))
    g, e = _f64(got[0]), _f64(exp[0])
    bad = _bad(got[0], exp[0])
    return bool((np.abs(g - exact) <= tol)[bad].all() and (~(np.abs(e - exact) <= tol))[bad].all())


def clip_type_limits(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Clip 11+ with an omitted bound and infinite values: the bound is the type's largest
    finite value (the spec), the reference leaves infinities."""
    ins = _inputs(case)
    omitted = len(ins) < 3 or ins[1] is None or ins[2] is None
    if case.opset < 11 or not omitted or not _floats_with(case, np.isinf) or got[0].shape != exp[0].shape:
        return False
    g, e = _f64(got[0]), _f64(exp[0])
    return bool((~_bad(got[0], exp[0]) | (np.isfinite(g) & np.isinf(e))).all())


def inf_becomes_nan(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """An infinite input: where onnxrt has the infinity the formula gives (a mean of -inf is
    -inf), the oracle has NaN (a one-pass variance, inf - inf)."""
    if not _floats_with(case, np.isinf) or not _same_shapes(got, exp):
        return False
    for g, e in zip(got, exp):
        if is_float(g.dtype) and ((_bad(g, e)) & ~(np.isinf(_f64(g)) & np.isnan(_f64(e)))).any():
            return False
    return True


def flat_indices_across_images(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """MaxPool Indices: the values agree, the indices differ where the reference does not
    flatten over N x C x D1 x ... (several images or channels, or three spatial axes; the
    Indices of onnxruntime are compared in every case)."""
    x = _x(case)
    many = x.shape[0] * x.shape[1] > 1 or x.ndim > 4
    return len(got) == 2 and many and not _bad(got[0], exp[0]).any()


def nonfinite_spreads(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """An infinity or NaN in the input; the oracle has NaN where onnxrt has a number (a running
    sum over channels carries inf - inf or NaN into neighbours the window does not reach)."""
    if not _floats_with(case, lambda a: ~np.isfinite(a)) or not _same_shapes(got, exp):
        return False
    return not (_bad(got[0], exp[0]) & ~np.isnan(_f64(exp[0]))).any()


def bool_to_string(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _x(case).dtype == np.bool_ and got[0].dtype == object


def explicit_pads(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """MaxPool with explicit pads: the reference reads them as (begin, end) pairs per axis and
    mostly fails on them; the shapes it returns (an empty batch) are wrong."""
    return _attr(case, "auto_pad", "NOTSET") == "NOTSET" and any(_attr(case, "pads") or [])


def nearest_neighbour_choice(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Resize nearest where the oracle picked another input value: the source coordinate lands
    on an integer or a half in onnxrt's (and onnxruntime's) float32 arithmetic and just beside
    it in the reference's float64 arithmetic on the float32 scale, so floor/ceil/round differ."""
    if _attr(case, "mode", "nearest") != "nearest" or got[0].shape != exp[0].shape:
        return False
    x = _f64(_x(case))
    bad = _bad(got[0], exp[0])
    return bool(np.isin(_f64(exp[0])[bad], x).all())


def nan_in_plane(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Global max over planes holding a NaN: differences only in those (n, c) planes."""
    x = _f64(_x(case))
    g = got[0]
    if g.shape != exp[0].shape:
        return False
    planes = np.isnan(x).reshape(x.shape[0], x.shape[1], -1).any(axis=2).reshape(g.shape)
    return not (_bad(g, exp[0]) & ~planes).any()


def resize_antialias_integer(case: Case, feeds: dict, got: list, exp: list, limit: int) -> bool:
    """Integer Resize with antialias: onnxrt truncates the filtered value like every other
    integer Resize; the oracles round (onnxruntime's int8 antialias path is off further)."""
    g, e = got[0], exp[0]
    if not _attr(case, "antialias", 0) or g.dtype.kind not in "iu" or g.shape != e.shape:
        return False
    return bool(np.all(np.abs(g.astype(np.int64) - e.astype(np.int64)) <= limit))


def string_to_bool(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _x(case).dtype == object and got[0].dtype == np.bool_


def fnuz_infinity_before_23(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Cast 19-22 of an infinity to E4M3FNUZ/E5M2FNUZ: NaN in the spec's table; the reference
    saturates."""
    if case.opset >= 23 or not _floats_with(case, np.isinf) or got[0].dtype not in F8 or got[0].shape != exp[0].shape:
        return False
    x = _f64(_x(case))
    return not (_bad(got[0], exp[0]) & ~np.isinf(x)).any()


def valid_ceil_mode(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _attr(case, "auto_pad") == "VALID" and _attr(case, "ceil_mode", 0) == 1


def empty_windows(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Differences only in windows that read no input value (a dilated kernel over padding):
    onnxrt gives the empty max -inf (ReduceMax's empty set) and the empty average 0
    (onnxruntime's); the reference gives NaN, onnxruntime's max the lowest float."""
    x = _x(case)
    if _attr(case, "auto_pad", "NOTSET") not in ("NOTSET", "VALID") or got[0].shape != exp[0].shape:
        return False
    nd = x.ndim - 2
    kernel = _attr(case, "kernel_shape")
    strides = _attr(case, "strides") or [1] * nd
    dil = _attr(case, "dilations") or [1] * nd
    pads = (_attr(case, "pads") or [0] * (2 * nd)) if _attr(case, "auto_pad", "NOTSET") == "NOTSET" else [0] * (2 * nd)
    empty = np.zeros(got[0].shape[2:], bool)
    for i in range(nd):
        o = np.arange(got[0].shape[2 + i])[:, None] * strides[i] - pads[i] + np.arange(kernel[i])[None, :] * dil[i]
        none = ~((o >= 0) & (o < x.shape[2 + i])).any(axis=1)
        shape = [1] * nd
        shape[i] = -1
        empty |= none.reshape(shape)
    return bool(empty.any()) and not (_bad(got[0], exp[0]) & ~empty).any()


def roi_crops(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """tf_crop_and_resize whose roi is not the whole axis: onnxruntime resizes the whole axis
    (the roi ignored) where the output is longer than one value."""
    if _attr(case, "coordinate_transformation_mode") != "tf_crop_and_resize":
        return False
    roi = _x(case, 1)
    if roi is None or roi.size == 0:
        return False
    n = roi.size // 2
    return bool((_f64(roi[:n]) != 0).any() or (_f64(roi[n:]) != 1).any())


def unique_first_occurrence(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _attr(case, "sorted", 1) == 0


def pool_same_negative_pad(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """SAME_* whose padding formula goes negative (stride above the kernel): no padding."""
    return str(_attr(case, "auto_pad", "NOTSET")).startswith("SAME") and any(p < 0 for p in _same_pads(case))


def not_2d_image(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _x(case).ndim != 4


def same_lower(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _attr(case, "auto_pad") == "SAME_LOWER"


def window_past_end(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """ceil_mode=1 whose last window starts inside the input and runs past its end (and pads)."""
    return _attr(case, "ceil_mode", 0) == 1


def slice_backward_start_below(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """A negative step whose start is below -dim (it clamps to 0, the first element)."""
    ins = _inputs(case)
    if case.opset < 10 or len(ins) < 5 or ins[4] is None:
        return False
    x, starts, steps = ins[0], ins[1], ins[4]
    axes = ins[3] if ins[3] is not None else np.arange(len(starts))
    dims = np.array([x.shape[a] for a in axes])
    return bool(((steps < 0) & (starts < -dims)).any())


def pytorch_half_pixel_to_one(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """pytorch_half_pixel maps an output of length 1 to coordinate 0 (the spec's formula)."""
    if _attr(case, "coordinate_transformation_mode") != "pytorch_half_pixel":
        return False
    x = _x(case)
    return any(o == 1 and i != 1 for o, i in zip(got[0].shape, x.shape))


def several_channels(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _x(case).shape[1] > 1


def p_is_1(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _attr(case, "p", 2) == 1


def batch_norm_9(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return 9 <= case.opset < 14


def _layer_normalized_exactly(case: Case) -> list[np.ndarray]:
    """Y, Mean and InvStdDev of LayerNormalization in float64."""
    ins = _inputs(case)
    x = _f64(ins[0])
    axis = _attr(case, "axis", -1) % x.ndim
    axes = tuple(range(axis, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    inv = 1 / np.sqrt(x.var(axis=axes, keepdims=True) + _attr(case, "epsilon", 1e-5))
    y = (x - mean) * inv * _f64(ins[1])
    if len(ins) > 2 and ins[2] is not None:
        y = y + _f64(ins[2])
    return [y, mean, inv]


def stats_in_input_type(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Mean and InvStdDev returned in X's type (the spec's U is the stash type, float32 by
    default); the reference computes the statistics in that type too, so where its Y or its
    statistics differ, onnxrt's must be within a rounding of the formula evaluated in float64."""
    x = _x(case)
    if len(got) < 2 or not _same_shapes(got, exp):
        return False
    if not all(e.dtype == x.dtype and g.dtype != x.dtype for g, e in zip(got[1:], exp[1:])):
        return False
    tol = 8 * float(ml_dtypes.finfo(x.dtype).eps) if x.dtype.itemsize < 4 else 1e-5
    with np.errstate(all="ignore"):
        for g, e, exact in zip(got, exp, _layer_normalized_exactly(case)):
            bad = ~np.isclose(_f64(g), _f64(e), rtol=tol, atol=tol, equal_nan=True)
            close = np.isclose(_f64(g), exact, rtol=tol, atol=tol, equal_nan=True)
            if not close[bad].all():
                return False
    return True


def resize_integer_rounding(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Integer Resize: the oracle rounds, onnxrt truncates like onnxruntime (at most one apart)."""
    g, e = got[0], exp[0]
    return g.dtype.kind in "iu" and g.shape == e.shape and bool(np.all(np.abs(g.astype(np.int64) - e.astype(np.int64)) <= 1))


def nonfinite_quantized(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Differences only where x / y_scale is infinite or NaN (x infinite, or a zero scale),
    or, for a 16-bit float x before 23, one apart (the reference divides in 16 bits)."""
    x, scale = _f64(_x(case)), _f64(_x(case, 1))
    g, e = got[0], exp[0]
    if g.shape != e.shape or x.shape != g.shape:
        return False
    off = np.zeros(g.shape, bool)
    if case.opset < 23 and _x(case).dtype.itemsize == 2 and g.dtype.kind in "iu":
        off = np.abs(g.astype(np.int64) - e.astype(np.int64)) <= 1
    if scale.size == 1:
        zero = np.broadcast_to(scale.reshape(()) == 0, x.shape)
    elif scale.ndim == 1:
        axis = _attr(case, "axis", 1) % x.ndim
        zero = np.broadcast_to((scale == 0).reshape([-1 if a == axis else 1 for a in range(x.ndim)]), x.shape)
    else:
        return False
    return not ((g != e) & np.isfinite(x) & ~zero & ~off).any()


def dropout_mask_before_12(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Only the mask of Dropout 7 and 10 differs (the output is the input in inference)."""
    return case.opset < 12 and len(got) == 2 and not _bad(got[0], exp[0]).any()


def result_as_float64(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return all(
        e.dtype == np.float64 and g.dtype != np.float64 and np.allclose(_f64(g), _f64(e), rtol=1e-2, atol=1e-2)
        for g, e in zip(got, exp)
    )


def one_hot_value_recomputed(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """The oracle's on/off values are recomputed (off + (on - off) * hot): off by a rounding."""
    values = _f64(_x(case, 2))
    g, e = got[0], exp[0]
    if not is_float(g.dtype) or g.shape != e.shape or not np.isin(_f64(g), values).all():
        return False
    eps = 4 * float(ml_dtypes.finfo(g.dtype).eps)
    return bool(np.allclose(_f64(g), _f64(e), rtol=eps, atol=eps))


def strings(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _x(case).dtype == object


def gather_strings_blocks(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """onnxruntime's Gather of strings copies only the first string of each gathered block."""
    x = _x(case)
    axis = _attr(case, "axis", 0) % x.ndim
    return x.dtype == object and math.prod(x.shape[axis + 1:]) > 1


def shape_bounds_below_rank(case: Case, feeds: dict, got: list, exp: list) -> bool:
    r = _x(case).ndim
    return any(v is not None and v < -r for v in (_attr(case, "start"), _attr(case, "end")))


def unsqueeze_unsorted_axes(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """Unsqueeze 1/11 axes not in increasing order once read against the output rank (the
    reference inserts them one by one, negative ones against the rank so far)."""
    axes = _attr(case, "axes")
    return case.opset < 13 and axes is not None and (list(axes) != sorted(axes) or any(a < 0 for a in axes))


def empty_mean(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """A mean over an empty set: onnxrt returns 0 like onnxruntime, the reference 0 / 0 (NaN,
    or whatever a NaN becomes in an integer type)."""
    g, e = got[0], exp[0]
    return _x(case).size == 0 and g.shape == e.shape and not _f64(g).any()


def scalar_input(case: Case, feeds: dict, got: list, exp: list) -> bool:
    return _x(case).ndim == 0


def _softmax_rows(case: Case, test: Any) -> np.ndarray:
    """Positions whose softmax row (the coerced 2-D row before 13, the axis from 13) holds an
    element for which ``test`` holds."""
    x = _f64(_x(case))
    axis = _attr(case, "axis", 1 if case.opset < 13 else -1) % x.ndim
    if case.opset < 13:
        rows = test(x.reshape(math.prod(x.shape[:axis]), -1)).any(axis=1, keepdims=True)
        return np.broadcast_to(rows, (rows.shape[0], math.prod(x.shape[axis:]))).reshape(x.shape)
    return np.broadcast_to(test(x).any(axis=axis, keepdims=True), x.shape)


def log_softmax_nonfinite_float64(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """onnxruntime's double LogSoftmax on a row holding inf or NaN: -inf or large finite values
    where the function body (X - max, exp, sum, log) gives NaN for the whole row."""
    if _x(case).dtype != np.float64 or got[0].shape != exp[0].shape:
        return False
    return not (_bad(got[0], exp[0]) & ~_softmax_rows(case, lambda a: ~np.isfinite(a))).any()


def constant_group(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """A group of equal values (zero variance): onnxrt gives 0 as the spec's formula, onnxruntime NaN."""
    if got[0].shape != exp[0].shape:
        return False
    g, e = _f64(got[0]), _f64(exp[0])
    bad = _bad(got[0], exp[0])
    return bool((~bad | ((g == 0) & np.isnan(e))).all())


def nonfinite_scale(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """An infinite scale or bias: onnxruntime's refactored formula makes inf - inf (NaN)."""
    params = [_x(case, 1), _x(case, 2)]
    if not any(p is not None and not np.isfinite(_f64(p)).all() for p in params) or got[0].shape != exp[0].shape:
        return False
    g, e = _f64(got[0]), _f64(exp[0])
    bad = _bad(got[0], exp[0])
    return bool((~bad | (np.isinf(g) & np.isnan(e))).all())


def slice_backward_to_int_max(case: Case, feeds: dict, got: list, exp: list) -> bool:
    """A negative step whose end is the largest value of its index type."""
    ins = _inputs(case)
    if case.opset < 10 or len(ins) < 5 or ins[4] is None:
        return False
    ends, steps = ins[2], ins[4]
    top = np.iinfo(ends.dtype).max
    return bool(((steps < 0) & (ends == top)).any())


DEVIATIONS: list[Deviation] = [
    # onnx.reference
    Deviation("Erf", "reference", float32_rounding_of_float64, "test_reference_erf_float64_in_float32"),
    Deviation("Gelu", "reference", gelu_erf_float64, "test_reference_erf_float64_in_float32"),
    Deviation("Gelu", "reference", gelu_tanh_float64, "test_gelu_tanh_float64_constants"),
    Deviation("HardSwish", "reference", float32_rounding_of_float64, "test_reference_hardswish_float64_alpha"),
    Deviation("Softmax", "reference", softmax_axis_not_last, "test_reference_softmax_family_before_13"),
    Deviation("LogSoftmax", "reference", softmax_axis_not_last, "test_reference_softmax_family_before_13"),
    Deviation("Hardmax", "reference", softmax_axis_not_last, "test_reference_softmax_family_before_13"),
    Deviation("ReduceSumSquare", "reference", integer_result_widened, "test_reference_reduce_sum_square_widens_integers"),
    Deviation("ReduceMean", "reference", empty_mean, "test_reduce_mean_of_empty_set"),
    Deviation("Squeeze", "reference", squeeze_empty_axes, "test_squeeze_with_empty_axes"),
    Deviation("Unsqueeze", "reference", unsqueeze_unsorted_axes, "test_reference_unsqueeze_1_unsorted_axes"),
    Deviation("Shape", "reference", shape_bounds_below_rank, "test_reference_shape_end_below_rank"),
    Deviation("Trilu", "reference", strings, "test_reference_zero_of_strings"),
    Deviation("Pad", "reference", strings, "test_reference_zero_of_strings"),
    Deviation("PRelu", "reference", nan_involved, "test_reference_prelu_nan_slope"),
    Deviation("PRelu", "reference", nonfinite_spreads, "test_reference_prelu_nan_slope"),
    Deviation("Clip", "reference", clip_type_limits, "test_reference_clip_omitted_bounds"),
    Deviation("AveragePool", "reference", nan_involved, "test_reference_average_pool_drops_nan"),
    Deviation("InstanceNormalization", "reference", instance_norm_closer_to_formula, "test_reference_instance_norm_float16_statistics"),
    Deviation("Conv", "reference", lambda c, f, g, e: any(d > 1 for d in _attr(c, "dilations") or []) and nonfinite_spreads(c, f, g, e), "test_reference_conv_dilation_holes"),
    Deviation("AveragePool", "reference", window_past_end, "test_reference_lp_pool_ceil_mode"),
    Deviation("LRN", "reference", float32_rounding_of_float64, "test_reference_lrn"),
    Deviation("OneHot", "reference", one_hot_value_recomputed, "test_reference_one_hot_recomputes_values"),
    Deviation("Det", "reference", result_as_float64, "test_reference_det_float64"),
    Deviation("ConvTranspose", "reference", conv_transpose_group_bias, "test_reference_conv_transpose_group_bias"),
    Deviation("ConvTranspose", "reference", conv_transpose_output_shape_reference, "test_conv_transpose_output_shape_above_natural"),
    Deviation("AveragePool", "reference", average_pool_1_pads, "test_reference_average_pool_1_counts_pads"),
    Deviation("MaxPool", "reference", pool_same_dilated, "test_pool_same_dilated"),
    Deviation("AveragePool", "reference", pool_same_dilated, "test_pool_same_dilated"),
    Deviation("LpPool", "reference", pool_same_dilated, "test_pool_same_dilated"),
    Deviation("MaxPool", "reference", pool_same_negative_pad, "test_reference_pool_same_negative_pad"),
    Deviation("AveragePool", "reference", pool_same_negative_pad, "test_reference_pool_same_negative_pad"),
    Deviation("LpPool", "reference", pool_same_negative_pad, "test_reference_pool_same_negative_pad"),
    Deviation("MaxPool", "reference", nan_involved, "test_max_with_nan"),
    Deviation("LpPool", "reference", nan_involved, "test_reference_lp_pool_drops_nan"),
    Deviation("ScatterElements", "reference", nan_involved, "test_max_with_nan"),
    Deviation("GlobalMaxPool", "reference", not_2d_image, "test_reference_global_max_pool_not_2d"),
    Deviation("GlobalMaxPool", "reference", nan_involved, "test_max_with_nan"),
    Deviation("MaxPool", "reference", flat_indices_across_images, "test_reference_max_pool_indices_across_images"),
    Deviation("MaxPool", "reference", same_lower, "test_reference_max_pool_same_lower"),
    Deviation("LpPool", "reference", pool_valid_dilated, "test_reference_lp_pool_valid_dilated"),
    Deviation("AveragePool", "reference", pool_valid_dilated, "test_reference_lp_pool_valid_dilated"),
    Deviation("MaxPool", "reference", explicit_pads, "test_reference_max_pool_asymmetric_pads"),
    Deviation("Resize", "reference", nearest_neighbour_choice, "test_reference_resize_nearest_float64_coordinates"),
    Deviation("Cast", "reference", bool_to_string, "test_cast_bool_to_string"),
    Deviation("Cast", "reference", string_to_bool, "test_cast_bool_to_string"),
    Deviation("Cast", "reference", fnuz_infinity_before_23, "test_reference_cast_fnuz_infinity"),
    Deviation("MaxPool", "reference", valid_ceil_mode, "test_reference_max_pool_valid_ceil_mode"),
    Deviation("MaxPool", "reference", empty_windows, "test_pool_windows_wholly_in_padding"),
    Deviation("AveragePool", "reference", empty_windows, "test_pool_windows_wholly_in_padding"),
    Deviation("GroupNormalization", "reference", instance_norm_closer_to_formula, "test_reference_instance_norm_float16_statistics"),
    Deviation("ReduceLogSumExp", "reference", inf_becomes_nan, "test_reference_log_sum_exp_infinity"),
    Deviation("OneHot", "reference", nan_involved, "test_reference_one_hot_recomputes_values"),
    Deviation("OneHot", "reference", nonfinite_spreads, "test_reference_one_hot_recomputes_values"),
    Deviation("Unique", "reference", unique_first_occurrence, "test_reference_unique_unsorted"),
    Deviation("LpPool", "reference", window_past_end, "test_reference_lp_pool_ceil_mode"),
    Deviation("Slice", "reference", slice_backward_start_below, "test_reference_slice_backward_start_below"),
    Deviation("Resize", "reference", pytorch_half_pixel_to_one, "test_reference_resize_pytorch_half_pixel_to_one"),
    Deviation("LRN", "reference", several_channels, "test_reference_lrn"),
    Deviation("LpNormalization", "reference", p_is_1, "test_reference_lp_normalization_l1"),
    Deviation("BatchNormalization", "reference", batch_norm_9, "test_reference_batch_normalization_9"),
    Deviation("LayerNormalization", "reference", stats_in_input_type, "test_reference_layer_normalization_stats_type"),
    Deviation("Resize", "reference", resize_integer_rounding, "test_resize_integer_truncates"),
    Deviation("QuantizeLinear", "reference", nonfinite_quantized, "test_reference_quantize_infinity"),
    Deviation("QuantizeLinear", "reference", quantize_16bit_division, "test_reference_quantize_16bit_division"),
    Deviation("QuantizeLinear", "reference", nonfinite_quantized, "test_reference_quantize_16bit_division"),
    Deviation("LayerNormalization", "reference", normalized_set_empty, "test_reduce_mean_of_empty_set"),
    Deviation("Dropout", "reference", dropout_mask_before_12, "test_dropout_mask_before_12"),
    # onnxruntime
    Deviation("NonZero", "onnxruntime", scalar_input, "test_onnxruntime_nonzero_of_scalar"),
    Deviation("Shrink", "onnxruntime", float32_rounding_of_float64, "test_onnxruntime_shrink_float64_in_float32"),
    Deviation("Gelu", "onnxruntime", gelu_tanh_float64, "test_gelu_tanh_float64_constants"),
    Deviation("LogSoftmax", "onnxruntime", log_softmax_nonfinite_float64, "test_onnxruntime_log_softmax_nonfinite_float64"),
    Deviation("MeanVarianceNormalization", "onnxruntime", constant_group, "test_onnxruntime_mvn_constant_group"),
    Deviation("InstanceNormalization", "onnxruntime", nonfinite_scale, "test_onnxruntime_instance_norm_infinite_scale"),
    Deviation("InstanceNormalization", "onnxruntime", instance_norm_closer_to_formula, "test_onnxruntime_instance_norm_folding"),
    Deviation("BatchNormalization", "onnxruntime", nonfinite_scale, "test_onnxruntime_instance_norm_infinite_scale"),
    Deviation("GlobalMaxPool", "onnxruntime", nan_in_plane, "test_max_with_nan"),
    Deviation("MaxPool", "onnxruntime", empty_windows, "test_pool_windows_wholly_in_padding"),
    Deviation("Resize", "onnxruntime", lambda c, f, g, e: resize_antialias_integer(c, f, g, e, 1 if _x(c).dtype != np.int8 else 255), "test_resize_integer_truncates"),
    Deviation("Gather", "onnxruntime", gather_strings_blocks, "test_onnxruntime_gather_strings"),
    Deviation("ReduceLogSumExp", "onnxruntime", integer_log_sum_exp, "test_onnxruntime_integer_reduce_log_sum_exp"),
    Deviation("Hardmax", "onnxruntime", hardmax_nan_rows, "test_max_with_nan"),
    Deviation("Sign", "onnxruntime", nan_involved, "test_onnxruntime_sign_of_nan_float16"),
    Deviation("Clip", "onnxruntime", clip_type_limits, "test_reference_clip_omitted_bounds"),
    Deviation("LRN", "onnxruntime", nonfinite_spreads, "test_onnxruntime_lrn_nan_spreads"),
    Deviation("Resize", "onnxruntime", resize_integer_rounding, "test_resize_integer_truncates"),
    Deviation("LayerNormalization", "onnxruntime", inf_becomes_nan, "test_onnxruntime_layer_norm_infinity"),
    Deviation("MaxPool", "onnxruntime", pool_same_negative_pad, "test_reference_pool_same_negative_pad"),
    Deviation("AveragePool", "onnxruntime", pool_same_negative_pad, "test_reference_pool_same_negative_pad"),
    Deviation("LpPool", "onnxruntime", pool_same_negative_pad, "test_reference_pool_same_negative_pad"),
    Deviation("GlobalMaxPool", "onnxruntime", neg_inf_max, "test_onnxruntime_max_pool_minus_infinity"),
    Deviation("MaxPool", "onnxruntime", neg_inf_max, "test_onnxruntime_max_pool_minus_infinity"),
    Deviation("Slice", "onnxruntime", slice_backward_to_int_max, "test_onnxruntime_slice_backward_int_max"),
    Deviation("Resize", "onnxruntime", resize_fractional_length, "test_onnxruntime_resize_integer_length"),
    Deviation("Resize", "onnxruntime", roi_crops, "test_onnxruntime_resize_roi_ignored"),
    Deviation("ConvTranspose", "onnxruntime", conv_transpose_output_shape_ort, "test_conv_transpose_output_shape_above_natural"),
    Deviation("MaxPool", "onnxruntime", pool_same_dilated, "test_pool_same_dilated"),
    Deviation("AveragePool", "onnxruntime", pool_same_dilated, "test_pool_same_dilated"),
    Deviation("LpPool", "onnxruntime", pool_same_dilated, "test_pool_same_dilated"),
    Deviation("Dropout", "onnxruntime", dropout_mask_before_12, "test_dropout_mask_before_12"),
] + [
    Deviation(op, "onnxruntime", nan_involved, "test_max_with_nan")
    for op in ("MaxPool", "GlobalMaxPool", "ReduceMax", "ReduceMin", "ReduceLogSumExp", "ArgMax", "ArgMin", "ScatterND", "ScatterElements")
]
