"""StringConcat (20): element-wise concatenation of string tensors with numpy broadcasting."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun


def string_concat(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """``x[i] + y[i]`` with broadcasting; an object array of str of the broadcast shape.

    Object arrays add element-wise through ``str.__add__`` in numpy's loop. A zero-dimensional
    result stays a 0-d array (numpy alone would hand back a bare ``str``).
    """
    x = np.asarray(x, dtype=object)
    y = np.asarray(y, dtype=object)
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        raise KernelError(f"Shapes {list(x.shape)} and {list(y.shape)} do not broadcast.") from None
    out = np.empty(shape, dtype=object)
    if out.size:
        np.add(x, y, out=out)
    return out


@register("StringConcat", versions=(20,))
class StringConcat(OpRun):
    """StringConcat-20: broadcasting; empty and zero-dimensional tensors keep their shape."""

    def _run(self, x, y, attributes=None, verbose=0, fLOG=None):
        return (string_concat(x, y),)
