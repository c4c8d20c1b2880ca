"""Instance, Layer, Group, RMS, Lp and MeanVariance normalisations, sharing one statistics helper."""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Any

import ml_dtypes
import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)
_HALF = frozenset((np.dtype(np.float16), np.dtype(ml_dtypes.bfloat16)))


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    """float64 stays float64; float32, float16 and bfloat16 are computed in float32."""
    return _F64 if np.dtype(dtype) == _F64 else _F32


def _stash_dtype(stash_type: int, label: str) -> np.dtype:
    """numpy dtype of a ``stash_type`` attribute (an ONNX element type code of a float type)."""
    table = {1: _F32, 10: np.dtype(np.float16), 11: _F64, 16: np.dtype(ml_dtypes.bfloat16)}
    dt = table.get(int(stash_type))
    if dt is None:
        raise InvalidAttributeError(
            f"{label}: attribute 'stash_type' is {stash_type}, expected one of {sorted(table)} "
            f"(float, float16, double, bfloat16)."
        )
    return dt


def _round_to(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Values computed in float32 rounded to a 16-bit float precision (unchanged for float32/float64)."""
    return values.astype(dtype).astype(values.dtype) if dtype in _HALF else values


def _axis(axis: int, rank: int, name: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise KernelError(f"{name} is {axis}, out of range [{-rank}, {rank - 1}] for an input of rank {rank}.")
    return axis + rank if axis < 0 else axis


# --------------------------------------------------------------------------------------------
# Row primitives. Every normalisation here reshapes its input to a C-contiguous (rows, cols)
# matrix whose rows share one statistic. numpy's broadcasting of a per-row value over rows of a
# few thousand elements runs at the speed of a two-array operation; BLAS does better: row sums
# are matrix-vector products, and adding a per-row (or per-column) vector is a rank-1 update
# (ger) of the transposed, Fortran-ordered view, done in place.
# --------------------------------------------------------------------------------------------

#: dtype -> BLAS's ger, filled at the first rank-1 update (scipy.linalg costs ~0.1 s to import)
_GER: dict[np.dtype, Any] = {}


def _ger_for(dtype: np.dtype) -> Any:
    if not _GER:
        try:
            from scipy.linalg import blas

            _GER.update({_F32: blas.sger, _F64: blas.dger})
        except ImportError:  # pragma: no cover  (scipy is a dependency; numpy broadcasting stays correct)
            _GER[np.dtype(np.int8)] = None  # not empty: do not try again
    return _GER.get(dtype)

#: numpy >= 2 computes row-wise dot products with its SIMD dot kernel; einsum is the fallback
_vecdot = getattr(np, "vecdot", None)

#: rows at least this long go through BLAS/vecdot; shorter rows through numpy broadcasting
_LONG_ROW = 256


@lru_cache(maxsize=64)
def _ones(n: int, dtype: str) -> np.ndarray:
    out = np.ones(n, dtype=dtype)
    out.flags.writeable = False
    return out


def row_sums(x2: np.ndarray) -> np.ndarray:
    """``x2.sum(axis=1)`` as one BLAS matrix-vector product."""
    return x2 @ _ones(x2.shape[1], x2.dtype.str)


def row_sumsq(d: np.ndarray) -> np.ndarray:
    """``(d * d).sum(axis=1)``: a row-wise dot product for long rows, squares and a product for short ones."""
    if d.shape[1] >= _LONG_ROW:
        return _vecdot(d, d) if _vecdot is not None else np.einsum("ij,ij->i", d, d)
    return np.square(d) @ _ones(d.shape[1], d.dtype.str)


def _ger(y2: np.ndarray, u: np.ndarray, v: np.ndarray, alpha: float) -> bool:
    """``y2.T += alpha * outer(u, v)`` in place through BLAS; False when BLAS cannot take y2."""
    ger = _ger_for(y2.dtype)
    if ger is None or not y2.flags.c_contiguous or not y2.flags.writeable or y2.size == 0:
        return False
    res = ger(alpha, u, v.astype(y2.dtype, copy=False), a=y2.T, overwrite_a=1)
    if not np.shares_memory(res, y2):  # f2py made a copy after all
        y2[...] = res.T
    return True


def add_rows(y2: np.ndarray, v: np.ndarray, alpha: float = 1.0) -> None:
    """``y2[r, :] += alpha * v[r]`` in place."""
    rows, cols = y2.shape
    if cols >= _LONG_ROW and _ger(y2, _ones(cols, y2.dtype.str), v, alpha):
        return
    y2 += (v if alpha == 1.0 else v * y2.dtype.type(alpha))[:, None]


def add_cols(y2: np.ndarray, v: np.ndarray) -> None:
    """``y2[:, c] += v[c]`` in place."""
    rows, cols = y2.shape
    if cols >= _LONG_ROW and _ger(y2, v, _ones(rows, y2.dtype.str), 1.0):
        return
    y2 += v[None, :]


def standardize_rows(
    x2: np.ndarray, epsilon: float, center: bool = True, owned: bool = False, row_factor: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row statistics of a 2-D float32/float64 array: ``(normalized, mean, inv_std)``.

    ``normalized = (x - mean) * inv_std`` with ``inv_std = 1 / sqrt(var + epsilon)``, the
    variance being the population one computed on the centred values (two passes, no
    cancellation). With ``center=False`` (RMS normalisation) nothing is subtracted and
    ``var`` is the mean of the squares. ``normalized`` is a new array, or ``x2`` itself when
    the caller ``owned`` it; either way the caller may modify it. A ``row_factor`` multiplies
    each row too, folded into the same pass (a per-row scale such as InstanceNormalization's).
    """
    rows, cols = x2.shape
    dt = x2.dtype.type
    if cols == 0:
        return np.empty_like(x2), np.zeros(rows, dtype=x2.dtype), np.full(rows, 1.0 / np.sqrt(epsilon), dtype=x2.dtype)
    if not x2.flags.c_contiguous:
        x2, owned = np.ascontiguousarray(x2), True
    n = dt(cols)
    if center:
        mean = row_sums(x2)
        mean /= n
        if cols >= _LONG_ROW:
            d = x2 if owned else x2.copy()
            add_rows(d, mean, -1.0)
        else:
            d = np.subtract(x2, mean[:, None], out=x2 if owned else None)
        var = row_sumsq(d)
    else:
        mean = np.zeros(rows, dtype=x2.dtype)
        d = None
        var = row_sumsq(x2)
    var /= n
    var += dt(epsilon)
    inv_std = np.sqrt(var, out=var)
    np.divide(dt(1), inv_std, out=inv_std)
    factor = inv_std if row_factor is None else inv_std * row_factor.astype(x2.dtype, copy=False)
    if d is None:
        d = np.multiply(x2, factor[:, None], out=x2 if owned else None)
    else:
        d *= factor[:, None]
    return d, mean, inv_std


def _as_columns(p: np.ndarray | None, x_shape: tuple[int, ...], axis: int) -> np.ndarray | None:
    """``p`` as one value per column of the (rows, cols) view when it varies only along axes >= axis.

    That is the usual Scale/B of shape ``x.shape[axis:]`` (or a broadcastable part of it);
    anything else (values varying along a leading axis) gives None.
    """
    if p is None:
        return None
    tail = tuple(x_shape[axis:])
    shape = tuple(p.shape)
    if shape == tail:
        return p.reshape(-1)
    lead = len(shape) - len(tail)
    if lead > 0:
        if any(d != 1 for d in shape[:lead]):
            return None
        shape = shape[lead:]
    return np.broadcast_to(p.reshape(shape), tail).reshape(-1)


def _scale_shift(
    normalized: np.ndarray, x_shape: tuple[int, ...], axis: int, dtype: np.dtype, scale: np.ndarray | None, bias: np.ndarray | None
) -> np.ndarray:
    """Stage two of Layer/RMS normalisation, ``normalized * scale + bias`` in ``dtype``.

    ``normalized`` is the (rows, cols) float32/float64 result of stage one (the caller's to
    modify). 16-bit types compute in float32 with one rounding per operation; per-column
    Scale/B (the usual case) go through the row primitives, others through broadcasting.
    """
    scale = None if scale is None else np.asarray(scale)
    bias = None if bias is None else np.asarray(bias)
    if dtype in _HALF:
        y = _round_to(normalized, dtype).reshape(x_shape)
        if scale is not None:
            y = _round_to(y * scale.astype(_F32), dtype)
        if bias is not None:
            y = y + bias.astype(_F32)
        return y.astype(dtype)
    y2 = normalized if normalized.dtype == dtype else normalized.astype(dtype)
    s_cols = _as_columns(scale, x_shape, axis)
    b_cols = _as_columns(bias, x_shape, axis)
    if (scale is None or s_cols is not None) and (bias is None or b_cols is not None):
        if s_cols is not None:
            y2 *= s_cols.astype(dtype, copy=False)[None, :]
        if b_cols is not None:
            add_cols(y2, b_cols.astype(dtype, copy=False))
        return y2.reshape(x_shape)
    y = y2.reshape(x_shape)
    if scale is not None:
        y *= scale.astype(dtype, copy=False)
    if bias is not None:
        y += bias.astype(dtype, copy=False)
    return y


def _check_broadcast(value: np.ndarray | None, name: str, shape: tuple[int, ...]) -> None:
    """Unidirectional broadcasting: ``value`` must broadcast to ``shape`` without changing it."""
    if value is None:
        return
    vshape = np.shape(value)
    if vshape == tuple(shape[len(shape) - len(vshape) :]):
        return  # the usual case: the trailing dimensions of X
    try:
        ok = np.broadcast_shapes(vshape, shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise KernelError(f"{name} of shape {list(np.shape(value))} does not broadcast to X's shape {list(shape)}.")


def _rows_view(x: np.ndarray, axis: int, cdt: np.dtype) -> tuple[np.ndarray, bool]:
    """``x`` in the compute dtype as a C-contiguous (prod(shape[:axis]), prod(shape[axis:])) matrix, and
    whether that matrix is a new array (which stage one may then overwrite)."""
    x2 = x.astype(cdt, copy=False, order="C")
    return x2.reshape(math.prod(x.shape[:axis]), math.prod(x.shape[axis:])), x2 is not x


# --------------------------------------------------------------------------------------------
# LayerNormalization, RMSNormalization
# --------------------------------------------------------------------------------------------


def layer_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray | None = None,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: np.dtype = _F32,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """LayerNormalization-17: ``Y, Mean, InvStdDev``.

    Stage one standardises over axes ``[axis, rank)`` in the precision of ``stash_type``
    (float16/bfloat16 stashes compute in float32 and round the result), and the result is
    cast to X's type; stage two multiplies by Scale and adds B (both unidirectionally
    broadcast) in X's type. Mean and InvStdDev have X's leading dimensions followed by ones,
    and the stash type. The reference kernel (fast path: onnxrt.fastpaths.norm).
    """
    x = np.asarray(x)
    rank = x.ndim
    if rank == 0:
        raise KernelError("LayerNormalization needs X of rank >= 1.")
    axis = _axis(axis, rank)
    _check_broadcast(scale, "Scale", x.shape)
    _check_broadcast(bias, "B", x.shape)
    x2, owned = _rows_view(x, axis, _compute_dtype(stash_type))
    normalized, mean, inv_std = standardize_rows(x2, epsilon, owned=owned)
    normalized = _round_to(normalized, stash_type)
    y = _scale_shift(normalized, x.shape, axis, x.dtype, scale, bias)
    stat_shape = x.shape[:axis] + (1,) * (rank - axis)
    return (
        y,
        mean.astype(stash_type).reshape(stat_shape),
        inv_std.astype(stash_type).reshape(stat_shape),
    )


def rms_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    axis: int = -1,
    epsilon: float = 1e-5,
    stash_type: np.dtype = _F32,
) -> np.ndarray:
    """RMSNormalization-23: ``Y = X / sqrt(mean(X**2 over [axis, rank)) + epsilon) * scale``.

    The first stage runs in the stash precision and is cast to X's type; the product with
    ``scale`` (unidirectionally broadcast) runs in scale's type, which is Y's type.
    """
    x = np.asarray(x)
    scale = np.asarray(scale)
    rank = x.ndim
    if rank == 0:
        raise KernelError("RMSNormalization needs X of rank >= 1.")
    axis = _axis(axis, rank)
    _check_broadcast(scale, "scale", x.shape)
    x2, owned = _rows_view(x, axis, _compute_dtype(stash_type))
    normalized, _, _ = standardize_rows(x2, epsilon, center=False, owned=owned)
    normalized = _round_to(_round_to(normalized, stash_type), x.dtype)
    return _scale_shift(normalized, x.shape, axis, scale.dtype, scale, None)


# --------------------------------------------------------------------------------------------
# InstanceNormalization, GroupNormalization
# --------------------------------------------------------------------------------------------


def _channel_param(value: np.ndarray, name: str, count: int, what: str) -> np.ndarray:
    value = np.asarray(value)
    if value.size != count or value.ndim > 1:
        raise KernelError(f"{name} has shape {list(value.shape)}, expected [{count}] (one value per {what}).")
    return value.reshape(count)


def _scale_shift_rows(normalized: np.ndarray, dtype: np.dtype, scale_rows: np.ndarray, bias_rows: np.ndarray) -> np.ndarray:
    """``normalized[r] * scale_rows[r] + bias_rows[r]`` in ``dtype`` (16-bit types: float32, rounded per operation)."""
    if dtype in _HALF:
        y = _round_to(normalized, dtype)
        y = _round_to(y * scale_rows.astype(_F32)[:, None], dtype)
        y += bias_rows.astype(_F32)[:, None]
        return y.astype(dtype)
    y = normalized if normalized.dtype == dtype else normalized.astype(dtype)
    y *= scale_rows.astype(dtype)[:, None]
    add_rows(y, bias_rows.astype(dtype))
    return y


def instance_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, epsilon: float = 1e-5) -> np.ndarray:
    """InstanceNormalization: ``y = scale[c] * (x - mean[n, c]) / sqrt(var[n, c] + epsilon) + B[c]``.

    Statistics over the spatial axes of each (instance, channel), in float32 for 16-bit inputs.
    """
    x = np.asarray(x)
    if x.ndim < 2:
        raise KernelError(f"InstanceNormalization needs input of rank >= 2 (N x C x ...), got rank {x.ndim}.")
    n, c = x.shape[:2]
    s = _channel_param(scale, "scale", c, "channel")
    b = _channel_param(bias, "B", c, "channel")
    x2, owned = _rows_view(x, 2, _compute_dtype(x.dtype))
    if x.dtype in _HALF:
        normalized, _, _ = standardize_rows(x2, epsilon, owned=owned)
        return _scale_shift_rows(normalized, x.dtype, np.tile(s, n), np.tile(b, n)).reshape(x.shape)
    # scale folds into the standardisation pass: (x - mean) * (inv_std * scale), then + B
    y, _, _ = standardize_rows(x2, epsilon, owned=owned, row_factor=np.tile(s, n))
    y = y if y.dtype == x.dtype else y.astype(x.dtype)
    add_rows(y, np.tile(b, n).astype(y.dtype, copy=False))
    return y.reshape(x.shape)


