"""ConstantOfShape (9, 20, 21, 23, 24, 25): a tensor of a given shape filled with one value."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._alloc import check_alloc
from ._axes import as_int_list
from ._op import OpRun

_DEFAULT = np.zeros(1, dtype=np.float32)


def constant_of_shape(shape, value: np.ndarray | None = None, options: dict[str, Any] | None = None) -> np.ndarray:
    """A tensor of ``shape`` (1-D int64, dimensions >= 0; empty gives a scalar) filled with
    the single element of ``value`` (float32 0 by default), of ``value``'s type. The
    size is checked against the allocation limit before allocating."""
    dims = as_int_list(shape)
    if any(d < 0 for d in dims):
        raise KernelError(f"shape {dims} has a negative dimension.")
    val = _DEFAULT if value is None else np.asarray(value)
    check_alloc(dims, val.dtype, options, "ConstantOfShape output")
    return np.full(dims, val.reshape(-1)[0], dtype=val.dtype)


@register("ConstantOfShape", versions=(9, 20, 21, 23, 24, 25))
class ConstantOfShape(OpRun):
    """ConstantOfShape: 9, 20 (bfloat16, float8), 21 (int4), 23 (float4), 24 (float8e8m0), 25 (int2)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if self.value is not None and np.asarray(self.value).size != 1:
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'value' must hold one element, got shape {list(np.shape(self.value))}."
            )

    def _run(self, shape, attributes=None, verbose=0, fLOG=None):
        return (constant_of_shape(shape, self.value, self.options),)
