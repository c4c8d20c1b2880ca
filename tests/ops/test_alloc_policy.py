"""Allocation policy: every kernel that takes a size from the model or the data checks it
with ``OpRun.check_alloc`` (``SessionOptions.max_tensor_bytes``) before building anything.

Each row builds a one-node model whose output is too large for a 1 MiB cap, asserts
onnxrt's ``AllocationError`` naming the node, and that the run allocated far less than the
refused tensor (``tracemalloc``); the same node with a small size gives the values of
``onnx.reference`` (or of numpy).
"""

from __future__ import annotations


import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxrt

from ..engine.test_limits import refused  # the AllocationError message of a run, and its traced peak

F, D, I64, I8 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT64, TensorProto.INT8
MIB = 2**20
G = 10**9


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def model(nodes, inputs, outputs, opset, initializers=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def session(m, cap=MIB):
    so = onnxrt.SessionOptions()
    if cap is not None:
        so.max_tensor_bytes = cap
    return onnxrt.InferenceSession(m.SerializeToString(), so)


x4 = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
w3 = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3) / 9


def node(op, inputs, **atts):
    return [helper.make_node(op, inputs, ["y"], name="big", **atts)]


def body_graph(nodes, inputs, outputs, initializers=()):
    return helper.make_graph(nodes, "body", inputs, outputs, list(initializers))


# a Loop whose body emits a [1000] float scan output per iteration: M iterations stack to [M, 1000]
LOOP_BODY = body_graph(
    [helper.make_node("Identity", ["c"], ["c2"]), helper.make_node("Expand", ["fi", "s"], ["e"]),
     helper.make_node("Cast", ["i"], ["fi"], to=F)],
    [vi("i", I64, []), vi("c", TensorProto.BOOL, [])], [vi("c2", TensorProto.BOOL, []), vi("e", F, [1000])],
    [numpy_helper.from_array(np.array([1000], np.int64), "s")],
)
# a Scan whose body turns each [1] slice into a [1000] row: N slices stack to [N, 1000]
SCAN_BODY = body_graph(
    [helper.make_node("Expand", ["xi", "s"], ["e"])], [vi("xi", F, [1])], [vi("e", F, [1000])],
    [numpy_helper.from_array(np.array([1000], np.int64), "s")],
)

