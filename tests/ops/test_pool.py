"""The pooling family: MaxPool (Indices), AveragePool, LpPool, Global*Pool, MaxUnpool, MaxRoiPool.

Random cases against onnxruntime (values, shapes, dtypes; 1-D/2-D/3-D, strides, pads,
dilations, ceil_mode, every auto_pad, count_include_pad, storage_order) and plain-loop
definitions written from the spec text where onnxruntime differs or is silent.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

import onnxrt
from onnxrt.errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu._conv_common import window_geometry
from onnxrt.ops_cpu.op_max_roi_pool import max_roi_pool
from onnxrt.ops_cpu.op_max_unpool import max_unpool
from onnxrt.ops_cpu.op_pool import global_pool, pool

from ..helpers import make_single_node_model
from .test_conv import _ELEM, onnxrt_run, ort_run

# --------------------------------------------------------------------------------------
# plain-loop definition
# --------------------------------------------------------------------------------------


def loop_pool(x, mode, kernel, strides, dilations, pads_begin, pads_end, out_shape, count_include_pad=0, p=2):
    """Every output pixel from its window: positions o*s - pad + k*d inside the input count;
    with count_include_pad the declared pads count in the average's divisor too."""
    n_img, n_ch = x.shape[:2]
    y = np.zeros((n_img, n_ch) + tuple(out_shape), np.float64)
    for o in itertools.product(*[range(v) for v in out_shape]):
        vals, padded_count = [], 0
        for k in itertools.product(*[range(v) for v in kernel]):
            pos = [oi * s - b + ki * d for oi, s, b, ki, d in zip(o, strides, pads_begin, k, dilations)]
            if all(0 <= q < size for q, size in zip(pos, x.shape[2:])):
                vals.append(x[(slice(None), slice(None)) + tuple(pos)].astype(np.float64))
            elif all(-b <= q < size + e for q, b, e, size in zip(pos, pads_begin, pads_end, x.shape[2:])):
                padded_count += 1
        stack = np.stack(vals)
        if mode == "max":
            y[(slice(None), slice(None)) + o] = stack.max(axis=0)
        elif mode == "avg":
            y[(slice(None), slice(None)) + o] = stack.sum(axis=0) / (len(vals) + (padded_count if count_include_pad else 0))
        else:
            y[(slice(None), slice(None)) + o] = (np.abs(stack) ** p).sum(axis=0) ** (1.0 / p)
    return y


def _rand_pool_case(rng, nd):
    spatial = tuple(int(v) for v in rng.integers(3, 9 if nd < 3 else 7, nd))
    kernel = [int(v) for v in rng.integers(1, 4, nd)]
    atts = {"kernel_shape": kernel, "strides": [int(v) for v in rng.integers(1, 3, nd)]}
    x = rng.standard_normal((2, 3) + spatial).astype(np.float32)
    return x, atts


# --------------------------------------------------------------------------------------
# MaxPool / AveragePool / LpPool
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("auto_pad", ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("ceil_mode", [0, 1])
def test_pools_match_onnxruntime(nd, auto_pad, ceil_mode):
    rng = np.random.default_rng(10 * nd + len(auto_pad) + 100 * ceil_mode)
    checked = 0
    for trial in range(6):
        x, atts = _rand_pool_case(rng, nd)
        atts["ceil_mode"] = ceil_mode
        if auto_pad == "NOTSET":
            # onnxruntime wants pads smaller than the kernel
            atts["pads"] = [int(rng.integers(0, k)) for k in atts["kernel_shape"] * 2]
            atts["dilations"] = [int(v) for v in rng.integers(1, 3, nd)]
        else:
            atts["auto_pad"] = auto_pad  # onnxruntime ignores dilations when computing SAME pads
        for op, extra, kwargs in [
            ("MaxPool", {}, {"mode": "max"}),
            ("AveragePool", {"count_include_pad": trial % 2}, {"mode": "avg", "count_include_pad": trial % 2}),
            ("LpPool", {"p": 3}, {"mode": "lp", "p": 3}),
        ]:
            try:
                (ref,) = ort_run(op, [("x", x)], TensorProto.FLOAT, opset=19, **atts, **extra)
            except Exception:  # noqa: BLE001  (a window larger than the input)
                continue
            kw = {k: v for k, v in atts.items() if k != "kernel_shape"}
            y = pool(x, kwargs.pop("mode"), atts["kernel_shape"], **kw, **kwargs)
            assert y.dtype == np.float32 and y.shape == ref.shape, (op, atts)
            np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-5, err_msg=f"{op} {atts}")
            checked += 1
    assert checked >= 6


@pytest.mark.parametrize("storage_order", [0, 1])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_maxpool_indices_match_onnxruntime(storage_order, nd):
    rng = np.random.default_rng(50 + nd + 7 * storage_order)
    for _ in range(6):
        x, atts = _rand_pool_case(rng, nd)
        atts["pads"] = [int(rng.integers(0, k)) for k in atts["kernel_shape"] * 2]
        atts["dilations"] = [int(v) for v in rng.integers(1, 3, nd)]
        atts["ceil_mode"] = int(rng.integers(0, 2))
        try:
            ref_y, ref_i = ort_run("MaxPool", [("x", x)], [TensorProto.FLOAT, TensorProto.INT64], opset=12, n_outputs=2,
                                   storage_order=storage_order, **atts)
        except Exception:  # noqa: BLE001
            continue
        kw = {k: v for k, v in atts.items() if k != "kernel_shape"}
        y, idx = pool(x, "max", atts["kernel_shape"], storage_order=storage_order, with_indices=True, **kw)
        assert idx.dtype == np.int64 and idx.shape == ref_i.shape
        np.testing.assert_array_equal(y, ref_y)
        np.testing.assert_array_equal(idx, ref_i)


