"""Axis helpers of the shape and reduction kernels: axes from attributes or int tensors, checked and normalised."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError


def axis_in(axis: Any, rank: int, what: str = "axis") -> int:
    """One axis in [0, rank) from [-rank, rank), or a KernelError naming it."""
    a = int(axis)
    if not -rank <= a < rank:
        raise KernelError(f"{what} {a} is out of range for a tensor of rank {rank}, expected [{-rank}, {rank - 1}].")
    return a + rank if a < 0 else a


def axes_in(axes: Any, rank: int, what: str = "axes") -> tuple[int, ...]:
    """Axes (attribute list or 1-D int tensor) normalised to [0, rank); duplicates are an error."""
    out = tuple(axis_in(a, rank, what) for a in as_int_list(axes))
    if len(set(out)) != len(out):
        raise KernelError(f"{what} {as_int_list(axes)} repeats an axis of a tensor of rank {rank}.")
    return out


def as_int_list(value: Any) -> list[int]:
    """A list of Python ints from an attribute list, a scalar or an int tensor (None gives [])."""
    if value is None:
        return []
    if isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu":
            raise KernelError(f"expected an integer tensor, got dtype {value.dtype}.")
        return [int(v) for v in value.reshape(-1).tolist()]
    if isinstance(value, int | np.integer):
        return [int(value)]
    return [int(v) for v in value]


def scalar_int(value: Any, what: str) -> int:
    """The single integer of a scalar or one-element tensor input."""
    arr = np.asarray(value)
    if arr.size != 1:
        raise KernelError(f"{what} must hold exactly one value, got shape {list(arr.shape)}.")
    if arr.dtype.kind not in "iu":
        raise KernelError(f"{what} must be an integer tensor, got dtype {arr.dtype}.")
    return int(arr.reshape(-1)[0])
