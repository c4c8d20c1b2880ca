"""MaxUnpool (9, 11, 22): the values of a max pooling put back at their flat indices, zeros elsewhere."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from ..registry import register
from ._conv_common import explicit_pads, spatial_attr
from ._op import OpRun


def max_unpool(
    x: np.ndarray,
    indices: np.ndarray,
    output_shape: np.ndarray | Sequence[int] | None = None,
    *,
    kernel_shape: Sequence[int],
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    check: Callable[..., None] | None = None,
) -> np.ndarray:
    """Zeros except ``U.flat[indices[i]] = x.flat[i]``, U of the inferred shape ``(S-1)*stride + kernel - pads``.

    ``indices`` are flat over the whole ``(N, C, *inferred)`` tensor, as MaxPool's Indices
    output gives them; one outside it raises IndexOutOfRangeError. When two values share
    an index, the last one in row-major order of ``x`` wins.

    ``output_shape`` (the full shape or its spatial part) only changes the size: U is
    placed at the origin of a zero tensor of that shape (cut if smaller). This is how the
    spec's own conformance case reads "output_shape causes pads to be auto generated",
    and it keeps "pooling the unpooled tensor gives back X". onnxruntime instead reads
    the indices as positions in the ``output_shape`` tensor (PyTorch's MaxUnpool with
    ``output_size``); both agree whenever ``output_shape`` equals the inferred shape.
    ``check(shape, dtype, what="output")`` (the node's ``check_alloc``) vets both sizes before allocating.
    """
    x = np.asarray(x)
    indices = np.asarray(indices)
    nd = len(kernel_shape)
    if x.ndim != nd + 2:
        raise KernelError(f"X must have rank {nd + 2} (N, C and the {nd} axes of 'kernel_shape'), got shape {list(x.shape)}.")
    if indices.shape != x.shape:
        raise KernelError(f"I must have X's shape {list(x.shape)}, got {list(indices.shape)}.")
    if indices.dtype.kind not in "iu":
        raise KernelError(f"I must be an integer tensor, got dtype {indices.dtype}.")
    s = spatial_attr(strides, nd, 1, "strides")
    pb, pe = explicit_pads(pads, nd)
    inferred = x.shape[:2] + tuple(
        (n - 1) * st + k - b - e for n, st, k, b, e in zip(x.shape[2:], s, kernel_shape, pb, pe)
    )
    if any(v < 0 for v in inferred):
        raise KernelError(f"The unpooled shape {list(inferred)} is negative; check kernel_shape, strides and pads.")
    if check is not None:  # the model's strides and pads decide the unpooled size
        check(inferred, x.dtype, "unpooled tensor")
    u = np.zeros(inferred, x.dtype)
    if x.size:
        flat = indices.reshape(-1)
        lo, hi = int(flat.min()), int(flat.max())
        if lo < 0 or hi >= u.size:
            bad = lo if lo < 0 else hi
            raise IndexOutOfRangeError(
                f"I holds {bad}, out of range [0, {u.size - 1}] for the unpooled shape {list(inferred)}."
            )
        u.reshape(-1)[flat] = x.reshape(-1)
    if output_shape is None or np.asarray(output_shape).size == 0:
        return u
    shape = tuple(int(v) for v in np.asarray(output_shape).reshape(-1))
    if len(shape) == nd:
        shape = x.shape[:2] + shape
    if len(shape) != nd + 2 or shape[:2] != x.shape[:2] or min(shape) < 0:
        raise KernelError(f"output_shape {list(shape)} must be [N, C, spatial...] with X's N and C {list(x.shape[:2])}.")
    if shape == inferred:
        return u
    if check is not None:  # the data's output_shape decides the output's size
        check(shape, x.dtype)
    y = np.zeros(shape, x.dtype)
    common = tuple(slice(0, min(a, b)) for a, b in zip(shape, inferred))
    y[common] = u[common]
    return y


@register("MaxUnpool", versions=(9, 11, 22))
class MaxUnpool(OpRun):
    """MaxUnpool: 9, 11 (same semantics), 22 (bfloat16). Kernel: :func:`max_unpool`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if not self.kernel_shape:
            raise InvalidAttributeError(f"{self.node_label()} misses the required attribute 'kernel_shape'.")

    def _run(self, x, indices, output_shape=None, attributes=None, verbose=0, fLOG=None):
        return (max_unpool(x, indices, output_shape, kernel_shape=self.kernel_shape, pads=self.pads, strides=self.strides,
                            check=self.check_alloc),)
