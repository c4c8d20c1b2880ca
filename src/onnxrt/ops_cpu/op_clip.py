"""Clip (1, 6: bounds as attributes; 11, 12, 13: bounds as optional scalar inputs)."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun


def _bound(value: np.ndarray | float | None, dtype: np.dtype, name: str) -> np.generic | None:
    """A bound as a scalar of the input's type (None: no bound on that side)."""
    if value is None:
        return None
    arr = np.asarray(value)
    if arr.size != 1:
        raise KernelError(f"{name!r} must be a scalar (a tensor of one element), got shape {list(arr.shape)}.")
    with np.errstate(over="ignore"):  # FLT_MAX defaults overflow to inf in float16: no bound, as intended
        return arr.reshape(()).astype(dtype)[()]


def clip(x: np.ndarray, min: np.ndarray | float | None = None, max: np.ndarray | float | None = None) -> np.ndarray:  # noqa: A002
    """``Min(max, Max(x, min))``: when min > max every value becomes max (Clip 13 spec).

    An absent bound leaves that side open (numeric_limits::lowest()/max() of the type).
    NaN inputs stay NaN. The output is always a new array.
    """
    lo = _bound(min, x.dtype, "min")
    hi = _bound(max, x.dtype, "max")
    if lo is None and hi is None:
        return x.copy()
    if lo is None:
        return np.asarray(np.minimum(x, hi))
    y = np.asarray(np.maximum(x, lo))  # a 0-d input gives a numpy scalar: keep an array
    if hi is not None:
        np.minimum(y, hi, out=y)
    return y


def _type_limits(dtype: np.dtype) -> tuple[np.generic, np.generic] | None:
    """numeric_limits::lowest() and max() of a float type (None for integers: no clamping)."""
    if dtype.kind in "iub" or dtype == object:
        return None
    info = ml_dtypes.finfo(dtype)
    return dtype.type(info.min), dtype.type(info.max)


@register("Clip", versions=(1, 6, 11, 12, 13))
class Clip(OpRun):
    """Clip: 1 (attributes min/max, absent means open), 6 (attributes defaulting to -/+FLT_MAX),
    11 (bounds become optional scalar inputs), 12 (integer types), 13 (bfloat16).

    From 11 an omitted bound is "numeric_limits::lowest() and numeric_limits::max()" of the
    type, as the spec says: a float infinity becomes the largest finite value (as
    onnxruntime does; onnx.reference leaves it infinite).
    """
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._from_attributes = (self.since_version or 13) < 11

    def _run(self, x, min=None, max=None, attributes=None, verbose=0, fLOG=None):  # noqa: A002
        if self._from_attributes:
            return (clip(x, self.min, self.max),)
        if min is None or max is None:
            limits = _type_limits(x.dtype)
            if limits is not None:
                min = limits[0] if min is None else min  # noqa: A001
                max = limits[1] if max is None else max  # noqa: A001
        return (clip(x, min, max),)
