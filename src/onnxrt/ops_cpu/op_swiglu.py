"""SwiGLU (28): ``Swish_alpha(A) * B``, the gated activation of transformer feed-forward blocks."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._nn_math import compute_dtype, sigmoid
from ._op import OpRun


def swiglu(A: np.ndarray, B: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    """``A * sigmoid(alpha * A) * B`` element-wise; A and B must have the same shape (no broadcasting).

    float16 and bfloat16 compute in float32 and round once.
    """
    A, B = np.asarray(A), np.asarray(B)
    if A.shape != B.shape:
        raise KernelError(f"A and B must have the same shape, got {list(A.shape)} and {list(B.shape)}.")
    dt = compute_dtype(A.dtype)
    a = A.astype(dt)  # a copy, reused as scratch
    gate = sigmoid(np.multiply(a, dt.type(alpha)))
    gate *= a
    gate *= B
    return gate.astype(A.dtype, copy=False)


@register("SwiGLU", versions=(28,))
class SwiGLU(OpRun):
    """SwiGLU (28)."""

    def _run(self, A, B, attributes=None, verbose=0, fLOG=None):
        return (swiglu(A, B, alpha=self.alpha),)
