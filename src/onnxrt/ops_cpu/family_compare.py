"""Comparison and logical operators as a table: bool outputs, multidirectional broadcasting (and opset < 7 ``broadcast``/``axis``)."""

from __future__ import annotations

import numpy as np

from ._family import Spec, build_family

# Every comparison with a NaN operand is False (Equal, Greater, ...), as IEEE 754 and
# onnxruntime define it. Equal compares strings (object arrays of str) from opset 19.
COMPARE = [
    Spec("Equal", np.equal, (1, 7, 11, 13, 19)),
    Spec("Greater", np.greater, (1, 7, 9, 13)),
    Spec("GreaterOrEqual", np.greater_equal, (12, 16)),
    Spec("Less", np.less, (1, 7, 9, 13)),
    Spec("LessOrEqual", np.less_equal, (12, 16)),
    Spec("And", np.logical_and, (1, 7)),
    Spec("Or", np.logical_or, (1, 7)),
    Spec("Xor", np.logical_xor, (1, 7)),
]

build_family(COMPARE, "binary", globals())
