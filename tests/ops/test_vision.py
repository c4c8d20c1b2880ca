"""GridSample, AffineGrid, RoiAlign, NonMaxSuppression, CenterCropPad, ImageDecoder: onnxruntime, plain loops, edge cases."""

from __future__ import annotations

import builtins
import io
import itertools

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxrt.errors import GraphError, IndexOutOfRangeError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu import op_non_max_suppression
from onnxrt.ops_cpu.op_affine_grid import affine_grid
from onnxrt.ops_cpu.op_center_crop_pad import center_crop_pad
from onnxrt.ops_cpu.op_grid_sample import grid_sample
from onnxrt.ops_cpu.op_image_decoder import image_decoder
from onnxrt.ops_cpu.op_non_max_suppression import non_max_suppression
from onnxrt.ops_cpu.op_roi_align import roi_align

from .test_resize import onnxrt_node, ort_node

TP = TensorProto

# --------------------------------------------------------------------------------------
# GridSample
# --------------------------------------------------------------------------------------


def _gs_cases():
    rng = np.random.default_rng(8)
    out = []
    for rank, mode, pad, ac in itertools.product([2, 3], ["linear", "nearest", "cubic"], ["zeros", "border", "reflection"], [0, 1]):
        if rank == 3 and mode == "cubic":
            continue  # onnxruntime has no volumetric bicubic
        out.append((rank, mode, pad, ac, int(rng.integers(0, 10**6))))
    return out


@pytest.mark.parametrize("rank,mode,pad,align_corners,seed", _gs_cases())
def test_grid_sample_matches_onnxruntime(rank, mode, pad, align_corners, seed):
    rng = np.random.default_rng(seed)
    spatial = tuple(int(v) for v in rng.integers(1, 7, size=rank))
    x = rng.standard_normal((2, 3, *spatial)).astype(np.float32)
    out_spatial = tuple(int(v) for v in rng.integers(1, 5, size=rank))
    grid = rng.uniform(-1.7, 1.7, size=(2, *out_spatial, rank)).astype(np.float32)
    node = helper.make_node("GridSample", ["X", "G"], ["Y"], mode=mode, padding_mode=pad, align_corners=align_corners)
    (expected,) = ort_node(node, {"X": x, "G": grid}, opset=20)
    (got,) = onnxrt_node(node, {"X": x, "G": grid}, opset=20)
    assert got.shape == (2, 3, *out_spatial) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def loop_bilinear_zeros(img, gx, gy, align_corners):
    h, w = img.shape
    if align_corners:
        x, y = (gx + 1) / 2 * (w - 1), (gy + 1) / 2 * (h - 1)
    else:
        x, y = ((gx + 1) * w - 1) / 2, ((gy + 1) * h - 1) / 2
    x0, y0 = int(np.floor(x)), int(np.floor(y))
    acc = 0.0
    for yy, wy in ((y0, 1 - (y - y0)), (y0 + 1, y - y0)):
        for xx, wx in ((x0, 1 - (x - x0)), (x0 + 1, x - x0)):
            if 0 <= yy < h and 0 <= xx < w:
                acc += wy * wx * img[yy, xx]
    return acc


def test_grid_sample_16_bilinear_matches_plain_loop():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 1, 4, 5))
    grid = rng.uniform(-1.3, 1.3, size=(1, 3, 2, 2))
    node = helper.make_node("GridSample", ["X", "G"], ["Y"], mode="bilinear")
    (got,) = onnxrt_node(node, {"X": x, "G": grid}, opset=16)
    expected = [[loop_bilinear_zeros(x[0, 0], grid[0, i, j, 0], grid[0, i, j, 1], 0) for j in range(2)] for i in range(3)]
    np.testing.assert_allclose(got[0, 0], expected, rtol=1e-12)
    assert got.dtype == np.float64


