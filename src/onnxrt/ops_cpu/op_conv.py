"""Conv (1, 11, 22): the reference kernel, im2col and one batched product per image; the fast paths are onnxrt.fastpaths.conv's."""

# conv() is the operator's semantics in plain numpy: every dimension count, group, stride,
# dilation and auto_pad, float16 / bfloat16 computed in float32 and rounded once, float64 in
# float64. The faster formulations (Winograd, bands of output rows, compiled im2col and
# depthwise loops, the team's products, prepared executors) are declared entries of one table
# in onnxrt.fastpaths.conv, which the dispatcher picks from per node and input signature; with
# fast paths off (SessionOptions.fast_paths = False or ONNXRT_FASTPATHS=0) every node runs
# this kernel.

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import prod

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._conv_common import (
    apply_activation,
    as_compute,
    compute_dtype,
    conv_attributes,
    kernel_from,
    padded,
    spatial_attr,
    to_output,
    window_geometry,
    window_view,
)
from ._op import OpRun


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
) -> np.ndarray:
    """The correlation ``Y[n, m, o] = sum_{c, k} W[m, c, k] * Xpad[n, g(m)*Cg + c, o*s + k*d]``, plainly.

    ``x`` and ``w`` share one floating dtype (the compute dtype); the result is a fresh
    ``(N, M, *out_shape)`` array of that dtype. The input is zero-padded (materialised: an
    infinite weight meets the padding as 0 * inf = NaN, as the definition says), each
    image's windows are copied into columns ``(group, Cg*Kp, P)`` and multiplied by the
    weights ``(group, Mg, Cg*Kp)`` in one batched product: every output is one dot product
    of depth ``Cg*Kp``, rounded as BLAS sums it. Also the exact core of ConvInteger (integer
    values in floats below the type's exact range).
    """
    n_img, n_ch = x.shape[:2]
    m_out = w.shape[0]
    kernel = tuple(w.shape[2:])
    cg, mg = n_ch // group, m_out // group
    kp = prod(kernel)
    out_shape = tuple(out_shape)
    npix = prod(out_shape)
    y = np.zeros((n_img, group, mg, npix), x.dtype)
    if y.size == 0:
        return y.reshape((n_img, m_out) + out_shape)
    lengths = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(out_shape, strides, kernel, dilations)]
    xp = padded(x, pads_begin, lengths, 0)
    windows = window_view(xp, kernel, strides, dilations, out_shape)  # (N, C, *K, *O), no copy
    w3 = w.reshape(group, mg, cg * kp)
    for n in range(n_img):
        cols = np.ascontiguousarray(windows[n]).reshape(group, cg * kp, npix)
        np.matmul(w3, cols, out=y[n])
    return y.reshape((n_img, m_out) + out_shape)


def shuffle_channels(y: np.ndarray, shuffle: Sequence[int]) -> np.ndarray:
    """Reshape(shuffle) -> Transpose(0, 2, 1, 3, 4) -> Reshape(N, C, H, W), as the nodes
    onnxrt.optim.channel_shuffle folded into a convolution did."""
    n, groups, per, h, w = (int(d) for d in shuffle)
    if y.size != n * groups * per * h * w:
        raise KernelError(f"Conv output of shape {list(y.shape)} cannot be reshaped to {list(shuffle)} for the channel "
                          "shuffle folded into it.")
    return np.ascontiguousarray(y.reshape(n, groups, per, h, w).transpose(0, 2, 1, 3, 4)).reshape(n, groups * per, h, w)


def check_bias(b: np.ndarray | None, m_out: int) -> np.ndarray | None:
    """B as an array of shape ``(M,)`` (KernelError otherwise), or None."""
    if b is None:
        return None
    b = np.asarray(b)
    if b.shape != (m_out,):
        raise KernelError(f"B must have shape [{m_out}] (one value per output channel), got {list(b.shape)}.")
    return b


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
    shuffle: Sequence[int] | None = None,
) -> np.ndarray:
    """ONNX Conv: X ``(N, C, *S)``, W ``(M, C/group, *K)``, optional B ``(M,)`` -> Y ``(N, M, *O)``; the reference.

    Every auto_pad (NOTSET with ``pads``, VALID, SAME_UPPER, SAME_LOWER), strides,
    dilations and groups, in 1-D, 2-D, 3-D and beyond. float32 and float64 compute in
    their own type; float16 and bfloat16 compute in float32 and are rounded back once.
    The extras of onnxrt's FusedConv (the optimiser writes them), applied in the compute
    type before that rounding: ``z``, a residual (Conv -> Sum/Add), added after the bias
    with Sum's broadcasting; ``activation``, one of Relu, LeakyRelu, Clip, Sigmoid, Tanh,
    HardSigmoid (``activation_params``: alpha / min, max / alpha, beta), applied last;
    ``shuffle`` (N, G, C/G, H, W), a channel shuffle reordering Y's channels as
    Reshape(shuffle), Transpose(0, 2, 1, 3, 4) and Reshape(N, C, H, W) would.
    """
    x = np.asarray(x)
    w = np.asarray(w)
    kernel, s, d, pb, out_shape = conv_geometry(x, w, group, kernel_shape, strides, dilations, pads, auto_pad)
    cdt = compute_dtype(x.dtype)
    b = check_bias(b, w.shape[0])
    y = conv_core(as_compute(x, cdt), as_compute(w, cdt), pb, s, d, group, out_shape)
    if b is not None:
        y += as_compute(b, cdt).reshape((-1,) + (1,) * len(kernel))
    if z is not None:
        z = np.asarray(z)
        y = np.add(y, as_compute(z, cdt), out=y if z.shape == y.shape else None)
    apply_activation(y, activation, activation_params)
    y = to_output(y, x.dtype)
    return y if shuffle is None else shuffle_channels(y, shuffle)


@register("Conv", versions=(1, 11, 22))
class Conv(OpRun):
    """Conv: 1, 11 (same semantics), 22 (bfloat16). Kernel: :func:`conv`; fast paths:
    :mod:`onnxrt.fastpaths.conv`. FusedConv and ConvConcat hold Conv nodes too."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        #: :func:`conv`'s keywords: the attributes, and a fused node's activation and shuffle
        self._kw = conv_attributes(self)
        #: what the fast paths derive from W when it is a model constant (Winograd's
        #: transform), or None: set by :meth:`set_const_inputs`, never for a feed
        self.weights_cache: dict | None = None
        self._checked: tuple | None = None  # the shapes whose sizes passed check_alloc

    def set_const_inputs(self, positions) -> None:
        super().set_const_inputs(positions)
        # W a model constant: what is derived from it (Winograd's transform) is kept by the node
        self.weights_cache = {} if 1 in self.const_inputs else None

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

    def check_sizes(self, x, w) -> None:
        """max_tensor_bytes against the output and the padded input, once per pair of shapes."""
        checked = self._checked
        if checked is None or x.shape != checked[0] or w.shape != checked[1]:
            self._check_sizes(np.asarray(x), np.asarray(w))

    def _run(self, x, w, b=None, attributes=None, verbose=0, fLOG=None):
        self.check_sizes(x, w)
        return (conv(x, w, b, **self._kw),)
