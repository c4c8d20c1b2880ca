"""Saturating rounds and casts to the quantized element types, and per-tensor/per-axis/blocked parameter expansion."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..dtypes import np_dtype
from ..errors import InvalidAttributeError, KernelError
from ._minifloat import INT_FORMATS, encode_float, encode_int

#: integer quantized types -> (lowest, highest) representable value
INT_RANGES: dict[np.dtype, tuple[int, int]] = {
    np.dtype(t): (int(ml_dtypes.iinfo(t).min), int(ml_dtypes.iinfo(t).max))
    for t in (
        np.int8,
        np.uint8,
        np.int16,
        np.uint16,
        np.int32,
        np.uint32,
        ml_dtypes.int4,
        ml_dtypes.uint4,
        ml_dtypes.int2,
        ml_dtypes.uint2,
    )
}

#: float 8 types whose out-of-range conversion depends on ``saturate`` (the Cast tables)
FLOAT8_TYPES = frozenset(
    np.dtype(t)
    for t in (ml_dtypes.float8_e4m3fn, ml_dtypes.float8_e4m3fnuz, ml_dtypes.float8_e5m2, ml_dtypes.float8_e5m2fnuz)
)

#: float 4/6 types: no infinity nor NaN encoding, so a conversion always saturates
SMALL_FLOAT_TYPES = frozenset(
    np.dtype(t) for t in (ml_dtypes.float4_e2m1fn, ml_dtypes.float6_e2m3fn, ml_dtypes.float6_e3m2fn)
)

#: the largest finite value of each float 8/6/4 type
FLOAT_MAX: dict[np.dtype, float] = {dt: float(ml_dtypes.finfo(dt).max) for dt in FLOAT8_TYPES | SMALL_FLOAT_TYPES}

#: 16-bit floats computed through float32 (numpy's float16 ufuncs do the same, one rounding per op)
_HALF_TYPES = frozenset((np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)))

_F32 = np.dtype(np.float32)


def is_quantized_integer(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is an integer type a quantization can target."""
    return np.dtype(dtype) in INT_RANGES


def is_quantized_float(dtype: np.dtype) -> bool:
    """Whether ``dtype`` is one of the float 8/6/4 types a quantization can target."""
    return np.dtype(dtype) in FLOAT_MAX


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The numpy dtype arithmetic in ``dtype`` runs in: float64 stays, everything else is float32.

    A float16/bfloat16 result is obtained by computing in float32 and rounding once; for one
    +, -, * or / of two half values this is exactly the correctly rounded half result (float32
    carries more than 2p+2 bits of the half precisions p, so the double rounding is innocuous).
    """
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else _F32


def round_to(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``values`` (float32/float64) rounded to the precision of ``dtype`` and kept in the compute dtype.

    This emulates arithmetic carried out in float16/bfloat16 (``precision`` attributes, scales of
    those types); float32/float64 values come back unchanged.
    """
    dtype = np.dtype(dtype)
    if dtype in _HALF_TYPES:
        return values.astype(dtype).astype(values.dtype)
    if dtype == _F32 and values.dtype == np.float64:
        return values.astype(_F32)
    return values


