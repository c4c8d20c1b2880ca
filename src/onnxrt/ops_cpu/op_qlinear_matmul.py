"""QLinearMatMul (10, 21): a matrix product of quantized tensors, requantized to the output's scale and zero point."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun
from ._quant import is_quantized_integer, saturate_cast

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)

#: |a - a_zero_point| and |b - b_zero_point| are at most 255 for 8-bit types: a float32 sum of
#: this many products stays below 2**24, where every integer is exact
_EXACT_K = 2**24 // (255 * 255)


def _param(value: np.ndarray, name: str, axis_len: int, per: str) -> np.ndarray:
    """A scale or zero point as float32, shaped to broadcast against its matrix.

    A scalar (or one value) is per tensor; a 1-D tensor of length ``axis_len`` is per row
    (``per="row"``, shape [M, 1]) or per column (``per="col"``, shape [1, N]); a tensor of
    higher rank is used as given ([..., M, 1] or [..., 1, N]).
    """
    value = np.asarray(value)
    out = value.astype(_F32)
    if value.size == 1:
        return out.reshape(())
    if value.ndim == 1:
        if value.shape[0] != axis_len:
            raise KernelError(
                f"{name} has {value.shape[0]} values, expected one or {axis_len} (one per {'row' if per == 'row' else 'column'})."
            )
        return out.reshape((-1, 1) if per == "row" else (1, -1))
    return out


def qlinear_matmul(
    a: np.ndarray,
    a_scale: np.ndarray,
    a_zero_point: np.ndarray,
    b: np.ndarray,
    b_scale: np.ndarray,
    b_zero_point: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray,
) -> np.ndarray:
    """``y = saturate(round((a - a_zp) @ (b - b_zp) * a_scale * b_scale / y_scale) + y_zp)``.

    Products follow numpy.matmul broadcasting. Integer inputs accumulate exactly, never
    wrapping: float32 BLAS products over blocks of K short enough for the sums to stay below
    2**24, the blocks added in float64. As in onnxruntime, the
    requantization runs in float32: the accumulator times the multiplier
    ``a_scale * b_scale / y_scale``, rounded half to even. Float 8 inputs and outputs (version
    21) compute in float32 and convert with saturation.
    """
    a = np.asarray(a)
    b = np.asarray(b)
    y_zero_point = np.asarray(y_zero_point)
    if a.ndim == 0 or b.ndim == 0:
        raise KernelError(f"QLinearMatMul needs inputs of rank >= 1, got ranks {a.ndim} and {b.ndim}.")
    m = a.shape[-2] if a.ndim >= 2 else 1
    n = b.shape[-1] if b.ndim >= 2 else 1
    k = a.shape[-1]
    if b.shape[-2 if b.ndim >= 2 else 0] != k:
        raise KernelError(f"a of shape {list(a.shape)} and b of shape {list(b.shape)} cannot be multiplied.")
    sa = _param(a_scale, "a_scale", m, "row")
    za = _param(a_zero_point, "a_zero_point", m, "row")
    sb = _param(b_scale, "b_scale", n, "col")
    zb = _param(b_zero_point, "b_zero_point", n, "col")
    sy = _param(y_scale, "y_scale", n, "col")
    zy = _param(y_zero_point, "y_zero_point", n, "col")

    integer_in = is_quantized_integer(a.dtype) and is_quantized_integer(b.dtype)
    da = a.astype(_F32)
    if za.ndim or za:
        da -= za
    db = b.astype(_F32)
    if zb.ndim or zb:
        db -= zb
    if not integer_in or k <= _EXACT_K:
        acc = np.matmul(da, db)
    else:
        # float32 BLAS is exact on blocks of _EXACT_K products; the block sums add up in float64
        def block(k0: int) -> np.ndarray:
            rows = slice(k0, k0 + _EXACT_K)
            return np.matmul(da[..., rows], db[..., rows, :] if db.ndim >= 2 else db[rows])

        acc = block(0).astype(_F64)
        for k0 in range(_EXACT_K, k, _EXACT_K):
            acc += block(k0)
        acc = acc.astype(_F32)
    multiplier = (sa * sb) / sy
    in_place = np.broadcast_shapes(acc.shape, np.shape(multiplier)) == acc.shape
    y = np.multiply(acc, multiplier, out=acc if in_place else None)
    out_dt = y_zero_point.dtype
    if is_quantized_integer(out_dt):
        np.rint(y, out=y)
        if zy.ndim or zy:
            y += zy
        return saturate_cast(y, out_dt, rounded=True)
    if zy.ndim or zy:
        y += zy
    return saturate_cast(y, out_dt, saturate=True)


@register("QLinearMatMul", versions=(10, 21))
class QLinearMatMul(OpRun):
    """QLinearMatMul: 10 (int8/uint8, float scales), 21 (float 8 inputs, float16/bfloat16 scales)."""

    def _run(self, a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point, attributes=None, verbose=0, fLOG=None):
        return (qlinear_matmul(a, a_scale, a_zero_point, b, b_scale, b_zero_point, y_scale, y_zero_point),)
