"""Fast paths of the convolutions: Conv and onnxrt's FusedConv (one table), ConvConcat, ConvTranspose.

Reference kernels: :func:`onnxrt.ops_cpu.op_conv.conv` (im2col and one batched product
per image) and :func:`onnxrt.ops_cpu.op_conv_transpose.conv_transpose`.

**Conv's table.** Every entry below is declared for ``Conv`` and for ``FusedConv`` (domain
``onnxrt``: the same convolution with a residual ``z``, an activation and a channel
shuffle, see :mod:`onnxrt.ops_cpu.op_fused`), in the order the dispatcher tries them; a
ConvConcat node runs each of its segments through the same table. The conditions are
written once, from the call's :class:`Facts` (shapes, dtypes, geometry, which inputs are
model constants):

=============================  ======  =========================================================
path                           native  applies to
=============================  ======  =========================================================
prepared 1x1                   yes     one float32 image, 1x1 unit stride, group 1, W constant
prepared small 1x1             yes     the same below the team's size, any fused activation
prepared grouped 1x1           yes     the same with groups (a folded channel shuffle too)
prepared depthwise             yes     one float32 image, 2-D depthwise (one output per channel)
prepared winograd              yes     one float32 image, 3x3 unit stride where Winograd pays
prepared im2col                yes     one float32 image, 2-D group 1, maps below 56x56
pointwise groups on the team   yes     grouped 1x1 float32 (any images), large enough
1x1                            no      1x1 kernels without padding (any dtype, strided)
depthwise compiled             yes     2-D float32 depthwise
depthwise                      no      any depthwise (one input channel per group)
winograd                       yes     3x3 float32 unit stride, W constant, enough channels
bands                          yes     2-D float32 group 1, maps of 56x56 and more
im2col compiled                yes     2-D float32
im2col same                    no      unit strides with same-size inner axes (3x3 pad 1...)
im2col                         no      everything else
=============================  ======  =========================================================

A *prepared* entry is built once per node and input signature (:mod:`onnxrt.dispatch`):
the geometry, the team's part counts and argument blocks are settled then, and a call
only allocates the output (or takes a Concat's block) and runs the team jobs. It holds
the model-constant weights and bias it was prepared with (never a feed's), and when a
call cannot run it (other arrays, the session's thread cap changed) it runs the table's
first unprepared entry for the same inputs: the same part functions with the same
arguments, so the same bits as that entry's team path. Winograd's transformed weights are
node-owned (``Conv.weights_cache``), computed only for a model constant W.

Every unprepared entry shares one frame (:func:`convolve`): sizes checked against
``max_tensor_bytes``, the compute dtype (float16 and bfloat16 in float32, rounded once),
the bias, residual and Relu handed to the core as an *epilogue* (applied while each piece
of output is in cache by the compiled paths, by a compiled pass or numpy otherwise), other
activations, the channel shuffle, and a Concat's block ``out``. The entries differ in the
*core* that computes the correlation. Results agree with the reference within float32
rounding of the depth ``C/group * prod(K)`` sums (Winograd: see :func:`conv_winograd`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import lru_cache
from math import prod
from typing import Any

import numpy as np
from numpy.lib.stride_tricks import as_strided

from .. import dispatch, native, parallel
from ..dispatch import fast_path
from ..errors import KernelError
from ..native.blas import _blas_enter, _blas_exit, blas_sgemm_address
from ..native.layout import (
    BANDS, DEPTHWISE, GEMM, IM2COL, POINTWISE_GROUPS, WINO_GEMM, WINO_INPUT, WINO_OUTPUT,
)
from ..ops_cpu._conv_common import (
    _WIDENED,
    apply_activation,
    as_compute,
    coarse_matmul as matmul,
    coarse_parallel_for,
    compute_dtype,
    padded,
    scratch,
    to_output,
    window_view,
)
from ..ops_cpu.op_conv import check_bias, conv_geometry, shuffle_channels
from .elementwise import apply_chain, chain_inplace

FUSED = "onnxrt"
_F32 = np.dtype(np.float32)
#: the element types Conv takes (float16 and bfloat16 compute in float32, rounded once)
_FLOATS = _WIDENED | {_F32, np.dtype(np.float64)}
_NO_BIAS = np.empty(0, np.float32)

# ---------------------------------------------------------------------------------------
# the thresholds the conditions use (measured; see each one)
# ---------------------------------------------------------------------------------------

#: bytes of im2col columns built at once; larger batches are processed in chunks of images
COL_CHUNK_BYTES = 64 << 20

#: input channels from which a 3x3 convolution with unit strides goes by Winograd F(2x2, 3x3)
#: (:func:`conv_winograd`), when its 2x2 tiles waste at most 5% of their pixels (odd maps
#: such as 7x7, 13x13 and 27x27 waste 7-23%). The products' depth is C where im2col's is
#: 9 C: measured on one core against im2col and one product, 0.65-0.8 the time at 64 -> 96
#: (28x28), 96 -> 128 (14x14), 128 -> 128 (28x28), 256 -> 256 (14x14), 128 -> 32 (28x28,
#: densenet's), 0.85 at 32 -> 32 (56x56); 1.7 at 16 -> 64 (55x55); 1.05-1.15 at 13x13 and
#: 7x7 (but for 224 -> 224: 0.9)
WINO_MIN_CHANNELS = 32
#: transformed values per part of the Winograd transforms on the team
WINO_TEAM_PART = 1 << 15

#: multiply-adds of one image's convolution product from which it is split in two on the
#: team while its workers are awake (inside a run), from BLAS_THREADS_FROM on also when they
#: sleep. squeezenet's squeeze layers have 16-64 output channels and 2.5M-6M multiply-adds,
#: which OpenBLAS runs at 60 GFLOPS on one core: the model measured 8.1 -> 7.6 ms from 2M;
#: from 1M (its 13x13 expand and squeeze layers, 1.6M-2.1M) 7.19 -> 6.95 and 8.48 -> 8.27
CONV_TEAM_FROM = 1 << 20

#: multiply-adds of a grouped 1x1 convolution from which its items go to sleeping team
#: workers too (~100 us on one thread); below, only to awake ones (inside a hot run)
POINTWISE_COLD_WORK = 1 << 23

#: column-matrix elements per part when the compiled im2col splits its planes over the pool
IM2COL_PART = 1 << 20
#: column-matrix elements per part on the team (~15 us each; the team joins in microseconds
#: during a run, see native.team's hot runs)
IM2COL_TEAM_PART = 1 << 14

#: output pixels per image from which a 2-D float32 convolution goes by bands of output
#: rows (:func:`conv_bands`): 56x56 and up (at 55x55 and below bands measured no faster)
BAND_MIN_PIXELS = 3136
#: bytes of im2col columns per band (fits the 512 KiB L2 of the machines measured)
BAND_BYTES = 1 << 19

#: multiply-adds per part of the compiled depthwise loop split over the pool (~0.5 ms of work)
JIT_PART_TAPS = 1 << 22

#: bytes of depthwise columns built at once per thread (measured: 1-4 MB blocks are equally fast,
#: larger ones spill the cache and tiny ones pay numpy's per-call cost)
DW_COL_BYTES = 4 << 20


# ---------------------------------------------------------------------------------------
# the facts of a call: what every condition reads
# ---------------------------------------------------------------------------------------


def conv_node(op: Any) -> Any:
    """The Conv kernel holding a node's keywords, ``weights_cache`` and constant inputs
    (FusedConv and a ConvConcat segment keep theirs in ``_inner``)."""
    return getattr(op, "_inner", op)


class Facts:
    """What the conditions of the table read of one call: the geometry (``kernel``,
    ``strides``, ``dilations``, ``pads_begin``, ``out_shape``), the sizes, the compute
    dtype, whether W and B are model constants, the fused activation and shuffle."""

    __slots__ = ("node", "kernel", "strides", "dilations", "pads_begin", "out_shape", "n_img", "n_ch", "m_out",
                 "group", "cg", "mg", "kp", "npix", "cdt", "f32", "act", "shuffle", "y_shape", "pointwise", "unit",
                 "depthwise", "w_const", "b_const", "x_contiguous", "spatial")

    def __init__(self, op: Any, x: np.ndarray, w: np.ndarray, b: Any) -> None:
        node = self.node = conv_node(op)
        kw = node._kw
        self.group = group = kw["group"]
        (self.kernel, self.strides, self.dilations, self.pads_begin,
         self.out_shape) = conv_geometry(x, w, group, kw["kernel_shape"], kw["strides"], kw["dilations"], kw["pads"],
                                         kw["auto_pad"])
        self.n_img, self.n_ch = x.shape[:2]
        self.m_out = w.shape[0]
        self.cg, self.mg = self.n_ch // group, self.m_out // group
        self.kp, self.npix = prod(self.kernel), prod(self.out_shape)
        self.cdt = compute_dtype(x.dtype)
        self.f32 = x.dtype == _F32 and w.dtype == _F32
        self.act = kw.get("activation")
        self.shuffle = kw.get("shuffle")
        self.y_shape = (self.n_img, self.m_out) + tuple(self.out_shape)
        lengths = [(o - 1) * s + (k - 1) * d + 1
                   for o, s, k, d in zip(self.out_shape, self.strides, self.kernel, self.dilations)]
        #: conv_core's 1x1 case: one tap, no padding, every window inside the input
        self.pointwise = self.kp == 1 and not any(self.pads_begin) and all(
            n <= size for n, size in zip(lengths, x.shape[2:]))
        self.unit = all(v == 1 for v in self.strides) and all(v == 1 for v in self.dilations)
        self.depthwise = self.cg == 1 and group > 1
        consts = node.const_inputs
        self.w_const = 1 in consts
        self.b_const = b is None or 2 in consts
        self.x_contiguous = x.flags.c_contiguous
        self.spatial = tuple(x.shape[2:])

    @property
    def empty(self) -> bool:
        return 0 in self.y_shape or 0 in self.kernel or self.cg == 0


def facts(op: Any, x: Any, w: Any, b: Any = None) -> Facts | None:
    """The call's :class:`Facts`, or None where no fast path applies (inputs that are not
    arrays, invalid shapes or attributes: the reference kernel reports those)."""
    if type(x) is not np.ndarray or type(w) is not np.ndarray or x.dtype not in _FLOATS or w.dtype not in _FLOATS:
        return None
    if b is not None and type(b) is not np.ndarray:
        return None
    try:
        return Facts(op, x, w, b)
    except KernelError:
        return None


def winograd_fits(f: Facts) -> bool:
    """The geometry for which Winograd pays: 3x3, unit strides, group 1, WINO_MIN_CHANNELS
    input channels, 16 outputs, 2x2 tiles wasting at most 5% of the pixels."""
    out = f.out_shape
    return (
        tuple(f.kernel) == (3, 3) and f.group == 1 and f.cdt == _F32 and f.unit
        and f.n_ch >= WINO_MIN_CHANNELS and f.m_out >= 16
        and f.npix * 20 >= ((out[0] + 1) // 2) * ((out[1] + 1) // 2) * 76
    )


def _compiled() -> bool:
    return native.kernels() is not None


def _with_blas() -> bool:
    return native.kernels() is not None and blas_sgemm_address() is not None


# ---------------------------------------------------------------------------------------
# the frame every unprepared entry shares
# ---------------------------------------------------------------------------------------

#: a core: (x, w, pads_begin, strides, dilations, group, out_shape, epilogue, into, node) -> y (N, M, *O)
Core = Callable[..., np.ndarray]


def convolve(op: Any, core: Core, x: np.ndarray, w: np.ndarray, b: Any = None, z: Any = None,
             out: np.ndarray | None = None) -> tuple[np.ndarray]:
    """One convolution of ``op``'s node by ``core``: sizes checked, the compute dtype, the
    epilogue, the activation, the shuffle and the Concat block ``out`` (the result is
    written there; a core writes its product there directly where it can)."""
    node = conv_node(op)
    node.check_sizes(x, w)
    kw = node._kw
    group = kw["group"]
    kernel, s, d, pb, out_shape = conv_geometry(x, w, group, kw["kernel_shape"], kw["strides"], kw["dilations"],
                                                kw["pads"], kw["auto_pad"])
    cdt = compute_dtype(x.dtype)
    b = check_bias(b, w.shape[0])
    y_shape = (x.shape[0], w.shape[0]) + tuple(out_shape)
    act, shuffle = kw.get("activation"), kw.get("shuffle")
    if z is not None:
        z = np.asarray(z)
    epilogue = None
    if cdt == _F32 and act in (None, "Relu") and (b is not None or z is not None):
        zf = _NO_BIAS
        if z is not None:
            zf = np.ascontiguousarray(z).reshape(-1) if z.shape == y_shape and z.dtype == _F32 else None
        if zf is not None:  # (a residual that broadcasts is added by numpy below)
            bf = np.ascontiguousarray(as_compute(b, cdt)) if b is not None else _NO_BIAS
            epilogue = [bf, act == "Relu", zf]
    if 0 in y_shape:
        y = np.zeros(y_shape, cdt)
    else:
        into = out if (out is not None and shuffle is None and out.shape == y_shape and out.dtype == cdt == x.dtype
                       and out.flags.c_contiguous) else None
        y = core(as_compute(x, cdt), as_compute(w, cdt), pb, s, d, group, out_shape, epilogue, into, node)
        if epilogue and y.flags.c_contiguous and y.size >= 4096 and (k := native.kernels()) is not None:
            # the bias, the residual and a fused Relu in one compiled pass
            k.epilogue_rows(y.reshape(y.shape[0] * y.shape[1], -1), *epilogue)
            epilogue.clear()
    if epilogue != []:  # (an empty list: the core or the compiled pass applied all of it)
        if b is not None:
            y += as_compute(b, cdt).reshape((-1,) + (1,) * len(kernel))
        if z is not None:
            y = np.add(y, as_compute(z, cdt), out=y if z.shape == y.shape else None)
        if act == "Chain":
            y = apply_chain(node.chain, y)
        else:
            apply_activation(y, act, kw.get("activation_params", ()))
    y = to_output(y, x.dtype)
    if shuffle is not None:
        y = shuffle_channels(y, shuffle)
    if out is not None:
        if not (y.shape == out.shape and y.__array_interface__["data"][0] == out.__array_interface__["data"][0]):
            np.copyto(out, y)  # a core that did not write into ``out`` (or another dtype)
        y = out
    return (y,)


def _take_epilogue(epilogue: list | None) -> tuple[np.ndarray, bool, np.ndarray]:
    """The bias, Relu flag and flat residual (empty arrays for none) of an epilogue, which
    is cleared: the frame then knows they were applied."""
    if not epilogue:
        return _NO_BIAS, False, _NO_BIAS
    bias, relu, z = epilogue
    epilogue.clear()
    return bias, relu, z


def _flat_out(out: np.ndarray | None, rows: int, cols: int) -> np.ndarray | None:
    # one image's (M, P) view of ``out`` for the product to write into
    return None if out is None else out.reshape(rows, cols)


def product_with_epilogue(w2: np.ndarray, cols: np.ndarray, epilogue: list | None,
                          out: np.ndarray | None = None) -> np.ndarray:
    """W (M, K) @ columns (K, P) of one image (into ``out`` when given): a float32 product
    large enough for two threads goes to the team by blocks with the bias, residual and
    Relu applied to each block in cache (the epilogue list is then cleared; the team is
    only there while compiled kernels are active), others through the pool's matmul."""
    work = w2.shape[0] * w2.shape[1] * cols.shape[1]
    if (
        w2.dtype == _F32 and work >= CONV_TEAM_FROM
        and (y := native.team_gemm(w2, cols, out, epilogue, part_size=CONV_TEAM_FROM // 2,
                                   cold_total=parallel.BLAS_THREADS_FROM)) is not None
    ):
        return y
    if out is not None and out.dtype == np.result_type(w2, cols):
        return matmul(w2, cols, out=out)
    return matmul(w2, cols)


