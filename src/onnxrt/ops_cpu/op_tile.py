"""Tile (1, 6, 13): repeat a tensor along every axis."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._alloc import check_alloc
from ._axes import as_int_list, axis_in, scalar_int
from ._op import OpRun


def tile(data: np.ndarray, repeats, options: dict[str, Any] | None = None) -> np.ndarray:
    """``data`` repeated ``repeats[i]`` times along axis i (one non-negative count per axis).

    The output size is checked against the allocation limit before anything is allocated.
    """
    data = np.asarray(data)
    reps = as_int_list(repeats)
    if len(reps) != data.ndim:
        raise KernelError(f"repeats has {len(reps)} values, expected {data.ndim} (the input's rank).")
    if any(r < 0 for r in reps):
        raise KernelError(f"repeats {reps} must be non-negative.")
    check_alloc([d * r for d, r in zip(data.shape, reps)], data.dtype, options, "Tile output")
    return np.tile(data, reps) if data.ndim else np.array(data, copy=True)


@register("Tile", versions=(1, 6, 13))
class Tile(OpRun):
    """Tile: 1 (inputs tiles and axis: repeat along one axis), 6 (repeats input, one count per axis), 13 (bfloat16)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._v1 = (self.since_version or 13) < 6

    def _run(self, data, repeats, axis=None, attributes=None, verbose=0, fLOG=None):
        if self._v1:
            if axis is None:
                raise KernelError("Tile version 1 needs the axis input.")
            a = axis_in(scalar_int(np.asarray(axis).astype(np.int64), "axis"), data.ndim)
            reps = [1] * data.ndim
            reps[a] = scalar_int(np.asarray(repeats).astype(np.int64), "tiles")
            return (tile(data, reps, self.options),)
        return (tile(data, repeats, self.options),)
