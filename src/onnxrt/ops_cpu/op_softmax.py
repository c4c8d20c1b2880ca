"""Softmax, LogSoftmax and Hardmax (1, 11: over the input coerced to 2-D at ``axis``; 13: along ``axis``)."""

from __future__ import annotations

import math

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

_NATIVE = frozenset(np.dtype(t) for t in (np.float32, np.float64))


def _axis(axis: int, rank: int) -> int:
    if not -rank <= axis < rank:
        raise KernelError(f"axis {axis} is out of range for an input of rank {rank} (expected [-{rank}, {rank - 1}]).")
    return axis + rank if axis < 0 else axis


def _softmax_native(x: np.ndarray, axis: int, log: bool) -> np.ndarray:
    """The reference kernel of Softmax/LogSoftmax along ``axis`` (fast paths:
    onnxrt.fastpaths.softmax)."""
    # subtracting the maximum makes exp() overflow-free; the row holding the maximum sums to >= 1
    y = np.subtract(x, np.max(x, axis=axis, keepdims=True))
    if log:
        e = np.exp(y)
        s = np.sum(e, axis=axis, keepdims=True)
        np.log(s, out=s)
        return np.subtract(y, s, out=y)
    np.exp(y, out=y)
    s = np.sum(y, axis=axis, keepdims=True)
    return np.divide(y, s, out=y)


def _hardmax_native(x: np.ndarray, axis: int, log: bool = False) -> np.ndarray:
    # the first maximum of each lane gets 1 (argmax returns the first occurrence)
    idx = np.expand_dims(np.argmax(x, axis=axis), axis)
    y = np.zeros(x.shape, dtype=x.dtype)
    np.put_along_axis(y, idx, x.dtype.type(1), axis=axis)
    return y


def _apply(kernel, x: np.ndarray, axis: int, coerce_2d: bool, log: bool = False) -> np.ndarray:
    """Run ``kernel`` along ``axis`` (or over the 2-D coercion of opsets 1 and 11).

    Softmax and LogSoftmax compute in the input's type, float16 and bfloat16 included:
    Softmax-13's function body defines them as Exp, ReduceSum and Div in T, rounding
    after each step, and the conformance data (attention fp16/bf16 cases) follows it.
    onnxruntime computes float16 in float32 and rounds once, which differs by up to
    about 2 ulp. Hardmax only compares, in float32 for the ml_dtypes types.
    """
    if x.ndim == 0:
        raise KernelError("input must have rank >= 1.")
    axis = _axis(axis, x.ndim)
    if x.size == 0:
        return x.copy()
    dt = x.dtype
    work = x if dt in _NATIVE or kernel is _softmax_native else x.astype(np.float32)
    if coerce_2d:
        # [a_0 * ... * a_{k-1}, a_k * ... * a_{n-1}]: the operation runs over the whole trailing block
        shape = work.shape
        work = work.reshape(math.prod(shape[:axis]), math.prod(shape[axis:]))
        y = kernel(work, 1, log).reshape(shape)
    else:
        y = kernel(work, axis, log)
    return y if y.dtype == dt else y.astype(dt)


def softmax(x: np.ndarray, axis: int = -1, coerce_2d: bool = False) -> np.ndarray:
    """exp(x) / sum(exp(x)) along ``axis``, in the input's float type (see :func:`_apply`)."""
    return _apply(_softmax_native, x, axis, coerce_2d)


def log_softmax(x: np.ndarray, axis: int = -1, coerce_2d: bool = False) -> np.ndarray:
    """x - log(sum(exp(x))) along ``axis``, computed with the maximum subtracted first."""
    return _apply(_softmax_native, x, axis, coerce_2d, log=True)


def hardmax(x: np.ndarray, axis: int = -1, coerce_2d: bool = False) -> np.ndarray:
    """1 at the first maximum along ``axis``, 0 elsewhere, in the input's type."""
    return _apply(_hardmax_native, x, axis, coerce_2d)


class _AxisOp(OpRun):
    _kernel = staticmethod(softmax)
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if not isinstance(self.axis, int):
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'axis' must be an integer, got {self.axis!r}.")
        self._coerce_2d = (self.since_version or 13) < 13

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (type(self)._kernel(x, self.axis, self._coerce_2d),)


@register("Softmax", versions=(1, 11, 13))
class Softmax(_AxisOp):
    """Softmax: 1 and 11 (input coerced to 2-D at axis, default 1), 13 (along axis, default -1; bfloat16)."""

    _kernel = staticmethod(softmax)


@register("LogSoftmax", versions=(1, 11, 13))
class LogSoftmax(_AxisOp):
    """LogSoftmax: 1 and 11 (input coerced to 2-D at axis, default 1), 13 (along axis, default -1; bfloat16)."""

    _kernel = staticmethod(log_softmax)


@register("Hardmax", versions=(1, 11, 13))
class Hardmax(_AxisOp):
    """Hardmax: 1 and 11 (input coerced to 2-D at axis, default 1), 13 (along axis, default -1; bfloat16)."""

    _kernel = staticmethod(hardmax)