def test_grid_sample_16_is_4d_only_and_names_its_modes():
    x = np.ones((1, 1, 2, 2, 2), np.float32)
    grid = np.zeros((1, 1, 1, 1, 3), np.float32)
    with pytest.raises(KernelError, match="4-D"):
        onnxrt_node(helper.make_node("GridSample", ["X", "G"], ["Y"]), {"X": x, "G": grid}, opset=16)
    with pytest.raises((InvalidAttributeError, GraphError), match="'mode'"):
        onnxrt_node(helper.make_node("GridSample", ["X", "G"], ["Y"], mode="linear"),
                    {"X": x[..., 0], "G": grid[..., :2][:, 0]}, opset=16)


def test_grid_sample_nearest_rounds_half_to_even_and_keeps_any_type():
    x = np.array([[["a", "b", "c", "d"]]], dtype=object)  # (N=1, C=1, W=4)
    # x coordinates 0.5 and 1.5 (align_corners=1): half to even gives 0 and 2
    grid = np.array([[[-1 + 0.5 * 2 / 3], [-1 + 1.5 * 2 / 3], [3.0]]], dtype=np.float64)
    y = grid_sample(x, grid, "nearest", "zeros", 1)
    assert y.tolist() == [[["a", "c", ""]]]
    b = grid_sample(np.array([[[True, False]]]), np.array([[[-1.0], [1.0]]]), "nearest", "border", 1)
    assert b.dtype == np.bool_ and b.tolist() == [[[True, False]]]


def test_grid_sample_integer_and_half_types():
    x = np.arange(16, dtype=np.int32).reshape(1, 1, 4, 4) * 10
    grid = np.random.default_rng(0).uniform(-1, 1, size=(1, 3, 3, 2)).astype(np.float32)
    y = grid_sample(x, grid, "linear", "border", 0)
    ref = grid_sample(x.astype(np.float64), grid, "linear", "border", 0)
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, np.trunc(ref).astype(np.int32))
    h = grid_sample(x.astype(ml_dtypes.bfloat16), grid.astype(np.float16), "cubic", "reflection", 1)
    assert h.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(h.astype(np.float64), grid_sample(x.astype(np.float64), grid, "cubic", "reflection", 1),
                               rtol=2e-2, atol=1.0)
    with pytest.raises(KernelError, match="cannot sample"):
        grid_sample(np.array([[["a"]]], dtype=object), np.zeros((1, 1, 1)), "linear")
    with pytest.raises(KernelError, match="grid must have shape"):
        grid_sample(np.ones((1, 1, 2, 2)), np.zeros((1, 2, 2, 3)))


# --------------------------------------------------------------------------------------
# AffineGrid
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dims", [(2, 3, 4, 5), (1, 1, 3, 2, 4), (2, 1, 1, 7), (1, 2, 6, 1)])
@pytest.mark.parametrize("align_corners", [0, 1])
def test_affine_grid_matches_onnxruntime(dims, align_corners):
    rng = np.random.default_rng(sum(dims))
    r = len(dims) - 2
    theta = rng.standard_normal((dims[0], r, r + 1)).astype(np.float32)
    node = helper.make_node("AffineGrid", ["t", "s"], ["g"], align_corners=align_corners)
    feeds = {"t": theta, "s": np.array(dims, np.int64)}
    (expected,) = ort_node(node, feeds, opset=20)
    (got,) = onnxrt_node(node, feeds, opset=20)
    assert got.shape == (dims[0], *dims[2:], r) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6)


def test_affine_grid_identity_gives_pixel_centres():
    theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float64)
    g = affine_grid(theta, np.array([1, 1, 2, 4]), align_corners=0)
    np.testing.assert_allclose(g[0, 0, :, 0], [-0.75, -0.25, 0.25, 0.75])
    np.testing.assert_allclose(g[0, :, 0, 1], [-0.5, 0.5])
    g1 = affine_grid(theta, np.array([1, 1, 2, 4]), align_corners=1)
    np.testing.assert_allclose(g1[0, 0, :, 0], [-1, -1 / 3, 1 / 3, 1])
    h = affine_grid(theta.astype(np.float16), np.array([1, 1, 2, 4]))
    assert h.dtype == np.float16
    with pytest.raises(KernelError, match="theta must have shape"):
        affine_grid(np.zeros((1, 3, 4)), np.array([1, 1, 2, 2]))
    with pytest.raises(KernelError, match="size must hold"):
        affine_grid(theta, np.array([1, 1, 2]))