def test_maxpool_indices_point_at_the_maxima():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 7, 6)).astype(np.float32)
    y, idx = pool(x, "max", [3, 2], strides=[2, 2], pads=[1, 0, 1, 1], with_indices=True)
    np.testing.assert_array_equal(x.reshape(-1)[idx], y)
    # column-major spatial order: h + H*w inside each (n, c) plane
    _, idx_cm = pool(x, "max", [3, 2], strides=[2, 2], pads=[1, 0, 1, 1], with_indices=True, storage_order=1)
    plane, rem = np.divmod(idx, 42)
    h, w = np.divmod(rem, 6)
    np.testing.assert_array_equal(idx_cm, plane * 42 + h + 7 * w)


def test_maxpool_first_maximum_wins_and_nan_is_ignored():
    x = np.array([[[1.0, 3.0, 3.0, np.nan, 2.0, np.nan, np.nan]]], np.float32)
    y, idx = pool(x, "max", [2], strides=[1], with_indices=True)
    np.testing.assert_array_equal(y[0, 0], [3, 3, 3, 2, 2, np.nan])
    np.testing.assert_array_equal(idx[0, 0], [1, 1, 2, 4, 4, 5])
    np.testing.assert_array_equal(pool(x, "max", [2], strides=[1])[0, 0], [3, 3, 3, 2, 2, np.nan])


@pytest.mark.parametrize("dtype", [np.int8, np.uint8])
def test_maxpool_integer_types(dtype):
    rng = np.random.default_rng(4)
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, (1, 2, 6, 7)).astype(dtype)
    x[0, 0, 0, 0] = info.min  # a real minimum next to the padding
    atts = dict(kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    (ref,) = ort_run("MaxPool", [("x", x)], _ELEM[np.dtype(dtype)], opset=12, **atts)
    y = pool(x, "max", [3, 3], strides=[2, 2], pads=[1, 1, 1, 1])
    assert y.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(y, ref)
    y2, idx = pool(x, "max", [3, 3], strides=[2, 2], pads=[1, 1, 1, 1], with_indices=True)
    np.testing.assert_array_equal(y2, y)
    np.testing.assert_array_equal(x.reshape(-1)[idx], y)


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
@pytest.mark.parametrize("mode", ["max", "avg", "lp"])
def test_pool_element_types(dtype, mode):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 7, 5)).astype(np.float32)
    kw = dict(strides=[2, 1], pads=[1, 1, 0, 1], dilations=[1, 2])
    ref = pool(x.astype(np.float64), mode, [3, 2], **kw)
    y = pool(x.astype(dtype), mode, [3, 2], **kw)
    assert y.dtype == np.dtype(dtype)
    tol = {np.float16: 5e-3, ml_dtypes.bfloat16: 2e-2, np.float64: 1e-12}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol, atol=tol)
    pb, pe, out = window_geometry(x.shape[2:], [3, 2], [2, 1], [1, 2], kw["pads"])
    np.testing.assert_allclose(ref, loop_pool(x, mode, [3, 2], [2, 1], [1, 2], pb, pe, out), rtol=1e-6, atol=1e-6)


def test_average_pool_count_include_pad_and_ceil_mode_against_the_definition():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((1, 2, 7, 6)).astype(np.float64)
    for cip, ceil, dil in itertools.product((0, 1), (0, 1), (1, 2)):
        kw = dict(strides=[2, 3], pads=[1, 0, 2, 1], dilations=[dil, 1], ceil_mode=ceil)
        pb, pe, out = window_geometry(x.shape[2:], [3, 2], [2, 3], [dil, 1], kw["pads"], "NOTSET", bool(ceil))
        y = pool(x, "avg", [3, 2], count_include_pad=cip, **kw)
        np.testing.assert_allclose(y, loop_pool(x, "avg", [3, 2], [2, 3], [dil, 1], pb, pe, out, cip), rtol=1e-12)


def test_pool_spec_examples():
    x = np.arange(1, 26, dtype=np.float32).reshape(1, 1, 5, 5)
    np.testing.assert_array_equal(pool(x, "max", [2, 2], strides=[2, 2])[0, 0], [[7, 9], [17, 19]])
    np.testing.assert_array_equal(pool(x, "max", [3, 3], strides=[2, 2], ceil_mode=1)[0, 0], [[13, 15], [23, 25]])
    np.testing.assert_allclose(pool(x, "avg", [5, 5], pads=[2, 2, 2, 2], count_include_pad=1)[0, 0, 0, :2], [63 / 25, 90 / 25])
    np.testing.assert_allclose(pool(x, "avg", [5, 5], pads=[2, 2, 2, 2])[0, 0, 0, :2], [7.0, 7.5])
    # maxpool_2d_ceil_output_size_reduce_by_one: the last window would start in the padding
    y = pool(np.ones((1, 1, 2, 2), np.float32), "max", [1, 1], strides=[2, 2], ceil_mode=1)
    assert y.shape == (1, 1, 1, 1)


