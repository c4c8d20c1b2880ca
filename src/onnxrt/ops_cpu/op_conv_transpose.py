"""ConvTranspose (1, 11, 22): the reference kernel, one BLAS product per group then col2im by a loop over kernel offsets; fast paths in onnxrt.fastpaths.conv."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from math import prod
from typing import Any, NamedTuple

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._conv_common import (
    CONV_ATTRIBUTES,
    apply_activation,
    as_compute,
    compute_dtype,
    conv_attributes,
    explicit_pads,
    kernel_from,
    same_pads,
    spatial_attr,
    to_output,
)
from ._op import OpRun


def transpose_geometry(
    in_shape: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    output_padding: Sequence[int],
    pads: Sequence[int] | None,
    auto_pad: str,
    output_shape: Sequence[int] | None,
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(pads_begin, output spatial shape) of a transposed convolution.

    The unpadded output is ``(S-1)*stride + output_padding + (K-1)*dilation + 1`` long.
    With ``output_shape`` the total padding is that length minus the requested one, split
    as the spec says: half (rounded down) at the beginning for SAME_UPPER, the other way
    round otherwise. SAME_UPPER / SAME_LOWER without ``output_shape`` ask for
    ``S * stride`` (the odd pixel at the end for SAME_UPPER, at the beginning for
    SAME_LOWER); VALID pads nothing; NOTSET uses ``pads``. A negative total (an
    ``output_shape`` larger than the natural length) extends the output with pixels that
    only receive the bias. onnxruntime differs where the spec is explicit: with
    ``output_shape`` and NOTSET it puts the odd pixel at the end, and it clamps negative
    totals (also for SAME_* with a kernel shorter than the stride) to zero; onnxrt
    follows the spec's formulas, which its conformance case (a total of -1) needs.
    """
    nd = len(in_shape)
    natural = [(n - 1) * s + p + (k - 1) * d + 1 for n, s, p, k, d in zip(in_shape, strides, output_padding, kernel, dilations)]
    if output_shape is not None and len(output_shape):
        shape = [int(v) for v in output_shape]
        if len(shape) == nd + 2:  # some exporters include N and C
            shape = shape[2:]
        if len(shape) != nd:
            raise KernelError(f"Attribute 'output_shape' has {len(output_shape)} values, expected {nd} (one per spatial axis).")
        begin = []
        for full, o in zip(natural, shape):
            total = full - o
            if auto_pad == "SAME_UPPER":
                begin.append(total // 2)
            else:
                begin.append(total - total // 2)
        return tuple(begin), tuple(shape)
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        shape = [n * s for n, s in zip(in_shape, strides)]
        begin = [same_pads(full - o, auto_pad)[0] for full, o in zip(natural, shape)]
        return tuple(begin), tuple(shape)
    if auto_pad == "VALID":
        return (0,) * nd, tuple(natural)
    pb, pe = explicit_pads(pads, nd)
    shape = [full - b - e for full, b, e in zip(natural, pb, pe)]
    if any(o < 0 for o in shape):
        raise KernelError(f"Pads {list(pb) + list(pe)} are larger than the transposed convolution's output {natural}.")
    return pb, tuple(shape)


class TransposeSetup(NamedTuple):
    """A transposed convolution's checked geometry: kernel, strides, dilations, pads at
    the beginning, output spatial shape, compute dtype, output channels."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    pads_begin: tuple[int, ...]
    out_shape: tuple[int, ...]
    cdt: np.dtype
    m_out: int


def transpose_setup(
    x: np.ndarray,
    w: np.ndarray,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
) -> TransposeSetup:
    """The shapes checked (KernelError) and the geometry of ConvTranspose's attributes."""
    if x.ndim < 3:
        raise KernelError(f"X must have rank >= 3 (N, C, spatial...), got shape {list(x.shape)}.")
    if w.ndim != x.ndim:
        raise KernelError(f"W must have the rank of X ({x.ndim}), got shape {list(w.shape)}.")
    if group < 1 or x.shape[1] % group:
        raise KernelError(f"X has {x.shape[1]} channels, not divisible by group {group}.")
    if w.shape[0] != x.shape[1]:
        raise KernelError(f"W must have X's {x.shape[1]} channels on its first axis, got shape {list(w.shape)}.")
    nd = x.ndim - 2
    kernel = kernel_from(w.shape, kernel_shape)
    s = spatial_attr(strides, nd, 1, "strides")
    d = spatial_attr(dilations, nd, 1, "dilations")
    if output_padding is None or len(output_padding) == 0:
        op = (0,) * nd
    elif len(output_padding) != nd:
        raise KernelError(f"Attribute 'output_padding' has {len(output_padding)} values, expected {nd}.")
    else:
        op = tuple(int(v) for v in output_padding)
    pb, out_shape = transpose_geometry(x.shape[2:], kernel, s, d, op, pads, auto_pad, output_shape)
    return TransposeSetup(kernel, s, d, tuple(pb), tuple(out_shape), compute_dtype(x.dtype), w.shape[1] * group)


def transpose_columns(x: np.ndarray, w: np.ndarray, group: int, product: Callable[..., np.ndarray] = np.matmul
                      ) -> np.ndarray:
    """``col[n, m, k, i] = sum_c W[c, m, k] X[n, c, i]``, of shape ``(N, M, *K, *S)``: one matrix product
    per group (``product(a, b)``, numpy's matmul by default)."""
    n_img, n_ch = x.shape[:2]
    spatial, kernel = x.shape[2:], w.shape[2:]
    cg, mg = n_ch // group, w.shape[1]
    wt = w.reshape(group, cg, mg * prod(kernel)).transpose(0, 2, 1)  # (g, Mg*Kp, Cg): BLAS reads it transposed
    col = product(wt, x.reshape(n_img, group, cg, prod(spatial)))
    return col.reshape((n_img, mg * group) + tuple(kernel) + tuple(spatial))


def col2im(col: np.ndarray, spatial: Sequence[int], kernel: Sequence[int], strides: Sequence[int],
           dilations: Sequence[int], pads_begin: Sequence[int], out_shape: tuple[int, ...]) -> np.ndarray:
    """The scatter-add of the columns, plainly: tap ``k`` adds ``col[.., k, ..]`` at
    ``i*stride + k*dilation`` of the unpadded output (taps in order, from zero), which is
    then cut to ``out_shape`` from ``pads_begin`` on (zeros where the window reaches past
    the computed pixels: a negative padding)."""
    n_img, m_out = col.shape[:2]
    natural = tuple((n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(spatial, strides, kernel, dilations))
    lead = (slice(None), slice(None))
    full = np.zeros((n_img, m_out) + natural, col.dtype)
    for offset in np.ndindex(*kernel):
        dst = lead + tuple(slice(k * d, k * d + (n - 1) * s + 1, s)
                           for k, d, n, s in zip(offset, dilations, spatial, strides))
        full[dst] += col[lead + offset]
    if not any(pads_begin) and natural == tuple(out_shape):
        return full
    y = np.zeros((n_img, m_out) + tuple(out_shape), col.dtype)
    src, dst = list(lead), list(lead)
    for b, o, n in zip(pads_begin, out_shape, natural):
        lo, hi = max(0, -b), min(o, n - b)
        if hi <= lo:
            return y
        dst.append(slice(lo, hi))
        src.append(slice(lo + b, hi + b))
    y[tuple(dst)] = full[tuple(src)]
    return y


def conv_transpose(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    output_padding: Sequence[int] | None = None,
    output_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    activation: str | None = None,
    activation_params: Sequence[float] = (),
    check: Any = None,
    product: Callable[..., np.ndarray] = np.matmul,
    scatter: Callable[[np.ndarray, TransposeSetup], np.ndarray] | None = None,
) -> np.ndarray:
    """ONNX ConvTranspose: X ``(N, C, *S)``, W ``(C, M/group, *K)``, optional B ``(M,)`` -> Y ``(N, M, *O)``.

    Output shape and pads as in :func:`transpose_geometry`; strides, dilations, groups,
    output_padding, output_shape and every auto_pad. float16/bfloat16 compute in float32.
    ``activation`` fuses an activation as in :func:`onnxrt.ops_cpu.op_conv.conv`.
    ``check(shape, dtype)`` sees the output's shape (``output_shape`` or pads may make it
    huge) before any work. The reference is :func:`transpose_columns` then :func:`col2im`;
    the fast paths (onnxrt.fastpaths.conv) give their own ``product`` and ``scatter(col,
    setup)``, which compute the same sums.
    """
    x = np.asarray(x)
    w = np.asarray(w)
    g = transpose_setup(x, w, auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
                        output_padding=output_padding, output_shape=output_shape, pads=pads, strides=strides)
    cdt, m_out, nd = g.cdt, g.m_out, x.ndim - 2
    if check is not None:
        check((x.shape[0], m_out) + g.out_shape, cdt)
    if x.shape[0] == 0 or m_out == 0 or 0 in g.out_shape or 0 in x.shape[2:]:
        y = np.zeros((x.shape[0], m_out) + g.out_shape, cdt)
    else:
        col = transpose_columns(as_compute(x, cdt), as_compute(w, cdt), group, product)
        if scatter is None:
            y = col2im(col, x.shape[2:], g.kernel, g.strides, g.dilations, g.pads_begin, g.out_shape)
        else:
            y = scatter(col, g)
    if b is not None:
        b = np.asarray(b)
        if b.shape != (m_out,):
            raise KernelError(f"B must have shape [{m_out}] (one value per output channel), got {list(b.shape)}.")
        y += as_compute(b, cdt).reshape((-1,) + (1,) * nd)
    apply_activation(y, activation, activation_params)
    return to_output(y, x.dtype)


@register("ConvTranspose", versions=(1, 11, 22))
class ConvTranspose(OpRun):
    """ConvTranspose: 1, 11 (same semantics), 22 (bfloat16). Kernel: :func:`conv_transpose`;
    fast paths: :mod:`onnxrt.fastpaths.conv`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._kw = conv_attributes(self, CONV_ATTRIBUTES + ("output_padding", "output_shape"))

    def _run(self, x, w, b=None, attributes=None, verbose=0, fLOG=None):
        return (conv_transpose(x, w, b, **self._kw, check=self.check_alloc),)
