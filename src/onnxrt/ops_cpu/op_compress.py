"""Compress (9, 11, 28): keep the slices along an axis (or the flattened elements) where a condition holds."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import axis_in
from ._op import OpRun


def compress(data: np.ndarray, condition: np.ndarray, axis: int | None = None) -> np.ndarray:
    """numpy.compress: ``condition`` (1-D bool) may be shorter than the axis (the rest is
    dropped), not longer. Without ``axis`` the input is flattened first."""
    data = np.asarray(data)
    cond = np.asarray(condition).reshape(-1)
    if cond.dtype != bool:
        cond = cond.astype(bool)
    if axis is None:
        n = data.size
        if cond.size > n:
            raise KernelError(f"condition has {cond.size} values, more than the {n} elements of the flattened input.")
        return data.reshape(-1)[: cond.size][cond]
    ax = axis_in(axis, data.ndim)
    n = data.shape[ax]
    if cond.size > n:
        raise KernelError(f"condition has {cond.size} values, more than the {n} slices along axis {axis}.")
    idx = np.flatnonzero(cond)
    return np.take(data, idx, axis=ax)


@register("Compress", versions=(9, 11, 28))
class Compress(OpRun):
    """Compress: 9, 11 (negative axis), 28 (bfloat16)."""

    def _run(self, data, condition, attributes=None, verbose=0, fLOG=None):
        return (compress(data, condition, self.axis),)