# (id, nodes, inputs, opset, feeds refused under 1 MiB, feeds that fit, output type, what the message names)
CASES = [
    ("resize", node("Resize", ["x", "", "", "s"], mode="linear"), [vi("x", F, [1, 1, 4, 4]), vi("s", I64, [4])], 19,
     {"x": x4, "s": np.array([1, 1, 4000, 4000])}, {"s": np.array([1, 1, 6, 7])}, F, "[1, 1, 4000, 4000]"),
    ("upsample", node("Upsample", ["x", "s"], mode="nearest"), [vi("x", F, [1, 1, 4, 4]), vi("s", F, [4])], 9,
     {"x": x4, "s": np.array([1, 1, 600, 600], np.float32)}, {"s": np.array([1, 1, 2, 3], np.float32)}, F, "[1, 1, 2400, 2400]"),
    ("tile", node("Tile", ["x", "r"]), [vi("x", F, [2, 2]), vi("r", I64, [2])], 13,
     {"x": np.arange(4, dtype=np.float32).reshape(2, 2), "r": np.array([600, 600])}, {"r": np.array([2, 3])}, F, "[1200, 1200]"),
    ("pad", node("Pad", ["x", "p"]), [vi("x", F, [2, 2]), vi("p", I64, [4])], 13,
     {"x": np.arange(4, dtype=np.float32).reshape(2, 2), "p": np.array([600, 600, 600, 600])}, {"p": np.array([1, 0, 2, 1])}, F,
     "[1202, 1202]"),
    ("expand", node("Expand", ["x", "s"]), [vi("x", F, [1]), vi("s", I64, [2])], 13,
     {"x": np.array([2.5], np.float32), "s": np.array([1024, 1024])}, {"s": np.array([3, 4])}, F, "[1024, 1024]"),
    ("constant_of_shape", node("ConstantOfShape", ["s"], value=numpy_helper.from_array(np.array([1.5], np.float32))),
     [vi("s", I64, [2])], 13, {"s": np.array([1024, 1024])}, {"s": np.array([3, 4])}, F, "[1024, 1024]"),
    ("one_hot", node("OneHot", ["i", "d", "v"]), [vi("i", I64, [4]), vi("d", I64, []), vi("v", F, [2])], 11,
     {"i": np.array([0, 3, 1, 2]), "d": np.array(10**6), "v": np.array([0, 1], np.float32)}, {"d": np.array(5)}, F,
     "[4, 1000000]"),
    ("range", node("Range", ["a", "b", "d"]), [vi("a", F, []), vi("b", F, []), vi("d", F, [])], 11,
     {"a": np.array(0, np.float32), "b": np.array(10**6, np.float32), "d": np.array(1, np.float32)},
     {"b": np.array(7, np.float32)}, F, "[1000000]"),
    ("loop_scan_output", [helper.make_node("Loop", ["M", ""], ["y"], name="big", body=LOOP_BODY)], [vi("M", I64, [])], 13,
     {"M": np.array(2000)}, {"M": np.array(3)}, F, "Loop scan output 'e' of shape ["),
    ("scan", [helper.make_node("Scan", ["x"], ["y"], name="big", body=SCAN_BODY, num_scan_inputs=1)], [vi("x", F, [None, 1])], 11,
     {"x": np.ones((1000, 1), np.float32)}, {"x": np.arange(3, dtype=np.float32).reshape(3, 1)}, F, "[1000, 1000]"),
    ("conv_transpose", node("ConvTranspose", ["x", "w"], output_shape=[1000, 1000]), [vi("x", F, [1, 1, 4, 4]), vi("w", F, [1, 1, 3, 3])],
     11, {"x": x4, "w": w3}, None, F, "[1, 1, 1000, 1000]"),
    ("conv_pads", node("Conv", ["x", "w"], pads=[600, 600, 600, 600]), [vi("x", F, [1, 1, 4, 4]), vi("w", F, [1, 1, 3, 3])], 11,
     {"x": x4, "w": w3}, None, F, "[1, 1, 1202, 1202]"),
    ("max_pool_pads", node("MaxPool", ["x"], kernel_shape=[2, 2], pads=[1, 1, 600, 600]), [vi("x", F, [1, 1, 4, 4])], 11,
     {"x": x4}, None, F, "[1, 1, 604, 604]"),
    ("random_normal", node("RandomNormal", [], shape=[1024, 1024]), [], 11, {}, None, F, "[1024, 1024]"),
    ("random_uniform", node("RandomUniform", [], shape=[1024, 1024]), [], 11, {}, None, F, "[1024, 1024]"),
    ("random_normal_like", node("RandomNormalLike", ["x"], dtype=D), [vi("x", I8, [None, None])], 11,
     {"x": np.zeros((400, 400), np.int8)}, None, D, "[400, 400]"),
    ("random_uniform_like", node("RandomUniformLike", ["x"], dtype=D), [vi("x", I8, [None, None])], 11,
     {"x": np.zeros((400, 400), np.int8)}, None, D, "[400, 400]"),
    ("multinomial", node("Multinomial", ["x"], sample_size=10**6), [vi("x", F, [1, 2])], 11,
     {"x": np.zeros((1, 2), np.float32)}, None, TensorProto.INT32, "[1, 1000000]"),
    ("tfidf", node("TfIdfVectorizer", ["x"], mode="TF", min_gram_length=1, max_gram_length=1, max_skip_count=0,
                   ngram_counts=[0], ngram_indexes=[10**6], pool_int64s=[1]), [vi("x", I64, [4])], 11,
     {"x": np.ones(4, np.int64)}, None, F, "[1000001]"),
    ("dft", node("DFT", ["x", "n"]), [vi("x", F, [1, 8, 1]), vi("n", I64, [])], 20,
     {"x": np.arange(8, dtype=np.float32).reshape(1, 8, 1), "n": np.array(10**6)}, {"n": np.array(5)}, F, "[1, 1000000, 2]"),
    ("stft", node("STFT", ["x", "s", "", "l"]), [vi("x", F, [1, 4096, 1]), vi("s", I64, []), vi("l", I64, [])], 17,
     {"x": np.arange(4096, dtype=np.float32).reshape(1, 4096, 1) / 4096, "s": np.array(1), "l": np.array(2048)}, {"s": np.array(8), "l": np.array(16)},
     F, "STFT"),
    ("hann_window", node("HannWindow", ["n"]), [vi("n", I64, [])], 17, {"n": np.array(10**6)}, {"n": np.array(10)}, F, "[1000000]"),
    ("hamming_window", node("HammingWindow", ["n"]), [vi("n", I64, [])], 17, {"n": np.array(10**6)}, {"n": np.array(10)}, F, "[1000000]"),
    ("blackman_window", node("BlackmanWindow", ["n"]), [vi("n", I64, [])], 17, {"n": np.array(10**6)}, {"n": np.array(10)}, F, "[1000000]"),
    ("mel_weight_matrix", node("MelWeightMatrix", ["n", "d", "r", "lo", "hi"]),
     [vi("n", I64, []), vi("d", I64, []), vi("r", I64, []), vi("lo", F, []), vi("hi", F, [])], 17,
     {"n": np.array(8), "d": np.array(G), "r": np.array(8000), "lo": np.array(0, np.float32), "hi": np.array(4000, np.float32)},
     {"d": np.array(64)}, F, f"[{G // 2 + 1}, 8]"),
    ("col2im", node("Col2Im", ["x", "i", "b"], strides=[1000, 1000]), [vi("x", F, [1, 1, 1]), vi("i", I64, [2]), vi("b", I64, [2])], 18,
     {"x": np.ones((1, 1, 1), np.float32), "i": np.array([1000, 1000]), "b": np.array([1, 1])}, None, F, "[1, 1, 1000, 1000]"),
    ("center_crop_pad", node("CenterCropPad", ["x", "s"]), [vi("x", F, [2, 2]), vi("s", I64, [2])], 18,
     {"x": np.arange(4, dtype=np.float32).reshape(2, 2), "s": np.array([1024, 1024])}, {"s": np.array([3, 1])}, F, "[1024, 1024]"),
    ("concat", node("Concat", ["a", "b"], axis=0), [vi("a", F, [None, 300]), vi("b", F, [None, 300])], 13,
     {"a": np.ones((600, 300), np.float32), "b": np.ones((600, 300), np.float32)},
     {"a": np.ones((2, 300), np.float32), "b": np.zeros((1, 300), np.float32)}, F, "[1200, 300]"),
    ("concat_from_sequence", [helper.make_node("SequenceConstruct", ["a"] * 300, ["s"]),
                              helper.make_node("ConcatFromSequence", ["s"], ["y"], name="big", axis=0, new_axis=1)],
     [vi("a", F, [None])], 11, {"a": np.arange(1000, dtype=np.float32)}, {"a": np.arange(3, dtype=np.float32)}, F, "[300000]"),
    ("gather", node("Gather", ["x", "i"], axis=0), [vi("x", F, [1, 1000]), vi("i", I64, [None])], 13,
     {"x": np.arange(1000, dtype=np.float32).reshape(1, 1000), "i": np.zeros(1000, np.int64)}, {"i": np.array([0, -1, 0])}, F,
     "[1000, 1000]"),
    ("einsum", node("Einsum", ["a", "b"], equation="i,j->ij"), [vi("a", F, [None]), vi("b", F, [None])], 12,
     {"a": np.ones(1000, np.float32), "b": np.ones(1000, np.float32)},
     {"a": np.arange(3, dtype=np.float32), "b": np.arange(4, dtype=np.float32)}, F, "[1000, 1000]"),
    ("add_broadcast", node("Add", ["a", "b"]), [vi("a", F, [None, 1]), vi("b", F, [1, None])], 13,
     {"a": np.ones((1000, 1), np.float32), "b": np.ones((1, 1000), np.float32)},
     {"a": np.arange(3, dtype=np.float32).reshape(3, 1), "b": np.arange(4, dtype=np.float32).reshape(1, 4)}, F, "[1000, 1000]"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_a_size_over_the_cap_is_refused_before_work(case):
    # loading the compiled kernels (a fast path's condition may ask for them) allocates
    # ~20 MB of Python objects once per process: not the run's work, so done before tracing
    onnxrt.native.kernels()
    _, nodes, inputs, opset, feeds, _, out_type, named = case
    sess = session(model(nodes, inputs, [vi("y", out_type)], opset))
    msg, peak = refused(sess, feeds)
    assert "Node 'big'" in msg, msg
    assert named in msg, msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    needed = int(msg.split(" needs ")[1].split(" ")[0])
    assert needed > MIB
    if case[0] == "loop_scan_output":
        # a Loop's trip count is not known before it ends (the body's condition may stop it):
        # its scan outputs are refused once they pass the cap, 2000 iterations would need 8 MB
        assert needed < MIB + 4000 * 2
        assert peak < 3 * MIB, peak
    else:
        # refused before the work: the run allocated a fraction of the tensor it refused
        assert peak < needed // 2, (peak, needed)


@pytest.mark.parametrize("case", [c for c in CASES if c[5] is not None], ids=[c[0] for c in CASES if c[5] is not None])
def test_a_size_under_the_cap_gives_the_reference_values(case):
    _, nodes, inputs, opset, feeds, small, out_type, _ = case
    m = model(nodes, inputs, [vi("y", out_type)], opset)
    feeds = {**feeds, **small}
    (y,) = session(m).run(None, feeds)
    if case[0] == "loop_scan_output":  # onnx.reference cannot run a Loop without loop-carried values
        expected = np.repeat(np.arange(3, dtype=np.float32)[:, None], 1000, axis=1)
    else:
        (expected,) = ReferenceEvaluator(m).run(None, feeds)
    assert y.shape == expected.shape and y.dtype == expected.dtype
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


# (id, nodes, inputs, opset, feeds asking for terabytes, output type): no cap, the machine's memory is the limit
HUGE = 10**6
HUGE_CASES = [
    ("one_hot", node("OneHot", ["i", "d", "v"]), [vi("i", I64, [4]), vi("d", I64, []), vi("v", F, [2])], 11,
     {"i": np.array([0, 3, 1, 2]), "d": np.array(10**15), "v": np.array([0, 1], np.float32)}, F),
    ("multinomial", node("Multinomial", ["x"], sample_size=10**15), [vi("x", F, [1, 2])], 11, {"x": np.zeros((1, 2), np.float32)},
     TensorProto.INT32),
    ("einsum", node("Einsum", ["a", "b", "c"], equation="i,j,k->ijk"), [vi("a", F, [None])] * 1 + [vi("b", F, [None]), vi("c", F, [None])],
     12, {"a": np.ones(HUGE, np.float32), "b": np.ones(HUGE, np.float32), "c": np.ones(HUGE, np.float32)}, F),
    ("mul_broadcast", node("Mul", ["a", "b"]), [vi("a", F, [None, 1]), vi("b", F, [1, None])], 13,
     {"a": np.ones((HUGE, 1), np.float32), "b": np.ones((1, HUGE), np.float32)}, F),
    ("sum_broadcast", node("Sum", ["a", "b", "c"]), [vi("a", F, [None, 1, 1]), vi("b", F, [1, None, 1]), vi("c", F, [1, 1, None])], 13,
     {"a": np.ones((HUGE, 1, 1), np.float32), "b": np.ones((1, HUGE, 1), np.float32), "c": np.ones((1, 1, HUGE), np.float32)}, F),
    ("gather", node("Gather", ["x", "i"], axis=1), [vi("x", F, [HUGE, 2]), vi("i", I64, [None])], 13,
     {"x": np.ones((HUGE, 2), np.float32), "i": np.zeros(HUGE, np.int64)}, F),
]


@pytest.mark.parametrize("case", HUGE_CASES, ids=[c[0] for c in HUGE_CASES])
def test_terabytes_asked_by_the_data_are_refused_with_no_cap(case):
    _, nodes, inputs, opset, feeds, out_type = case
    sess = session(model(nodes, inputs, [vi("y", out_type)], opset), cap=None)
    msg, peak = refused(sess, feeds)
    assert "Node 'big'" in msg and "the machine's physical memory" in msg, msg
    assert int(msg.split(" needs ")[1].split(" ")[0]) >= 4 * 10**12
    assert peak < 50 * 2**20, peak
