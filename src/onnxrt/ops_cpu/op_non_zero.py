"""NonZero (9, 13): the coordinates of the non-zero elements, one column each."""

from __future__ import annotations

import numpy as np

from ..registry import register
from ._op import OpRun


def non_zero(x: np.ndarray) -> np.ndarray:
    """int64 [rank, nnz] coordinates in row-major order; strings count when not empty.

    A scalar gives shape [0, nnz] (nnz is 0 or 1): NonZero-9 and 13 say so explicitly ("for
    scalar input, NonZero produces output shape (0, N) instead of (1, N)"); onnxruntime
    returns [1, nnz] there, which tests/fuzz/test_oracle_disagreements.py records.
    """
    x = np.asarray(x)
    if x.dtype == object:
        x = x.astype(bool)  # str truth: "" is zero
    if x.ndim == 0:
        return np.zeros((0, int(bool(x))), dtype=np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@register("NonZero", versions=(9, 13))
class NonZero(OpRun):
    """NonZero: 9, 13 (bfloat16)."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (non_zero(x),)
