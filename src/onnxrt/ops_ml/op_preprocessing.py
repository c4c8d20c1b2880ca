"""Element-wise preprocessing of the ml domain (ml 1): Binarizer, Scaler, Normalizer, Imputer."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..ops_cpu._op import OpRun
from ..registry import register
from ._common import ML_DOMAIN, check_choice, row_max, row_sum


def binarizer(x: np.ndarray, threshold: float = 0.0) -> np.ndarray:
    """1 where x > threshold, 0 elsewhere (NaN included), in the input's type."""
    return (x > threshold).astype(x.dtype)


def _per_feature(values: np.ndarray, x: np.ndarray, name: str) -> np.ndarray:
    """An attribute of length 1 or C (the last axis), ready to broadcast."""
    size = x.shape[-1] if x.ndim else 1
    if values.size not in (1, size):
        raise KernelError(f"attribute {name!r} has {values.size} values, expected 1 or {size} (one per feature).")
    return values


def scaler(x: np.ndarray, offset: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """(x - offset) * scale as float32; offset and scale hold 1 value or one per feature.

    onnxruntime insists on equal lengths; the spec allows 1 or F for each, and so does onnxrt.
    """
    xf = x if x.dtype.kind == "f" else x.astype(np.float32)
    off = _per_feature(offset, x, "offset")
    sc = _per_feature(scale, x, "scale")
    return ((xf - off.astype(xf.dtype)) * sc.astype(xf.dtype)).astype(np.float32, copy=False)


def normalizer(x: np.ndarray, norm: str = "MAX") -> np.ndarray:
    """Rows divided by their maximum (MAX), sum of absolute values (L1) or Euclidean norm (L2).

    A row whose divisor is 0 is left as it is. The spec writes L2 as sqrt(X^2 / sum(X^2)),
    which would drop the signs; onnxruntime (and scikit-learn's Normalizer) keep them:
    X / sqrt(sum(X^2)), and so does onnxrt. Output float32; [C] is one row.
    """
    if x.ndim > 2:
        raise KernelError(f"X must have shape [N, C] or [C], got shape {list(x.shape)}.")
    xf = x if x.dtype.kind == "f" else x.astype(np.float32)
    rows = xf.reshape(1, -1) if xf.ndim == 1 else xf
    if rows.shape[1] == 0:
        return rows.astype(np.float32).reshape(x.shape)
    # (a fast path, onnxrt/fastpaths/ml.py, does this in one compiled pass over the rows)
    if norm == "MAX":
        div = row_max(rows)
    elif norm == "L1":
        div = row_sum(np.abs(rows))
    else:
        div = np.sqrt(row_sum(rows * rows))
    div[div == 0] = 1
    return (rows / div).astype(np.float32, copy=False).reshape(x.shape)


def imputer(x: np.ndarray, imputed: np.ndarray, replaced: float | int) -> np.ndarray:
    """x where it differs from ``replaced`` (NaN matches NaN), ``imputed`` (1 or C values) elsewhere."""
    values = _per_feature(imputed, x, "imputed_value")
    if x.dtype.kind == "f" and np.isnan(replaced):
        mask = np.isnan(x)
    else:
        mask = x == replaced
    if not mask.any():
        return x
    fill = np.broadcast_to(values.astype(x.dtype), x.shape)
    return np.where(mask, fill, x)


@register("Binarizer", versions=(1,), domain=ML_DOMAIN)
class Binarizer(OpRun):
    """Binarizer (ml 1): 1 where x > threshold, 0 elsewhere; NaN gives 0 as the spec says
    (onnxruntime raises on NaN)."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (binarizer(x, self.threshold),)


@register("Scaler", versions=(1,), domain=ML_DOMAIN)
class Scaler(OpRun):
    """Scaler (ml 1): (X - offset) * scale, float32 output."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._offset = np.asarray(self.offset if self.offset is not None else [0.0], dtype=np.float32)
        self._scale = np.asarray(self.scale if self.scale is not None else [1.0], dtype=np.float32)
        if self._offset.size == 0 or self._scale.size == 0:
            raise InvalidAttributeError(f"{self.node_label()}: attributes 'offset' and 'scale' must not be empty.")

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (scaler(x, self._offset, self._scale),)


@register("Normalizer", versions=(1,), domain=ML_DOMAIN)
class Normalizer(OpRun):
    """Normalizer (ml 1): MAX, L1 or L2 per row, float32 output."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        check_choice(self, "norm", self.norm, ("MAX", "L1", "L2"))

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (normalizer(x, self.norm),)


@register("Imputer", versions=(1,), domain=ML_DOMAIN)
class Imputer(OpRun):
    """Imputer (ml 1): float inputs use the ``*_float(s)`` attributes, integer inputs the
    ``*_int64(s)`` ones; the output keeps the input type."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        floats, ints = self.imputed_value_floats, self.imputed_value_int64s
        if floats and ints:
            raise InvalidAttributeError(
                f"{self.node_label()} defines both 'imputed_value_floats' and 'imputed_value_int64s'; exactly one is expected."
            )
        self._floats = np.asarray(floats, dtype=np.float32) if floats else None
        self._ints = np.asarray(ints, dtype=np.int64) if ints else None
        if self._floats is None and self._ints is None:
            raise InvalidAttributeError(
                f"{self.node_label()} defines neither 'imputed_value_floats' nor 'imputed_value_int64s'."
            )

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if x.dtype.kind == "f":
            if self._floats is None:
                raise KernelError(f"{self.node_label()} has integer imputed values but a {x.dtype} input.")
            return (imputer(x, self._floats, self.replaced_value_float),)
        if self._ints is None:
            raise KernelError(f"{self.node_label()} has float imputed values but a {x.dtype} input.")
        return (imputer(x, self._ints, self.replaced_value_int64),)
