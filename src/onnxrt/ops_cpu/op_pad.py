"""Pad (1, 2, 11, 13, 18, 19, 21, 23, 24, 25): constant, reflect, edge and wrap padding; negative pads crop."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._alloc import check_alloc
from ._axes import as_int_list, axes_in
from ._op import OpRun

MODES = ("constant", "reflect", "edge", "wrap")


def _zero_of(dtype: np.dtype) -> Any:
    """The default constant: 0, False, or the empty string for string tensors."""
    if dtype == object:
        return ""
    return np.zeros((), dtype=dtype)[()]


def pad(
    data: np.ndarray,
    pads,
    mode: str = "constant",
    constant_value: Any = None,
    axes=None,
    options: dict[str, Any] | None = None,
) -> np.ndarray:
    """``data`` padded by ``pads`` = [begin of each axis..., end of each axis...].

    ``axes`` (opset 18) names the padded axes (default: all, in order). A negative pad
    removes elements at that end; cropping happens first, then padding, as onnxruntime
    does. ``constant`` fills with ``constant_value`` (default 0 / False / ""), ``reflect``
    mirrors without repeating the edge, ``edge`` repeats it, ``wrap`` tiles the data
    cyclically. The output size is checked against the allocation limit first.
    """
    data = np.asarray(data)
    rank = data.ndim
    p = as_int_list(pads)
    ax = list(range(rank)) if axes is None or len(as_int_list(axes)) == 0 else list(axes_in(axes, rank))
    if len(p) != 2 * len(ax):
        raise KernelError(f"pads has {len(p)} values, expected {2 * len(ax)} (twice the {len(ax)} padded axes).")
    if mode not in MODES:
        raise KernelError(f"mode is {mode!r}, expected one of {list(MODES)!r}.")
    before = [0] * rank
    after = [0] * rank
    for i, a in enumerate(ax):
        before[a] = p[i]
        after[a] = p[i + len(ax)]
    if any(v < 0 for v in before + after):
        crop = []
        for a in range(rank):
            lo, hi = max(-before[a], 0), data.shape[a] - max(-after[a], 0)
            if hi < lo:
                raise KernelError(
                    f"negative pads {before[a]} and {after[a]} remove more than the {data.shape[a]} elements of axis {a}."
                )
            crop.append(slice(lo, hi))
        data = data[tuple(crop)]
        before = [max(v, 0) for v in before]
        after = [max(v, 0) for v in after]
    out_shape = [d + b + e for d, b, e in zip(data.shape, before, after)]
    check_alloc(out_shape, data.dtype, options, "Pad output")
    if not any(before) and not any(after):
        return data
    if mode == "constant":
        value = _zero_of(data.dtype) if constant_value is None or np.size(constant_value) == 0 else np.asarray(constant_value).reshape(-1)[0]
        out = np.empty(out_shape, dtype=data.dtype)
        full = [slice(None)] * rank
        for a in range(rank):  # fill the border slabs only; the interior is copied next
            if before[a]:
                idx = list(full)
                idx[a] = slice(0, before[a])
                out[tuple(idx)] = value
            if after[a]:
                idx = list(full)
                idx[a] = slice(out_shape[a] - after[a], None)
                out[tuple(idx)] = value
        out[tuple(slice(b, b + d) for b, d in zip(before, data.shape))] = data
        return out
    for a in range(rank):
        if (before[a] or after[a]) and data.shape[a] == 0:
            raise KernelError(f"mode {mode!r} cannot pad axis {a}, which is empty.")
    return np.pad(data, list(zip(before, after)), mode=mode)


@register("Pad", versions=(1, 2, 11, 13, 18, 19, 21, 23, 24, 25))
class Pad(OpRun):
    """Pad: 1 (paddings attribute), 2 (pads and value attributes), 11 (pads and constant_value
    inputs, integers), 13 (bfloat16, strings, bool), 18 (axes input), 19 (wrap mode), 21+ (new types)."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        since = self.since_version or 25
        allowed = MODES if since >= 19 else MODES[:3]
        if self.mode not in allowed:
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'mode' is {self.mode!r}, expected one of {list(allowed)!r} at version {since}."
            )
        self._attr_pads = None
        if since < 11:
            self._attr_pads = as_int_list(self.paddings if since < 2 else self.pads)
            self._attr_value = self.value

    def _run(self, data, pads=None, constant_value=None, axes=None, attributes=None, verbose=0, fLOG=None):
        if self._attr_pads is not None:
            return (pad(data, self._attr_pads, self.mode, self._attr_value, options=self.options),)
        if pads is None:
            raise KernelError("Pad needs the pads input from version 11.")
        return (pad(data, pads, self.mode, constant_value, axes, options=self.options),)
