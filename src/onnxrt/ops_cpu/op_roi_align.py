"""RoiAlign (10, 16, 22): bilinear pooling of regions of interest, rois batched by sampling grid."""

from __future__ import annotations

import numpy as np

from ..errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

#: gathered values per chunk of rois (bounds the temporaries of large calls)
_CHUNK_ELEMENTS = 1 << 22


def _axis_samples(start: np.ndarray, bin_size: np.ndarray, pooled: int, grid: int, size: int):
    """Bilinear taps of the sample points of one axis, for rois sharing a grid count.

    Sample ``i`` of bin ``p`` sits at ``start + p * bin + (i + 0.5) * bin / grid``. A point
    beyond one pixel outside the map contributes nothing; points in [-1, 0) read the
    first pixel; the last pixel repeats past the end (the RoiAlign convention of
    onnxruntime and Detectron, which the spec's test data follow).
    Returns (low, high, w_low, w_high), each (rois, pooled, grid).
    """
    p = np.arange(pooled, dtype=start.dtype)[None, :, None]
    i = np.arange(grid, dtype=start.dtype)[None, None, :]
    pos = start[:, None, None] + p * bin_size[:, None, None] + (i + 0.5) * bin_size[:, None, None] / grid
    valid = (pos >= -1.0) & (pos <= size)
    pos = np.maximum(pos, 0)
    low = np.floor(pos).astype(np.intp)
    at_end = low >= size - 1
    low = np.where(at_end, size - 1, low)
    high = np.where(at_end, size - 1, low + 1)
    pos = np.where(at_end, low.astype(pos.dtype), pos)
    frac = pos - low
    w_high = np.where(valid, frac, 0)
    w_low = np.where(valid, 1 - frac, 0)
    return low, high, w_low, w_high


