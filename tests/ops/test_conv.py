"""The convolution family: Conv, ConvTranspose, ConvInteger, QLinearConv, DeformConv, Col2Im, CausalConvWithState.

Random cases are compared with onnxruntime (values, shapes, dtypes) and, where
onnxruntime differs from the spec or lacks the operator, with plain-loop definitions
written here from the spec text.
"""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import InvalidAttributeError, KernelError
from onnxrt.ops_cpu._conv_common import apply_activation, window_geometry
from onnxrt.parallel import release_scratch
from onnxrt.ops_cpu.op_causal_conv_with_state import causal_conv_with_state
from onnxrt.ops_cpu.op_col2im import col2im
from onnxrt.ops_cpu.op_conv import conv
from onnxrt.ops_cpu.op_conv_integer import conv_integer
from onnxrt.ops_cpu.op_conv_transpose import conv_transpose
from onnxrt.ops_cpu.op_deform_conv import deform_conv
from onnxrt.ops_cpu.op_qlinear_conv import qlinear_conv
from onnxrt.fastpaths import conv as fp
from onnxrt.parallel import limit_threads

from ..helpers import make_single_node_model, run_in_threads
from .conv_table import fast_conv, fast_conv_transpose, run, run_path

_ELEM = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16,
    np.dtype(np.int8): TensorProto.INT8,
    np.dtype(np.uint8): TensorProto.UINT8,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
}


def _out_types(out_type: int | list[int], n_outputs: int) -> list[int]:
    return list(out_type) if isinstance(out_type, list | tuple) else [out_type] * n_outputs