@pytest.mark.parametrize("opset", [1, 8, 10, 11, 12, 22])
def test_maxpool_every_version_through_a_session(opset):
    rng = np.random.default_rng(opset)
    x = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    atts = dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1])
    if opset >= 10:
        atts.update(ceil_mode=1, dilations=[1, 2])
    types = [TensorProto.FLOAT, TensorProto.INT64][: 2 if opset >= 8 else 1]
    ys = onnxrt_run("MaxPool", [("x", x)], types, opset, n_outputs=len(types), **atts)
    refs = ort_run("MaxPool", [("x", x)], types, opset=max(opset, 7), n_outputs=len(types), **atts)
    for y, ref in zip(ys, refs):
        assert y.dtype == ref.dtype
        np.testing.assert_array_equal(y, ref)


@pytest.mark.parametrize("opset", [1, 7, 10, 11, 19, 22])
def test_average_pool_every_version_through_a_session(opset):
    rng = np.random.default_rng(opset)
    x = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    atts = dict(kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1])
    if opset >= 7:
        atts["count_include_pad"] = 1
    if opset >= 10:
        atts["ceil_mode"] = 1
    if opset >= 19:
        atts["dilations"] = [1, 2]
    (y,) = onnxrt_run("AveragePool", [("x", x)], TensorProto.FLOAT, opset, **atts)
    (ref,) = ort_run("AveragePool", [("x", x)], TensorProto.FLOAT, opset=max(opset, 7), **atts)
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("opset", [1, 2, 11, 18, 22])
def test_lp_pool_every_version_through_a_session(opset):
    rng = np.random.default_rng(opset)
    x = rng.standard_normal((1, 2, 6, 5)).astype(np.float32)
    atts = dict(kernel_shape=[2, 2], strides=[2, 1], pads=[1, 0, 0, 1], p=3.0 if opset == 1 else 3)
    (y,) = onnxrt_run("LpPool", [("x", x)], TensorProto.FLOAT, opset, **atts)
    pb, pe, out = window_geometry(x.shape[2:], [2, 2], [2, 1], [1, 1], atts["pads"])
    np.testing.assert_allclose(y, loop_pool(x, "lp", [2, 2], [2, 1], [1, 1], pb, pe, out, p=3), rtol=1e-5)
    if opset >= 2:
        (ref,) = ort_run("LpPool", [("x", x)], TensorProto.FLOAT, opset=opset, **atts)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)


def test_pool_errors():
    x = np.zeros((1, 1, 4, 4), np.float32)
    with pytest.raises(KernelError, match=r"X must have rank 4 \(N, C and 2 spatial axes"):
        pool(np.zeros((1, 4, 4), np.float32), "max", [2, 2])
    with pytest.raises(KernelError, match=r"window .* is larger than the padded input"):
        pool(x, "avg", [3, 3], dilations=[3, 3])
    with pytest.raises(KernelError, match=r"'strides' must hold values >= 1"):
        pool(x, "max", [2, 2], strides=[0, 1])
    model = make_single_node_model("MaxPool", [("x", TensorProto.FLOAT, [1, 1, 4, 4])], [("y", TensorProto.FLOAT, None)],
                                   opset=12, kernel_shape=[2, 2], storage_order=2)
    with pytest.raises(InvalidAttributeError, match=r"'storage_order' is 2, expected 0 or 1"):
        onnxrt.InferenceSession(model.SerializeToString())


