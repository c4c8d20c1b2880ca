"""Reshape (1, 5, 13, 14, 19, 21, 23, 24, 25): a new shape, 0 copying a dimension (unless allowzero), -1 inferred."""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import as_int_list
from ._op import OpRun


def reshape_dims(in_shape: tuple[int, ...], shape: list[int], allowzero: int = 0) -> tuple[int, ...]:
    """The output shape: 0 copies the input's dimension at the same index (or is a real 0
    with ``allowzero``), one -1 takes whatever size is left. Raises KernelError otherwise."""
    dims = list(shape)
    if dims.count(-1) > 1:
        raise KernelError(f"shape {shape} has more than one -1.")
    if allowzero and -1 in dims and 0 in dims:
        raise KernelError(f"shape {shape} has both 0 and -1, which allowzero=1 forbids.")
    for i, d in enumerate(dims):
        if d == 0 and not allowzero:
            if i >= len(in_shape):
                raise KernelError(f"shape {shape} copies dimension {i} (a 0) of an input of rank {len(in_shape)}.")
            dims[i] = in_shape[i]
        elif d < -1:
            raise KernelError(f"shape {shape} has a negative dimension {d}.")
    total = math.prod(in_shape)
    if -1 in dims:
        i = dims.index(-1)
        rest = math.prod(d for j, d in enumerate(dims) if j != i)
        if rest == 0 or total % rest:
            raise KernelError(f"cannot reshape a tensor of shape {list(in_shape)} ({total} elements) into {shape}.")
        dims[i] = total // rest
    elif math.prod(dims) != total:
        raise KernelError(f"cannot reshape a tensor of shape {list(in_shape)} ({total} elements) into {shape}.")
    return tuple(dims)


def reshape(data: np.ndarray, shape, allowzero: int = 0) -> np.ndarray:
    """``data`` with a new shape; a view whenever numpy can make one (no copy of the data)."""
    data = np.asarray(data)
    return data.reshape(reshape_dims(data.shape, as_int_list(shape), allowzero))


@register("Reshape", versions=(1, 5, 13, 14, 19, 21, 23, 24, 25))
class Reshape(OpRun):
    """Reshape: 1 (shape attribute), 5 (shape input), 13, 14 (allowzero), 19+ (new element types)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._allowzero = int(getattr(self, "allowzero", 0) or 0)
        self._attr_shape = as_int_list(self.shape) if (self.since_version or 25) < 5 else None

    def _run(self, data, shape=None, attributes=None, verbose=0, fLOG=None):
        target = self._attr_shape if self._attr_shape is not None else as_int_list(shape)
        return (data.reshape(reshape_dims(data.shape, target, self._allowzero)),)