def ort_run(op: str, feeds: list[tuple[str, np.ndarray]], out_type, opset: int = 19, n_outputs: int = 1, **atts):
    """Run one node in onnxruntime (the oracle); ``out_type`` is one element type or one per output."""
    so = ort.SessionOptions()
    so.log_severity_level = 4
    names = [n for n, _ in feeds]
    node = helper.make_node(op, names, [f"y{i}" for i in range(n_outputs)], **atts)
    graph = helper.make_graph(
        [node], op,
        [helper.make_tensor_value_info(n, _ELEM[v.dtype], v.shape) for n, v in feeds if n],
        [helper.make_tensor_value_info(f"y{i}", t, None) for i, t in enumerate(_out_types(out_type, n_outputs))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, {n: v for n, v in feeds if n})


def onnxrt_run(op: str, feeds: list[tuple[str, np.ndarray]], out_type, opset: int, n_outputs: int = 1, **atts):
    """Run one node through onnxrt's InferenceSession (the engine path: registration, attributes)."""
    model = make_single_node_model(
        op,
        [(n, _ELEM[v.dtype], list(v.shape)) for n, v in feeds],
        [(f"y{i}", t, None) for i, t in enumerate(_out_types(out_type, n_outputs))],
        opset=opset,
        ir_version=10,
        **atts,
    )
    return onnxrt.InferenceSession(model.SerializeToString()).run(None, {n: v for n, v in feeds})


# --------------------------------------------------------------------------------------
# plain-loop definitions from the spec text
# --------------------------------------------------------------------------------------


def loop_conv(x, w, b, strides, dilations, pads_begin, out_shape, group):
    """Y[n, m, o] = b[m] + sum_{c, k} W[m, c, k] * X[n, g*Cg + c, o*s - pad + k*d] (0 outside)."""
    n_img, n_ch = x.shape[:2]
    m_out, cg = w.shape[:2]
    kernel = w.shape[2:]
    mg = m_out // group
    y = np.zeros((n_img, m_out) + tuple(out_shape), np.float64)
    for o in itertools.product(*[range(v) for v in out_shape]):
        for k in itertools.product(*[range(v) for v in kernel]):
            pos = [oi * s - p + ki * d for oi, s, p, ki, d in zip(o, strides, pads_begin, k, dilations)]
            if any(q < 0 or q >= size for q, size in zip(pos, x.shape[2:])):
                continue
            for g in range(group):
                xs = x[(slice(None), slice(g * cg, (g + 1) * cg)) + tuple(pos)].astype(np.float64)  # (N, Cg)
                ws = w[(slice(g * mg, (g + 1) * mg), slice(None)) + k].astype(np.float64)  # (Mg, Cg)
                y[(slice(None), slice(g * mg, (g + 1) * mg)) + o] += xs @ ws.T
    if b is not None:
        y += b.astype(np.float64).reshape((-1,) + (1,) * len(kernel))
    return y


def loop_conv_transpose(x, w, b, strides, dilations, pads_begin, out_shape, group):
    """Y[n, m, i*s + k*d - pad] += X[n, c, i] * W[c, m, k] for every input pixel and tap."""
    n_img, n_ch = x.shape[:2]
    cg = n_ch // group
    mg = w.shape[1]
    kernel = w.shape[2:]
    y = np.zeros((n_img, mg * group) + tuple(out_shape), np.float64)
    for i in itertools.product(*[range(v) for v in x.shape[2:]]):
        for k in itertools.product(*[range(v) for v in kernel]):
            pos = [ii * s + ki * d - p for ii, s, ki, d, p in zip(i, strides, k, dilations, pads_begin)]
            if any(q < 0 or q >= size for q, size in zip(pos, out_shape)):
                continue
            for g in range(group):
                xs = x[(slice(None), slice(g * cg, (g + 1) * cg)) + i].astype(np.float64)  # (N, Cg)
                ws = w[(slice(g * cg, (g + 1) * cg), slice(None)) + k].astype(np.float64)  # (Cg, Mg)
                y[(slice(None), slice(g * mg, (g + 1) * mg)) + tuple(pos)] += xs @ ws
    if b is not None:
        y += b.astype(np.float64).reshape((-1,) + (1,) * len(kernel))
    return y


def _rand_conv_case(rng, nd, depthwise=False):
    n_img = int(rng.integers(1, 3))
    group = int(rng.integers(2, 5)) if depthwise else int(rng.choice([1, 1, 2, 3]))
    cg = 1 if depthwise else int(rng.integers(1, 4))
    mg = int(rng.integers(1, 4))
    spatial = tuple(int(v) for v in rng.integers(4, 9 if nd < 3 else 7, nd))
    kernel = tuple(int(v) for v in rng.integers(1, 4, nd))
    atts = {
        "strides": [int(v) for v in rng.integers(1, 3, nd)],
        "dilations": [int(v) for v in rng.integers(1, 3, nd)],
        "group": group,
    }
    x = rng.standard_normal((n_img, group * cg) + spatial).astype(np.float32)
    w = rng.standard_normal((group * mg, cg) + kernel).astype(np.float32)
    b = rng.standard_normal(group * mg).astype(np.float32) if rng.random() < 0.7 else None
    return x, w, b, atts


# --------------------------------------------------------------------------------------
# Conv
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("auto_pad", ["NOTSET", "VALID", "SAME_UPPER", "SAME_LOWER"])
@pytest.mark.parametrize("depthwise", [False, True])
def test_conv_matches_onnxruntime(nd, auto_pad, depthwise):
    rng = np.random.default_rng(100 * nd + len(auto_pad) + depthwise)
    checked = 0
    for _ in range(8):
        x, w, b, atts = _rand_conv_case(rng, nd, depthwise)
        if auto_pad == "NOTSET":
            atts["pads"] = [int(v) for v in rng.integers(0, 3, 2 * nd)]
        else:
            atts["auto_pad"] = auto_pad
            if auto_pad.startswith("SAME"):
                atts["dilations"] = [1] * nd  # onnxruntime refuses dilations with SAME_*
        feeds = [("x", x), ("w", w)] + ([("b", b)] if b is not None else [])
        try:
            (ref,) = ort_run("Conv", feeds, TensorProto.FLOAT, **atts)
        except Exception:  # noqa: BLE001  (a window larger than the input)
            # onnxrt refuses it too, or gives the empty output the spec's floor formula asks for
            try:
                y = conv(x, w, b, **atts)
            except KernelError:
                continue
            assert 0 in y.shape[2:]
            continue
        y = conv(x, w, b, **atts)
        assert y.dtype == np.float32 and y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
        checked += 1
    assert checked >= 4


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_conv_same_with_dilations_follows_the_spec(nd):
    """onnxruntime refuses SAME_* with dilations; the spec's arithmetic gives ceil(S/stride) outputs."""
    rng = np.random.default_rng(7 + nd)
    for auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        x, w, b, atts = _rand_conv_case(rng, nd)
        atts["dilations"] = [2] * nd
        y = conv(x, w, b, auto_pad=auto_pad, **atts)
        pb, _, out = window_geometry(x.shape[2:], w.shape[2:], atts["strides"], atts["dilations"], None, auto_pad)
        assert out == tuple(-(-s // st) for s, st in zip(x.shape[2:], atts["strides"]))
        ref = loop_conv(x, w, b, atts["strides"], atts["dilations"], pb, out, atts["group"])
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_conv_same_lower_puts_the_odd_pad_first():
    x = np.arange(5, dtype=np.float64).reshape(1, 1, 5)
    w = np.ones((1, 1, 2))
    # total padding 1: SAME_UPPER pads at the end, SAME_LOWER at the beginning
    np.testing.assert_array_equal(conv(x, w, auto_pad="SAME_UPPER")[0, 0], [1, 3, 5, 7, 4])
    np.testing.assert_array_equal(conv(x, w, auto_pad="SAME_LOWER")[0, 0], [0, 1, 3, 5, 7])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_conv_element_types(dtype):
    rng = np.random.default_rng(3)
    x, w, b, atts = _rand_conv_case(rng, 2)
    atts["pads"] = [1, 0, 1, 1]
    ref = conv(x, w, b, **atts).astype(np.float64)
    y = conv(x.astype(dtype), w.astype(dtype), None if b is None else b.astype(dtype), **atts)
    assert y.dtype == np.dtype(dtype)
    tol = {np.float16: 2e-2, ml_dtypes.bfloat16: 1e-1, np.float64: 1e-5}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol, atol=tol * 4)
    if dtype is np.float64:
        exact = loop_conv(x.astype(np.float64), w.astype(np.float64), b, atts["strides"], atts["dilations"],
                          [1, 0], y.shape[2:], atts["group"])
        np.testing.assert_allclose(y, exact, rtol=1e-12, atol=1e-12)


def test_conv_1x1_paths():
    """1x1 kernels: one matrix product (batch, groups, strides), and the padded case through im2col."""
    rng = np.random.default_rng(11)
    x = rng.standard_normal((3, 6, 7, 5)).astype(np.float32)
    for group, strides, pads in [(1, [1, 1], None), (2, [1, 1], None), (3, [2, 3], None), (1, [2, 2], [0, 1, 1, 0])]:
        w = rng.standard_normal((6, 6 // group, 1, 1)).astype(np.float32)
        (ref,) = ort_run("Conv", [("x", x), ("w", w)], TensorProto.FLOAT, group=group, strides=strides,
                         **({"pads": pads} if pads else {}))
        y = conv(x, w, group=group, strides=strides, pads=pads)
        assert y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_conv_large_batch_is_chunked(monkeypatch):
    """Batches whose columns exceed the chunk size run image group by image group into one
    output (the im2col entries of Conv's table), equal to the reference."""
    rng = np.random.default_rng(5)
    x = rng.standard_normal((5, 4, 6, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    whole = conv(x, w, group=2, pads=[1, 1, 1, 1])
    for path, xx in (("im2col same", x.astype(np.float64)), ("im2col", x[:, :, :, ::-1].astype(np.float64))):
        monkeypatch.setattr(fp, "COL_CHUNK_BYTES", 1 << 30)
        ref = run_path(path, xx, w.astype(np.float64), group=2, pads=[1, 1, 1, 1], strides=[1, 2] if path == "im2col" else None)
        monkeypatch.setattr(fp, "COL_CHUNK_BYTES", 1)
        chunked = run_path(path, xx, w.astype(np.float64), group=2, pads=[1, 1, 1, 1],
                           strides=[1, 2] if path == "im2col" else None)
        np.testing.assert_array_equal(chunked, ref)
    monkeypatch.setattr(fp, "COL_CHUNK_BYTES", 1)
    chunked, path = run(x, w, group=2, pads=[1, 1, 1, 1])
    np.testing.assert_allclose(chunked, whole, rtol=1e-6, atol=1e-6)
    monkeypatch.setattr(fp, "COL_CHUNK_BYTES", 2 * 4 * 4 * 9 * 36)
    np.testing.assert_allclose(fast_conv(x, w, pads=[1, 1, 1, 1], group=2), whole, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize(
    ("shape", "kernel", "strides", "dilations", "pads"),
    [
        ((2, 5, 23, 19), (3, 3), (1, 1), (1, 1), (1, 1, 1, 1)),
        ((1, 3, 31, 40), (7, 5), (2, 3), (1, 1), (3, 2, 2, 1)),
        ((2, 4, 20, 20), (3, 3), (1, 2), (2, 1), (0, 2, 1, 0)),
        ((1, 6, 9, 30), (1, 3), (1, 1), (1, 1), (0, 1, 0, 1)),
    ],
)
def test_conv_by_bands_of_output_rows(monkeypatch, shape, kernel, strides, dilations, pads):
    """The banded path (im2col of a few output rows, a BLAS call into the output, bands shared
    by the pool's threads through an atomic counter) equals onnxruntime: several images, bands
    of one row and of several, a last short band, single-threaded and split, a strided input."""
    if fp.blas_sgemm_address() is None or fp.native.kernels() is None:
        pytest.skip("no ILP64 OpenBLAS or no numba: the banded path is not used")
    rng = np.random.default_rng(sum(shape))
    x = rng.standard_normal(shape).astype(np.float32)
    w = rng.standard_normal((7, shape[1]) + kernel).astype(np.float32)
    b = rng.standard_normal(7).astype(np.float32)
    atts = dict(kernel_shape=list(kernel), strides=list(strides), dilations=list(dilations), pads=list(pads))
    (ref,) = ort_run("Conv", [("x", x), ("w", w), ("b", b)], TensorProto.FLOAT, **atts)
    calls = []
    bands = fp.core_bands
    monkeypatch.setattr(fp, "core_bands", lambda *a: calls.append(a[6]) or bands(*a))
    monkeypatch.setattr(fp, "BAND_MIN_PIXELS", 1)
    for band_bytes in (1, 4 * w[0].size * ref.shape[3] * 3, 1 << 19):
        monkeypatch.setattr(fp, "BAND_BYTES", band_bytes)
        for threads in (None, 1):
            with limit_threads(threads):
                y, path = run(x, w, b, **atts)
            assert path == "bands"
            assert y.shape == ref.shape and y.dtype == np.float32
            np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
            # the bias and a fused Relu are applied band by band inside the compiled loop
            relu = fast_conv(x, w, b, activation="Relu", **atts)
            np.testing.assert_allclose(relu, np.maximum(ref, 0), rtol=1e-4, atol=1e-4)
    assert calls and all(tuple(c) == ref.shape[2:] for c in calls)
    wide = np.repeat(x, 2, axis=3)[..., ::2]  # not contiguous
    np.testing.assert_allclose(fast_conv(wide, w, b, **atts), ref, rtol=1e-4, atol=1e-4)
    monkeypatch.setattr(fp, "blas_sgemm_address", lambda: None)  # another BLAS: im2col and numpy's product
    calls.clear()
    y, path = run(x, w, b, **atts)
    np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
    assert not calls and path == "im2col compiled"


@pytest.mark.parametrize(
    ("planes", "height", "width", "kernel", "dilations", "pads", "rows"),
    [
        (3, 13, 13, (3, 3), (1, 1), (1, 1, 1, 1), None),  # rows as wide as the output's: one run per tap
        (2, 9, 9, (5, 5), (1, 1), (2, 2, 2, 2), None),
        (2, 9, 11, (3, 3), (2, 2), (2, 2, 2, 2), None),
        (2, 4, 4, (3, 5), (1, 1), (3, 2, 3, 2), None),  # taps with no input row at all
        (1, 7, 7, (3, 3), (1, 1), (0, 1, 2, 1), (2, 6)),  # a band of output rows
        (2, 6, 8, (3, 3), (1, 1), (0, 0, 0, 0), None),  # narrower output: one copy per row
    ],
)
def test_compiled_im2col_writes_every_column_once(planes, height, width, kernel, dilations, pads, rows):
    """im2col2d (and a band of output rows) equals the padded input's windows, zeros where
    a tap leaves the input, whether a tap's valid rows go by one contiguous run of the input
    (unit strides, rows as wide as the output's) or row by row."""
    from onnxrt import native as _jit

    k = _jit.kernels()
    if k is None:
        pytest.skip("no numba")
    x = np.random.default_rng(planes * height + width).standard_normal((planes, height, width)).astype(np.float32)
    (kh, kw), (dh, dw), (pt, pl, pb, pr) = kernel, dilations, pads
    out_h, out_w = height + pt + pb - dh * (kh - 1), width + pl + pr - dw * (kw - 1)
    xp = np.pad(x, ((0, 0), (pt, pb), (pl, pr)))
    want = np.stack([xp[:, i * dh:i * dh + out_h, j * dw:j * dw + out_w] for i in range(kh) for j in range(kw)], 1)
    r0, r1 = rows or (0, out_h)
    want = want[:, :, r0:r1]
    got = np.full(want.size, np.nan, np.float32)
    k._im2col_rows(x.reshape(-1), 0, got, planes, height, width, r0, r1, out_w, kh, kw, 1, 1, dh, dw, pt, pl)
    np.testing.assert_array_equal(got.reshape(want.shape), want)
    if rows is None:
        got[:] = np.nan
        k.im2col2d(x, got, out_h, out_w, kh, kw, 1, 1, dh, dw, pt, pl)
        np.testing.assert_array_equal(got.reshape(want.shape), want)


def test_conv_spec_example():
    """The spec's example: 5x5 input of 0..24, 3x3 ones, with and without padding."""
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    w = np.ones((1, 1, 3, 3), np.float32)
    y = conv(x, w, pads=[1, 1, 1, 1])
    np.testing.assert_array_equal(y[0, 0, 0], [12, 21, 27, 33, 24])
    y = conv(x, w)
    np.testing.assert_array_equal(y[0, 0], [[54, 63, 72], [99, 108, 117], [144, 153, 162]])
    y = conv(x, w, strides=[2, 2], pads=[1, 0, 1, 0])
    assert y.shape == (1, 1, 3, 2)
    np.testing.assert_array_equal(y[0, 0], [[21, 33], [99, 117], [111, 123]])


@pytest.mark.parametrize(
    "name, params, fn",
    [
        ("Relu", (), lambda v: np.maximum(v, 0)),
        ("LeakyRelu", (0.1,), lambda v: np.where(v < 0, 0.1 * v, v)),
        ("LeakyRelu", (), lambda v: np.where(v < 0, 0.01 * v, v)),
        ("Clip", (-0.5, 0.25), lambda v: np.clip(v, -0.5, 0.25)),
        ("Sigmoid", (), lambda v: 1 / (1 + np.exp(-v))),
        ("Tanh", (), np.tanh),
        ("HardSigmoid", (0.3, 0.4), lambda v: np.clip(0.3 * v + 0.4, 0, 1)),
    ],
)
def test_conv_fused_activation(name, params, fn):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    plain = conv(x, w, b, pads=[1, 1, 1, 1])
    fused = conv(x, w, b, pads=[1, 1, 1, 1], activation=name, activation_params=params)
    assert fused.dtype == np.float32
    np.testing.assert_allclose(fused, fn(plain.astype(np.float64)), rtol=1e-5, atol=1e-6)
    ct = conv_transpose(x, w.transpose(1, 0, 2, 3).copy(), None, activation=name, activation_params=params)
    np.testing.assert_allclose(ct, fn(conv_transpose(x, w.transpose(1, 0, 2, 3).copy()).astype(np.float64)), rtol=1e-5, atol=1e-6)


def test_unknown_activation_is_refused():
    with pytest.raises(KernelError, match=r"Fused activation 'Gelu' is not supported"):
        apply_activation(np.zeros(3, np.float32), "Gelu")


def test_conv_errors():
    x = np.zeros((1, 4, 5, 5), np.float32)
    with pytest.raises(KernelError, match=r"X has 4 channels but W expects 3 per group x 1 groups = 3"):
        conv(x, np.zeros((2, 3, 3, 3), np.float32))
    with pytest.raises(KernelError, match=r"not divisible by group 2"):
        conv(x, np.zeros((3, 2, 3, 3), np.float32), group=2)
    with pytest.raises(KernelError, match=r"B must have shape \[2\]"):
        conv(x, np.zeros((2, 4, 3, 3), np.float32), np.zeros(3, np.float32))
    with pytest.raises(KernelError, match=r"'kernel_shape' is \[2, 2\] but the weight's spatial shape is \[3, 3\]"):
        conv(x, np.zeros((2, 4, 3, 3), np.float32), kernel_shape=[2, 2])
    with pytest.raises(KernelError, match=r"window .* is larger than the padded input"):
        conv(x, np.zeros((2, 4, 3, 3), np.float32), dilations=[3, 3])
    with pytest.raises(KernelError, match=r"Attribute 'pads' has 2 values, expected 4"):
        conv(x, np.zeros((2, 4, 3, 3), np.float32), pads=[1, 1])
    with pytest.raises(KernelError, match=r"X must have rank >= 3"):
        conv(np.zeros((4, 5), np.float32), np.zeros((2, 4), np.float32))


def test_conv_bad_attributes_fail_at_load():
    model = make_single_node_model(
        "Conv", [("x", TensorProto.FLOAT, [1, 1, 3, 3]), ("w", TensorProto.FLOAT, [1, 1, 1, 1])],
        [("y", TensorProto.FLOAT, None)], opset=18, auto_pad="SAME",
    )
    with pytest.raises(InvalidAttributeError, match=r"'auto_pad' is 'SAME', expected one of"):
        onnxrt.InferenceSession(model.SerializeToString())


@pytest.mark.parametrize("opset", [1, 11, 22])
def test_conv_every_version_through_a_session(opset):
    rng = np.random.default_rng(opset)
    x = rng.standard_normal((2, 4, 7, 6)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 2)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    atts = dict(group=2, strides=[2, 1], pads=[1, 0, 0, 1], dilations=[1, 2])
    (y,) = onnxrt_run("Conv", [("x", x), ("w", w), ("b", b)], TensorProto.FLOAT, opset, **atts)
    (ref,) = ort_run("Conv", [("x", x), ("w", w), ("b", b)], TensorProto.FLOAT, opset=max(opset, 7), **atts)
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_kernels_never_modify_inputs_and_accept_read_only_views():
    rng = np.random.default_rng(9)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(2, 4, 6, 6), (4, 2, 3, 3), (4,)]]
    for a in arrays:
        a.flags.writeable = False
    x, w, b = arrays
    before = [a.copy() for a in arrays]
    for fn in (conv, fast_conv):  # the reference and Conv's table
        fn(x, w, b, group=2, pads=[1, 1, 1, 1])
        fn(x, w[:, :1].copy(), b, group=4, pads=[1, 1, 1, 1])  # depthwise
    conv_transpose(x, w, None, group=2)
    fast_conv_transpose(x, w, None, group=2, strides=[2, 2])
    for a, c in zip(arrays, before):
        np.testing.assert_array_equal(a, c)


def test_conv_is_thread_safe():
    """Scratch buffers are per thread: concurrent convolutions of different shapes stay exact
    (Conv's table, W a feed: the im2col entries' per-thread columns)."""
    rng = np.random.default_rng(4)
    jobs = []
    for i in range(6):
        x = rng.standard_normal((1, 3 + i, 9 + i, 8)).astype(np.float32)
        w = rng.standard_normal((5, 3 + i, 3, 3)).astype(np.float32)
        jobs.append((x, w, fast_conv(x, w, pads=[1, 1, 1, 1], const=False)))

    def work(k):
        for _ in range(15):
            for x, w, ref in jobs[k % 2::2]:
                np.testing.assert_array_equal(fast_conv(x, w, pads=[1, 1, 1, 1], const=False), ref)

    errors = run_in_threads(work, 4)
    release_scratch()
    assert not errors


@pytest.mark.parametrize("threads", [1, 3])
def test_depthwise_paths_and_parallel_chunks(monkeypatch, threads):
    """Depthwise convolutions (same-size, padded-flat and strided paths, multipliers, 1-D to 3-D,
    batches) split over the kernel thread pool give the plain-loop result."""
    from onnxrt import parallel

    monkeypatch.setattr(parallel, "KERNEL_THREADS", threads)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 1)
    rng = np.random.default_rng(17)
    cases = [
        ((2, 5, 9, 8), (10, 1, 3, 3), dict(pads=[1, 1, 1, 1])),  # same size, multiplier 2
        ((1, 4, 7, 7), (4, 1, 3, 3), dict(pads=[2, 2, 2, 2], dilations=[2, 2])),  # same size, dilated
        ((1, 3, 8, 6), (3, 1, 3, 3), dict(pads=[0, 1, 2, 1])),  # same inner size, other rows
        ((1, 3, 8, 6), (6, 1, 2, 3), dict(pads=[0, 0, 0, 0])),  # padded-flat (valid)
        ((2, 4, 9, 9), (4, 1, 3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2])),  # strided
        ((1, 3, 10), (3, 1, 4), dict(pads=[2, 1])),  # 1-D
        ((1, 2, 5, 4, 6), (4, 1, 3, 2, 3), dict(pads=[1, 0, 1, 1, 1, 1])),  # 3-D
    ]
    for xs, ws, atts in cases:
        x = rng.standard_normal(xs)
        w = rng.standard_normal(ws)
        group = xs[1]
        y, path = run(x, w, group=group, **atts)
        assert path == "depthwise"  # (float64: the numpy entry)
        nd = len(xs) - 2
        pb, _, out = window_geometry(xs[2:], ws[2:], atts.get("strides", [1] * nd), atts.get("dilations", [1] * nd), atts["pads"])
        ref = loop_conv(x, w, None, atts.get("strides", [1] * nd), atts.get("dilations", [1] * nd), pb, out, group)
        np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10, err_msg=str((xs, ws, atts)))


@pytest.mark.parametrize("activation", [None, "Relu"])
def test_compiled_depthwise_with_bias_and_relu(activation):
    """float32 2-D depthwise convolutions run the compiled plane loop (3x3 at unit strides
    sums its nine taps in registers; other kernels and strides go tap by tap), which adds
    the bias and applies a fused Relu plane by plane: checked against the float64 loop on
    two images (the plane index differs from the channel on the second)."""
    rng = np.random.default_rng(5)
    cases = [
        ((2, 4, 9, 8), (3, 3), dict(pads=[1, 1, 1, 1])),
        ((2, 3, 9, 9), (3, 3), dict(pads=[2, 2, 2, 2], dilations=[2, 2])),
        ((2, 3, 9, 9), (3, 3), dict(pads=[1, 1, 1, 1], strides=[2, 2])),
        ((2, 3, 8, 7), (5, 5), dict(pads=[2, 2, 2, 2])),
    ]
    for xs, ks, atts in cases:
        x = rng.standard_normal(xs).astype(np.float32)
        w = rng.standard_normal((xs[1], 1) + ks).astype(np.float32)
        b = rng.standard_normal(xs[1]).astype(np.float32)
        y, path = run(x, w, b, group=xs[1], activation=activation, const=False, **atts)
        assert path == "depthwise compiled" or fp.native.kernels() is None
        strides, dilations = atts.get("strides", [1, 1]), atts.get("dilations", [1, 1])
        pb, _, out = window_geometry(xs[2:], ks, strides, dilations, atts["pads"])
        ref = loop_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), strides, dilations, pb, out, xs[1])
        if activation == "Relu":
            ref = np.maximum(ref, 0)
        assert y.dtype == np.float32 and y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5, err_msg=str((xs, ks, atts)))