# --------------------------------------------------------------------------------------
# RoiAlign
# --------------------------------------------------------------------------------------


def _roi_cases():
    return [(o, c, m, s) for o, c, m, s in itertools.product([10, 16], ["half_pixel", "output_half_pixel"], ["avg", "max"], [0, 2])
            if not (o == 10 and c == "half_pixel")]


@pytest.mark.parametrize("opset,ctm,mode,sampling_ratio", _roi_cases())
def test_roi_align_matches_onnxruntime(opset, ctm, mode, sampling_ratio):
    rng = np.random.default_rng(opset + sampling_ratio + len(ctm) + len(mode))
    x = rng.standard_normal((2, 3, 9, 11)).astype(np.float32)
    corner = rng.uniform(-3, 11, size=(12, 2))
    rois = np.concatenate([corner, corner + rng.uniform(0, 9, size=(12, 2))], axis=1).astype(np.float32)
    batch = rng.integers(0, 2, size=12).astype(np.int64)
    attrs = dict(mode=mode, output_height=3, output_width=4, sampling_ratio=sampling_ratio, spatial_scale=0.5)
    if opset > 10:
        attrs["coordinate_transformation_mode"] = ctm
    node = helper.make_node("RoiAlign", ["X", "R", "B"], ["Y"], **attrs)
    feeds = {"X": x, "R": rois, "B": batch}
    (expected,) = ort_node(node, feeds, opset=opset)
    (got,) = onnxrt_node(node, feeds, opset=opset)
    assert got.shape == (12, 3, 3, 4) and got.dtype == np.float32
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_roi_align_constant_map_and_chunks(monkeypatch):
    x = np.full((1, 2, 6, 6), 3.0)
    rois = np.array([[0, 0, 5, 5], [1, 1, 2, 2], [0.5, 0.5, 4.5, 3]], np.float64)
    y = roi_align(x, rois, np.zeros(3, np.int64), output_height=2, output_width=2)
    np.testing.assert_allclose(y, 3.0)  # bilinear samples of a constant map, inside it
    from onnxrt.ops_cpu import op_roi_align

    rng = np.random.default_rng(0)
    z = rng.standard_normal((1, 2, 6, 6))
    whole = roi_align(z, rois, np.zeros(3, np.int64), "max", 2, 3, sampling_ratio=2)
    monkeypatch.setattr(op_roi_align, "_CHUNK_ELEMENTS", 1)  # one roi per chunk
    np.testing.assert_array_equal(roi_align(z, rois, np.zeros(3, np.int64), "max", 2, 3, sampling_ratio=2), whole)


def test_roi_align_errors_and_half_types():
    x = np.ones((1, 1, 4, 4), np.float16)
    rois = np.array([[0, 0, 2, 2]], np.float16)
    y = roi_align(x, rois, np.array([0]))
    assert y.dtype == np.float16 and y.shape == (1, 1, 1, 1)
    with pytest.raises(IndexOutOfRangeError, match="batch_indices holds 1"):
        roi_align(x, rois, np.array([1]))
    with pytest.raises(KernelError, match="rois must have shape"):
        roi_align(x, rois[:, :3], np.array([0]))
    node = helper.make_node("RoiAlign", ["X", "R", "B"], ["Y"], mode="sum")
    with pytest.raises((InvalidAttributeError, GraphError), match="'mode'"):
        onnxrt_node(node, {"X": x, "R": rois, "B": np.array([0], np.int64)}, opset=16)


# --------------------------------------------------------------------------------------
# NonMaxSuppression
# --------------------------------------------------------------------------------------


