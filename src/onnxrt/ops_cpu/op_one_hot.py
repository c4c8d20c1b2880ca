"""OneHot (9, 11, 28): one-hot encoding of indices along a new axis, with [off, on] values."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._alloc import check_alloc
from ._op import OpRun


def one_hot(indices: np.ndarray, depth: Any, values: np.ndarray, axis: int = -1, options: dict[str, Any] | None = None) -> np.ndarray:
    """Output of rank r + 1: ``on`` where the new axis' coordinate equals the index, ``off`` elsewhere.

    Indices (any numeric type; floats truncate toward zero, as onnxruntime's cast) in
    [-depth, depth-1] count from the end when negative; others give an all-``off`` row.
    ``depth`` is a scalar or one-element tensor of any numeric type. ``axis`` in [-r-1, r].
    """
    indices = np.asarray(indices)
    values = np.asarray(values)
    if values.size != 2:
        raise KernelError(f"values must hold two elements [off_value, on_value], got shape {list(values.shape)}.")
    d = np.asarray(depth)
    if d.size != 1:
        raise KernelError(f"depth must be a scalar, got shape {list(d.shape)}.")
    n = int(d.reshape(-1)[0])
    if n < 1:
        raise KernelError(f"depth is {n}, expected a positive value.")
    r = indices.ndim
    if not -r - 1 <= axis <= r:
        raise KernelError(f"axis {axis} is out of range for an output of rank {r + 1}, expected [{-r - 1}, {r}].")
    ax = axis + r + 1 if axis < 0 else axis
    out_shape = indices.shape[:ax] + (n,) + indices.shape[ax:]
    check_alloc(out_shape, values.dtype, options, "OneHot output")
    idx = indices.astype(np.int64)
    idx = np.where(idx < 0, idx + n, idx)  # still out of range (ignored) when below -depth
    classes = np.arange(n, dtype=np.int64).reshape((n,) + (1,) * (r - ax))
    hot = np.expand_dims(idx, ax) == classes
    flat = values.reshape(-1)
    return np.where(hot, flat[1], flat[0]).astype(values.dtype, copy=False)


@register("OneHot", versions=(9, 11, 28))
class OneHot(OpRun):
    """OneHot: 9, 11 (negative indices and axis), 28 (bfloat16 values)."""

    def _run(self, indices, depth, values, attributes=None, verbose=0, fLOG=None):
        return (one_hot(indices, depth, values, self.axis, self.options),)
