"""BatchNormalization (1, 6, 7, 9, 14, 15): inference with folded statistics, and training mode."""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun
from .op_normalization import add_cols, add_rows

_F32 = np.dtype(np.float32)
_F64 = np.dtype(np.float64)


def _compute_dtype(dtype: np.dtype) -> np.dtype:
    # float16/bfloat16 statistics and products run in float32 (BatchNormalization-15 text)
    return _F64 if dtype == _F64 else _F32


def _check_rank(x: np.ndarray) -> None:
    if x.ndim < 2:
        raise KernelError(f"BatchNormalization needs X of rank >= 2 (N x C x ...), got rank {x.ndim}.")


def _check_param(value: np.ndarray, name: str, x: np.ndarray, spatial: bool) -> np.ndarray:
    value = np.asarray(value)
    expected = (x.shape[1],) if spatial else x.shape[1:]
    if value.shape != expected and value.size != int(np.prod(expected)):
        raise KernelError(f"{name} has shape {list(value.shape)}, expected {list(expected)} for X of shape {list(x.shape)}.")
    return value


def _apply(x: np.ndarray, a: np.ndarray, b: np.ndarray, spatial: bool, relu: bool = False) -> np.ndarray:
    """``x * a + b`` with ``a`` and ``b`` per channel (per activation when not ``spatial``), in two
    vectorized passes, returned in x's dtype; then ``max(y, 0)`` when ``relu`` (a fused
    BatchNormalization + Relu; -0 and NaN kept, as Relu keeps them).

    The tensor is viewed as a C-contiguous matrix whose rows share one ``a`` and one ``b``
    ((N*C, spatial) per channel): the rows are scaled and the shift added as a BLAS rank-1
    update done in place. The reference kernel; float32 inference's one compiled pass (the
    Relu in the same pass) is a fast path (onnxrt.fastpaths.norm).
    """
    if x.size == 0:  # nothing to scale (the (rows, cols) views below need a non-empty tensor)
        return np.empty(x.shape, dtype=x.dtype)
    cdt = _compute_dtype(x.dtype)
    n = x.shape[0]
    xc = x.astype(cdt, copy=False, order="C")
    a = a.astype(cdt).reshape(-1)
    b = b.astype(cdt).reshape(-1)
    spatial_size = math.prod(x.shape[2:])
    if spatial and spatial_size > 1:
        x2 = xc.reshape(n * x.shape[1], spatial_size)
        # einsum scales rows a little faster than broadcasting a (rows, 1) column
        y2 = np.einsum("ij,i->ij", x2, np.tile(a, n))
        add_rows(y2, np.tile(b, n))
    else:
        # one value per column of the (N, C * spatial) matrix
        x2 = xc.reshape(n, -1)
        y2 = np.multiply(x2, a[None, :], out=None if xc is x else x2)
        add_cols(y2, b)
    if relu:
        np.maximum(y2, y2.dtype.type(0), out=y2)
    y = y2.reshape(x.shape)
    return y if y.dtype == x.dtype else y.astype(x.dtype)


def _apply_folded(
    x: np.ndarray, a: np.ndarray, b: np.ndarray, params: tuple, epsilon: float, spatial: bool, relu: bool = False,
    finite: bool | None = None,
) -> np.ndarray:
    """``x * a + b``, or the spec's formula itself when the fold is not finite: an infinite
    scale makes ``b = B - mean * a`` infinite and ``x * a + b`` inf - inf = NaN where
    ``(x - mean) * a + B`` is +-inf (found by tests/fuzz). ``finite``: whether a and b are
    finite, when the caller knows."""
    if finite if finite is not None else (np.isfinite(a).all() and np.isfinite(b).all()):
        return _apply(x, a, b, spatial, relu)
    cdt = _compute_dtype(x.dtype)
    scale, bias, mean, var = (np.asarray(_check_param(p, n, x, spatial)).astype(cdt) for p, n in zip(params, ("scale", "B", "mean", "var")))
    shape = ((1, -1) + (1,) * (x.ndim - 2)) if spatial else (1,) + x.shape[1:]
    scale, bias, mean, var = (p.reshape(shape) for p in (scale, bias, mean, var))
    with np.errstate(invalid="ignore", over="ignore"):
        y = (x.astype(cdt) - mean) / np.sqrt(var + cdt.type(epsilon)) * scale + bias
    if relu:
        np.maximum(y, cdt.type(0), out=y)
    return y.astype(x.dtype, copy=False)


def batch_normalization(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    epsilon: float = 1e-5,
    spatial: bool = True,
) -> np.ndarray:
    """Inference: ``Y = (X - mean) / sqrt(var + epsilon) * scale + B``.

    The statistics fold into one scale ``a = scale / sqrt(var + epsilon)`` and one shift
    ``b = B - mean * a`` (computed in float64, they are vectors of length C), so Y costs two
    vectorized passes. ``spatial=False`` (versions 1 to 7) gives every activation its own
    statistics: the parameters then have the shape of X without its batch dimension.
    """
    x = np.asarray(x)
    _check_rank(x)
    a, b = fold_statistics(x, scale, bias, mean, var, epsilon, spatial)
    return _apply_folded(x, a, b, (scale, bias, mean, var), epsilon, spatial)


def fold_statistics(
    x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray, var: np.ndarray, epsilon: float, spatial: bool
) -> tuple[np.ndarray, np.ndarray]:
    """``a = scale / sqrt(var + epsilon)`` and ``b = B - mean * a``, in float64, after checking the shapes."""
    s, bb, m, v = (_check_param(p, n, x, spatial).astype(_F64) for p, n in ((scale, "scale"), (bias, "B"), (mean, "mean"), (var, "var")))
    a = s / np.sqrt(v + epsilon)
    return a, bb - m * a


