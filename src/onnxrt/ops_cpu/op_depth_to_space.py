"""DepthToSpace (1, 11, 13, 28) and SpaceToDepth (1, 13, 28): move blocks between channels and space."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun
from .op_transpose import transpose

MODES = ("DCR", "CRD")


def depth_to_space(x: np.ndarray, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """[N, C, H, W] -> [N, C/b², H·b, W·b].

    ``DCR`` reads the channel as (block row, block column, depth), ``CRD`` as (depth,
    block row, block column): the reshape/transpose/reshape of the spec.
    """
    x = np.asarray(x)
    if x.ndim != 4:
        raise KernelError(f"input must have rank 4 [N, C, H, W], got shape {list(x.shape)}.")
    b = int(blocksize)
    n, c, h, w = x.shape
    if b <= 0 or c % (b * b):
        raise KernelError(f"the {c} channels are not divisible by blocksize² = {b * b}.")
    if mode == "DCR":
        tmp = x.reshape(n, b, b, c // (b * b), h, w)
        perm = (0, 3, 4, 1, 5, 2)
    elif mode == "CRD":
        tmp = x.reshape(n, c // (b * b), b, b, h, w)
        perm = (0, 1, 4, 2, 5, 3)
    else:
        raise KernelError(f"mode is {mode!r}, expected one of {list(MODES)!r}.")
    return transpose(tmp, perm).reshape(n, c // (b * b), h * b, w * b)


def space_to_depth(x: np.ndarray, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """[N, C, H, W] -> [N, C·b², H/b, W/b], the inverse of :func:`depth_to_space` in the same mode."""
    x = np.asarray(x)
    if x.ndim != 4:
        raise KernelError(f"input must have rank 4 [N, C, H, W], got shape {list(x.shape)}.")
    b = int(blocksize)
    n, c, h, w = x.shape
    if b <= 0 or h % b or w % b:
        raise KernelError(f"height {h} and width {w} must be divisible by blocksize {b}.")
    tmp = x.reshape(n, c, h // b, b, w // b, b)
    if mode == "DCR":
        perm = (0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        perm = (0, 1, 3, 5, 2, 4)
    else:
        raise KernelError(f"mode is {mode!r}, expected one of {list(MODES)!r}.")
    return transpose(tmp, perm).reshape(n, c * b * b, h // b, w // b)


class _BlockOp(OpRun):
    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._mode = getattr(self, "mode", None) or "DCR"
        if self._mode not in MODES:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'mode' is {self._mode!r}, expected one of {list(MODES)!r}.")
        if self.blocksize <= 0:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'blocksize' is {self.blocksize}, expected a positive value.")


@register("DepthToSpace", versions=(1, 11, 13, 28))
class DepthToSpace(_BlockOp):
    """DepthToSpace: 1 (DCR only), 11 (mode DCR/CRD), 13 (bfloat16), 28."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (depth_to_space(x, self.blocksize, self._mode),)


@register("SpaceToDepth", versions=(1, 13, 28))
class SpaceToDepth(_BlockOp):
    """SpaceToDepth: 1 (DCR order), 13 (bfloat16), 28 (mode DCR/CRD)."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (space_to_depth(x, self.blocksize, self._mode),)
