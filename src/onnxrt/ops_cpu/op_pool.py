"""The pooling family: MaxPool, AveragePool, LpPool and their Global variants over one strided-view core."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import prod

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._conv_common import (
    _WIDENED,
    check_auto_pad,
    coarse_parallel_for,
    offset_view,
    padded,
    scratch,
    spatial_attr,
    window_geometry,
)
from ._op import OpRun

POOL_MODES = ("max", "avg", "lp")
#: GlobalAveragePool sums planes of up to this many cells with one BLAS matrix-vector product
GLOBAL_AVG_GEMV_CELLS = 1 << 12
_F32 = np.dtype(np.float32)


def _pool_dtype(dtype: np.dtype) -> np.dtype:
    """float16/bfloat16 pool in float32 (exact for max, one rounding for the others)."""
    return np.dtype(np.float32) if dtype in _WIDENED else dtype


def _lowest(dtype: np.dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


@lru_cache(maxsize=1024)
def _taps(size: int, k: int, s: int, d: int, b: int, o: int) -> tuple[tuple[int, int, int], ...]:
    """(lo, hi, first input index) per kernel tap of one axis: outputs [lo, hi) read inside the input.

    Output ``j`` of tap ``t`` reads input ``j*s - b + t*d``; taps are sorted by how many
    outputs they serve (the widest first), unused ones dropped.
    """
    out = []
    for t in range(k):
        shift = t * d - b
        lo = 0 if shift >= 0 else (-shift + s - 1) // s  # first j with j*s + shift >= 0
        hi = min(o, (size - 1 - shift) // s + 1) if size - 1 - shift >= 0 else 0
        if hi > lo:
            out.append((lo, hi, lo * s + shift))
    out.sort(key=lambda r: r[0] - r[1])
    return tuple(out)


def _separable(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads_begin: Sequence[int],
    out_shape: Sequence[int],
    ufunc: np.ufunc,
    identity: float | int,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """Reduce the windows of the unpadded ``x`` with ``ufunc`` one spatial axis at a time.

    Max and sum are separable: axis ``i`` costs one element-wise pass per kernel tap, on
    an array whose earlier axes are already reduced. Padding is never materialised:
    each tap only touches the outputs whose input lies inside ``x`` (the padding is the
    ufunc's identity: -inf for max, 0 for sums). The widest tap seeds the output through
    the first ufunc call. Outer axes go first so the strided last axis runs on the
    smallest array. Intermediates live in per-thread scratch buffers; the result is fresh
    (or ``out``).
    """
    nd = len(kernel)
    cur = x
    todo = [
        i for i in range(nd)
        if not (kernel[i] == 1 and strides[i] == 1 and pads_begin[i] == 0 and x.shape[i + 2] == out_shape[i])
    ]
    if not todo:
        if out is None:
            return x.copy()
        np.copyto(out, x)
        return out
    for n_done, i in enumerate(todo):
        axis = i + 2
        k, s, d, o = kernel[i], strides[i], dilations[i], out_shape[i]
        taps = _taps(cur.shape[axis], k, s, d, pads_begin[i], o)
        shape = cur.shape[:axis] + (o,) + cur.shape[axis + 1:]
        last = n_done == len(todo) - 1
        if last:
            nxt = np.empty(shape, cur.dtype) if out is None else out
        else:
            nxt = scratch(f"pool_{n_done % 2}", shape, cur.dtype)
        lead = (slice(None),) * axis

        def src(tap, lo, hi):
            tlo, _, first = tap
            start = first + (lo - tlo) * s
            return cur[lead + (slice(start, start + (hi - lo - 1) * s + 1, s),)]

        def dst(lo, hi):
            return nxt[lead + (slice(lo, hi),)]

        if not taps:
            nxt.fill(identity)
            cur = nxt
            continue
        if i == nd - 1 and _last_axis_flat(cur, k, s, d, pads_begin[i], o, ufunc, identity, nxt):
            cur = nxt
            continue
        base = taps[0]
        blo, bhi, _ = base
        if blo > 0:
            dst(0, blo).fill(identity)
        if bhi < o:
            dst(bhi, o).fill(identity)
        rest = taps[1:]
        lo2, hi2 = (max(rest[0][0], blo), min(rest[0][1], bhi)) if rest else (0, 0)
        if hi2 > lo2:
            # the first call seeds the output from the two widest taps
            ufunc(src(base, lo2, hi2), src(rest[0], lo2, hi2), out=dst(lo2, hi2))
            if blo < lo2:
                np.copyto(dst(blo, lo2), src(base, blo, lo2))
            if hi2 < bhi:
                np.copyto(dst(hi2, bhi), src(base, hi2, bhi))
            for lo, hi in ((rest[0][0], lo2), (hi2, rest[0][1])):
                if hi > lo:
                    ufunc(dst(lo, hi), src(rest[0], lo, hi), out=dst(lo, hi))
            rest = rest[1:]
        else:
            np.copyto(dst(blo, bhi), src(base, blo, bhi))
        for tap in rest:
            lo, hi, _ = tap
            ufunc(dst(lo, hi), src(tap, lo, hi), out=dst(lo, hi))
        cur = nxt
    return cur


def _flat_pool(
    x: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads_begin: Sequence[int],
    out_shape: Sequence[int],
    ufunc: np.ufunc,
    identity: float | int,
    out: np.ndarray,
) -> None:
    """Reduce the windows of planes ``x`` (P, *S) with ``ufunc`` into ``out`` (P, *O), with flat passes only.

    numpy runs a binary ufunc on a strided 2-D view (rows of a plane, a gap between
    planes) about 3x slower per element than on one contiguous vector, whatever the row
    length. So every reduction here is one flat pass over a whole buffer: the input is
    padded once with the identity (-inf for max, 0 for sums; skipped when no window
    leaves the input), and axis ``i`` (outer first; max and sum are separable) reduces its
    ``k`` taps as flat shifts by ``t * d * pitch``, computing the windows of every
    position (stride 1). A strided axis then keeps every ``s``-th position in one copy
    (copies run fast on strided views); positions whose window ran across a row or
    plane edge are never kept. Unit-stride axes keep the buffer's pitch and the final
    copy into ``out`` cuts the extra positions.
    """
    nd = len(kernel)
    lengths = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_shape, strides, kernel, dilations)]
    cur = padded(x[:, None], pads_begin, lengths, identity, buffer="pool_pad")[:, 0]
    if not cur.flags.c_contiguous:
        tmp = scratch("pool_pad", cur.shape, cur.dtype)
        np.copyto(tmp, cur)
        cur = tmp
    # per axis: how the kept positions are read from ``cur`` (all of them so far)
    keep = [slice(0, o) for o in out_shape]
    for ax in range(nd):
        k, s, d = kernel[ax], strides[ax], dilations[ax]
        if k > 1:
            pitch = prod(cur.shape[ax + 2:])
            flat = cur.reshape(-1)
            span = flat.size - (k - 1) * d * pitch
            nxt = scratch(f"pool_z{ax % 2}", cur.shape, cur.dtype)
            dst = nxt.reshape(-1)[:span]
            step = d * pitch
            ufunc(flat[:span], flat[step:step + span], out=dst)
            for t in range(2, k):
                ufunc(dst, flat[t * step:t * step + span], out=dst)
            cur = nxt
        if s > 1 and ax < nd - 1:
            # keep the positions j*s of this axis (compact copy), the later axes reduce less
            idx = (slice(None),) * (ax + 1) + (slice(0, (out_shape[ax] - 1) * s + 1, s),)
            sub = cur[idx]
            tmp = scratch(f"pool_c{ax % 2}", sub.shape, cur.dtype)
            np.copyto(tmp, sub)
            cur = tmp
            keep[ax] = slice(None)
        elif s > 1:
            keep[ax] = slice(0, (out_shape[ax] - 1) * s + 1, s)
    np.copyto(out, cur[(slice(None),) + tuple(keep)])


@lru_cache(maxsize=1024)
def _edge_columns(length: int, k: int, s: int, d: int, b: int, o: int, first: int, stop: int) -> tuple[int, ...]:
    """Outputs of one axis whose window leaves [0, length), plus those before ``first`` / from ``stop`` on."""
    cols = set(range(0, min(first, o))) | set(range(max(stop, 0), o))
    for t in range(k):
        shift = t * d - b
        lo = 0 if shift >= 0 else (-shift + s - 1) // s
        hi = min(o, (length - 1 - shift) // s + 1) if length - 1 - shift >= 0 else 0
        cols.update(range(0, min(lo, o)))
        cols.update(range(max(hi, 0), o))
    return tuple(sorted(cols))


def _last_axis_flat(
    cur: np.ndarray, k: int, s: int, d: int, b: int, o: int, ufunc: np.ufunc, identity: float | int, nxt: np.ndarray
) -> bool:
    """The last spatial axis on flat rows, when its length is exactly ``stride * outputs``.

    numpy runs a separate inner loop per row of a strided 3-D view (short rows cost more
    in loop overhead than in arithmetic). Here the rows are viewed as one long vector:
    with stride ``s`` the input is first split into ``s`` contiguous phase vectors
    (``x[j*s + p]``), and tap ``t`` (input ``j*s + t*d - b``) reads phase
    ``(t*d - b) mod s`` shifted by ``(t*d - b) div s``: every tap is one contiguous pass.
    Shifted reads cross into the neighbouring row only at the first and last outputs of a
    row; those few columns are recomputed from the taps inside the row. Returns False
    (nothing done) when the layout does not allow it.
    """
    length = cur.shape[-1]
    if length != s * o or not cur.flags.c_contiguous or not nxt.flags.c_contiguous or cur.size == 0:
        return False
    rows = cur.size // length
    n = rows * o
    cur2 = cur.reshape(rows, length)
    if s == 1:
        phases = [cur.reshape(-1)]
    else:
        buf = scratch("pool_phase", (s, rows, o), cur.dtype)
        for p in range(s):
            np.copyto(buf[p], cur2[:, p::s])
        phases = [buf[p].reshape(-1) for p in range(s)]
    out = nxt.reshape(-1)
    shifts = [((t * d - b) % s, (t * d - b) // s) for t in range(k)]
    spans = [(max(0, -q), min(n, n - q)) for _, q in shifts]
    lo = max(a for a, _ in spans)
    hi = min(z for _, z in spans)
    if hi <= lo:
        return False
    (p0, q0), (p1, q1) = shifts[0], shifts[1] if k > 1 else shifts[0]
    if k > 1:
        ufunc(phases[p0][lo + q0:hi + q0], phases[p1][lo + q1:hi + q1], out=out[lo:hi])
    else:
        np.copyto(out[lo:hi], phases[p0][lo + q0:hi + q0])
    for p, q in shifts[2:]:
        ufunc(out[lo:hi], phases[p][lo + q:hi + q], out=out[lo:hi])
    # columns where some tap leaves the row: recomputed from the taps inside it
    out2 = nxt.reshape(rows, o)
    for j in _edge_columns(length, k, s, d, b, o, lo, o - (n - hi)):
        pos = [j * s + t * d - b for t in range(k)]
        inside = [v for v in pos if 0 <= v < length]
        if not inside:
            out2[:, j] = identity
        elif len(inside) == 1:
            out2[:, j] = cur2[:, inside[0]]
        else:
            col = out2[:, j]
            ufunc(cur2[:, inside[0]], cur2[:, inside[1]], out=col)
            for v in inside[2:]:
                ufunc(col, cur2[:, v], out=col)
    return True


def _window_counts(
    in_shape: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads_begin: Sequence[int],
    pads_end: Sequence[int],
    out_shape: Sequence[int],
    include_pad: bool,
) -> list[np.ndarray]:
    """Per spatial axis, how many window positions of each output index the average divides by.

    Positions inside the input always count; with ``count_include_pad`` the declared pads
    count too, but never the extra cells that ``ceil_mode`` adds past the end padding.
    """
    counts = []
    for size, k, s, d, b, e, o in zip(in_shape, kernel, strides, dilations, pads_begin, pads_end, out_shape):
        pos = np.arange(o)[:, None] * s - b + np.arange(k)[None, :] * d
        lo, hi = (-b, size + e) if include_pad else (0, size)
        counts.append(((pos >= lo) & (pos < hi)).sum(axis=1))
    return counts


@lru_cache(maxsize=256)
def _inverse_counts(in_shape, kernel, strides, dilations, pads_begin, pads_end, out_shape, include_pad, dtype) -> np.ndarray:
    """1 / window count: a scalar when every window counts the same, else a read-only (1, 1, *O) array."""
    counts = _window_counts(in_shape, kernel, strides, dilations, pads_begin, pads_end, out_shape, include_pad)
    if all(bool((c == c[0]).all()) for c in counts):
        # a window wholly in the padding (dilated kernels) averages nothing: its sum 0 stays 0,
        # as onnxruntime returns (and as the uneven case below does)
        return np.asarray(dtype.type(1.0 / max(prod(int(c[0]) for c in counts), 1)))
    nd = len(kernel)
    div = np.ones((1, 1) + (1,) * nd, np.float64)
    for i, c in enumerate(counts):
        shape = [1] * (nd + 2)
        shape[i + 2] = len(c)
        div = div * np.maximum(c, 1).astype(np.float64).reshape(shape)
    inv = (1.0 / div).astype(dtype)
    inv.flags.writeable = False
    return inv


def _max_with_indices(
    xp: np.ndarray,
    in_shape: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads_begin: Sequence[int],
    out_shape: Sequence[int],
    storage_order: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Max over each window and the flat index of the first maximum in the unpadded input.

    Loops over kernel offsets; only positions inside the input compete (padding never
    wins), NaN loses to any number. Indices count over the whole (N, C, *S) tensor;
    ``storage_order=1`` makes the spatial part column-major (first spatial axis fastest).
    """
    nd = len(kernel)
    n_img, n_ch = xp.shape[:2]
    is_float = xp.dtype.kind == "f"
    best = np.full((n_img, n_ch) + tuple(out_shape), _lowest(xp.dtype), xp.dtype)
    arg = np.full(best.shape, -1, np.int64)
    # valid[i][k] (O_i,): kernel offset k of axis i lands inside the input
    valid = []
    for size, s, d, b, k, o in zip(in_shape, strides, dilations, pads_begin, kernel, out_shape):
        pos = np.arange(o)[None, :] * s - b + np.arange(k)[:, None] * d
        valid.append((pos >= 0) & (pos < size))
    for flat, offset in enumerate(np.ndindex(*kernel)):
        v = offset_view(xp, offset, strides, dilations, out_shape)
        inside = np.ones((1, 1) + (1,) * nd, bool)
        for i, k in enumerate(offset):
            shape = [1] * (nd + 2)
            shape[i + 2] = out_shape[i]
            inside = inside & valid[i][k].reshape(shape)
        upd = (v > best) | (arg < 0)
        if is_float:
            upd |= np.isnan(best) & ~np.isnan(v)
        upd &= inside
        np.copyto(best, v, where=upd)
        np.copyto(arg, flat, where=upd)
    # flat index of the winner: coordinates o*s - b + k*d per axis
    ks = np.unravel_index(np.maximum(arg, 0), tuple(kernel))
    if storage_order == 0:
        weights = [prod(in_shape[i + 1:]) for i in range(nd)]
    else:
        weights = [prod(in_shape[:i]) for i in range(nd)]
    index = (np.arange(n_img * n_ch, dtype=np.int64) * prod(in_shape)).reshape((n_img, n_ch) + (1,) * nd)
    index = np.broadcast_to(index, best.shape).copy()
    for i in range(nd):
        shape = [1] * (nd + 2)
        shape[i + 2] = out_shape[i]
        o = np.arange(out_shape[i], dtype=np.int64).reshape(shape)
        coord = o * strides[i] - pads_begin[i] + ks[i] * dilations[i]
        index += coord * weights[i]
    return best, index


def _nan_only_windows(src: np.ndarray, part: np.ndarray, kernel, strides, dilations, pads_begin, out_shape) -> None:
    """fmax drops NaN, so a window whose values are all NaN comes out as the identity -inf;
    set those to NaN (found by tests/fuzz: [pad, NaN] gave -inf, [NaN, pad] NaN). Windows
    already -inf are rare: only they pay for one more pass, over a 0/1/2 marker (nothing,
    NaN, a number) whose maximum tells whether the window holds a number."""
    lost = part == -np.inf  # np.isneginf takes three passes
    if not lost.any():
        return
    marker = np.where(np.isnan(src), src.dtype.type(1), src.dtype.type(2))
    seen = _separable(marker, kernel, strides, dilations, pads_begin, out_shape, np.maximum, 0)
    part[lost & (seen == 1)] = np.nan


def _pool_geometry(x_shape, kernel_shape, strides, pads, dilations, auto_pad, ceil_mode):
    # the kernel, strides, dilations, pads at the beginning and end, and the output's spatial shape
    if kernel_shape is None or len(kernel_shape) == 0:
        raise KernelError("Attribute 'kernel_shape' is required for pooling.")
    nd = len(kernel_shape)
    if len(x_shape) != nd + 2:
        raise KernelError(f"X must have rank {nd + 2} (N, C and {nd} spatial axes of 'kernel_shape'), got shape {list(x_shape)}.")
    kernel = tuple(int(k) for k in kernel_shape)
    if any(k < 1 for k in kernel):
        raise KernelError(f"Attribute 'kernel_shape' must hold values >= 1, got {list(kernel)}.")
    s = spatial_attr(strides, nd, 1, "strides")
    d = spatial_attr(dilations, nd, 1, "dilations")
    pb, pe, out_shape = window_geometry(x_shape[2:], kernel, s, d, pads, auto_pad, bool(ceil_mode))
    return kernel, s, d, pb, pe, out_shape


def pool(
    x: np.ndarray,
    mode: str,
    kernel_shape: Sequence[int],
    *,
    strides: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    dilations: Sequence[int] | None = None,
    auto_pad: str = "NOTSET",
    ceil_mode: int = 0,
    count_include_pad: int = 0,
    p: float = 2,
    storage_order: int = 0,
    with_indices: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Sliding-window pooling of X (N, C, *S): ``mode`` is ``max``, ``avg`` or ``lp``.

    Output shape: floor (or ceil with ``ceil_mode``) of ``(S + pads - dilated kernel) / stride + 1``,
    a last ceil-mode window starting in the end padding dropped; SAME_UPPER / SAME_LOWER
    give ``ceil(S / stride)``. Max ignores the padding and NaN (a window of NaN only gives
    NaN), like onnxruntime; average divides by the cells inside the input, or inside the
    declared pads with ``count_include_pad``; Lp is ``(sum |x|^p)^(1/p)`` with zero padding.
    float16/bfloat16 compute in float32. ``with_indices`` (max only) also returns the
    int64 flat indices of the maxima (see :func:`_max_with_indices`). The reference kernel;
    the compiled 2-D float32 loops (prepared per input shape: geometry, scale and team job
    settled once) are fast paths (onnxrt.fastpaths.pool).
    """
    x = np.asarray(x)
    if mode not in POOL_MODES:
        raise KernelError(f"Pooling mode {mode!r} is unknown, expected one of {list(POOL_MODES)!r}.")
    kernel, s, d, pb, pe, out_shape = _pool_geometry(x.shape, kernel_shape, strides, pads, dilations, auto_pad, ceil_mode)
    in_shape = x.shape[2:]
    out_dtype = x.dtype
    cdt = _pool_dtype(x.dtype)
    full = (x.shape[0], x.shape[1]) + out_shape
    if 0 in full:
        y = np.zeros(full, out_dtype)
        return (y, np.zeros(full, np.int64)) if with_indices else y
    xc = x if x.dtype == cdt else x.astype(cdt)

    if mode == "max":
        if with_indices:
            lengths = [(o - 1) * st + (k - 1) * dl + 1 for o, st, k, dl in zip(out_shape, s, kernel, d)]
            xp = padded(xc, pb, lengths, _lowest(cdt), buffer="pool_pad")
            y, idx = _max_with_indices(xp, in_shape, kernel, s, d, pb, out_shape, storage_order)
            return (y if y.dtype == out_dtype else y.astype(out_dtype)), idx
        # fmax: a NaN loses against a number (onnxruntime compares with '>')
        ufunc, identity = (np.fmax if cdt.kind == "f" else np.maximum), _lowest(cdt)
    else:
        ufunc, identity = np.add, 0
    pf = float(p)
    scale = _inverse_counts(in_shape, kernel, s, d, pb, pe, out_shape, bool(count_include_pad), cdt) if mode == "avg" else None
    planes = full[0] * full[1]
    xs = xc.reshape((planes, 1) + tuple(in_shape))
    y = np.empty((planes, 1) + tuple(out_shape), cdt)

    # windows inside the input: flat passes on the input itself (padding it first costs more
    # than it saves: the copy runs row by row on short rows)
    lengths = [(o - 1) * st + (k - 1) * dl + 1 for o, st, k, dl in zip(out_shape, s, kernel, d)]
    flat = not any(pb) and all(n <= size for n, size in zip(lengths, in_shape))
    # one window covering each whole plane (the 7x7 pools closing classifiers): one reduction
    # over the contiguous plane instead of k - 1 shifted passes per axis on a one-pixel output
    one_window = (
        flat and tuple(lengths) == tuple(in_shape) and all(o == 1 for o in out_shape) and all(dl == 1 for dl in d)
    )
    if one_window and mode != "lp":
        # the global pool: one matrix-vector product for the average of float planes (a
        # reduction along rows of 49 cells costs numpy ~50 ns a row), fmax's for the maximum
        return global_pool(x, mode)

    def work(lo: int, hi: int) -> None:
        src = xs[lo:hi]
        if mode == "lp":  # |x|^p, then sums, then the p-th root
            src = np.abs(src) if pf == 1 else np.square(src) if pf == 2 else np.abs(src) ** cdt.type(pf)
        part = y[lo:hi]
        if one_window:
            # fmax.reduce gives NaN only for a plane of NaN alone, as the windowed path does
            ufunc.reduce(src.reshape(hi - lo, -1), axis=1, out=part.reshape(hi - lo))
        elif flat:
            _flat_pool(src[:, 0], kernel, s, d, pb, out_shape, ufunc, identity, part[:, 0])
        else:
            part = _separable(src, kernel, s, d, pb, out_shape, ufunc, identity, out=part)
        if mode == "max" and cdt.kind == "f" and not one_window:
            _nan_only_windows(src, part, kernel, s, d, pb, out_shape)
        if mode == "avg":
            np.multiply(part, scale, out=part)
        elif mode == "lp":
            if pf == 2:
                np.sqrt(part, out=part)
            elif pf != 1:
                np.power(part, cdt.type(1.0 / pf), out=part)

    coarse_parallel_for(planes, work, work_per_item=prod(in_shape) * 2)
    y = y.reshape(full)
    return y if y.dtype == out_dtype else y.astype(out_dtype)


def global_pool(x: np.ndarray, mode: str, p: float = 2) -> np.ndarray:
    """Pooling over every spatial axis of X (N, C, *S) -> (N, C, 1, ..., 1); see :func:`pool` for the modes."""
    x = np.asarray(x)
    if x.ndim < 2:
        raise KernelError(f"X must have rank >= 2 (N, C, spatial...), got shape {list(x.shape)}.")
    axes = tuple(range(2, x.ndim))
    cdt = _pool_dtype(x.dtype)
    xc = x if x.dtype == cdt else x.astype(cdt)
    if not axes:
        y = xc.copy() if mode != "lp" else np.abs(xc)
    elif mode == "max":
        if xc.size == 0:
            raise KernelError(f"GlobalMaxPool needs a non-empty spatial extent, got shape {list(x.shape)}.")
        y = np.fmax.reduce(xc, axis=axes, keepdims=True) if cdt.kind == "f" else np.max(xc, axis=axes, keepdims=True)
    elif mode == "avg":
        cells = prod(xc.shape[2:])
        if cdt.kind == "f" and xc.flags.c_contiguous and 0 < cells <= GLOBAL_AVG_GEMV_CELLS:
            # one matrix-vector product against ones (BLAS: 4-7x numpy's mean over
            # the short rows of a CNN's last maps); its float32 sums run in 8-16 SIMD
            # lanes, within a few ulp of numpy's pairwise sums at these lengths
            planes = xc.reshape(-1, cells)
            y = (planes @ np.ones(cells, cdt)).reshape(xc.shape[:2] + (1,) * len(axes))
            y /= cdt.type(cells)
        else:
            y = np.mean(xc, axis=axes, keepdims=True, dtype=cdt)
    else:
        pf = float(p)
        if pf == 2:
            y = np.sqrt(np.sum(np.square(xc), axis=axes, keepdims=True))
        else:
            y = np.sum(np.abs(xc) ** cdt.type(pf), axis=axes, keepdims=True) ** cdt.type(1.0 / pf)
    y = np.asarray(y)
    return y if y.dtype == x.dtype else y.astype(x.dtype)


# ---------------------------------------------------------------------------------------
# classes: one per operator, versions listed where only types or attributes changed
# ---------------------------------------------------------------------------------------


class _PoolBase(OpRun):
    mode = "max"

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        check_auto_pad(self, self.auto_pad)
        if not self.kernel_shape:
            raise InvalidAttributeError(f"{self.node_label()} misses the required attribute 'kernel_shape'.")
        self._kw = dict(
            strides=self.strides,
            pads=self.pads,
            dilations=getattr(self, "dilations", None),
            auto_pad=self.auto_pad,
            ceil_mode=getattr(self, "ceil_mode", 0) or 0,
        )
        self._checked: tuple[int, ...] | None = None  # the input shape whose sizes passed check_alloc

    def _check_sizes(self, x) -> None:
        # the model's pads decide the padded input's and the output's sizes: checked once per input shape
        kw = self._kw
        _, _, _, pb, pe, out_shape = _pool_geometry(
            x.shape, self.kernel_shape, kw["strides"], kw["pads"], kw["dilations"], kw["auto_pad"], kw["ceil_mode"]
        )
        lead = list(x.shape[:2])
        self.check_alloc(lead + [max(int(o), 0) for o in out_shape], np.float64 if x.dtype == np.float64 else np.float32)
        self.check_alloc(lead + [n + b + e for n, b, e in zip(x.shape[2:], pb, pe)], x.dtype, "padded input")
        self._checked = x.shape

    def run_pool(self, x, mode: str, **kw):
        """:func:`pool` under the session's intra-op thread cap, with the node's prepared executors."""
        if x.shape != self._checked:
            self._check_sizes(x)
        return pool(x, mode, self.kernel_shape, **self._kw, **kw)


@register("MaxPool", versions=(1, 8, 10, 11, 12, 22))
class MaxPool(_PoolBase):
    """MaxPool: 1, 8 (Indices output, storage_order), 10 (ceil_mode, dilations), 11 (same), 12 (int8/uint8), 22 (bfloat16).

    Kernel: :func:`pool`. The Indices output is computed only when the node names it.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._storage_order = getattr(self, "storage_order", 0) or 0
        if self._storage_order not in (0, 1):
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'storage_order' is {self._storage_order}, expected 0 or 1."
            )
        outs = list(onnx_node.output)
        self._with_indices = len(outs) > 1 and bool(outs[1])

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if self._with_indices:
            return self.run_pool(x, "max", storage_order=self._storage_order, with_indices=True)
        return (self.run_pool(x, "max"),)


@register("AveragePool", versions=(1, 7, 10, 11, 19, 22))
class AveragePool(_PoolBase):
    """AveragePool: 1, 7 (count_include_pad), 10 (ceil_mode), 11 (same), 19 (dilations), 22 (bfloat16). Kernel: :func:`pool`."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (self.run_pool(x, "avg", count_include_pad=getattr(self, "count_include_pad", 0) or 0),)


@register("LpPool", versions=(1, 2, 11, 18, 22))
class LpPool(_PoolBase):
    """LpPool: 1 (float p), 2 (integer p), 11 (same), 18 (ceil_mode, dilations), 22 (bfloat16). Kernel: :func:`pool`."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (self.run_pool(x, "lp", p=self.p),)


@register("GlobalMaxPool", versions=(1, 22))
class GlobalMaxPool(OpRun):
    """GlobalMaxPool: 1, 22 (bfloat16). Kernel: :func:`global_pool`."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (global_pool(x, "max"),)


@register("GlobalAveragePool", versions=(1, 22))
class GlobalAveragePool(OpRun):
    """GlobalAveragePool: 1, 22 (bfloat16). Kernel: :func:`global_pool`."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (global_pool(x, "avg"),)


@register("GlobalLpPool", versions=(1, 2, 22))
class GlobalLpPool(OpRun):
    """GlobalLpPool: 1 (float p), 2 (integer p), 22 (bfloat16). Kernel: :func:`global_pool`."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (global_pool(x, "lp", self.p),)