def batch_normalization_training(
    x: np.ndarray,
    scale: np.ndarray,
    bias: np.ndarray,
    mean: np.ndarray,
    var: np.ndarray,
    epsilon: float = 1e-5,
    momentum: float = 0.9,
    spatial: bool = True,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Training mode: normalise with the batch statistics and update the running ones.

    Returns ``Y, running_mean, running_var, current_mean, current_var`` where
    ``running = input * momentum + current * (1 - momentum)`` and ``current_var`` is the
    population variance (divided by N, not N - 1) over every axis but the channel one (every
    axis but the batch one when ``spatial`` is false). Statistics are computed in float32 for
    16-bit inputs (float64 for double); running statistics keep the type of ``mean``.
    """
    x = np.asarray(x)
    _check_rank(x)
    mean = _check_param(mean, "mean", x, spatial)
    var = _check_param(var, "var", x, spatial)
    s = _check_param(scale, "scale", x, spatial).astype(_F64)
    bb = _check_param(bias, "B", x, spatial).astype(_F64)
    cdt = _compute_dtype(x.dtype)
    xc = x.astype(cdt, copy=False)
    axes = (0,) + tuple(range(2, x.ndim)) if spatial else (0,)
    cur_mean = xc.mean(axis=axes, dtype=cdt)
    cur_var = xc.var(axis=axes, dtype=cdt)
    a = s.reshape(cur_mean.shape) / np.sqrt(cur_var.astype(_F64) + epsilon)
    b = bb.reshape(cur_mean.shape) - cur_mean.astype(_F64) * a
    y = _apply(x, a, b, spatial)
    out_dt = mean.dtype
    mom = float(momentum)
    run_mean = (mean.astype(_F64).reshape(cur_mean.shape) * mom + cur_mean.astype(_F64) * (1.0 - mom)).astype(out_dt)
    run_var = (var.astype(_F64).reshape(cur_var.shape) * mom + cur_var.astype(_F64) * (1.0 - mom)).astype(out_dt)
    return (
        y,
        run_mean.reshape(mean.shape),
        run_var.reshape(var.shape),
        cur_mean.astype(out_dt).reshape(mean.shape),
        cur_var.astype(out_dt).reshape(var.shape),
    )


@register("BatchNormalization", versions=(1, 6, 7, 9, 14, 15))
class BatchNormalization(OpRun):
    """BatchNormalization: 1 (consumed_inputs), 6 (is_test, spatial), 7 (no is_test), 9 (no spatial),
    14 (training_mode attribute, bfloat16, running statistics of their own type), 15 (scale/B types).

    Training or inference: from version 14 the ``training_mode`` attribute decides; versions 1 and 6
    train when ``is_test`` is 0; versions 7 and 9, which have no attribute, train when the node
    asks for more than Y (output case #1 of the spec). In training mode versions before 14 return
    Y, mean, var, saved_mean, saved_var, where saved_mean and saved_var are the batch mean and the
    batch (population) variance; from 14 Y, running_mean, running_var.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        since = self.since_version or 15
        self._spatial = bool(getattr(self, "spatial", 1)) if since < 9 else True
        n_outputs = sum(1 for o in onnx_node.output if o)
        if since >= 14:
            self._training = bool(self.training_mode)
        elif since >= 7:
            self._training = n_outputs > 1
        else:
            self._training = not bool(self.is_test)
        self._n_outputs = 3 if since >= 14 else 5
        #: (inputs, (a, b)) of the last inference run whose statistics were read-only (initializers)
        self._folded: tuple[tuple[np.ndarray, ...], tuple] | None = None
        self._fold_kept = False  # the four statistics are model constants (set_const_inputs)

    def set_const_inputs(self, positions) -> None:
        super().set_const_inputs(positions)
        self._fold_kept = {1, 2, 3, 4} <= self.const_inputs

    def _fold(self, x, params):
        # The model's constants reach the kernel as the same immutable arrays on every run:
        # their fold is computed once. Feeds (which a caller may change in place, read-only
        # views included) are folded on each run.
        # Returns (a, b, whether both are finite, a and b in x's compute type).
        cached = self._folded
        if cached is not None and all(p is q for p, q in zip(params, cached[0])):
            return cached[1]
        a, b = fold_statistics(x, *params, self.epsilon, self._spatial)
        cdt = _compute_dtype(x.dtype)
        folded = (a, b, bool(np.isfinite(a).all() and np.isfinite(b).all()), a.astype(cdt), b.astype(cdt))
        if self._fold_kept:
            self._folded = (params, folded)
        return folded

    def infer(self, x, scale, B, mean, var, relu: bool = False) -> np.ndarray:
        """Inference-mode output, followed by Relu when ``relu`` (FusedBatchNormalization)."""
        x = np.asarray(x)
        _check_rank(x)
        a, b, finite, ac, bc = self._fold(x, (scale, B, mean, var))
        if finite and ac.dtype == _compute_dtype(x.dtype):
            return _apply(x, ac, bc, self._spatial, relu)
        return _apply_folded(x, a, b, (scale, B, mean, var), self.epsilon, self._spatial, relu, finite)

    def _run(self, x, scale, B, mean, var, attributes=None, verbose=0, fLOG=None):
        if not self._training:
            return (self.infer(x, scale, B, mean, var),)
        res = batch_normalization_training(
            x, scale, B, mean, var, epsilon=self.epsilon, momentum=self.momentum, spatial=self._spatial
        )
        return res[: self._n_outputs]
