"""Resize (10, 11, 13, 18, 19) and Upsample (1, 7, 9, 10): one separable resampling core."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from functools import lru_cache
from typing import Any

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._indexing import normalize_axis
from ._op import OpRun

MODES = ("nearest", "linear", "cubic")
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")
KEEP_ASPECT_RATIO_POLICIES = ("stretch", "not_larger", "not_smaller")
#: coordinate_transformation_mode values per Resize version
COORDINATE_MODES = {
    11: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"),
    13: ("half_pixel", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"),
    19: ("half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric", "tf_crop_and_resize"),
}
#: Upsample and Resize-10 round nearest coordinates this way ("simple" in onnxruntime)
LEGACY_NEAREST = "legacy"
#: axes whose input is longer than this are resampled block by block (banded matrices)
_DENSE_LIMIT = 16
#: about this many inputs feed each block of outputs
_BLOCK_INPUTS = 16
#: the longest output period (outputs per repeat of the interpolation weights) run by phases
_MAX_PERIOD = 4
#: OpenBLAS runs a product of at most 65536 * 4 multiply-adds on the calling thread; larger
#: ones wake its threads, which on a loaded machine can cost milliseconds per call
_GEMM_SERIAL = 65536 * 4


# --------------------------------------------------------------------------------------
# per-axis coordinates and weights
# --------------------------------------------------------------------------------------


def source_coordinates(
    out_len: int,
    in_len: int,
    scale: float,
    mode: str,
    roi_start: float = 0.0,
    roi_end: float = 1.0,
    resized: float | None = None,
    dtype: type = np.float32,
) -> np.ndarray:
    """``x_original`` of every output position of one axis, per the spec's formulas.

    ``align_corners`` and ``tf_crop_and_resize`` divide by ``length_resized - 1`` where the
    spec defines ``scale = length_resized / length_original``: with a scale input that length
    is ``in_len * scale`` (``resized``, default), fractional when floor() cut the output (the
    conformance suite expects this; onnxruntime divides by the integer output length).
    ``pytorch_half_pixel`` tests the integer output length, as PyTorch does.
    Returned as float64, computed in ``dtype``.
    """
    # float32 by default, in the order of the formulas, as onnxruntime computes them: the
    # rounding of nearest neighbours at exact halves and the extrapolated positions then
    # agree with it; interpolation weights use float64
    f = dtype
    x = np.arange(out_len, dtype=f)
    s, half, n_in, one = f(scale), f(0.5), f(in_len), f(1.0)
    length_resized = f(in_len) * s if resized is None else f(resized)
    if mode == "half_pixel":
        xo = (x + half) / s - half
    elif mode == "half_pixel_symmetric":
        # output_width_int / output_width recentres the sampled window when floor() cut it
        adjustment = f(out_len) / (n_in * s)
        offset = n_in / f(2.0) * (one - adjustment)
        xo = offset + (x + half) / s - half
    elif mode == "pytorch_half_pixel":
        xo = (x + half) / s - half if out_len > 1 else np.zeros(out_len, dtype=f)
    elif mode == "align_corners":
        if length_resized != one:
            xo = x * (n_in - one) / (length_resized - one)
        else:
            xo = np.zeros(out_len, dtype=f)
    elif mode == "asymmetric":
        xo = x / s
    elif mode == "tf_half_pixel_for_nn":
        xo = (x + half) / s
    elif mode == "tf_crop_and_resize":
        start, end = f(roi_start), f(roi_end)
        if length_resized != one:
            xo = start * (n_in - one) + x * (end - start) * (n_in - one) / (length_resized - one)
        else:
            xo = np.full(out_len, half * (start + end) * (n_in - one), dtype=f)
    else:
        raise KernelError(f"coordinate_transformation_mode {mode!r} is unknown.")
    return xo.astype(np.float64)


def nearest_indices(xo: np.ndarray, in_len: int, nearest_mode: str, scale: float) -> np.ndarray:
    """Input index of every output position for mode ``nearest``, clamped into the axis."""
    if nearest_mode == "round_prefer_floor":
        idx = np.ceil(xo - 0.5)  # halves go down
    elif nearest_mode == "round_prefer_ceil":
        idx = np.floor(xo + 0.5)  # halves go up
    elif nearest_mode == "floor":
        idx = np.floor(xo)
    elif nearest_mode == "ceil":
        idx = np.ceil(xo)
    elif nearest_mode == LEGACY_NEAREST:
        # Upsample and Resize-10 leave the rounding unspecified; onnxruntime truncates when
        # upsampling and rounds up when downsampling, and onnxrt does the same
        idx = np.ceil(xo) if scale < 1 else np.trunc(xo)
    else:
        raise KernelError(f"nearest_mode {nearest_mode!r} is unknown.")
    return np.clip(idx, 0, in_len - 1).astype(np.intp)


def _linear_kernel(d: np.ndarray, a: float) -> np.ndarray:
    return np.maximum(0.0, 1.0 - np.abs(d))


def _cubic_kernel(d: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel with coefficient ``a`` (support [-2, 2])."""
    d = np.abs(d)
    near = ((a + 2.0) * d - (a + 3.0)) * d * d + 1.0
    far = ((a * d - 5.0 * a) * d + 8.0 * a) * d - 4.0 * a
    return np.where(d <= 1.0, near, np.where(d < 2.0, far, 0.0))


