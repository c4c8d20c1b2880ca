"""Split (1, 2, 11, 13, 18): cut a tensor into parts along an axis (views, no copy)."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._axes import as_int_list, axis_in
from ._op import OpRun


def split(data: np.ndarray, split=None, axis: int = 0, num_outputs: int | None = None) -> list[np.ndarray]:
    """Parts of ``data`` along ``axis``: of the sizes in ``split`` (summing to the axis
    length), or ``num_outputs`` parts. Equal parts must divide the axis exactly, except
    with ``num_outputs`` (opset 18): then parts have ceil(n / num_outputs) elements and
    the last one is smaller. Outputs are views of ``data``."""
    data = np.asarray(data)
    if data.ndim == 0:
        raise KernelError("input must have rank >= 1.")
    ax = axis_in(axis, data.ndim)
    n = data.shape[ax]
    sizes = as_int_list(split)
    if sizes:
        if any(s < 0 for s in sizes) or sum(sizes) != n:
            raise KernelError(f"split {sizes} must be non-negative and sum to {n}, the length of axis {axis}.")
    elif num_outputs is None or num_outputs <= 0:
        raise KernelError("Split needs the split sizes or a positive number of outputs.")
    elif n % num_outputs == 0:
        sizes = [n // num_outputs] * num_outputs
    else:
        chunk = -(-n // num_outputs)
        sizes = [chunk] * (n // chunk) + ([n % chunk] if n % chunk else [])
        if len(sizes) != num_outputs:
            raise KernelError(f"cannot split an axis of length {n} into {num_outputs} parts of at most {chunk}.")
    bounds = np.cumsum([0] + sizes)
    idx = [slice(None)] * data.ndim
    parts = []
    for lo, hi in zip(bounds[:-1], bounds[1:]):
        idx[ax] = slice(int(lo), int(hi))
        parts.append(data[tuple(idx)])
    return parts


@register("Split", versions=(1, 2, 11, 13, 18))
class Split(OpRun):
    """Split: 1 (split attribute or second input), 2 and 11 (split attribute; 11 negative axis),
    13 (split input), 18 (num_outputs attribute: uneven last part)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        since = self.since_version or 18
        self._n_out = len(onnx_node.output)
        self._axis = 0 if self.axis is None else int(self.axis)
        self._attr_split = as_int_list(self.split) if since < 13 and getattr(self, "split", None) else None
        self._input_split = since == 1 or since >= 13
        num = getattr(self, "num_outputs", None)
        if num is not None and num != self._n_out:
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'num_outputs' is {num}, but the node has {self._n_out} outputs."
            )
        self._uneven = num is not None

    def _run(self, data, split=None, attributes=None, verbose=0, fLOG=None):
        sizes = self._attr_split
        if sizes is None and self._input_split and split is not None:
            # version 1 types the split input like the data (a float tensor)
            sizes = [int(v) for v in np.asarray(split).reshape(-1).tolist()]
        parts = split_parts(data, sizes, self._axis, self._n_out, self._uneven)
        return tuple(parts)


def split_parts(data, sizes, axis, n_out, uneven):
    """Kernel call of the class: equal parts must divide the axis unless ``uneven`` (num_outputs)."""
    if not sizes:
        n = data.shape[axis_in(axis, data.ndim)] if data.ndim else 0
        if not uneven and n_out and n % n_out:
            raise KernelError(f"cannot split an axis of length {n} into {n_out} equal parts.")
    parts = split(data, sizes, axis, n_out)
    if len(parts) != n_out:
        raise KernelError(f"split gives {len(parts)} parts, but the node has {n_out} outputs.")
    return parts