def test_parallel_for_propagates_errors(monkeypatch):
    from onnxrt import parallel

    monkeypatch.setattr(parallel, "KERNEL_THREADS", 3)
    seen = []

    def fn(lo, hi):
        seen.append((lo, hi))
        if lo >= 6:
            raise ValueError("chunk failed")

    with pytest.raises(ValueError, match="chunk failed"):
        parallel.parallel_for(12, fn, work_per_item=1 << 20)
    done = []
    parallel.parallel_for(12, lambda lo, hi: done.extend(range(lo, hi)), work_per_item=1 << 20)
    assert sorted(done) == list(range(12))


def test_conv_empty_batch():
    y = conv(np.zeros((0, 2, 5, 5), np.float32), np.ones((3, 2, 3, 3), np.float32), np.ones(3, np.float32))
    assert y.shape == (0, 3, 3, 3) and y.dtype == np.float32


# --------------------------------------------------------------------------------------
# ConvTranspose
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("nd", [1, 2, 3])
@pytest.mark.parametrize("mode", ["pads", "output_padding", "output_shape", "same", "valid"])
def test_conv_transpose_matches_onnxruntime(nd, mode):
    rng = np.random.default_rng(300 + nd * 7 + len(mode))
    for _ in range(5):
        n_img, group = int(rng.integers(1, 3)), int(rng.choice([1, 2]))
        cg, mg = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        spatial = tuple(int(v) for v in rng.integers(2, 6 if nd < 3 else 4, nd))
        kernel = tuple(int(v) for v in rng.integers(1, 4, nd))
        strides = [int(v) for v in rng.integers(1, 4, nd)]
        dilations = [int(v) for v in rng.integers(1, 3, nd)]
        atts = dict(strides=strides, dilations=dilations, group=group)
        natural = [(n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(spatial, strides, kernel, dilations)]
        if mode == "pads":
            atts["pads"] = [int(v) for v in rng.integers(0, 2, 2 * nd)]
        elif mode == "output_padding":
            atts["output_padding"] = [int(rng.integers(0, s)) for s in strides]
        elif mode == "output_shape":
            # an even total padding: onnxruntime splits an odd one the other way round (see below)
            atts["output_shape"] = [v - 2 * int(rng.integers(0, 2)) for v in natural]
        elif mode == "same":
            atts["auto_pad"] = str(rng.choice(["SAME_UPPER", "SAME_LOWER"]))
            # onnxruntime clamps a negative total padding to zero; the spec asks for S*stride (tested below)
            kernel = tuple(max(k, s) for k, s in zip(kernel, strides))
        else:
            atts["auto_pad"] = "VALID"
        x = rng.standard_normal((n_img, group * cg) + spatial).astype(np.float32)
        w = rng.standard_normal((group * cg, mg) + kernel).astype(np.float32)
        b = rng.standard_normal(group * mg).astype(np.float32) if rng.random() < 0.6 else None
        feeds = [("x", x), ("w", w)] + ([("b", b)] if b is not None else [])
        (ref,) = ort_run("ConvTranspose", feeds, TensorProto.FLOAT, **atts)
        y = conv_transpose(x, w, b, **atts)
        assert y.dtype == np.float32 and y.shape == ref.shape
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)