def filter_taps(
    xo: np.ndarray,
    in_len: int,
    mode: str,
    scale: float,
    cubic_coeff_a: float = -0.75,
    exclude_outside: int = 0,
    antialias: int = 0,
    positions: bool = False,
) -> tuple[np.ndarray, ...]:
    """(indices, weights), both ``[out, taps]``, of linear or cubic interpolation at ``xo``
    (and the unclamped tap positions when ``positions``).

    Without antialias the taps are the 2 (linear) or 4 (cubic) neighbours. With antialias
    and a downscale, the kernel is stretched by 1/scale, so every input point closer than
    support/scale contributes, weighted by kernel(distance * scale) and normalised to a
    sum of 1. Neighbours outside the axis repeat the edge value, or get no weight when
    ``exclude_outside`` is set (the weights are then renormalised).
    """
    stretch = min(scale, 1.0) if antialias else 1.0
    radius = 1.0 if mode == "linear" else 2.0
    support = radius / stretch
    kernel = _linear_kernel if mode == "linear" else _cubic_kernel
    base = np.floor(xo)
    first = int(np.floor(-support)) + 1
    last = int(np.ceil(support + 1.0)) - 1
    offsets = np.arange(first, last + 1, dtype=np.float64)
    pos = base[:, None] + offsets[None, :]
    weights = kernel((pos - xo[:, None]) * stretch, cubic_coeff_a)
    inside = (pos >= 0) & (pos <= in_len - 1)
    if exclude_outside:
        weights = np.where(inside, weights, 0.0)
    if antialias or exclude_outside:
        total = weights.sum(axis=1, keepdims=True)
        weights = np.divide(weights, total, out=np.zeros_like(weights), where=total != 0)
    idx = np.clip(pos, 0, in_len - 1).astype(np.intp)
    return (idx, weights, pos) if positions else (idx, weights)


def _band_blocks(idx: np.ndarray, weights: np.ndarray, in_len: int) -> tuple[tuple[int, int, int, int, np.ndarray], ...]:
    """The resampling matrix (out x in, duplicate taps summed) cut along its diagonal band
    into dense blocks ``(out_start, out_stop, in_start, in_stop, matrix)``.

    Each block maps a run of outputs from the short window of inputs it reads, so the
    matrix products skip the zeros away from the band (a few times faster than one dense
    product for a 2x linear resize; a single block for short axes)."""
    out_len = idx.shape[0]
    if in_len <= _DENSE_LIMIT:
        bounds = [(0, out_len)]
    else:
        ratio = in_len / max(out_len, 1)
        step = int(min(max(_BLOCK_INPUTS / ratio, 4), 64))
        bounds = [(o, min(o + step, out_len)) for o in range(0, out_len, step)]
    blocks = []
    for o0, o1 in bounds:  # a loop over blocks of outputs, not over elements
        sub_idx, sub_w = idx[o0:o1], weights[o0:o1]
        keep = sub_w != 0
        if len(bounds) == 1:
            lo, hi = 0, in_len
        elif keep.any():
            lo, hi = int(sub_idx[keep].min()), int(sub_idx[keep].max()) + 1
        else:
            lo, hi = 0, 1
        mat = np.zeros((o1 - o0, hi - lo), dtype=np.float64)
        rows = np.broadcast_to(np.arange(o1 - o0)[:, None], sub_idx.shape)
        np.add.at(mat, (rows[keep], sub_idx[keep] - lo), sub_w[keep])
        blocks.append((o0, o1, lo, hi, mat))
    return tuple(blocks)


