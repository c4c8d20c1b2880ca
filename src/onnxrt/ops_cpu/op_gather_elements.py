"""GatherElements (11, 13): the inverse of ScatterElements."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._indexing import checked_indices, flat_positions, normalize_axis
from ._op import OpRun


def gather_elements(data: np.ndarray, indices: np.ndarray, axis: int = 0) -> np.ndarray:
    """``out[i][j][k] = data[indices[i][j][k]][j][k]`` for axis 0, and so on; output shape is indices'."""
    data = np.asarray(data)
    indices = np.asarray(indices)
    rank = data.ndim
    if rank == 0:
        raise KernelError("data must have rank >= 1.")
    if indices.ndim != rank:
        raise KernelError(f"indices must have the rank of data ({rank}), got rank {indices.ndim}.")
    axis = normalize_axis(axis, rank)
    for k in range(rank):
        if k != axis and indices.shape[k] > data.shape[k]:
            raise KernelError(f"indices dimension {k} is {indices.shape[k]}, larger than data's {data.shape[k]}.")
    idx = checked_indices(indices, data.shape[axis], axis)
    # flat positions in data's own strides: a smaller indices shape on the other axes
    # simply addresses the leading corner of data
    flat = np.ascontiguousarray(data).reshape(-1)
    return flat.take(flat_positions(idx, data.shape, axis))


@register("GatherElements", versions=(11, 13))
class GatherElements(OpRun):
    """GatherElements: 11, 13 (bfloat16)."""

    def _run(self, data, indices, attributes=None, verbose=0, fLOG=None):
        return (gather_elements(data, indices, axis=self.axis),)
