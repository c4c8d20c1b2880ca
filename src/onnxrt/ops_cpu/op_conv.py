"""Conv (1, 11, 22): N-D convolution through im2col and BLAS, 1x1 as one matrix product, depthwise specialised."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import prod

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import KernelError
from .. import parallel
from ..registry import register
from ._conv_common import (
    apply_activation,
    coarse_matmul as matmul,
    coarse_parallel_for,
    as_compute,
    compute_dtype,
    conv_attributes,
    kernel_from,
    limit_threads,
    padded,
    scratch,
    session_threads,
    spatial_attr,
    to_output,
    window_geometry,
    window_view,
)
from ..native.blas import _blas_enter, _blas_exit, blas_sgemm_address
from ..parallel import BLAS_THREADS_FROM, KERNEL_THREADS, MIN_PARALLEL_WORK, parallel_for
from .. import native as _jit
from ._op import OpRun

#: bytes of im2col columns built at once; larger batches are processed in chunks of images
_COL_CHUNK_BYTES = 64 << 20


def check_conv_shapes(x: np.ndarray, w: np.ndarray, group: int, what: str = "W") -> None:
    """Raise KernelError unless X is ``(N, C, *S)``, W is ``(M, C/group, *K)`` and M divides by group."""
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


def conv_geometry(
    x: np.ndarray,
    w: np.ndarray,
    group: int,
    kernel_shape: Sequence[int] | None,
    strides: Sequence[int] | None,
    dilations: Sequence[int] | None,
    pads: Sequence[int] | None,
    auto_pad: str = "NOTSET",
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """The checked shapes and window geometry every convolution starts with (Conv, ConvInteger,
    QLinearConv, DeformConv): (kernel, strides, dilations, pads at the start, output spatial shape).
    Cached by shapes and attributes: a model asks the same questions on every run, and the
    answer cost ~10 us of Python per convolution."""
    return _conv_geometry(
        x.shape, w.shape, group, None if kernel_shape is None else tuple(kernel_shape),
        None if strides is None else tuple(strides), None if dilations is None else tuple(dilations),
        None if pads is None else tuple(pads), auto_pad,
    )


@lru_cache(maxsize=2048)
def _conv_geometry(x_shape, w_shape, group, kernel_shape, strides, dilations, pads, auto_pad):
    x, w = _Shape(x_shape), _Shape(w_shape)
    check_conv_shapes(x, w, group)  # type: ignore[arg-type]
    nd = len(x_shape) - 2
    kernel = kernel_from(w_shape, kernel_shape)
    s = spatial_attr(strides, nd, 1, "strides")
    d = spatial_attr(dilations, nd, 1, "dilations")
    pb, _, out_shape = window_geometry(x_shape[2:], kernel, s, d, pads, auto_pad)
    return kernel, s, d, tuple(pb), out_shape


class _Shape:
    """What check_conv_shapes reads of an array (its shape and rank), for the cached geometry."""

    __slots__ = ("ndim", "shape")

    def __init__(self, shape: tuple[int, ...]):
        self.shape = shape
        self.ndim = len(shape)


def conv_core(
    x: np.ndarray,
    w: np.ndarray,
    pads_begin: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    group: int,
    out_shape: Sequence[int],
    epilogue: list | None = None,
    out: np.ndarray | None = None,
    wcache: dict | None = None,
) -> np.ndarray:
    """The correlation ``Y[n, m, o] = sum_{c, k} W[m, c, k] * Xpad[n, g(m)*Cg + c, o*s + k*d]``.

    ``x`` and ``w`` share one floating dtype (the compute dtype); the result is a fresh
    ``(N, M, *out_shape)`` array of that dtype. ``epilogue``, a list ``[bias (M,), relu,
    residual]`` (float32; empty arrays for no bias or residual, the residual flat in the
    output's layout), asks the compiled paths (depthwise, bands) to add them and apply
    Relu while each piece of output is in cache; a path that did so clears the list.
    ``out``, a C-contiguous array of the result's shape and dtype (a block of a Concat's
    output), receives the result where the path writes its products there (one image:
    1x1, im2col and Winograd); the caller checks which array came back. Three paths:

    * 1x1 kernels without padding: no im2col, one matrix product (strided input subsampled);
    * depthwise (one input channel per group): :func:`_depthwise`, per-plane columns and
      one batched product;
    * otherwise im2col into a per-thread reused buffer (:func:`_im2col_same` for unit
      strides with same-size inner axes, a strided window view elsewhere, both split over
      the kernel thread pool), then one BLAS product per group, batched by ``np.matmul``;
      batches whose columns exceed ``_COL_CHUNK_BYTES`` go by chunks of images.
    """
    n_img, n_ch = x.shape[:2]
    m_out = w.shape[0]
    kernel = w.shape[2:]
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
                y = _product_with_epilogue(w2, xs.reshape(n_ch, npix), epilogue, _flat_out(out, m_out, npix))
            else:
                y = matmul(w2, xs.reshape(n_img, n_ch, npix))
        else:
            y = None
            if dtype == np.float32 and xs.flags.c_contiguous:
                y = _pointwise_groups_team(xs, w, n_img, group, mg, cg, npix, epilogue)
            if y is None:
                y = matmul(w.reshape(group, mg, cg), xs.reshape(n_img, group, cg, npix))
        return y.reshape((n_img, m_out) + tuple(out_shape))

    if cg == 1 and group > 1:
        if len(kernel) == 2 and m_out == n_ch and dtype == np.float32 and (k := _jit.kernels()) is not None:
            return _depthwise_compiled(k, x, w, pads_begin, strides, dilations, out_shape, epilogue)
        return _depthwise(x, w, pads_begin, strides, dilations, out_shape)

    same = all(st == 1 for st in strides) and tuple(out_shape[1:]) == tuple(x.shape[3:])
    if _winograd_fits(kernel, group, dtype, strides, dilations, n_ch, m_out, out_shape) and (
        (u := _winograd_weights(w, wcache)) is not None
    ):
        return _conv_winograd(x, u, pads_begin, tuple(out_shape), epilogue, out)
    if len(kernel) == 2 and dtype == np.float32 and (k := _jit.kernels()) is not None:
        if group == 1 and npix >= BAND_MIN_PIXELS and (sgemm := blas_sgemm_address()) is not None:
            return _conv_bands(k, sgemm, x, w, kernel, strides, dilations, pads_begin, tuple(out_shape), epilogue)
        fill = _im2col_compiled(k, x, kernel, strides, dilations, pads_begin, tuple(out_shape))
    elif same:
        fill = _im2col_same(x, kernel, dilations, pads_begin, tuple(out_shape))
    else:
        xp = padded(x, pads_begin, lengths, 0, buffer="conv_pad")
        windows = window_view(xp, kernel, strides, dilations, out_shape)  # (N, C, *K, *O), no copy

        def fill(start: int, stop: int, col: np.ndarray) -> None:
            src = windows[start:stop]
            dst = col.reshape(src.shape)

            def work(lo: int, hi: int) -> None:  # a range of channels
                np.copyto(dst[:, lo:hi], src[:, lo:hi])

            coarse_parallel_for(n_ch, work, work_per_item=(stop - start) * kp * npix)

    per_image = n_ch * kp * npix * dtype.itemsize
    chunk = max(1, _COL_CHUNK_BYTES // max(per_image, 1))
    if group == 1:
        w2 = w.reshape(m_out, n_ch * kp)
    else:
        w2 = w.reshape(group, mg, cg * kp)
    if n_img <= chunk:
        col = scratch("conv_col", (n_img, n_ch * kp, npix), dtype)
        fill(0, n_img, col)
        if group == 1:
            y = _product_with_epilogue(w2, col[0], epilogue, _flat_out(out, m_out, npix)) if n_img == 1 else matmul(w2, col)
        else:
            y = matmul(w2, col.reshape(n_img, group, cg * kp, npix))
        return y.reshape((n_img, m_out) + tuple(out_shape))
    y = np.empty((n_img, group, mg, npix) if group > 1 else (n_img, m_out, npix), dtype)
    for start in range(0, n_img, chunk):
        stop = min(n_img, start + chunk)
        col = scratch("conv_col", (stop - start, n_ch * kp, npix), dtype)
        fill(start, stop, col)
        if group == 1:
            matmul(w2, col, out=y[start:stop])
        else:
            matmul(w2, col.reshape(stop - start, group, cg * kp, npix), out=y[start:stop])
    return y.reshape((n_img, m_out) + tuple(out_shape))


#: input channels from which a 3x3 convolution with unit strides goes by Winograd F(2x2, 3x3)
#: (:func:`_conv_winograd`), when its 2x2 tiles waste at most 5% of their pixels (odd maps
#: such as 7x7, 13x13 and 27x27 waste 7-23%). The products' depth is C where im2col's is
#: 9 C: measured on one core against im2col and one product, 0.65-0.8 the time at 64 -> 96
#: (28x28), 96 -> 128 (14x14), 128 -> 128 (28x28), 256 -> 256 (14x14), 128 -> 32 (28x28,
#: densenet's), 0.85 at 32 -> 32 (56x56); 1.7 at 16 -> 64 (55x55); 1.05-1.15 at 13x13 and
#: 7x7 (but for 224 -> 224: 0.9)
WINO_MIN_CHANNELS = 32


def _winograd_fits(kernel, group, dtype, strides, dilations, n_ch, m_out, out_shape) -> bool:
    # the geometry for which conv_core takes Winograd (when the weights are read-only)
    return (
        tuple(kernel) == (3, 3) and group == 1 and dtype == np.float32 and tuple(strides) == (1, 1)
        and tuple(dilations) == (1, 1) and n_ch >= WINO_MIN_CHANNELS and m_out >= 16
        and prod(out_shape) * 20 >= ((out_shape[0] + 1) // 2) * ((out_shape[1] + 1) // 2) * 76
    )


def _winograd_weights(w: np.ndarray, wcache: dict | None) -> np.ndarray | None:
    """U = G g G^T (16, M, C) of the float32 3x3 weights ``w`` (M, C, 3, 3), computed in float64
    and rounded once, kept in ``wcache``: the node's own cache, given only when W is a model
    constant (OpRun.const_inputs: an initializer the plan holds, the same immutable array on
    every run). The entry holds ``w`` itself and is served for that very array only, so a
    freed array's id taken by another never finds its transform. None without the compiled
    loops and BLAS, or without ``wcache`` (a feed, which may change between runs even when
    read-only: the direct paths then run, a transform per run costs too much)."""
    if wcache is None or _jit.kernels() is None or blas_sgemm_address() is None:
        return None
    hit = wcache.get("winograd")
    if hit is not None and hit[0] is w:
        return hit[1]
    u = np.empty((16,) + w.shape[:2], np.float32)
    _jit.kernels().wino_weights(np.ascontiguousarray(w), u)  # 10 ms for 512 x 512 where einsum took 200
    wcache["winograd"] = (w, u)
    return u


def _conv_winograd(x: np.ndarray, u: np.ndarray, pads_begin: Sequence[int], out_shape: tuple,
                   epilogue: list | None, out: np.ndarray | None = None) -> np.ndarray:
    """A 3x3 float32 convolution with unit strides and dilations by Winograd F(2x2, 3x3):
    per image, the transformed 4x4 input tiles (16, C, tiles), 16 products with the
    transformed weights ``u`` (16, M, C), and the output transform with the epilogue's
    bias, residual and Relu (the list is then cleared). Each stage is split over the team
    (channels, products, output channels), or runs on the caller alone. The products hold
    2.25 times fewer multiply-adds than im2col's one and split over two threads without
    packing an operand twice: inception_v2's 3x3 layers 1.4-1.5x faster on one core. The
    result differs from the direct sum by float32 rounding only (the transforms add and
    subtract; the weights' halvings are exact in float64)."""
    k = _jit.kernels()
    sgemm = blas_sgemm_address()
    n_img, n_ch, height, width = x.shape
    m_out = u.shape[1]
    out_h, out_w = out_shape
    th, tw = (out_h + 1) // 2, (out_w + 1) // 2
    tiles = th * tw
    pt, pl = int(pads_begin[0]), int(pads_begin[1])
    y = np.empty((n_img, m_out, out_h, out_w), np.float32) if out is None else out.reshape(n_img, m_out, out_h, out_w)
    v = scratch("wino_v", (16, n_ch, tiles), np.float32)
    mx = scratch("wino_m", (16, m_out, tiles), np.float32)
    if epilogue:
        bias, relu, z = epilogue
    else:
        bias, relu, z = _NO_BIAS, False, _NO_BIAS
    per_image = m_out * out_h * out_w
    xc = np.ascontiguousarray(x)
    _blas_enter(1)  # the team's products are one thread each (already so inside a large run)
    try:
        _winograd_images(k, sgemm, xc, u, y, v, mx, pt, pl, th, tw, bias, relu, z, per_image)
    finally:
        _blas_exit(1)
    if epilogue:
        epilogue.clear()
    return y


def _winograd_images(k, sgemm, xc, u, y, v, mx, pt, pl, th, tw, bias, relu, z, per_image) -> None:
    n_img, n_ch, height, width = xc.shape
    m_out, out_h, out_w = y.shape[1:]
    tiles = th * tw
    for i in range(n_img):
        xi, yi = xc[i], y[i]
        zi = z[i * per_image:(i + 1) * per_image] if z.size else z
        if not _jit.team_split("wino_input_part", [xi, v, n_ch, height, width, pt, pl, th, tw], n_ch * tiles * 16,
                               max_parts=n_ch, part_size=WINO_TEAM_PART):
            k.wino_input(xi, v, 0, n_ch, pt, pl, th, tw)
        if not _jit.team_split("wino_gemm_part", [u, v, mx, m_out, n_ch, tiles, sgemm], 16 * m_out * n_ch * tiles,
                               max_parts=16, part_size=_jit.GEMM_TEAM_PART):
            np.matmul(u, v, out=mx)
        if not _jit.team_split("wino_output_part", [mx, yi, m_out, out_h, out_w, th, tw, bias, bias.size, int(relu),
                                                    zi, zi.size], m_out * tiles * 16,
                               max_parts=m_out, part_size=WINO_TEAM_PART):
            k.wino_output(mx, yi, 0, m_out, th, tw, bias, relu, zi)


#: transformed values per part of the Winograd transforms on the team
WINO_TEAM_PART = 1 << 15


def _flat_out(out: np.ndarray | None, rows: int, cols: int) -> np.ndarray | None:
    # one image's (M, P) view of ``out`` for the product to write into
    return None if out is None else out.reshape(rows, cols)


#: multiply-adds of one image's convolution product from which it is split in two on the
#: team while its workers are awake (inside a run), from BLAS_THREADS_FROM on also when they
#: sleep. squeezenet's squeeze layers have 16-64 output channels and 2.5M-6M multiply-adds,
#: which OpenBLAS runs at 60 GFLOPS on one core: the model measured 8.1 -> 7.6 ms from 2M;
#: from 1M (its 13x13 expand and squeeze layers, 1.6M-2.1M) 7.19 -> 6.95 and 8.48 -> 8.27
CONV_TEAM_FROM = 1 << 20


def _product_with_epilogue(w2: np.ndarray, cols: np.ndarray, epilogue: list | None,
                           out: np.ndarray | None = None) -> np.ndarray:
    """W (M, K) @ columns (K, P) of one image (into ``out`` when given): a float32 product
    large enough for two threads goes to the team by blocks with the bias, residual and
    Relu applied to each block in cache (the epilogue list is then cleared), others through
    :func:`matmul`."""
    work = w2.shape[0] * w2.shape[1] * cols.shape[1]
    if (
        w2.dtype == np.float32 and work >= CONV_TEAM_FROM
        and (y := _jit.team_gemm(w2, cols, out, epilogue, part_size=CONV_TEAM_FROM // 2, cold_total=BLAS_THREADS_FROM))
        is not None
    ):
        return y
    if out is not None and out.dtype == np.result_type(w2, cols):
        return matmul(w2, cols, out=out)
    return matmul(w2, cols)


#: multiply-adds of a grouped 1x1 convolution from which its items go to sleeping team
#: workers too (~100 us on one thread); below, only to awake ones (inside a hot run)
POINTWISE_COLD_WORK = 1 << 23

#: column-matrix elements per part when the compiled im2col splits its planes over the pool
IM2COL_PART = 1 << 20
#: column-matrix elements per part on the team (~15 us each; the team joins in microseconds
#: during a run, see native.team's hot runs)
IM2COL_TEAM_PART = 1 << 14


#: output pixels per image from which a 2-D float32 convolution goes by bands of output
#: rows (:func:`_conv_bands`): 56x56 and up (at 55x55 and below bands measured no faster)
BAND_MIN_PIXELS = 3136
#: bytes of im2col columns per band (fits the 512 KiB L2 of the machines measured)
BAND_BYTES = 1 << 19


def _conv_bands(k, sgemm: int, x: np.ndarray, w: np.ndarray, kernel, strides, dilations, pads_begin, out_shape,
                epilogue: list | None = None) -> np.ndarray:
    """A 2-D float32 convolution (group 1) by bands of output rows in the compiled loop
    ``conv2d_bands``: each thread of the pool builds one band's columns in its own small
    scratch and multiplies them by W with a single-threaded BLAS call straight into the
    output, taking bands until none is left. The columns stay in cache between their
    writing and the product, and the two threads work on separate bands instead of
    OpenBLAS splitting each product: 64->64 channels at 56x56 ran 1.53x onnxruntime's
    time through one im2col and OpenBLAS's two threads, 1.24x by bands."""
    n_img, n_ch = x.shape[:2]
    m_out = w.shape[0]
    depth = n_ch * kernel[0] * kernel[1]
    out_h, out_w = out_shape
    rows = max(1, min(out_h, BAND_BYTES // (4 * depth * out_w)))
    bands = n_img * -(-out_h // rows)
    xc = np.ascontiguousarray(x)
    w2 = np.ascontiguousarray(w).reshape(m_out, depth)
    y = np.empty((n_img, m_out, out_h * out_w), np.float32)
    counter = np.zeros(1, np.int64)
    bias, relu, z = _take_epilogue(epilogue)

    # one part per thread: each takes bands until the counter runs out (a late thread finds
    # none); BLAS runs single-threaded inside the loop. On the team when it takes the job
    # (no GIL, no pool wake-up; inside a run its workers are awake), else on the pool.
    threads = min(parallel.current_threads(), bands)
    cols = scratch("conv_bands", (max(threads, 1) * depth * rows * out_w,), np.float32)
    args = [xc, w2, y, counter, cols, bias, z, n_img, n_ch, *x.shape[2:], m_out, out_h, out_w, rows, sgemm,
            *kernel, *strides, *dilations, *pads_begin, bias.size, z.size, int(relu)]
    _blas_enter(1)
    try:
        if _jit.team_split("bands_part", args, threads, max_parts=threads, part_size=1):
            return y.reshape((n_img, m_out) + tuple(out_shape))
    finally:
        _blas_exit(1)

    def work(lo: int, hi: int) -> None:
        col = scratch("conv_band", (depth * rows * out_w,), np.float32)
        k.conv2d_bands(xc, w2, y, counter, rows, sgemm, col, out_h, out_w, *kernel, *strides, *dilations, *pads_begin,
                       bias, relu, z)

    parallel_for(min(KERNEL_THREADS, bands), work, work_per_item=MIN_PARALLEL_WORK)
    return y.reshape((n_img, m_out) + tuple(out_shape))


def _pointwise_groups_team(xs: np.ndarray, w: np.ndarray, n_img: int, group: int, mg: int, cg: int, npix: int,
                           epilogue: list | None) -> np.ndarray | None:
    """A grouped 1x1 float32 convolution with its (image, group) products shared by the
    caller and the team of GIL-free threads (``pointwise_groups_part``: one single-threaded
    BLAS call per item, each item's bias, residual and Relu while it is in cache), or None
    when the team does not take it. The same BLAS calls as the batched product, so the same
    bits; shufflenet's 4-group layers (4 items of 68x68x196) had them all on one thread."""
    if n_img * group * mg * cg * npix < 2 * _jit.TEAM_PART or (sgemm := blas_sgemm_address()) is None:
        return None
    y = np.empty((n_img, group * mg, npix), np.float32)
    bias, relu, z = epilogue if epilogue else (_NO_BIAS, False, _NO_BIAS)
    args = [np.ascontiguousarray(w), xs, y, bias, z, n_img, group, mg, cg, npix, sgemm, bias.size, z.size, int(relu), 0]
    _blas_enter(1)  # each item one single-threaded BLAS call (already so inside a large run)
    try:
        ran = _jit.team_split("pointwise_groups_part", args, n_img * group * mg * cg * npix, max_parts=n_img * group,
                              cold_total=POINTWISE_COLD_WORK)
    finally:
        _blas_exit(1)
    if not ran:
        return None
    if epilogue:
        epilogue.clear()
    return y


def _im2col_compiled(k, x: np.ndarray, kernel, strides, dilations, pads_begin, out_shape: tuple[int, ...]):
    """im2col of 2-D float32 images by the numba loop ``im2col2d`` (any strides, dilations
    and pads): each column row written once, zeros where a tap leaves the input. Returns
    ``fill(start, stop, col)`` as :func:`_im2col_same` does; blocks of channel planes go
    to the pool for large images."""
    n_ch = x.shape[1]
    kp = kernel[0] * kernel[1]
    npix = out_shape[0] * out_shape[1]

    def fill(start: int, stop: int, col: np.ndarray) -> None:
        planes = np.ascontiguousarray(x[start:stop]).reshape((-1,) + x.shape[2:])
        flat = col.reshape(-1)
        args = [planes, flat, planes.shape[0], *x.shape[2:], *out_shape, *kernel, *strides,
                *dilations, *pads_begin]
        if _jit.team_split("im2col_part", args, planes.shape[0] * kp * npix, max_parts=planes.shape[0],
                           part_size=IM2COL_TEAM_PART, cold_total=2 * IM2COL_PART):
            return

        def block(lo: int, hi: int) -> None:
            k.im2col2d(planes[lo:hi], flat[lo * kp * npix:hi * kp * npix], out_shape[0], out_shape[1],
                       kernel[0], kernel[1], *strides, *dilations, *pads_begin)

        _jit.split((stop - start) * n_ch, block, max(1, IM2COL_PART // (kp * npix)))

    return fill


def _im2col_same(
    x: np.ndarray,
    kernel: Sequence[int],
    dilations: Sequence[int],
    pads_begin: Sequence[int],
    out_shape: tuple[int, ...],
):
    """im2col for unit strides when the inner output axes keep the input's sizes (3x3 pad 1 and kin).

    Returns ``fill(start, stop, col)`` writing the columns (images, C*Kp, P) of images
    [start, stop). Like :func:`_depthwise_same`, each tap is one flat shifted copy of
    every channel plane (long contiguous rows instead of one short row per output row),
    with the rows outside the input and the pixels wrapped across an inner edge zeroed.
    """
    n_img, n_ch = x.shape[:2]
    spatial = tuple(x.shape[2:])
    plane = prod(spatial)
    rows_out = out_shape[0] * prod(spatial[1:])
    guard, _, taps = _same_plan(spatial, out_shape[0], tuple(kernel), tuple(dilations), tuple(pads_begin))
    kp = prod(kernel)
    inner = prod(spatial[1:])
    tail = spatial[1:]
    dtype = x.dtype

    used = {t for t, *_ in taps}
    unused = [t for t in range(kp) if t not in used]  # taps that never land inside the input

    def fill(start: int, stop: int, col: np.ndarray) -> None:
        xs = x[start:stop].reshape(-1, plane)
        cols_all = col.reshape(-1, kp, rows_out)

        def work(lo: int, hi: int) -> None:
            planes = hi - lo
            span = planes * plane
            buf = scratch("col_guard", (span + 2 * guard,), dtype)
            buf[:guard] = 0
            buf[guard + span:] = 0
            buf[guard:guard + span].reshape(planes, plane)[...] = xs[lo:hi]
            cols = cols_all[lo:hi]
            for t, a, b, off, bands in taps:
                begin = guard + off + a
                dst = cols[:, t]
                np.copyto(dst[:, a:b], buf[begin:begin + span].reshape(planes, plane)[:, :b - a])
                if a > 0:
                    dst[:, :a] = 0
                if b < rows_out:
                    dst[:, b:] = 0
                if bands:
                    grid = dst[:, a:b].reshape((planes, (b - a) // inner) + tail)
                    for band in bands:
                        grid[band] = 0
            for t in unused:
                cols[:, t] = 0

        coarse_parallel_for(xs.shape[0], work, work_per_item=kp * rows_out)

    return fill


#: multiply-adds per part of the compiled depthwise loop split over the pool (~0.5 ms of work)
_JIT_PART_TAPS = 1 << 22


def _take_epilogue(epilogue: list | None) -> tuple[np.ndarray, bool, np.ndarray]:
    """The bias, Relu flag and flat residual (empty arrays for none) of conv_core's
    ``epilogue``, which is cleared: the caller then knows they were applied."""
    if not epilogue:
        return _NO_BIAS, False, _NO_BIAS
    bias, relu, z = epilogue
    epilogue.clear()
    return bias, relu, z


_NO_BIAS = np.empty(0, np.float32)


def _depthwise_compiled(k, x: np.ndarray, w: np.ndarray, pads_begin, strides, dilations, out_shape,
                        epilogue: list | None = None) -> np.ndarray:
    """2-D float32 depthwise correlation (one output per channel) by the numba loop
    ``depthwise_conv2d``: each plane zero-padded once, then per output row one vectorised
    multiply-add per tap (3x3 at unit strides: all nine taps in registers, one store per
    output; 128 planes of 56x56 440 -> 220 us); blocks of planes go to the kernel pool.
    Several times the im2col path on shufflenet's 3x3 layers, whose columns cost more
    than their product."""
    n_img, n_ch = x.shape[:2]
    planes = n_img * n_ch
    xs = np.ascontiguousarray(x).reshape((planes,) + x.shape[2:])
    wk = np.ascontiguousarray(w).reshape((n_ch,) + w.shape[2:])
    y = np.empty((planes,) + tuple(out_shape), np.float32)
    bias, relu, z = _take_epilogue(epilogue)
    args = [xs, wk, y, bias, z, planes, *x.shape[2:],
            n_ch, *w.shape[2:], *out_shape, *strides, *dilations, *pads_begin, bias.size, z.size, int(relu)]
    if _jit.team_split("depthwise_part", args, planes * prod(out_shape) * w.shape[2] * w.shape[3], max_parts=planes,
                       cold_total=2 * _JIT_PART_TAPS):
        return y.reshape((n_img, n_ch) + tuple(out_shape))

    def work(lo: int, hi: int) -> None:
        zp = z[lo * y[0].size:hi * y[0].size] if z.size else z
        k.depthwise_conv2d(xs[lo:hi], wk, y[lo:hi], lo, *strides, *dilations, *pads_begin, bias, relu, zp)

    _jit.split(planes, work, max(1, _JIT_PART_TAPS // (prod(out_shape) * w.shape[2] * w.shape[3])))
    return y.reshape((n_img, n_ch) + tuple(out_shape))


#: bytes of depthwise columns built at once per thread (measured: 1-4 MB blocks are equally fast,
#: larger ones spill the cache and tiny ones pay numpy's per-call cost)
_DW_COL_BYTES = 4 << 20


def _depthwise(
    x: np.ndarray,
    w: np.ndarray,
    pads_begin: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
) -> np.ndarray:
    """Depthwise correlation (one input channel per group, ``mult`` outputs each): per-plane im2col and a batched product.

    Each (image, channel) plane gets its own (Kp, P) columns and the output is the batched
    product ``W[c] (mult, Kp) @ cols (Kp, P)``: one copy and one BLAS call per block of
    planes instead of a multiply and an add per tap (numpy's per-channel broadcast
    multiply runs at half the speed of a plain one). The zero padding is materialised,
    so an infinite weight meets it as 0 * inf = NaN, as the definition says.

    With unit strides each plane is padded once into a flat row of pitch ``padded width``;
    tap ``k`` then reads the contiguous slice starting at ``sum k_i * d_i * pitch_i``, so
    the columns are copied from one strided view with long contiguous rows (the few
    pitch-padding columns computed per row are cut at the end). Strided convolutions copy
    the window view of the padded input instead. Blocks of planes go to the kernel pool.
    """
    n_img, n_ch = x.shape[:2]
    mult = w.shape[0] // n_ch
    kernel = tuple(w.shape[2:])
    nd = len(kernel)
    kp = prod(kernel)
    planes = n_img * n_ch
    dtype = x.dtype
    it = dtype.itemsize
    out_shape = tuple(out_shape)
    npix = prod(out_shape)
    wk = w.reshape(n_ch, mult, kp)
    y = np.empty((planes, mult, npix), dtype)
    lengths = tuple((o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_shape, strides, kernel, dilations))

    def coefs(lo: int, hi: int) -> np.ndarray:  # (hi - lo, mult, Kp): the weights of planes [lo, hi)
        if n_img == 1:
            return wk[lo:hi]
        return wk[np.arange(lo, hi) % n_ch]

    if all(s == 1 for s in strides):
        pitch = [prod(lengths[i + 1:]) for i in range(nd)]
        rows = out_shape[0] * pitch[0]  # flat outputs per plane, pitch padding included
        size = prod(lengths)
        plane_len = max(size, rows + sum((k - 1) * d * p for k, d, p in zip(kernel, dilations, pitch)))
        tap_strides = tuple(d * p * it for d, p in zip(dilations, pitch))
        xs = x.reshape((planes, 1) + x.shape[2:])
        block = max(1, _DW_COL_BYTES // (kp * rows * it))

        def work(lo: int, hi: int) -> None:
            for b0 in range(lo, hi, block):
                b1 = min(hi, b0 + block)
                cnt = b1 - b0
                buf = scratch("dw_flat", (cnt, plane_len), dtype)
                padded(xs[b0:b1], pads_begin, lengths, 0, out=buf[:, :size].reshape((cnt, 1) + lengths))
                buf[:, size:] = 0
                view = as_strided(buf, (cnt,) + kernel + (rows,), (buf.strides[0],) + tap_strides + (it,), writeable=False)
                cols = scratch("dw_cols", (cnt,) + kernel + (rows,), dtype)
                np.copyto(cols, view)
                cols = cols.reshape(cnt, kp, rows)
                if nd == 1:  # no pitch padding: straight into the output
                    np.matmul(coefs(b0, b1), cols, out=y[b0:b1])
                    continue
                acc = scratch("dw_acc", (cnt, mult, rows), dtype)
                np.matmul(coefs(b0, b1), cols, out=acc)
                grid = acc.reshape((cnt, mult, out_shape[0]) + lengths[1:])
                np.copyto(
                    y[b0:b1].reshape((cnt, mult) + out_shape),
                    grid[(slice(None),) * 3 + tuple(slice(0, o) for o in out_shape[1:])],
                )

        coarse_parallel_for(planes, work, work_per_item=2 * mult * rows * kp)
    else:
        xp = padded(x, pads_begin, lengths, 0, buffer="conv_pad")
        windows = window_view(xp.reshape((planes, 1) + xp.shape[2:]), kernel, strides, dilations, out_shape)
        block = max(1, _DW_COL_BYTES // (kp * npix * it))

        def work(lo: int, hi: int) -> None:
            for b0 in range(lo, hi, block):
                b1 = min(hi, b0 + block)
                cols = scratch("dw_cols", (b1 - b0,) + kernel + out_shape, dtype)
                np.copyto(cols, windows[b0:b1, 0])
                np.matmul(coefs(b0, b1), cols.reshape(b1 - b0, kp, npix), out=y[b0:b1])

        coarse_parallel_for(planes, work, work_per_item=2 * mult * npix * kp)
    return y.reshape((n_img, n_ch * mult) + out_shape)


@lru_cache(maxsize=512)
def _same_plan(
    spatial: tuple[int, ...],
    out0: int,
    kernel: tuple[int, ...],
    dilations: tuple[int, ...],
    pads_begin: tuple[int, ...],
) -> tuple[int, int | None, tuple[tuple[int, int, int, int, tuple], ...]]:
    """Per tap of :func:`_im2col_same`: (tap index, first flat output, last + 1, flat shift, bands).

    ``bands`` are index tuples into the (rows, *inner) grid of the tap's output span whose
    pixels read across an inner edge (to be zeroed). Also the guard length and the tap
    seeding the accumulator (every pixel valid), or None. Cached: shapes repeat each run.
    """
    nd = len(spatial)
    pitches = [prod(spatial[i + 1:]) for i in range(nd)]
    taps = []
    guard = 1
    seed = None
    for t, tap in enumerate(np.ndindex(*kernel)):
        delta = [k * d - b for k, d, b in zip(tap, dilations, pads_begin)]
        off = sum(dl * p for dl, p in zip(delta, pitches))
        guard = max(guard, abs(off) + 1)
        r0, r1 = max(0, -delta[0]), min(out0, spatial[0] - delta[0])
        if r1 <= r0:
            continue
        bands = []
        for ax, dl in enumerate(delta[1:], start=1):  # grid axes: (planes, rows, inner axes...)
            if dl:
                band = [slice(None)] * (nd + 1)
                size = spatial[ax]
                band[ax + 1] = slice(0, min(-dl, size)) if dl < 0 else slice(max(size - dl, 0), size)
                bands.append(tuple(band))
        if seed is None and not bands and r0 == 0 and r1 == out0:
            seed = t
        taps.append((t, r0 * pitches[0], r1 * pitches[0], off, tuple(bands)))
    if seed is not None:  # the seeding tap goes first
        taps.sort(key=lambda e: e[0] != seed)
    return guard, seed, tuple(taps)


def _shuffle_channels(y: np.ndarray, shuffle: Sequence[int]) -> np.ndarray:
    # Reshape(shuffle) -> Transpose(0, 2, 1, 3, 4) -> Reshape(N, C, H, W), as the nodes did
    n, groups, per, h, w = (int(d) for d in shuffle)
    if y.size != n * groups * per * h * w:
        raise KernelError(f"Conv output of shape {list(y.shape)} cannot be reshaped to {list(shuffle)} for the channel "
                          "shuffle folded into it.")
    return np.ascontiguousarray(y.reshape(n, groups, per, h, w).transpose(0, 2, 1, 3, 4)).reshape(n, groups * per, h, w)


#: prepared convolutions a node keeps (one per input shape and weights seen; cleared beyond)
PREPARED_ENTRIES = 8


def _prepared_conv(cache: dict, x, w, b, z, out, group, kernel_shape, strides, dilations, pads, auto_pad, activation,
                   shuffle=None, wcache=None):
    """The result of a convolution that a prepared executor computes (None: the general path
    computes it). A node's executors are kept in ``cache`` (one dict per node: its other
    attributes never change) by input shape, weights and bias (held, so their ids stay
    theirs), thread count and activation; see :func:`_prepare`."""
    if type(x) is not np.ndarray or type(w) is not np.ndarray or not _jit.active():
        return None  # (inactive compiled kernels: no executor, and none cached for later runs)
    # everything an executor assumes: the residual's dtype too (a float32 executor reading an
    # int8 or float64 residual would read its buffer as float32, past its end for int8)
    key = (x.shape, x.dtype, id(w), id(b), None if z is None else (z.shape, z.dtype), out is None,
           parallel.current_threads(), activation)
    entry = cache.get(key)
    if entry is None:
        if len(cache) >= PREPARED_ENTRIES:
            cache.clear()
        run = None
        if x.dtype == np.float32 and activation in (None, "Relu"):
            run = _prepare(x, w, b, z, group, kernel_shape, strides, dilations, pads, auto_pad, activation == "Relu",
                           shuffle, wcache)
        entry = cache[key] = (w, b, run)
    if entry[0] is not w or entry[1] is not b or entry[2] is None:
        return None
    return entry[2](x, z, out)


def _prepare(x, w, b, z, group, kernel_shape, strides, dilations, pads, auto_pad, relu, shuffle=None, wcache=None):
    """An executor ``run(x, z, out) -> y or None`` for one float32 image of this shape whose
    convolution conv_core would run as team jobs (1x1, grouped 1x1, depthwise, Winograd's
    three stages for read-only weights, im2col of a small map and its product): the
    geometry, the path, the part counts and the argument blocks are settled once, and a
    call only allocates the output (or takes ``out``) and runs the jobs, with the same part
    functions and arguments, so the same bits. None for every other case (several images,
    bands, dtypes, broadcast residuals). With ``shuffle`` only a grouped 1x1 convolution
    whose groups are the shuffle's (no residual): its rows go to their shuffled channels."""
    k = _jit.kernels()
    if k is None or x.ndim != 4 or x.shape[0] != 1 or w.dtype != np.float32 or not w.flags.c_contiguous:
        return None
    if b is not None and (type(b) is not np.ndarray or b.dtype != np.float32 or b.shape != (w.shape[0],)
                          or not b.flags.c_contiguous):
        return None
    check_conv_shapes(x, w, group)
    kernel, st, dl, pb, out_shape = conv_geometry(x, w, group, kernel_shape, strides, dilations, pads, auto_pad)
    n_ch, m_out = x.shape[1], w.shape[0]
    cg, mg, kp, npix = n_ch // group, m_out // group, prod(kernel), prod(out_shape)
    y_shape = (1, m_out) + tuple(out_shape)
    if z is not None and (type(z) is not np.ndarray or z.shape != y_shape or z.dtype != np.float32):
        return None
    if 0 in y_shape or 0 in x.shape or (sgemm := blas_sgemm_address()) is None:
        return None
    if relu and b is None and z is None:
        return None  # the general path applies such a Relu by itself (np.clip)
    bias = _NO_BIAS if b is None else b
    # arrays the jobs take per call: None; z's slot stays empty without a residual
    zslot = None if z is not None else _NO_BIAS
    zsize = 0 if z is None else npix * m_out
    unit = all(v == 1 for v in st) and all(v == 1 for v in dl)
    if shuffle is not None and (tuple(shuffle) != (1, group, mg, *out_shape) or group == 1 or z is not None):
        return None
    if kp == 1 and not any(pb) and unit and group == 1:
        w2 = w.reshape(m_out, n_ch)
        return _prepared_gemm(w2, n_ch, npix, bias, zslot, zsize, relu, sgemm, y_shape, None)
    if kp == 1 and not any(pb) and unit:
        job = _jit.TeamJob("pointwise_groups_part", [w, None, None, bias, zslot, 1, group, mg, cg, npix, sgemm, bias.size,
                                                     zsize, int(relu), int(shuffle is not None)],
                           group * mg * cg * npix, max_parts=group, cold_total=POINTWISE_COLD_WORK)
        return _prepared_run(job, y_shape, z is not None, blas=True) if group * mg * cg * npix >= 2 * _jit.TEAM_PART else None
    if shuffle is not None:
        return None
    if cg == 1 and group > 1:
        if m_out != n_ch or len(kernel) != 2:
            return None
        wk = w.reshape((n_ch,) + tuple(kernel))
        job = _jit.TeamJob("depthwise_part", [None, wk, None, bias, zslot, n_ch, *x.shape[2:], n_ch, *kernel, *out_shape,
                                              *st, *dl, *pb, bias.size, zsize, int(relu)],
                           n_ch * npix * kp, max_parts=n_ch, cold_total=2 * _JIT_PART_TAPS)
        return _prepared_run(job, y_shape, z is not None, blas=False)
    if _winograd_fits(kernel, group, np.dtype(np.float32), st, dl, n_ch, m_out, out_shape):
        u = _winograd_weights(w, wcache)
        return None if u is None else _prepared_winograd(x.shape, u, pb, tuple(out_shape), bias, zslot, zsize, relu,
                                                         sgemm, y_shape)
    if group != 1 or len(kernel) != 2 or npix >= BAND_MIN_PIXELS:
        return None
    depth = n_ch * kp
    im2col = _jit.TeamJob("im2col_part", [None, None, n_ch, *x.shape[2:], *out_shape, *kernel, *st, *dl, *pb],
                          n_ch * kp * npix, max_parts=n_ch, part_size=IM2COL_TEAM_PART, cold_total=2 * IM2COL_PART)
    if not im2col.parts:
        return None
    return _prepared_gemm(w.reshape(m_out, depth), depth, npix, bias, zslot, zsize, relu, sgemm, y_shape, im2col)


def _writable_block(out: np.ndarray, y_shape: tuple) -> bool:
    return out.shape == y_shape and out.dtype == np.float32 and out.flags.c_contiguous


def _prepared_run(job, y_shape, residual: bool, blas: bool):
    # one team job writing the whole output: (x, y[, z]) in its slots
    if not job.parts:
        return None

    def run(x, z, out):
        if not x.flags.c_contiguous or (residual and not z.flags.c_contiguous) or (
                out is not None and not _writable_block(out, y_shape)):
            return None
        y = np.empty(y_shape, np.float32) if out is None else out
        if blas:
            _blas_enter(1)
        try:
            ran = job(x, y, z) if residual else job(x, y)
        finally:
            if blas:
                _blas_exit(1)
        return y if ran else None

    return run


def _prepared_winograd(x_shape, u, pb, out_shape, bias, zslot, zsize, relu, sgemm, y_shape):
    # _conv_winograd's three team jobs for one image (each with its fallback on the caller)
    k = _jit.kernels()
    _, n_ch, height, width = x_shape
    m_out = u.shape[1]
    out_h, out_w = out_shape
    th, tw = (out_h + 1) // 2, (out_w + 1) // 2
    tiles = th * tw
    pt, pl = int(pb[0]), int(pb[1])
    stage_in = _jit.TeamJob("wino_input_part", [None, None, n_ch, height, width, pt, pl, th, tw], n_ch * tiles * 16,
                            max_parts=n_ch, part_size=WINO_TEAM_PART)
    product = _jit.TeamJob("wino_gemm_part", [u, None, None, m_out, n_ch, tiles, sgemm], 16 * m_out * n_ch * tiles,
                           max_parts=16, part_size=_jit.GEMM_TEAM_PART)
    stage_out = _jit.TeamJob("wino_output_part", [None, None, m_out, out_h, out_w, th, tw, bias, bias.size, int(relu),
                                                  zslot, zsize], m_out * tiles * 16, max_parts=m_out,
                             part_size=WINO_TEAM_PART)
    residual = zslot is None

    def run(x, z, out):
        if not x.flags.c_contiguous or (residual and not z.flags.c_contiguous) or (
                out is not None and not _writable_block(out, y_shape)):
            return None
        y = np.empty(y_shape, np.float32) if out is None else out
        xi, yi = x[0], y[0]
        v = scratch("wino_v", (16, n_ch, tiles), np.float32)
        mx = scratch("wino_m", (16, m_out, tiles), np.float32)
        if not stage_in(xi, v):
            k.wino_input(xi, v, 0, n_ch, pt, pl, th, tw)
        _blas_enter(1)
        try:
            if not product(v, mx):
                np.matmul(u, v, out=mx)
        finally:
            _blas_exit(1)
        zi = z.reshape(-1) if residual else _NO_BIAS
        if not (stage_out(mx, yi, zi) if residual else stage_out(mx, yi)):
            k.wino_output(mx, yi, 0, m_out, th, tw, bias, relu, zi)
        return y

    return run


def _prepared_gemm(w2, depth, npix, bias, zslot, zsize, relu, sgemm, y_shape, im2col):
    # team_gemm's job for W (M, depth) @ columns (depth, npix): the image itself (1x1) or
    # its im2col columns, filled by the ``im2col`` job first
    m_out = w2.shape[0]
    work = m_out * depth * npix
    if work < CONV_TEAM_FROM:
        return None
    by_rows = m_out > npix
    parts = min(((m_out if by_rows else npix) + 15) // 16, _jit.GEMM_TEAM_PARTS * parallel.current_threads())
    gemm = _jit.TeamJob("gemm_part", [w2, None, None, m_out, depth, npix, depth, npix, npix, sgemm, int(by_rows), bias,
                                      bias.size, zslot, zsize, int(relu)],
                        work, max_parts=parts, part_size=CONV_TEAM_FROM // 2, cold_total=BLAS_THREADS_FROM)
    if not gemm.parts:
        return None
    residual = zslot is None

    def run(x, z, out):
        if not x.flags.c_contiguous or (residual and not z.flags.c_contiguous) or (
                out is not None and not _writable_block(out, y_shape)):
            return None
        if im2col is None:
            cols = x
        else:
            cols = scratch("conv_col", (1, depth, npix), np.float32)
            if not im2col(x, cols):
                return None
        y = np.empty(y_shape, np.float32) if out is None else out
        _blas_enter(1)
        try:
            if (gemm(cols, y, z) if residual else gemm(cols, y)):
                return y
        finally:
            _blas_exit(1)
        if im2col is None:
            return None
        # the team declined the product after the columns were built: finish here
        epilogue = [bias, relu, z.reshape(-1) if residual else _NO_BIAS]
        _product_with_epilogue(w2, cols.reshape(depth, npix), epilogue, y.reshape(m_out, npix))
        if epilogue:
            _jit.kernels().epilogue_rows(y.reshape(m_out, npix), *epilogue)
        return y

    return run


def conv(
    x: np.ndarray,
    w: np.ndarray,
    b: np.ndarray | None = None,
    z: np.ndarray | None = None,
    *,
    auto_pad: str = "NOTSET",
    dilations: Sequence[int] | None = None,
    group: int = 1,
    kernel_shape: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    activation: str | None = None,
    activation_params: Sequence[float] = (),
    out: np.ndarray | None = None,
    prepared: dict | None = None,
    shuffle: Sequence[int] | None = None,
    weights_cache: dict | None = None,
) -> np.ndarray:
    """ONNX Conv: X ``(N, C, *S)``, W ``(M, C/group, *K)``, optional B ``(M,)`` -> Y ``(N, M, *O)``.

    Every auto_pad (NOTSET with ``pads``, VALID, SAME_UPPER, SAME_LOWER), strides,
    dilations and groups, in 1-D, 2-D, 3-D and beyond. float32 and float64 compute in
    their own type; float16 and bfloat16 compute in float32 and are rounded back once.
    ``activation`` fuses one of Relu, LeakyRelu, Clip, Sigmoid, Tanh, HardSigmoid
    (``activation_params``: alpha / min, max / alpha, beta), applied in place on the
    fresh output before the final cast, for a graph optimiser fusing Conv+activation.
    ``z``, a residual the optimiser fused (Conv -> Sum/Add -> activation), is added after
    the bias and before the activation, with Sum's broadcasting. ``out``, a C-contiguous
    array of Y's shape and dtype (a block of a Concat's output, see op_conv_concat), receives
    the result and is returned: the single-image product paths write there directly.
    ``prepared``, a dict a node keeps across runs, lets a float32 image whose convolution
    runs as team jobs skip the general path's decisions (:func:`_prepare`): same results.
    ``shuffle`` (N, G, C/G, H, W), a channel shuffle the optimiser folded into the node
    (onnxrt.optim.channel_shuffle), reorders Y's channels as Reshape(shuffle), Transpose(0,
    2, 1, 3, 4) and Reshape(N, C, H, W) would. ``weights_cache``, a dict the node keeps when W
    is one of the model's constants (never for a feed), holds what is derived from W across
    runs (Winograd's transformed weights); without it nothing derived from W outlives the call.
    """
    if prepared is not None and (
        y := _prepared_conv(prepared, x, w, b, z, out, group, kernel_shape, strides, dilations, pads, auto_pad,
                            activation, shuffle, weights_cache)
    ) is not None:
        return y
    if shuffle is not None:
        y = _shuffle_channels(conv(x, w, b, z, auto_pad=auto_pad, dilations=dilations, group=group,
                                   kernel_shape=kernel_shape, pads=pads, strides=strides, activation=activation,
                                   activation_params=activation_params, weights_cache=weights_cache), shuffle)
        if out is not None:
            np.copyto(out, y)
            return out
        return y
    if out is not None:
        y = _conv(x, w, b, z, auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
                  pads=pads, strides=strides, activation=activation, activation_params=activation_params, _into=out,
                  _wcache=weights_cache)
        if not (y.shape == out.shape and y.__array_interface__["data"][0] == out.__array_interface__["data"][0]):
            np.copyto(out, y)  # a path that does not write into ``out`` (or another dtype)
        return out
    return _conv(x, w, b, z, auto_pad=auto_pad, dilations=dilations, group=group, kernel_shape=kernel_shape,
                 pads=pads, strides=strides, activation=activation, activation_params=activation_params,
                 _wcache=weights_cache)


def _conv(x, w, b=None, z=None, *, auto_pad="NOTSET", dilations=None, group=1, kernel_shape=None, pads=None,
          strides=None, activation=None, activation_params=(), _into=None, _wcache=None) -> np.ndarray:
    x = np.asarray(x)
    w = np.asarray(w)
    kernel, s, d, pb, out_shape = conv_geometry(x, w, group, kernel_shape, strides, dilations, pads, auto_pad)
    nd = x.ndim - 2
    cdt = compute_dtype(x.dtype)
    if b is not None:
        b = np.asarray(b)
        if b.shape != (w.shape[0],):
            raise KernelError(f"B must have shape [{w.shape[0]}] (one value per output channel), got {list(b.shape)}.")
    y_shape = (x.shape[0], w.shape[0]) + tuple(out_shape)
    if z is not None:
        z = np.asarray(z)
    epilogue = None
    if cdt == np.float32 and activation in (None, "Relu") and (b is not None or z is not None):
        zf = _NO_BIAS
        if z is not None:
            if z.shape != y_shape or z.dtype != np.float32:
                zf = None  # a residual that broadcasts: added by numpy below
            else:
                zf = np.ascontiguousarray(z).reshape(-1)
        if zf is not None:
            bf = np.ascontiguousarray(as_compute(b, cdt)) if b is not None else _NO_BIAS
            epilogue = [bf, activation == "Relu", zf]
    if x.shape[0] == 0 or w.shape[0] == 0 or 0 in out_shape:
        y = np.zeros(y_shape, cdt)
    else:
        into = _into if (_into is not None and _into.shape == y_shape and _into.dtype == cdt == x.dtype
                         and _into.flags.c_contiguous) else None
        # (a float16 W's float32 copy is new each call: its transform is not kept)
        y = conv_core(as_compute(x, cdt), as_compute(w, cdt), pb, s, d, group, out_shape, epilogue, into,
                      _wcache if cdt == w.dtype else None)
        if epilogue == []:  # the kernel added the bias and the residual and applied the Relu
            return to_output(y, x.dtype)
        if epilogue is not None and y.flags.c_contiguous and y.size >= 4096 and (k := _jit.kernels()) is not None:
            # the bias, the residual and a fused Relu in one compiled pass
            k.epilogue_rows(y.reshape(y.shape[0] * y.shape[1], -1), *epilogue)
            return to_output(y, x.dtype)
    if b is not None:
        y += as_compute(b, cdt).reshape((-1,) + (1,) * nd)
    if z is not None:
        y = np.add(y, as_compute(z, cdt), out=y if z.shape == y.shape else None)
    apply_activation(y, activation, activation_params)
    return to_output(y, x.dtype)


def conv_node(kw: dict, x, w, b=None, z=None, out=None) -> np.ndarray:
    """``conv(x, w, b, z, out=out, **kw)`` for a node's keywords (``conv_attributes``, with
    its ``prepared`` dict): the prepared executor straight away, conv's keyword handling
    only when it declines (that costs a few microseconds a call)."""
    prepared = kw.get("prepared")
    y = None if prepared is None else _prepared_conv(
        prepared, x, w, b, z, out, kw["group"], kw["kernel_shape"], kw["strides"], kw["dilations"], kw["pads"],
        kw["auto_pad"], kw.get("activation"), kw.get("shuffle"), kw.get("weights_cache"))
    return conv(x, w, b, z, out=out, **kw) if y is None else y


@register("Conv", versions=(1, 11, 22))
class Conv(OpRun):
    """Conv: 1, 11 (same semantics), 22 (bfloat16). Kernel: :func:`conv`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._kw = conv_attributes(self)
        self._kw["prepared"] = {}  # this node's prepared executors (see conv)
        self._threads = session_threads(options)
        self._checked: tuple | None = None  # the shapes whose sizes passed check_alloc

    def set_const_inputs(self, positions) -> None:
        super().set_const_inputs(positions)
        # W a model constant: what is derived from it (Winograd's transform) is kept by the node
        self._kw["weights_cache"] = {} if 1 in self.const_inputs else None

    def _check_sizes(self, x, w) -> None:
        # the model's pads decide the padded input's and the output's sizes: checked once per shape
        kw = self._kw
        _, _, _, pb, out_shape = conv_geometry(
            x, w, kw["group"], kw["kernel_shape"], kw["strides"], kw["dilations"], kw["pads"], kw["auto_pad"]
        )
        self.check_alloc((x.shape[0], w.shape[0]) + tuple(out_shape), compute_dtype(x.dtype))
        pads = kw["pads"]
        if pads is not None and len(pads) == 2 * (x.ndim - 2):
            nd = x.ndim - 2
            self.check_alloc(
                list(x.shape[:2]) + [n + int(pads[i]) + int(pads[i + nd]) for i, n in enumerate(x.shape[2:])],
                x.dtype, "padded input",
            )
        self._checked = (x.shape, w.shape)

    def _run(self, x, w, b=None, attributes=None, verbose=0, fLOG=None):
        if self._checked is None or x.shape != self._checked[0] or w.shape != self._checked[1]:
            self._check_sizes(x, w)
        if self._threads is None:
            return (conv_node(self._kw, x, w, b),)
        with limit_threads(self._threads):
            return (conv_node(self._kw, x, w, b),)
