"""Squeeze and Unsqueeze (1, 11, 13, 21, 23, 24, 25): remove or insert axes of size 1 (views, no copy)."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import as_int_list, axes_in
from ._op import OpRun

_VERSIONS = (1, 11, 13, 21, 23, 24, 25)


def squeeze(data: np.ndarray, axes=None) -> np.ndarray:
    """``data`` without the listed axes of size 1 (every axis of size 1 when ``axes`` is None or empty)."""
    data = np.asarray(data)
    if axes is None or len(as_int_list(axes)) == 0:
        return data.reshape([d for d in data.shape if d != 1])
    ax = axes_in(axes, data.ndim)
    for a in ax:
        if data.shape[a] != 1:
            raise KernelError(f"cannot squeeze axis {a} of size {data.shape[a]} (shape {list(data.shape)}), expected size 1.")
    return data.reshape([d for i, d in enumerate(data.shape) if i not in ax])


def unsqueeze(data: np.ndarray, axes) -> np.ndarray:
    """``data`` with axes of size 1 inserted at ``axes``, which index the output (rank r + len(axes))."""
    data = np.asarray(data)
    listed = as_int_list(axes)
    rank = data.ndim + len(listed)
    ax = set(axes_in(listed, rank))
    it = iter(data.shape)
    return data.reshape([1 if i in ax else next(it) for i in range(rank)])


@register("Squeeze", versions=_VERSIONS)
class Squeeze(OpRun):
    """Squeeze: 1 and 11 (axes attribute; 11 allows negative axes), 13+ (axes input)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._attr = (self.since_version or 25) < 13

    def _run(self, data, axes=None, attributes=None, verbose=0, fLOG=None):
        return (squeeze(data, self.axes if self._attr else axes),)


@register("Unsqueeze", versions=_VERSIONS)
class Unsqueeze(OpRun):
    """Unsqueeze: 1 and 11 (axes attribute; 11 allows negative axes), 13+ (axes input)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._attr = (self.since_version or 25) < 13

    def _run(self, data, axes=None, attributes=None, verbose=0, fLOG=None):
        if self._attr:
            return (unsqueeze(data, self.axes),)
        if axes is None:
            raise KernelError("Unsqueeze needs the axes input from version 13.")
        return (unsqueeze(data, axes),)
