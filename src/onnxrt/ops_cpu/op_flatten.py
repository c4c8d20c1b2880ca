"""Flatten (1, 9, 11, 13, 21, 23, 24, 25): a 2-D view of a tensor, split at an axis."""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun


def flatten(data: np.ndarray, axis: int = 1) -> np.ndarray:
    """2-D view ``[prod(shape[:axis]), prod(shape[axis:])]``; ``axis`` in [-r, r]."""
    data = np.asarray(data)
    r = data.ndim
    if not -r <= axis <= r:
        raise KernelError(f"axis {axis} is out of range for a tensor of rank {r}, expected [{-r}, {r}].")
    a = axis + r if axis < 0 else axis
    return data.reshape(math.prod(data.shape[:a]), math.prod(data.shape[a:]))


@register("Flatten", versions=(1, 9, 11, 13, 21, 23, 24, 25))
class Flatten(OpRun):
    """Flatten: 1, 9 (all types), 11 (negative axis; accepted at every version, as onnxruntime does), 13+ (new types)."""
    uses_blas = False

    def _run(self, data, attributes=None, verbose=0, fLOG=None):
        return (flatten(data, self.axis),)