def loop_nms(boxes, scores, max_out, iou_thr, score_thr, center):
    """Greedy NMS one box at a time, from the spec text."""
    out = []
    for b in range(scores.shape[0]):
        bx = boxes[b].astype(np.float32)
        if center:
            xc, yc, w, h = bx.T
            y0, x0, y1, x1 = yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2
        else:
            y0, x0 = np.minimum(bx[:, 0], bx[:, 2]), np.minimum(bx[:, 1], bx[:, 3])
            y1, x1 = np.maximum(bx[:, 0], bx[:, 2]), np.maximum(bx[:, 1], bx[:, 3])
        for c in range(scores.shape[1]):
            sc = scores[b, c]
            order = sorted((i for i in range(len(sc)) if score_thr is None or sc[i] > score_thr), key=lambda i: (-sc[i], i))
            kept = []
            for i in order:
                if len(kept) >= max_out:
                    break
                ok = True
                for k in kept:
                    ih = np.float32(min(y1[i], y1[k]) - max(y0[i], y0[k]))
                    iw = np.float32(min(x1[i], x1[k]) - max(x0[i], x0[k]))
                    if ih <= 0 or iw <= 0:
                        continue
                    inter = ih * iw
                    union = (y1[i] - y0[i]) * (x1[i] - x0[i]) + (y1[k] - y0[k]) * (x1[k] - x0[k]) - inter
                    if inter / union > np.float32(iou_thr):
                        ok = False
                        break
                if ok:
                    kept.append(i)
            out.extend([b, c, i] for i in kept)
    return np.array(out, dtype=np.int64).reshape(-1, 3)


def _random_boxes(rng, batches, n, spread, size, center):
    ctr = rng.uniform(0, spread, size=(batches, n, 2))
    wh = rng.uniform(0.5, size, size=(batches, n, 2))
    if rng.random() < 0.5:
        ctr, wh = np.round(ctr), np.round(wh) + 1  # exact ties and touching boxes
    if center:
        return np.concatenate([ctr, wh], -1).astype(np.float32)
    c1, c2 = ctr - wh / 2, ctr + wh / 2
    flip = rng.random((batches, n, 1)) < 0.3  # any pair of opposite corners
    return np.concatenate([np.where(flip, c2, c1), np.where(flip, c1, c2)], -1).astype(np.float32)


@pytest.mark.parametrize("seed", range(24))
def test_nms_matches_onnxruntime_and_loop(seed):
    rng = np.random.default_rng(seed)
    center = seed % 2
    batches, classes, n = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(0, 80))
    boxes = _random_boxes(rng, batches, n, float(rng.choice([15, 40, 200])), 12, center)
    scores = rng.random((batches, classes, n)).astype(np.float32)
    if seed % 3 == 0:
        scores = np.round(scores * 4) / 4  # ties: lower index first
    max_out = int(rng.choice([1, 3, 10, 100]))
    iou, thr = float(rng.choice([0.0, 0.3, 0.5, 0.9])), float(rng.choice([0.0, 0.25]))
    node = helper.make_node("NonMaxSuppression", ["B", "S", "M", "I", "T"], ["Y"], center_point_box=center)
    feeds = {"B": boxes, "S": scores, "M": np.array([max_out], np.int64), "I": np.array([iou], np.float32),
             "T": np.array([thr], np.float32)}
    (expected,) = ort_node(node, feeds, opset=11, out_types=[TP.INT64])
    (got,) = onnxrt_node(node, feeds, opset=11)
    assert got.dtype == np.int64 and got.shape == expected.reshape(-1, 3).shape
    np.testing.assert_array_equal(got, expected.reshape(-1, 3))
    np.testing.assert_array_equal(got, loop_nms(boxes, scores, max_out, iou, thr, center))


def test_nms_dense_clusters_and_long_chains(monkeypatch):
    rng = np.random.default_rng(1)
    # many boxes around a few objects: the vectorized greedy steps remove them
    objects = rng.uniform(0, 100, size=(5, 2))
    ctr = objects[rng.integers(0, 5, 400)] + rng.normal(0, 1, size=(400, 2))
    boxes = np.concatenate([ctr - 5, ctr + 5], axis=1)[None].astype(np.float32)
    scores = rng.random((1, 2, 400)).astype(np.float32)
    got = non_max_suppression(boxes, scores, 50, 0.5, 0.1)
    np.testing.assert_array_equal(got, loop_nms(boxes, scores, 50, 0.5, 0.1, 0))
    # a chain: each box overlaps only the next one, by decreasing score
    x = np.arange(60, dtype=np.float32) * 0.6
    chain = np.stack([np.zeros(60), x, np.ones(60), x + 1], axis=1)[None].astype(np.float32)
    chain_scores = np.linspace(1, 0.1, 60, dtype=np.float32)[None, None]
    monkeypatch.setattr(op_non_max_suppression, "_MAX_ROUNDS", 3)  # force the sequential fallback
    got = non_max_suppression(chain, chain_scores, 100, 0.2, None)  # neighbours: IoU 0.4 / 1.6
    np.testing.assert_array_equal(got, loop_nms(chain, chain_scores, 100, 0.2, None, 0))
    assert got[:, 2].tolist() == list(range(0, 60, 2))


