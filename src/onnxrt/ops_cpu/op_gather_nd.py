"""GatherND (11, 12 batch_dims, 13) and ScatterND (11, 13, 16 reductions, 18 max/min)."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._indexing import checked_indices
from ._op import OpRun
from .op_scatter_elements import _REDUCERS, REDUCTIONS, reduction_of


def _coordinates(indices: np.ndarray, shape: tuple[int, ...]) -> list[np.ndarray]:
    """Split the last axis of ``indices`` into checked, non-negative coordinate arrays."""
    k = indices.shape[-1]
    if k > len(shape):
        raise KernelError(f"indices' last dimension is {k}, larger than the rank {len(shape)} it indexes.")
    return [checked_indices(indices[..., j], shape[j], j) for j in range(k)]


def gather_nd(data: np.ndarray, indices: np.ndarray, batch_dims: int = 0) -> np.ndarray:
    """Gather slices of ``data`` addressed by the last axis of ``indices``.

    Output shape: ``indices.shape[:-1] + data.shape[batch_dims + k:]`` with ``k =
    indices.shape[-1]``; the first ``batch_dims`` axes of both are matched one to one.
    """
    data = np.asarray(data)
    indices = np.asarray(indices)
    if indices.ndim < 1:
        raise KernelError("indices must have rank >= 1.")
    b = int(batch_dims)
    if b < 0 or b >= min(data.ndim, indices.ndim):
        raise KernelError(f"batch_dims must be in [0, {min(data.ndim, indices.ndim) - 1}], got {b}.")
    if data.shape[:b] != indices.shape[:b]:
        raise KernelError(f"the first {b} dimensions of data {list(data.shape)} and indices {list(indices.shape)} must match.")
    k = indices.shape[-1]
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    rest = data.shape[b + k:]
    d = data.reshape((batch,) + data.shape[b:])
    ind = indices.reshape((batch, -1, k))
    coords = _coordinates(ind, data.shape[b:])
    bidx = np.arange(batch, dtype=np.intp).reshape(batch, 1)
    out = d[(bidx, *coords)]
    return out.reshape(indices.shape[:-1] + rest)


def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, reduction: str = "none") -> np.ndarray:
    """Copy of ``data`` with the slices addressed by ``indices`` set (or reduced) with ``updates``.

    ``updates.shape == indices.shape[:-1] + data.shape[k:]``. With ``reduction="none"``
    duplicate indices are undefined by the spec; onnxrt writes in order, the last wins.
    """
    data = np.asarray(data)
    indices = np.asarray(indices)
    updates = np.asarray(updates)
    if reduction not in REDUCTIONS:
        raise KernelError(f"reduction must be one of {list(REDUCTIONS)}, got {reduction!r}.")
    if indices.ndim < 1:
        raise KernelError("indices must have rank >= 1.")
    k = indices.shape[-1]
    expected = indices.shape[:-1] + data.shape[k:]
    if updates.shape != expected:
        raise KernelError(f"updates must have shape {list(expected)}, got {list(updates.shape)}.")
    out = np.array(data, copy=True, order="C")
    if indices.size == 0:
        return out
    coords = _coordinates(indices, data.shape)
    lead = int(np.prod(data.shape[:k], dtype=np.int64))
    flat = out.reshape((lead,) + data.shape[k:])
    lin = np.ravel_multi_index([c.reshape(-1) for c in coords], data.shape[:k]) if k else np.zeros(
        int(np.prod(indices.shape[:-1])), dtype=np.intp
    )
    # the count of slices is explicit: -1 cannot be inferred when the slices are empty
    upd = updates.reshape((int(np.prod(indices.shape[:-1])),) + data.shape[k:]).astype(out.dtype, copy=False)
    if reduction == "none":
        flat[lin] = upd  # repeated indices: the last assignment wins
    else:
        _REDUCERS[reduction].at(flat, lin, upd)
    return out


@register("GatherND", versions=(11, 12, 13))
class GatherND(OpRun):
    """GatherND: 11, 12 (batch_dims), 13 (bfloat16)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._batch_dims = self.atts_value.get("batch_dims") or 0

    def _run(self, data, indices, attributes=None, verbose=0, fLOG=None):
        return (gather_nd(data, indices, batch_dims=self._batch_dims),)


@register("ScatterND", versions=(11, 13, 16, 18))
class ScatterND(OpRun):
    """ScatterND: 11, 13 (bfloat16), 16 (reduction add/mul), 18 (max/min)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.reduction = reduction_of(self)

    def _run(self, data, indices, updates, attributes=None, verbose=0, fLOG=None):
        return (scatter_nd(data, indices, updates, reduction=self.reduction),)
