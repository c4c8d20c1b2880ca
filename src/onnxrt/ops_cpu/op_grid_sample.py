"""GridSample (16: 4-D, 20 and 22: N-D): sample an image at normalised grid positions."""

from __future__ import annotations

import itertools

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun
from .op_resize import _cubic_kernel

PADDING_MODES = ("zeros", "border", "reflection")
#: GridSample-16 names its modes after the 2-D case
_MODE_ALIASES = {"bilinear": "linear", "bicubic": "cubic"}
#: PyTorch's bicubic coefficient, which the spec's reference (torch.nn.functional.grid_sample) uses
CUBIC_A = -0.75


def _unnormalize(g: np.ndarray, size: int, align_corners: int) -> np.ndarray:
    """Grid value in [-1, 1] to a pixel coordinate: -1/1 are the centres of the corner
    pixels with align_corners, their outer edges without."""
    if align_corners:
        return (g + 1) / 2 * (size - 1)
    return ((g + 1) * size - 1) / 2


def _reflect(c: np.ndarray, low: float, high: float) -> np.ndarray:
    """Reflect coordinates by the borders ``low`` and ``high`` until they fall between them."""
    span = high - low
    if span <= 0:
        return np.zeros_like(c)
    d = np.abs(c - low)
    flips = np.floor(d / span)
    extra = d - flips * span
    return np.where(flips % 2 == 0, low + extra, high - extra)


def _pad_coordinate(c: np.ndarray, size: int, padding_mode: str, align_corners: int) -> np.ndarray:
    """``border`` clamps a coordinate into the image; ``reflection`` mirrors it by the border
    (pixel centres with align_corners, edges without), then clamps; ``zeros`` leaves it."""
    if padding_mode == "border":
        return np.clip(c, 0, size - 1)
    if padding_mode == "reflection":
        if align_corners:
            c = _reflect(c, 0.0, size - 1.0)
        else:
            c = _reflect(c, -0.5, size - 0.5)
        return np.clip(c, 0, size - 1)
    return c


