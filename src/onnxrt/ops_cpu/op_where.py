"""Where (9, 16): element-wise choice between two tensors by a boolean condition, with broadcasting."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun


def where(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x`` where ``condition`` is true, ``y`` elsewhere; the three broadcast together."""
    x = np.asarray(x)
    y = np.asarray(y)
    try:
        out = np.where(condition, x, y)
    except ValueError as e:
        raise KernelError(
            f"condition, X and Y of shapes {list(np.shape(condition))}, {list(x.shape)} and {list(y.shape)} do not broadcast."
        ) from e
    return out if out.dtype == x.dtype else out.astype(x.dtype)


@register("Where", versions=(9, 16))
class Where(OpRun):
    """Where: 9, 16 (bfloat16)."""
    uses_blas = False

    def _run(self, condition, x, y, attributes=None, verbose=0, fLOG=None):
        return (where(condition, x, y),)
