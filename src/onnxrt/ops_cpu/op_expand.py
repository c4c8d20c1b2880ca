"""Expand (8, 13): broadcast a tensor to a shape, numpy's multidirectional rule."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._alloc import check_alloc
from ._axes import as_int_list
from ._op import OpRun


def expand_shape(in_shape: tuple[int, ...], shape: list[int]) -> tuple[int, ...]:
    """The broadcast of ``in_shape`` and ``shape`` (a dimension 1 on either side yields to the other)."""
    rank = max(len(in_shape), len(shape))
    a = [1] * (rank - len(in_shape)) + list(in_shape)
    b = [1] * (rank - len(shape)) + list(shape)
    out = []
    for x, y in zip(a, b):
        if y < 0:
            raise KernelError(f"shape {shape} has a negative dimension.")
        if x == y or y == 1:
            out.append(x)
        elif x == 1:
            out.append(y)
        else:
            raise KernelError(f"cannot broadcast an input of shape {list(in_shape)} to shape {shape}.")
    return tuple(out)


def expand(data: np.ndarray, shape, options: dict[str, Any] | None = None) -> np.ndarray:
    """A new tensor: ``data`` broadcast with ``shape``. The size is checked before allocating."""
    data = np.asarray(data)
    out_shape = expand_shape(data.shape, as_int_list(shape))
    check_alloc(out_shape, data.dtype, options, "Expand output")
    out = np.empty(out_shape, dtype=data.dtype)
    np.copyto(out, data)
    return out


@register("Expand", versions=(8, 13))
class Expand(OpRun):
    """Expand: 8, 13 (bfloat16). The output is materialised (not a broadcast view)."""
    uses_blas = False

    def _run(self, data, shape, attributes=None, verbose=0, fLOG=None):
        return (expand(data, shape, self.options),)