def test_pool_does_not_modify_its_input():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    x.flags.writeable = False
    keep = x.copy()
    for mode in ("max", "avg", "lp"):
        y = pool(x, mode, [1, 1])  # the copy path
        assert not np.shares_memory(y, x)
        pool(x, mode, [3, 3], pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(x, keep)


# --------------------------------------------------------------------------------------
# Global pools
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("op, mode, extra", [("GlobalMaxPool", "max", {}), ("GlobalAveragePool", "avg", {}),
                                             ("GlobalLpPool", "lp", {"p": 3})])
@pytest.mark.parametrize("nd", [1, 2, 3])
def test_global_pools(op, mode, extra, nd):
    rng = np.random.default_rng(nd)
    x = rng.standard_normal((2, 3) + (4,) * nd).astype(np.float32)
    (ref,) = ort_run(op, [("x", x)], TensorProto.FLOAT, opset=2 if op == "GlobalLpPool" else 19, **extra)
    y = global_pool(x, mode, **extra)
    assert y.dtype == np.float32 and y.shape == (2, 3) + (1,) * nd
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    y16 = global_pool(x.astype(ml_dtypes.bfloat16), mode, **extra)
    assert y16.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_allclose(y16.astype(np.float32), ref, rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("spatial", [(13, 13), (7, 7), (64, 64), (65, 65)])  # both sides of the matrix-vector path's limit
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_global_average_pool_matches_a_float64_mean(spatial, dtype):
    rng = np.random.default_rng(7)
    x = (rng.standard_normal((2, 5) + spatial) + 3).astype(dtype)
    ref = x.astype(np.float64).mean(axis=(2, 3), keepdims=True)
    tol = {np.float16: 1e-3, np.float32: 1e-6, np.float64: 1e-13}[dtype]
    for xin in (x, np.swapaxes(x, 2, 3)):  # contiguous, then a transposed view
        before = xin.copy()
        y = global_pool(xin, "avg")
        assert y.dtype == dtype and y.shape == (2, 5, 1, 1)
        np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol)
        np.testing.assert_array_equal(xin, before)


@pytest.mark.parametrize("op, versions", [("GlobalMaxPool", (1, 22)), ("GlobalAveragePool", (1, 22)), ("GlobalLpPool", (1, 2, 22))])
def test_global_pools_every_version(op, versions):
    x = np.arange(24, dtype=np.float64).reshape(1, 2, 3, 4) - 10
    for opset in versions:
        atts = {"p": 2.0 if opset == 1 else 2} if op == "GlobalLpPool" else {}
        (y,) = onnxrt_run(op, [("x", x)], TensorProto.DOUBLE, opset, **atts)
        want = {"GlobalMaxPool": x.max(axis=(2, 3)), "GlobalAveragePool": x.mean(axis=(2, 3)),
                "GlobalLpPool": np.sqrt((x ** 2).sum(axis=(2, 3)))}[op]
        assert y.dtype == np.float64
        np.testing.assert_allclose(y[:, :, 0, 0], want)


# --------------------------------------------------------------------------------------
# MaxUnpool
# --------------------------------------------------------------------------------------


def test_max_unpool_inverts_max_pool():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 3, 6, 8)).astype(np.float32)
    y, idx = pool(x, "max", [2, 2], strides=[2, 2], with_indices=True)
    u = max_unpool(y, idx, kernel_shape=[2, 2], strides=[2, 2])
    assert u.shape == x.shape and u.dtype == np.float32
    (ref,) = ort_run("MaxUnpool", [("y", y), ("i", idx)], TensorProto.FLOAT, opset=11, kernel_shape=[2, 2], strides=[2, 2])
    np.testing.assert_array_equal(u, ref)
    # pooling the unpooled tensor gives back the pooled values (zeros win over negative ones)
    np.testing.assert_array_equal(pool(u, "max", [2, 2], strides=[2, 2]), np.maximum(y, 0))
    np.testing.assert_array_equal(u.reshape(-1)[idx.reshape(-1)], y.reshape(-1))
    assert np.count_nonzero(u) == np.count_nonzero(y)


def test_max_unpool_output_shape_pads_at_the_end():
    """The spec's conformance case: indices of the inferred 4x4 tensor, placed in a 5x5 output."""
    xv = np.array([[[[5, 6], [7, 8]]]], np.float32)
    idx = np.array([[[[5, 7], [13, 15]]]], np.int64)
    u = max_unpool(xv, idx, np.array([1, 1, 5, 5]), kernel_shape=[2, 2], strides=[2, 2])
    want = np.zeros((1, 1, 5, 5), np.float32)
    want[0, 0, 1, 1], want[0, 0, 1, 3], want[0, 0, 3, 1], want[0, 0, 3, 3] = 5, 6, 7, 8
    np.testing.assert_array_equal(u, want)
    np.testing.assert_array_equal(pool(u, "max", [2, 2], strides=[2, 2]), xv)
    # spatial-only output_shape, and one equal to the inferred shape
    np.testing.assert_array_equal(max_unpool(xv, idx, [5, 5], kernel_shape=[2, 2], strides=[2, 2]), want)
    same = max_unpool(xv, idx, [1, 1, 4, 4], kernel_shape=[2, 2], strides=[2, 2])
    np.testing.assert_array_equal(same, want[:, :, :4, :4])


@pytest.mark.parametrize("opset", [9, 11, 22])
def test_max_unpool_versions_and_errors(opset):
    xv = np.array([[[[1.0, 2.0]]]], np.float64)
    idx = np.array([[[[0, 3]]]], np.int64)
    (u,) = onnxrt_run("MaxUnpool", [("x", xv), ("i", idx)], TensorProto.DOUBLE, opset, kernel_shape=[1, 2], strides=[1, 2])
    np.testing.assert_array_equal(u, [[[[1.0, 0.0, 0.0, 2.0]]]])
    assert u.dtype == np.float64
    with pytest.raises(IndexOutOfRangeError, match=r"I holds 4, out of range \[0, 3\]"):
        max_unpool(xv, np.array([[[[0, 4]]]]), kernel_shape=[1, 2], strides=[1, 2])
    with pytest.raises(KernelError, match=r"I must have X's shape"):
        max_unpool(xv, np.array([[[[0]]]]), kernel_shape=[1, 2], strides=[1, 2])


# --------------------------------------------------------------------------------------
# MaxRoiPool
# --------------------------------------------------------------------------------------


def loop_roi_pool(x, rois, pooled, scale):
    """Fast R-CNN: corners scaled and rounded half away from zero, bins floor/ceil, empty bins 0."""
    r_out = np.zeros((len(rois), x.shape[1]) + tuple(pooled), np.float64)
    for r, (b, x1, y1, x2, y2) in enumerate(rois):
        rnd = lambda v: int(np.sign(v) * np.floor(abs(v) + 0.5))  # noqa: E731
        sx, sy, ex, ey = rnd(x1 * scale), rnd(y1 * scale), rnd(x2 * scale), rnd(y2 * scale)
        rh, rw = max(ey - sy + 1, 1), max(ex - sx + 1, 1)
        for i, j in itertools.product(range(pooled[0]), range(pooled[1])):
            hs = min(max(int(np.floor(i * rh / pooled[0])) + sy, 0), x.shape[2])
            he = min(max(int(np.ceil((i + 1) * rh / pooled[0])) + sy, 0), x.shape[2])
            ws = min(max(int(np.floor(j * rw / pooled[1])) + sx, 0), x.shape[3])
            we = min(max(int(np.ceil((j + 1) * rw / pooled[1])) + sx, 0), x.shape[3])
            if he > hs and we > ws:
                r_out[r, :, i, j] = x[int(b), :, hs:he, ws:we].max(axis=(1, 2))
    return r_out


