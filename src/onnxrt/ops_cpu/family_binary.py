"""Binary element-wise operators as a table, with multidirectional broadcasting (and opset < 7 ``broadcast``/``axis``)."""

from __future__ import annotations

import numpy as np

from ._family import Spec, build_family


def _div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    if a.dtype.kind in "iu" and b.dtype.kind in "iu":
        # integer division truncates toward zero (C semantics, as onnxruntime does)
        q = np.floor_divide(a, b)
        fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
        return q + fix.astype(q.dtype)
    return np.divide(a, b)


BINARY = [
    Spec("Add", np.add, (1, 6, 7, 13, 14)),
    Spec("Sub", np.subtract, (1, 6, 7, 13, 14)),
    Spec("Mul", np.multiply, (1, 6, 7, 13, 14)),
    Spec("Div", _div, (1, 6, 7, 13, 14)),
]

build_family(BINARY, "binary", globals())
