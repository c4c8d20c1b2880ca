"""Numerics shared by the recurrent, attention and loss kernels: compute dtypes, stable log-softmax, sigmoid."""

from __future__ import annotations

import numpy as np
from . import _special


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a kernel computes in: float64 stays float64, every other float type uses float32.

    float16 and bfloat16 have too few mantissa bits to accumulate a matrix product or a sum;
    the kernels compute in float32 and round to the output type at the end (Attention also
    rounds between the steps of its function body, see there).
    """
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``log(softmax(x))`` computed as ``x - max - log(sum(exp(x - max)))``: no log(0) for tiny probabilities."""
    m = np.max(x, axis=axis, keepdims=True)
    shifted = x - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``1 / (1 + exp(-x))`` (scipy's expit: one pass, no overflow for large ``|x|``), in place with ``out``."""
    return _special.expit(x, out=out) if out is not None else _special.expit(x)
