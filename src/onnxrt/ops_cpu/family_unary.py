"""Unary element-wise operators as a table: one row per operator, one line each."""

from __future__ import annotations

import numpy as np
from . import _special

from ..parallel import parallel_for
from ._family import Spec, build_family, compute_in_float

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_INF32 = np.float32(np.inf)

# Each row is the operator's reference kernel: the spec's formula in numpy (scipy for
# Erf), calling nothing compiled. The faster variants are declared fast paths in
# onnxrt/fastpaths/elementwise.py: the compiled Relu loop and the chunked float32 kernels
# of _fastmath for Erf and Sigmoid (compiled twins, or their numpy polynomials).
#
# The transcendental ufuncs (Exp, Log, Tanh, Sin...) split large inputs over the kernel
# pool inside their reference (_on_pool), not as a declared path: the split is exact (the
# same ufunc loop computes every element) and needs no compiled code, while a declared
# path would put the dispatcher's signature lookup on every call of these cheap, frequent
# nodes (measured 1.8 -> 6.8 us for a Tanh of 16 elements on the 2-core test machine);
# _on_pool's own test is one size comparison.


#: elements per chunk of a transcendental ufunc split over the kernel pool
_CHUNK = 1 << 17


def _on_pool(ufunc: np.ufunc):
    """``ufunc(x)``, large float inputs split in chunks over the kernel thread pool.

    For the transcendental ufuncs, which are compute-bound (np.exp: 1.7 ms per 1e6 float32
    on one core, 0.87 ms on two); memory-bound ones (Add, Abs...) gain nothing from a
    second thread here and stay plain calls. Results are those of the one call: every
    element is computed by the same loop.
    """

    def run(x: np.ndarray) -> np.ndarray:
        if x.size < 2 * _CHUNK or x.dtype.kind != "f" or not x.flags.c_contiguous:
            return ufunc(x)
        out = np.empty_like(x)
        src, dst = x.reshape(-1), out.reshape(-1)

        def chunks(lo: int, hi: int) -> None:
            with np.errstate(all="ignore"):  # numpy's error state is per thread
                ufunc(src[lo * _CHUNK:hi * _CHUNK], out=dst[lo * _CHUNK:hi * _CHUNK])

        parallel_for(-(-x.size // _CHUNK), chunks, work_per_item=_CHUNK * 10)
        return out

    run.__name__ = ufunc.__name__
    return run


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
    Spec("Exp", _on_pool(np.exp), (1, 6, 13)),
    Spec("Log", _on_pool(np.log), (1, 6, 13)),
    Spec("Sqrt", np.sqrt, (1, 6, 13)),
    Spec("Reciprocal", np.reciprocal, (1, 6, 13)),
    Spec("Ceil", np.ceil, (1, 6, 13)),
    Spec("Floor", np.floor, (1, 6, 13)),
    # halves go to the nearest even integer, as the spec says (np.rint)
    Spec("Round", np.rint, (11, 22)),
    Spec("Sign", np.sign, (9, 13)),
    Spec("Sin", _on_pool(np.sin), (7, 22)),
    Spec("Cos", _on_pool(np.cos), (7, 22)),
    Spec("Tan", _on_pool(np.tan), (7, 22)),
    Spec("Asin", _on_pool(np.arcsin), (7, 22)),
    Spec("Acos", _on_pool(np.arccos), (7, 22)),
    Spec("Atan", _on_pool(np.arctan), (7, 22)),
    Spec("Sinh", _on_pool(np.sinh), (9, 22)),
    Spec("Cosh", _on_pool(np.cosh), (9, 22)),
    Spec("Tanh", _on_pool(np.tanh), (1, 6, 13)),
    Spec("Asinh", _on_pool(np.arcsinh), (9, 22)),
    Spec("Acosh", _on_pool(np.arccosh), (9, 22)),
    Spec("Atanh", _on_pool(np.arctanh), (9, 22)),
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
