"""Activation functions (LeakyRelu, Elu, Gelu, Shrink, PRelu...) as tables; Relu and Sigmoid live in family_unary."""

from __future__ import annotations

import math

import numpy as np
import scipy.special

from ..errors import InvalidAttributeError, KernelError
from . import _fastmath as fm
from ._family import Spec, build_family, compute_in_float
from .family_unary import _sigmoid

# Every kernel is written for float32/float64 and wrapped by ``compute_in_float``: float16
# and bfloat16 are computed in float32 and rounded once (as onnxruntime does), integer
# inputs (Shrink) in float64 and truncated toward zero. The exponential ones (Elu, Selu,
# Celu, Softplus, Gelu, Mish, Swish) run _fastmath's chunked float32 kernels from
# fm.MIN_SIZE elements on (float16 and bfloat16 through float32): numpy's expm1, log1p,
# logaddexp and scipy's erf are scalar loops, 10 to 30 times slower.


@compute_in_float
def _leaky_relu(x: np.ndarray, alpha: float = 0.01) -> np.ndarray:
    return np.where(x < 0, x * x.dtype.type(alpha), x)


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
    np.maximum(y, dt(0), out=y)
    return np.minimum(y, dt(1), out=y)


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


@compute_in_float
def _gelu(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    """Gelu 20: 0.5 x (1 + erf(x / sqrt 2)), or with approximate='tanh' 0.5 x (1 + tanh(u)),
    u = sqrt(2/pi) (x + 0.044715 x^3).

    Both are evaluated without the cancellation of 1 + erf or 1 + tanh for negative x:
    0.5 x erfc(-x / sqrt 2), and x / (1 + exp(-2u)) (the same function); fm.gelu and
    fm.gelu_tanh compute the same values in float32 chunks for large inputs.
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
        scipy.special.erfc(y, out=y)
        y *= dt(0.5)  # before x: erfc <= 2, so x * 2 could overflow
        y *= x
        return y


def _gelu_fast(x: np.ndarray, approximate: str = "none") -> np.ndarray:
    return fm.gelu_tanh(x) if approximate == "tanh" else fm.gelu(x)


def _gelu_attributes(op, kw):
    approximate = kw.get("approximate", "none")
    if approximate not in ("none", "tanh"):
        raise InvalidAttributeError(
            f"{op._node_label()}: attribute 'approximate' is {approximate!r}, expected 'none' or 'tanh'."
        )
    return {"approximate": approximate}


@compute_in_float
def _mish(x: np.ndarray) -> np.ndarray:
    # x tanh(softplus(x)) = x n / (n + 2), n = e^x (e^x + 2): no tanh, no log, no cancellation
    # (fm.mish's formula); beyond x = 20 the ratio is 1 in float32 and float64 alike
    dt = x.dtype.type
    e = np.exp(np.minimum(x, dt(20)))
    n = e + dt(2)
    n *= e
    e = n + dt(2)
    np.divide(n, e, out=n)
    n *= x
    return n


@compute_in_float
def _swish(x: np.ndarray, alpha: float = 1.0) -> np.ndarray:
    # x * sigmoid(alpha * x)
    y = _sigmoid(x * x.dtype.type(alpha))
    y *= x
    return y


def _finite(*values: float) -> bool:
    return all(math.isfinite(v) for v in values)


def _elu_fast(x: np.ndarray, alpha: float = 1.0) -> np.ndarray | None:
    return fm.elu(x, alpha) if _finite(alpha) else None


def _selu_fast(x: np.ndarray, alpha: float = 1.67326319217681884765625, gamma: float = 1.05070102214813232421875) -> np.ndarray | None:
    return fm.selu(x, alpha, gamma) if _finite(alpha, gamma) else None


def _celu_fast(x: np.ndarray, alpha: float = 1.0) -> np.ndarray | None:
    # the clip to x / alpha <= 0 holds for alpha > 0 only; other values take the plain formula
    return fm.celu(x, alpha) if _finite(alpha) and alpha > 0 else None


def _swish_fast(x: np.ndarray, alpha: float = 1.0) -> np.ndarray | None:
    return fm.swish(x, alpha) if _finite(alpha) else None


@compute_in_float
def _shrink(x: np.ndarray, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    # integer inputs are computed in float64 and truncated: onnxruntime gives
    # Shrink(-5, lambd=1.5, bias=1.5) = trunc(-3.5) = -3 for int32
    dt = x.dtype.type
    y = np.where(x > dt(lambd), x - dt(bias), dt(0))
    return np.where(x < dt(-lambd), x + dt(bias), y)


ACTIVATIONS = [
    Spec("LeakyRelu", _leaky_relu, (1, 6, 16), with_attributes=True),
    Spec("Elu", fm.float_kernel(_elu_fast, _elu), (1, 6, 22), with_attributes=True),
    Spec("Selu", fm.float_kernel(_selu_fast, _selu), (1, 6, 22), with_attributes=True),
    Spec("Celu", fm.float_kernel(_celu_fast, _celu), (12, 28), with_attributes=True),
    Spec("HardSigmoid", _hard_sigmoid, (1, 6, 22), with_attributes=True),
    Spec("HardSwish", _hard_swish, (14, 22)),
    Spec("Softplus", fm.float_kernel(fm.softplus, _softplus), (1, 22)),
    Spec("Softsign", _softsign, (1, 22)),
    Spec("ThresholdedRelu", _thresholded_relu, (10, 22), with_attributes=True),
    Spec("Gelu", fm.float_kernel(_gelu_fast, _gelu), (20,), with_attributes=True, prepare=_gelu_attributes),
    Spec("Mish", fm.float_kernel(fm.mish, _mish), (18, 22)),
    Spec("Swish", fm.float_kernel(_swish_fast, _swish), (24,), with_attributes=True),
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
