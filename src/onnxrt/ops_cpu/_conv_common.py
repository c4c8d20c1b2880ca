"""Shared by convolution and pooling: pads/auto_pad/output-shape arithmetic, padding, window views, fused activations."""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from math import prod

import ml_dtypes
import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..errors import InvalidAttributeError, KernelError

AUTO_PADS = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")

#: element types computed in float32 and cast back (numpy has no fast float16 / bfloat16 BLAS)
_WIDENED = frozenset({np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)})


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """float64 stays float64, everything else floating computes in float32."""
    return np.dtype(np.float64) if dtype == np.float64 else np.dtype(np.float32)


def as_compute(a: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``a`` in the compute dtype, without a copy when it already is."""
    return a if a.dtype == dtype else a.astype(dtype)


# ---------------------------------------------------------------------------------------
# attributes and geometry
# ---------------------------------------------------------------------------------------


def spatial_attr(value: Sequence[int] | None, n: int, default: int, name: str) -> tuple[int, ...]:
    """A per-spatial-axis attribute (strides, dilations) with its default, checked for length and sign."""
    if value is None or len(value) == 0:
        return (default,) * n
    if len(value) != n:
        raise KernelError(f"Attribute {name!r} has {len(value)} values, expected one per spatial axis ({n}).")
    out = tuple(int(v) for v in value)
    if any(v < 1 for v in out):
        raise KernelError(f"Attribute {name!r} must hold values >= 1, got {list(out)}.")
    return out


def explicit_pads(pads: Sequence[int] | None, n: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(begin, end) pads from the ONNX layout ``[x1_begin, x2_begin, ..., x1_end, x2_end, ...]``."""
    if pads is None or len(pads) == 0:
        return (0,) * n, (0,) * n
    if len(pads) != 2 * n:
        raise KernelError(f"Attribute 'pads' has {len(pads)} values, expected {2 * n} (begin and end per spatial axis).")
    p = [int(v) for v in pads]
    if any(v < 0 for v in p):
        raise KernelError(f"Attribute 'pads' must hold values >= 0, got {p}.")
    return tuple(p[:n]), tuple(p[n:])


def check_auto_pad(op, value: str) -> str:
    """Validate ``auto_pad`` at construction (raises InvalidAttributeError naming the node)."""
    if value not in AUTO_PADS:
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'auto_pad' is {value!r}, expected one of {list(AUTO_PADS)!r}."
        )
    return value


#: the attributes every convolution takes, passed on to its kernel function
CONV_ATTRIBUTES = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def conv_attributes(op, names: tuple[str, ...] = CONV_ATTRIBUTES, positive: tuple[str, ...] = ("group",)) -> dict:
    """The keyword arguments of a convolution kernel from the node's attributes, checked once
    when the node is built: ``auto_pad`` must be known and each of ``positive`` >= 1."""
    if "auto_pad" in names:
        check_auto_pad(op, op.auto_pad)
    for name in positive:
        if getattr(op, name) < 1:
            raise InvalidAttributeError(f"{op.node_label()}: attribute {name!r} must be >= 1, got {getattr(op, name)}.")
    return {name: getattr(op, name) for name in names}


def same_pads(total: int, auto_pad: str) -> tuple[int, int]:
    """Split a total padding: the odd pixel goes to the end for SAME_UPPER, to the beginning for SAME_LOWER."""
    if auto_pad == "SAME_LOWER":
        return total - total // 2, total // 2
    return total // 2, total - total // 2


