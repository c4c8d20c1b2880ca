"""EyeLike (9, 22): a 2-D tensor of the input's shape with ones on a diagonal."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..dtypes import np_dtype
from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun


def eye_like(x: np.ndarray, dtype: Any = None, k: int = 0, check: Any = None) -> np.ndarray:
    """Zeros of ``x``'s 2-D shape with ones where ``j - i == k``; of ``dtype`` (default: ``x``'s)."""
    x = np.asarray(x)
    if x.ndim != 2:
        raise KernelError(f"input must be 2-D, got shape {list(x.shape)}.")
    dtype = x.dtype if dtype is None else dtype
    if check is not None:
        check(x.shape, dtype)
    return np.eye(x.shape[0], x.shape[1], k=k, dtype=dtype)


@register("EyeLike", versions=(9, 22))
class EyeLike(OpRun):
    """EyeLike: 9, 22 (bfloat16). The dtype attribute is an ONNX element type code."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._dtype = None
        if self.dtype is not None:
            try:
                self._dtype = np_dtype(self.dtype)
            except KeyError:
                raise InvalidAttributeError(f"{self.node_label()}: attribute 'dtype' {self.dtype} is not an element type.") from None

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (eye_like(x, self._dtype, self.k, self.check_alloc),)
