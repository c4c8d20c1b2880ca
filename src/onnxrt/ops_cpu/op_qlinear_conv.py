"""QLinearConv (10): quantized convolution, exact integer accumulation then float32 requantization."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import KernelError
from ..registry import register
from .op_conv_integer import _IntegerConvBase, integer_conv


def _scale(value: np.ndarray, n: int, name: str, per_channel: bool) -> np.ndarray:
    v = np.asarray(value, dtype=np.float32)
    if v.size == 1:
        return v.reshape(())
    if per_channel and v.ndim == 1 and v.shape[0] == n:
        return v
    expected = f"a scalar or {n} values (one per output channel)" if per_channel else "a scalar"
    raise KernelError(f"{name} must be {expected}, got shape {list(v.shape)}.")


def qlinear_conv(
    x: np.ndarray,
    x_scale: np.ndarray,
    x_zero_point: np.ndarray,
    w: np.ndarray,
    w_scale: np.ndarray,
    w_zero_point: np.ndarray,
    y_scale: np.ndarray,
    y_zero_point: np.ndarray,
    B: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX QLinearConv: ``y = saturate(round(acc * x_scale * w_scale / y_scale) + y_zero_point)``.

    ``acc`` is the exact integer sum of ``(x - x_zp) * (w - w_zp)`` plus the int32 bias B;
    w_scale / w_zero_point may be per output channel. The multiplier
    ``x_scale * w_scale / y_scale`` and the product are float32 and rounding is to
    nearest even, as onnxruntime requantizes (the spec does not fix the precision). The
    output type is y_zero_point's (int8 or uint8).
    """
    w = np.asarray(w)
    m_out = w.shape[0] if w.ndim else 0
    acc = integer_conv(
        x, w, x_zero_point, w_zero_point,
        auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads, strides=strides,
    )
    nd = acc.ndim - 2
    if B is not None:
        B = np.asarray(B)
        if B.shape != (m_out,):
            raise KernelError(f"B must have shape [{m_out}] (one int32 per output channel), got {list(B.shape)}.")
        acc = acc.astype(np.float64, copy=False) + B.astype(np.float64).reshape((-1,) + (1,) * nd)
    xs = _scale(x_scale, 1, "x_scale", False)
    ws = _scale(w_scale, m_out, "w_scale", True)
    ys = _scale(y_scale, 1, "y_scale", False)
    multiplier = (xs * ws / ys).astype(np.float32)
    if multiplier.ndim:
        multiplier = multiplier.reshape((-1,) + (1,) * nd)
    yzp = np.asarray(y_zero_point)
    if yzp.size != 1:
        raise KernelError(f"y_zero_point must be a scalar, got shape {list(yzp.shape)}.")
    out_dtype = yzp.dtype
    info = np.iinfo(out_dtype)
    y = acc.astype(np.float32) * multiplier
    np.rint(y, out=y)
    y += np.float32(yzp.reshape(()))
    np.clip(y, info.min, info.max, out=y)
    return y.astype(out_dtype)


@register("QLinearConv", versions=(10,))
class QLinearConv(_IntegerConvBase):
    """QLinearConv: 10. Kernel: :func:`qlinear_conv`."""

    def _run(self, x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B=None,
             attributes=None, verbose=0, fLOG=None):
        self._check_sizes(x, w)
        return (qlinear_conv(x, x_scale, x_zero_point, w, w_scale, w_zero_point, y_scale, y_zero_point, B, **self._kw),)