def test_conv_transpose_same_with_small_kernel_follows_the_spec():
    """SAME_* asks for S*stride outputs even when the kernel is shorter than the stride (onnxruntime stops short)."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 3, 2)).astype(np.float32)
    w = rng.standard_normal((2, 3, 2, 1)).astype(np.float32)
    for auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        y = conv_transpose(x, w, strides=[3, 3], auto_pad=auto_pad)
        assert y.shape == (1, 3, 9, 6)
        # natural lengths 8 and 4 for 9 and 6 asked: total paddings -1 and -2, split as
        # floor(total/2) at the beginning for SAME_UPPER, the rest for SAME_LOWER
        begin = -1 // 2 if auto_pad == "SAME_UPPER" else -1 - (-1 // 2)
        begin_w = -2 // 2 if auto_pad == "SAME_UPPER" else -2 - (-2 // 2)
        ref = loop_conv_transpose(x, w, None, [3, 3], [1, 1], [begin, begin_w], (9, 6), 1)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_conv_transpose_output_shape_splits_padding_as_the_spec_says():
    """total = natural - output_shape: ``total - total//2`` at the beginning (NOTSET, SAME_LOWER),
    ``total//2`` for SAME_UPPER. onnxruntime puts the odd pixel at the end for NOTSET and
    clamps a negative total to zero; the spec's formula (and its conformance case, a total
    of -1 extending the end) is followed."""
    rng = np.random.default_rng(12)
    for trial in range(12):
        nd = 1 + trial % 3
        spatial = tuple(int(v) for v in rng.integers(2, 5, nd))
        kernel = tuple(int(v) for v in rng.integers(1, 4, nd))
        strides = [int(v) for v in rng.integers(1, 4, nd)]
        dilations = [int(v) for v in rng.integers(1, 3, nd)]
        natural = [(n - 1) * s + (k - 1) * d + 1 for n, s, k, d in zip(spatial, strides, kernel, dilations)]
        shape = [v + int(rng.integers(-1, 2)) for v in natural]
        auto_pad = ["NOTSET", "SAME_UPPER", "SAME_LOWER"][trial % 3]
        x = rng.standard_normal((1, 2) + spatial).astype(np.float32)
        w = rng.standard_normal((2, 2) + kernel).astype(np.float32)
        y = conv_transpose(x, w, strides=strides, dilations=dilations, output_shape=shape, auto_pad=auto_pad)
        totals = [n - o for n, o in zip(natural, shape)]
        begin = [t // 2 if auto_pad == "SAME_UPPER" else t - t // 2 for t in totals]
        ref = loop_conv_transpose(x, w, None, strides, dilations, begin, shape, 1)
        assert y.shape == (1, 2, *shape)
        np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_conv_transpose_spec_examples():
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    w = np.ones((1, 2, 3, 3), np.float32)
    y = conv_transpose(x, w)
    assert y.shape == (1, 2, 5, 5)
    np.testing.assert_array_equal(y[0, 0, 0], [0, 1, 3, 3, 2])
    np.testing.assert_array_equal(y[0, 1, 2], [9, 21, 36, 27, 15])
    # output_shape and output_padding give the same 10x8 result
    a = conv_transpose(x, w, strides=[3, 2], output_shape=[10, 8])
    c = conv_transpose(x, w, strides=[3, 2], output_padding=[1, 1])
    assert a.shape == c.shape == (1, 2, 10, 8)
    np.testing.assert_array_equal(a, c)
    np.testing.assert_array_equal(a[0, 0, :, 0], [0, 0, 0, 3, 3, 3, 6, 6, 6, 0])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64])
def test_conv_transpose_element_types(dtype):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((1, 2, 4, 3)).astype(np.float32)
    w = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    ref = conv_transpose(x, w, strides=[2, 1])
    y = conv_transpose(x.astype(dtype), w.astype(dtype), strides=[2, 1])
    assert y.dtype == np.dtype(dtype)
    tol = {np.float16: 2e-2, ml_dtypes.bfloat16: 1e-1, np.float64: 1e-6}[dtype]
    np.testing.assert_allclose(y.astype(np.float64), ref, rtol=tol, atol=tol * 4)


@pytest.mark.parametrize("opset", [1, 11, 22])
def test_conv_transpose_every_version_through_a_session(opset):
    rng = np.random.default_rng(opset)
    x = rng.standard_normal((1, 4, 3, 4)).astype(np.float32)
    w = rng.standard_normal((4, 3, 3, 3)).astype(np.float32)
    atts = dict(group=2, strides=[2, 2], pads=[1, 0, 0, 1], output_padding=[1, 0])
    (y,) = onnxrt_run("ConvTranspose", [("x", x), ("w", w)], TensorProto.FLOAT, opset, **atts)
    (ref,) = ort_run("ConvTranspose", [("x", x), ("w", w)], TensorProto.FLOAT, opset=max(opset, 7), **atts)
    np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)


def test_conv_transpose_errors():
    x = np.zeros((1, 4, 3, 3), np.float32)
    with pytest.raises(KernelError, match=r"W must have X's 4 channels on its first axis"):
        conv_transpose(x, np.zeros((3, 2, 3, 3), np.float32))
    with pytest.raises(KernelError, match=r"'output_padding' has 1 values, expected 2"):
        conv_transpose(x, np.zeros((4, 2, 3, 3), np.float32), output_padding=[1])
    with pytest.raises(KernelError, match=r"B must have shape \[4\]"):
        conv_transpose(x, np.zeros((4, 2, 3, 3), np.float32), np.zeros(2, np.float32), group=2)


# --------------------------------------------------------------------------------------
# ConvInteger and QLinearConv
# --------------------------------------------------------------------------------------


def _ints(rng, dtype, shape, lo=None, hi=None):
    info = np.iinfo(dtype)
    return rng.integers(info.min if lo is None else lo, (info.max if hi is None else hi) + 1, shape).astype(dtype)


def loop_integer_conv(x, w, xzp, wzp, atts):
    wz = np.asarray(wzp, np.float64)
    wz = wz.reshape((-1,) + (1,) * (w.ndim - 1)) if wz.ndim else wz
    return conv(x.astype(np.float64) - float(xzp), w.astype(np.float64) - wz, **atts)


@pytest.mark.parametrize("xt, wt", [(np.uint8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8), (np.int8, np.uint8)])
def test_conv_integer(xt, wt):
    rng = np.random.default_rng(21)
    for trial in range(6):
        nd = 1 + trial % 3
        group = int(rng.choice([1, 2]))
        x = _ints(rng, xt, (2, 2 * group) + tuple(int(v) for v in rng.integers(3, 6, nd)))
        w = _ints(rng, wt, (2 * group, 2) + tuple(int(v) for v in rng.integers(1, 4, nd)))
        xzp = _ints(rng, xt, ())
        wzp = _ints(rng, wt, (2 * group,)) if trial % 2 else _ints(rng, wt, ())
        atts = dict(group=group, pads=[int(v) for v in rng.integers(0, 2, 2 * nd)], strides=[int(v) for v in rng.integers(1, 3, nd)])
        y = conv_integer(x, w, xzp, wzp, **atts)
        assert y.dtype == np.int32
        exact = loop_integer_conv(x, w, xzp, wzp, atts)
        np.testing.assert_array_equal(y, exact.astype(np.int64))
        if not (xt is np.int8 and wt is np.uint8) and wzp.ndim == 0:
            # onnxruntime is exact here (its int8 x uint8 kernel is not: see test below)
            (ref,) = ort_run("ConvInteger", [("x", x), ("w", w), ("xz", xzp), ("wz", wzp)], TensorProto.INT32, **atts)
            np.testing.assert_array_equal(y, ref)


def test_conv_integer_defaults_and_large_sums():
    """No zero points; sums past 2**24 switch the product to float64 and stay exact."""
    x = np.full((1, 64, 5, 5), 255, np.uint8)
    w = np.full((2, 64, 5, 5), 255, np.uint8)
    y = conv_integer(x, w)
    assert y.dtype == np.int32 and y.shape == (1, 2, 1, 1)
    assert int(y[0, 0, 0, 0]) == 255 * 255 * 64 * 25
    (ref,) = ort_run("ConvInteger", [("x", x), ("w", w)], TensorProto.INT32)
    np.testing.assert_array_equal(y, ref)


def test_conv_integer_int8_input_uint8_weight_is_exact():
    """onnxruntime 1.32 is off for int8 x with uint8 w; onnxrt keeps the exact integer sum."""
    x = np.array([[[-128, 127, -1]]], np.int8)
    w = np.array([[[255, 200]]], np.uint8)
    y = conv_integer(x, w, np.int8(-1), np.uint8(3))
    np.testing.assert_array_equal(y, [[[(-127) * 252 + 128 * 197, 128 * 252 + 0 * 197]]])


@pytest.mark.parametrize("yt", [np.uint8, np.int8])
@pytest.mark.parametrize("per_channel", [False, True])
def test_qlinear_conv_matches_onnxruntime(yt, per_channel):
    rng = np.random.default_rng(31 + per_channel)
    for trial in range(6):
        nd = 1 + trial % 3
        group = int(rng.choice([1, 2]))
        # onnxruntime wants x and y of one type
        x = _ints(rng, yt, (1, 3 * group) + tuple(int(v) for v in rng.integers(3, 6, nd)))
        # 7-bit weights: onnxruntime's u8s8 kernel saturates 16-bit pair sums beyond that
        w = _ints(rng, np.int8, (2 * group, 3) + tuple(int(v) for v in rng.integers(1, 4, nd)), -64, 63)
        xs = np.float32(rng.uniform(0.01, 0.05))
        ws = rng.uniform(0.01, 0.05, 2 * group).astype(np.float32) if per_channel else np.float32(rng.uniform(0.01, 0.05))
        ys = np.float32(rng.uniform(0.2, 1.0))
        xzp, wzp, yzp = _ints(rng, yt, ()), np.int8(0), _ints(rng, yt, ())
        bias = rng.integers(-500, 500, 2 * group).astype(np.int32)
        atts = dict(group=group, pads=[int(v) for v in rng.integers(0, 2, 2 * nd)], strides=[int(v) for v in rng.integers(1, 3, nd)])
        feeds = [("x", x), ("xs", np.asarray(xs)), ("xz", xzp), ("w", w), ("ws", np.asarray(ws)), ("wz", np.asarray(wzp)),
                 ("ys", np.asarray(ys)), ("yz", yzp), ("b", bias)]
        (ref,) = ort_run("QLinearConv", feeds, _ELEM[np.dtype(yt)], **atts)
        y = qlinear_conv(x, xs, xzp, w, ws, wzp, ys, yzp, bias, **atts)
        assert y.dtype == np.dtype(yt) and y.shape == ref.shape
        np.testing.assert_array_equal(y, ref)


def test_qlinear_conv_against_the_definition():
    """Full-range int8 weights with zero points: exact accumulation, round half to even, saturation."""
    rng = np.random.default_rng(41)
    x = _ints(rng, np.int8, (2, 4, 5, 5))
    w = _ints(rng, np.int8, (3, 4, 3, 3))
    xs, ws, ys = np.float32(0.02), np.array([0.01, 0.03, 0.002], np.float32), np.float32(0.05)
    xzp, wzp, yzp = np.int8(-3), np.array([1, -2, 0], np.int8), np.int8(5)
    y = qlinear_conv(x, xs, xzp, w, ws, wzp, ys, yzp, pads=[1, 1, 1, 1])
    acc = loop_integer_conv(x, w, xzp, wzp, dict(pads=[1, 1, 1, 1]))
    mult = (xs * ws / ys).astype(np.float32).reshape(-1, 1, 1)
    ref = np.clip(np.rint(acc.astype(np.float32) * mult) + 5, -128, 127)
    np.testing.assert_array_equal(y, ref.astype(np.int8))
    assert (y == 127).any() and (y == -128).any()  # saturation happened


@pytest.mark.parametrize("op", ["ConvInteger", "QLinearConv"])
def test_integer_convs_through_a_session(op):
    rng = np.random.default_rng(5)
    x = _ints(rng, np.uint8, (1, 2, 4, 4))
    w = _ints(rng, np.uint8, (2, 2, 2, 2))
    if op == "ConvInteger":
        feeds = [("x", x), ("w", w), ("xz", np.uint8(3)), ("wz", np.uint8(7))]
        out = TensorProto.INT32
    else:
        feeds = [("x", x), ("xs", np.float32(0.1)), ("xz", np.uint8(3)), ("w", w), ("ws", np.float32(0.05)),
                 ("wz", np.uint8(7)), ("ys", np.float32(2.0)), ("yz", np.uint8(100))]
        out = TensorProto.UINT8
    feeds = [(n, np.asarray(v)) for n, v in feeds]
    (y,) = onnxrt_run(op, feeds, out, 10, pads=[0, 1, 1, 0])
    (ref,) = ort_run(op, feeds, out, opset=10, pads=[0, 1, 1, 0])
    assert y.dtype == ref.dtype
    np.testing.assert_array_equal(y, ref)


# --------------------------------------------------------------------------------------
# DeformConv
# --------------------------------------------------------------------------------------


def loop_deform_conv(x, w, offset, b, mask, strides, dilations, pads_begin, out_shape, group, offset_group):
    """Per output pixel and tap: bilinear sample at base + offset (zero outside), times mask and weight."""
    n_img, n_ch, height, width = x.shape
    m_out, cg, kh, kw = w.shape
    cpo = n_ch // offset_group
    mg = m_out // group
    y = np.zeros((n_img, m_out) + tuple(out_shape), np.float64)

    def sample(n, c, py, px):
        total = 0.0
        y0, x0 = int(np.floor(py)), int(np.floor(px))
        for yy, xx in itertools.product((y0, y0 + 1), (x0, x0 + 1)):
            if 0 <= yy < height and 0 <= xx < width:
                total += (1 - abs(py - yy)) * (1 - abs(px - xx)) * x[n, c, yy, xx]
        return total

    for n, oy, ox in itertools.product(range(n_img), range(out_shape[0]), range(out_shape[1])):
        for c in range(n_ch):
            g_off = c // cpo
            for i, j in itertools.product(range(kh), range(kw)):
                tap = i * kw + j
                dy = offset[n, (g_off * kh * kw + tap) * 2, oy, ox]
                dx = offset[n, (g_off * kh * kw + tap) * 2 + 1, oy, ox]
                py = oy * strides[0] - pads_begin[0] + i * dilations[0] + dy
                px = ox * strides[1] - pads_begin[1] + j * dilations[1] + dx
                v = sample(n, c, py, px)
                if mask is not None:
                    v *= mask[n, g_off * kh * kw + tap, oy, ox]
                g = c // cg
                for m in range(g * mg, (g + 1) * mg):
                    y[n, m, oy, ox] += v * w[m, c - g * cg, i, j]
    if b is not None:
        y += b.reshape(-1, 1, 1)
    return y


def test_deform_conv_matches_onnxruntime_and_the_definition():
    rng = np.random.default_rng(51)
    for trial in range(8):
        group, og = int(rng.choice([1, 2])), int(rng.choice([1, 2]))
        n_ch, m_out = 4, 2 * group
        spatial = tuple(int(v) for v in rng.integers(4, 7, 2))
        kernel = tuple(int(v) for v in rng.integers(1, 4, 2))
        atts = dict(strides=[int(v) for v in rng.integers(1, 3, 2)], dilations=[int(v) for v in rng.integers(1, 3, 2)],
                    pads=[int(v) for v in rng.integers(0, 2, 4)], group=group, offset_group=og)
        pb, _, out = window_geometry(spatial, kernel, atts["strides"], atts["dilations"], atts["pads"])
        x = rng.standard_normal((2, n_ch) + spatial).astype(np.float32)
        w = rng.standard_normal((m_out, n_ch // group) + kernel).astype(np.float32)
        offset = (rng.standard_normal((2, og * kernel[0] * kernel[1] * 2) + out) * 1.5).astype(np.float32)
        with_mask = trial % 2 == 1
        mask = rng.uniform(0, 1, (2, og * kernel[0] * kernel[1]) + out).astype(np.float32) if with_mask else None
        b = rng.standard_normal(m_out).astype(np.float32) if with_mask else None
        y = deform_conv(x, w, offset, b, mask, **atts)
        assert y.dtype == np.float32 and y.shape == (2, m_out) + out
        feeds = [("x", x), ("w", w), ("o", offset)] + ([("b", b), ("m", mask)] if with_mask else [])
        (ref,) = ort_run("DeformConv", feeds, TensorProto.FLOAT, **atts)
        np.testing.assert_allclose(y, ref, rtol=1e-4, atol=1e-4)
        if trial < 3:
            exact = loop_deform_conv(x, w, offset, b, mask, atts["strides"], atts["dilations"], pb, out, group, og)
            np.testing.assert_allclose(y, exact, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("nd", [1, 3])
def test_deform_conv_zero_offsets_is_conv(nd):
    """With zero offsets and no mask, DeformConv is Conv (any rank); integer offsets shift the taps."""
    rng = np.random.default_rng(60 + nd)
    x = rng.standard_normal((1, 2) + (5,) * nd)
    w = rng.standard_normal((3, 2) + (2,) * nd)
    _, _, out = window_geometry(x.shape[2:], w.shape[2:], [1] * nd, [1] * nd, [1] * (2 * nd))
    offset = np.zeros((1, 2 ** nd * nd) + out)
    y = deform_conv(x, w, offset, pads=[1] * (2 * nd))
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, conv(x, w, pads=[1] * (2 * nd)), rtol=1e-12, atol=1e-12)
    # offset +1 on the last axis for every tap: the window moves right by one, as if the
    # last axis were padded by 0 at the beginning and 2 at the end
    offset.reshape((1, 2 ** nd, nd) + out)[:, :, nd - 1] = 1.0
    moved = [1] * (nd - 1) + [0] + [1] * (nd - 1) + [2]
    np.testing.assert_allclose(deform_conv(x, w, offset, pads=[1] * (2 * nd)), conv(x, w, pads=moved),
                               rtol=1e-12, atol=1e-12)


def test_deform_conv_errors():
    x = np.zeros((1, 2, 4, 4), np.float32)
    w = np.zeros((2, 2, 3, 3), np.float32)
    with pytest.raises(KernelError, match=r"offset must have shape \[1, 18, 2, 2\]"):
        deform_conv(x, w, np.zeros((1, 18, 3, 3), np.float32))
    with pytest.raises(KernelError, match=r"offset_group 3 must be >= 1 and divide the 2 input channels"):
        deform_conv(x, w, np.zeros((1, 54, 2, 2), np.float32), offset_group=3)


# --------------------------------------------------------------------------------------
# Col2Im
# --------------------------------------------------------------------------------------


def loop_im2col(img, block, strides, dilations, pads):
    """PyTorch's unfold from its definition: blocks in row-major order of their positions."""
    n_img, n_ch = img.shape[:2]
    nd = len(block)
    pb, pe = pads[:nd], pads[nd:]
    padded_img = np.pad(img, [(0, 0), (0, 0)] + list(zip(pb, pe)))
    _, _, blocks = window_geometry(img.shape[2:], block, strides, dilations, pads)
    cols = np.zeros((n_img, n_ch) + tuple(block) + (int(np.prod(blocks)),), img.dtype)
    for li, pos in enumerate(itertools.product(*[range(v) for v in blocks])):
        for k in itertools.product(*[range(v) for v in block]):
            src = tuple(p * s + kk * d for p, s, kk, d in zip(pos, strides, k, dilations))
            cols[(slice(None), slice(None)) + k + (li,)] = padded_img[(slice(None), slice(None)) + src]
    return cols.reshape(n_img, n_ch * int(np.prod(block)), -1)


