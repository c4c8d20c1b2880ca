"""TopK (1, 10, 11, 24): the k largest or smallest values along an axis and their indices."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import axis_in, scalar_int
from ._op import OpRun


def topk(x: np.ndarray, k: int, axis: int = -1, largest: int = 1, sorted: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(values, int64 indices) of the ``k`` largest (or smallest) elements along ``axis``.

    Equal values keep the order of their indices (the lower index first), as the spec
    requires from version 11; NaN sorts above every number (numpy's order, and
    onnxruntime's). The result is always sorted: ``sorted=0`` leaves the order
    unspecified, so the sorted order is a valid one.
    """
    x = np.asarray(x)
    if x.ndim == 0:
        raise KernelError("X must have rank >= 1.")
    ax = axis_in(axis, x.ndim)
    n = x.shape[ax]
    if not 0 <= k <= n:
        raise KernelError(f"k is {k}, expected a value in [0, {n}] (the size of axis {axis}).")
    if largest:
        # a stable ascending sort of the reversed axis, read backwards, is descending with
        # ties in increasing original index
        order = np.argsort(np.flip(x, ax), axis=ax, kind="stable")
        order = np.flip(order, ax)
        idx = np.take(order, np.arange(k), axis=ax)
        idx = (n - 1) - idx
    else:
        order = np.argsort(x, axis=ax, kind="stable")
        idx = np.take(order, np.arange(k), axis=ax)
    values = np.take_along_axis(x, idx, axis=ax)
    return values, idx.astype(np.int64, copy=False)


@register("TopK", versions=(1, 10, 11, 24))
class TopK(OpRun):
    """TopK: 1 (k attribute), 10 (K input), 11 (largest, sorted, negative axis, integers), 24 (bfloat16)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._largest = int(getattr(self, "largest", 1) if self.since_version and self.since_version >= 11 else 1)

    def _run(self, x, k=None, attributes=None, verbose=0, fLOG=None):
        kk = self.k if (self.since_version or 24) < 10 else scalar_int(k, "K")
        return topk(x, kk, self.axis, self._largest)
