"""Slice (1, 10, 11, 13): strided windows of a tensor (views), negative steps and clamped bounds."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import as_int_list, axes_in
from ._op import OpRun


def slice_index(shape: tuple[int, ...], starts, ends, axes=None, steps=None) -> tuple[slice, ...]:
    """The numpy index of an ONNX slice.

    Negative starts/ends count from the end of their axis; then, as the spec says,
    starts and ends are clamped to [0, dim] for positive steps and to [0, dim-1] and
    [-1, dim-1] for negative ones (an end of -1 then means "through index 0", which a
    Python slice writes as None).
    """
    st = as_int_list(starts)
    en = as_int_list(ends)
    rank = len(shape)
    ax = list(range(len(st))) if axes is None or len(as_int_list(axes)) == 0 else list(axes_in(axes, rank))
    sp = [1] * len(st) if steps is None or len(as_int_list(steps)) == 0 else as_int_list(steps)
    if not len(st) == len(en) == len(ax) == len(sp):
        raise KernelError(
            f"starts, ends, axes and steps must have the same length, got {len(st)}, {len(en)}, {len(ax)} and {len(sp)}."
        )
    if len(ax) > rank:
        raise KernelError(f"{len(ax)} axes are sliced, but the input has rank {rank}.")
    index = [slice(None)] * rank
    for a, s, e, k in zip(ax, st, en, sp):
        dim = shape[a]
        if k == 0:
            raise KernelError(f"steps must not be 0 (axis {a}).")
        if s < 0:
            s += dim
        if e < 0:
            e += dim
        if k > 0:
            s = min(max(s, 0), dim)
            e = min(max(e, 0), dim)
            index[a] = slice(s, e, k)
        else:
            s = min(max(s, 0), dim - 1)
            e = min(max(e, -1), dim - 1)
            index[a] = slice(s, None if e < 0 else e, k)
    return tuple(index)


def slice_(data: np.ndarray, starts, ends, axes=None, steps=None) -> np.ndarray:
    """``data[index]`` for the ONNX slice (see :func:`slice_index`); a view of ``data``."""
    data = np.asarray(data)
    return data[slice_index(data.shape, starts, ends, axes, steps)]


@register("Slice", versions=(1, 10, 11, 13))
class Slice(OpRun):
    """Slice: 1 (starts/ends/axes attributes), 10 (inputs, steps), 11 (negative axes), 13 (bfloat16)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._attrs = (self.since_version or 13) < 10

    def _run(self, data, starts=None, ends=None, axes=None, steps=None, attributes=None, verbose=0, fLOG=None):
        if self._attrs:
            return (data[slice_index(data.shape, self.starts, self.ends, self.axes)],)
        if starts is None or ends is None:
            raise KernelError("Slice needs the starts and ends inputs from version 10.")
        return (data[slice_index(data.shape, starts, ends, axes, steps)],)
