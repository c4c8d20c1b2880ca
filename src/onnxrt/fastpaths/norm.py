"""Fast paths of BatchNormalization (inference), onnxrt's FusedBatchNormalization (+ Relu)
and LayerNormalization (reference kernels: onnxrt.ops_cpu.op_batch_normalization,
op_normalization, op_fused).

- ``compiled affine``: float32 BatchNormalization in inference mode over a spatial input,
  ``x * a + b`` per channel (the folded statistics) in one compiled pass instead of numpy's
  two, the fused Relu in the same pass; rows on the team for large inputs;
- ``compiled rows``: float32 LayerNormalization (float32 stash) with Scale/B varying along
  the normalised axes only, one compiled pass per row.
"""

from __future__ import annotations

import math

import numpy as np

from .. import native
from ..dispatch import fast_path
from ..errors import KernelError
from ..native.layout import AFFINE
from . import _fastmath as fm
from ..ops_cpu.op_normalization import _as_columns, _axis

_F32 = np.dtype(np.float32)

#: elements per part when the compiled scale-and-shift goes to the team (~15 us each)
AFFINE_TEAM_PART = 1 << 15


# -- BatchNormalization ------------------------------------------------------------------

def affine_compiled(x: np.ndarray, a: np.ndarray, b: np.ndarray, relu: bool) -> np.ndarray:
    """``x * a + b`` over a float32 (N, C, spatial...) input with ``a``/``b`` float32 per
    channel, then max(y, 0) when ``relu`` (-0 and NaN kept), in one compiled pass (about 2.5x
    numpy's two on 64x56x56); rows of the (N*C, spatial) view on the team or the pool. The
    same float32 operations as the reference (one product, one sum each, rounded once
    each: native.loops.affine_rows does not fuse them)."""
    k = native.kernels()
    n = x.shape[0]
    spatial_size = math.prod(x.shape[2:])
    x2 = np.ascontiguousarray(x).reshape(n * x.shape[1], spatial_size)
    y2 = np.empty(x2.shape, np.float32)
    at, bt = (a, b) if n == 1 else (np.tile(a, n), np.tile(b, n))
    at, bt = np.ascontiguousarray(at), np.ascontiguousarray(bt)

    def rows(lo: int, hi: int) -> None:
        k.affine_rows(x2[lo:hi], at[lo:hi], bt[lo:hi], y2[lo:hi], relu)

    args = AFFINE.pack(x=x2, a=at, b=bt, y=y2, rows=x2.shape[0], cols=x2.shape[1], relu=int(relu))
    if not native.team_split("affine_part", args, x2.size, max_parts=x2.shape[0], part_size=AFFINE_TEAM_PART,
                             cold_total=2 * fm.JIT_PART):
        native.split(x2.shape[0], rows, max(1, fm.JIT_PART // spatial_size))
    return y2.reshape(x.shape)


def _bn_applies(bn, x, *params) -> bool:
    """Inference on a float32 array of rank 3+ whose spatial size is above 1, five inputs."""
    return (not bn._training and bn._spatial and len(params) == 4 and type(x) is np.ndarray and x.dtype == _F32
            and x.ndim > 2 and x.size > 0 and math.prod(x.shape[2:]) > 1)


def _bn_affine(bn, x, params, relu: bool):
    a, b, finite, ac, bc = bn._fold(x, params)  # checks the parameters' shapes (raises as the reference)
    if not finite or ac.dtype != _F32:
        return None  # the spec's formula for an infinite fold: the reference
    return (affine_compiled(x, ac, bc, relu),)


@fast_path("BatchNormalization", "compiled affine", when=_bn_applies)
def bn_compiled_affine(op, x, *params):
    """float32 inference over a spatial input: the folded per-channel scale and shift in one compiled pass.

    Bit-exact against the reference (the same two roundings per element).
    """
    return _bn_affine(op, x, params, False)


def _fused_bn_applies(op, x, *params) -> bool:
    return op._act == "Relu" and _bn_applies(op._inner, x, *params)


@fast_path("FusedBatchNormalization", "compiled affine relu", when=_fused_bn_applies, domain="onnxrt")
def fused_bn_compiled_affine(op, x, *params):
    """BatchNormalization + Relu, float32 inference over a spatial input: scale, shift and Relu in one compiled pass.

    Bit-exact against the reference.
    """
    return _bn_affine(op._inner, x, params, True)


# -- LayerNormalization ------------------------------------------------------------------

def layer_norm_compiled(x: np.ndarray, axis: int, epsilon: float, s_cols: np.ndarray, b_cols: np.ndarray | None):
    """float32 LayerNormalization with per-column Scale/B as one compiled pass per row
    (statistics in float64; blocks of rows over the pool for large inputs)."""
    k = native.kernels()
    rows, cols = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
    x2 = np.ascontiguousarray(x).reshape(rows, cols)
    scale = np.ascontiguousarray(s_cols, dtype=_F32)
    bias = scale if b_cols is None else np.ascontiguousarray(b_cols, dtype=_F32)
    y = np.empty((rows, cols), _F32)
    mean = np.empty(rows, _F32)
    inv = np.empty(rows, _F32)

    def block(lo: int, hi: int) -> None:
        k.layer_norm_rows(x2[lo:hi], scale, bias, b_cols is not None, np.float32(epsilon), y[lo:hi], mean[lo:hi], inv[lo:hi])

    native.split(rows, block, max(1, (1 << 19) // max(cols, 1)))
    stat_shape = x.shape[:axis] + (1,) * (x.ndim - axis)
    return y.reshape(x.shape), mean.reshape(stat_shape), inv.reshape(stat_shape)


def _ln_columns(op, x, scale, bias=None):
    """(axis, Scale's columns, B's columns) when the compiled rows apply, else None."""
    if type(x) is not np.ndarray or x.dtype != _F32 or op._stash != _F32 or x.size == 0 or x.ndim == 0:
        return None
    if type(scale) is not np.ndarray or (bias is not None and type(bias) is not np.ndarray):
        return None
    try:
        axis = _axis(op.axis, x.ndim)
    except KernelError:
        return None
    s_cols = _as_columns(scale, x.shape, axis)
    b_cols = None if bias is None else _as_columns(bias, x.shape, axis)
    if s_cols is None or (bias is not None and b_cols is None):
        return None
    return axis, s_cols, b_cols


@fast_path("LayerNormalization", "compiled rows", when=lambda op, *xs: _ln_columns(op, *xs) is not None)
def ln_compiled_rows(op, x, scale, bias=None):
    """float32 input and stash, Scale/B varying along the normalised axes only: one compiled pass per row.

    Statistics in float64 (the reference's: float32 with a float64 variance), within a
    few float32 ulp of the reference.
    """
    axis, s_cols, b_cols = _ln_columns(op, x, scale, bias)
    return layer_norm_compiled(x, axis, op.epsilon, s_cols, b_cols)