def test_max_roi_pool_matches_onnxruntime_and_the_definition():
    rng = np.random.default_rng(13)
    for trial in range(10):
        x = rng.standard_normal((2, 3, int(rng.integers(5, 12)), int(rng.integers(5, 12)))).astype(np.float32)
        n_rois = int(rng.integers(1, 6))
        scale = float(rng.choice([1.0, 0.5, 0.25]))
        c = rng.uniform(-3, 30, (n_rois, 4))
        corners = np.concatenate([np.minimum(c[:, :2], c[:, 2:]), np.maximum(c[:, :2], c[:, 2:])], axis=1)
        rois = np.concatenate([rng.integers(0, 2, (n_rois, 1)), corners], axis=1).astype(np.float32)
        pooled = [int(v) for v in rng.integers(1, 4, 2)]
        y = max_roi_pool(x, rois, pooled_shape=pooled, spatial_scale=scale)
        assert y.dtype == np.float32 and y.shape == (n_rois, 3, *pooled)
        (ref,) = ort_run("MaxRoiPool", [("x", x), ("r", rois)], TensorProto.FLOAT, opset=1, pooled_shape=pooled, spatial_scale=scale)
        np.testing.assert_array_equal(y, ref)
        np.testing.assert_array_equal(y, loop_roi_pool(x, rois, pooled, scale).astype(np.float32))


def test_max_roi_pool_chunks_and_errors(monkeypatch):
    from onnxrt.ops_cpu import op_max_roi_pool

    rng = np.random.default_rng(14)
    x = rng.standard_normal((1, 2, 9, 9)).astype(np.float64)
    rois = np.array([[0, 0, 0, 8, 8], [0, 2, 1, 5, 7], [0, 7, 7, 30, 30]], np.float64)
    whole = max_roi_pool(x, rois, pooled_shape=[2, 3])
    monkeypatch.setattr(op_max_roi_pool, "_CHUNK_ELEMENTS", 1)
    np.testing.assert_array_equal(max_roi_pool(x, rois, pooled_shape=[2, 3]), whole)
    assert whole.dtype == np.float64
    with pytest.raises(IndexOutOfRangeError, match=r"batch index 1, out of range \[0, 0\]"):
        max_roi_pool(x, np.array([[1, 0, 0, 1, 1]], np.float64), pooled_shape=[1, 1])
    with pytest.raises(KernelError, match=r"rois must have shape \[num_rois, 5\]"):
        max_roi_pool(x, np.zeros((2, 4)), pooled_shape=[1, 1])


@pytest.mark.parametrize("opset", [1, 22])
def test_max_roi_pool_versions(opset):
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    rois = np.array([[0, 0, 0, 3, 3], [0, 1, 1, 2, 2]], np.float32)
    (y,) = onnxrt_run("MaxRoiPool", [("x", x), ("r", rois)], TensorProto.FLOAT, opset, pooled_shape=[2, 2])
    np.testing.assert_array_equal(y[0, 0], [[5, 7], [13, 15]])
    np.testing.assert_array_equal(y[1, 1], [[21, 22], [25, 26]])


@pytest.mark.parametrize("threads", [1, 3])
def test_pools_in_parallel_chunks(monkeypatch, threads):
    """Planes split over the kernel thread pool give the plain-loop result."""
    from onnxrt import parallel

    monkeypatch.setattr(parallel, "KERNEL_THREADS", threads)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 1)
    rng = np.random.default_rng(21)
    x = rng.standard_normal((3, 5, 9, 8))
    kw = dict(strides=[2, 1], pads=[1, 0, 1, 1], dilations=[1, 2], ceil_mode=1)
    pb, pe, out = window_geometry(x.shape[2:], [3, 2], [2, 1], [1, 2], kw["pads"], "NOTSET", True)
    for mode in ("max", "avg", "lp"):
        y = pool(x, mode, [3, 2], count_include_pad=1, **kw)
        ref = loop_pool(x, mode, [3, 2], [2, 1], [1, 2], pb, pe, out, count_include_pad=1)
        np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("mode", ["max", "avg", "lp"])
@pytest.mark.parametrize("auto_pad", ["SAME_UPPER", "SAME_LOWER"])
def test_same_pads_count_the_dilated_kernel(mode, auto_pad):
    """SAME_* gives ceil(S / stride) outputs and pads (O-1)*s + (k-1)*d + 1 - S, the dilated extent
    (the spec's formula; onnxruntime and onnx.reference leave the dilation out and overrun)."""
    rng = np.random.default_rng(31)
    x = rng.standard_normal((1, 2, 3, 7))
    y = pool(x, mode, [2, 3], strides=[1, 2], dilations=[2, 2], auto_pad=auto_pad)
    assert y.shape == (1, 2, 3, 4)
    pb, pe, out = window_geometry(x.shape[2:], [2, 3], [1, 2], [2, 2], None, auto_pad)
    assert (pb, pe) == ((1, 2), (1, 2))  # even totals 2 and 4: both modes split them equally
    np.testing.assert_allclose(y, loop_pool(x, mode, [2, 3], [1, 2], [2, 2], pb, pe, out), rtol=1e-12)
    x1 = np.array([[[0.82177013, -1.3812797, -2.754159]]])
    np.testing.assert_allclose(pool(x1, "lp", [2], dilations=[2], auto_pad="SAME_UPPER")[0, 0],
                               [1.3812797, np.hypot(0.82177013, 2.754159), 1.3812797], rtol=1e-7)


