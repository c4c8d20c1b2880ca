"""Numerics shared by the recurrent, attention and loss kernels: compute dtypes, stable softmax, sigmoid."""

from __future__ import annotations

import numpy as np
from scipy.special import expit


def compute_dtype(dtype: np.dtype) -> np.dtype:
    """The dtype a kernel computes in: float64 stays float64, every other float type uses float32.

    float16, bfloat16 and the float8 types have too few mantissa bits to accumulate a matrix
    product or a softmax; the kernels compute in float32 and round once at the end, which is
    what onnxruntime's CPU kernels do for float16 as well.
    """
    return np.dtype(np.float64) if np.dtype(dtype) == np.float64 else np.dtype(np.float32)


def as_compute(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` in ``dtype`` (no copy when it already is)."""
    return x if x.dtype == dtype else x.astype(dtype)


def softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """Softmax along ``axis``, shifted by the row maximum so that exp never overflows.

    A row whose entries are all ``-inf`` gives NaN (0/0), as the mathematical definition
    does; callers that need a zero row for it (Attention) apply their own guard.
    """
    m = np.max(x, axis=axis, keepdims=True)
    # a row of -inf has max -inf: shifting by it would give nan everywhere, shift by 0 instead
    m = np.where(np.isneginf(m), 0, m) if m.dtype.kind == "f" else m
    e = np.exp(x - m)
    e /= np.sum(e, axis=axis, keepdims=True)
    return e


def log_softmax(x: np.ndarray, axis: int = -1) -> np.ndarray:
    """``log(softmax(x))`` computed as ``x - max - log(sum(exp(x - max)))``: no log(0) for tiny probabilities."""
    m = np.max(x, axis=axis, keepdims=True)
    shifted = x - m
    return shifted - np.log(np.sum(np.exp(shifted), axis=axis, keepdims=True))


def sigmoid(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``1 / (1 + exp(-x))`` (scipy's expit: one pass, no overflow for large ``|x|``), in place with ``out``."""
    return expit(x, out=out) if out is not None else expit(x)
