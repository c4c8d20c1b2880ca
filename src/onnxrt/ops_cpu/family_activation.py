"""Activation functions (LeakyRelu, Elu, Gelu, Shrink, PRelu...) as tables; Relu and Sigmoid live in family_unary."""

from __future__ import annotations

import math

import numpy as np
from . import _special

from ..errors import InvalidAttributeError, KernelError
from ._family import Spec, build_family, compute_in_float
from .family_unary import _sigmoid

# Every kernel is written for float32/float64 and wrapped by ``compute_in_float``: float16
# and bfloat16 are computed in float32 and rounded once (as onnxruntime does), integer
# inputs (Shrink) in float64 and truncated toward zero. These are the reference kernels:
# the spec's formulas, with numpy's expm1, logaddexp and scipy's erfc where the literal
# formula would cancel or overflow. The exponential ones (Elu, Selu, Celu, Softplus, Gelu,
# Mish, Swish) have fast paths in onnxrt/fastpaths/elementwise.py: _fastmath's chunked
# float32 kernels (numpy's expm1, log1p, logaddexp and scipy's erf are scalar loops, 10 to
# 30 times slower), compiled or as numpy polynomials, and float16 through the fast casts.


@compute_in_float
def _leaky_relu(x: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    # x < 0 ? alpha x : x is max(alpha x, x) for alpha <= 1 and min(alpha x, x) above: 9x
    # faster than np.where over a random mask, and the same values (numpy's maximum and
    # minimum return their second operand on ties, so x's signed zeros come through)
    y = x * x.dtype.type(alpha)
    if alpha == 0.0 or not math.isfinite(alpha):  # alpha * inf or inf * 0 would be NaN where x is kept
        return np.where(x < 0, y, x)
    return np.maximum(y, x, out=y) if alpha <= 1.0 else np.minimum(y, x, out=y)


@compute_in_float
def _elu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    # expm1 is exp(x) - 1 without the cancellation near 0; it overflows only where x > 0,
    # whose branch is not taken
    with np.errstate(over="ignore", invalid="ignore"):
        return np.where(x > 0, x, x.dtype.type(alpha) * np.expm1(x))


@compute_in_float
def _selu(x: np.ndarray, alpha: float = 1.67326319217681884765625, gamma: float = 1.05070102214813232421875) -> np.ndarray:
    dt = x.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.where(x > 0, x, dt(alpha) * np.expm1(x))
    y *= dt(gamma)
    return y


@compute_in_float
def _celu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    dt = x.dtype.type
    with np.errstate(all="ignore"):
        neg = np.expm1(x / dt(alpha))
        neg *= dt(alpha)
        np.minimum(neg, dt(0), out=neg)
    return np.maximum(x, dt(0)) + neg


@compute_in_float
def _hard_sigmoid(x: np.ndarray, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    dt = x.dtype.type
    y = x * dt(alpha)
    y += dt(beta)
    # one np.clip (vectorised, NaN kept) instead of np.maximum then np.minimum (3x slower
    # each); alpha x + beta is -0 only for beta = -0, where max(-0, 0) gave +0
    np.clip(y, dt(0), dt(1), out=y)
    if beta == 0.0 and math.copysign(1.0, beta) < 0:
        y += dt(0)
    return y


@compute_in_float
def _hard_swish(x: np.ndarray) -> np.ndarray:
    return _hard_sigmoid(x, alpha=1.0 / 6.0, beta=0.5) * x


@compute_in_float
def _softplus(x: np.ndarray) -> np.ndarray:
    # log(exp(x) + 1) computed as logaddexp(x, 0): no overflow for large x
    return np.logaddexp(x, x.dtype.type(0))


@compute_in_float
def _softsign(x: np.ndarray) -> np.ndarray:
    y = np.abs(x)
    y += x.dtype.type(1)
    return np.divide(x, y, out=y)


@compute_in_float
def _thresholded_relu(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > x.dtype.type(alpha), x, x.dtype.type(0))


def _gelu_plain(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Gelu 20: 0.5 x (1 + erf(x / sqrt 2)), or with approximate='tanh' 0.5 x (1 + tanh(u)),
    u = sqrt(2/pi) (x + 0.044715 x^3), for float32 and float64.

    Both are evaluated without the cancellation of 1 + erf or 1 + tanh for negative x:
    0.5 x erfc(-x / sqrt 2), and x / (1 + exp(-2u)) (the same function: one np.exp and
    no tanh, 1.6x faster). _fastmath.gelu computes the first for large float32 inputs (a fast path).
    """
    dt = x.dtype.type
    with np.errstate(over="ignore", invalid="ignore"):
        if approximate == "tanh":
            y = x * x
            y *= dt(-2.0 * math.sqrt(2.0 / math.pi) * 0.044715)
            y += dt(-2.0 * math.sqrt(2.0 / math.pi))
            y *= x
            np.exp(y, out=y)  # exp(-2u); overflow (x < -9.4 in float32) gives x / inf = -0
            y += dt(1)
            return np.divide(x, y, out=y)
        y = x * dt(-1.0 / math.sqrt(2.0))
        _special.erfc(y, out=y)
        y *= dt(0.5)  # before x: erfc <= 2, so x * 2 could overflow
        y *= x
        return y


_gelu = compute_in_float(_gelu_plain)


def _gelu_attributes(op, kw):
    approximate = kw.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise InvalidAttributeError(
            f"{op.node_label()}: attribute 'approximate' is {approximate!r}, expected 'none' or 'tanh'."
        )
    return {"approximate": approximate}


def _mish_plain(x: np.ndarray) -> np.ndarray:
    # x tanh(softplus(x)) = x n / (n + 2), n = e^x (e^x + 2): one np.exp, no tanh, no log
    # (10x faster than logaddexp and tanh), no cancellation; within 4 ulp in float32 (x
    # e^x's rounding for very negative x). Beyond x = 20 the ratio is 1 in float32 and
    # float64 alike, so the clip avoids overflow without changing results; mish(-inf) is
    # NaN (-inf * 0, as the spec's formula gives).
    dt = x.dtype.type
    e = np.clip(x, dt(-np.inf), dt(20))  # np.clip: 3x faster than np.minimum, keeps NaN
    np.exp(e, out=e)
    n = e + dt(2)
    n *= e
    np.add(n, dt(2), out=e)
    np.divide(n, e, out=n)  # <= 1: n * x cannot overflow
    with np.errstate(invalid="ignore"):  # -inf * 0
        n *= x
    return n


_mish = compute_in_float(_mish_plain)


def _swish_plain(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    # x * sigmoid(alpha * x), sigmoid as e / (1 + e) (within 4 ulp in float32)
    y = _sigmoid(x * x.dtype.type(alpha))
    with np.errstate(invalid="ignore"):  # -inf * 0 for alpha > 0
        y *= x
    return y


_swish = compute_in_float(_swish_plain)


@compute_in_float
def _shrink(x: np.ndarray, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    # integer inputs are computed in float64 and truncated: onnxruntime gives
    # Shrink(-5, lambd=1.5, bias=1.5) = trunc(-3.5) = -3 for int32
    dt = x.dtype.type
    y = np.where(x > dt(lambd), x - dt(bias), dt(0))
    return np.where(x < dt(-lambd), x + dt(bias), y)


ACTIVATIONS = [
    Spec("LeakyRelu", _leaky_relu, (1, 6, 16), with_attributes=True),
    Spec("Elu", _elu, (1, 6, 22), with_attributes=True),
    Spec("Selu", _selu, (1, 6, 22), with_attributes=True),
    Spec("Celu", _celu, (12, 28), with_attributes=True),
    Spec("HardSigmoid", _hard_sigmoid, (1, 6, 22), with_attributes=True),
    Spec("HardSwish", _hard_swish, (14, 22)),
    Spec("Softplus", _softplus, (1, 22)),
    Spec("Softsign", _softsign, (1, 22)),
    Spec("ThresholdedRelu", _thresholded_relu, (10, 22), with_attributes=True),
    Spec("Gelu", _gelu, (20,), with_attributes=True, prepare=_gelu_attributes),
    Spec("Mish", _mish, (18, 22)),
    Spec("Swish", _swish, (24,), with_attributes=True),
    Spec("Shrink", _shrink, (9,), with_attributes=True),
]

build_family(ACTIVATIONS, "unary", globals())


def _prelu(x: np.ndarray, slope: np.ndarray, channel_slope: bool = False) -> np.ndarray:
    """``x`` where x >= 0, ``slope * x`` elsewhere; slope broadcasts to X (unidirectional, opset 7+).

    Before opset 7 the slope is a scalar or one value per channel: a 1-D slope of
    length C multiplies X[:, c, ...] (the layout PyTorch exports at opset 6).
    """
    if channel_slope and slope.ndim == 1 and slope.size > 1 and x.ndim >= 2 and slope.shape[0] == x.shape[1]:
        slope = slope.reshape((-1,) + (1,) * (x.ndim - 2))
    try:
        ok = np.broadcast_shapes(x.shape, slope.shape) == x.shape
    except ValueError:
        ok = False
    if not ok:
        raise KernelError(f"slope of shape {list(slope.shape)} does not broadcast to X of shape {list(x.shape)}.")
    return np.where(x < 0, x * slope, x)


def _prelu_attributes(op, kw):
    return {"channel_slope": (op.since_version or 16) < 7}


build_family([Spec("PRelu", _prelu, (1, 6, 7, 9, 16), with_attributes=True, prepare=_prelu_attributes)], "any", globals())