@pytest.mark.parametrize("nd", [1, 2, 3])
def test_col2im_matches_onnxruntime_and_inverts_im2col(nd):
    rng = np.random.default_rng(70 + nd)
    for _ in range(4):
        image = [int(v) for v in rng.integers(3, 7, nd)]
        block = [int(v) for v in rng.integers(1, 3, nd)]
        atts = dict(strides=[int(v) for v in rng.integers(1, 3, nd)], dilations=[int(v) for v in rng.integers(1, 3, nd)],
                    pads=[int(v) for v in rng.integers(0, 2, 2 * nd)])
        _, _, blocks = window_geometry(image, block, atts["strides"], atts["dilations"], atts["pads"])
        x = rng.standard_normal((2, 3 * int(np.prod(block)), int(np.prod(blocks)))).astype(np.float32)
        y = col2im(x, np.array(image), np.array(block), **atts)
        assert y.shape == (2, 3, *image) and y.dtype == np.float32
        if nd == 2:
            (ref,) = ort_run("Col2Im", [("x", x), ("i", np.array(image, np.int64)), ("b", np.array(block, np.int64))],
                             TensorProto.FLOAT, opset=18, **atts)
            np.testing.assert_allclose(y, ref, rtol=1e-5, atol=1e-5)
        # col2im is the adjoint of im2col: <im2col(a), x> == <a, col2im(x)>
        a = rng.standard_normal((2, 3, *image))
        lhs = float((loop_im2col(a, block, atts["strides"], atts["dilations"], atts["pads"]) * x).sum())
        rhs = float((a * y).sum())
        assert lhs == pytest.approx(rhs, rel=1e-5, abs=1e-6)


