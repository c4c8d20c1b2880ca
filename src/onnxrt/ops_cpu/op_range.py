"""Range (11, 27): an arithmetic sequence from start, by delta, up to limit (exclusive)."""

from __future__ import annotations

import math
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import KernelError
from ..registry import register
from ._alloc import check_alloc
from ._op import OpRun

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))


def _scalar(x: Any, name: str) -> np.generic:
    arr = np.asarray(x)
    if arr.size != 1:
        raise KernelError(f"{name} must be a scalar, got shape {list(arr.shape)}.")
    return arr.reshape(())[()]


def range_(start, limit, delta, stash_type: int = 1, options: dict[str, Any] | None = None) -> np.ndarray:
    """``start + i * delta`` for i in [0, max(ceil((limit - start) / delta), 0)).

    Integers are exact (Python integers for the count). Floats are computed in float64
    and rounded once. float16/bfloat16 with ``stash_type=0`` (opset 27) accumulate in
    their own type, ``x[i] = x[i-1] + delta``, as the operator's function body does;
    with ``stash_type=1`` (the default) they are computed like float32.
    """
    s, lim, d = _scalar(start, "start"), _scalar(limit, "limit"), _scalar(delta, "delta")
    dtype = np.asarray(start).dtype
    if dtype.kind in "iu":
        si, li, di = int(s), int(lim), int(d)
        if di == 0:
            raise KernelError("delta must not be 0.")
        n = max(-((si - li) // di), 0)  # ceil((li - si) / di) with integers
        check_alloc([n], dtype, options, "Range output")
        return (np.arange(n, dtype=np.int64) * di + si).astype(dtype)
    sf, lf, df = float(s), float(lim), float(d)
    if df == 0 or not (math.isfinite(sf) and math.isfinite(lf) and math.isfinite(df)):
        raise KernelError(f"start, limit and delta must be finite and delta non-zero, got {sf}, {lf} and {df}.")
    n = max(math.ceil((lf - sf) / df), 0)
    check_alloc([n], dtype, options, "Range output")
    if dtype in _HALF and not stash_type:
        steps = np.full(n, d, dtype=dtype)
        if n:
            steps[0] = s
        return np.add.accumulate(steps, dtype=dtype) if n else steps
    return (np.arange(n, dtype=np.float64) * df + sf).astype(dtype)


@register("Range", versions=(11, 27))
class Range(OpRun):
    """Range: 11, 27 (float16/bfloat16 with stash_type)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        stash = getattr(self, "stash_type", None)  # an attribute from version 27
        self._stash = 1 if stash is None else int(stash)

    def _run(self, start, limit, delta, attributes=None, verbose=0, fLOG=None):
        return (range_(start, limit, delta, self._stash, self.options),)