@dataclass(frozen=True)
class Phase:
    """Outputs ``start, start + step, ...`` (``count`` of them) that all read the inputs
    ``in_start + k * in_step`` of every tap with the same weights: strided slices."""

    start: int
    count: int
    step: int
    in_step: int
    taps: tuple[tuple[int, float], ...]  # (first input, weight)


@dataclass(frozen=True)
class AxisPlan:
    """How one axis is resampled: a gather (nearest); for linear and cubic, banded matrix
    blocks, or polyphase strided slices for shrinks whose weights repeat every few outputs
    (the border outputs gathered), or one gather per tap for other strong shrinks."""

    in_len: int
    out_len: int
    index: np.ndarray | None
    blocks: tuple[tuple[int, int, int, int, np.ndarray], ...]
    outside: np.ndarray | None
    taps: tuple[np.ndarray, np.ndarray] | None = None
    phases: tuple[Phase, ...] = ()
    border: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None  # outputs, indices, weights


def _rational(scale: float) -> Fraction | None:
    """``P/Q`` (P <= _MAX_PERIOD) when ``scale`` is a float32 rounding of it, else None."""
    frac = Fraction(scale).limit_denominator(4 * _MAX_PERIOD)
    if frac.numerator > _MAX_PERIOD or abs(float(frac) - scale) > 1e-6 * scale:
        return None
    return frac


def _phases(idx: np.ndarray, w: np.ndarray, pos: np.ndarray, in_len: int, period: int, in_step: int):
    """Split an axis whose weights repeat every ``period`` outputs (``in_step`` inputs
    further) into phases over its interior, where no tap leaves the axis; the outputs
    around it are gathered. None when the weights do not repeat."""
    out_len = idx.shape[0]
    inside = np.flatnonzero(((pos >= 0) & (pos <= in_len - 1)).all(axis=1))
    if inside.size == 0:
        return None
    a, b = int(inside[0]), int(inside[-1]) + 1
    if b - a != inside.size or b - a < 2 * period:
        return None
    if not np.array_equal(idx[a + period : b], idx[a : b - period] + in_step):
        return None
    if not np.allclose(w[a + period : b], w[a : b - period], rtol=0, atol=1e-9):
        return None
    phases = []
    for p in range(a, min(a + period, b)):  # one phase per output of the first period
        count = (b - 1 - p) // period + 1
        taps = tuple((int(idx[p, t]), float(w[p, t])) for t in range(idx.shape[1]) if w[p, t] != 0)
        phases.append(Phase(p, count, period, in_step, taps))
    rest = np.r_[0:a, b:out_len].astype(np.intp)
    return tuple(phases), (rest, idx[rest], w[rest])


