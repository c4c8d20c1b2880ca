"""Conv (1, 11, 22): N-D convolution through im2col and BLAS, 1x1 as one matrix product, depthwise specialised."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._conv_common import (
    apply_activation,
    as_compute,
    check_auto_pad,
    compute_dtype,
    kernel_from,
    offset_view,
    padded,
    scratch,
    spatial_attr,
    to_output,
    window_geometry,
    window_view,
)
from ._op import OpRun

#: bytes of im2col columns built at once; larger batches are processed in chunks of images
_COL_CHUNK_BYTES = 64 << 20


def check_conv_shapes(x: np.ndarray, w: np.ndarray, group: int, what: str = "W") -> None:
    """Raise KernelError unless X is (N, C, *S), W is (M, C/group, *K) and M divides by group."""
    if x.ndim < 3:
        raise KernelError(f"X must have rank >= 3 (N, C, spatial...), got shape {list(x.shape)}.")
    if w.ndim != x.ndim:
        raise KernelError(f"{what} must have the rank of X ({x.ndim}), got shape {list(w.shape)}.")
    if group < 1:
        raise KernelError(f"Attribute 'group' must be >= 1, got {group}.")
    if x.shape[1] != w.shape[1] * group:
        raise KernelError(
            f"X has {x.shape[1]} channels but {what} expects {w.shape[1]} per group x {group} groups = {w.shape[1] * group}."
        )
    if w.shape[0] % group:
        raise KernelError(f"{what} has {w.shape[0]} output channels, not divisible by group {group}.")


def conv_core(
    x: np.ndarray,
    w: np.ndarray,
    pads_begin: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    group: int,
    out_shape: Sequence[int],
) -> np.ndarray:
    """The correlation ``Y[n, m, o] = sum_{c, k} W[m, c, k] * Xpad[n, g(m)*Cg + c, o*s + k*d]``.

    ``x`` and ``w`` share one floating dtype (the compute dtype); the result is a fresh
    (N, M, *out_shape) array of that dtype. Three paths:

    * 1x1 kernels without padding: no im2col, one matrix product (strided input subsampled);
    * depthwise (one input channel per group): a loop over kernel offsets, each a
      multiply-accumulate of a strided view of the padded input;
    * otherwise im2col into a per-thread reused buffer, then one BLAS product per group
      (batched by ``np.matmul``).
    """
    n_img, n_ch = x.shape[:2]
    m_out = w.shape[0]
    kernel = w.shape[2:]
    nd = len(kernel)
    cg, mg = n_ch // group, m_out // group
    kp = prod(kernel)
    npix = prod(out_shape)
    dtype = x.dtype

    lengths = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_shape, strides, kernel, dilations)]
    if kp == 1 and not any(pads_begin) and all(n <= size for n, size in zip(lengths, x.shape[2:])):
        # 1x1 without padding: the output pixel o reads input pixel o*s (dilation is irrelevant)
        if any(s != 1 for s in strides):
            xs = x[(slice(None), slice(None)) + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_shape, strides))]
        else:
            xs = x[(slice(None), slice(None)) + tuple(slice(0, o) for o in out_shape)]
        if group == 1:
            w2 = w.reshape(m_out, n_ch)
            if n_img == 1:
                y = w2 @ xs.reshape(n_ch, npix)
            else:
                y = np.matmul(w2, xs.reshape(n_img, n_ch, npix))
        else:
            y = np.matmul(w.reshape(group, mg, cg), xs.reshape(n_img, group, cg, npix))
        return y.reshape((n_img, m_out) + tuple(out_shape))

    xp = padded(x, pads_begin, lengths, 0, buffer="conv_pad")

    if cg == 1 and group > 1:
        # depthwise: channel c feeds output channels c*mult .. c*mult + mult - 1
        mult = mg
        wk = w.reshape(n_ch, mult, kp)
        y = np.empty((n_img, n_ch, mult) + tuple(out_shape), dtype)
        tmp = scratch("conv_dw", y.shape, dtype)
        bshape = (1, n_ch, mult) + (1,) * nd
        for i, offset in enumerate(np.ndindex(*kernel)):
            v = offset_view(xp, offset, strides, dilations, out_shape)[:, :, None]
            coef = wk[:, :, i].reshape(bshape)
            if i == 0:
                np.multiply(v, coef, out=y)
            else:
                np.multiply(v, coef, out=tmp)
                y += tmp
        return y.reshape((n_img, m_out) + tuple(out_shape))

    windows = window_view(xp, kernel, strides, dilations, out_shape)  # (N, C, *K, *O), no copy
    per_image = n_ch * kp * npix * dtype.itemsize
    chunk = max(1, _COL_CHUNK_BYTES // max(per_image, 1))
    if group == 1:
        w2 = w.reshape(m_out, n_ch * kp)
    else:
        w2 = w.reshape(group, mg, cg * kp)
    if n_img <= chunk:
        col = scratch("conv_col", windows.shape, dtype)
        np.copyto(col, windows)
        if group == 1:
            y = w2 @ col.reshape(n_ch * kp, npix) if n_img == 1 else np.matmul(w2, col.reshape(n_img, n_ch * kp, npix))
        else:
            y = np.matmul(w2, col.reshape(n_img, group, cg * kp, npix))
        return y.reshape((n_img, m_out) + tuple(out_shape))
    y = np.empty((n_img, group, mg, npix) if group > 1 else (n_img, m_out, npix), dtype)
    for start in range(0, n_img, chunk):
        stop = min(n_img, start + chunk)
        col = scratch("conv_col", (stop - start,) + windows.shape[1:], dtype)
        np.copyto(col, windows[start:stop])
        if group == 1:
            np.matmul(w2, col.reshape(stop - start, n_ch * kp, npix), out=y[start:stop])
        else:
            np.matmul(w2, col.reshape(stop - start, group, cg * kp, npix), out=y[start:stop])
    return y.reshape((n_img, m_out) + tuple(out_shape))


def conv(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    activation: str | None = None,
    activation_params: Sequence[float] = (),
) -> np.ndarray:
    """ONNX Conv: X (N, C, *S), W (M, C/group, *K), optional B (M,) -> Y (N, M, *O).

    Every auto_pad (NOTSET with ``pads``, VALID, SAME_UPPER, SAME_LOWER), strides,
    dilations and groups, in 1-D, 2-D, 3-D and beyond. float32 and float64 compute in
    their own type; float16 and bfloat16 compute in float32 and are rounded back once.
    ``activation`` fuses one of Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid
    (``activation_params``: alpha / min, max / alpha, beta), applied in place on the
    fresh output before the final cast, for a graph optimiser fusing Conv+activation.
    """
    x = np.asarray(x)
    w = np.asarray(w)
    check_conv_shapes(x, w, group)
    nd = x.ndim - 2
    kernel = kernel_from(w.shape, kernel_shape)
    s = spatial_attr(strides, nd, 1, "strides")
    d = spatial_attr(dilations, nd, 1, "dilations")
    pb, _, out_shape = window_geometry(x.shape[2:], kernel, s, d, pads, auto_pad)
    cdt = compute_dtype(x.dtype)
    if x.shape[0] == 0 or w.shape[0] == 0 or 0 in out_shape:
        y = np.zeros((x.shape[0], w.shape[0]) + out_shape, cdt)
    else:
        y = conv_core(as_compute(x, cdt), as_compute(w, cdt), pb, s, d, group, out_shape)
    if b is not None:
        b = np.asarray(b)
        if b.shape != (w.shape[0],):
            raise KernelError(f"B must have shape [{w.shape[0]}] (one value per output channel), got {list(b.shape)}.")
        y += as_compute(b, cdt).reshape((-1,) + (1,) * nd)
    apply_activation(y, activation, activation_params)
    return to_output(y, x.dtype)


@register("Conv", versions=(1, 11, 22))
class Conv(OpRun):
    """Conv: 1, 11 (same semantics), 22 (bfloat16). Kernel: :func:`conv`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        check_auto_pad(self, self.auto_pad)
        if self.group < 1:
            raise InvalidAttributeError(f"{self._node_label()}: attribute 'group' must be >= 1, got {self.group}.")
        self._kw = dict(
            auto_pad=self.auto_pad,
            dilations=self.dilations,
            group=self.group,
            kernel_shape=self.kernel_shape,
            pads=self.pads,
            strides=self.strides,
        )

    def _run(self, x, w, b=None, attributes=None, verbose=0, fLOG=None):
        return (conv(x, w, b, **self._kw),)
