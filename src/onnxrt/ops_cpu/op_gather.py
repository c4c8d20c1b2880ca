"""Gather (1, 11, 13): take slices along an axis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import IndexOutOfRangeError, KernelError
from ..registry import register
from ._indexing import checked_indices, normalize_axis
from ._op import OpRun


def gather(data: np.ndarray, indices: np.ndarray, axis: int = 0, check: Callable[[Any, Any], None] | None = None) -> np.ndarray:
    """``np.take`` along ``axis``: output rank is q + r - 1 (q indices rank, r data rank).

    Negative indices count from the end (allowed since opset 11); an index outside
    [-s, s-1] raises IndexOutOfRangeError naming it. Empty indices give an empty
    output of the right shape. ``check(shape, dtype)`` (the kernel's :meth:`OpRun.check_alloc`)
    sees the output shape before it is allocated: q small indices can ask for a large output.
    """
    data = np.asarray(data)
    indices = np.asarray(indices)
    if data.ndim == 0:
        raise KernelError("data must have rank >= 1.")
    axis = normalize_axis(axis, data.ndim)
    if indices.dtype.kind not in "iu":
        raise KernelError(f"indices must be an integer tensor, got dtype {indices.dtype}.")
    if check is not None and indices.size > 1:
        check(data.shape[:axis] + indices.shape + data.shape[axis + 1 :], data.dtype)
    try:
        # np.take checks bounds itself and accepts negative indices: the fast path
        return np.asarray(np.take(data, indices, axis=axis))  # a 0-d index gives a numpy scalar
    except IndexError:
        checked_indices(indices, data.shape[axis], axis)  # raises with the offending index
        raise IndexOutOfRangeError("indices out of range.") from None


@register("Gather", versions=(1, 11, 13))
class Gather(OpRun):
    """Gather: 1 (non-negative indices), 11 (negative indices), 13 (bfloat16)."""
    uses_blas = False

    def _run(self, data, indices, attributes=None, verbose=0, fLOG=None):
        return (gather(data, indices, axis=self.axis, check=self.check_alloc),)
