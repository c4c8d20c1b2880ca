"""CumSum (11, 14) and CumProd (26): cumulative sum or product along an axis, exclusive and/or reversed."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import axis_in, scalar_int
from ._op import OpRun

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _cumulate(ufunc: np.ufunc, identity: int, x: np.ndarray, axis, exclusive: int, reverse: int) -> np.ndarray:
    x = np.asarray(x)
    if x.ndim == 0:
        raise KernelError("x must have rank >= 1: a scalar has no axis to accumulate along.")
    ax = axis_in(scalar_int(axis, "axis") if not isinstance(axis, int) else axis, x.ndim)
    # float16/bfloat16 accumulate in float32: one rounding per output, not one per step
    acc = np.dtype(np.float32) if x.dtype in _HALF else x.dtype
    src = np.flip(x, ax) if reverse else x
    if exclusive:
        # y[i] = x[0] (op) ... (op) x[i-1]: accumulate all but the last, shift by one, identity first
        n = src.shape[ax]
        out = np.empty(src.shape, dtype=acc)
        head = [slice(None)] * x.ndim
        head[ax] = slice(0, 1)
        out[tuple(head)] = identity
        if n > 1:
            body = [slice(None)] * x.ndim
            body[ax] = slice(1, None)
            lead = [slice(None)] * x.ndim
            lead[ax] = slice(0, n - 1)
            ufunc.accumulate(src[tuple(lead)], axis=ax, dtype=acc, out=out[tuple(body)])
    else:
        out = ufunc.accumulate(src, axis=ax, dtype=acc)
    if reverse:
        out = np.flip(out, ax)
    return out.astype(x.dtype, copy=False)


def cumsum(x: np.ndarray, axis, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """Cumulative sum along ``axis`` (an int or a scalar int tensor, negative from the end).

    ``exclusive`` leaves out the current element (the first output is 0); ``reverse``
    runs from the end of the axis. The output has the input's type (integers wrap).
    """
    return _cumulate(np.add, 0, x, axis, exclusive, reverse)


def cumprod(x: np.ndarray, axis, exclusive: int = 0, reverse: int = 0) -> np.ndarray:
    """Cumulative product along ``axis``; ``exclusive`` starts with 1, ``reverse`` runs from the end."""
    return _cumulate(np.multiply, 1, x, axis, exclusive, reverse)


@register("CumSum", versions=(11, 14))
class CumSum(OpRun):
    """CumSum: 11, 14 (float16, bfloat16)."""

    def _run(self, x, axis, attributes=None, verbose=0, fLOG=None):
        return (cumsum(x, axis, self.exclusive, self.reverse),)


@register("CumProd", versions=(26,))
class CumProd(OpRun):
    """CumProd: 26."""

    def _run(self, x, axis, attributes=None, verbose=0, fLOG=None):
        return (cumprod(x, axis, self.exclusive, self.reverse),)
