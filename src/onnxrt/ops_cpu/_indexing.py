"""Index checks shared by the gather/scatter family: bounds errors, negative indices, flat positions."""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRangeError, KernelError


def normalize_axis(axis: int, rank: int, what: str = "axis") -> int:
    """``axis`` in [0, rank) from [-rank, rank), or a KernelError."""
    if not -rank <= axis < max(rank, 1):
        raise KernelError(f"{what} {axis} is out of range for a tensor of rank {rank}.")
    return axis + rank if axis < 0 else axis


def checked_indices(indices: np.ndarray, size: int, axis: int | str = 0, name: str = "indices") -> np.ndarray:
    """Indices made non-negative (intp), after checking every one lies in [-size, size-1].

    Raises IndexOutOfRangeError naming the first offending index and the bounds.
    """
    idx = np.asarray(indices)
    if idx.dtype.kind not in "iu":
        raise KernelError(f"{name} must be an integer tensor, got dtype {idx.dtype}.")
    if idx.size == 0:
        return idx.astype(np.intp, copy=False)
    lo, hi = idx.min(), idx.max()
    if lo < -size or hi >= size:
        bad = idx[(idx < -size) | (idx >= size)].reshape(-1)[0]
        raise IndexOutOfRangeError(
            f"{name} holds {int(bad)}, out of range [{-size}, {size - 1}] for axis {axis} of size {size}."
        )
    idx = idx.astype(np.intp, copy=False)
    if lo < 0:
        idx = np.where(idx < 0, idx + size, idx)
    return idx


def element_strides(shape: tuple[int, ...]) -> list[int]:
    """Strides, in elements, of a C-contiguous array of ``shape``."""
    strides = [1] * len(shape)
    for k in range(len(shape) - 2, -1, -1):
        strides[k] = strides[k + 1] * shape[k + 1]
    return strides


def flat_positions(idx: np.ndarray, data_shape: tuple[int, ...], axis: int) -> np.ndarray:
    """Flat positions in C-contiguous data of shape ``data_shape`` of the elements that
    ScatterElements/GatherElements address: ``idx`` on ``axis``, the element's own
    coordinate on every other axis. A loop over the rank only."""
    strides = element_strides(data_shape)
    pos = idx * strides[axis]
    rank = idx.ndim
    for k in range(rank):
        n = idx.shape[k]
        if k != axis and n > 1:
            shape = [1] * rank
            shape[k] = n
            pos = pos + (np.arange(n, dtype=np.intp) * strides[k]).reshape(shape)
    return pos