def test_nms_iou_equal_to_threshold_is_kept():
    boxes = np.array([[[0, 0, 1, 1], [0.5, 0.5, 1.5, 1.5]]], np.float32)
    scores = np.array([[[0.9, 0.8]]], np.float32)
    got = non_max_suppression(boxes, scores, 3, float(np.float32(0.25 / 1.75)), 0.0)
    assert got.tolist() == [[0, 0, 0], [0, 0, 1]]


def test_nms_optional_inputs_and_errors():
    boxes = np.array([[[0, 0, 1, 1], [0, 0, 1, 1]]], np.float32)
    scores = np.array([[[0.9, 0.8]]], np.float32)
    node = helper.make_node("NonMaxSuppression", ["B", "S"], ["Y"])
    (got,) = onnxrt_node(node, {"B": boxes, "S": scores}, opset=10)
    assert got.shape == (0, 3) and got.dtype == np.int64  # max_output_boxes_per_class defaults to 0
    assert non_max_suppression(boxes, scores, 5, 0.5).tolist() == [[0, 0, 0]]
    assert non_max_suppression(boxes, scores, -1).shape == (0, 3)
    with pytest.raises(KernelError, match="iou_threshold must lie"):
        non_max_suppression(boxes, scores, 5, 1.5)
    with pytest.raises(KernelError, match="scores must have shape"):
        non_max_suppression(boxes, scores[:, :, :1], 5)


# --------------------------------------------------------------------------------------
# CenterCropPad
# --------------------------------------------------------------------------------------


def test_center_crop_pad_crop_and_pad():
    x = np.arange(20, dtype=np.float32).reshape(4, 5)
    y = center_crop_pad(x, np.array([2, 8]))
    expected = np.zeros((2, 8), np.float32)
    expected[:, 1:6] = x[1:3]  # crop starts at floor((4-2)/2); pad puts 1 zero left, 2 right
    np.testing.assert_array_equal(y, expected)
    z = center_crop_pad(x, np.array([3]), axes=[-1])
    np.testing.assert_array_equal(z, x[:, 1:4])


def test_center_crop_pad_strings_bool_and_node():
    s = np.array([["a", "b"], ["c", "d"]], dtype=object)
    y = center_crop_pad(s, np.array([3, 1]))
    assert y.tolist() == [["a"], ["c"], [""]]
    b = center_crop_pad(np.ones((1, 1), np.bool_), np.array([2, 2]))
    assert b.dtype == np.bool_ and b.sum() == 1
    node = helper.make_node("CenterCropPad", ["x", "s"], ["y"], axes=[0])
    (got,) = onnxrt_node(node, {"x": np.arange(6, dtype=np.int64).reshape(3, 2), "s": np.array([1], np.int32)}, opset=18)
    assert got.tolist() == [[2, 3]] and got.dtype == np.int64


def test_center_crop_pad_errors():
    with pytest.raises(KernelError, match="shape has 1 values but 2 axes"):
        center_crop_pad(np.ones((2, 2)), np.array([1]))
    with pytest.raises(KernelError, match="sizes must be >= 0"):
        center_crop_pad(np.ones((2, 2)), np.array([1, -1]))
    with pytest.raises(KernelError, match="repeat"):
        center_crop_pad(np.ones((2, 2)), np.array([1, 1]), axes=[0, -2])


# --------------------------------------------------------------------------------------
# ImageDecoder
# --------------------------------------------------------------------------------------


