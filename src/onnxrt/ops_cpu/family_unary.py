"""Unary element-wise operators as a table: one row per operator, one line each."""

from __future__ import annotations

import numpy as np
from . import _special

from ._family import Spec, build_family, compute_in_float

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_INF32 = np.float32(np.inf)

# Each row is the operator's reference kernel: the spec's formula in numpy (scipy for
# Erf), calling nothing compiled. The faster variants are declared fast paths in
# onnxrt/fastpaths/elementwise.py: the compiled Relu loop, the chunked float32 kernels of
# _fastmath for Erf and Sigmoid (compiled twins, or their numpy polynomials), and the
# transcendental ufuncs split over the kernel pool for large inputs.


#: numpy's clip ufunc itself: np.clip's Python wrapper costs ~3 us a call (a third of a
#: small graph's node)
_CLIP = getattr(getattr(np, "_core", getattr(np, "core", None)).umath, "clip", np.clip)
_ZERO32 = np.float32(0)


def _relu(x: np.ndarray) -> np.ndarray:
    if x.dtype == _F32:
        # clip has a vectorised float32 loop, 3x faster than np.maximum (which checks for
        # NaN per element); it keeps -0 and NaN as they are, as onnxruntime's Relu does
        return _CLIP(x, _ZERO32, _INF32)
    return np.maximum(x, x.dtype.type(0))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    """Sigmoid's reference: 1 / (1 + exp(-x)) evaluated stably as exp(x) / (1 + exp(x)) (1
    where exp(x) overflows), the formula _fastmath.sigmoid runs by chunks.

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
    Spec("Erf", compute_in_float(lambda x, *a, **k: _special.erf(x, *a, **k)), (9, 13)),
    Spec("IsNaN", np.isnan, (9, 13, 20)),
    Spec("IsInf", _is_inf, (10, 20), with_attributes=True, prepare=_is_inf_attributes),
    Spec("Not", np.logical_not, (1,)),
    Spec("BitwiseNot", np.invert, (18,)),
    Spec("Relu", _relu, (1, 6, 13, 14)),
    Spec("Sigmoid", _sigmoid, (1, 6, 13)),
]

build_family(UNARY, "unary", globals())
