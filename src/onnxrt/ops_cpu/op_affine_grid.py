"""AffineGrid (20): sampling grids of 2-D/3-D affine transforms, one batched matrix product."""

from __future__ import annotations

import math

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._dsp import compute_dtypes
from ._op import OpRun


def base_coordinates(n: int, align_corners: int, dtype: np.dtype) -> np.ndarray:
    """``n`` evenly spaced positions in [-1, 1]: pixel centres (align_corners=1 puts the
    first and last at -1 and 1, align_corners=0 half a pixel inside)."""
    if align_corners:
        if n == 1:
            # one pixel: -1 and 1 both name its centre, the spec leaves the choice open
            # (its function body gives -1 for D and NaN for H and W, PyTorch 0); onnxrt
            # follows onnxruntime, whose linspace of one point is its end, 1
            return np.ones(1, dtype=dtype)
        return np.linspace(-1.0, 1.0, n, dtype=np.float64).astype(dtype)
    return ((2.0 * np.arange(n, dtype=np.float64) + 1.0) / max(n, 1) - 1.0).astype(dtype)


def affine_grid(theta: np.ndarray, size: np.ndarray, align_corners: int = 0) -> np.ndarray:
    """Grid ``[N, H, W, 2]`` (theta ``[N, 2, 3]``, size ``[N, C, H, W]``) or ``[N, D, H, W, 3]``
    (theta ``[N, 3, 4]``, size ``[N, C, D, H, W]``): ``theta[n] @ (x, y[, z], 1)`` over the
    base positions, x running along the last axis. float16/bfloat16 compute in float32.
    """
    theta = np.asarray(theta)
    dims = [int(v) for v in np.asarray(size).reshape(-1)]
    if len(dims) not in (4, 5):
        raise KernelError(f"size must hold 4 (N, C, H, W) or 5 (N, C, D, H, W) values, got {dims}.")
    r = len(dims) - 2
    if theta.ndim != 3 or theta.shape[1:] != (r, r + 1):
        raise KernelError(f"theta must have shape [N, {r}, {r + 1}] for a {r}-D size, got {list(theta.shape)}.")
    if theta.shape[0] != dims[0]:
        raise KernelError(f"theta holds {theta.shape[0]} matrices but size asks for N={dims[0]}.")
    if min(dims[2:]) < 0:
        raise KernelError(f"size must be non-negative, got {dims}.")
    dt = compute_dtypes(theta.dtype)[0]
    spatial = dims[2:]
    # (x, y[, z]) with x along the last spatial axis, then the homogeneous 1
    axes_coords = [base_coordinates(n, align_corners, dt) for n in spatial]
    mesh = np.meshgrid(*axes_coords, indexing="ij")
    base = np.stack([*mesh[::-1], np.ones(spatial, dtype=dt)], axis=-1).reshape(-1, r + 1)
    grid = np.matmul(base, theta.astype(dt, copy=False).transpose(0, 2, 1))  # [N, prod, r]
    return grid.reshape([dims[0], *spatial, r]).astype(theta.dtype, copy=False)


@register("AffineGrid", versions=(20,))
class AffineGrid(OpRun):
    """AffineGrid 20 (2-D and 3-D; attribute align_corners)."""

    def _run(self, theta, size, attributes=None, verbose=0, fLOG=None):
        # the data's size decides the grid's and the base positions' sizes (malformed ones: affine_grid's errors)
        dims = [int(v) for v in np.asarray(size).reshape(-1)]
        if len(dims) in (4, 5) and min(dims) >= 0:
            r, dt = len(dims) - 2, compute_dtypes(np.asarray(theta).dtype)[0]
            self.check_alloc([dims[0], *dims[2:], r], dt)
            self.check_alloc([math.prod(dims[2:]), r + 1], dt, "base positions")
        return (affine_grid(theta, size, self.align_corners),)
