"""DeformConv (19, 22): deformable convolution, N-linear sampling at learned offsets then one BLAS product per group."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import product
from math import prod

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._conv_common import (
    as_compute,
    compute_dtype,
    conv_attributes,
    to_output,
)
from ._op import OpRun
from .op_conv import conv_geometry


def deform_conv(
    x: np.ndarray,
    w: np.ndarray,
    offset: np.ndarray,
    b: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    *,
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    offset_group: int = 1,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX DeformConv, N-D: each kernel tap samples X at its regular position plus a learned offset.

    X ``(N, C, *S)``, W ``(M, C/group, *K)``, offset ``(N, offset_group*prod(K)*nd, *O)`` laid out as
    [offset group][kernel tap][axis], mask ``(N, offset_group*prod(K), *O)`` (ones when
    absent), B (M,). The value at a fractional position is the N-linear interpolation
    of its ``2**nd`` neighbours, neighbours outside the input counting as zero (so does a
    position entirely outside). The sampled columns (times the mask) then meet the
    weights in one matrix product per group. float16/bfloat16 compute in float32.
    Vectorized over batch, taps and pixels; loops run over the ``2**nd`` neighbours only.
    """
    x = np.asarray(x)
    w = np.asarray(w)
    offset = np.asarray(offset)
    kernel, s, d, pb, out_shape = conv_geometry(x, w, group, kernel_shape, strides, dilations, pads)
    n_img, n_ch = x.shape[:2]
    spatial = x.shape[2:]
    nd = len(spatial)
    og = int(offset_group)
    if og < 1 or n_ch % og:
        raise KernelError(f"offset_group {og} must be >= 1 and divide the {n_ch} input channels.")
    kp, npix = prod(kernel), prod(out_shape)
    want = (n_img, og * kp * nd) + tuple(out_shape)
    if offset.shape != want:
        raise KernelError(f"offset must have shape {list(want)}, got {list(offset.shape)}.")
    cdt = compute_dtype(x.dtype)
    off = as_compute(offset, cdt).reshape(n_img, og, kp, nd, npix)
    if mask is not None:
        mask = np.asarray(mask)
        want_m = (n_img, og * kp) + tuple(out_shape)
        if mask.shape != want_m:
            raise KernelError(f"mask must have shape {list(want_m)}, got {list(mask.shape)}.")
        msk = as_compute(mask, cdt).reshape(n_img, og, kp, npix)
    else:
        msk = None

    # regular sampling grid per axis: o*stride - pad_begin + k*dilation, shape (Kp, P)
    taps = np.indices(kernel).reshape(nd, kp)
    outs = np.indices(out_shape).reshape(nd, npix)
    coords = []
    for i in range(nd):
        base = outs[i][None, :] * s[i] - pb[i] + taps[i][:, None] * d[i]
        coords.append(base.astype(cdt)[None, None] + off[:, :, :, i, :])  # (N, og, Kp, P)
    lows = [np.floor(c) for c in coords]
    fracs = [c - lo for c, lo in zip(coords, lows)]
    lows = [lo.astype(np.int64) for lo in lows]

    cpg = n_ch // og
    xg = as_compute(x, cdt).reshape(n_img, og, cpg, prod(spatial))
    n_idx = np.arange(n_img).reshape(n_img, 1, 1, 1)
    g_idx = np.arange(og).reshape(1, og, 1, 1)
    flat_strides = [prod(spatial[i + 1:]) for i in range(nd)]
    sampled = np.zeros((n_img, og, kp, npix, cpg), cdt)
    for corner in product((0, 1), repeat=nd):
        weight = None
        valid = None
        flat = None
        for i, c in enumerate(corner):
            idx = lows[i] + c
            wgt = fracs[i] if c else 1 - fracs[i]
            ok = (idx >= 0) & (idx < spatial[i])
            weight = wgt if weight is None else weight * wgt
            valid = ok if valid is None else valid & ok
            part = np.clip(idx, 0, spatial[i] - 1) * flat_strides[i]
            flat = part if flat is None else flat + part
        weight = np.where(valid, weight, 0)
        if msk is not None:
            weight = weight * msk
        sampled += xg[n_idx, g_idx, :, flat] * weight[..., None]
    # (N, og, Kp, P, Cpg) -> (N, C, Kp, P): channel c = group*Cpg + j
    col = sampled.transpose(0, 1, 4, 2, 3).reshape(n_img, group, (n_ch // group) * kp, npix)
    m_out = w.shape[0]
    y = np.matmul(as_compute(w, cdt).reshape(group, m_out // group, (n_ch // group) * kp), col)
    y = y.reshape((n_img, m_out) + tuple(out_shape))
    if b is not None:
        b = np.asarray(b)
        if b.shape != (m_out,):
            raise KernelError(f"B must have shape [{m_out}] (one value per output channel), got {list(b.shape)}.")
        y += as_compute(b, cdt).reshape((-1,) + (1,) * nd)
    return to_output(y, x.dtype)


@register("DeformConv", versions=(19, 22))
class DeformConv(OpRun):
    """DeformConv: 19, 22 (bfloat16). Kernel: :func:`deform_conv`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        names = ("dilations", "group", "kernel_shape", "offset_group", "pads", "strides")
        self._kw = conv_attributes(self, names, positive=("group", "offset_group"))
        self._checked: tuple | None = None  # the shapes whose sizes passed check_alloc

    def _check_sizes(self, x, w) -> None:
        # the model's pads decide the output's size, and the sampled columns (N, og, taps, pixels,
        # C/og) can be far larger than the offsets that must match the output: checked once per shape
        kw = self._kw
        kernel, _, _, _, out_shape = conv_geometry(x, w, kw["group"], kw["kernel_shape"], kw["strides"],
                                                   kw["dilations"], kw["pads"])
        cdt = compute_dtype(x.dtype)
        self.check_alloc((x.shape[0], w.shape[0]) + tuple(out_shape), cdt)
        self.check_alloc((x.shape[0], x.shape[1], prod(kernel), prod(out_shape)), cdt, "sampled columns")
        self._checked = (x.shape, w.shape)

    def _run(self, x, w, offset, b=None, mask=None, attributes=None, verbose=0, fLOG=None):
        x, w = np.asarray(x), np.asarray(w)
        if (x.shape, w.shape) != self._checked:
            self._check_sizes(x, w)
        return (deform_conv(x, w, offset, b, mask, **self._kw),)
