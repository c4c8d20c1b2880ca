"""Concat (1, 4, 11, 13): join tensors along an axis."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._axes import axis_in
from ._op import OpRun


def concat(*inputs: np.ndarray, axis: int = 1, check: Callable[[Any, Any], None] | None = None) -> np.ndarray:
    """``np.concatenate`` along ``axis`` (negative from the end); every input must have the
    same rank and the same dimensions off the axis. Empty inputs take part like others.
    ``check(shape, dtype)`` (the kernel's :meth:`OpRun.check_alloc`) sees the output shape
    before it is allocated."""
    if not inputs:
        raise KernelError("Concat needs at least one input.")
    arrays = [np.asarray(x) for x in inputs]
    rank = arrays[0].ndim
    if rank == 0:
        raise KernelError("Concat inputs must have rank >= 1, got a scalar.")
    ax = axis_in(axis, rank)
    first = arrays[0]
    for k, a in enumerate(arrays[1:], 1):
        if a.ndim != rank or a.shape[:ax] != first.shape[:ax] or a.shape[ax + 1 :] != first.shape[ax + 1 :]:
            raise KernelError(
                f"input {k} has shape {list(a.shape)}, which cannot be joined on axis {axis} "
                f"with input 0 of shape {list(first.shape)}."
            )
        if a.dtype != first.dtype:
            raise KernelError(f"input {k} has dtype {a.dtype}, expected {first.dtype} like input 0.")
    if len(arrays) == 1:
        return first  # values are read-only in the engine: no copy needed
    if check is not None:
        check(first.shape[:ax] + (sum(a.shape[ax] for a in arrays),) + first.shape[ax + 1 :], first.dtype)
    return np.concatenate(arrays, axis=ax)


@register("Concat", versions=(1, 4, 11, 13))
class Concat(OpRun):
    """Concat: 1 (axis optional, default 1), 4 (axis required, all types), 11 (negative axis), 13 (bfloat16)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._axis = 1 if self.axis is None else int(self.axis)

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        return (concat(*inputs, axis=self._axis, check=self.check_alloc),)
