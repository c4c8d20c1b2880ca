"""Instance, Layer, Group, RMS, Lp and MeanVariance normalisations, sharing one statistics helper."""

from __future__ import annotations

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


def standardize_rows(x2: np.ndarray, epsilon: float, center: bool = True) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Row statistics of a 2-D float32/float64 array: ``(normalized, mean, inv_std)``.

    ``normalized = (x - mean) * inv_std`` with ``inv_std = 1 / sqrt(var + epsilon)``, the
    variance being the population one computed on the centred values (two passes, no
    cancellation). With ``center=False`` (RMS normalisation) nothing is subtracted and
    ``var`` is the mean of the squares. ``normalized`` is a new array (callers modify it).
    """
    rows, cols = x2.shape
    if cols == 0:
        empty = np.zeros(rows, dtype=x2.dtype)
        return np.empty_like(x2), empty, np.full(rows, 1.0 / np.sqrt(epsilon), dtype=x2.dtype)
    if center:
        mean = x2.mean(axis=1)
        d = np.subtract(x2, mean[:, None])
    else:
        mean = np.zeros(rows, dtype=x2.dtype)
        d = x2.copy()
    # einsum sums the squares row by row without a temporary of the tensor's size
    var = np.einsum("ij,ij->i", d, d) / x2.dtype.type(cols)
    inv_std = 1.0 / np.sqrt(var + x2.dtype.type(epsilon))
    d *= inv_std[:, None]
    return d, mean, inv_std


def _scale_shift(normalized: np.ndarray, dtype: np.dtype, scale: np.ndarray | None, bias: np.ndarray | None) -> np.ndarray:
    """Stage two, ``normalized * scale + bias`` in ``dtype`` (computed in float32 for 16-bit types, one rounding per operation)."""
    if dtype in _HALF:
        y = _round_to(normalized, dtype)
        if scale is not None:
            y = _round_to(y * np.asarray(scale).astype(_F32), dtype)
        if bias is not None:
            y = y + np.asarray(bias).astype(_F32)
        return y.astype(dtype)
    y = normalized if normalized.dtype == dtype else normalized.astype(dtype)
    if scale is not None:
        y *= np.asarray(scale, dtype=dtype)
    if bias is not None:
        y += np.asarray(bias, dtype=dtype)
    return y


def _check_broadcast(value: np.ndarray | None, name: str, shape: tuple[int, ...]) -> None:
    """Unidirectional broadcasting: ``value`` must broadcast to ``shape`` without changing it."""
    if value is None:
        return
    try:
        ok = np.broadcast_shapes(np.shape(value), shape) == tuple(shape)
    except ValueError:
        ok = False
    if not ok:
        raise KernelError(f"{name} of shape {list(np.shape(value))} does not broadcast to X's shape {list(shape)}.")


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
    (float16/bfloat16 stashes compute in float32 and round the statistics), and the result is
    cast to X's type; stage two multiplies by Scale and adds B (both unidirectionally
    broadcast) in X's type. Mean and InvStdDev have X's leading dimensions followed by ones,
    and the stash type.
    """
    x = np.asarray(x)
    rank = x.ndim
    if rank == 0:
        raise KernelError("LayerNormalization needs X of rank >= 1.")
    axis = _axis(axis, rank)
    _check_broadcast(scale, "Scale", x.shape)
    _check_broadcast(bias, "B", x.shape)
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    cols = int(np.prod(x.shape[axis:], dtype=np.int64))
    cdt = _compute_dtype(stash_type)
    x2 = x.astype(cdt, copy=False).reshape(rows, cols)
    normalized, mean, inv_std = standardize_rows(x2, epsilon)
    normalized = _round_to(normalized, stash_type)
    y = _scale_shift(normalized.reshape(x.shape), x.dtype, scale, bias)
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
    rows = int(np.prod(x.shape[:axis], dtype=np.int64))
    cols = int(np.prod(x.shape[axis:], dtype=np.int64))
    cdt = _compute_dtype(stash_type)
    x2 = x.astype(cdt, copy=False).reshape(rows, cols)
    normalized, _, _ = standardize_rows(x2, epsilon, center=False)
    normalized = _round_to(_round_to(normalized, stash_type), x.dtype)
    return _scale_shift(normalized.reshape(x.shape), scale.dtype, scale, None)


# --------------------------------------------------------------------------------------------
# InstanceNormalization, GroupNormalization
# --------------------------------------------------------------------------------------------


def _channel_param(value: np.ndarray, name: str, count: int, what: str) -> np.ndarray:
    value = np.asarray(value)
    if value.size != count or value.ndim > 1:
        raise KernelError(f"{name} has shape {list(value.shape)}, expected [{count}] (one value per {what}).")
    return value.reshape(count)


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
    cdt = _compute_dtype(x.dtype)
    spatial = int(np.prod(x.shape[2:], dtype=np.int64))
    x3 = x.astype(cdt, copy=False).reshape(n * c, spatial)
    normalized, _, _ = standardize_rows(x3, epsilon)
    normalized = normalized.reshape(n, c, spatial)
    y = _scale_shift(normalized, x.dtype, s.reshape(1, c, 1), b.reshape(1, c, 1))
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
    cdt = _compute_dtype(stash)
    spatial = int(np.prod(x.shape[2:], dtype=np.int64))
    x2 = x.astype(cdt, copy=False).reshape(n * g, (c // g) * spatial)
    normalized, _, _ = standardize_rows(x2, epsilon)
    normalized = _round_to(normalized, stash)
    if per_group_scale:
        s = _channel_param(scale, "scale", g, "group").reshape(1, g, 1)
        b = _channel_param(bias, "bias", g, "group").reshape(1, g, 1)
        normalized = normalized.reshape(n, g, (c // g) * spatial)
    else:
        s = _channel_param(scale, "scale", c, "channel").reshape(1, c, 1)
        b = _channel_param(bias, "bias", c, "channel").reshape(1, c, 1)
        normalized = normalized.reshape(n, c, spatial)
    return _scale_shift(normalized, x.dtype, s, b).reshape(x.shape)


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
        self._stash = _stash_dtype(self.stash_type, self._node_label())

    def _run(self, X, Scale, B=None, attributes=None, verbose=0, fLOG=None):
        return layer_normalization(X, Scale, B, axis=self.axis, epsilon=self.epsilon, stash_type=self._stash)


@register("RMSNormalization", versions=(23,))
class RMSNormalization(OpRun):
    """RMSNormalization-23: Y in scale's type, stash_type precision for the statistics."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._stash = _stash_dtype(self.stash_type, self._node_label())

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
        self._stash = None if self._per_group else _stash_dtype(self.stash_type, self._node_label())
        if self.num_groups <= 0:
            raise InvalidAttributeError(f"{self._node_label()}: attribute 'num_groups' is {self.num_groups}, expected > 0.")

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
            raise InvalidAttributeError(f"{self._node_label()}: attribute 'p' is {self.p}, expected 1 or 2.")

    def _run(self, input, attributes=None, verbose=0, fLOG=None):  # noqa: A002  (the spec's name)
        return (lp_normalization(input, axis=self.axis, p=self.p),)


@register("MeanVarianceNormalization", versions=(9, 13))
class MeanVarianceNormalization(OpRun):
    """MeanVarianceNormalization: 9, 13 (bfloat16)."""

    def _run(self, X, attributes=None, verbose=0, fLOG=None):
        return (mean_variance_normalization(X, axes=self.axes),)