def roi_align(
    x: np.ndarray,
    rois: np.ndarray,
    batch_indices: np.ndarray,
    mode: str = "avg",
    output_height: int = 1,
    output_width: int = 1,
    sampling_ratio: int = 0,
    spatial_scale: float = 1.0,
    half_pixel: bool = True,
) -> np.ndarray:
    """RoiAlign of ``x`` (N, C, H, W) over ``rois`` (R, 4: x1, y1, x2, y2) -> (R, C, oh, ow).

    Roi corners are scaled by ``spatial_scale`` and, with ``half_pixel``, shifted by -0.5;
    without it (``output_half_pixel``, and version 10) a roi is at least 1x1. Each bin
    averages (``avg``) its grid of bilinear samples, ``sampling_ratio`` per axis or
    ceil(roi size / pooled size) when 0. ``max`` takes, per sample, the largest of the four
    weighted corner values and then the largest over the samples, as onnxruntime does (the
    spec does not define it further). float16/bfloat16 compute in float32.
    Vectorized over rois of the same grid, in chunks; no loop per bin or sample.
    """
    x = np.asarray(x)
    rois = np.asarray(rois)
    batch_indices = np.asarray(batch_indices)
    if x.ndim != 4:
        raise KernelError(f"X must be 4-D (N, C, H, W), got shape {list(x.shape)}.")
    if rois.ndim != 2 or rois.shape[1] != 4:
        raise KernelError(f"rois must have shape [num_rois, 4], got {list(rois.shape)}.")
    if batch_indices.shape != (rois.shape[0],):
        raise KernelError(f"batch_indices must have shape [{rois.shape[0]}], got {list(batch_indices.shape)}.")
    n, c, h, w = x.shape
    r = rois.shape[0]
    if r and (batch_indices.min() < 0 or batch_indices.max() >= n):
        bad = batch_indices[(batch_indices < 0) | (batch_indices >= n)][0]
        raise IndexOutOfRangeError(f"batch_indices holds {int(bad)}, out of range [0, {n - 1}].")
    dt = np.dtype(np.float64) if x.dtype == np.float64 else np.dtype(np.float32)
    out = np.zeros((r, output_height, output_width, c), dtype=dt)
    if r == 0 or c == 0 or h == 0 or w == 0:
        return np.moveaxis(out, 3, 1).astype(x.dtype)

    offset = 0.5 if half_pixel else 0.0
    box = rois.astype(dt) * dt.type(spatial_scale) - dt.type(offset)
    x1, y1, x2, y2 = box[:, 0], box[:, 1], box[:, 2], box[:, 3]
    roi_w, roi_h = x2 - x1, y2 - y1
    if not half_pixel:
        roi_w, roi_h = np.maximum(roi_w, 1), np.maximum(roi_h, 1)
    bin_h, bin_w = roi_h / output_height, roi_w / output_width
    if sampling_ratio > 0:
        grid_h = np.full(r, sampling_ratio, dtype=np.int64)
        grid_w = grid_h
    else:
        grid_h = np.ceil(roi_h / output_height).astype(np.int64)
        grid_w = np.ceil(roi_w / output_width).astype(np.int64)
    # (N, H, W, C) rows: each gather reads a whole channel vector
    rows = np.moveaxis(x, 1, 3).astype(dt, copy=False).reshape(n * h * w, c)
    groups = np.stack([grid_h, grid_w], axis=1)
    for gh, gw in np.unique(groups, axis=0).tolist():  # one pass per distinct sampling grid
        if gh <= 0 or gw <= 0:
            continue  # an empty grid averages nothing: the bins stay 0
        members = np.flatnonzero((grid_h == gh) & (grid_w == gw))
        per_roi = output_height * gh * output_width * gw * c
        step = max(1, _CHUNK_ELEMENTS // max(per_roi, 1))
        for s in range(0, members.size, step):  # chunks of rois, to bound memory
            sel = members[s : s + step]
            yl, yh, wyl, wyh = _axis_samples(y1[sel], bin_h[sel], output_height, gh, h)
            xl, xh, wxl, wxh = _axis_samples(x1[sel], bin_w[sel], output_width, gw, w)
            base = (batch_indices[sel].astype(np.intp) * h)[:, None, None, None, None]
            # (rois, oh, gh, ow, gw) positions and weights of the four corners
            ys = [(yl[:, :, :, None, None], wyl[:, :, :, None, None]), (yh[:, :, :, None, None], wyh[:, :, :, None, None])]
            xs = [(xl[:, None, None, :, :], wxl[:, None, None, :, :]), (xh[:, None, None, :, :], wxh[:, None, None, :, :])]
            acc = None
            for yy, wy in ys:
                for xx, wx in xs:
                    flat = ((base + yy) * w + xx).reshape(-1)
                    val = rows[flat] * (wy * wx).reshape(-1, 1)
                    if acc is None:
                        acc = val
                    elif mode == "avg":
                        acc += val
                    else:
                        np.maximum(acc, val, out=acc)
            acc = acc.reshape(sel.size, output_height, gh, output_width, gw, c)
            if mode == "avg":
                out[sel] = acc.sum(axis=(2, 4)) / (gh * gw)
            else:
                out[sel] = acc.max(axis=(2, 4))
    return np.moveaxis(out, 3, 1).astype(x.dtype)


@register("RoiAlign", versions=(10, 16, 22))
class RoiAlign(OpRun):
    """RoiAlign 10 (no pixel shift), 16 (coordinate_transformation_mode, default
    half_pixel), 22 (bfloat16). See :func:`roi_align`."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.check_choice("mode", ("avg", "max"))
        ctm = getattr(self, "coordinate_transformation_mode", None) or "output_half_pixel"
        if ctm not in ("half_pixel", "output_half_pixel"):
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute 'coordinate_transformation_mode' is {ctm!r}, "
                f"expected one of ['half_pixel', 'output_half_pixel']."
            )
        self._half_pixel = ctm == "half_pixel"
        if self.output_height < 1 or self.output_width < 1:
            raise InvalidAttributeError(
                f"{self.node_label()}: output_height and output_width must be >= 1, "
                f"got {self.output_height} and {self.output_width}."
            )
        if self.sampling_ratio < 0:
            raise InvalidAttributeError(f"{self.node_label()}: sampling_ratio must be >= 0, got {self.sampling_ratio}.")

    def _run(self, x, rois, batch_indices, attributes=None, verbose=0, fLOG=None):
        # the model's output_height/output_width (times the data's number of boxes) decide the output's size
        x, rois = np.asarray(x), np.asarray(rois)
        if x.ndim == 4 and rois.ndim == 2:
            self.check_alloc([rois.shape[0], x.shape[1], self.output_height, self.output_width],
                             np.float64 if x.dtype == np.float64 else np.float32)
        return (
            roi_align(
                x, rois, batch_indices, self.mode, self.output_height, self.output_width,
                self.sampling_ratio, self.spatial_scale, self._half_pixel,
            ),
        )
