"""ConvTranspose (1, 11, 22): one BLAS product per group, then col2im by a loop over kernel offsets."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from math import prod
from typing import Any

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
    scratch,
    spatial_attr,
    to_output,
)
from ..parallel import matmul
from .. import native as _jit
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


def conv_transpose_core(
    x: np.ndarray,
    w: np.ndarray,
    strides: Sequence[int],
    dilations: Sequence[int],
    group: int,
    pads_begin: Sequence[int],
    out_shape: Sequence[int],
) -> np.ndarray:
    """Y ``(N, M, *out)`` in the compute dtype of ``x``/``w`` (no bias).

    ``col[n, m, k, i] = sum_c W[c, m, k] X[n, c, i]`` is one matrix product per group
    (into a per-thread buffer); each kernel offset ``k`` then adds ``col[.., k, ..]`` at
    ``i*stride + k*dilation`` of the unpadded output (col2im: :func:`_scatter_unit_stride`
    or, with strides, :func:`_scatter_phased`), and the result is cut to ``out_shape``
    from ``pads_begin`` on (zeros where the window reaches past the computed pixels).
    """
    n_img, n_ch = x.shape[:2]
    spatial = x.shape[2:]
    kernel = w.shape[2:]
    cg = n_ch // group
    mg = w.shape[1]
    m_out = mg * group
    kp = prod(kernel)
    npix = prod(spatial)
    dtype = x.dtype

    wt = w.reshape(group, cg, mg * kp).transpose(0, 2, 1)  # (g, Mg*Kp, Cg): BLAS reads it transposed
    col = scratch("convT_col", (n_img, group, mg * kp, npix), dtype)
    matmul(wt, x.reshape(n_img, group, cg, npix), out=col)
    col = col.reshape((n_img, m_out) + tuple(kernel) + tuple(spatial))

    if len(kernel) == 2 and dtype == np.float32 and (k := _jit.kernels()) is not None:
        # the compiled scatter-add, straight into the cut output (2-3x the phased passes)
        y = np.empty((n_img * m_out,) + tuple(out_shape), dtype)
        k.col2im2d(col.reshape((n_img * m_out,) + tuple(kernel) + tuple(spatial)), y, *strides, *dilations, *pads_begin)
        return y.reshape((n_img, m_out) + tuple(out_shape))
    if all(s == 1 for s in strides):
        return _scatter_unit_stride(col, spatial, kernel, dilations, pads_begin, tuple(out_shape))
    return _scatter_phased(col, spatial, kernel, strides, dilations, pads_begin, tuple(out_shape))


def _scatter_unit_stride(col, spatial, kernel, dilations, pads_begin, out_shape) -> np.ndarray:
    """col2im for unit strides: tap ``k`` adds its block at offset ``k*d`` of the unpadded output."""
    n_img, m_out = col.shape[:2]
    natural = tuple(n + (k - 1) * d for n, k, d in zip(spatial, kernel, dilations))
    lead = (slice(None), slice(None))
    same = not any(pads_begin) and natural == out_shape
    full = np.zeros((n_img, m_out) + natural, col.dtype)
    for offset in np.ndindex(*kernel):
        dst = lead + tuple(slice(k * d, k * d + n) for k, d, n in zip(offset, dilations, spatial))
        full[dst] += col[lead + offset]
    if same:
        return full
    y = np.zeros((n_img, m_out) + out_shape, col.dtype)
    src, dst = list(lead), list(lead)
    for b, o, n in zip(pads_begin, out_shape, natural):
        lo, hi = max(0, -b), min(o, n - b)
        if hi <= lo:
            return y
        dst.append(slice(lo, hi))
        src.append(slice(lo + b, hi + b))
    y[tuple(dst)] = full[tuple(src)]
    return y


def _scatter_phased(col, spatial, kernel, strides, dilations, pads_begin, out_shape) -> np.ndarray:
    """col2im for strides > 1 without strided accumulation.

    Output position ``i*s + k*d`` has phase ``(k*d) mod s`` and index ``i + (k*d) div s``
    inside its phase, so the unpadded output is kept as ``s`` interleaved phase planes
    per axis (N, M, *s, *Q): every tap adds one contiguous block into its phase plane.
    The planes are then interleaved into the cut output in one pass, one strided copy
    per output residue class; positions outside the computed pixels stay zero.
    """
    n_img, m_out = col.shape[:2]
    nd = len(kernel)
    natural = [(n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(spatial, strides, kernel, dilations)]
    q_len = [-(-v // s) for v, s in zip(natural, strides)]
    phased = np.zeros((n_img, m_out) + tuple(strides) + tuple(q_len), col.dtype)
    lead = (slice(None), slice(None))
    for offset in np.ndindex(*kernel):
        pos = [k * d for k, d in zip(offset, dilations)]
        dst = lead + tuple(p % s for p, s in zip(pos, strides)) + tuple(
            slice(p // s, p // s + n) for p, s, n in zip(pos, strides, spatial)
        )
        phased[dst] += col[lead + offset]
    copies, covered = [], True
    for residue in itertools.product(*[range(min(s, o)) for s, o in zip(strides, out_shape)]):
        dst, src = list(lead), list(lead) + [0] * nd + [None] * nd
        for i, (r, s, b, o, q) in enumerate(zip(residue, strides, pads_begin, out_shape, q_len)):
            count = len(range(r, o, s))
            t0 = r + b  # unpadded position of the class's first output
            q0 = t0 // s
            lo, hi = max(0, -q0), min(count, q - q0)  # outputs j whose phase index q0 + j exists
            if lo > 0 or hi < count:
                covered = False
            if hi <= lo:
                break
            dst.append(slice(r + lo * s, r + (hi - 1) * s + 1, s))
            src[2 + i] = t0 % s
            src[2 + nd + i] = slice(q0 + lo, q0 + hi)
        else:
            copies.append((tuple(dst), tuple(src)))
    y = (np.empty if covered else np.zeros)((n_img, m_out) + out_shape, col.dtype)
    for dst, src in copies:
        y[dst] = phased[src]
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
) -> np.ndarray:
    """ONNX ConvTranspose: X ``(N, C, *S)``, W ``(C, M/group, *K)``, optional B ``(M,)`` -> Y ``(N, M, *O)``.

    Output shape and pads as in :func:`transpose_geometry`; strides, dilations, groups,
    output_padding, output_shape and every auto_pad. float16/bfloat16 compute in float32.
    ``activation`` fuses an activation as in :func:`onnxrt.ops_cpu.op_conv.conv`.
    ``check(shape, dtype)`` sees the output's shape (``output_shape`` or pads may make it
    huge) before any work.
    """
    x = np.asarray(x)
    w = np.asarray(w)
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
    cdt = compute_dtype(x.dtype)
    m_out = w.shape[1] * group
    if check is not None:
        check((x.shape[0], m_out) + tuple(out_shape), cdt)
    if x.shape[0] == 0 or m_out == 0 or 0 in out_shape or 0 in x.shape[2:]:
        y = np.zeros((x.shape[0], m_out) + tuple(out_shape), cdt)
    else:
        y = conv_transpose_core(as_compute(x, cdt), as_compute(w, cdt), s, d, group, pb, out_shape)
    if b is not None:
        b = np.asarray(b)
        if b.shape != (m_out,):
            raise KernelError(f"B must have shape [{m_out}] (one value per output channel), got {list(b.shape)}.")
        y += as_compute(b, cdt).reshape((-1,) + (1,) * nd)
    apply_activation(y, activation, activation_params)
    return to_output(y, x.dtype)


@register("ConvTranspose", versions=(1, 11, 22))
class ConvTranspose(OpRun):
    """ConvTranspose: 1, 11 (same semantics), 22 (bfloat16). Kernel: :func:`conv_transpose`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._kw = conv_attributes(self, CONV_ATTRIBUTES + ("output_padding", "output_shape"))

    def _run(self, x, w, b=None, attributes=None, verbose=0, fLOG=None):
        return (conv_transpose(x, w, b, **self._kw, check=self.check_alloc),)