def test_col2im_every_element_type():
    x = np.array([[[1, 2], [3, 4]]])  # N=1, C*prod(block)=2 (block 2, C=1), L=2 blocks over image 3
    for dtype, expect in [(np.int64, [1, 5, 4]), (np.uint8, [1, 5, 4]), (np.complex64, [1, 5, 4]), (bool, [1, 1, 1])]:
        y = col2im(x.astype(dtype), [3], [2])
        assert y.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(y[0, 0], np.array(expect).astype(dtype))
    s = np.array([[["a", "b"], ["c", "d"]]], dtype=object)
    y = col2im(s, [3], [2])
    assert y.dtype == object
    assert y[0, 0].tolist() == ["a", "bc", "d"]


def test_col2im_errors():
    with pytest.raises(KernelError, match=r"input holds 5 blocks but image_shape \[4, 4\]"):
        col2im(np.zeros((1, 4, 5), np.float32), [4, 4], [2, 2])
    with pytest.raises(KernelError, match=r"not a multiple of prod\(block_shape\) = 4"):
        col2im(np.zeros((1, 6, 9), np.float32), [4, 4], [2, 2])
    with pytest.raises(KernelError, match=r"block_shape has 1 values but image_shape has 2"):
        col2im(np.zeros((1, 4, 9), np.float32), [4, 4], [2])


# --------------------------------------------------------------------------------------
# CausalConvWithState
# --------------------------------------------------------------------------------------


def loop_causal(x, w, bias, past, activation):
    b_, c_, length = x.shape
    k = w.shape[2]
    seq = np.concatenate([np.zeros((b_, c_, k - 1)) if past is None else past.astype(np.float64), x.astype(np.float64)], axis=2)
    y = np.zeros((b_, c_, length))
    for t in range(length):
        for j in range(k):
            y[:, :, t] += w[:, 0, j].astype(np.float64) * seq[:, :, t + j]
    if bias is not None:
        y += bias[None, :, None]
    if activation in ("silu", "swish"):
        y = y / (1 + np.exp(-y))
    return y, seq[:, :, seq.shape[2] - (k - 1):]


@pytest.mark.parametrize("k", [1, 2, 4])
@pytest.mark.parametrize("activation", ["none", "silu", "swish"])
def test_causal_conv_with_state(k, activation):
    rng = np.random.default_rng(80 + k)
    for length in (1, 2, 7):
        x = rng.standard_normal((2, 3, length)).astype(np.float32)
        w = rng.standard_normal((3, 1, k)).astype(np.float32)
        bias = rng.standard_normal(3).astype(np.float32) if length > 1 else None
        past = rng.standard_normal((2, 3, k - 1)).astype(np.float32) if length != 2 else None
        y, state = causal_conv_with_state(x, w, bias, past, activation)
        ref_y, ref_state = loop_causal(x, w, bias, past, activation)
        assert y.dtype == state.dtype == np.float32
        assert y.shape == x.shape and state.shape == (2, 3, k - 1)
        np.testing.assert_allclose(y, ref_y, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(state, ref_state.astype(np.float32))


def test_causal_conv_decode_steps_equal_one_pass():
    """Feeding the sequence in pieces with the carried state equals one pass over it."""
    rng = np.random.default_rng(90)
    x = rng.standard_normal((1, 4, 9)).astype(np.float32)
    w = rng.standard_normal((4, 1, 3)).astype(np.float32)
    whole, _ = causal_conv_with_state(x, w)
    state = None
    pieces = []
    for lo, hi in [(0, 4), (4, 5), (5, 9)]:
        y, state = causal_conv_with_state(x[:, :, lo:hi], w, None, state)
        pieces.append(y)
    np.testing.assert_allclose(np.concatenate(pieces, axis=2), whole, rtol=1e-6, atol=1e-6)


def test_causal_conv_float16_and_session():
    rng = np.random.default_rng(91)
    x = rng.standard_normal((1, 2, 5)).astype(np.float16)
    w = rng.standard_normal((2, 1, 3)).astype(np.float16)
    (y, state) = onnxrt_run("CausalConvWithState", [("x", x), ("w", w)], TensorProto.FLOAT16, 27, n_outputs=2, activation="silu")
    ref_y, ref_state = loop_causal(x, w, None, None, "silu")
    assert y.dtype == state.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float64), ref_y, rtol=2e-2, atol=2e-2)
    np.testing.assert_array_equal(state, ref_state.astype(np.float16))


def test_causal_conv_errors():
    with pytest.raises(KernelError, match=r"weight must have shape \[3, 1, k\]"):
        causal_conv_with_state(np.zeros((1, 3, 4), np.float32), np.zeros((3, 2, 2), np.float32))
    with pytest.raises(KernelError, match=r"past_state must have shape \[1, 3, 1\]"):
        causal_conv_with_state(np.zeros((1, 3, 4), np.float32), np.zeros((3, 1, 2), np.float32), None, np.zeros((1, 3, 2), np.float32))
    model = make_single_node_model(
        "CausalConvWithState", [("x", TensorProto.FLOAT, [1, 1, 2]), ("w", TensorProto.FLOAT, [1, 1, 1])],
        [("y", TensorProto.FLOAT, None), ("s", TensorProto.FLOAT, None)], opset=27, ir_version=10, activation="gelu",
    )
    with pytest.raises(InvalidAttributeError, match=r"'activation' is 'gelu', expected one of"):
        onnxrt.InferenceSession(model.SerializeToString())


def test_session_intra_op_threads_caps_the_kernel_pool(monkeypatch):
    """intra_op_num_threads=1 makes Conv and pooling run serially (the pool is never used)."""
    from onnxrt import parallel

    monkeypatch.setattr(parallel, "KERNEL_THREADS", 4)
    monkeypatch.setattr(parallel, "MIN_PARALLEL_WORK", 1)
    monkeypatch.setattr(fp, "JIT_PART_TAPS", 1)  # the compiled depthwise loop splits too
    calls = []
    real = parallel._executor

    def spy():
        calls.append(1)
        return real()

    monkeypatch.setattr(parallel, "_executor", spy)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 8, 10, 10)).astype(np.float32)
    w = rng.standard_normal((8, 1, 3, 3)).astype(np.float32)
    model = make_single_node_model("Conv", [("x", TensorProto.FLOAT, [1, 8, 10, 10]), ("w", TensorProto.FLOAT, [8, 1, 3, 3])],
                                   [("y", TensorProto.FLOAT, None)], opset=18, group=8, pads=[1, 1, 1, 1])
    ref = conv(x, w, group=8, pads=[1, 1, 1, 1])
    fast = run_path("depthwise", x, w, group=8, pads=[1, 1, 1, 1])
    np.testing.assert_allclose(fast, ref, rtol=1e-6, atol=1e-6)
    assert calls  # the default uses the pool
    calls.clear()
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 1
    (y,) = onnxrt.InferenceSession(model.SerializeToString(), so).run(None, {"x": x, "w": w})
    assert not calls
    np.testing.assert_allclose(y, ref, rtol=1e-6, atol=1e-6)


def test_depthwise_infinite_weight_meets_the_zero_padding():
    """The zero-padded definition gives 0 * inf = NaN at the border; the depthwise fast path skips
    padding taps, so infinite weights go through im2col (found by differential fuzzing)."""
    x = np.ones((1, 2, 3, 3), np.float32)
    w = np.ones((2, 1, 3, 3), np.float32)
    w[0, 0, 0, 0] = np.inf
    for fn in (conv, fast_conv):
        y = fn(x, w, group=2, pads=[1, 1, 1, 1])
        assert np.isnan(y[0, 0, 0, 0]) and np.isinf(y[0, 0, 1, 1])
        np.testing.assert_array_equal(y[0, 1], fn(x[:, 1:], w[1:], pads=[1, 1, 1, 1])[0, 0])


def _compiled_matches_numpy_and_float64(fn, x, w, b, kw, rtol64=1e-4):
    """``fn`` (conv or conv_transpose) through its table of fast paths on float32, the numba
    loops active, equals the table's numpy paths (float32 rounding apart), the reference
    and the float64 computation; returns the result."""
    from onnxrt import native as _jit

    assert _jit.kernels() is not None
    reference = fn
    fn = {conv: lambda *a, **k: fast_conv(*a, const=False, **k), conv_transpose: fast_conv_transpose}[fn]
    y = fn(x, w, b, **kw)
    np.testing.assert_allclose(y, reference(x, w, b, **kw), rtol=1e-5, atol=1e-5)
    with _jit.disabled():
        expected = fn(x, w, b, **kw)
    assert y.dtype == np.float32 and y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    ref = fn(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), **kw)
    np.testing.assert_allclose(y, ref, rtol=rtol64, atol=rtol64)
    return y


