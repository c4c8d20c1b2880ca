"""Trilu (14): keep the upper or lower triangle of the last two dimensions, zero elsewhere."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import scalar_int
from ._op import OpRun


def trilu(x: np.ndarray, k: int = 0, upper: int = 1) -> np.ndarray:
    """Upper (``j - i >= k``) or lower (``j - i <= k``) triangle of each [.., N, M] matrix.

    Elements outside become 0 (False, "" for strings). Any k works: beyond the matrix
    everything or nothing is kept.
    """
    x = np.asarray(x)
    if x.ndim < 2:
        raise KernelError(f"input must have rank >= 2, got shape {list(x.shape)}.")
    n, m = x.shape[-2:]
    rows = np.arange(n).reshape(n, 1)
    cols = np.arange(m).reshape(1, m)
    keep = (cols - rows >= k) if upper else (cols - rows <= k)
    zero = "" if x.dtype == object else np.zeros((), dtype=x.dtype)
    return np.where(keep, x, zero).astype(x.dtype, copy=False)


@register("Trilu", versions=(14,))
class Trilu(OpRun):
    """Trilu: 14; k is an optional int64 scalar input (default 0)."""

    def _run(self, x, k=None, attributes=None, verbose=0, fLOG=None):
        return (trilu(x, 0 if k is None else scalar_int(k, "k"), self.upper),)
