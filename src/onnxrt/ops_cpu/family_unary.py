"""Unary element-wise operators as a table: one row per operator, one line each."""

from __future__ import annotations

import numpy as np

from ._family import Spec, build_family


def _relu(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, x.dtype.type(0))


def _sigmoid(x: np.ndarray) -> np.ndarray:
    # 1 / (1 + exp(-x)) overflows for very negative x; the tanh form is exact and stable
    return (np.tanh(x * x.dtype.type(0.5)) + x.dtype.type(1)) * x.dtype.type(0.5)


UNARY = [
    Spec("Abs", np.abs, (1, 6, 13)),
    Spec("Neg", np.negative, (1, 6, 13)),
    Spec("Exp", np.exp, (1, 6, 13)),
    Spec("Sqrt", np.sqrt, (1, 6, 13)),
    Spec("Tanh", np.tanh, (1, 6, 13)),
    Spec("Relu", _relu, (1, 6, 13, 14)),
    Spec("Sigmoid", _sigmoid, (1, 6, 13)),
]

build_family(UNARY, "unary", globals())
