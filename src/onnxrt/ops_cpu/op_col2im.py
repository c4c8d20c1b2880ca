"""Col2Im (18): column blocks summed back into an N-D image, one strided add per block offset."""

from __future__ import annotations

from collections.abc import Sequence
from math import prod
from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._conv_common import spatial_attr, window_geometry
from ._op import OpRun


def col2im(
    x: np.ndarray,
    image_shape: np.ndarray | Sequence[int],
    block_shape: np.ndarray | Sequence[int],
    *,
    dilations: Sequence[int] | None = None,
    pads: Sequence[int] | None = None,
    strides: Sequence[int] | None = None,
    check: Any = None,
) -> np.ndarray:
    """Inverse of im2col: ``x (N, C*prod(block), L) -> (N, C, *image_shape)``.

    The L blocks are enumerated in row-major order of their positions (as PyTorch's
    ``fold``); overlapping values add up. Block positions follow the convolution
    arithmetic of ``strides``, ``dilations`` and ``pads`` (pixels landing in the padding
    are dropped). Every element type: bool sums are logical or, strings concatenate
    (starting from the empty string) in row-major order of the block offsets.
    """
    x = np.asarray(x)
    image = [int(v) for v in np.asarray(image_shape).reshape(-1)]
    block = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    nd = len(image)
    if len(block) != nd:
        raise KernelError(f"block_shape has {len(block)} values but image_shape has {nd}; they must match.")
    if any(v < 1 for v in block) or any(v < 0 for v in image):
        raise KernelError(f"block_shape must be >= 1 and image_shape >= 0, got {block} and {image}.")
    if x.ndim != 3:
        raise KernelError(f"input must have rank 3 (N, C*prod(block_shape), L), got shape {list(x.shape)}.")
    kp = prod(block)
    if x.shape[1] % kp:
        raise KernelError(f"input's second dimension {x.shape[1]} is not a multiple of prod(block_shape) = {kp}.")
    s = spatial_attr(strides, nd, 1, "strides")
    d = spatial_attr(dilations, nd, 1, "dilations")
    pb, pe, blocks = window_geometry(image, block, s, d, pads)
    if prod(blocks) != x.shape[2]:
        raise KernelError(
            f"input holds {x.shape[2]} blocks but image_shape {image}, block_shape {block}, strides, dilations "
            f"and pads give {list(blocks)} = {prod(blocks)} blocks."
        )
    n_img, n_ch = x.shape[0], x.shape[1] // kp
    col = x.reshape((n_img, n_ch) + tuple(block) + tuple(blocks))
    full_shape = (n_img, n_ch) + tuple(i + b + e for i, b, e in zip(image, pb, pe))
    if check is not None:
        check(full_shape, x.dtype)
    if x.dtype == object:
        full = np.full(full_shape, "", dtype=object)
    else:
        full = np.zeros(full_shape, x.dtype)
    lead = (slice(None), slice(None))
    for offset in np.ndindex(*block):
        dst = lead + tuple(slice(k * dl, k * dl + (n - 1) * st + 1, st) for k, dl, n, st in zip(offset, d, blocks, s))
        full[dst] += col[lead + offset]
    if not any(pb) and not any(pe):
        return full
    return np.ascontiguousarray(full[lead + tuple(slice(b, b + i) for b, i in zip(pb, image))])


@register("Col2Im", versions=(18,))
class Col2Im(OpRun):
    """Col2Im: 18. Kernel: :func:`col2im`."""

    def _run(self, x, image_shape, block_shape, attributes=None, verbose=0, fLOG=None):
        return (col2im(x, image_shape, block_shape, dilations=self.dilations, pads=self.pads, strides=self.strides, check=self.check_alloc),)
