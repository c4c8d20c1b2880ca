"""ArgMax and ArgMin (1, 11, 12, 13): index of the extreme value along an axis, first or last occurrence."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import axis_in
from ._op import OpRun


def _arg(fn, data: np.ndarray, axis: int, keepdims: int, select_last_index: int) -> np.ndarray:
    data = np.asarray(data)
    if data.ndim == 0:
        raise KernelError("data must have rank >= 1.")
    ax = axis_in(axis, data.ndim)
    if data.shape[ax] == 0:
        raise KernelError(f"cannot take the arg-extreme of an empty axis {axis} (shape {list(data.shape)}).")
    if select_last_index:
        # the first occurrence in the reversed axis is the last one of the original
        n = data.shape[ax]
        idx = fn(np.flip(data, ax), axis=ax, keepdims=bool(keepdims))
        idx = (n - 1) - idx
    else:
        idx = fn(data, axis=ax, keepdims=bool(keepdims))
    return np.asarray(idx, dtype=np.int64)


def argmax(data: np.ndarray, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    """int64 indices of the maxima along ``axis`` (the first one, or the last with ``select_last_index``)."""
    return _arg(np.argmax, data, axis, keepdims, select_last_index)


def argmin(data: np.ndarray, axis: int = 0, keepdims: int = 1, select_last_index: int = 0) -> np.ndarray:
    """int64 indices of the minima along ``axis`` (the first one, or the last with ``select_last_index``)."""
    return _arg(np.argmin, data, axis, keepdims, select_last_index)


def _make(name: str, fn) -> type[OpRun]:
    def _run(self, data, attributes=None, verbose=0, fLOG=None):
        return (fn(data, self.axis, self.keepdims, self._last),)

    def __init__(self, onnx_node, desc=None, **options):
        OpRun.__init__(self, onnx_node, desc, **options)
        # select_last_index exists from version 12; before, the first index is returned
        self._last = int(getattr(self, "select_last_index", 0) or 0)

    doc = f"{name}: 1, 11 (negative axis), 12 (select_last_index), 13 (bfloat16)."
    cls = type(name, (OpRun,), {"__init__": __init__, "_run": _run, "__doc__": doc, "__module__": __name__})
    return register(name, versions=(1, 11, 12, 13))(cls)


ArgMax = _make("ArgMax", argmax)
ArgMin = _make("ArgMin", argmin)
