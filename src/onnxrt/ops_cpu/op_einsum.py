"""Einsum (12, 28): Einstein summation over any number of operands."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

_BLAS = (np.dtype(np.float32), np.dtype(np.float64))
#: above this many input elements numpy's contraction-order optimiser (and BLAS) pays off
_OPTIMIZE_FROM = 4096


def einsum(equation: str, *inputs: np.ndarray) -> np.ndarray:
    """numpy.einsum of the equation (spaces ignored; explicit ``->`` or implicit output in
    ASCII order, upper case before lower case; ``...`` broadcasting). float16/bfloat16
    are computed in float32 and rounded once; integers stay in their type (wrapping)."""
    eq = equation.replace(" ", "")
    if not inputs:
        raise KernelError("Einsum needs at least one input.")
    arrays = [np.asarray(x) for x in inputs]
    dtype = arrays[0].dtype
    if dtype not in _BLAS and dtype.kind not in "iu":
        arrays = [x.astype(np.float32) for x in arrays]
    optimize = len(arrays) > 1 and sum(x.size for x in arrays) >= _OPTIMIZE_FROM
    try:
        out = np.einsum(eq, *arrays, optimize=optimize)
    except ValueError as e:
        shapes = ", ".join(str(list(x.shape)) for x in arrays)
        raise KernelError(f"equation {equation!r} does not fit the inputs of shapes {shapes}: {e}") from e
    return np.asarray(out).astype(dtype, copy=False)


@register("Einsum", versions=(12, 28))
class Einsum(OpRun):
    """Einsum: 12, 28 (bfloat16)."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if not isinstance(self.equation, str) or not self.equation.replace(" ", ""):
            raise InvalidAttributeError(f"{self._node_label()}: attribute 'equation' must be a non-empty string.")

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        return (einsum(self.equation, *inputs),)