@lru_cache(maxsize=256)
def axis_plan(
    in_len: int,
    out_len: int,
    scale: float,
    mode: str,
    coordinate_mode: str,
    nearest_mode: str,
    cubic_coeff_a: float,
    exclude_outside: int,
    antialias: int,
    roi_start: float,
    roi_end: float,
    resized: float,
) -> AxisPlan:
    """The cached plan of one axis (a model run again on the same shapes reuses it)."""
    xo = source_coordinates(out_len, in_len, scale, coordinate_mode, roi_start, roi_end, resized)
    outside = None
    if coordinate_mode == "tf_crop_and_resize":
        out_mask = (xo < 0) | (xo > in_len - 1)
        outside = out_mask if out_mask.any() else None
    if mode == "nearest":
        return AxisPlan(in_len, out_len, nearest_indices(xo, in_len, nearest_mode, scale), (), outside)
    # weights in float64; a scale that is the float32 rounding of P/Q counts as P/Q exactly,
    # so that the weights repeat every P outputs (they differ from the float32 ones by
    # less than that rounding)
    frac = _rational(scale)
    exact = float(frac) if frac is not None else scale
    if resized == in_len * scale:  # a length derived from the scale follows it
        resized = in_len * exact
    xo = source_coordinates(out_len, in_len, exact, coordinate_mode, roi_start, roi_end, resized, dtype=np.float64)
    idx, w, pos = filter_taps(xo, in_len, mode, scale, cubic_coeff_a, exclude_outside, antialias, positions=True)
    if frac is not None and in_len > out_len:
        # shrinking: strided slices beat matrix products that are mostly zeros; growing
        # runs faster through the band blocks below
        found = _phases(idx, w, pos, in_len, frac.numerator, frac.denominator)
        if found is not None:
            return AxisPlan(in_len, out_len, None, (), outside, phases=found[0], border=found[1])
    if in_len >= 2 * out_len and idx.shape[1] <= 4:
        # a strong shrink without antialias reads a few inputs per output: the matrix
        # products would mostly multiply zeros, one gather per tap is cheaper
        return AxisPlan(in_len, out_len, None, (), outside, (idx, w))
    return AxisPlan(in_len, out_len, None, _band_blocks(idx, w, in_len), outside)


def _apply_taps(x: np.ndarray, axis: int, plan: AxisPlan) -> np.ndarray:
    """Sum over the taps of weight * input gathered along ``axis`` (a loop over 2 to 4 taps)."""
    idx, w = plan.taps
    shape = [1] * x.ndim
    shape[axis] = plan.out_len
    weights = w.astype(x.real.dtype)
    acc = np.take(x, idx[:, 0], axis=axis)
    acc *= weights[:, 0].reshape(shape)
    for t in range(1, idx.shape[1]):
        term = np.take(x, idx[:, t], axis=axis)
        term *= weights[:, t].reshape(shape)
        acc += term
    return acc


def _phases_into(x3: np.ndarray, out: np.ndarray, plan: AxisPlan) -> None:
    """Fill ``out`` (pre, out_len, post) from ``x3`` (pre, in_len, post) phase by phase."""
    real = x3.real.dtype.type
    tmp_buf = None
    for ph in plan.phases:  # at most _MAX_PERIOD phases, each a few whole-array operations
        dst = out[:, ph.start : ph.start + ph.step * (ph.count - 1) + 1 : ph.step]
        span = ph.in_step * (ph.count - 1) + 1
        if not ph.taps:
            dst[...] = 0
            continue
        if len(ph.taps) == 2 and abs(ph.taps[0][1] + ph.taps[1][1] - 1.0) < 1e-12:
            # two weights summing to 1 (linear): w * (a - b) + b, no temporary
            (ia, wa), (ib, _) = ph.taps
            b = x3[:, ib : ib + span : ph.in_step]
            np.subtract(x3[:, ia : ia + span : ph.in_step], b, out=dst)
            dst *= real(wa)
            dst += b
            continue
        first, weight = ph.taps[0]
        np.multiply(x3[:, first : first + span : ph.in_step], real(weight), out=dst)
        for first, weight in ph.taps[1:]:
            if tmp_buf is None or tmp_buf.shape[1] < ph.count:
                tmp_buf = np.empty((x3.shape[0], ph.count, x3.shape[2]), dtype=x3.dtype)
            tmp = tmp_buf[:, : ph.count]
            np.multiply(x3[:, first : first + span : ph.in_step], real(weight), out=tmp)
            dst += tmp
    rest, idx, w = plan.border
    if rest.size:
        weights = w.astype(real)
        acc = np.take(x3, idx[:, 0], axis=1) * weights[:, 0, None]
        for t in range(1, idx.shape[1]):
            acc += np.take(x3, idx[:, t], axis=1) * weights[:, t, None]
        out[:, rest] = acc


