"""NonZero (9, 13): the coordinates of the non-zero elements, one column each."""

from __future__ import annotations

import numpy as np

from ..registry import register
from ._op import OpRun


def non_zero(x: np.ndarray) -> np.ndarray:
    """int64 [rank, nnz] coordinates in row-major order; strings count when not empty.

    A scalar is read as a one-element vector (output [1, nnz]), as onnxruntime does:
    the spec leaves rank 0 unspecified.
    """
    x = np.asarray(x)
    if x.ndim == 0:
        x = x.reshape(1)
    if x.dtype == object:
        x = x.astype(bool)  # str truth: "" is zero
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@register("NonZero", versions=(9, 13))
class NonZero(OpRun):
    """NonZero: 9, 13 (bfloat16)."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (non_zero(x),)