def test_max_pool_window_of_nan_and_padding_is_nan():
    # found by tests/fuzz: the separable fmax gave -inf for [pad, NaN] and NaN for [NaN, pad];
    # a window whose values are all NaN is NaN wherever the padding sits, one holding -inf
    # keeps it, one holding a number ignores the NaN
    x = np.array([np.nan, 1.0, -np.inf, np.nan, -np.inf], np.float32).reshape(1, 1, 5)
    y = pool(x, "max", [2], pads=[1, 1])
    np.testing.assert_array_equal(y, [[[np.nan, 1.0, 1.0, -np.inf, -np.inf, -np.inf]]])
    np.testing.assert_array_equal(pool(np.full((1, 1, 1), np.nan, np.float32), "max", [2], pads=[1, 1]), [[[np.nan, np.nan]]])
    y2 = pool(np.full((1, 1, 2, 2), np.nan, np.float16), "max", [2, 2], pads=[1, 1, 0, 0])
    assert y2.dtype == np.float16 and np.isnan(y2).all()


def test_average_pool_window_wholly_in_padding():
    # found by tests/fuzz: kernel 2 dilated by 2 over one value with a pad on each side reads
    # only padding; onnxrt divided by a count of 0 (onnxruntime gives 0, the sum of nothing)
    x = np.array([[[0.8]]], np.float32)
    np.testing.assert_array_equal(pool(x, "avg", [2], dilations=[2], pads=[1, 1]), [[[0.0]]])
    y = pool(np.array([[[0.8, 1.0]]], np.float32), "avg", [2], dilations=[3], pads=[2, 2])
    np.testing.assert_allclose(y, [[[1.0, 0.0, 0.8]]])


@pytest.mark.parametrize("mode", ["max", "avg", "lp"])
def test_unpadded_windows_take_the_flat_path(mode):
    """Windows inside the input (no pads) reduce by flat passes with strided axes compacted:
    strides, dilations, kernels of one, inputs longer than the windows reach, 1-D to 3-D."""
    rng = np.random.default_rng(7)
    cases = [
        ((2, 3, 11, 11), (3, 3), (2, 2), (1, 1)),  # squeezenet's 3x3/2, odd size
        ((1, 4, 12, 9), (2, 3), (2, 1), (1, 2)),  # mixed strides, dilated inner axis
        ((1, 2, 7, 7), (7, 7), (1, 1), (1, 1)),  # one window per plane
        ((1, 3, 10, 8), (1, 3), (3, 2), (1, 1)),  # kernel of one on a strided axis
        ((2, 2, 13), (3,), (4,), (2,)),  # 1-D, stride above the dilated kernel's reach
        ((1, 2, 6, 7, 8), (2, 3, 2), (2, 2, 3), (1, 1, 2)),  # 3-D
    ]
    for xs, kernel, strides, dilations in cases:
        x = rng.standard_normal(xs).astype(np.float32)
        nd = len(kernel)
        pb, pe, out = window_geometry(xs[2:], kernel, strides, dilations, [0] * (2 * nd))
        y = pool(x, mode, kernel, strides=strides, dilations=dilations, pads=[0] * (2 * nd))
        ref = loop_pool(x.astype(np.float64), mode, kernel, strides, dilations, pb, pe, out)
        assert y.shape == ref.shape and y.dtype == np.float32
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5, err_msg=str((xs, kernel, strides, dilations)))


