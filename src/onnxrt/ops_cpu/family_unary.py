"""Unary element-wise operators as a table: one row per operator, one line each."""

from __future__ import annotations

import numpy as np
import scipy.special

from . import _fastmath as fm
from ._family import Spec, build_family, compute_in_float

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_INF32 = np.float32(np.inf)

# Exp, Log and Tanh stay plain numpy calls: numpy vectorises float32 exp, log and tanh for
# AVX2 itself (np.exp costs about 10 multiplications per element); a range reduction and
# polynomial in numpy passes does not beat it. Erf takes _fastmath's kernel for float32
# (float16 and bfloat16 through float32) from fm.ERF_MIN_SIZE elements on.


def _relu(x: np.ndarray) -> np.ndarray:
    if x.dtype == _F32:
        # np.clip has a vectorised float32 loop, 3x faster than np.maximum (which checks
        # for NaN per element); it keeps -0 and NaN as they are, as onnxruntime's Relu does
        return np.clip(x, np.float32(0), _INF32)
    return np.maximum(x, x.dtype.type(0))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """exp(x) / (1 + exp(x)) (1 where exp(x) overflows), the formula of fm.sigmoid on whole arrays.

    exp(x) never overflows where the result is small, so results down to the subnormals
    keep their accuracy (1 / (1 + exp(-x)) would give 0 below x = -88.7 in float32).
    float16 and bfloat16 are computed in float32 and rounded once.
    """
    dt = x.dtype
    if x.ndim == 0:  # numpy would turn the 0-D intermediates into scalars (no out=)
        return _sigmoid(x.reshape(1)).reshape(())
    if dt != _F32 and dt != _F64:
        return _sigmoid(x.astype(np.float32)).astype(dt)
    with np.errstate(over="ignore", invalid="ignore"):
        e = np.exp(x)
        y = np.add(e, dt.type(1))
        np.divide(e, y, out=y)
    if e.size and not np.max(e) < np.inf:  # x above ~88.7 (float32): sigmoid rounds to 1 (or NaN in x)
        y[np.isinf(e)] = 1
    return y


def _is_inf(x: np.ndarray, negative: bool = True, positive: bool = True) -> np.ndarray:
    if negative and positive:
        return np.isinf(x)
    if positive:
        return np.isinf(x) & (x > 0)
    if negative:
        return np.isinf(x) & (x < 0)
    return np.zeros(x.shape, dtype=bool)


def _is_inf_attributes(op, kw):
    return {"negative": bool(kw["detect_negative"]), "positive": bool(kw["detect_positive"])}


UNARY = [
    Spec("Abs", np.abs, (1, 6, 13)),
    Spec("Neg", np.negative, (1, 6, 13)),
    Spec("Exp", np.exp, (1, 6, 13)),
    Spec("Log", np.log, (1, 6, 13)),
    Spec("Sqrt", np.sqrt, (1, 6, 13)),
    Spec("Reciprocal", np.reciprocal, (1, 6, 13)),
    Spec("Ceil", np.ceil, (1, 6, 13)),
    Spec("Floor", np.floor, (1, 6, 13)),
    # halves go to the nearest even integer, as the spec says (np.rint)
    Spec("Round", np.rint, (11, 22)),
    Spec("Sign", np.sign, (9, 13)),
    Spec("Sin", np.sin, (7, 22)),
    Spec("Cos", np.cos, (7, 22)),
    Spec("Tan", np.tan, (7, 22)),
    Spec("Asin", np.arcsin, (7, 22)),
    Spec("Acos", np.arccos, (7, 22)),
    Spec("Atan", np.arctan, (7, 22)),
    Spec("Sinh", np.sinh, (9, 22)),
    Spec("Cosh", np.cosh, (9, 22)),
    Spec("Tanh", np.tanh, (1, 6, 13)),
    Spec("Asinh", np.arcsinh, (9, 22)),
    Spec("Acosh", np.arccosh, (9, 22)),
    Spec("Atanh", np.arctanh, (9, 22)),
    # Erf 9 also allows integer types (T -> T): computed in float64 and truncated
    # toward zero like a C cast (onnxruntime implements no integer Erf to follow)
    Spec("Erf", fm.float_kernel(fm.erf, compute_in_float(scipy.special.erf), fm.ERF_MIN_SIZE), (9, 13)),
    Spec("IsNaN", np.isnan, (9, 13, 20)),
    Spec("IsInf", _is_inf, (10, 20), with_attributes=True, prepare=_is_inf_attributes),
    Spec("Not", np.logical_not, (1,)),
    Spec("BitwiseNot", np.invert, (18,)),
    Spec("Relu", _relu, (1, 6, 13, 14)),
    # fm.sigmoid is _sigmoid's formula by chunks (no speed gain, bounded scratch memory); float16 gains the fast casts
    Spec("Sigmoid", fm.float_kernel(fm.sigmoid, _sigmoid, fm.CAST_MIN_SIZE), (1, 6, 13)),
]

build_family(UNARY, "unary", globals())