def _apply_phases(x: np.ndarray, axis: int, plan: AxisPlan) -> np.ndarray:
    """Each phase: a weighted sum of strided input slices written to strided outputs (no
    gather, no matrix product); then the border outputs, gathered."""
    shape = x.shape
    pre = int(np.prod(shape[:axis], dtype=np.int64))
    post = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    out = np.empty((pre, plan.out_len, post), dtype=x.dtype)
    # one thread: on a loaded machine the kernel pool's threads made this slower
    _phases_into(x.reshape(pre, plan.in_len, post), out, plan)
    return out.reshape(shape[:axis] + (plan.out_len,) + shape[axis + 1 :])


def _serial_rows(rows: int, work_per_row: int) -> int:
    """The largest divisor of ``rows`` whose products stay within ``_GEMM_SERIAL``."""
    m = max(1, min(rows, _GEMM_SERIAL // max(work_per_row, 1)))
    while rows % m:
        m -= 1
    return m


def _apply_blocks(x: np.ndarray, axis: int, plan: AxisPlan) -> np.ndarray:
    """Multiply axis ``axis`` of ``x`` by the plan's matrix, block by block: batched BLAS
    products small enough to run on one thread each (see ``_GEMM_SERIAL``)."""
    if plan.phases:
        return _apply_phases(x, axis, plan)
    if plan.taps is not None:
        return _apply_taps(x, axis, plan)
    shape = x.shape
    pre = int(np.prod(shape[:axis], dtype=np.int64))
    post = int(np.prod(shape[axis + 1 :], dtype=np.int64))
    real = x.real.dtype
    new_shape = shape[:axis] + (plan.out_len,) + shape[axis + 1 :]
    widest = max((o1 - o0) * (hi - lo) for o0, o1, lo, hi, _ in plan.blocks)
    if post == 1:
        # the last axis: rows in batches, out[b, r, :] = x[b, r, :] @ block.T
        m = _serial_rows(pre, widest)
        x3 = x.reshape(pre // m, m, plan.in_len)
        out = np.empty((pre // m, m, plan.out_len), dtype=x.dtype)
        for o0, o1, lo, hi, mat in plan.blocks:
            np.matmul(x3[:, :, lo:hi], mat.T.astype(real, copy=False), out=out[:, :, o0:o1])
        return out.reshape(new_shape)
    x3 = x.reshape(pre, plan.in_len, post)
    out = np.empty((pre, plan.out_len, post), dtype=x.dtype)
    if post >= 8 or pre == 1:
        # one product per leading index, out[p] = block @ x[p], over runs of columns
        cols = max(8, _GEMM_SERIAL // widest)
        for o0, o1, lo, hi, mat in plan.blocks:
            m = mat.astype(real, copy=False)
            for c0 in range(0, post, cols):  # one run unless the trailing axes are long
                np.matmul(m, x3[:, lo:hi, c0 : c0 + cols], out=out[:, o0:o1, c0 : c0 + cols])
    else:  # many short rows: one product with the leading axis folded in
        for o0, o1, lo, hi, mat in plan.blocks:
            res = np.tensordot(x3[:, lo:hi, :], mat.astype(real, copy=False), axes=([1], [1]))
            out[:, o0:o1, :] = res.transpose(0, 2, 1)
    return out.reshape(new_shape)


def _compute_dtype(dtype: np.dtype, mode: str) -> np.dtype:
    """float32/float64/complex run as they are, float16 and bfloat16 in float32, integers
    in float64."""
    if dtype.kind in "fc" and dtype.itemsize >= 4:
        return dtype
    if dtype.kind in "iu":
        return np.dtype(np.float64)
    if dtype.kind in "bOUS":
        raise KernelError(f"mode {mode!r} interpolates numbers, it cannot resample a tensor of {dtype}.")
    return np.dtype(np.float32)


def _to_output(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    if y.dtype == dtype:
        return y
    if dtype.kind in "iu":
        # integer outputs: the interpolated value truncated, as Cast does and as
        # onnxruntime (whose float32 sums may land just below an exact integer and give one
        # less); values within rounding noise of an integer count as that integer, and
        # cubic overshoots saturate
        nearest = np.rint(y)
        y = np.where(np.abs(y - nearest) <= 1e-9 * np.maximum(np.abs(y), 1.0), nearest, y)
        info = np.iinfo(dtype)
        y = np.clip(y, info.min, info.max)
    return y.astype(dtype)


# --------------------------------------------------------------------------------------
# the kernel
# --------------------------------------------------------------------------------------


def output_size(
    in_shape: tuple[int, ...],
    axes: list[int],
    scales: np.ndarray | None,
    sizes: np.ndarray | None,
    policy: str = "stretch",
) -> tuple[list[int], list[float]]:
    """Output length and scale of every axis of ``axes``, from ``scales`` or ``sizes``.

    From scales: ``floor(in * scale)``; onnxruntime ignores the roi of tf_crop_and_resize
    here although the spec writes ``floor(in * (end - start) * scale)``, and onnxrt follows it.
    From sizes: the sizes themselves ("stretch", scale out/in), or one common scale, the
    smallest ("not_larger") or largest ("not_smaller") of sizes/in, and round-half-up lengths.
    """
    if scales is not None:
        sc = [float(s) for s in np.asarray(scales, dtype=np.float64).reshape(-1)]
        if len(sc) != len(axes):
            raise KernelError(f"scales holds {len(sc)} values, expected {len(axes)} (one per resized axis).")
        if min(sc, default=1.0) <= 0:
            raise KernelError(f"scales must be > 0, got {sc}.")
        # float32 products, as onnxruntime: floor(5 * 0.6f) is 3 either way, but not every case
        return [int(np.floor(np.float32(in_shape[a]) * np.float32(s))) for a, s in zip(axes, sc)], sc
    sz = [int(s) for s in np.asarray(sizes).reshape(-1)]
    if len(sz) != len(axes):
        raise KernelError(f"sizes holds {len(sz)} values, expected {len(axes)} (one per resized axis).")
    if min(sz, default=0) < 0:
        raise KernelError(f"sizes must be >= 0, got {sz}.")
    lens = [in_shape[a] for a in axes]
    if policy == "stretch":
        return sz, [float(np.float32(s) / np.float32(n)) if n else 1.0 for s, n in zip(sz, lens)]
    ratios = [np.float32(s) / np.float32(n) for s, n in zip(sz, lens) if n]
    common = min(ratios) if policy == "not_larger" else max(ratios)
    return [int(np.floor(common * np.float32(n) + np.float32(0.5))) for n in lens], [float(common)] * len(axes)


def resize(
    x: np.ndarray,
    roi: np.ndarray | None = None,
    scales: np.ndarray | None = None,
    sizes: np.ndarray | None = None,
    mode: str = "nearest",
    coordinate_transformation_mode: str = "half_pixel",
    nearest_mode: str = "round_prefer_floor",
    cubic_coeff_a: float = -0.75,
    exclude_outside: int = 0,
    extrapolation_value: float = 0.0,
    antialias: int = 0,
    axes: list[int] | None = None,
    keep_aspect_ratio_policy: str = "stretch",
    check: Callable[[list[int], Any], None] | None = None,
) -> np.ndarray:
    """Resize ``x`` on ``axes`` (default all) to ``sizes`` or by ``scales`` (exactly one of them).

    Axes are resampled one after the other (the most shrunk first): ``nearest`` gathers;
    ``linear``/``cubic`` apply per-axis interpolation weights: banded matrix blocks
    (batched BLAS products), strided slices for shrinks by a short ratio (1/2, 2/3, 3/4...),
    or one gather per tap for other strong shrinks (see :class:`AxisPlan`). The coordinate transformation maps each
    output index to ``x_original`` in the input; ``tf_crop_and_resize`` reads ``roi``
    (starts then ends, normalised) and writes ``extrapolation_value`` where ``x_original``
    leaves [0, length - 1]. Nearest works on every element type; linear and cubic compute
    float16/bfloat16 in float32 and integers in float64, truncated at the end like Cast.
    ``check(shape, dtype)`` (the kernel's :meth:`OpRun.check_alloc`) sees the output shape
    before any coordinate table is built.
    """
    x = np.asarray(x)
    rank = x.ndim
    if axes is None:
        axes = list(range(rank))
    else:
        axes = [normalize_axis(int(a), rank, "axes") for a in axes]
        if len(set(axes)) != len(axes):
            raise KernelError(f"axes must not repeat an axis, got {axes}.")
    if scales is not None and np.asarray(scales).size == 0:
        scales = None
    if sizes is not None and np.asarray(sizes).size == 0:
        sizes = None
    if (scales is None) == (sizes is None):
        raise KernelError("exactly one of 'scales' and 'sizes' must be given (non-empty).")
    out_lens, used_scales = output_size(x.shape, axes, scales, sizes, keep_aspect_ratio_policy)
    if check is not None:
        planned = list(x.shape)
        for ax, n in zip(axes, out_lens):
            planned[ax] = n
        # linear and cubic hold the output in their compute type (float64 for integers)
        work = x.dtype if mode == "nearest" else _compute_dtype(x.dtype, mode)
        check(planned, work if np.dtype(work).itemsize > x.dtype.itemsize else x.dtype)
    starts = [0.0] * len(axes)
    ends = [1.0] * len(axes)
    if coordinate_transformation_mode == "tf_crop_and_resize":
        if roi is None or np.asarray(roi).size == 0:
            raise KernelError("coordinate_transformation_mode 'tf_crop_and_resize' needs a non-empty 'roi'.")
        r = np.asarray(roi, dtype=np.float64).reshape(-1)
        if r.size != 2 * len(axes):
            raise KernelError(f"roi holds {r.size} values, expected {2 * len(axes)} (starts then ends of the resized axes).")
        starts, ends = r[: len(axes)].tolist(), r[len(axes) :].tolist()

    out_shape = list(x.shape)
    plans: dict[int, AxisPlan] = {}
    for k, ax in enumerate(axes):
        n_in, n_out, scale = x.shape[ax], out_lens[k], used_scales[k]
        out_shape[ax] = n_out
        if n_out == n_in and scale == 1.0 and (starts[k], ends[k]) == (0.0, 1.0):
            continue  # every coordinate mode maps the axis onto itself
        if n_out == 0:
            continue
        if n_in == 0:
            raise KernelError(f"axis {ax} is empty and cannot be resized to {n_out}.")
        plans[ax] = axis_plan(
            n_in, n_out, scale, mode, coordinate_transformation_mode, nearest_mode,
            float(cubic_coeff_a), int(exclude_outside), int(antialias), starts[k], ends[k],
            # the exact target length when sizes gave it, else in * scale
            float(n_out) if sizes is not None and keep_aspect_ratio_policy == "stretch" else n_in * scale,
        )
    if 0 in out_shape:
        return np.empty(out_shape, dtype=x.dtype)
    if not plans:
        return x.copy()

    # the most shrunk axis first (less data for the next ones); among equals the innermost
    # first when growing, last when shrinking (its gathers then run on fewer rows)
    def rank(a: int) -> tuple[float, int]:
        ratio = plans[a].out_len / plans[a].in_len
        return ratio, (-a if ratio >= 1 else a)

    order = sorted(plans, key=rank)
    if mode == "nearest":
        y = x
        for ax in order:  # one take per axis: whole rows move at once
            y = np.take(y, plans[ax].index, axis=ax)
    else:
        y = x.astype(_compute_dtype(x.dtype, mode), copy=False)
        for ax in order:
            y = _apply_blocks(y, ax, plans[ax])
        y = _to_output(y, x.dtype)
    fill = None
    for ax, plan in plans.items():
        if plan.outside is not None:
            if not y.flags.writeable:
                y = y.copy()
            if fill is None:
                # the value converted like an interpolated one: an integer output saturates
                # (-1 or 300 in uint8 are 0 and 255, as onnx.reference; found by tests/fuzz)
                fill = _to_output(np.asarray([extrapolation_value], dtype=np.float64), y.dtype)[0]
            y[(slice(None),) * ax + (plan.outside,)] = fill
    return y


# --------------------------------------------------------------------------------------
# operators
# --------------------------------------------------------------------------------------


def _check(op: OpRun, name: str, value: object, allowed: tuple[str, ...]) -> None:
    if value not in allowed:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute {name!r} is {value!r}, expected one of {list(allowed)!r}."
        )


@register("Resize", versions=(11, 13, 18, 19))
class Resize(OpRun):
    """Resize 11 (roi and scales required, tf_half_pixel_for_nn), 13 (roi and scales
    optional, bfloat16), 18 (axes, antialias, keep_aspect_ratio_policy), 19
    (half_pixel_symmetric). See :func:`resize`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        since = self.since_version or 19
        _check(self, "mode", self.mode, MODES)
        _check(self, "nearest_mode", self.nearest_mode, NEAREST_MODES)
        modes = COORDINATE_MODES[11 if since < 13 else 13 if since < 19 else 19]
        _check(self, "coordinate_transformation_mode", self.coordinate_transformation_mode, modes)
        self._policy = getattr(self, "keep_aspect_ratio_policy", None) or "stretch"
        _check(self, "keep_aspect_ratio_policy", self._policy, KEEP_ASPECT_RATIO_POLICIES)
        self._axes = getattr(self, "axes", None)
        self._antialias = int(getattr(self, "antialias", 0) or 0)

    def _run(self, x, roi=None, scales=None, sizes=None, attributes=None, verbose=0, fLOG=None):
        return (
            resize(
                x, roi, scales, sizes,
                mode=self.mode,
                coordinate_transformation_mode=self.coordinate_transformation_mode,
                nearest_mode=self.nearest_mode,
                cubic_coeff_a=self.cubic_coeff_a,
                exclude_outside=self.exclude_outside,
                extrapolation_value=self.extrapolation_value,
                antialias=self._antialias,
                axes=self._axes,
                keep_aspect_ratio_policy=self._policy,
                check=self.check_alloc,
            ),
        )


def legacy_resize(x: np.ndarray, scales: np.ndarray, mode: str, check: Callable[[list[int], Any], None] | None = None) -> np.ndarray:
    """Upsample and Resize-10: ``asymmetric`` coordinates, nearest truncating when upsampling
    and rounding up when downsampling (onnxruntime's choice; the spec says nothing), or linear."""
    return resize(x, None, scales, None, mode=mode, coordinate_transformation_mode="asymmetric", nearest_mode=LEGACY_NEAREST, check=check)


@register("Resize", versions=(10,))
class Resize_10(OpRun):
    """Resize 10: inputs X and scales, modes nearest and linear (see :func:`legacy_resize`)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        _check(self, "mode", self.mode, ("nearest", "linear"))

    def _run(self, x, scales, attributes=None, verbose=0, fLOG=None):
        return (legacy_resize(x, scales, self.mode, self.check_alloc),)


@register("Upsample", versions=(1, 7, 9, 10))
class Upsample(OpRun):
    """Upsample 1 (4-D, height_scale/width_scale, modes nearest/bilinear), 7 (scales
    attribute), 9 and 10 (scales input; 10 deprecates it). Scales must be >= 1."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        since = self.since_version or 10
        _check(self, "mode", self.mode, ("nearest", "bilinear") if since < 7 else ("nearest", "linear"))
        self._mode = "linear" if self.mode == "bilinear" else self.mode
        self._scales = None
        if since < 7:
            if self.height_scale is None or self.width_scale is None:
                raise InvalidAttributeError(f"{self.node_label()} needs the attributes 'height_scale' and 'width_scale'.")
            self._scales = np.array([1.0, 1.0, self.height_scale, self.width_scale])
        elif since < 9:
            if self.scales is None:
                raise InvalidAttributeError(f"{self.node_label()} misses the required attribute 'scales'.")
            self._scales = np.asarray(self.scales, dtype=np.float64)
        if self._scales is not None and (self._scales < 1).any():
            raise InvalidAttributeError(f"{self.node_label()}: every scale must be >= 1, got {self._scales.tolist()}.")

    def _run(self, x, scales=None, attributes=None, verbose=0, fLOG=None):
        if self._scales is not None:
            if self._scales.size != np.ndim(x):
                raise KernelError(f"the scales hold {self._scales.size} values for an input of rank {np.ndim(x)}.")
            sc = self._scales
        else:
            if scales is None:
                raise KernelError("input 'scales' is missing.")
            sc = np.asarray(scales, dtype=np.float64)
            if (sc < 1).any():
                raise KernelError(f"every scale must be >= 1, got {sc.tolist()}.")
        return (legacy_resize(x, sc, self._mode, self.check_alloc),)
