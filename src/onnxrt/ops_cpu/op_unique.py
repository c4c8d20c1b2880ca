"""Unique (11, 28): unique elements or sub-tensors, sorted or in first-occurrence order, with all four outputs."""

from __future__ import annotations

import math

import numpy as np

from ..registry import register
from ._axes import axis_in
from ._op import OpRun


def _codes(flat: np.ndarray) -> np.ndarray:
    """Dense int64 codes of values in ascending value order (makes any element type sortable as rows)."""
    _, inv = np.unique(flat, return_inverse=True)
    return inv.reshape(-1).astype(np.int64, copy=False)


def unique(x: np.ndarray, axis: int | None = None, sorted: int = 1) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(Y, indices, inverse_indices, counts) as the spec defines them.

    Without ``axis`` the input is flattened and Y holds unique values; with ``axis`` Y
    holds the unique slices along it, compared lexicographically. ``sorted=1`` orders Y
    ascending, ``sorted=0`` by first occurrence. ``indices`` are first occurrences in
    the input, ``inverse_indices`` map every input element (or slice) to Y. Every
    element type works, strings included: slices are compared through integer codes of
    their values, so numpy never needs a structured comparison.
    """
    x = np.asarray(x)
    if axis is None:
        y, idx, inv, cnt = np.unique(x.reshape(-1), return_index=True, return_inverse=True, return_counts=True)
        inv = inv.reshape(-1)
    else:
        ax = axis_in(axis, x.ndim)
        moved = np.moveaxis(x, ax, 0)
        # explicit row length: -1 cannot be inferred when there are no slices
        rows = _codes(moved.reshape(-1)).reshape(moved.shape[0], math.prod(moved.shape[1:]))
        _, idx, inv, cnt = np.unique(rows, axis=0, return_index=True, return_inverse=True, return_counts=True)
        inv = inv.reshape(-1)
        y = np.take(x, idx, axis=ax)
    if not sorted:
        order = np.argsort(idx, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        idx, cnt, inv = idx[order], cnt[order], rank[inv]
        y = y[order] if axis is None else np.take(x, idx, axis=axis_in(axis, x.ndim))
    i64 = np.int64
    return y, idx.astype(i64, copy=False), inv.astype(i64, copy=False), cnt.astype(i64, copy=False)


@register("Unique", versions=(11, 28))
class Unique(OpRun):
    """Unique: 11, 28 (bfloat16)."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return unique(x, self.axis, self.sorted)