@pytest.mark.parametrize("mode", ["max", "avg", "lp"])
def test_one_window_per_plane_reduces_the_plane(mode):
    """A window covering the whole unpadded plane (a classifier's closing 7x7 pool) is one
    reduction per plane: the plain-loop values, a plane of NaN alone stays NaN for max,
    NaN beside numbers is ignored, -inf survives; 1-D to 3-D; float16 computes in float32."""
    rng = np.random.default_rng(11)
    for xs in [(2, 5, 7, 7), (1, 3, 6), (1, 2, 3, 4, 5)]:
        x = rng.standard_normal(xs).astype(np.float32)
        kernel = list(xs[2:])
        pb, pe, out = window_geometry(xs[2:], kernel, [1] * len(kernel), [1] * len(kernel), None)
        y = pool(x, mode, kernel)
        ref = loop_pool(x.astype(np.float64), mode, kernel, [1] * len(kernel), [1] * len(kernel), pb, pe, out)
        assert y.shape == ref.shape == xs[:2] + (1,) * len(kernel) and y.dtype == np.float32
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-6)
    if mode == "max":
        x = rng.standard_normal((1, 4, 3, 3)).astype(np.float32)
        x[0, 0] = np.nan
        x[0, 1, 0, 0] = np.nan
        x[0, 2] = -np.inf
        x[0, 3] = np.nan
        x[0, 3, 2, 2] = -np.inf
        y = pool(x, "max", [3, 3]).reshape(4)
        assert np.isnan(y[0]) and y[1] == np.nanmax(x[0, 1]) and y[2] == -np.inf and y[3] == -np.inf
        xi = rng.integers(-128, 127, (2, 3, 4, 4)).astype(np.int8)
        yi = pool(xi, "max", [4, 4])
        assert yi.dtype == np.int8
        np.testing.assert_array_equal(yi.reshape(2, 3), xi.reshape(2, 3, -1).max(axis=2))
    xh = rng.standard_normal((1, 3, 5, 5)).astype(np.float16)
    yh = pool(xh, mode, [5, 5])
    assert yh.dtype == np.float16
    ref = pool(xh.astype(np.float32), mode, [5, 5]).astype(np.float16)
    np.testing.assert_allclose(yh.astype(np.float32), ref.astype(np.float32), rtol=1e-3)


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize(
    "kernel, strides, dilations, pads, ceil_mode, include_pad",
    [
        ((3, 3), (2, 2), (1, 1), (0, 0, 0, 0), 1, 0),  # squeezenet's ceil-mode max pools
        ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 0, 1),
        ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 0, 0),
        ((2, 3), (1, 2), (2, 1), (1, 0, 2, 1), 1, 1),
        ((5, 5), (3, 3), (1, 1), (2, 2, 2, 2), 1, 0),
        ((3, 3), (1, 1), (3, 3), (4, 4, 4, 4), 0, 0),  # dilated windows wholly in the padding
        ((4, 4), (1, 1), (1, 1), (1, 2, 2, 1), 0, 1),  # two taps per pass, then one left over
        ((7, 6), (2, 1), (1, 1), (3, 3, 3, 2), 1, 0),
    ],
)
def test_compiled_pool2d_equals_the_numpy_path(mode, kernel, strides, dilations, pads, ceil_mode, include_pad):
    """The numba pooling loop (float32, 2-D) against the numpy strided-view path, NaN included:
    a window of NaN alone gives NaN, a number beats NaN, a window only in the padding gives -inf."""
    from onnxrt import native as _jit

    rng = np.random.default_rng(11)
    x = rng.standard_normal((2, 5, 9, 10)).astype(np.float32)
    x[0, 0, :3, :3] = np.nan
    x[0, 1, 4, 4] = np.nan
    x[1, 2, :, 0] = -np.inf
    kw = dict(strides=list(strides), dilations=list(dilations), pads=list(pads), ceil_mode=ceil_mode, count_include_pad=include_pad)
    assert _jit.kernels() is not None
    y = _compiled_pool(x, mode, kernel, **kw)
    expected = pool(x, mode, kernel, **kw)  # the reference kernel
    assert y.dtype == np.float32 and y.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    if mode == "max":
        np.testing.assert_array_equal(y, expected)  # max is exact


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("kernel, pads", [((3, 3), (1, 1, 1, 1)), ((2, 3), (0, 1, 1, 0)), ((5, 5), (2, 2, 2, 2))])
def test_compiled_pool2d_groups_of_planes(mode, kernel, pads):
    """Unit row strides pool groups of planes in one flat pass (_jit_kernels.POOL_GROUP_CELLS):
    120 planes of 30x30 make several groups and a shorter last one; NaN and -inf windows
    at the planes on either side of a group's edge stay in their own plane."""
    from onnxrt import native as _jit; from onnxrt.native import loops as _jit_kernels

    rng = np.random.default_rng(12)
    x = rng.standard_normal((3, 40, 30, 30)).astype(np.float32)
    out_h, out_w = 30 + pads[0] + pads[2] - kernel[0] + 1, 30 + pads[1] + pads[3] - kernel[1] + 1
    rows, pitch = out_h - 1 + kernel[0], out_w - 1 + kernel[1]  # the padded plane the kernel pools
    group = _jit_kernels.POOL_GROUP_CELLS // (rows * pitch)
    assert 1 < group < 120 and 120 % group  # several groups, the last one shorter
    flat = x.reshape(120, 30, 30)
    for p in (group - 1, group, 119):
        flat[p, :4, :4] = np.nan
        flat[p, -3:, -3:] = -np.inf
    kw = dict(strides=[1, 1], pads=list(pads))
    assert _jit.kernels() is not None
    y = _compiled_pool(x, mode, list(kernel), **kw)
    expected = pool(x, mode, list(kernel), **kw)  # the reference kernel
    assert y.dtype == np.float32 and y.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize(
    "shape, kernel, pads",
    [
        ((1, 1), (3, 3), (1, 1, 1, 1)),
        ((2, 2), (3, 3), (1, 1, 1, 1)),
        ((1, 6), (3, 2), (1, 1, 1, 0)),
        ((7, 1), (3, 3), (1, 1, 1, 1)),
        ((7, 7), (3, 3), (1, 1, 1, 1)),
        ((14, 14), (5, 3), (2, 0, 2, 2)),
        ((6, 9), (4, 5), (3, 1, 0, 3)),
        ((8, 8), (1, 3), (0, 1, 0, 1)),
    ],
)
@pytest.mark.parametrize("include_pad", [0, 1])
def test_compiled_same_size_pools_over_all_planes(mode, shape, kernel, pads, include_pad):
    """Unit strides with an output of the input's size (pads adding up to the kernel minus
    one) pool every plane in flat passes with each row's and plane's edge cells redone
    (_jit_kernels.pool2d_same): equal to the numpy path on planes down to 1x1, a NaN alone
    in a window gives NaN, a number beats NaN, -inf stays."""
    from onnxrt import native as _jit

    rng = np.random.default_rng(13)
    x = rng.standard_normal((2, 6) + shape).astype(np.float32)
    x[0, 0] = np.nan
    x[0, 1, 0, 0] = np.nan
    x[1, 2, -1, :] = -np.inf
    x[1, 3, :, 0] = np.inf
    kw = dict(strides=[1, 1], pads=list(pads), count_include_pad=include_pad)
    assert _jit.kernels() is not None
    y = _compiled_pool(x, mode, list(kernel), **kw)
    with np.errstate(invalid="ignore"):  # inf - inf in a window: NaN
        expected = pool(x, mode, list(kernel), **kw)  # the reference kernel
    assert y.dtype == np.float32 and y.shape == x.shape == expected.shape
    np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
    np.testing.assert_allclose(y, expected, rtol=1e-6, atol=1e-6)
    if mode == "max":
        np.testing.assert_array_equal(y, expected)
        # a plane of NaN pools to NaN; one NaN among numbers only where a window holds it alone
        assert np.isnan(y[0, 0]).all() and (shape == (1, 1) or not np.isnan(y[0, 1]).all())


