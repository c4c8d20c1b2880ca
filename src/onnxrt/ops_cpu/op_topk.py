"""TopK (1, 10, 11, 24): the k largest or smallest values along an axis and their indices."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import axis_in, scalar_int
from ._op import OpRun


def _sorted_topk(x: np.ndarray, k: int, ax: int, largest: int) -> np.ndarray:
    """Indices of the k first elements of the full stable order along ``ax``."""
    n = x.shape[ax]
    if largest:
        # a stable ascending sort of the reversed axis, read backwards, is descending with
        # ties in increasing original index
        order = np.flip(np.argsort(np.flip(x, ax), axis=ax, kind="stable"), ax)
        return (n - 1) - np.take(order, np.arange(k), axis=ax)
    order = np.argsort(x, axis=ax, kind="stable")
    return np.take(order, np.arange(k), axis=ax)


def _partial_topk(x: np.ndarray, k: int, largest: int) -> np.ndarray | None:
    """Indices (last axis) of the top k for k much smaller than the axis, in O(n): the
    k-th value t by partition; the elements beyond t, then the first ties equal to t in
    index order, exactly k per row; those k are then sorted. None when a NaN is the
    threshold (comparisons cannot place it)."""
    n = x.shape[-1]
    kth = n - k if largest else k - 1
    t = np.take(np.partition(x, kth, axis=-1), [kth], axis=-1)
    if t.dtype.kind in "fc" and np.isnan(t).any():
        return None
    beyond = x > t if largest else x < t
    if largest and x.dtype.kind in "fc":
        beyond |= np.isnan(x)  # NaN ranks above every number
    ties = x == t
    need = k - np.count_nonzero(beyond, axis=-1, keepdims=True)
    chosen = beyond | (ties & (np.cumsum(ties, axis=-1) <= need))
    cand = np.nonzero(chosen)[-1].reshape(x.shape[:-1] + (k,))  # row-major: k per row, by index
    vals = np.take_along_axis(x, cand, axis=-1)
    return np.take_along_axis(cand, _sorted_topk(vals, k, -1, largest), axis=-1)


def topk(x: np.ndarray, k: int, axis: int = -1, largest: int = 1, sorted: int = 1) -> tuple[np.ndarray, np.ndarray]:
    """(values, int64 indices) of the ``k`` largest (or smallest) elements along ``axis``.

    Equal values keep the order of their indices (the lower index first), as the spec
    requires from version 11; NaN sorts above every number (numpy's order, and
    onnxruntime's). The result is always sorted: ``sorted=0`` leaves the order
    unspecified, so the sorted order is a valid one. A small k on a long axis uses a
    partition (linear time) instead of a full sort.
    """
    x = np.asarray(x)
    if x.ndim == 0:
        raise KernelError("X must have rank >= 1.")
    ax = axis_in(axis, x.ndim)
    n = x.shape[ax]
    if not 0 <= k <= n:
        raise KernelError(f"k is {k}, expected a value in [0, {n}] (the size of axis {axis}).")
    idx = None
    if 0 < k and k * 8 <= n and n >= 256:
        idx = _partial_topk(np.moveaxis(x, ax, -1), k, largest)
        if idx is not None:
            idx = np.moveaxis(idx, -1, ax)
    if idx is None:
        idx = _sorted_topk(x, k, ax, largest)
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
