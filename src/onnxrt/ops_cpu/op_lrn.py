"""LRN (1, 13): local response normalisation across channels, a windowed sum of squares."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

#: windows up to this size are summed slice by slice; wider ones through a cumulative sum
_MAX_LOOP_WINDOW = 16


def _window_sum(sq: np.ndarray, before: int, after: int) -> np.ndarray:
    """``out[:, c] = sum(sq[:, max(0, c - before) : min(C, c + after + 1)])`` along axis 1."""
    c = sq.shape[1]
    if before + after + 1 <= _MAX_LOOP_WINDOW:
        out = sq.copy()
        # one shifted slice addition per offset of the window (a few passes, never one per element)
        for k in range(1, before + 1):
            if k < c:
                out[:, k:] += sq[:, : c - k]
        for k in range(1, after + 1):
            if k < c:
                out[:, : c - k] += sq[:, k:]
        return out
    # wide windows: prefix sums in float64 so that the differences keep float32's precision
    cs = np.zeros((sq.shape[0], c + 1) + sq.shape[2:], dtype=np.float64)
    np.cumsum(sq, axis=1, dtype=np.float64, out=cs[:, 1:])
    idx = np.arange(c)
    hi = np.minimum(idx + after + 1, c)
    lo = np.maximum(idx - before, 0)
    return (cs[:, hi] - cs[:, lo]).astype(sq.dtype)


def lrn(x: np.ndarray, size: int, alpha: float = 1e-4, beta: float = 0.75, bias: float = 1.0) -> np.ndarray:
    """``Y = X / (bias + alpha / size * square_sum) ** beta``.

    ``square_sum[n, c]`` adds the squares of channels ``max(0, c - floor((size-1)/2))`` to
    ``min(C-1, c + ceil((size-1)/2))``. The sum loops over the window offsets (``size`` is a
    handful of channels), the power uses square roots for the common ``beta`` 0.75 and 0.5.
    16-bit inputs are computed in float32.
    """
    x = np.asarray(x)
    if x.ndim < 2:
        raise KernelError(f"LRN needs X of rank >= 2 (N x C x ...), got rank {x.ndim}.")
    if size <= 0:
        raise KernelError(f"size is {size}, expected a positive number of channels.")
    cdt = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    xc = x.astype(cdt, copy=False)
    sq = np.square(xc)
    before = (size - 1) // 2
    after = size - 1 - before  # ceil((size - 1) / 2)
    s = _window_sum(sq, before, after)
    s *= cdt.type(alpha / size)
    s += cdt.type(bias)
    if beta == 0.75:
        r = np.sqrt(s)
        r *= np.sqrt(r)
    elif beta == 0.5:
        r = np.sqrt(s, out=s)
    elif beta == 1.0:
        r = s
    else:
        r = np.power(s, cdt.type(beta), out=s)
    y = np.divide(xc, r, out=r)
    return y if y.dtype == x.dtype else y.astype(x.dtype)


@register("LRN", versions=(1, 13))
class LRN(OpRun):
    """LRN: 1, 13 (bfloat16)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if self.size <= 0:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'size' is {self.size}, expected > 0.")

    def _run(self, X, attributes=None, verbose=0, fLOG=None):
        return (lrn(X, self.size, alpha=self.alpha, beta=self.beta, bias=self.bias),)
