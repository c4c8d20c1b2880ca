"""Einsum (12, 28): Einstein summation over any number of operands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

_BLAS = (np.dtype(np.float32), np.dtype(np.float64))
#: above this many input elements numpy's contraction-order optimiser (and BLAS) pays off
_OPTIMIZE_FROM = 4096


def output_shape(equation: str, shapes: list[tuple[int, ...]]) -> tuple[int, ...] | None:
    """The output shape of an einsum ``equation`` over operands of ``shapes`` (spaces removed),
    or None when the equation does not parse against them (numpy then says why).

    A label's size is the largest of its sizes (1 broadcasts); ``...`` stands for the
    broadcast of the operands' remaining leading dimensions; without ``->`` the output is
    ``...`` followed by the labels seen once, in ASCII order.
    """
    lhs, arrow, rhs = equation.partition("->")
    terms = lhs.split(",")
    if len(terms) != len(shapes):
        return None
    sizes: dict[str, int] = {}
    counts: dict[str, int] = {}
    ellipses: list[tuple[int, ...]] = []
    for term, shape in zip(terms, shapes):
        labels = term.replace("...", "")
        if not labels.isalpha() and labels:
            return None
        n_ell = len(shape) - len(labels)
        if n_ell < 0 or (n_ell and "..." not in term):
            return None
        head = term.split("...")[0] if "..." in term else term
        dims = list(shape[: len(head)]) + list(shape[len(head) + n_ell :])
        ellipses.append(tuple(shape[len(head) : len(head) + n_ell]))
        for c, d in zip(labels, dims):
            sizes[c] = max(sizes.get(c, 0), int(d))
            counts[c] = counts.get(c, 0) + 1
    try:
        ell = np.broadcast_shapes(*ellipses)
    except ValueError:
        return None
    out = rhs if arrow else "..." + "".join(sorted(c for c, k in counts.items() if k == 1))
    if any(c not in sizes for c in out.replace("...", "")):
        return None
    head, _, tail = out.partition("...") if "..." in out else (out, "", "")
    return tuple(sizes[c] for c in head) + (ell if "..." in out else ()) + tuple(sizes[c] for c in tail)


def einsum(equation: str, *inputs: np.ndarray, check: Callable[[Any, Any], None] | None = None) -> np.ndarray:
    """numpy.einsum of the equation (spaces ignored; explicit ``->`` or implicit output in
    ASCII order, upper case before lower case; ``...`` broadcasting). float16/bfloat16
    are computed in float32 and rounded once; integers stay in their type (wrapping).
    ``check(shape, dtype)`` (the kernel's :meth:`OpRun.check_alloc`) sees the output shape
    before numpy computes it: small operands can ask for a large outer product."""
    eq = equation.replace(" ", "")
    if not inputs:
        raise KernelError("Einsum needs at least one input.")
    arrays = [np.asarray(x) for x in inputs]
    dtype = arrays[0].dtype
    if dtype not in _BLAS and dtype.kind not in "iu":
        arrays = [x.astype(np.float32) for x in arrays]
    if check is not None:
        shape = output_shape(eq, [x.shape for x in arrays])
        if shape is not None:
            check(shape, arrays[0].dtype)
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
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'equation' must be a non-empty string.")

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        return (einsum(self.equation, *inputs, check=self.check_alloc),)
