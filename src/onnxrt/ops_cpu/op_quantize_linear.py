"""QuantizeLinear and DequantizeLinear (10, 13, 19, 21, 23, 24, 25, 28) and DynamicQuantizeLinear (11)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun
from ._quant import (
    INT_RANGES,
    compute_dtype,
    dtype_of,
    expand_param,
    is_quantized_float,
    is_quantized_integer,
    round_to,
    saturate_cast,
)

_F32 = np.dtype(np.float32)
#: the types DequantizeLinear produces (and the float precisions QuantizeLinear divides in)
_OUTPUT_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float16, ml_dtypes.bfloat16))


def _division_dtype(scale_dtype: np.dtype, precision: np.dtype | None, scale_precision: bool) -> np.dtype:
    """The precision of ``x / y_scale``: the ``precision`` attribute, else y_scale's type.

    Before version 23 the spec does not say; onnxruntime divides in float32 there, and so does
    onnxrt (``scale_precision=False``). An int32 or float8e8m0 scale (allowed from version 24)
    has no arithmetic of its own: the division then runs in float32 too.
    """
    if precision is not None:
        return precision
    if not scale_precision:
        return _F32
    return scale_dtype if scale_dtype in _OUTPUT_FLOATS else _F32


def quantize_linear(
    x: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray | None = None,
    axis: int = 1,
    block_size: int = 0,
    saturate: bool = True,
    output_dtype: np.dtype | None = None,
    precision: np.dtype | None = None,
    scale_precision: bool = True,
) -> np.ndarray:
    """``y = saturate(round(x / y_scale) + y_zero_point)`` per tensor, per axis or per block.

    The output type is ``output_dtype`` when given, else y_zero_point's type, else uint8.
    The division runs in the precision of ``precision`` (QuantizeLinear-23), else of y_scale's
    type (``scale_precision``, versions >= 23; float32 before); rounding is half to even and
    happens before the zero point is added. Integer targets clamp to their range (NaN, left
    undefined, becomes the lowest value as in onnxruntime); float 8 targets follow the Cast
    tables for ``saturate``; float 4/6 targets always clamp.
    """
    x = np.asarray(x)
    if x.ndim == 0:  # numpy turns 0-D intermediates into scalars, which the out= below refuse
        return quantize_linear(
            x.reshape(1), y_scale, y_zero_point, 0, block_size, saturate, output_dtype, precision, scale_precision
        ).reshape(())
    y_scale = np.asarray(y_scale)
    if y_zero_point is not None:
        y_zero_point = np.asarray(y_zero_point)
        if output_dtype is not None and y_zero_point.dtype != output_dtype:
            raise KernelError(
                f"y_zero_point has type {y_zero_point.dtype} but attribute 'output_dtype' asks for {output_dtype}."
            )
        if y_zero_point.shape != y_scale.shape and not (y_zero_point.size == 1 == y_scale.size):
            raise KernelError(
                f"y_zero_point has shape {list(y_zero_point.shape)}, expected the shape of y_scale "
                f"{list(y_scale.shape)}."
            )
        out_dt = y_zero_point.dtype
    else:
        out_dt = output_dtype if output_dtype is not None else np.dtype(np.uint8)
    integer = is_quantized_integer(out_dt)
    if not integer and not is_quantized_float(out_dt):
        raise KernelError(f"QuantizeLinear cannot produce element type {out_dt}.")
    prec = _division_dtype(y_scale.dtype, precision, scale_precision)
    cdt = compute_dtype(prec)

    scale = round_to(expand_param(y_scale, x.shape, axis, block_size, "y_scale").astype(cdt), prec)
    xc = round_to(x.astype(cdt, copy=False), prec)
    q = np.divide(xc, scale, out=None if xc is x else xc)
    q = round_to(q, prec)
    zp = None
    if y_zero_point is not None:
        zp = expand_param(y_zero_point, x.shape, axis, block_size, "y_zero_point").astype(cdt)
        if not zp.ndim and not zp:
            zp = None  # adding a zero is a pass over the tensor for nothing
    if integer:
        np.rint(q, out=q)
        if zp is not None:
            q += zp
        return saturate_cast(q, out_dt, rounded=True)
    if zp is not None:
        q += zp
    return saturate_cast(q, out_dt, saturate=saturate)


def dequantize_linear(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray | None = None,
    axis: int = 1,
    block_size: int = 0,
    output_dtype: np.dtype | None = None,
) -> np.ndarray:
    """``y = (x - x_zero_point) * x_scale`` per tensor, per axis or per block.

    The output type is ``output_dtype`` when given, else x_scale's type. DequantizeLinear-23
    says it "determines the precision of the multiplication"; onnxruntime multiplies in float32
    and rounds once to the output type, which onnxrt follows (it is the more accurate reading:
    ``x - x_zero_point`` is not rounded to a 16-bit float first). int32 inputs subtract in
    int64 so that the difference cannot wrap.
    """
    x = np.asarray(x)
    x_scale = np.asarray(x_scale)
    out_dt = output_dtype if output_dtype is not None else x_scale.dtype
    if out_dt not in _OUTPUT_FLOATS:
        raise KernelError(
            f"DequantizeLinear produces float, float16 or bfloat16, but the output type would be {out_dt} "
            f"(set attribute 'output_dtype' when x_scale is not one of them)."
        )
    if x_zero_point is not None:
        x_zero_point = np.asarray(x_zero_point)
        if x_zero_point.shape != x_scale.shape and not (x_zero_point.size == 1 == x_scale.size):
            raise KernelError(
                f"x_zero_point has shape {list(x_zero_point.shape)}, expected the shape of x_scale "
                f"{list(x_scale.shape)}."
            )
    if x.dtype.itemsize >= 4 and x.dtype in INT_RANGES:
        diff = x.astype(np.int64)
        if x_zero_point is not None:
            diff = diff - expand_param(x_zero_point, x.shape, axis, block_size, "x_zero_point").astype(np.int64)
        diff = diff.astype(_F32)
    else:
        # every value of an 8/16-bit integer or float 8/6/4 type, and their differences, are exact in float32
        diff = x.astype(_F32)
        if x_zero_point is not None:
            zp = expand_param(x_zero_point, x.shape, axis, block_size, "x_zero_point").astype(_F32)
            if zp.ndim or zp:
                diff -= zp
    diff *= expand_param(x_scale, x.shape, axis, block_size, "x_scale").astype(_F32)
    return diff.astype(out_dt, copy=False)


def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """DynamicQuantizeLinear-11: uint8 quantization of float32 ``x`` with scale and zero point from its range.

    ``y_scale = (max(0, max(x)) - min(0, min(x))) / 255``, ``y_zero_point = round(clip(-min/scale,
    0, 255))`` (half to even), ``y = saturate(round(x / y_scale) + y_zero_point)``. The spec
    divides by zero when x holds only zeros (or nothing); onnxruntime then uses scale 1 and zero
    point 0, and so does onnxrt.
    """
    x = np.asarray(x)
    if x.size:
        lo = min(float(x.min()), 0.0)
        hi = max(float(x.max()), 0.0)
    else:
        lo = hi = 0.0
    lo32, hi32 = np.float32(lo), np.float32(hi)
    scale = np.float32((hi32 - lo32) / np.float32(255))
    if scale == 0:
        scale = np.float32(1)
    zp = np.float32(np.rint(np.clip(np.float32(0) - lo32 / scale, 0, 255)))
    q = np.divide(x, scale, dtype=np.float32)
    np.rint(q, out=q)
    if zp:
        q += zp
    y = saturate_cast(q, np.dtype(np.uint8), rounded=True)
    return y, np.asarray(scale, dtype=np.float32), np.asarray(zp, dtype=np.uint8)


def _quant_attributes(op: OpRun, allowed: frozenset[np.dtype] | None) -> None:
    """Read axis/block_size/saturate/output_dtype/precision once, with defaults for versions lacking them."""
    axis = getattr(op, "axis", None)
    op._axis = 1 if axis is None else int(axis)
    op._block_size = int(getattr(op, "block_size", None) or 0)
    if op._block_size < 0:
        raise InvalidAttributeError(f"{op.node_label()}: attribute 'block_size' is {op._block_size}, expected >= 0.")
    saturate = getattr(op, "saturate", None)
    op._saturate = True if saturate is None else bool(saturate)
    out = getattr(op, "output_dtype", 0) or 0
    op._output_dtype = dtype_of(out, "output_dtype") if out else None
    if op._output_dtype is not None and allowed is not None and op._output_dtype not in allowed:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'output_dtype' is {out} ({op._output_dtype}), which this operator "
            f"cannot produce."
        )
    prec = getattr(op, "precision", 0) or 0
    op._precision = dtype_of(prec, "precision") if prec else None
    if op._precision is not None and op._precision not in _OUTPUT_FLOATS and op._precision != np.float64:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'precision' is {prec} ({op._precision}), expected a float type."
        )


@register("QuantizeLinear", versions=(10, 13, 19, 21, 23, 24, 25, 28))
class QuantizeLinear(OpRun):
    """QuantizeLinear: 10 (per tensor, int8/uint8), 13 (axis), 19 (float 8, saturate, 16-bit scales),
    21 (blocked, int16/uint16/int4/uint4, output_dtype), 23 (float4e2m1, precision), 24 (float8e8m0
    scales), 25 (int2/uint2), 28 (float6e2m3/float6e3m2).
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        _quant_attributes(self, None)
        self._scale_precision = (self.since_version or 28) >= 23
        if self._output_dtype is not None and not (
            is_quantized_integer(self._output_dtype) or is_quantized_float(self._output_dtype)
        ):
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'output_dtype' is {self._output_dtype}, expected a quantized "
                f"integer or float 8/6/4 type."
            )

    def _run(self, x, y_scale, y_zero_point=None, attributes=None, verbose=0, fLOG=None):
        return (
            quantize_linear(
                x,
                y_scale,
                y_zero_point,
                axis=self._axis,
                block_size=self._block_size,
                saturate=self._saturate,
                output_dtype=self._output_dtype,
                precision=self._precision,
                scale_precision=self._scale_precision,
            ),
        )


@register("DequantizeLinear", versions=(10, 13, 19, 21, 23, 24, 25, 28))
class DequantizeLinear(OpRun):
    """DequantizeLinear: 10 (per tensor), 13 (axis), 19 (float 8, 16-bit scales), 21 (blocked,
    16-bit and 4-bit integers), 23 (float4e2m1, output_dtype), 24 (float8e8m0 scales), 25 (int2/uint2),
    28 (float6 types).
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        _quant_attributes(self, _OUTPUT_FLOATS)

    def _run(self, x, x_scale, x_zero_point=None, attributes=None, verbose=0, fLOG=None):
        return (
            dequantize_linear(
                x,
                x_scale,
                x_zero_point,
                axis=self._axis,
                block_size=self._block_size,
                output_dtype=self._output_dtype,
            ),
        )


@register("DynamicQuantizeLinear", versions=(11,))
class DynamicQuantizeLinear(OpRun):
    """DynamicQuantizeLinear-11: float32 to uint8 with the scale and zero point computed from the data."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return dynamic_quantize_linear(x)
