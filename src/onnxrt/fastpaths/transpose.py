"""Fast path of Transpose (reference kernel: onnxrt.ops_cpu.op_transpose.transpose, a
cache-aware tiled numpy copy, exact).

- ``compiled 2-D blocks``: a permutation that, once the axes moving together are merged,
  swaps the last two axes of 4-byte values (a batched 2-D transpose): native.loops'
  8x8 register transposes, blocks of 8 rows on the team or the pool.
"""

from __future__ import annotations

import numpy as np

from .. import native
from ..dispatch import fast_path
from ..errors import KernelError
from ..native.layout import TRANSPOSE
from ..ops_cpu.op_transpose import _SMALL, _plan

#: elements per part when the compiled transpose splits its row blocks over the pool
TRANSPOSE_PART = 1 << 18


def batched_2d(shape: tuple[int, ...], perm) -> tuple | None:
    """(output shape, coalesced dims) when transposing ``shape`` by ``perm`` is a batched
    2-D transpose (the last two merged axes swap, the others stay), else None (an invalid
    perm included: the reference reports it)."""
    try:
        _, out_shape, dims, q = _plan(shape, None if perm is None else tuple(perm))
    except KernelError:
        return None
    n = len(dims)
    if n >= 2 and q[-2:] == [n - 1, n - 2] and q[:-2] == list(range(n - 2)):
        return out_shape, dims
    return None


def transpose_compiled(data: np.ndarray, out_shape: tuple[int, ...], dims: list[int]) -> np.ndarray:
    """The batched 2-D transpose of 4-byte values ``data`` (coalesced to ``dims``, the last
    two swapping) by native.loops' 8x8 register transposes; blocks of 8 rows go to the team
    (from 2 * TRANSPOSE_PART elements) or the kernel pool. A copy: bit-exact."""
    k = native.kernels()
    s3 = np.ascontiguousarray(data).reshape(-1, dims[-2], dims[-1]).view(np.uint32)
    out = np.empty(out_shape, dtype=data.dtype)
    o3 = out.reshape(s3.shape[0], dims[-1], dims[-2]).view(np.uint32)
    blocks = s3.shape[0] * ((dims[-2] + 7) // 8)

    def compiled(lo: int, hi: int) -> None:
        k.transpose_u32(s3, o3, lo, hi)

    args = TRANSPOSE.pack(src=s3, dst=o3, batches=s3.shape[0], m=dims[-2], n=dims[-1])
    if not (s3.size >= 2 * TRANSPOSE_PART and native.team_split("transpose_part", args, s3.size, max_parts=blocks)):
        native.split(blocks, compiled, max(1, TRANSPOSE_PART // (8 * dims[-1])))
    return out


def _compiled_applies(op, data) -> bool:
    return (type(data) is np.ndarray and data.size >= _SMALL and data.dtype.itemsize == 4 and data.dtype.kind in "fiu"
            and batched_2d(data.shape, op.perm) is not None)


@fast_path("Transpose", "compiled 2-D blocks", when=_compiled_applies)
def compiled_blocks(op, data):
    """A batched 2-D transpose (once merged) of 16K+ 4-byte values: native.loops' 8x8 register transposes.

    Bit-exact (a copy).
    """
    out_shape, dims = batched_2d(data.shape, op.perm)
    return (transpose_compiled(data, out_shape, dims),)
