"""Fast paths of the reductions: float32 ReduceSum and ReduceMean over trailing axes by one compiled pass of row sums."""

from __future__ import annotations

from math import prod
from typing import Any

import numpy as np

from .. import native
from ..dispatch import fast_path
from ..ops_cpu._axes import axes_in

_F32 = np.dtype(np.float32)
#: elements from which the compiled rows beat einsum's loop (a ~2 us call; einsum runs a
#: short inner loop per row: a squeeze-excitation's mean of 1152 rows of 49, 27 -> 6 us)
ROW_SUMS_MIN_SIZE = 1 << 12


def _rows(op: Any, data: Any, axes: Any = None) -> tuple[int, int, tuple[int, ...]] | None:
    """(rows, row length, output shape) when the reduced axes are the trailing axes of a
    C-contiguous float32 tensor of ROW_SUMS_MIN_SIZE elements and more; else None."""
    if type(data) is not np.ndarray or data.dtype != _F32 or data.ndim == 0 or data.size < ROW_SUMS_MIN_SIZE:
        return None
    if not data.flags.c_contiguous:
        return None
    if op._axes_input:
        if type(axes) is not np.ndarray or axes.size == 0 or axes.dtype.kind != "i":
            return None
        given = axes
    else:
        given = op._attr_axes
        if not given:
            return None
    try:
        ax = axes_in(given, data.ndim)
    except Exception:  # (invalid axes: the reference reports them)
        return None
    r, k = data.ndim, len(ax)
    if sorted(ax) != list(range(r - k, r)):
        return None
    lead = data.shape[: r - k]
    return prod(lead), prod(data.shape[r - k:]), (lead + (1,) * k if op._keep else lead)


@fast_path(("ReduceSum", "ReduceMean"), "compiled row sums", native=True, min_size=ROW_SUMS_MIN_SIZE, prepared=True,
           when=lambda op, data, axes=None: _rows(op, data, axes) is not None)
def row_sums(op: Any, data: np.ndarray, axes: Any = None) -> Any:
    """ReduceSum / ReduceMean of float32 over trailing axes (a squeeze-excitation's spatial mean, a normalisation's
    last-axis mean): one compiled pass of row sums, then the mean's one division; settled once per signature.

    The sums' order differs from the reference's einsum lanes: within a few ulp at these lengths."""
    k = native.kernels()
    if k is None:
        return None
    rows, n, shape = _rows(op, data, axes)
    count = np.float32(n if op.op_type == "ReduceMean" else 1)
    held = None if axes is None else np.array(axes, copy=True)
    kernel = k.row_sums

    def execute(data: np.ndarray, axes: Any = None) -> tuple | None:
        # (the dispatcher keyed this executor by the data's dtype, shape and strides; axes
        # that are not a model constant may hold other values on another call)
        if (axes is None) != (held is None) or (held is not None and not np.array_equal(axes, held)):
            return None
        out = np.empty(rows, _F32)
        kernel(data.reshape(rows, n), out, count)
        return (out.reshape(shape),)

    return execute