def saturate_cast(values: np.ndarray, dtype: np.dtype, saturate: bool = True, rounded: bool = False) -> np.ndarray:
    """Convert float ``values`` to a quantized ``dtype`` as QuantizeLinear's ``saturate(...)`` does.

    * integer types (int2 ... int32, uint2 ... uint32): round half to even (``np.rint``) unless
      ``rounded`` says it is done, clamp to the type's range, convert. NaN, which the spec leaves
      undefined, becomes the lowest value of the type, as in onnxruntime.
    * float 8 types: round to nearest even; with ``saturate`` values beyond the largest finite
      value (infinities included) clamp to it, without it they become NaN (E4M3FN, FNUZ types)
      or infinity (E5M2), as the Cast tables state; -0 becomes +0 on the FNUZ types.
    * float 4/6 types: round to nearest even and clamp: they encode neither infinity nor NaN,
      so ``saturate`` does not apply (spec of QuantizeLinear-25).

    The 2/4-bit integers and the float 8/6/4 types are encoded by onnxrt
    (:mod:`._minifloat`), not by ml_dtypes' conversions, whose out-of-range results changed
    between its versions.

    With ``rounded`` the caller hands over ``values`` (a float array of its own): it may be
    overwritten.
    """
    dtype = np.dtype(dtype)
    rng = INT_RANGES.get(dtype)
    if rng is not None:
        lo, hi = rng
        if dtype.itemsize >= 4 and values.dtype != np.float64:
            # float32 cannot hold the int32 bounds exactly: clamp in float64
            values = values.astype(np.float64)
        out = values if rounded else np.rint(values)
        # one clip pass (np.maximum/np.minimum with a scalar are several times slower); a NaN
        # survives it and shows in the minimum, a cheap reduction
        np.clip(out, lo, hi, out=out)
        if out.size and np.isnan(out.min()):
            out[np.isnan(out)] = lo
        if dtype in INT_FORMATS:
            return encode_int(out, dtype)  # in range and integral by now: the value itself
        return out.astype(dtype)
    if dtype in FLOAT_MAX:
        return encode_float(values, dtype, saturate=saturate)  # float 4/6 saturate whatever the flag
    if dtype.kind == "f" or dtype in _HALF_TYPES:
        return values.astype(dtype)
    raise KernelError(f"Cannot quantize to element type {dtype}.")


def dtype_of(elem_type: int, what: str) -> np.dtype:
    """numpy dtype of an ONNX element type code given in attribute ``what``."""
    try:
        return np_dtype(elem_type)
    except KeyError:
        raise InvalidAttributeError(
            f"Attribute {what!r} holds {elem_type}, which is not an ONNX element type."
        ) from None


def expand_param(
    param: np.ndarray,
    x_shape: tuple[int, ...],
    axis: int,
    block_size: int,
    name: str,
) -> np.ndarray:
    """A scale or zero point reshaped (and repeated) so that it broadcasts against ``x``.

    Granularity follows the shape of ``param`` (QuantizeLinear-21 text):

    * a scalar, or a 1-element 1-D tensor: per tensor;
    * a 1-D tensor of length ``x_shape[axis]``: per axis;
    * with ``block_size > 0``, a tensor of the rank of ``x`` whose dimension ``axis`` is
      ``ceil(D / block_size)`` and every other dimension equal to x's: blocked; each value is
      repeated ``block_size`` times along ``axis`` and the tail cut to ``D``.
    """
    rank = len(x_shape)
    if param.ndim == 0 or (param.ndim == 1 and param.size == 1 and block_size <= 0):
        return param.reshape(())
    if rank == 0:
        raise KernelError(f"{name} has shape {list(param.shape)} but the input is a scalar: expected a scalar {name}.")
    if not -rank <= axis < rank:
        raise KernelError(f"axis {axis} is out of range for an input of rank {rank}.")
    axis = axis + rank if axis < 0 else axis
    dim = x_shape[axis]
    if block_size <= 0:
        if param.ndim != 1 or param.shape[0] != dim:
            raise KernelError(
                f"{name} has shape {list(param.shape)}, expected a scalar or a 1-D tensor of length {dim} "
                f"(dimension {axis} of the input of shape {list(x_shape)})."
            )
        shape = [1] * rank
        shape[axis] = dim
        return param.reshape(shape)
    if param.ndim != rank:
        raise KernelError(
            f"{name} has rank {param.ndim} but blocked quantization (block_size={block_size}) needs the "
            f"rank of the input, {rank}."
        )
    n_blocks = -(-dim // block_size)
    for k in range(rank):
        expected = n_blocks if k == axis else x_shape[k]
        if param.shape[k] != expected:
            raise KernelError(
                f"{name} has shape {list(param.shape)}, expected dimension {k} to be {expected} for an input of "
                f"shape {list(x_shape)} with axis={axis} and block_size={block_size}."
            )
    rep = np.repeat(param, block_size, axis=axis)
    if rep.shape[axis] != dim:
        rep = np.take(rep, np.arange(dim), axis=axis)
    return rep