@pytest.mark.parametrize(
    "kernel, strides, dilations, pads, n_img",
    [
        ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1),
        ((3, 3), (2, 2), (1, 1), (1, 1, 1, 1), 2),
        ((3, 3), (2, 1), (2, 1), (0, 2, 1, 0), 1),
        ((5, 5), (1, 1), (1, 1), (2, 2, 2, 2), 3),
        ((1, 3), (3, 2), (1, 3), (0, 4, 0, 4), 1),
        ((3, 3), (1, 1), (1, 1), (0, 0, 0, 0), 2),
        ((7, 7), (4, 4), (1, 1), (3, 3, 3, 3), 1),  # kernel wider than some rows' reach
        # the polyphase planes of strided and other than 3x3 kernels: both column parities of
        # a stride of 2 (odd and even left pads), 5x5 and 7x7 row sums, a generic width
        ((5, 5), (2, 2), (1, 1), (2, 1, 2, 2), 2),
        ((5, 5), (2, 2), (1, 1), (2, 2, 1, 1), 1),
        ((3, 3), (2, 2), (2, 2), (2, 3, 0, 1), 1),
        ((7, 7), (1, 1), (1, 1), (3, 3, 3, 3), 1),
        ((5, 3), (2, 1), (1, 2), (0, 1, 3, 2), 1),
        ((4, 6), (3, 3), (1, 1), (1, 5, 2, 0), 2),
    ],
)
def test_compiled_depthwise_equals_the_numpy_path(kernel, strides, dilations, pads, n_img):
    """The numba depthwise loop (float32, 2-D, one output per channel) against the im2col
    path and a float64 direct sum: same shape and dtype, float32 rounding apart."""
    rng = np.random.default_rng(7)
    ch = 37
    x = rng.standard_normal((n_img, ch, 13, 11)).astype(np.float32)
    w = rng.standard_normal((ch, 1) + kernel).astype(np.float32)
    b = rng.standard_normal(ch).astype(np.float32)
    kw = dict(group=ch, strides=list(strides), dilations=list(dilations), pads=list(pads), kernel_shape=list(kernel))
    _compiled_matches_numpy_and_float64(conv, x, w, b, kw, rtol64=1e-5)
    # an infinite weight must meet the zero padding as NaN (the padding is materialised)
    w[0, 0, 0, 0] = np.inf
    if any(pads):
        with np.errstate(invalid="ignore"):
            assert np.isnan(conv(x, w, b, **kw)).any()


@pytest.mark.parametrize(
    "kernel, strides, dilations, pads, output_padding, group, n_img",
    [
        ((4, 4), (2, 2), (1, 1), (1, 1, 1, 1), (0, 0), 1, 1),
        ((3, 3), (1, 1), (1, 1), (0, 0, 0, 0), (0, 0), 1, 2),
        ((3, 2), (2, 3), (2, 1), (2, 0, 1, 3), (1, 2), 2, 1),
        ((5, 5), (3, 3), (1, 2), (0, 4, 4, 0), (2, 0), 3, 2),
        ((1, 1), (2, 2), (1, 1), (0, 0, 0, 0), (1, 1), 1, 1),
    ],
)
def test_compiled_conv_transpose_equals_the_numpy_path(kernel, strides, dilations, pads, output_padding, group, n_img):
    """The numba col2im (float32, 2-D) against the phased numpy scatter and float64."""
    rng = np.random.default_rng(9)
    x = rng.standard_normal((n_img, 6, 7, 9)).astype(np.float32)
    w = rng.standard_normal((6, 2, *kernel)).astype(np.float32)  # 2 outputs per group
    b = rng.standard_normal(w.shape[1] * group).astype(np.float32)
    kw = dict(strides=list(strides), dilations=list(dilations), pads=list(pads), output_padding=list(output_padding), group=group)
    _compiled_matches_numpy_and_float64(conv_transpose, x, w, b, kw)


