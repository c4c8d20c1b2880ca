"""Constant (1 to 25): a tensor from exactly one of the value attributes."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import InvalidAttributeError
from ..registry import register
from ._op import OpRun

# attribute -> conversion of its python value to the output tensor
_CONVERT = {
    "value": lambda v: np.asarray(v),
    "sparse_value": lambda v: np.asarray(v),
    "value_float": lambda v: np.array(v, dtype=np.float32),
    "value_floats": lambda v: np.array(v, dtype=np.float32).reshape(-1),
    "value_int": lambda v: np.array(v, dtype=np.int64),
    "value_ints": lambda v: np.array(v, dtype=np.int64).reshape(-1),
    "value_string": lambda v: np.array(v, dtype=object),
    "value_strings": lambda v: _strings(v),
}


def _strings(values: list[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def constant(**attributes: Any) -> np.ndarray:
    """The constant tensor described by exactly one non-None attribute of :data:`_CONVERT`."""
    given = [k for k in _CONVERT if attributes.get(k) is not None]
    if len(given) != 1:
        raise InvalidAttributeError(
            f"Constant needs exactly one of {list(_CONVERT)}, got {given or 'none'}."
        )
    return _CONVERT[given[0]](attributes[given[0]])


@register("Constant", versions=(1, 9, 11, 12, 13, 19, 21, 23, 24, 25))
class Constant(OpRun):
    """Constant: 1 (value), 11 (sparse_value), 12 (value_float(s)/int(s)/string(s)); later versions widen types.

    The tensor is built once, read-only; the engine copies it before handing it to a caller.
    """
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        try:
            value = constant(**self.atts_value)
        except InvalidAttributeError as e:
            raise InvalidAttributeError(f"{self.node_label()}: {e}") from None
        value.flags.writeable = False
        self._value = value

    def _run(self, attributes=None, verbose=0, fLOG=None):
        return (self._value,)