def window_geometry(
    in_shape: Sequence[int],
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    pads: Sequence[int] | None,
    auto_pad: str = "NOTSET",
    ceil_mode: bool = False,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """Cached :func:`_window_geometry` (the same shapes come back on every run)."""
    return _window_geometry(
        tuple(in_shape), tuple(kernel), tuple(strides), tuple(dilations),
        None if pads is None else tuple(pads), auto_pad, bool(ceil_mode),
    )


@lru_cache(maxsize=4096)
def _window_geometry(
    in_shape: tuple[int, ...],
    kernel: tuple[int, ...],
    strides: tuple[int, ...],
    dilations: tuple[int, ...],
    pads: tuple[int, ...] | None,
    auto_pad: str,
    ceil_mode: bool,
) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(pads_begin, pads_end, output spatial shape) of a sliding window (Conv and pooling).

    NOTSET uses ``pads``; VALID pads nothing; SAME_UPPER / SAME_LOWER choose the output
    ``ceil(in / stride)`` and pad just enough for it (``ceil_mode`` changes nothing then).
    With explicit pads and ``ceil_mode``, a last window starting in the end padding is
    dropped, as the pooling spec says ("sliding windows that would start in the right
    padded region are ignored").
    """
    n = len(in_shape)
    begin, end, out = [], [], []
    if auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        for size, k, s, d in zip(in_shape, kernel, strides, dilations):
            o = -(-size // s)
            total = max(0, (o - 1) * s + (k - 1) * d + 1 - size)
            b, e = same_pads(total, auto_pad)
            begin.append(b)
            end.append(e)
            out.append(o)
        return tuple(begin), tuple(end), tuple(out)
    if auto_pad == "VALID":
        pb, pe = (0,) * n, (0,) * n
    else:
        pb, pe = explicit_pads(pads, n)
    for size, k, s, d, b, e in zip(in_shape, kernel, strides, dilations, pb, pe):
        span = size + b + e - ((k - 1) * d + 1)
        if ceil_mode:
            o = -(-span // s) + 1
            if o > 0 and (o - 1) * s >= size + b:  # the last window would start in the end padding
                o -= 1
        else:
            o = span // s + 1
        if o < 0:
            raise KernelError(
                f"The window (kernel {list(kernel)}, dilations {list(dilations)}) is larger than the padded input "
                f"{list(in_shape)} with pads {list(pb) + list(pe)}."
            )
        out.append(o)
    return pb, pe, tuple(out)


def kernel_from(w_shape: Sequence[int], kernel_shape: Sequence[int] | None) -> tuple[int, ...]:
    """The kernel's spatial shape: W's, checked against the ``kernel_shape`` attribute when given."""
    k = tuple(int(v) for v in w_shape[2:])
    if kernel_shape is not None and len(kernel_shape) and tuple(int(v) for v in kernel_shape) != k:
        raise KernelError(f"Attribute 'kernel_shape' is {list(kernel_shape)} but the weight's spatial shape is {list(k)}.")
    return k


# per-thread scratch buffers and the kernel thread pool live in onnxrt.parallel (scratch is
# also imported from here by the pooling and convolution kernels)
from ..parallel import parallel_for, scratch  # noqa: E402


from .. import parallel as _parallel  # noqa: E402

#: convolution and pooling split over the pool only this many times above the engine's
#: thresholds: on the shared 2-core machine, a 25 M multiply-add product took 1.08 ms on
#: two threads and 0.75 ms on one, and squeezenet ran 40 ms with the engine's thresholds,
#: 28 ms with 32x/64x larger ones and 26 ms single-threaded (the other core busy)
COARSE_WORK, COARSE_MATMUL = 32, 64


def coarse_parallel_for(n: int, fn, work_per_item: int) -> None:
    """:func:`parallel_for` with a threshold ``COARSE_WORK`` times higher (see above)."""
    parallel_for(n, fn, work_per_item=max(1, work_per_item // COARSE_WORK))


def coarse_matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """:func:`onnxrt.parallel.matmul`, batched products (the groups of a convolution)
    splitting their items over the pool only from ``COARSE_MATMUL`` times the engine's
    threshold of multiply-adds (one BLAS call otherwise)."""
    batch = max(prod(a.shape[:-2]), prod(b.shape[:-2])) if a.ndim > 2 or b.ndim > 2 else 1
    if batch > 1 and a.ndim >= 2 and b.ndim >= 2:
        item = a.shape[-2] * a.shape[-1] * b.shape[-1]
        if batch * item < _parallel.MIN_PARALLEL_MATMUL * COARSE_MATMUL:
            return _parallel._product(a, b, out, item)
    return _parallel.matmul(a, b, out=out)


# ---------------------------------------------------------------------------------------
# padding and im2col
# ---------------------------------------------------------------------------------------


def padded(
    x: np.ndarray,
    begin: Sequence[int],
    lengths: Sequence[int],
    fill: float | int = 0,
    buffer: str | None = None,
    out: np.ndarray | None = None,
) -> np.ndarray:
    """``x`` (N, C, *S) placed at offset ``begin`` in an array of spatial ``lengths`` filled with ``fill``.

    Input pixels falling beyond ``lengths`` are cut (windows never reach them). Returns
    ``x`` itself when nothing needs padding (windows then read only part of it), unless
    ``out`` is given (an array of the padded shape to write). With ``buffer``, the result
    lives in a per-thread scratch buffer of that name. Only the border is filled.
    """
    spatial = x.shape[2:]
    shape = x.shape[:2] + tuple(lengths)
    if out is None:
        if all(b == 0 for b in begin) and all(n <= s for n, s in zip(lengths, spatial)):
            return x  # windows read inside x only: no copy
        out = scratch(buffer, shape, x.dtype) if buffer else np.empty(shape, x.dtype)
    dst, src = [slice(None), slice(None)], [slice(None), slice(None)]
    for b, size, length in zip(begin, spatial, lengths):
        stop = min(b + size, length)
        dst.append(slice(b, stop))
        src.append(slice(0, stop - b))
    # fill only the border: one slab before and after the copied block on each axis
    for i, (b, size, length) in enumerate(zip(begin, spatial, lengths)):
        stop = min(b + size, length)
        idx = [slice(None)] * len(shape)
        if b > 0:
            idx[i + 2] = slice(0, b)
            out[tuple(idx)] = fill
        if stop < length:
            idx[i + 2] = slice(stop, length)
            out[tuple(idx)] = fill
    out[tuple(dst)] = x[tuple(src)]
    return out


def window_view(
    xp: np.ndarray,
    kernel: Sequence[int],
    strides: Sequence[int],
    dilations: Sequence[int],
    out_shape: Sequence[int],
) -> np.ndarray:
    """Read-only strided view (N, C, *kernel, *out) of the windows of a padded input: no copy."""
    st = xp.strides
    sp = st[2:]
    shape = xp.shape[:2] + tuple(kernel) + tuple(out_shape)
    strides_ = st[:2] + tuple(a * d for a, d in zip(sp, dilations)) + tuple(a * s for a, s in zip(sp, strides))
    return as_strided(xp, shape, strides_, writeable=False)


def offset_view(xp: np.ndarray, offset: Sequence[int], strides: Sequence[int], dilations: Sequence[int], out_shape: Sequence[int]) -> np.ndarray:
    """The (N, C, *out) slice of a padded input seen by kernel position ``offset``."""
    idx = [slice(None), slice(None)]
    for k, s, d, o in zip(offset, strides, dilations, out_shape):
        start = k * d
        idx.append(slice(start, start + (o - 1) * s + 1, s))
    return xp[tuple(idx)]


# ---------------------------------------------------------------------------------------
# fused activations (applied in place on a fresh output)
# ---------------------------------------------------------------------------------------

ACTIVATIONS = ("Relu", "LeakyRelu", "Clip", "Sigmoid", "Tanh", "HardSigmoid")


def apply_activation(y: np.ndarray, name: str | None, params: Sequence[float] = ()) -> np.ndarray:
    """Apply a fused activation to ``y`` in place and return it.

    Relu; LeakyRelu(alpha=0.01); Clip(min=-inf, max=inf); Sigmoid; Tanh; HardSigmoid(alpha=0.2, beta=0.5).
    """
    if name is None:
        return y
    t = y.dtype.type
    if name == "Relu":
        if y.dtype.kind == "f" and y.size >= 4096:
            # np.clip has a vectorised loop, 3x faster than np.maximum (which tests for NaN per
            # element) on large arrays, a higher cost per call on small ones; NaN stays NaN
            np.clip(y, t(0), t(np.inf), out=y)
        else:
            np.maximum(y, t(0), out=y)
    elif name == "LeakyRelu":
        alpha = t(params[0] if params else 0.01)
        np.multiply(y, alpha, out=y, where=y < 0)
    elif name == "Clip":
        lo = params[0] if len(params) > 0 and params[0] is not None else -np.inf
        hi = params[1] if len(params) > 1 and params[1] is not None else np.inf
        np.clip(y, t(lo), t(hi), out=y)
    elif name == "Sigmoid":
        # 1/(1+exp(-y)) overflows for very negative y; (1 + tanh(y/2)) / 2 is the same function,
        # stable everywhere (a reference: no compiled code here, the fast paths share it)
        y *= t(0.5)
        np.tanh(y, out=y)
        y += t(1)
        y *= t(0.5)
    elif name == "Tanh":
        np.tanh(y, out=y)
    elif name == "HardSigmoid":
        alpha = t(params[0] if len(params) > 0 else 0.2)
        beta = t(params[1] if len(params) > 1 else 0.5)
        y *= alpha
        y += beta
        np.clip(y, t(0), t(1), out=y)
    else:
        raise KernelError(f"Fused activation {name!r} is not supported, expected one of {list(ACTIVATIONS)!r}.")
    return y


def to_output(y: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Cast a compute-dtype result back to the element type of the inputs."""
    return y if y.dtype == dtype else y.astype(dtype)
