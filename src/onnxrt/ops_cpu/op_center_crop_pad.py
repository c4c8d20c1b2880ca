"""CenterCropPad (18): crop or zero-pad chosen axes around the centre."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._indexing import normalize_axis
from ._op import OpRun


def zero_of(dtype: np.dtype) -> object:
    """The padding value of a dtype: 0, False, 0j, or ``""`` for strings."""
    return "" if dtype.kind in "OUS" else dtype.type(0)


def center_crop_pad(data: np.ndarray, shape: np.ndarray, axes: list[int] | None = None, check: Any = None) -> np.ndarray:
    """``data`` cropped or padded to ``shape`` on ``axes`` (default all), centred.

    A crop starts at floor((in - out) / 2), so an odd excess drops one more element at
    the end; a pad puts floor((out - in) / 2) zeros first and the rest last.
    """
    data = np.asarray(data)
    shape = np.asarray(shape)
    rank = data.ndim
    if shape.ndim != 1 or shape.dtype.kind not in "iu":
        raise KernelError(f"shape must be a 1-D integer tensor, got {shape.dtype}{list(shape.shape)}.")
    axes = list(range(rank)) if axes is None else [normalize_axis(a, rank, "axes") for a in axes]
    if len(axes) != shape.size:
        raise KernelError(f"shape has {shape.size} values but {len(axes)} axes are resized.")
    if len(set(axes)) != len(axes):
        raise KernelError(f"axes must not repeat an axis, got {axes}.")
    out_shape = list(data.shape)
    src: list[slice] = [slice(None)] * rank
    dst: list[slice] = [slice(None)] * rank
    for ax, size in zip(axes, shape.tolist()):
        if size < 0:
            raise KernelError(f"shape holds {size} for axis {ax}; sizes must be >= 0.")
        n = data.shape[ax]
        out_shape[ax] = size
        if size <= n:
            start = (n - size) // 2
            src[ax] = slice(start, start + size)
        else:
            start = (size - n) // 2
            dst[ax] = slice(start, start + n)
    if check is not None:
        check(out_shape, data.dtype)
    cropped = data[tuple(src)]
    if cropped.shape == tuple(out_shape):
        return cropped.copy()
    out = np.full(out_shape, zero_of(data.dtype), dtype=data.dtype)
    out[tuple(dst)] = cropped
    return out


@register("CenterCropPad", versions=(18,))
class CenterCropPad(OpRun):
    """CenterCropPad 18 (axes attribute; the padding value is zero)."""

    def _run(self, input_data, shape, attributes=None, verbose=0, fLOG=None):
        return (center_crop_pad(input_data, shape, self.axes, self.check_alloc),)
