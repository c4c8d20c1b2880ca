"""Limits, continued: the convolution family's and MaxUnpool's model- or data-sized allocations, terminate in SequenceMap."""

from __future__ import annotations

import io

import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.errors import RunTerminatedError

from .test_limits import G, MIB, refused, session, started, terminated_from_another_thread, vi  # noqa: F401  (started: a fixture)

F, I64, U8, I32 = TensorProto.FLOAT, TensorProto.INT64, TensorProto.UINT8, TensorProto.INT32

x4 = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
w3 = np.ones((1, 1, 3, 3), np.float32)


def init(name, value):
    return numpy_helper.from_array(np.asarray(value), name)


def model_bytes(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)]).SerializeToString()


def ort_run(nodes, inputs, outputs, opset, feeds, initializers=()):
    so = ort.SessionOptions()
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model_bytes(nodes, inputs, outputs, opset, initializers), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def plan_ops(sess):
    return [st.op_type for st in sess.engine.plan.steps]


# -- ConvConcat: the optimizer's fusion keeps Conv's checks -----------------------------------


def conv_concat(pads):
    nodes = [helper.make_node("Conv", ["x", "wa"], ["a"], pads=pads), helper.make_node("Conv", ["x", "wb"], ["b"], pads=[1, 1, 1, 1]),
             helper.make_node("Concat", ["a", "b"], ["y"], axis=1, name="big")]
    wb = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3) / 8
    return nodes, [vi("x", F, [1, 1, None, None])], [vi("y", F)], [init("wa", w3), init("wb", wb)]


def test_conv_concat_refuses_absurd_pads_of_a_segment():
    nodes, inputs, outputs, inits = conv_concat([G, G, G, G])
    sess = session(nodes, inputs, outputs, opset=11, initializers=inits)
    assert plan_ops(sess) == ["ConvConcat"]
    msg, peak = refused(sess, {"x": x4})
    assert "Node 'big'" in msg and f"Conv output of shape [1, 1, {2 * G + 2}, {2 * G + 2}]" in msg
    assert "the machine's physical memory" in msg
    assert peak < 20 * 2**20


def test_conv_concat_under_a_cap():
    nodes, inputs, outputs, inits = conv_concat([1, 1, 1, 1])
    sess = session(nodes, inputs, outputs, opset=11, initializers=inits, cap=MIB)
    assert plan_ops(sess) == ["ConvConcat"]
    # each segment (1, 1, 400, 400) float32 fits; their concatenation (1, 2, 400, 400) does not
    msg, peak = refused(sess, {"x": np.ones((1, 1, 400, 400), np.float32)})
    assert "Node 'big'" in msg and "ConvConcat output of shape [1, 2, 400, 400] and dtype float32 needs 1280000 bytes" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    assert peak < 640000
    # one segment alone over the cap
    msg, _ = refused(sess, {"x": np.ones((1, 1, 600, 600), np.float32)})
    assert "Conv output of shape [1, 1, 600, 600]" in msg
    x = np.random.default_rng(0).standard_normal((1, 1, 9, 7)).astype(np.float32)
    (y,) = sess.run(None, {"x": x})
    (expected,) = ort_run(nodes, inputs, outputs, 11, {"x": x}, inits)
    assert y.shape == (1, 2, 9, 7) and y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


# -- ConvInteger, QLinearConv, DeformConv ---------------------------------------------------


def conv_integer(pads):
    return [helper.make_node("ConvInteger", ["x", "w"], ["y"], name="big", pads=pads)], [vi("x", U8, [1, 1, None, None])], \
        [vi("y", I32)], [init("w", np.arange(9, dtype=np.uint8).reshape(1, 1, 3, 3))]


def qlinear_conv(pads):
    inits = [init("xs", np.float32(0.5)), init("xz", np.uint8(3)), init("w", np.arange(9, dtype=np.uint8).reshape(1, 1, 3, 3)),
             init("ws", np.float32(0.25)), init("wz", np.uint8(1)), init("ys", np.float32(2.0)), init("yz", np.uint8(5))]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], name="big", pads=pads)
    return [node], [vi("x", U8, [1, 1, None, None])], [vi("y", U8)], inits


@pytest.mark.parametrize("build", [conv_integer, qlinear_conv], ids=["conv_integer", "qlinear_conv"])
def test_integer_convolutions_refuse_absurd_pads(build):
    nodes, inputs, outputs, inits = build([G, G, G, G])
    sess = session(nodes, inputs, outputs, opset=11, initializers=inits)
    msg, peak = refused(sess, {"x": np.ones((1, 1, 4, 4), np.uint8)})
    op = nodes[0].op_type
    assert "Node 'big'" in msg and f"{op} accumulator of shape [1, 1, {2 * G + 2}, {2 * G + 2}] and dtype float64" in msg
    assert "the machine's physical memory" in msg
    assert peak < 20 * 2**20