# ---------------------------------------------------------------------------------------
# cores: 1x1 and depthwise
# ---------------------------------------------------------------------------------------


def _pointwise_input(x: np.ndarray, strides, out_shape) -> np.ndarray:
    # 1x1 without padding: output pixel o reads input pixel o*s (dilation is irrelevant)
    if any(s != 1 for s in strides):
        return x[(slice(None), slice(None)) + tuple(slice(0, (o - 1) * s + 1, s) for o, s in zip(out_shape, strides))]
    return x[(slice(None), slice(None)) + tuple(slice(0, o) for o in out_shape)]


def core_pointwise(x, w, pb, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """1x1 without padding: no im2col, one matrix product (a strided input subsampled)."""
    n_img, n_ch = x.shape[:2]
    m_out = w.shape[0]
    npix = prod(out_shape)
    xs = _pointwise_input(x, strides, out_shape)
    if group == 1:
        w2 = w.reshape(m_out, n_ch)
        if n_img == 1:
            y = product_with_epilogue(w2, xs.reshape(n_ch, npix), epilogue, _flat_out(out, m_out, npix))
        else:
            y = matmul(w2, xs.reshape(n_img, n_ch, npix))
    else:
        cg, mg = n_ch // group, m_out // group
        y = matmul(w.reshape(group, mg, cg), xs.reshape(n_img, group, cg, npix))
    return y.reshape((n_img, m_out) + tuple(out_shape))


def core_pointwise_groups_team(x, w, pb, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """A grouped 1x1 float32 convolution with its (image, group) products shared by the
    caller and the team of GIL-free threads (``pointwise_groups_part``: one single-threaded
    BLAS call per item, each item's bias, residual and Relu while it is in cache); the
    batched product of :func:`core_pointwise` when the team does not take it. The same BLAS
    calls as the batched product, so the same bits; shufflenet's 4-group layers (4 items of
    68x68x196) had them all on one thread."""
    n_img, n_ch = x.shape[:2]
    m_out = w.shape[0]
    cg, mg, npix = n_ch // group, m_out // group, prod(out_shape)
    xs = np.ascontiguousarray(_pointwise_input(x, strides, out_shape))
    y = np.empty((n_img, group * mg, npix), np.float32)
    bias, relu, z = epilogue if epilogue else (_NO_BIAS, False, _NO_BIAS)
    args = POINTWISE_GROUPS.pack(
        w=np.ascontiguousarray(w), x=xs, y=y, bias=bias, z=z, images=n_img, groups=group, mg=mg, cg=cg, npix=npix,
        sgemm=blas_sgemm_address(), bias_size=bias.size, z_size=z.size, relu=int(relu), shuffled=0)
    _blas_enter(1)  # each item one single-threaded BLAS call (already so inside a large run)
    try:
        ran = native.team_split("pointwise_groups_part", args, n_img * group * mg * cg * npix, max_parts=n_img * group,
                                cold_total=POINTWISE_COLD_WORK)
    finally:
        _blas_exit(1)
    if not ran:
        return core_pointwise(x, w, pb, strides, dilations, group, out_shape, None, out, node)
    if epilogue:
        epilogue.clear()
    return y.reshape((n_img, m_out) + tuple(out_shape))


def core_depthwise_compiled(x, w, pb, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """2-D float32 depthwise correlation (one output per channel) by the numba loop
    ``depthwise_conv2d``: each plane zero-padded once, then per output row one vectorised
    multiply-add per tap (3x3 at unit strides: all nine taps in registers, one store per
    output; 128 planes of 56x56 440 -> 220 us); planes on the team, or blocks of them on
    the kernel pool. Several times the im2col path on shufflenet's 3x3 layers, whose
    columns cost more than their product."""
    k = native.kernels()
    n_img, n_ch = x.shape[:2]
    planes = n_img * n_ch
    xs = np.ascontiguousarray(x).reshape((planes,) + x.shape[2:])
    wk = np.ascontiguousarray(w).reshape((n_ch,) + w.shape[2:])
    y = np.empty((planes,) + tuple(out_shape), np.float32)
    bias, relu, z = _take_epilogue(epilogue)
    args = DEPTHWISE.pack(
        x=xs, w=wk, y=y, bias=bias, z=z, planes=planes, height=x.shape[2], width=x.shape[3], channels=n_ch,
        kh=w.shape[2], kw=w.shape[3], out_h=out_shape[0], out_w=out_shape[1], sh=strides[0], sw=strides[1],
        dh=dilations[0], dw=dilations[1], pt=pb[0], pl=pb[1], bias_size=bias.size, z_size=z.size, relu=int(relu), act=0)
    taps = w.shape[2] * w.shape[3]
    if native.team_split("depthwise_part", args, planes * prod(out_shape) * taps, max_parts=planes,
                         cold_total=2 * JIT_PART_TAPS):
        return y.reshape((n_img, n_ch) + tuple(out_shape))

    def work(lo: int, hi: int) -> None:
        zp = z[lo * y[0].size:hi * y[0].size] if z.size else z
        k.depthwise_conv2d(xs[lo:hi], wk, y[lo:hi], lo, *strides, *dilations, *pb, bias, relu, zp)

    native.split(planes, work, max(1, JIT_PART_TAPS // (prod(out_shape) * taps)))
    return y.reshape((n_img, n_ch) + tuple(out_shape))


def core_depthwise(x, w, pads_begin, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """Depthwise correlation (one input channel per group, ``mult`` outputs each): per-plane im2col and a batched product.

    Each (image, channel) plane gets its own (Kp, P) columns and the output is the batched
    product ``W[c] (mult, Kp) @ cols (Kp, P)``: one copy and one BLAS call per block of
    planes instead of a multiply and an add per tap. The zero padding is materialised, so
    an infinite weight meets it as 0 * inf = NaN, as the definition says.

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
        block = max(1, DW_COL_BYTES // (kp * rows * it))

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
        block = max(1, DW_COL_BYTES // (kp * npix * it))

        def work(lo: int, hi: int) -> None:
            for b0 in range(lo, hi, block):
                b1 = min(hi, b0 + block)
                cols = scratch("dw_cols", (b1 - b0,) + kernel + out_shape, dtype)
                np.copyto(cols, windows[b0:b1, 0])
                np.matmul(coefs(b0, b1), cols.reshape(b1 - b0, kp, npix), out=y[b0:b1])

        coarse_parallel_for(planes, work, work_per_item=2 * mult * npix * kp)
    return y.reshape((n_img, n_ch * mult) + out_shape)


# ---------------------------------------------------------------------------------------
# cores: Winograd and bands
# ---------------------------------------------------------------------------------------


def winograd_weights(w: np.ndarray, wcache: dict | None) -> np.ndarray | None:
    """U = G g G^T (16, M, C) of the float32 3x3 weights ``w`` (M, C, 3, 3), computed in float64
    and rounded once, kept in ``wcache``: the node's ``weights_cache``, which exists only when
    W is a model constant (OpRun.const_inputs: an initializer the plan holds, the same
    immutable array on every run). The entry holds ``w`` itself and is served for that very
    array only, so a freed array's id taken by another never finds its transform. None
    without the compiled loops and BLAS, or without ``wcache`` (a feed, which may change
    between runs even when read-only: a transform per run costs too much)."""
    if wcache is None or native.kernels() is None or blas_sgemm_address() is None:
        return None
    hit = wcache.get("winograd")
    if hit is not None and hit[0] is w:
        return hit[1]
    u = np.empty((16,) + w.shape[:2], np.float32)
    native.kernels().wino_weights(np.ascontiguousarray(w), u)  # 10 ms for 512 x 512 where einsum took 200
    wcache["winograd"] = (w, u)
    return u


def conv_winograd(x: np.ndarray, u: np.ndarray, pads_begin: Sequence[int], out_shape: tuple,
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
    k = native.kernels()
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
    bias, relu, z = epilogue if epilogue else (_NO_BIAS, False, _NO_BIAS)
    per_image = m_out * out_h * out_w
    xc = np.ascontiguousarray(x)
    _blas_enter(1)  # the team's products are one thread each (already so inside a large run)
    try:
        for i in range(n_img):
            xi, yi = xc[i], y[i]
            zi = z[i * per_image:(i + 1) * per_image] if z.size else z
            if not native.team_split("wino_input_part", WINO_INPUT.pack(
                    x=xi, v=v, channels=n_ch, height=height, width=width, pt=pt, pl=pl, th=th, tw=tw),
                    n_ch * tiles * 16, max_parts=n_ch, part_size=WINO_TEAM_PART):
                k.wino_input(xi, v, 0, n_ch, pt, pl, th, tw)
            if not native.team_split("wino_gemm_part", WINO_GEMM.pack(u=u, v=v, mx=mx, m=m_out, c=n_ch, t=tiles,
                                                                      sgemm=sgemm),
                                     16 * m_out * n_ch * tiles, max_parts=16, part_size=native.GEMM_TEAM_PART):
                np.matmul(u, v, out=mx)
            if not native.team_split("wino_output_part", WINO_OUTPUT.pack(
                    mx=mx, y=yi, m=m_out, out_h=out_h, out_w=out_w, th=th, tw=tw, bias=bias, bias_size=bias.size,
                    relu=int(relu), z=zi, z_size=zi.size), m_out * tiles * 16, max_parts=m_out, part_size=WINO_TEAM_PART):
                k.wino_output(mx, yi, 0, m_out, th, tw, bias, relu, zi)
    finally:
        _blas_exit(1)
    if epilogue:
        epilogue.clear()
    return y


def core_winograd(x, w, pb, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """Winograd F(2x2, 3x3) with the node's transformed weights (:func:`conv_winograd`)."""
    u = winograd_weights(w, node.weights_cache)
    if u is None:  # (the condition saw a constant W: only a W cast to float32 lands here)
        return core_im2col_compiled(x, w, pb, strides, dilations, group, out_shape, epilogue, out, node)
    return conv_winograd(x, u, pb, tuple(out_shape), epilogue, out)


def core_bands(x, w, pads_begin, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """A 2-D float32 convolution (group 1) by bands of output rows in the compiled loop
    ``conv2d_bands``: each thread builds one band's columns in its own small scratch and
    multiplies them by W with a single-threaded BLAS call straight into the output, taking
    bands until none is left. The columns stay in cache between their writing and the
    product, and the two threads work on separate bands instead of OpenBLAS splitting each
    product: 64->64 channels at 56x56 ran 1.53x onnxruntime's time through one im2col and
    OpenBLAS's two threads, 1.24x by bands."""
    k = native.kernels()
    sgemm = blas_sgemm_address()
    kernel = tuple(w.shape[2:])
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
    args = BANDS.pack(
        x=xc, w2=w2, y=y, counter=counter, scratch=cols, bias=bias, z=z, images=n_img, channels=n_ch,
        height=x.shape[2], width=x.shape[3], m=m_out, out_h=out_h, out_w=out_w, band_rows=rows, sgemm=sgemm,
        kh=kernel[0], kw=kernel[1], sh=strides[0], sw=strides[1], dh=dilations[0], dw=dilations[1],
        pt=pads_begin[0], pl=pads_begin[1], bias_size=bias.size, z_size=z.size, relu=int(relu))
    _blas_enter(1)
    try:
        if native.team_split("bands_part", args, threads, max_parts=threads, part_size=1):
            return y.reshape((n_img, m_out) + tuple(out_shape))
    finally:
        _blas_exit(1)

    def work(lo: int, hi: int) -> None:
        col = scratch("conv_band", (depth * rows * out_w,), np.float32)
        k.conv2d_bands(xc, w2, y, counter, rows, sgemm, col, out_h, out_w, *kernel, *strides, *dilations, *pads_begin,
                       bias, relu, z)

    parallel.parallel_for(min(parallel.KERNEL_THREADS, bands), work, work_per_item=parallel.MIN_PARALLEL_WORK)
    return y.reshape((n_img, m_out) + tuple(out_shape))


# ---------------------------------------------------------------------------------------
# cores: im2col and one product per group
# ---------------------------------------------------------------------------------------


def _im2col_product(fill, x: np.ndarray, w: np.ndarray, group: int, out_shape, epilogue, out) -> np.ndarray:
    """Columns (images, C*Kp, P) written by ``fill(start, stop, col)`` into a per-thread
    reused buffer, then one BLAS product per group (batched by ``np.matmul``; one image of
    group 1 through :func:`product_with_epilogue`); batches whose columns exceed
    ``COL_CHUNK_BYTES`` go by chunks of images."""
    n_img, n_ch = x.shape[:2]
    m_out = w.shape[0]
    kp = prod(w.shape[2:])
    npix = prod(out_shape)
    cg, mg = n_ch // group, m_out // group
    dtype = x.dtype
    per_image = n_ch * kp * npix * dtype.itemsize
    chunk = max(1, COL_CHUNK_BYTES // max(per_image, 1))
    w2 = w.reshape(m_out, n_ch * kp) if group == 1 else w.reshape(group, mg, cg * kp)
    if n_img <= chunk:
        col = scratch("conv_col", (n_img, n_ch * kp, npix), dtype)
        fill(0, n_img, col)
        if group == 1:
            y = product_with_epilogue(w2, col[0], epilogue, _flat_out(out, m_out, npix)) if n_img == 1 else matmul(w2, col)
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


def core_im2col_compiled(x, w, pb, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """im2col of 2-D float32 images by the numba loop ``im2col2d`` (any strides, dilations
    and pads): each column row written once, zeros where a tap leaves the input; planes on
    the team, or blocks of them on the pool; then the products."""
    k = native.kernels()
    kernel = tuple(w.shape[2:])
    n_ch = x.shape[1]
    kp = kernel[0] * kernel[1]
    out_shape = tuple(out_shape)
    npix = out_shape[0] * out_shape[1]

    def fill(start: int, stop: int, col: np.ndarray) -> None:
        planes = np.ascontiguousarray(x[start:stop]).reshape((-1,) + x.shape[2:])
        flat = col.reshape(-1)
        args = IM2COL.pack(x=planes, col=flat, planes=planes.shape[0], height=x.shape[2], width=x.shape[3],
                           out_h=out_shape[0], out_w=out_shape[1], kh=kernel[0], kw=kernel[1], sh=strides[0],
                           sw=strides[1], dh=dilations[0], dw=dilations[1], pt=pb[0], pl=pb[1])
        if native.team_split("im2col_part", args, planes.shape[0] * kp * npix, max_parts=planes.shape[0],
                             part_size=IM2COL_TEAM_PART, cold_total=2 * IM2COL_PART):
            return

        def block(lo: int, hi: int) -> None:
            k.im2col2d(planes[lo:hi], flat[lo * kp * npix:hi * kp * npix], out_shape[0], out_shape[1],
                       kernel[0], kernel[1], *strides, *dilations, *pb)

        native.split((stop - start) * n_ch, block, max(1, IM2COL_PART // (kp * npix)))

    return _im2col_product(fill, x, w, group, out_shape, epilogue, out)


@lru_cache(maxsize=512)
def _same_plan(
    spatial: tuple[int, ...],
    out0: int,
    kernel: tuple[int, ...],
    dilations: tuple[int, ...],
    pads_begin: tuple[int, ...],
) -> tuple[int, int | None, tuple[tuple[int, int, int, int, tuple], ...]]:
    """Per tap of :func:`core_im2col_same`: (tap index, first flat output, last + 1, flat shift, bands).

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


def core_im2col_same(x, w, pb, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """im2col for unit strides when the inner output axes keep the input's sizes (3x3 pad 1
    and kin): each tap is one flat shifted copy of every channel plane (long contiguous rows
    instead of one short row per output row), with the rows outside the input and the
    pixels wrapped across an inner edge zeroed; blocks of planes on the pool."""
    kernel = tuple(w.shape[2:])
    n_img, n_ch = x.shape[:2]
    spatial = tuple(x.shape[2:])
    plane = prod(spatial)
    out_shape = tuple(out_shape)
    rows_out = out_shape[0] * prod(spatial[1:])
    guard, _, taps = _same_plan(spatial, out_shape[0], kernel, tuple(dilations), tuple(pb))
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

    return _im2col_product(fill, x, w, group, out_shape, epilogue, out)


def core_im2col(x, w, pads_begin, strides, dilations, group, out_shape, epilogue, out, node) -> np.ndarray:
    """im2col by a strided window view of the padded input (no copy) copied into the
    columns by ranges of channels on the pool, then the products (any dims and dtype)."""
    kernel = tuple(w.shape[2:])
    n_ch = x.shape[1]
    kp, npix = prod(kernel), prod(out_shape)
    lengths = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_shape, strides, kernel, dilations)]
    xp = padded(x, pads_begin, lengths, 0, buffer="conv_pad")
    windows = window_view(xp, kernel, strides, dilations, out_shape)  # (N, C, *K, *O), no copy

    def fill(start: int, stop: int, col: np.ndarray) -> None:
        src = windows[start:stop]
        dst = col.reshape(src.shape)

        def work(lo: int, hi: int) -> None:  # a range of channels
            np.copyto(dst[:, lo:hi], src[:, lo:hi])

        coarse_parallel_for(n_ch, work, work_per_item=(stop - start) * kp * npix)

    return _im2col_product(fill, x, w, group, out_shape, epilogue, out)


# ---------------------------------------------------------------------------------------
# prepared executors: one float32 image, the team's jobs settled once
# ---------------------------------------------------------------------------------------


def _writable_block(out: np.ndarray, y_shape: tuple) -> bool:
    return out.shape == y_shape and out.dtype == _F32 and out.flags.c_contiguous


def _prepared_applies(op, x, w, b=None, z=None, out=None, any_activation: bool = False) -> Facts | None:
    """The facts of a call a prepared executor may take: one C-contiguous float32 image of
    rank 4, W (and B) model constants, no activation but Relu (the parts' epilogue applies
    it, with or without a bias; ``any_activation``: any fused one) or a compiled chain, a
    residual of the output's shape and type, a writable block ``out``, compiled kernels and
    BLAS by address."""
    f = facts(op, x, w, b)
    if f is None or not f.f32 or x.ndim != 4 or f.n_img != 1 or f.empty or 0 in x.shape:
        return None
    if not (f.w_const and f.b_const and f.x_contiguous and w.flags.c_contiguous) or not _with_blas():
        return None
    if b is not None and (b.dtype != _F32 or b.shape != (f.m_out,) or not b.flags.c_contiguous):
        return None
    if z is not None and (type(z) is not np.ndarray or z.shape != f.y_shape or z.dtype != _F32
                          or not z.flags.c_contiguous):
        return None
    if out is not None and (type(out) is not np.ndarray or not _writable_block(out, f.y_shape)):
        return None
    if f.act == "Chain":
        if not _chain_address(f):
            return None
    elif not any_activation and f.act not in (None, "Relu"):
        return None  # (other activations: the frame applies them after the core)
    if f.shuffle is not None and not (f.pointwise and f.unit and f.group > 1 and z is None
                                      and tuple(f.shuffle) == (1, f.group, f.mg, *f.out_shape)):
        return None  # a folded shuffle: only a grouped 1x1 whose groups are the shuffle's
    return f


def _unprepared(op: Any, inputs: tuple) -> Callable[..., Any]:
    """The call the table's first unprepared entry applying to ``inputs`` makes (the
    reference kernel when none does): what a prepared executor runs when it cannot."""
    node = op.onnx_node
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    active = native.active()
    for path in dispatch.paths_for(node.op_type, domain):
        if path.prepared or (path.native and not active) or not path.when(op, *inputs):
            continue
        return lambda *xs, _fn=path.fn: _fn(op, *xs)
    return op._run


def _prepared(op, inputs: tuple, build) -> Callable[..., Any] | None:
    """A prepared entry's executor for this signature: ``build(f, w, b, residual) -> run(x,
    z, out)`` settles the team's jobs (None: the entry does not apply after all); the
    executor runs them for the arrays it was prepared with, and the table's first
    unprepared entry for these inputs otherwise (other arrays, another thread cap, or the
    team declining the job)."""
    x, w, b, z, out = (tuple(inputs) + (None,) * 5)[:5]
    f = _prepared_applies(op, x, w, b, z, out, build is _build_small_pointwise)
    if f is None:
        return None
    f.node.check_sizes(x, w)
    run = build(f, w, b, z is not None)
    if run is None:
        return None
    fallback = _unprepared(op, tuple(inputs))
    threads = parallel.current_threads()
    held_w, held_b = w, b
    n = len(inputs)

    def executor(*args):
        if args[1] is held_w and (args[2] if n > 2 else None) is held_b and parallel.current_threads() == threads:
            y = run(args[0], args[3] if n > 3 else None, args[4] if n > 4 else None)
            if y is not None:
                return (y,)
        return fallback(*args)

    return executor


def _epilogue_slots(f: Facts, b, residual: bool) -> tuple[np.ndarray, Any, int]:
    # the bias array, the residual's slot (None: passed at each call) and its size
    bias = _NO_BIAS if b is None else b
    return bias, None if residual else _NO_BIAS, f.m_out * f.npix if residual else 0


def _prepared_job(job, y_shape, residual: bool, blas: bool):
    # one team job writing the whole output: (x, y[, z]) in its slots
    if not job.parts:
        return None

    def run(x, z, out):
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


def _prepared_gemm(f: Facts, w2, depth, bias, zslot, zsize, relu: bool, im2col, act: int = 0):
    # team_gemm's job for W (M, depth) @ columns (depth, npix): the image itself (1x1) or
    # its im2col columns, filled by the ``im2col`` job first
    m_out, npix = f.m_out, f.npix
    work = m_out * depth * npix
    if work < CONV_TEAM_FROM:
        return None
    by_rows, parts = native.gemm_split(m_out, depth, npix, parallel.current_threads())
    gemm = native.TeamJob("gemm_part", GEMM.pack(
        a=w2, b=None, c=None, m=m_out, k=depth, n=npix, lda=depth, ldb=npix, ldc=npix, sgemm=blas_sgemm_address(),
        by_rows=int(by_rows), bias=bias, bias_size=bias.size, z=zslot, z_size=zsize, relu=int(relu), trans_b=0, cbias=_NO_BIAS, cbias_size=0,
        act=act),
        work, max_parts=parts, part_size=min(CONV_TEAM_FROM // 2, work // parts), cold_total=parallel.BLAS_THREADS_FROM)
    if not gemm.parts:
        return None
    residual = zslot is None
    y_shape = f.y_shape

    def run(x, z, out):
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
        product_with_epilogue(w2, cols.reshape(depth, npix), epilogue, y.reshape(m_out, npix))
        if epilogue:
            native.kernels().epilogue_rows(y.reshape(m_out, npix), *epilogue)
        return y

    return run


def _build_pointwise(f: Facts, w, b, residual):
    bias, zslot, zsize = _epilogue_slots(f, b, residual)
    return _prepared_gemm(f, w.reshape(f.m_out, f.n_ch), f.n_ch, bias, zslot, zsize, f.act == "Relu", None,
                          _chain_address(f))


def _chain_address(f: Facts) -> int:
    """The address of the compiled form of the node's fused chain (0: none), which the
    team's parts apply to each block of output while it is in cache; the node's chain
    keeps it alive."""
    chain = getattr(f.node, "chain", None)
    if f.act != "Chain" or chain is None:
        return 0
    fn = chain_inplace(chain)
    return 0 if fn is None else int(fn.address)


def _build_small_pointwise(f: Facts, w, b, residual):
    # below the team's size (a squeeze-excitation's 1x1 on one pixel, a head): one product on
    # the calling thread, the bias, residual and any fused activation by numpy, with none of
    # the frame's per-call work (geometry, checks, epilogue lists: 20-30 us a call, 10x the
    # product of a 1152x48 squeeze)
    m_out, npix, n_ch = f.m_out, f.npix, f.n_ch
    w2 = w.reshape(m_out, n_ch)
    bias = None if b is None else b.reshape(m_out, 1)
    act, params = f.act, f.node._kw.get("activation_params", ())
    chain = f.node.chain if act == "Chain" else None
    y_shape = f.y_shape

    def run(x, z, out):
        y = np.empty(y_shape, np.float32) if out is None else out
        y2 = y.reshape(m_out, npix)
        matmul(w2, x.reshape(n_ch, npix), out=y2)
        if bias is not None:
            y2 += bias
        if residual:
            y2 += z.reshape(m_out, npix)
        if chain is not None:
            return apply_chain(chain, y)
        apply_activation(y, act, params)
        return y

    return run


def _build_pointwise_groups(f: Facts, w, b, residual):
    bias, zslot, zsize = _epilogue_slots(f, b, residual)
    work = f.group * f.mg * f.cg * f.npix
    job = native.TeamJob("pointwise_groups_part", POINTWISE_GROUPS.pack(
        w=w, x=None, y=None, bias=bias, z=zslot, images=1, groups=f.group, mg=f.mg, cg=f.cg, npix=f.npix,
        sgemm=blas_sgemm_address(), bias_size=bias.size, z_size=zsize, relu=int(f.act == "Relu"),
        shuffled=int(f.shuffle is not None)), work, max_parts=f.group, cold_total=POINTWISE_COLD_WORK)
    return _prepared_job(job, f.y_shape, residual, blas=True)


def _build_depthwise(f: Facts, w, b, residual):
    bias, zslot, zsize = _epilogue_slots(f, b, residual)
    (height, width), (kh, kw), (out_h, out_w) = f.spatial, f.kernel, f.out_shape
    wk = w.reshape((f.n_ch,) + tuple(f.kernel))
    job = native.TeamJob("depthwise_part", DEPTHWISE.pack(
        x=None, w=wk, y=None, bias=bias, z=zslot, planes=f.n_ch, height=height, width=width, channels=f.n_ch,
        kh=kh, kw=kw, out_h=out_h, out_w=out_w, sh=f.strides[0], sw=f.strides[1], dh=f.dilations[0],
        dw=f.dilations[1], pt=f.pads_begin[0], pl=f.pads_begin[1], bias_size=bias.size, z_size=zsize,
        relu=int(f.act == "Relu"), act=_chain_address(f)), f.n_ch * f.npix * f.kp, max_parts=f.n_ch, cold_total=2 * JIT_PART_TAPS)
    return _prepared_job(job, f.y_shape, residual, blas=False)


def _build_winograd(f: Facts, w, b, residual):
    # conv_winograd's three team jobs for one image (each with its fallback on the caller)
    u = winograd_weights(w, f.node.weights_cache)
    if u is None:
        return None
    bias, zslot, zsize = _epilogue_slots(f, b, residual)
    relu = f.act == "Relu"
    k = native.kernels()
    sgemm = blas_sgemm_address()
    height, width = f.spatial
    n_ch, m_out = f.n_ch, f.m_out
    out_h, out_w = f.out_shape
    th, tw = (out_h + 1) // 2, (out_w + 1) // 2
    tiles = th * tw
    pt, pl = int(f.pads_begin[0]), int(f.pads_begin[1])
    stage_in = native.TeamJob("wino_input_part", WINO_INPUT.pack(
        x=None, v=None, channels=n_ch, height=height, width=width, pt=pt, pl=pl, th=th, tw=tw),
        n_ch * tiles * 16, max_parts=n_ch, part_size=WINO_TEAM_PART)
    product = native.TeamJob("wino_gemm_part", WINO_GEMM.pack(u=u, v=None, mx=None, m=m_out, c=n_ch, t=tiles,
                                                              sgemm=sgemm),
                             16 * m_out * n_ch * tiles, max_parts=16, part_size=native.GEMM_TEAM_PART)
    stage_out = native.TeamJob("wino_output_part", WINO_OUTPUT.pack(
        mx=None, y=None, m=m_out, out_h=out_h, out_w=out_w, th=th, tw=tw, bias=bias, bias_size=bias.size,
        relu=int(relu), z=zslot, z_size=zsize), m_out * tiles * 16, max_parts=m_out, part_size=WINO_TEAM_PART)
    y_shape = f.y_shape

    def run(x, z, out):
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


def _build_im2col(f: Facts, w, b, residual):
    bias, zslot, zsize = _epilogue_slots(f, b, residual)
    height, width = f.spatial
    depth = f.n_ch * f.kp
    im2col = native.TeamJob("im2col_part", IM2COL.pack(
        x=None, col=None, planes=f.n_ch, height=height, width=width, out_h=f.out_shape[0], out_w=f.out_shape[1],
        kh=f.kernel[0], kw=f.kernel[1], sh=f.strides[0], sw=f.strides[1], dh=f.dilations[0], dw=f.dilations[1],
        pt=f.pads_begin[0], pl=f.pads_begin[1]),
        f.n_ch * f.kp * f.npix, max_parts=f.n_ch, part_size=IM2COL_TEAM_PART, cold_total=2 * IM2COL_PART)
    if not im2col.parts:
        return None
    return _prepared_gemm(f, w.reshape(f.m_out, depth), depth, bias, zslot, zsize, f.act == "Relu", im2col)


def _prepared_kind(op, x, w, b=None, z=None, out=None) -> str | None:
    """Which prepared entry applies to this call (None: none): the one choice of the
    prepared part of the table, read by each prepared entry's condition."""
    f = _prepared_applies(op, x, w, b, z, out, any_activation=True)
    if f is None:
        return None
    if f.pointwise and f.unit and f.group == 1 and f.m_out * f.n_ch * f.npix < CONV_TEAM_FROM and f.shuffle is None:
        return "small 1x1"
    if _prepared_applies(op, x, w, b, z, out) is None:
        return None
    if f.act == "Chain" and not (f.pointwise and f.unit and f.group == 1) and not (f.depthwise and f.m_out == f.n_ch):
        return None  # (the kinds whose parts apply a chain: the others' frame applies it after)
    if f.pointwise and f.unit:
        if f.group == 1:
            return "1x1" if f.m_out * f.n_ch * f.npix >= CONV_TEAM_FROM else None
        return "grouped 1x1" if f.group * f.mg * f.cg * f.npix >= 2 * native.TEAM_PART else None
    if f.shuffle is not None:
        return None
    if f.depthwise:
        return "depthwise" if f.m_out == f.n_ch else None
    if winograd_fits(f):
        return "winograd"
    if f.group == 1 and f.npix < BAND_MIN_PIXELS:
        return "im2col"
    return None


# ---------------------------------------------------------------------------------------
# Conv's table (also FusedConv's; ConvConcat's segments run it too)
# ---------------------------------------------------------------------------------------


def _conv_path(name: str, when: Callable[..., bool], native: bool = True, prepared: bool = False):
    """Declare an entry for Conv and for FusedConv (domain onnxrt) alike."""
    def decorate(fn):
        fast_path("Conv", name, when=when, native=native, prepared=prepared)(fn)
        fast_path("FusedConv", name, when=when, native=native, prepared=prepared, domain=FUSED)(fn)
        return fn

    return decorate


def _kind_is(kind: str) -> Callable[..., bool]:
    return lambda op, *inputs: _prepared_kind(op, *inputs) == kind


@_conv_path("prepared 1x1", when=_kind_is("1x1"), prepared=True)
def prepared_pointwise(op, *inputs):
    """One float32 image, 1x1 kernel at unit strides, group 1, constant W: the team's blocked product, settled once.

    ``gemm_part`` over blocks of rows or columns, each one single-threaded BLAS call with
    the bias, residual and Relu in cache: the bits of ``1x1``'s team product."""
    return _prepared(op, inputs, _build_pointwise)


@_conv_path("prepared small 1x1", when=_kind_is("small 1x1"), prepared=True)
def prepared_small_pointwise(op, *inputs):
    """One float32 image, 1x1 unit stride, group 1, constant W, below the team's size: one product on the caller, settled once.

    A squeeze-excitation's convolutions on one pixel, any fused activation; the bits of
    ``1x1`` (the same product, then the bias, residual and activation)."""
    return _prepared(op, inputs, _build_small_pointwise)


@_conv_path("prepared grouped 1x1", when=_kind_is("grouped 1x1"), prepared=True)
def prepared_pointwise_groups(op, *inputs):
    """One float32 image, grouped 1x1 at unit strides, constant W: each group's product on the team, settled once.

    A channel shuffle the optimiser folded in writes each group's rows to their shuffled
    channels; the bits of ``pointwise groups on the team``."""
    return _prepared(op, inputs, _build_pointwise_groups)


@_conv_path("prepared depthwise", when=_kind_is("depthwise"), prepared=True)
def prepared_depthwise(op, *inputs):
    """One float32 image, 2-D depthwise (one output per channel), constant W: the compiled loop's planes on the team, settled once.

    The bits of ``depthwise compiled``."""
    return _prepared(op, inputs, _build_depthwise)


@_conv_path("prepared winograd", when=_kind_is("winograd"), prepared=True)
def prepared_winograd(op, *inputs):
    """One float32 image, 3x3 unit stride where Winograd pays, constant W: its three stages on the team, settled once.

    The node's transformed weights (``weights_cache``); the bits of ``winograd``."""
    return _prepared(op, inputs, _build_winograd)


@_conv_path("prepared im2col", when=_kind_is("im2col"), prepared=True)
def prepared_im2col(op, *inputs):
    """One float32 image, 2-D group 1 below 56x56 output pixels, constant W: compiled im2col and the blocked product on the team, settled once.

    The bits of ``im2col compiled``'s team jobs."""
    return _prepared(op, inputs, _build_im2col)


def _pointwise_groups_team_applies(op, x, w, b=None, z=None, out=None) -> bool:
    f = facts(op, x, w, b)
    return (
        f is not None and f.pointwise and f.group > 1 and f.cdt == _F32 and _with_blas()
        # the subsampled input must be contiguous (it is when x is, or a converted copy, and
        # the 1x1 reads every input pixel)
        and (f.x_contiguous or x.dtype != _F32) and f.unit and tuple(f.out_shape) == tuple(x.shape[2:])
        and f.n_img * f.group * f.mg * f.cg * f.npix >= 2 * native.TEAM_PART
    )


@_conv_path("pointwise groups on the team", when=_pointwise_groups_team_applies)
def pointwise_groups_team(op, x, w, b=None, z=None, out=None):
    """Grouped 1x1 float32 at unit strides, large enough: every (image, group) product on the team, its epilogue in cache.

    The batched product of ``1x1`` when the team does not take the job (the same BLAS
    calls, the same bits)."""
    return convolve(op, core_pointwise_groups_team, x, w, b, z, out)


@_conv_path("1x1", when=lambda op, x, w, b=None, z=None, out=None: (f := facts(op, x, w, b)) is not None and f.pointwise,
            native=False)
def pointwise(op, x, w, b=None, z=None, out=None):
    """1x1 kernels without padding (any dtype, strides subsample): one matrix product, no im2col.

    One float32 image's product of 1M+ multiply-adds goes to the team by blocks with the
    bias, residual and Relu in cache while compiled kernels are active."""
    return convolve(op, core_pointwise, x, w, b, z, out)


def _depthwise_compiled_applies(op, x, w, b=None, z=None, out=None) -> bool:
    f = facts(op, x, w, b)
    return f is not None and f.depthwise and len(f.kernel) == 2 and f.m_out == f.n_ch and f.cdt == _F32 and _compiled()


@_conv_path("depthwise compiled", when=_depthwise_compiled_applies)
def depthwise_compiled(op, x, w, b=None, z=None, out=None):
    """2-D float32 depthwise (one output per channel): the compiled tap loop, planes on the team or the pool, epilogue fused."""
    return convolve(op, core_depthwise_compiled, x, w, b, z, out)


@_conv_path("depthwise", when=lambda op, x, w, b=None, z=None, out=None: (f := facts(op, x, w, b)) is not None
            and f.depthwise, native=False)
def depthwise(op, x, w, b=None, z=None, out=None):
    """Depthwise of any dims and dtype (one input channel per group): per-plane columns and one batched product per block of planes."""
    return convolve(op, core_depthwise, x, w, b, z, out)


def _winograd_applies(op, x, w, b=None, z=None, out=None) -> bool:
    f = facts(op, x, w, b)
    return (f is not None and winograd_fits(f) and f.f32 and f.w_const and f.node.weights_cache is not None
            and _with_blas())


@_conv_path("winograd", when=_winograd_applies)
def winograd(op, x, w, b=None, z=None, out=None):
    """3x3 float32 at unit strides with 32+ input channels and a model-constant W: Winograd F(2x2, 3x3), stages on the team.

    The node keeps W's transform (``weights_cache``, for a constant only). Within float32
    rounding of the direct sum: the transforms add at most 4 (input) and 9/4 (weights)
    times the magnitudes before the products of depth C."""
    return convolve(op, core_winograd, x, w, b, z, out)


def _bands_applies(op, x, w, b=None, z=None, out=None) -> bool:
    f = facts(op, x, w, b)
    return (f is not None and len(f.kernel) == 2 and f.cdt == _F32 and f.group == 1 and f.npix >= BAND_MIN_PIXELS
            and _with_blas())


@_conv_path("bands", when=_bands_applies)
def bands(op, x, w, b=None, z=None, out=None):
    """2-D float32 group 1 with 56x56+ output pixels: bands of output rows, each one's columns and single-threaded product in cache."""
    return convolve(op, core_bands, x, w, b, z, out)


@_conv_path("im2col compiled", when=lambda op, x, w, b=None, z=None, out=None: (f := facts(op, x, w, b)) is not None
            and len(f.kernel) == 2 and f.cdt == _F32 and _compiled())
def im2col_compiled(op, x, w, b=None, z=None, out=None):
    """2-D float32 (any strides, dilations, pads, groups): the compiled im2col on the team or the pool, then the products."""
    return convolve(op, core_im2col_compiled, x, w, b, z, out)


@_conv_path("im2col same", when=lambda op, x, w, b=None, z=None, out=None: (f := facts(op, x, w, b)) is not None
            and all(s == 1 for s in f.strides) and tuple(f.out_shape[1:]) == tuple(x.shape[3:]), native=False)
def im2col_same(op, x, w, b=None, z=None, out=None):
    """Unit strides keeping the inner axes' sizes (3x3 pad 1...), any dims and dtype: im2col by flat shifted copies, then the products."""
    return convolve(op, core_im2col_same, x, w, b, z, out)


@_conv_path("im2col", when=lambda op, x, w, b=None, z=None, out=None: facts(op, x, w, b) is not None, native=False)
def im2col(op, x, w, b=None, z=None, out=None):
    """Everything else: im2col from a strided window view on the pool, one product per group, large batches by chunks of images."""
    return convolve(op, core_im2col, x, w, b, z, out)


# ---------------------------------------------------------------------------------------
# ConvConcat: its segments through Conv's table, written into their blocks
# ---------------------------------------------------------------------------------------


class _Segment:
    """A ConvConcat segment as the table sees it: its Conv (or FusedConv) node, called with
    ``(x, w, b, z, out)``; its reference writes into ``out`` when given."""

    __slots__ = ("onnx_node", "_inner", "op")

    def __init__(self, op: Any) -> None:
        self.op = op
        self.onnx_node = op.onnx_node
        self._inner = conv_node(op)

    @property
    def const_inputs(self) -> frozenset[int]:
        """The segment's model constants among (x, w, b, z) (the dispatcher leaves them out of
        its signatures: the same arrays on every call)."""
        return self.op.const_inputs

    def _run(self, x, w, b=None, z=None, out=None):
        y = (self.op._run(x, w, b) if z is None else self.op._run(x, w, b, z))[0]
        if out is None:
            return (y,)
        np.copyto(out, y)
        return (out,)


def segment_dispatchers(op: Any) -> list:
    """One :class:`onnxrt.dispatch.Dispatcher` per convolution segment of a ConvConcat node
    (None for a plain tensor), made at the first call and kept by the node."""
    made = op.__dict__.get("_segment_dispatch")
    if made is None:
        made = []
        for spec in op._convs:
            if spec is None:
                made.append(None)
                continue
            seg = _Segment(spec)
            node = seg.onnx_node
            domain = "" if node.domain in ("", "ai.onnx") else node.domain
            made.append(dispatch.Dispatcher(seg, dispatch.paths_for(node.op_type, domain)))
        op._segment_dispatch = made  # (two threads making them at once: either list serves)
    return made


def _concat_layout(op, inputs) -> tuple | None:
    """(output shape, channels per segment) when every segment is one float32 image of the
    same spatial shape (None otherwise)."""
    shapes = []
    for i, spec in enumerate(op._convs):
        x, w, b = inputs[4 * i: 4 * i + 3]
        if type(x) is not np.ndarray or x.dtype != _F32:
            return None
        if spec is None:
            shapes.append(x.shape)
            continue
        f = facts(spec, x, w, b)
        if f is None:
            return None
        shapes.append(f.y_shape)
    first = shapes[0]
    if len(first) < 3 or first[0] != 1 or not all(len(s) == len(first) and s[0] == 1 and s[2:] == first[2:]
                                                  for s in shapes):
        return None
    return (1, sum(s[1] for s in shapes)) + tuple(first[2:]), [s[1] for s in shapes]


@fast_path("ConvConcat", "blocks", when=lambda op, *inputs: _concat_layout(op, inputs) is not None, domain=FUSED,
           native=False, prepared=True)
def concat_blocks(op, *inputs):
    """One float32 image per segment: the output allocated first, each convolution's path writing its block of channels.

    Each segment runs Conv's table with its block as ``out`` (products, bias, residual and
    activation written there: no copy by the Concat; squeezenet's fire modules,
    inception's branches)."""
    layout = _concat_layout(op, inputs)
    shape, channels = layout
    for i, spec in enumerate(op._convs):
        if spec is not None:
            conv_node(spec).check_sizes(inputs[4 * i], inputs[4 * i + 1])
    op.check_alloc(shape, _F32)
    segments = segment_dispatchers(op)

    def run(*inputs):
        y = np.empty(shape, _F32)
        c0 = 0
        for i, (seg, n) in enumerate(zip(segments, channels)):
            x, w, b, z = inputs[4 * i: 4 * i + 4]
            block = y[:, c0:c0 + n]
            if seg is None:
                np.copyto(block, x)
            else:
                r = seg(x, w, b, z, block)[0]
                if r is not block and not (r.shape == block.shape and r.__array_interface__["data"][0]
                                           == block.__array_interface__["data"][0]):
                    np.copyto(block, r)
            c0 += n
        return (y,)

    return run


@fast_path("ConvConcat", "segments", when=lambda op, *inputs: True, domain=FUSED, native=False)
def concat_segments(op, *inputs):
    """Anything else: each segment through Conv's table, then the Concat."""
    from ..ops_cpu.op_concat import concat

    parts = []
    for i, seg in enumerate(segment_dispatchers(op)):
        x, w, b, z = inputs[4 * i: 4 * i + 4]
        parts.append(np.asarray(x) if seg is None else seg(x, w, b, z, None)[0])
    return (concat(*parts, axis=1),)


# ---------------------------------------------------------------------------------------
# ConvTranspose
# ---------------------------------------------------------------------------------------


def _transpose_facts(op, x, w, b=None):
    from ..ops_cpu.op_conv_transpose import transpose_setup

    if type(x) is not np.ndarray or type(w) is not np.ndarray or x.dtype.kind != "f":
        return None
    try:
        return transpose_setup(x, w, **op._kw)
    except KernelError:
        return None


def _pool_product(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # transpose_columns' product (g, Mg*Kp, Cg) @ (N, g, Cg, P), split over the pool, into a per-thread buffer
    return parallel.matmul(a, b, out=scratch("convT_col", b.shape[:2] + (a.shape[1], b.shape[3]), a.dtype))


def _col2im_compiled_applies(op, x, w, b=None) -> bool:
    g = _transpose_facts(op, x, w, b)
    return g is not None and len(g.kernel) == 2 and g.cdt == _F32 and _compiled()


@fast_path("ConvTranspose", "col2im compiled", when=_col2im_compiled_applies)
def transpose_col2im_compiled(op, x, w, b=None):
    """2-D float32: the product on the pool, then the compiled scatter-add straight into the cut output (2-3x the phased passes)."""
    from ..ops_cpu.op_conv_transpose import conv_transpose

    def scatter(col, g):
        n_img, m_out = col.shape[:2]
        y = np.empty((n_img * m_out,) + tuple(g.out_shape), col.dtype)
        native.kernels().col2im2d(col.reshape((n_img * m_out,) + tuple(g.kernel) + tuple(x.shape[2:])), y,
                                  *g.strides, *g.dilations, *g.pads_begin)
        return y.reshape((n_img, m_out) + tuple(g.out_shape))

    return (conv_transpose(x, w, b, **op._kw, check=op.check_alloc, product=_pool_product, scatter=scatter),)


@fast_path("ConvTranspose", "col2im phased", native=False,
           when=lambda op, x, w, b=None: (g := _transpose_facts(op, x, w, b)) is not None
           and any(s > 1 for s in g.strides))
def transpose_col2im_phased(op, x, w, b=None):
    """Strides above 1: the product on the pool, then col2im into interleaved phase planes, one contiguous block per tap."""
    from ..ops_cpu.op_conv_transpose import conv_transpose

    def scatter(col, g):
        return scatter_phased(col, x.shape[2:], g.kernel, g.strides, g.dilations, g.pads_begin, tuple(g.out_shape))

    return (conv_transpose(x, w, b, **op._kw, check=op.check_alloc, product=_pool_product, scatter=scatter),)


def scatter_phased(col, spatial, kernel, strides, dilations, pads_begin, out_shape) -> np.ndarray:
    """col2im for strides > 1 without strided accumulation.

    Output position ``i*s + k*d`` has phase ``(k*d) mod s`` and index ``i + (k*d) div s``
    inside its phase, so the unpadded output is kept as ``s`` interleaved phase planes
    per axis (N, M, *s, *Q): every tap adds one contiguous block into its phase plane.
    The planes are then interleaved into the cut output in one pass, one strided copy
    per output residue class; positions outside the computed pixels stay zero. Each
    output sums the same taps in the same order as the reference's strided accumulation.
    """
    import itertools

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
