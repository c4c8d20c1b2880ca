"""Shape (1, 13, 15 start/end, 19, 21, 23, 24, 25) and Size (1, 13, 19, 21, 23, 24, 25)."""

from __future__ import annotations

import numpy as np

from ..registry import register
from ._op import OpRun


def shape(data: np.ndarray, start: int = 0, end: int | None = None) -> np.ndarray:
    """int64 1-D shape of ``data``, sliced ``[start:end]``; out-of-range bounds clamp (opset 15)."""
    return np.array(np.shape(data)[start:end], dtype=np.int64)


@register("Shape", versions=(1, 13, 15, 19, 21, 23, 24, 25))
class Shape(OpRun):
    uses_blas = False
    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._start = self.atts_value.get("start") or 0
        self._end = self.atts_value.get("end")

    def _run(self, data, attributes=None, verbose=0, fLOG=None):
        return (shape(data, self._start, self._end),)


@register("Size", versions=(1, 13, 19, 21, 23, 24, 25))
class Size(OpRun):
    def _run(self, data, attributes=None, verbose=0, fLOG=None):
        return (np.array(np.size(data), dtype=np.int64),)