@pytest.mark.parametrize("build", [conv_integer, qlinear_conv], ids=["conv_integer", "qlinear_conv"])
def test_integer_convolutions_under_a_cap(build):
    nodes, inputs, outputs, inits = build([1, 1, 1, 1])
    sess = session(nodes, inputs, outputs, opset=11, initializers=inits, cap=MIB)
    op = nodes[0].op_type
    # 400 * 400 float64 accumulators: 1280000 bytes
    msg, peak = refused(sess, {"x": np.ones((1, 1, 400, 400), np.uint8)})
    assert "Node 'big'" in msg and f"{op} accumulator of shape [1, 1, 400, 400] and dtype float64 needs 1280000 bytes" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    assert peak < 640000
    x = np.random.default_rng(1).integers(0, 256, (1, 1, 300, 300), dtype=np.uint8)  # 302 * 302 * 8 bytes padded: under
    (y,) = sess.run(None, {"x": x})
    (expected,) = ort_run(nodes, inputs, outputs, 11, {"x": x}, inits)
    assert y.shape == (1, 1, 300, 300) and y.dtype == expected.dtype
    np.testing.assert_array_equal(y, expected)


def deform_conv(pads, channels=8):
    node = helper.make_node("DeformConv", ["x", "w", "offset"], ["y"], name="big", kernel_shape=[3, 3], pads=pads)
    w = (np.arange(channels * 9, dtype=np.float32).reshape(1, channels, 3, 3) - 30) / 16
    return [node], [vi("x", F, [1, channels, None, None]), vi("offset", F, [1, 18, None, None])], [vi("y", F)], [init("w", w)]


def test_deform_conv_refuses_absurd_pads():
    nodes, inputs, outputs, inits = deform_conv([G, G, G, G], channels=1)
    sess = session(nodes, inputs, outputs, opset=19, initializers=inits)
    msg, peak = refused(sess, {"x": x4, "offset": np.zeros((1, 18, 4, 4), np.float32)})
    assert "Node 'big'" in msg and f"DeformConv output of shape [1, 1, {2 * G + 2}, {2 * G + 2}]" in msg
    assert "the machine's physical memory" in msg
    assert peak < 20 * 2**20


def test_deform_conv_sampled_columns_under_a_cap():
    nodes, inputs, outputs, inits = deform_conv([1, 1, 1, 1])
    sess = session(nodes, inputs, outputs, opset=19, initializers=inits, cap=MIB)
    # output (1, 1, 64, 64) and offsets (1, 18, 64, 64) fit; the sampled columns (1, 8, 9, 4096) do not
    msg, peak = refused(sess, {"x": np.ones((1, 8, 64, 64), np.float32), "offset": np.zeros((1, 18, 64, 64), np.float32)})
    assert "Node 'big'" in msg and "DeformConv sampled columns of shape [1, 8, 9, 4096] and dtype float32 needs 1179648 bytes" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    assert peak < 589824
    rng = np.random.default_rng(2)
    feeds = {"x": rng.standard_normal((1, 8, 48, 48)).astype(np.float32),  # 663552 bytes of columns
             "offset": rng.uniform(-1.5, 1.5, (1, 18, 48, 48)).astype(np.float32)}
    (y,) = sess.run(None, feeds)
    (expected,) = ort_run(nodes, inputs, outputs, 19, feeds, inits)
    assert y.shape == (1, 1, 48, 48) and y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)


# -- MaxUnpool --------------------------------------------------------------------------------


def max_unpool(**atts):
    node = helper.make_node("MaxUnpool", ["x", "i", "s"], ["y"], name="big", kernel_shape=[2, 2], **atts)
    return [node], [vi("x", F, [1, 1, 2, 2]), vi("i", I64, [1, 1, 2, 2]), vi("s", I64, [4])], [vi("y", F)]


xu = np.array([[[[5, 6], [7, 8]]]], np.float32)
iu = np.array([[[[0, 3], [9, 15]]]], np.int64)  # flat positions in the unpooled (1, 1, 4, 4)


