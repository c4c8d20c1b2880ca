"""The Reduce* family as one table: axes as attribute or input, keepdims, noop_with_empty_axes, empty sets."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import ml_dtypes
import numpy as np

from ..compat import OffSpecOnce
from ..errors import KernelError
from ..registry import register
from ._axes import axes_in
from ._op import OpRun

_HALF = (np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16))
_BOOL = np.dtype(bool)


def _accumulator(dtype: np.dtype) -> np.dtype:
    """Accumulate float16/bfloat16 in float32 (one rounding at the end); other types in themselves."""
    return np.dtype(np.float32) if dtype in _HALF else dtype


def _float_for(dtype: np.dtype) -> np.dtype:
    """Where sqrt/log/exp are computed: float32 for 16-bit floats, float64 for integers."""
    if dtype.kind == "f" and dtype not in _HALF:
        return dtype
    return np.dtype(np.float32) if dtype in _HALF else np.dtype(np.float64)


def _lowest(dtype: np.dtype) -> Any:
    """Identity of max: -inf for floats, the smallest value for integers, False for bool."""
    if dtype == _BOOL:
        return False
    if dtype.kind in "iu":
        return np.iinfo(dtype).min
    return -np.inf


def _highest(dtype: np.dtype) -> Any:
    """Identity of min: +inf for floats, the largest value for integers, True for bool."""
    if dtype == _BOOL:
        return True
    if dtype.kind in "iu":
        return np.iinfo(dtype).max
    return np.inf


# Each kernel computes over ``axes`` (a tuple, or None for every axis) and returns an
# array; the caller casts it back to the input's type. One numpy call per reduction.
#
# Sums of float32/float64 over trailing axes of a C-contiguous tensor (the common case:
# the last axis, or everything) go through einsum's SIMD sum-of-products loop, about
# 2.5x faster than add.reduce's pairwise summation; it accumulates in the same type.
# BLAS (x @ ones) would be as fast single-threaded but its threads stall badly on a
# busy machine, so it is not used here.

_FAST = (np.dtype(np.float32), np.dtype(np.float64))


def _trailing(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> tuple[np.ndarray, tuple[int, ...]] | None:
    """``x`` as [outer, inner] and the output shape when ``axes`` are the last axes of a
    contiguous float32/float64 tensor; None otherwise."""
    if x.dtype not in _FAST or not x.flags.c_contiguous or x.size == 0:
        return None
    r = x.ndim
    k = r if axes is None else len(axes)
    if axes is not None and sorted(axes) != list(range(r - k, r)):
        return None
    lead = x.shape[: r - k]
    out_shape = lead + (1,) * k if keep else lead
    return x.reshape(math.prod(lead), -1), out_shape


def _sum(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    blk = _trailing(x, axes, keep)
    if blk is not None:
        return np.einsum("ij->i", blk[0]).reshape(blk[1])
    acc = _accumulator(x.dtype)
    return np.add.reduce(x, axis=axes, dtype=acc, keepdims=keep)


def _sum_square(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    blk = _trailing(x, axes, keep)
    if blk is not None:
        return np.einsum("ij,ij->i", blk[0], blk[0]).reshape(blk[1])
    acc = _accumulator(x.dtype)
    xa = x.astype(acc) if acc != x.dtype else x
    return np.add.reduce(xa * xa, axis=axes, keepdims=keep)


def _l1(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    acc = _accumulator(x.dtype)
    xa = x.astype(acc) if acc != x.dtype else x
    return _sum(np.abs(xa), axes, keep) if acc in _FAST else np.add.reduce(np.abs(xa), axis=axes, keepdims=keep)


def _l2(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    # integers: sqrt in float64, truncated back to the integer type (as onnxruntime's static_cast)
    return np.sqrt(_sum_square(x.astype(_float_for(x.dtype), copy=False), axes, keep))


def _prod(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    return np.multiply.reduce(x, axis=axes, dtype=_accumulator(x.dtype), keepdims=keep)


def _max(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    # NaN propagates (numpy's maximum); an empty set yields -inf or the type's lowest value
    if x.size == 0:
        return np.maximum.reduce(x, axis=axes, keepdims=keep, initial=_lowest(x.dtype))
    return np.maximum.reduce(x, axis=axes, keepdims=keep)


def _min(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    if x.size == 0:
        return np.minimum.reduce(x, axis=axes, keepdims=keep, initial=_highest(x.dtype))
    return np.minimum.reduce(x, axis=axes, keepdims=keep)


def _mean(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    count = x.size if axes is None else int(np.prod([x.shape[a] for a in axes], dtype=np.int64))
    if x.dtype.kind in "iub":
        # integer mean: sum, then division truncated toward zero, as onnxruntime's
        # integer ReduceMean does
        acc = np.dtype(np.uint64) if x.dtype.kind == "u" else np.dtype(np.int64)
        s = np.add.reduce(x, axis=axes, dtype=acc, keepdims=keep)
        d = max(count, 1)
        return np.sign(s) * (np.abs(s) // d) if acc.kind == "i" else s // np.uint64(d)
    s = _sum(x, axes, keep)
    if count == 0:  # undefined by the spec: 0 (the empty sum), as onnxruntime returns
        return s
    return s / s.dtype.type(count)


def _log_sum(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    s = np.add.reduce(x.astype(_float_for(x.dtype)), axis=axes, keepdims=keep)
    with np.errstate(divide="ignore", invalid="ignore"):  # empty set: log(0) = -inf, as the spec says
        return np.log(s)


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...] | None, keep: bool) -> np.ndarray:
    # log(sum(exp(x))) = m + log(sum(exp(x - m))) with m the maximum: no overflow. m is
    # replaced by 0 where it is not finite (empty set, all -inf, +inf, NaN) so that the
    # result is still -inf, +inf or NaN as the plain formula gives.
    xf = x.astype(_float_for(x.dtype))
    if xf.size == 0:
        m = np.maximum.reduce(xf, axis=axes, keepdims=True, initial=-np.inf)
    else:
        m = np.maximum.reduce(xf, axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, xf.dtype.type(0))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        s = np.log(np.add.reduce(np.exp(xf - m), axis=axes, keepdims=True)) + m
    return s if keep else s.reshape([d for i, d in enumerate(s.shape) if axes is not None and i not in axes])


@dataclass(frozen=True)
class Reduction:
    """One row: the operator, its versions, the first version taking ``axes`` as an input, the kernel."""

    name: str
    versions: tuple[int, ...]
    axes_input_since: int
    kernel: Callable[[np.ndarray, tuple[int, ...] | None, bool], np.ndarray]


REDUCTIONS = [
    Reduction("ReduceSum", (1, 11, 13), 13, _sum),
    Reduction("ReduceMean", (1, 11, 13, 18), 18, _mean),
    Reduction("ReduceMax", (1, 11, 12, 13, 18, 20), 18, _max),
    Reduction("ReduceMin", (1, 11, 12, 13, 18, 20), 18, _min),
    Reduction("ReduceProd", (1, 11, 13, 18), 18, _prod),
    Reduction("ReduceL1", (1, 11, 13, 18), 18, _l1),
    Reduction("ReduceL2", (1, 11, 13, 18), 18, _l2),
    Reduction("ReduceLogSum", (1, 11, 13, 18, 28), 18, _log_sum),
    Reduction("ReduceLogSumExp", (1, 11, 13, 18, 28), 18, _log_sum_exp),
    Reduction("ReduceSumSquare", (1, 11, 13, 18), 18, _sum_square),
]

_KERNELS = {r.name: r.kernel for r in REDUCTIONS}

#: reductions with a step besides the reduction itself: with noop_with_empty_axes and no axes
#: that step still runs ("ReduceLogSum returns the Log of input tensor, and ReduceSumSquare
#: returns the Square of the input tensor, in this case"), the others return the input
_COMPOSITE = frozenset({"ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"})


def reduce(op_type: str, data: np.ndarray, axes: Any = None, keepdims: int = 1, noop_with_empty_axes: int = 0) -> np.ndarray:
    """Apply the reduction ``op_type`` (``"ReduceSum"``...) to ``data``.

    ``axes`` is a list or 1-D int tensor (negative values count from the end) or None.
    No axes reduce every axis, unless ``noop_with_empty_axes`` is set: then ``data`` is
    returned unchanged, or with only the elementwise step of a composite reduction
    (ReduceL1: abs, ReduceSumSquare: square, ReduceLogSum: log...). The output has the input's element type; float16/bfloat16 are
    accumulated in float32, integer L2/LogSum/LogSumExp are computed in float64 and
    truncated back.
    """
    data = np.asarray(data)
    kernel = _KERNELS.get(op_type)
    if kernel is None:
        raise KernelError(f"unknown reduction {op_type!r}, expected one of {sorted(_KERNELS)!r}.")
    ax = None if axes is None else axes_in(axes, data.ndim)
    if not ax:
        if noop_with_empty_axes and op_type not in _COMPOSITE:
            return data
        # a reduction over no axis () keeps every element: only the composite step applies
        ax = () if noop_with_empty_axes else None
    out = kernel(data, ax, bool(keepdims))
    if not isinstance(out, np.ndarray) or out.dtype != data.dtype:
        out = np.asarray(out).astype(data.dtype, copy=False)
    return out


def _scalar_with_axes(op: Any, data: np.ndarray, axes: Any) -> np.ndarray:
    """A reduction of a scalar given axes, which a rank-0 tensor cannot have (exporters write
    axes [0] for values they thought 1-D): onnxruntime's kernel ignores them and reduces the
    one element to a scalar, whatever keepdims says (its shape inference refuses the node only
    when the input is declared rank 0). onnxrt does the same and reports it once."""
    op._report(
        f"{op.node_label()} reduces a scalar (rank 0) along axes {np.asarray(axes).tolist()}, which the "
        f"specification does not allow (axes must lie in [-rank, rank-1]); onnxrt reduces its one element "
        f"to a scalar, as onnxruntime does.",
        KernelError,
    )
    out = op.kernel(data, None, False)
    out = np.asarray(out).reshape(())
    return out if out.dtype == data.dtype else out.astype(data.dtype)


def _make_class(row: Reduction) -> type[OpRun]:
    kernel = row.kernel
    composite = row.name in _COMPOSITE

    def __init__(self, onnx_node, desc=None, **options):
        OpRun.__init__(self, onnx_node, desc, **options)
        self._axes_input = (self.since_version or row.axes_input_since) >= row.axes_input_since
        self._keep = bool(self.keepdims)
        self._noop = bool(getattr(self, "noop_with_empty_axes", 0) or 0)
        # attribute axes are fixed: normalise them per rank on first use
        self._attr_axes = None if self._axes_input else self.axes
        self._cache: dict[int, tuple[int, ...] | None] = {}
        self._report = OffSpecOnce(options.get("session_options"))

    def _run(self, data, axes=None, attributes=None, verbose=0, fLOG=None):
        if data.ndim == 0:
            given = axes if self._axes_input else self._attr_axes
            if given is not None and np.size(given):
                return (_scalar_with_axes(self, data, given),)
        if self._axes_input:
            ax = None if axes is None or axes.size == 0 else axes_in(axes, data.ndim)
            if not ax and self._noop:
                if not composite:
                    return (data,)
                out = kernel(data, (), self._keep)  # elementwise: abs, square, log...
                return (out if out.dtype == data.dtype else np.asarray(out).astype(data.dtype, copy=False),)
        else:
            ax = self._cache.get(data.ndim, False)
            if ax is False:
                ax = axes_in(self._attr_axes, data.ndim) if self._attr_axes else None
                self._cache[data.ndim] = ax
        out = kernel(data, ax or None, self._keep)
        if not isinstance(out, np.ndarray) or out.dtype != data.dtype:
            out = np.asarray(out).astype(data.dtype, copy=False)
        return (out,)

    doc = (
        f"{row.name} (versions {list(row.versions)}): axes as attribute before {row.axes_input_since}, "
        f"as an optional int64 input (with noop_with_empty_axes) from {row.axes_input_since}."
    )
    cls = type(row.name, (OpRun,), {"__init__": __init__, "_run": _run, "__doc__": doc, "__module__": __name__, "kernel": staticmethod(kernel),
                                  "uses_blas": False})  # einsum without optimize: its own loops, no BLAS
    return register(row.name, versions=row.versions)(cls)


for _row in REDUCTIONS:
    globals()[_row.name] = _make_class(_row)
