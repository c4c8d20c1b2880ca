"""MaxRoiPool (1, 22): max pooling of each region of interest into a fixed grid of bins (Fast R-CNN)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from ..registry import register
from ._conv_common import _WIDENED
from ._op import OpRun

#: elements gathered at once (rois are processed in chunks below this)
_CHUNK_ELEMENTS = 1 << 24


def _round_half_away(v: np.ndarray) -> np.ndarray:
    return np.sign(v) * np.floor(np.abs(v) + 0.5)


def _bins(start: np.ndarray, length: np.ndarray, pooled: int, size: int) -> tuple[np.ndarray, np.ndarray]:
    """[lo, hi) of every bin (R, pooled): floor/ceil of the fractional bin edges, clipped to the image."""
    bin_size = length.astype(np.float64)[:, None] / pooled
    i = np.arange(pooled, dtype=np.float64)[None, :]
    lo = np.floor(i * bin_size).astype(np.int64) + start[:, None]
    hi = np.ceil((i + 1) * bin_size).astype(np.int64) + start[:, None]
    return np.clip(lo, 0, size), np.clip(hi, 0, size)


def _gather_index(lo: np.ndarray, hi: np.ndarray, size: int) -> tuple[np.ndarray, int]:
    """(R, bins, width) positions covering each [lo, hi): the last one repeated to a common width.

    Repeating a member of the bin does not change its maximum; empty bins read any valid
    position (their result is replaced by 0 afterwards).
    """
    width = int(max(1, (hi - lo).max(initial=1)))
    t = np.arange(width)[None, None, :]
    last = np.maximum(hi - 1, lo)[..., None]
    idx = np.minimum(lo[..., None] + t, last)
    return np.clip(idx, 0, size - 1), width


def max_roi_pool(
    x: np.ndarray,
    rois: np.ndarray,
    *,
    pooled_shape: Sequence[int],
    spatial_scale: float = 1.0,
) -> np.ndarray:
    """Y (R, C, ph, pw): the max of X over each bin of each region.

    A roi row is ``[batch_index, x1, y1, x2, y2]``; corners are scaled by
    ``spatial_scale`` and rounded half away from zero, the region spans
    ``max(end - start + 1, 1)`` pixels per axis and bin ``i`` covers
    ``[floor(i*len/p), ceil((i+1)*len/p))`` from its start, clipped to the image (the
    Fast R-CNN definition onnxruntime implements). An empty bin gives 0. Vectorized over
    rois (in chunks bounding memory), bins and channels: rows then columns are gathered
    with each bin padded to the widest by repeating its last pixel.
    """
    x = np.asarray(x)
    rois = np.asarray(rois)
    if x.ndim != 4:
        raise KernelError(f"X must have rank 4 (N, C, H, W), got shape {list(x.shape)}.")
    if rois.ndim != 2 or rois.shape[1] != 5:
        raise KernelError(f"rois must have shape [num_rois, 5], got {list(rois.shape)}.")
    if pooled_shape is None or len(pooled_shape) != 2 or min(pooled_shape) < 1:
        raise KernelError(f"Attribute 'pooled_shape' must hold two values >= 1, got {pooled_shape!r}.")
    ph, pw = int(pooled_shape[0]), int(pooled_shape[1])
    n_img, n_ch, height, width = x.shape
    n_rois = rois.shape[0]
    cdt = np.dtype(np.float32) if x.dtype in _WIDENED else x.dtype
    y = np.zeros((n_rois, n_ch, ph, pw), cdt)
    if n_rois == 0 or n_ch == 0:
        return y.astype(x.dtype)
    r64 = rois.astype(np.float64)
    batch = r64[:, 0].astype(np.int64)
    if batch.min() < 0 or batch.max() >= n_img:
        bad = batch[(batch < 0) | (batch >= n_img)][0]
        raise IndexOutOfRangeError(f"rois holds batch index {int(bad)}, out of range [0, {n_img - 1}].")
    corners = _round_half_away(r64[:, 1:] * float(spatial_scale)).astype(np.int64)
    x1, y1, x2, y2 = corners.T
    h_lo, h_hi = _bins(y1, np.maximum(y2 - y1 + 1, 1), ph, height)
    w_lo, w_hi = _bins(x1, np.maximum(x2 - x1 + 1, 1), pw, width)
    xc = x if x.dtype == cdt else x.astype(cdt)
    rows_all, bh = _gather_index(h_lo, h_hi, height)
    cols_all, bw = _gather_index(w_lo, w_hi, width)
    per_roi = max(ph * bh * n_ch * width, pw * bw * ph * n_ch, 1)
    step = max(1, _CHUNK_ELEMENTS // per_roi)
    for start in range(0, n_rois, step):
        sl = slice(start, min(n_rois, start + step))
        r = sl.stop - sl.start
        rows = rows_all[sl]  # (r, ph, bh)
        cols = cols_all[sl]  # (r, pw, bw)
        # rows: X[b, :, rows, :] -> (r, ph, bh, C, W) -> max over bh
        part = xc[batch[sl][:, None, None], :, rows, :].max(axis=2)  # (r, ph, C, W)
        # columns: part[r, :, :, cols] -> (r, pw, bw, ph, C) -> max over bw
        part = part[np.arange(r)[:, None, None], :, :, cols].max(axis=2)  # (r, pw, ph, C)
        y[sl] = part.transpose(0, 3, 2, 1)
    empty = (h_hi <= h_lo)[:, None, :, None] | (w_hi <= w_lo)[:, None, None, :]
    np.copyto(y, 0, where=empty)
    return y if y.dtype == x.dtype else y.astype(x.dtype)


@register("MaxRoiPool", versions=(1, 22))
class MaxRoiPool(OpRun):
    """MaxRoiPool: 1, 22 (bfloat16). Kernel: :func:`max_roi_pool`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if not self.pooled_shape or len(self.pooled_shape) != 2:
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'pooled_shape' must hold two values, got {self.pooled_shape!r}."
            )

    def _run(self, x, rois, attributes=None, verbose=0, fLOG=None):
        # the model's pooled_shape (times the data's number of boxes) decides the output's size
        x, rois = np.asarray(x), np.asarray(rois)
        if x.ndim == 4 and rois.ndim == 2 and min(self.pooled_shape) >= 1:
            self.check_alloc([rois.shape[0], x.shape[1], *self.pooled_shape], np.float32 if x.dtype in _WIDENED else x.dtype)
        return (max_roi_pool(x, rois, pooled_shape=self.pooled_shape, spatial_scale=self.spatial_scale),)