@pytest.mark.parametrize("atts,feed,shape", [
    ({"strides": [2, 2]}, [1, 1, G, G], f"MaxUnpool output of shape [1, 1, {G}, {G}]"),
    ({"strides": [G, G]}, [1, 1, 4, 4], f"MaxUnpool unpooled tensor of shape [1, 1, {G + 2}, {G + 2}]"),
], ids=["output_shape", "strides"])
def test_max_unpool_refuses_absurd_sizes(atts, feed, shape):
    sess = session(*max_unpool(**atts), opset=11)
    msg, peak = refused(sess, {"x": xu, "i": iu, "s": np.array(feed)})
    assert "Node 'big'" in msg and shape in msg
    assert "the machine's physical memory" in msg
    assert peak < 20 * 2**20


def test_max_unpool_output_shape_under_a_cap():
    sess = session(*max_unpool(strides=[2, 2]), opset=11, cap=MIB)
    msg, peak = refused(sess, {"x": xu, "i": iu, "s": np.array([1, 1, 600, 600])})
    assert "Node 'big'" in msg and "MaxUnpool output of shape [1, 1, 600, 600] and dtype float32 needs 1440000 bytes" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    assert peak < 720000
    (y,) = sess.run(None, {"x": xu, "i": iu, "s": np.array([1, 1, 500, 500])})
    expected = np.zeros((1, 1, 500, 500), np.float32)
    expected[0, 0, 0, 0], expected[0, 0, 0, 3], expected[0, 0, 2, 1], expected[0, 0, 3, 3] = 5, 6, 7, 8
    assert y.shape == (1, 1, 500, 500) and y.dtype == np.float32
    np.testing.assert_array_equal(y, expected)


# -- RunOptions.terminate in SequenceMap ------------------------------------------------------


def test_terminate_stops_a_sequence_map(started):
    body = helper.make_graph([helper.make_node("MarkStarted", ["e"], ["o"], domain="test.limits")], "body",
                             [vi("e", F, [1])], [vi("o", F, [1])])
    seq = helper.make_tensor_sequence_value_info
    graph = helper.make_graph([helper.make_node("SequenceMap", ["xs"], ["ys"], body=body, name="map")], "g",
                              [seq("xs", F, [1])], [seq("ys", F, [1])])
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("test.limits", 1)])
    sess = onnxrt.InferenceSession(m.SerializeToString())
    one = np.zeros(1, np.float32)
    err = terminated_from_another_thread(sess, {"xs": [one] * 10**6}, started)
    assert isinstance(err, RunTerminatedError)
    assert "Node 'map' (SequenceMap)" in str(err) and "RunOptions.terminate" in str(err)
    # the session runs on with fresh options
    (ys,) = sess.run(None, {"xs": [one, one + 2]}, onnxrt.RunOptions())
    assert len(ys) == 2 and all(y.dtype == np.float32 for y in ys)
    np.testing.assert_array_equal(ys, [[1.0], [3.0]])


# -- AffineGrid, MaxRoiPool, RoiAlign ---------------------------------------------------------


theta = np.array([[[1, 0, 0], [0, 1, 0]]], np.float32)
x_roi = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
rois = np.array([[0, 0, 0, 3, 3]], np.float32)

# (name, nodes, inputs, feeds, opset, the refused shape as the message writes it)
MORE_HUGE = [
    ("affine_grid", [helper.make_node("AffineGrid", ["t", "s"], ["y"], name="big")], [vi("t", F, [1, 2, 3]), vi("s", I64, [4])],
     {"t": theta, "s": np.array([1, 1, G, G])}, 20, f"AffineGrid output of shape [1, {G}, {G}, 2]"),
    ("affine_grid_no_image", [helper.make_node("AffineGrid", ["t", "s"], ["y"], name="big")], [vi("t", F, [0, 2, 3]), vi("s", I64, [4])],
     {"t": np.zeros((0, 2, 3), np.float32), "s": np.array([0, 1, G, G])}, 20, f"AffineGrid base positions of shape [{G * G}, 3]"),
    ("max_roi_pool", [helper.make_node("MaxRoiPool", ["x", "r"], ["y"], name="big", pooled_shape=[G, G])],
     [vi("x", F, [1, 2, 4, 4]), vi("r", F, [1, 5])], {"x": x_roi, "r": rois}, 11, f"MaxRoiPool output of shape [1, 2, {G}, {G}]"),
    ("roi_align", [helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="big", output_height=G, output_width=G)],
     [vi("x", F, [1, 2, 4, 4]), vi("r", F, [1, 4]), vi("b", I64, [1])], {"x": x_roi, "r": rois[:, 1:], "b": np.zeros(1, np.int64)}, 16,
     f"RoiAlign output of shape [1, 2, {G}, {G}]"),
]


