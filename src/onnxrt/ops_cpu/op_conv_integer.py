"""ConvInteger (10): integer convolution with zero points, exact through a floating BLAS product."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._conv_common import (
    conv_attributes,
)
from ._op import OpRun
from .op_conv import conv_core, conv_geometry

#: float32 sums integers exactly below 2**24
_F32_EXACT = 1 << 24


def zero_point(zp: np.ndarray | None, n: int, name: str, per_channel: bool) -> np.ndarray:
    """A zero point as int64: a scalar (or one-element tensor), or, when allowed, one value per output channel."""
    if zp is None:
        return np.zeros((), np.int64)
    zp = np.asarray(zp)
    if zp.size == 1:
        return zp.reshape(()).astype(np.int64)
    if per_channel and zp.ndim == 1 and zp.shape[0] == n:
        return zp.astype(np.int64)
    expected = f"a scalar or {n} values (one per output channel)" if per_channel else "a scalar"
    raise KernelError(f"{name} must be {expected}, got shape {list(zp.shape)}.")


def integer_conv(
    x: np.ndarray,
    w: np.ndarray,
    x_zero_point: np.ndarray | None,
    w_zero_point: np.ndarray | None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> np.ndarray:
    """``sum (x - x_zp) * (w - w_zp)`` over each window, as exact integers held in a float array.

    Padding contributes zero (the padded value is the zero point). The product runs in
    float32 when ``max|x - x_zp| * max|w - w_zp| * (C/group * prod(K))`` stays below 2**24,
    where every partial sum is an exact float32 integer, otherwise in float64 (exact
    below 2**53): BLAS speed without integer overflow.
    """
    x = np.asarray(x)
    w = np.asarray(w)
    kernel, s, d, pb, out_shape = conv_geometry(x, w, group, kernel_shape, strides, dilations, pads, auto_pad)
    m_out = w.shape[0]
    xzp = zero_point(x_zero_point, 1, "x_zero_point", per_channel=False)
    wzp = zero_point(w_zero_point, m_out, "w_zero_point", per_channel=True)
    xd = x.astype(np.int32) - np.int32(xzp)
    wzp32 = wzp.astype(np.int32)
    if wzp32.ndim:  # per output channel
        wzp32 = wzp32.reshape((-1,) + (1,) * (w.ndim - 1))
    wd = w.astype(np.int32) - wzp32
    if x.shape[0] == 0 or m_out == 0 or 0 in out_shape:
        return np.zeros((x.shape[0], m_out) + out_shape, np.float64)
    terms = w.shape[1] * int(np.prod(kernel))
    bound = int(np.abs(xd).max(initial=0)) * int(np.abs(wd).max(initial=0)) * terms
    ftype = np.float32 if bound < _F32_EXACT else np.float64
    return conv_core(xd.astype(ftype), wd.astype(ftype), pb, s, d, group, out_shape)


def conv_integer(
    x: np.ndarray,
    w: np.ndarray,
    x_zero_point: np.ndarray | None = None,
    w_zero_point: np.ndarray | None = None,
    **attributes,
) -> np.ndarray:
    """ONNX ConvInteger: int32 ``Y = conv(x - x_zero_point, w - w_zero_point)``.

    x and w are int8 or uint8; ``w_zero_point`` may be per output channel. Sums beyond
    the int32 range wrap around, as the spec allows ("the accumulation may overflow if
    and only if in 32 bits"). Attributes as :func:`onnxrt.ops_cpu.op_conv.conv`.
    """
    acc = integer_conv(x, w, x_zero_point, w_zero_point, **attributes)
    return acc.astype(np.int64).astype(np.int32)


class _IntegerConvBase(OpRun):
    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._kw = conv_attributes(self)
        self._checked: tuple | None = None  # the shapes whose sizes passed check_alloc

    def _check_sizes(self, x, w) -> None:
        # the model's pads decide the accumulator's and the padded input's sizes: checked once per
        # shape, at float64 (the widest type integer_conv computes in)
        x, w = np.asarray(x), np.asarray(w)
        if (x.shape, w.shape) == self._checked:
            return
        kw = self._kw
        _, _, _, _, out_shape = conv_geometry(x, w, kw["group"], kw["kernel_shape"], kw["strides"], kw["dilations"],
                                              kw["pads"], kw["auto_pad"])
        self.check_alloc((x.shape[0], w.shape[0]) + tuple(out_shape), np.float64, "accumulator")
        pads = kw["pads"]
        if pads is not None and len(pads) == 2 * (x.ndim - 2):
            nd = x.ndim - 2
            self.check_alloc(list(x.shape[:2]) + [n + int(pads[i]) + int(pads[i + nd]) for i, n in enumerate(x.shape[2:])],
                             np.float64, "padded input")
        self._checked = (x.shape, w.shape)


@register("ConvInteger", versions=(10,))
class ConvInteger(_IntegerConvBase):
    """ConvInteger: 10. Kernel: :func:`conv_integer`."""

    def _run(self, x, w, x_zero_point=None, w_zero_point=None, attributes=None, verbose=0, fLOG=None):
        self._check_sizes(x, w)
        return (conv_integer(x, w, x_zero_point, w_zero_point, **self._kw),)
