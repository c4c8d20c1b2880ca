"""Transpose (1, 13, 21, 23, 24, 25): permute the axes into a new C-contiguous tensor, cache-aware."""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..parallel import parallel_for
from ..registry import register
from ._op import OpRun

#: below this many elements numpy's plain strided copy is the fastest
_SMALL = 1 << 14
#: elements of one tile of the blocked copy (both moving axes): it stays in L2
_TILE_AREA = 1 << 18


def _coalesce(shape: tuple[int, ...], perm: tuple[int, ...]) -> tuple[list[int], list[int]]:
    """The smallest equivalent problem: size-1 axes dropped, input axes that stay adjacent
    and in order in the output merged into one. ``(2,3,4,5), (0,2,3,1)`` -> ``(2,3,20), (0,2,1)``."""
    keep = [i for i in range(len(shape)) if shape[i] != 1]
    remap = {a: k for k, a in enumerate(keep)}
    dims = [shape[i] for i in keep]
    order = [remap[p] for p in perm if p in remap]
    groups: list[list[int]] = []  # output order; each a run of consecutive input axes
    for p in order:
        if groups and groups[-1][-1] + 1 == p:
            groups[-1].append(p)
        else:
            groups.append([p])
    by_input = sorted(range(len(groups)), key=lambda g: groups[g][0])
    new_shape = [math.prod(dims[a] for a in groups[g]) for g in by_input]
    where = {g: k for k, g in enumerate(by_input)}
    return new_shape, [where[g] for g in range(len(groups))]


def _check_perm(perm, rank: int) -> list[int]:
    if perm is None or len(perm) == 0:
        return list(range(rank - 1, -1, -1))
    p = [int(a) + rank if int(a) < 0 else int(a) for a in perm]
    if sorted(p) != list(range(rank)):
        raise KernelError(f"perm {list(perm)} is not a permutation of the {rank} axes of the input.")
    return p


@lru_cache(maxsize=1024)
def _plan(shape: tuple[int, ...], perm: tuple[int, ...] | None):
    """(checked perm, output shape, coalesced dims and perm) of a transpose, cached: the
    Python of working them out cost as much as copying a 50K-element tensor."""
    p = _check_perm(perm, len(shape))
    dims, q = _coalesce(shape, tuple(p))
    return p, tuple(shape[a] for a in p), dims, q


def transpose(data: np.ndarray, perm=None) -> np.ndarray:
    """A C-contiguous copy of ``data`` with axes permuted (reversed when ``perm`` is None or empty).

    numpy's strided copy is slow when the input axis that becomes the output's last
    one has a large power-of-two byte stride (every row of a tile falls in the same
    cache set). The kernel merges axes that move together, then copies tile by tile
    and, for such strides, first copies the input into a buffer whose rows are padded
    by one cache line so that the strided reads spread over the cache. This is the
    reference kernel (a copy: exact whatever the order); the compiled batched 2-D transpose
    of 4-byte values is a fast path (onnxrt.fastpaths.transpose).
    """
    data = np.asarray(data)
    p, out_shape, dims, q = _plan(data.shape, None if perm is None else tuple(perm))
    if data.size < _SMALL:
        # ascontiguousarray would turn a 0-D input into a 1-element vector
        return np.array(data.transpose(p), order="C", copy=True)
    n = len(dims)
    if q == list(range(n)):  # only size-1 axes move: the data keeps its order
        return np.array(data, copy=True, order="C").reshape(out_shape)
    src = data.reshape(dims)
    out = np.empty([dims[a] for a in q], dtype=data.dtype)
    inner = q[-1]  # input axis that becomes the output's contiguous axis
    if inner == n - 1:  # the innermost run stays contiguous: a plain copy streams well
        np.copyto(out, src.transpose(q))
        return out.reshape(out_shape)
    if data.dtype != object and src.strides[inner] % 1024 == 0:
        pad = max(1, 64 // data.dtype.itemsize)
        buf = np.empty(dims[:-1] + [dims[-1] + pad], dtype=data.dtype)
        buf[..., : dims[-1]] = src
        src = buf[..., : dims[-1]]
    view = src.transpose(q)
    oa = q.index(n - 1)  # output axis of the input's contiguous axis
    # square tiles, unless one axis is short: then the other takes the rest of the area
    edge = math.isqrt(_TILE_AREA)
    ta = max(edge, _TILE_AREA // dims[inner])
    tb = max(edge, _TILE_AREA // dims[n - 1])
    tiles = []
    for i in range(0, dims[n - 1], ta):
        for j in range(0, dims[inner], tb):
            idx = [slice(None)] * n
            idx[oa] = slice(i, i + ta)
            idx[n - 1] = slice(j, j + tb)
            tiles.append(tuple(idx))

    def copy(lo: int, hi: int) -> None:
        # tiles are disjoint parts of the output: the pool's threads copy them side by side
        # (numpy releases the GIL in the copy; a strided copy is latency-bound, 1.6x on two cores)
        for t in tiles[lo:hi]:
            out[t] = view[t]

    parallel_for(len(tiles), copy, work_per_item=data.size // len(tiles) * 2)
    return out.reshape(out_shape)


@register("Transpose", versions=(1, 13, 21, 23, 24, 25))
class Transpose(OpRun):
    """Transpose: 1, 13 (bfloat16), 21+ (float8, int4, float4, int2 types); perm defaults to reversed axes."""
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if self.perm is not None and len(set(self.perm)) != len(self.perm):
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'perm' {self.perm!r} repeats an axis.")

    def _run(self, data, attributes=None, verbose=0, fLOG=None):
        return (transpose(data, self.perm),)