@pytest.mark.parametrize("case", MORE_HUGE, ids=[c[0] for c in MORE_HUGE])
def test_more_absurd_sizes_are_refused_before_any_allocation(case):
    _, nodes, inputs, feeds, opset, shape = case
    sess = session(nodes, inputs, [vi("y", F)], opset=opset)
    msg, peak = refused(sess, feeds)
    assert "Node 'big'" in msg and shape in msg
    assert "the machine's physical memory" in msg
    assert peak < 20 * 2**20


def roi_nodes(op, n):
    if op == "MaxRoiPool":
        return [helper.make_node("MaxRoiPool", ["x", "r"], ["y"], name="big", pooled_shape=[n, n])]
    return [helper.make_node("RoiAlign", ["x", "r", "b"], ["y"], name="big", output_height=n, output_width=n)]


def test_affine_grid_under_a_cap():
    nodes = [helper.make_node("AffineGrid", ["t", "s"], ["y"], name="big", align_corners=1)]
    inputs = [vi("t", F, [1, 2, 3]), vi("s", I64, [4])]
    sess = session(nodes, inputs, [vi("y", F)], opset=20, cap=MIB)
    msg, peak = refused(sess, {"t": theta, "s": np.array([1, 1, 400, 400])})
    assert "Node 'big'" in msg and "AffineGrid output of shape [1, 400, 400, 2] and dtype float32 needs 1280000 bytes" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    assert peak < 640000
    t = np.array([[[0.5, -0.25, 0.1], [0.3, 1.5, -0.2]]], np.float32)
    feeds = {"t": t, "s": np.array([1, 3, 280, 280])}  # 627200 bytes of grid, 940800 of base positions (x, y, 1)
    (y,) = sess.run(None, feeds)
    (expected,) = ort_run(nodes, inputs, [vi("y", F)], 20, feeds)
    assert y.shape == (1, 280, 280, 2) and y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("op", ["MaxRoiPool", "RoiAlign"])
def test_roi_pools_under_a_cap(op):
    inputs = [vi("x", F, [1, 2, 4, 4]), vi("r", F, [None, 5 if op == "MaxRoiPool" else 4])]
    if op == "RoiAlign":
        inputs.append(vi("b", I64, [None]))
    many = np.tile(rois if op == "MaxRoiPool" else rois[:, 1:], (400, 1))
    feeds = {"x": x_roi, "r": many}
    if op == "RoiAlign":
        feeds["b"] = np.zeros(400, np.int64)
    opset = 11 if op == "MaxRoiPool" else 16
    sess = session(roi_nodes(op, 20), inputs, [vi("y", F)], opset=opset, cap=MIB)
    # 400 boxes of 2 channels of 20 x 20: 1280000 bytes
    msg, peak = refused(sess, feeds)
    assert "Node 'big'" in msg and f"{op} output of shape [400, 2, 20, 20] and dtype float32 needs 1280000 bytes" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    assert peak < 640000
    fit = {k: v[:300] if k != "x" else v for k, v in feeds.items()}  # 960000 bytes
    (y,) = sess.run(None, fit)
    (expected,) = ort_run(roi_nodes(op, 20), inputs, [vi("y", F)], opset, fit)
    assert y.shape == (300, 2, 20, 20) and y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


# -- CastMap (SPARSE): the width comes from max_map ----------------------------------------------


def cast_map(max_map):
    node = helper.make_node("CastMap", ["m"], ["y"], name="big", domain="ai.onnx.ml", map_form="SPARSE", cast_to="TO_FLOAT",
                            max_map=max_map)
    graph = helper.make_graph([node], "g", [helper.make_value_info("m", helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, None)))],
                              [vi("y", F)])
    ops = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 1)]
    return helper.make_model(graph, opset_imports=ops).SerializeToString()


@pytest.mark.parametrize("max_map,cap,shape", [(10**15, None, f"[1, {10**15}]"), (300000, MIB, "[1, 300000]")], ids=["absurd", "cap"])
def test_cast_map_width_is_checked(max_map, cap, shape):
    so = onnxrt.SessionOptions()
    if cap is not None:
        so.max_tensor_bytes = cap
    sess = onnxrt.InferenceSession(cast_map(max_map), so)
    msg, peak = refused(sess, {"m": {1: 2.0, 4: 5.0}})
    assert "Node 'big'" in msg and f"CastMap output of shape {shape} and dtype float32" in msg
    assert ("SessionOptions.max_tensor_bytes" if cap else "the machine's physical memory") in msg
    assert peak < 600000