def grid_sample(
    x: np.ndarray,
    grid: np.ndarray,
    mode: str = "linear",
    padding_mode: str = "zeros",
    align_corners: int = 0,
) -> np.ndarray:
    """Sample ``x`` (N, C, D1..Dr) at ``grid`` (N, O1..Or, r) -> (N, C, O1..Or).

    ``grid[..., 0]`` addresses the last axis (x), ``grid[..., 1]`` the one before, and so on.
    ``nearest`` rounds half to even; ``linear`` blends the 2^r neighbours; ``cubic`` the 4^r
    neighbours with Keys' kernel (a = -0.75). Outside the image, ``zeros`` reads 0,
    ``border`` the closest edge pixel, ``reflection`` the pixel mirrored by the border. For
    nearest and linear the padding moves the sampling coordinate; for cubic it moves each
    of the 4 taps (as PyTorch, whose grid_sample the spec refers to). Coordinates are
    computed in the grid's precision (float32 for 16-bit grids). Integer images interpolate
    in float64 and truncate like Cast; bool and string images allow only ``nearest``.
    Vectorized: one row gather per neighbour combination (at most 4^r).
    """
    x = np.asarray(x)
    grid = np.asarray(grid)
    r = x.ndim - 2
    if r < 1:
        raise KernelError(f"X must have rank >= 3 (N, C, spatial...), got shape {list(x.shape)}.")
    if grid.ndim != r + 2 or grid.shape[-1] != r or grid.shape[0] != x.shape[0]:
        raise KernelError(
            f"grid must have shape [N={x.shape[0]}, out dims..., {r}] for X of shape {list(x.shape)}, "
            f"got {list(grid.shape)}."
        )
    mode = _MODE_ALIASES.get(mode, mode)
    n, c = x.shape[:2]
    spatial = x.shape[2:]
    out_spatial = grid.shape[1:-1]
    p = int(np.prod(out_spatial, dtype=np.int64))
    npix = int(np.prod(spatial, dtype=np.int64))
    out_shape = (n, c, *out_spatial)
    if n == 0 or c == 0 or p == 0:
        return np.empty(out_shape, dtype=x.dtype)
    if npix == 0:
        raise KernelError(f"X has an empty spatial dimension {list(spatial)}; there is nothing to sample.")
    if mode != "nearest" and x.dtype.kind in "bOUS":
        raise KernelError(f"mode {mode!r} interpolates numbers, it cannot sample a tensor of {x.dtype}.")

    cdt = grid.dtype if grid.dtype in (np.float32, np.float64) else np.dtype(np.float32)
    g = grid.reshape(n, p, r).astype(cdt, copy=False)
    # rows of pixels: (N * pixels, C), so that every gather moves whole channel vectors
    rows = np.moveaxis(x.reshape(n, c, npix), 1, 2).reshape(n * npix, c)
    base = (np.arange(n, dtype=np.intp) * npix)[:, None]
    strides = [int(np.prod(spatial[k + 1 :], dtype=np.int64)) for k in range(r)]
    # per spatial axis k: the unnormalised coordinate (the grid lists axes innermost first)
    coords = [_unnormalize(g[:, :, r - 1 - k], spatial[k], align_corners) for k in range(r)]

    if mode == "nearest":
        flat = base.copy()
        valid = np.ones((n, p), dtype=bool)
        for k in range(r):
            ck = np.rint(_pad_coordinate(coords[k], spatial[k], padding_mode, align_corners))
            valid &= (ck >= 0) & (ck <= spatial[k] - 1)
            flat = flat + np.clip(ck, 0, spatial[k] - 1).astype(np.intp) * strides[k]
        out = rows[flat.reshape(-1)]
        if padding_mode == "zeros" and not valid.all():
            out[~valid.reshape(-1)] = "" if x.dtype.kind in "OUS" else 0
    else:
        work = x.dtype if x.dtype.kind in "fc" and x.dtype.itemsize >= 4 else np.dtype(np.float64)
        if x.dtype.kind == "f" and x.dtype.itemsize < 4 or x.dtype.kind == "V":
            work = np.dtype(np.float32)
        rows = rows.astype(work, copy=False)
        wdt = np.float32 if work in (np.float32, np.complex64) else np.float64
        taps_idx, taps_w = [], []  # per axis: [taps] of (N, P) index and weight arrays
        for k in range(r):
            ck = coords[k]
            if mode == "linear":
                ck = _pad_coordinate(ck, spatial[k], padding_mode, align_corners)
                lo = np.floor(ck)
                frac = ck - lo
                positions = [lo, lo + 1]
                weights = [1 - frac, frac]
            else:
                lo = np.floor(ck)
                t = ck - lo
                positions = [lo - 1, lo, lo + 1, lo + 2]
                weights = [_cubic_kernel(t + 1, CUBIC_A), _cubic_kernel(t, CUBIC_A),
                           _cubic_kernel(1 - t, CUBIC_A), _cubic_kernel(2 - t, CUBIC_A)]
                if padding_mode != "zeros":
                    positions = [_pad_coordinate(pos, spatial[k], padding_mode, align_corners) for pos in positions]
                    positions = [np.rint(pos) for pos in positions]
            idx_k, w_k = [], []
            for pos, w in zip(positions, weights):
                inside = (pos >= 0) & (pos <= spatial[k] - 1)
                idx_k.append(np.clip(pos, 0, spatial[k] - 1).astype(np.intp) * strides[k])
                w_k.append(np.where(inside, w, 0).astype(wdt, copy=False))
            taps_idx.append(idx_k)
            taps_w.append(w_k)
        out = np.zeros((n * p, c), dtype=work)
        for combo in itertools.product(*[range(len(t)) for t in taps_idx]):  # 2^r or 4^r neighbours
            flat = base
            weight = None
            for k, j in enumerate(combo):
                flat = flat + taps_idx[k][j]
                weight = taps_w[k][j] if weight is None else weight * taps_w[k][j]
            out += rows[flat.reshape(-1)] * weight.reshape(-1, 1)
        if out.dtype != x.dtype:
            if x.dtype.kind in "iu":
                info = np.iinfo(x.dtype)
                out = np.clip(out, info.min, info.max)
            out = out.astype(x.dtype)
    return np.moveaxis(out.reshape(n, p, c), 2, 1).reshape(out_shape)


@register("GridSample", versions=(16, 20, 22))
class GridSample(OpRun):
    """GridSample 16 (4-D, modes bilinear/nearest/bicubic), 20 (N-D, modes
    linear/nearest/cubic), 22 (bfloat16). See :func:`grid_sample`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        since = self.since_version or 22
        modes = ("bilinear", "nearest", "bicubic") if since < 20 else ("linear", "nearest", "cubic")
        for name, allowed in (("mode", modes), ("padding_mode", PADDING_MODES)):
            value = getattr(self, name)
            if value not in allowed:
                raise InvalidAttributeError(
                    f"{self.node_label()}: attribute {name!r} is {value!r}, expected one of {list(allowed)!r}."
                )
        self._four_d = since < 20

    def _run(self, x, grid, attributes=None, verbose=0, fLOG=None):
        if self._four_d and np.ndim(x) != 4:
            raise KernelError(f"GridSample-16 takes a 4-D X (N, C, H, W), got rank {np.ndim(x)}.")
        return (grid_sample(x, grid, self.mode, self.padding_mode, self.align_corners),)