def group_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    num_groups: int,
    epsilon: float = 1e-5,
    stash_type: np.dtype | None = _F32,
    per_group_scale: bool = False,
) -> np.ndarray:
    """GroupNormalization: statistics per instance per group of ``C / num_groups`` channels.

    Version 21 (``per_group_scale=False``): scale and bias hold one value per channel, stage
    one runs in the stash precision and is cast to X's type before stage two. Version 18
    (deprecated, ``per_group_scale=True``): scale and bias hold one value per group.
    """
    x = np.asarray(x)
    if x.ndim < 2:
        raise KernelError(f"GroupNormalization needs X of rank >= 2 (N x C x ...), got rank {x.ndim}.")
    n, c = x.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise KernelError(f"num_groups is {num_groups}, expected a positive divisor of the {c} channels.")
    g = num_groups
    stash = stash_type if stash_type is not None else _compute_dtype(x.dtype)
    spatial = math.prod(x.shape[2:])
    x2, owned = _rows_view(x, 2, _compute_dtype(stash))
    normalized, _, _ = standardize_rows(x2.reshape(n * g, (c // g) * spatial), epsilon, owned=owned)
    normalized = _round_to(normalized, stash)
    if per_group_scale:
        s = _channel_param(scale, "scale", g, "group")
        b = _channel_param(bias, "bias", g, "group")
        y = _scale_shift_rows(normalized, x.dtype, np.tile(s, n), np.tile(b, n))
    else:
        s = _channel_param(scale, "scale", c, "channel")
        b = _channel_param(bias, "bias", c, "channel")
        y = _scale_shift_rows(normalized.reshape(n * c, spatial), x.dtype, np.tile(s, n), np.tile(b, n))
    return y.reshape(x.shape)


# --------------------------------------------------------------------------------------------
# LpNormalization, MeanVarianceNormalization
# --------------------------------------------------------------------------------------------


def lp_normalization(x: np.ndarray, axis: int = -1, p: int = 2) -> np.ndarray:
    """``x / ||x||_p`` along ``axis`` (p is 1 or 2); where the norm is zero the output is zero."""
    x = np.asarray(x)
    if x.ndim == 0:
        raise KernelError("LpNormalization needs an input of rank >= 1.")
    axis = _axis(axis, x.ndim)
    cdt = _compute_dtype(x.dtype)
    xc = x.astype(cdt, copy=False)
    if p == 1:
        norm = np.abs(xc).sum(axis=axis, keepdims=True)
    elif p == 2:
        norm = np.sqrt(np.square(xc).sum(axis=axis, keepdims=True))
    else:
        raise KernelError(f"p is {p}, expected 1 or 2.")
    safe = np.where(norm == 0, cdt.type(1), norm)
    y = np.divide(xc, safe)
    return y if y.dtype == x.dtype else y.astype(x.dtype)


_MVN_EPSILON = 1e-9  # the constant of the schema's function body, added to the standard deviation


def mean_variance_normalization(x: np.ndarray, axes: list[int] | tuple[int, ...] = (0, 2, 3)) -> np.ndarray:
    """MeanVarianceNormalization: ``(X - E[X]) / (sqrt(E[(X - E[X])**2]) + 1e-9)`` over ``axes``.

    The function body computes the variance as ``E[X**2] - E[X]**2``; onnxrt uses the equal,
    centred form, which cannot go negative through cancellation.
    """
    x = np.asarray(x)
    rank = x.ndim
    ax = tuple(sorted({_axis(int(a), rank, "axes value") for a in axes}))
    cdt = _compute_dtype(x.dtype)
    xc = x.astype(cdt, copy=False)
    mean = xc.mean(axis=ax, keepdims=True)
    d = xc - mean
    std = np.sqrt(np.mean(np.square(d), axis=ax, keepdims=True))
    std += cdt.type(_MVN_EPSILON)
    d /= std
    return d if d.dtype == x.dtype else d.astype(x.dtype)


# --------------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------------


@register("LayerNormalization", versions=(17,))
class LayerNormalization(OpRun):
    """LayerNormalization-17: Y, Mean and InvStdDev, stash_type precision for the statistics."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._stash = _stash_dtype(self.stash_type, self.node_label())

    def _run(self, X, Scale, B=None, attributes=None, verbose=0, fLOG=None):
        return layer_normalization(X, Scale, B, axis=self.axis, epsilon=self.epsilon, stash_type=self._stash)


@register("RMSNormalization", versions=(23,))
class RMSNormalization(OpRun):
    """RMSNormalization-23: Y in scale's type, stash_type precision for the statistics."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._stash = _stash_dtype(self.stash_type, self.node_label())

    def _run(self, X, scale, attributes=None, verbose=0, fLOG=None):
        return (rms_normalization(X, scale, axis=self.axis, epsilon=self.epsilon, stash_type=self._stash),)


@register("InstanceNormalization", versions=(1, 6, 22))
class InstanceNormalization(OpRun):
    """InstanceNormalization: 1 (consumed_inputs, ignored), 6, 22 (bfloat16)."""

    def _run(self, input, scale, B, attributes=None, verbose=0, fLOG=None):  # noqa: A002  (the spec's name)
        return (instance_normalization(input, scale, B, epsilon=self.epsilon),)


@register("GroupNormalization", versions=(18, 21))
class GroupNormalization(OpRun):
    """GroupNormalization: 18 (deprecated; scale and bias per group), 21 (per channel, stash_type)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._per_group = (self.since_version or 21) < 21
        self._stash = None if self._per_group else _stash_dtype(self.stash_type, self.node_label())
        if self.num_groups <= 0:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'num_groups' is {self.num_groups}, expected > 0.")

    def _run(self, X, scale, bias, attributes=None, verbose=0, fLOG=None):
        return (
            group_normalization(
                X, scale, bias, self.num_groups, epsilon=self.epsilon, stash_type=self._stash, per_group_scale=self._per_group
            ),
        )


@register("LpNormalization", versions=(1, 22))
class LpNormalization(OpRun):
    """LpNormalization: 1, 22 (bfloat16); p is 1 or 2."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if self.p not in (1, 2):
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'p' is {self.p}, expected 1 or 2.")

    def _run(self, input, attributes=None, verbose=0, fLOG=None):  # noqa: A002  (the spec's name)
        return (lp_normalization(input, axis=self.axis, p=self.p),)


@register("MeanVarianceNormalization", versions=(9, 13))
class MeanVarianceNormalization(OpRun):
    """MeanVarianceNormalization: 9, 13 (bfloat16)."""

    def _run(self, X, attributes=None, verbose=0, fLOG=None):
        return (mean_variance_normalization(X, axes=self.axes),)