def test_cast_map_under_a_cap():
    so = onnxrt.SessionOptions()
    so.max_tensor_bytes = MIB
    sess = onnxrt.InferenceSession(cast_map(200000), so)  # 800000 bytes
    (y,) = sess.run(None, {"m": {1: 2.0, 4: 5.0, 250000: 7.0}})
    ref = ort.InferenceSession(cast_map(200000), providers=["CPUExecutionProvider"])
    (expected,) = ref.run(None, {"m": {1: 2.0, 4: 5.0, 250000: 7.0}})
    assert y.shape == (1, 200000) and y.dtype == np.float32
    np.testing.assert_array_equal(y, expected)
    assert y[0, 1] == 2.0 and y[0, 4] == 5.0 and np.count_nonzero(y) == 2


# -- STFT: overlapping frames make the output quadratic in the signal's length ----------------------


def stft_session(cap=None, window=False):
    node = helper.make_node("STFT", ["x", "step", "w" if window else "", "fl"], ["y"], name="big", onesided=1)
    inputs = [vi("x", F, [1, None, 1]), vi("step", I64, []), vi("fl", I64, [])] + ([vi("w", F, [None])] if window else [])
    return session([node], inputs, [vi("y", F)], opset=17, cap=cap), ([node], inputs, [vi("y", F)])


def test_stft_refuses_an_absurd_output():
    sess, _ = stft_session()
    n = 2 * 10**6  # an 8 MB signal, frames of half its length one sample apart: 8 * 10**12 bytes out
    msg, peak = refused(sess, {"x": np.zeros((1, n, 1), np.float32), "step": np.array(1), "fl": np.array(n // 2)})
    assert "Node 'big'" in msg and f"STFT output of shape [1, {n // 2 + 1}, {n // 4 + 1}, 2] and dtype float32" in msg
    assert "the machine's physical memory" in msg
    assert peak < 20 * 2**20


def test_stft_under_a_cap():
    sess, _ = stft_session(cap=MIB, window=True)
    x = np.random.default_rng(3).standard_normal((1, 1000, 1)).astype(np.float32)
    # 501 frames of 500 samples, windowed: 1002000 bytes, under; the output of 251 bins: 1006008 bytes, under
    feeds = {"x": x, "step": np.array(1), "fl": np.array(500), "w": np.hanning(500).astype(np.float32)}
    (y,) = sess.run(None, feeds)
    # numpy in float64 (onnxruntime's float32 FFT is off by 1e-3 on these sums of 500 terms)
    frames = np.lib.stride_tricks.sliding_window_view(x[0, :, 0].astype(np.float64), 500) * feeds["w"]
    spectrum = np.fft.rfft(frames, axis=-1)
    expected = np.stack([spectrum.real, spectrum.imag], axis=-1)[None]
    assert y.shape == (1, 501, 251, 2) and y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-4, atol=1e-4)
    # a longer signal: 2001 frames of 251 bins, 4018008 bytes
    msg, peak = refused(sess, {**feeds, "x": np.zeros((1, 2500, 1), np.float32)})
    assert "Node 'big'" in msg and "STFT output of shape [1, 2001, 251, 2] and dtype float32 needs 4018008 bytes" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    assert peak < 2 * 10**6


# -- ImageDecoder: the header's size under max_tensor_bytes ------------------------------------------


def test_image_decoder_checks_the_headers_size_before_decoding():
    image = pytest.importorskip("PIL.Image")

    def png(h, w):
        buf = io.BytesIO()
        pixels = (np.arange(h * w * 3) % 251).astype(np.uint8).reshape(h, w, 3)
        image.fromarray(pixels).save(buf, format="PNG")
        return np.frombuffer(buf.getvalue(), np.uint8), pixels

    node = helper.make_node("ImageDecoder", ["x"], ["y"], name="big", pixel_format="RGB")
    sess = session([node], [vi("x", U8, [None])], [vi("y", U8)], opset=20, cap=MIB)
    big, _ = png(400, 400)  # 480000 bytes decoded: under
    (y,) = sess.run(None, {"x": big})
    assert y.shape == (400, 400, 3) and y.dtype == np.uint8
    np.testing.assert_array_equal(y, (np.arange(400 * 400 * 3) % 251).astype(np.uint8).reshape(400, 400, 3))
    bigger, _ = png(800, 500)  # 1200000 bytes decoded
    msg, peak = refused(sess, {"x": bigger})
    assert "Node 'big'" in msg and "ImageDecoder output of shape [800, 500, 3] and dtype uint8 needs 1200000 bytes" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    assert peak < 600000
