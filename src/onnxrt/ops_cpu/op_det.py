"""Det (11, 22): determinants of a square matrix or a batch of them."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun


def det(x: np.ndarray) -> np.ndarray:
    """Determinants of the trailing [M, M] matrices: shape ``[*]`` for input ``[*, M, M]``.

    LU factorisation through LAPACK; float16/bfloat16 are computed in float32 and
    rounded back.
    """
    x = np.asarray(x)
    if x.ndim < 2 or x.shape[-1] != x.shape[-2]:
        raise KernelError(f"X must be a square matrix or a batch of them [*, M, M], got shape {list(x.shape)}.")
    work = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
    return np.asarray(np.linalg.det(work)).astype(x.dtype, copy=False)


@register("Det", versions=(11, 22))
class Det(OpRun):
    """Det: 11, 22 (bfloat16)."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (det(x),)