def _compiled_pool(x, mode, kernel, **kw):
    """The compiled 2-D pooling of MaxPool/AveragePool's fast path (onnxrt.fastpaths.pool)."""
    from onnxrt.fastpaths.pool import compiled_pool

    run = compiled_pool(x.shape, mode, kernel, **kw)
    assert run is not None
    return run(np.ascontiguousarray(x))


@pytest.mark.parametrize("mode", ["max", "avg"])
def test_prepared_pools_equal_the_general_path(mode):
    """A pooling node keeps its compiled executor per input signature (the dispatcher's
    prepared fast path): the same values as the reference kernel for every shape it sees, a
    non-contiguous input and float16 included; a wrong rank fails as the reference does."""
    import onnxrt
    from onnx import TensorProto, helper

    rng = np.random.default_rng(14)
    kw = dict(strides=[2, 2], pads=[1, 1, 1, 1], count_include_pad=0) if mode == "avg" else dict(strides=[2, 2])
    op = "AveragePool" if mode == "avg" else "MaxPool"
    node = helper.make_node(op, ["x"], ["y"], kernel_shape=[3, 3], **kw)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    sess = onnxrt.OnnxInference(helper.make_model(g, opset_imports=[helper.make_opsetid("", 19)]))
    for shape in [(1, 8, 15, 15), (2, 3, 9, 12), (1, 8, 15, 15)]:
        x = rng.standard_normal(shape).astype(np.float32)
        x[0, 0, :3, :3] = np.nan
        got = sess.run({"x": x})["y"]
        want = pool(x, mode, [3, 3], **kw)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        if mode == "max":
            np.testing.assert_array_equal(got, want)
    assert {r["path"] for r in sess.fast_paths()} == {"compiled 2-D"} and len(sess.fast_paths()) == 2
    view = x.transpose(0, 1, 3, 2)
    np.testing.assert_allclose(sess.run({"x": view})["y"], pool(np.ascontiguousarray(view), mode, [3, 3], **kw),
                               rtol=1e-6, atol=1e-6)
    with pytest.raises(Exception, match="rank 4"):
        sess.run({"x": x[0]})


@pytest.mark.parametrize("mode", ["max", "avg"])
@pytest.mark.parametrize("pads, ceil_mode", [((0, 0, 0, 0), 0), ((0, 0, 0, 0), 1), ((1, 1, 1, 1), 0), ((0, 0, 1, 1), 0),
                                             ((1, 0, 0, 1), 1), ((2, 2, 2, 2), 0)])
def test_compiled_stride_two_pools_equal_the_general_loop(mode, pads, ceil_mode):
    """3x3 windows at strides 2 go by _jit_kernels.pool2d_s2 (rows joined, then each output's
    three cells): the same bits as the general loop pool2d, on planes down to 1x1, with a
    window of NaN alone (NaN), a number beating NaN, -inf rows and padding-only windows."""
    from onnxrt import native as _jit

    k = _jit.kernels()
    if k is None:
        pytest.skip("no numba")
    rng = np.random.default_rng(15)
    for shape in [(9, 10), (3, 3), (2, 5), (1, 1), (14, 14)]:
        x = rng.standard_normal((3,) + shape).astype(np.float32)
        x[0, :2, :2] = np.nan
        x[1, -1, :] = -np.inf
        pb, pe, out = window_geometry(shape, (3, 3), (2, 2), (1, 1), list(pads), "NOTSET", bool(ceil_mode))
        if 0 in out:
            continue
        inv = np.full(out, 1 / 9, np.float32) if mode == "avg" else np.ones((1, 1), np.float32)
        want = np.full((3,) + tuple(out), 7, np.float32)
        got = want.copy()
        k.pool2d(x, want, 3, 3, 2, 2, 1, 1, pb[0], pb[1], mode == "max", inv)
        k.pool2d_s2(x, got, pb[0], pb[1], mode == "max", inv)
        np.testing.assert_array_equal(got, want)
        assert not (got == 7).any()