@pytest.mark.parametrize(
    "kernel, strides, dilations, pads, group, n_img",
    [
        ((3, 3), (1, 1), (1, 1), (1, 1, 1, 1), 1, 1),
        ((7, 7), (2, 2), (1, 1), (3, 3, 3, 3), 1, 2),
        ((3, 2), (2, 3), (2, 1), (0, 2, 1, 0), 2, 1),
        ((5, 5), (1, 1), (2, 2), (4, 0, 0, 4), 1, 3),
        ((1, 3), (3, 1), (1, 3), (0, 0, 0, 0), 3, 1),
        ((9, 9), (4, 4), (1, 1), (1, 1, 1, 1), 1, 1),  # taps wholly outside some rows
    ],
)
def test_compiled_im2col_equals_the_numpy_path(kernel, strides, dilations, pads, group, n_img):
    """Convolutions through the numba im2col (float32, 2-D) against the numpy windows and float64."""
    rng = np.random.default_rng(13)
    x = rng.standard_normal((n_img, 6, 11, 10)).astype(np.float32)
    w = rng.standard_normal((6, 6 // group, *kernel)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    kw = dict(group=group, strides=list(strides), dilations=list(dilations), pads=list(pads))
    _compiled_matches_numpy_and_float64(conv, x, w, b, kw)


def test_compiled_bias_and_relu_pass_equals_the_numpy_passes():
    """Conv's bias and fused Relu in one compiled pass give exactly numpy's two passes,
    NaN included (a NaN input pixel stays NaN after Relu)."""
    from onnxrt import native as _jit

    rng = np.random.default_rng(17)
    x = rng.standard_normal((2, 4, 20, 20)).astype(np.float32)
    x[0, 1, 3, 3] = np.nan
    w = rng.standard_normal((8, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    for act in (None, "Relu"):
        y = fast_conv(x, w, b, pads=[1, 1, 1, 1], activation=act, const=False)
        with _jit.disabled():
            expected = fast_conv(x, w, b, pads=[1, 1, 1, 1], activation=act, const=False)
        assert y.dtype == np.float32 and y.shape == (2, 8, 20, 20)
        np.testing.assert_array_equal(np.isnan(y), np.isnan(expected))
        assert np.isnan(y).any()
        np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
        if act == "Relu":
            assert (y[~np.isnan(y)] >= 0).all()


@pytest.mark.parametrize("path", ["bands", "im2col", "1x1", "depthwise", "float64"])
@pytest.mark.parametrize("with_bias", [False, True])
@pytest.mark.parametrize("activation", [None, "Relu", "LeakyRelu"])
def test_conv_adds_a_fused_residual_before_the_activation(path, with_bias, activation, monkeypatch):
    """conv(x, w, b, z): the residual of a fused Conv -> Sum -> activation is added after the
    bias and before the activation, in the compiled epilogues (bands, depthwise planes, one
    pass after a product) and on numpy's path, as the separate nodes compute it."""
    rng = np.random.default_rng(len(path) + with_bias)
    dtype = np.float64 if path == "float64" else np.float32
    group, kernel = (6, (3, 3)) if path == "depthwise" else (1, (1, 1) if path == "1x1" else (3, 3))
    x = rng.standard_normal((2, 6, 9, 9)).astype(dtype)
    w = rng.standard_normal((6, 6 // group) + kernel).astype(dtype)
    b = rng.standard_normal(6).astype(dtype) if with_bias else None
    pads = [0, 0, 0, 0] if path == "1x1" else [1, 1, 1, 1]
    monkeypatch.setattr(fp, "BAND_MIN_PIXELS", 1 if path == "bands" else 1 << 30)
    plain = conv(x, w, b, group=group, pads=pads)
    z = rng.standard_normal(plain.shape).astype(dtype)
    params = (0.1,) if activation == "LeakyRelu" else ()
    for fn in (conv, fast_conv):
        got = fn(x, w, b, z, group=group, pads=pads, activation=activation, activation_params=params)
        want = apply_activation(plain + z, activation, params)
        assert got.dtype == dtype and got.shape == plain.shape
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        # a residual that broadcasts (Sum's numpy semantics)
        small = rng.standard_normal((1, 6, 1, 1)).astype(dtype)
        np.testing.assert_allclose(fn(x, w, b, small, group=group, pads=pads), plain + small, rtol=1e-6, atol=1e-6)
    if path in ("bands", "1x1", "depthwise"):
        assert run(x, w, b, z, group=group, pads=pads, activation=activation, activation_params=params)[1] in (
            path, "depthwise compiled", "im2col compiled") or fp.native.kernels() is None


# ---------------------------------------------------------------------------------------
# Winograd F(2x2, 3x3)
# ---------------------------------------------------------------------------------------


def _read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


def _winograd_calls(monkeypatch) -> list:
    calls = []
    real = fp.conv_winograd

    def spy(*args, **kw):
        calls.append(args[0].shape)
        return real(*args, **kw)

    monkeypatch.setattr(fp, "conv_winograd", spy)
    return calls


@pytest.mark.parametrize(
    "n_img, c, m, hw, pads",
    [
        (1, 32, 40, (14, 14), [1, 1, 1, 1]),
        (2, 48, 16, (16, 10), [1, 1, 1, 1]),
        (1, 33, 24, (16, 16), [0, 0, 0, 0]),  # out 14x14
        (1, 32, 20, (12, 13), [2, 1, 0, 2]),  # out 12x14: tiles reach past the input's edges
    ],
)
@pytest.mark.parametrize("epilogue", ["none", "bias+relu", "bias+residual+relu", "residual"])
def test_winograd_equals_the_direct_convolution(monkeypatch, n_img, c, m, hw, pads, epilogue):
    """3x3 convolutions with unit strides of enough channels whose weights are a model
    constant (the node's ``weights_cache``) go by Winograd F(2x2, 3x3); the result equals im2col and one product within float32 rounding (float64 reference),
    with the bias, a fused residual and Relu applied as the separate nodes apply them."""
    from onnxrt import native as _jit

    if _jit.kernels() is None:
        pytest.skip("no numba")
    rng = np.random.default_rng(31)
    x = rng.standard_normal((n_img, c) + hw).astype(np.float32)
    w = _read_only(rng.standard_normal((m, c, 3, 3)).astype(np.float32))
    b = rng.standard_normal(m).astype(np.float32) if "bias" in epilogue else None
    act = "Relu" if "relu" in epilogue else None
    out_shape = (n_img, m, hw[0] + pads[0] + pads[2] - 2, hw[1] + pads[1] + pads[3] - 2)
    z = rng.standard_normal(out_shape).astype(np.float32) if "residual" in epilogue else None
    calls = _winograd_calls(monkeypatch)
    y = run_path("winograd", x, w, b, z, pads=pads, activation=act)
    assert calls == [x.shape]
    assert y.dtype == np.float32 and y.shape == out_shape and y.flags.c_contiguous
    monkeypatch.setattr(fp, "WINO_MIN_CHANNELS", 1 << 30)
    direct, path = run(x, w, b, z, pads=pads, activation=act)
    assert "winograd" not in path
    assert calls == [x.shape]  # the direct path this time
    ref = conv(x.astype(np.float64), w.astype(np.float64), None if b is None else b.astype(np.float64),
               None if z is None else z.astype(np.float64), pads=pads, activation=act)
    scale = np.abs(ref).max()
    # errors of a few float32 roundings of the sums (9 C products each)
    assert np.abs(y - ref).max() <= 2e-6 * scale
    assert np.abs(direct - ref).max() <= 2e-6 * scale
    if act == "Relu":
        assert (y >= 0).all() and (y == 0).any()
    assert not np.array_equal(y, np.zeros_like(y))


def test_winograd_only_where_it_pays_and_for_weights_that_cannot_change(monkeypatch):
    """Odd maps (tiles wasting over 5%), few input channels, strides, dilations and groups keep
    the direct paths; weights without a node's ``weights_cache`` (feeds, read-only or not) are
    never transformed (a kept transform would go stale); a node's cache serves its transform
    to the array it was made from only."""
    from onnxrt import native as _jit

    if _jit.kernels() is None:
        pytest.skip("no numba")
    rng = np.random.default_rng(32)
    calls = _winograd_calls(monkeypatch)
    w = _read_only(rng.standard_normal((32, 32, 3, 3)).astype(np.float32))
    for shape, kw in [
        ((1, 32, 13, 13), dict(pads=[1, 1, 1, 1])),  # 7x7 tiles for 13x13 pixels: 14% wasted
        ((1, 32, 14, 14), dict(pads=[1, 1, 1, 1], strides=[2, 2])),
        ((1, 32, 14, 14), dict(pads=[2, 2, 2, 2], dilations=[2, 2])),
        ((1, 32, 14, 14), dict(pads=[1, 1, 1, 1], group=2)),
    ]:
        ww = w if kw.get("group", 1) == 1 else _read_only(w[:, :16])
        assert "winograd" not in run(rng.standard_normal((2,) + shape[1:]).astype(np.float32), ww, **kw)[1]
    assert "winograd" not in run(rng.standard_normal((2, 16, 14, 14)).astype(np.float32), _read_only(w[:, :16]),
                                 pads=[1, 1, 1, 1])[1]
    assert calls == []
    x = rng.standard_normal((2, 32, 14, 14)).astype(np.float32)
    writable = w.copy()
    y0, path = run(x, writable, pads=[1, 1, 1, 1], const=False)
    assert calls == [] and path == "im2col compiled"
    writable[:] *= 2  # the caller changes its weights between runs: the next result follows
    np.testing.assert_allclose(fast_conv(x, writable, pads=[1, 1, 1, 1], const=False), 2 * y0, rtol=1e-5, atol=1e-4)
    fast_conv(x, _read_only(writable), pads=[1, 1, 1, 1], const=False)  # read-only, but a feed's: no transform
    assert calls == []
    from .conv_table import conv_op

    op = conv_op(pads=[1, 1, 1, 1])  # W a model constant: the node keeps its transform
    ro = _read_only(writable)
    y1, path = run(x, ro, op=op)
    assert path == "winograd" and len(calls) == 1 and op.weights_cache["winograd"][0] is ro
    np.testing.assert_allclose(y1, 2 * y0, rtol=1e-5, atol=1e-4)
    other = _read_only(w)  # another array through the same node: its own transform
    np.testing.assert_allclose(run(x, other, op=op)[0], y0, rtol=1e-5, atol=1e-4)
    assert len(calls) == 2 and op.weights_cache["winograd"][0] is other


def test_winograd_through_a_session_matches_onnxruntime(monkeypatch):
    """A Conv+Relu model whose 3x3 layer takes the Winograd path (the node's prepared
    executor, made once for the input shape), against onnxruntime."""
    calls = _winograd_calls(monkeypatch)
    prepared = []
    real = fp._build_winograd
    monkeypatch.setattr(fp, "_build_winograd", lambda f, *a: prepared.append((f.n_img, f.n_ch) + f.spatial) or real(f, *a))
    rng = np.random.default_rng(33)
    w = (rng.standard_normal((64, 64, 3, 3)) * 0.1).astype(np.float32)
    b = rng.standard_normal(64).astype(np.float32)
    nodes = [helper.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["Y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 64, 28, 28])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [helper.make_tensor("W", TensorProto.FLOAT, w.shape, w.ravel()), helper.make_tensor("B", TensorProto.FLOAT, b.shape, b)],
    )
    data = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString()
    x = rng.standard_normal((1, 64, 28, 28)).astype(np.float32)
    sess = onnxrt.InferenceSession(data)
    got = sess.run(None, {"X": x})[0]
    want = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, {"X": x})[0]
    np.testing.assert_array_equal(sess.run(None, {"X": x})[0], got)
    # the model's initializer: read-only, transformed once, prepared once
    assert calls == [] and prepared == [(1, 64, 28, 28)]
    assert got.dtype == np.float32 and got.shape == (1, 64, 28, 28)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "shape, wshape, kw",
    [
        ((1, 16, 12, 12), (24, 16, 1, 1), {}),  # 1x1: one product, written in place
        ((1, 8, 11, 11), (24, 8, 3, 3), dict(pads=[1, 1, 1, 1])),  # im2col and one product, in place
        ((1, 32, 14, 14), (24, 32, 3, 3), dict(pads=[1, 1, 1, 1])),  # Winograd, in place
        ((1, 4, 60, 60), (8, 4, 3, 3), dict(pads=[1, 1, 1, 1])),  # bands: computed, then copied
        ((1, 8, 10, 10), (8, 1, 3, 3), dict(pads=[1, 1, 1, 1], group=8)),  # depthwise: copied
        ((1, 8, 10, 10), (8, 4, 1, 1), dict(group=2)),  # grouped 1x1: copied
        ((2, 16, 6, 6), (24, 16, 1, 1), {}),  # two images: copied
    ],
)
def test_conv_into_a_block_of_a_larger_output(shape, wshape, kw):
    """``out=``: the result lands in the given block (a Concat's channels), whichever path
    computes it, equal to the plain call, and nothing around the block changes."""
    rng = np.random.default_rng(34)
    x = rng.standard_normal(shape).astype(np.float32)
    w = _read_only(rng.standard_normal(wshape).astype(np.float32))
    b = rng.standard_normal(wshape[0]).astype(np.float32)
    ref = conv(x, w, b, activation="Relu", **kw)
    # each output sums depth products in some blocking (BLAS, Winograd's transforms, whose
    # constants add a few roundings per term): within 4 depth eps of the sum of |terms|
    # (Relu does not widen a difference)
    depth = int(np.prod(wshape[1:]))
    bound = 4 * depth * np.finfo(np.float32).eps * conv(np.abs(x), np.abs(w), np.abs(b), **kw).astype(np.float64)
    for const in (True, False):  # prepared executors (constant W) and the unprepared entries
        big = np.full((shape[0], wshape[0] + 7) + ref.shape[2:], 5.0, np.float32)
        block = big[:, 3:3 + wshape[0]] if shape[0] == 1 else np.empty_like(ref)
        got, path = run(x, w, b, activation="Relu", out=block, const=const, **kw)
        assert got is block and got.dtype == np.float32 and got.shape == ref.shape, path
        assert np.all(np.abs(got.astype(np.float64) - ref) <= bound), path
        if shape[0] == 1:
            assert (big[:, :3] == 5.0).all() and (big[:, 3 + wshape[0]:] == 5.0).all()


def test_prepared_convolution_is_keyed_by_the_residuals_dtype():
    """The fused Conv + residual kernel with a node's prepared executors: a float32 residual
    first (a prepared float32 executor: 1x1 products and Winograd at 64 channels of 56x56,
    read-only weights), then float64 and int8 residuals of the same shape. Each call must
    compute with its own residual, never read its buffer as float32 (past its end for int8:
    a crash at large shapes, stray values at small ones). (Through a session the engine now
    refuses a residual whose type differs from the convolution's, tests/engine/test_type_checks.py;
    the kernel's cache must not rely on it.)"""
    from .conv_table import conv_op, dispatcher

    rng = np.random.default_rng(0)
    for k in (1, 3):
        w = rng.random((64, 64, k, k)).astype(np.float32)
        w.flags.writeable = False  # as a model's initializers: Winograd's transform is kept
        x = rng.random((1, 64, 56, 56)).astype(np.float32)
        kw = dict(pads=[k // 2] * 4, kernel_shape=[k, k])
        plain = conv(x, w, None, None, **kw).astype(np.float64)
        # positive operands: each output is a sum of 64 k^2 products, whatever path computes
        # it the rounding stays within that many ulps of the output (plus the residual's add)
        atol = (64 * k * k + 1) * np.finfo(np.float32).eps * (plain.max() + 3)
        d = dispatcher(conv_op(z=True, **kw))
        for _ in range(2):  # each type's second call goes through whatever its first prepared
            for z in (np.full(plain.shape, 0.5, np.float32), np.full(plain.shape, 2.0, np.float64),
                      np.full(plain.shape, 3, np.int8)):
                y = d(x, w, None, z)[0]
                assert y.shape == (1, 64, 56, 56)
                np.testing.assert_allclose(y.astype(np.float64), plain + float(z.flat[0]), rtol=0, atol=atol)
        names = [name for _, name in d.choices()]
        assert len(names) == 3 and not any(n.startswith("prepared") for n in names[1:])
        assert names[0].startswith("prepared") or fp.native.kernels() is None  # a float32 executor, for float32 only