def _encode(image: np.ndarray, fmt: str) -> np.ndarray:
    from PIL import Image

    with io.BytesIO() as f:
        Image.fromarray(image).save(f, format=fmt)
        return np.frombuffer(f.getvalue(), dtype=np.uint8)


@pytest.mark.parametrize("fmt", ["PNG", "BMP", "TIFF", "PPM"])
def test_image_decoder_lossless_roundtrip(fmt):
    rng = np.random.default_rng(0)
    image = rng.integers(0, 256, size=(7, 9, 3), dtype=np.uint8)
    data = _encode(image, fmt)
    node = helper.make_node("ImageDecoder", ["s"], ["y"])
    (rgb,) = onnxrt_node(node, {"s": data}, opset=20)
    assert rgb.dtype == np.uint8 and rgb.shape == (7, 9, 3)
    np.testing.assert_array_equal(rgb, image)
    np.testing.assert_array_equal(image_decoder(data, "BGR"), image[:, :, ::-1])
    gray = image_decoder(data, "Grayscale")
    assert gray.shape == (7, 9, 1)
    # ITU-R 601-2 luma, as Pillow's "L" conversion
    rgb = image.astype(np.float64)
    luma = (rgb[..., 0] * 299 + rgb[..., 1] * 587 + rgb[..., 2] * 114) / 1000
    assert np.abs(gray[..., 0].astype(float) - luma).max() <= 1


def test_image_decoder_garbage_gives_an_empty_image():
    y = image_decoder(np.frombuffer(b"not an image at all", dtype=np.uint8), "RGB")
    assert y.shape == (0, 0, 3) and y.dtype == np.uint8
    assert image_decoder(np.zeros(0, np.uint8), "Grayscale").shape == (0, 0, 1)


def test_image_decoder_without_pillow_names_the_extra(monkeypatch):
    real_import = builtins.__import__

    def no_pil(name, *args, **kwargs):
        if name == "PIL" or name.startswith("PIL."):
            raise ImportError("No module named 'PIL'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_pil)
    with pytest.raises(KernelError, match=r"onnxrt\[image\]"):
        image_decoder(np.zeros(4, np.uint8))


def test_image_decoder_rejects_an_unknown_pixel_format():
    node = helper.make_node("ImageDecoder", ["s"], ["y"], pixel_format="CMYK")
    with pytest.raises((InvalidAttributeError, GraphError), match="pixel_format"):
        onnxrt_node(node, {"s": np.zeros(4, np.uint8)}, opset=20)


@pytest.mark.parametrize("seed", range(12))
def test_compiled_nms_equals_the_numpy_path(seed):
    """The numba greedy loop keeps exactly the boxes of the numpy sweep-and-resolve path:
    several batches and classes, both box encodings, ties, thresholds, NaN and empty boxes."""
    from onnxrt import native as _jit

    rng = np.random.default_rng(100 + seed)
    center = seed % 2
    batches, classes, n = int(rng.integers(1, 3)), int(rng.integers(1, 4)), int(rng.integers(1, 400))
    boxes = _random_boxes(rng, batches, n, float(rng.choice([15, 40, 200])), 12, center)
    if seed % 4 == 1:
        boxes[0, : max(1, n // 10), int(rng.integers(0, 4))] = np.nan
        boxes[0, -1] = boxes[0, -1, :1]  # a degenerate (empty) box
    scores = rng.random((batches, classes, n)).astype(np.float32)
    if seed % 3 == 0:
        scores = np.round(scores * 4) / 4
    max_out = int(rng.choice([1, 5, 50, 1000]))
    iou, thr = float(rng.choice([0.0, 0.3, 0.5, 0.9])), rng.choice([None, 0.25])
    assert _jit.kernels() is not None
    from onnxrt.fastpaths.nms import nms_compiled

    got = nms_compiled(boxes, scores, max_out, iou, thr, center)
    expected = non_max_suppression(boxes, scores, max_out, iou, thr, center)  # the reference kernel
    assert got.dtype == np.int64 and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    if thr is not None:  # and the plain loop of the spec (a NaN in one group once broke the sweep of the others)
        np.testing.assert_array_equal(got, loop_nms(boxes, scores, max_out, iou, thr, center))
