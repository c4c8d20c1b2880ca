"""Limits: model- or data-sized allocations refused before work, bounded function expansion, outputs the caller owns, terminate in loops."""

from __future__ import annotations

import threading
import tracemalloc

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.errors import AllocationError, GraphError, InvalidOptionError, RunTerminatedError
from onnxrt.functions import MAX_EXPANDED_NODES

F, I64, I8, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.INT8, TensorProto.BOOL
G = 10**9
#: far above any machine's memory
HUGE = 10**15


def vi(name, elem=F, shape=None):
    return helper.make_tensor_value_info(name, elem, shape)


def session(nodes, inputs, outputs, opset=19, initializers=(), cap=None, functions=(), domains=(), **options):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    ops = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    m = helper.make_model(graph, opset_imports=ops, functions=list(functions))
    so = onnxrt.SessionOptions()
    if cap is not None:
        so.max_tensor_bytes = cap
    for k, v in options.items():
        setattr(so, k, v)
    return onnxrt.InferenceSession(m.SerializeToString(), so)


def refused(sess, feeds):
    """The AllocationError of a run, and the peak of traced allocations of a second run.

    The first run is left untraced: it may import modules lazily (a kernel family, a generator),
    whose code objects would count against the run's peak depending on which tests ran before.
    """
    with pytest.raises(AllocationError):
        sess.run(None, feeds)
    tracemalloc.start()
    try:
        with pytest.raises(AllocationError) as info:
            sess.run(None, feeds)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    return str(info.value), peak


x4 = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
w3 = np.ones((1, 1, 3, 3), np.float32)

# (name, nodes, inputs, feeds, opset, the refused shape as the message writes it)
HUGE_CASES = [
    ("resize", [helper.make_node("Resize", ["x", "", "", "s"], ["y"], name="big")], [vi("x", F, [1, 3, 4, 4]), vi("s", I64, [4])],
     {"x": np.ones((1, 3, 4, 4), np.float32), "s": np.array([1, 3, G, G])}, 19, f"[1, 3, {G}, {G}]"),
    ("upsample", [helper.make_node("Upsample", ["x", "s"], ["y"], name="big")], [vi("x", F, [1, 1, 4, 4]), vi("s", F, [4])],
     {"x": x4, "s": np.array([1, 1, 1e8, 1e8], np.float32)}, 9, "[1, 1, 400000000, 400000000]"),
    ("mel", [helper.make_node("MelWeightMatrix", ["n", "d", "r", "lo", "hi"], ["y"], name="big")],
     [vi("n", I64, []), vi("d", I64, []), vi("r", I64, []), vi("lo", F, []), vi("hi", F, [])],
     {"n": np.array(8), "d": np.array(HUGE), "r": np.array(8000), "lo": np.array(0, np.float32), "hi": np.array(4000, np.float32)},
     17, f"[{HUGE // 2 + 1}, 8]"),
    ("hann", [helper.make_node("HannWindow", ["n"], ["y"], name="big")], [vi("n", I64, [])], {"n": np.array(HUGE)}, 17, f"[{HUGE}]"),
    ("hamming", [helper.make_node("HammingWindow", ["n"], ["y"], name="big")], [vi("n", I64, [])], {"n": np.array(HUGE)}, 17, f"[{HUGE}]"),
    ("blackman", [helper.make_node("BlackmanWindow", ["n"], ["y"], name="big")], [vi("n", I64, [])], {"n": np.array(HUGE)}, 17, f"[{HUGE}]"),
    ("dft", [helper.make_node("DFT", ["x", "n"], ["y"], name="big")], [vi("x", F, [1, 8, 1]), vi("n", I64, [])],
     {"x": np.ones((1, 8, 1), np.float32), "n": np.array(HUGE)}, 20, f"[1, {HUGE}, 2]"),
    ("conv_transpose", [helper.make_node("ConvTranspose", ["x", "w"], ["y"], name="big", output_shape=[G, G])],
     [vi("x", F, [1, 1, 4, 4]), vi("w", F, [1, 1, 3, 3])], {"x": x4, "w": w3}, 11, f"[1, 1, {G}, {G}]"),
    ("conv_pads", [helper.make_node("Conv", ["x", "w"], ["y"], name="big", pads=[G, G, G, G])],
     [vi("x", F, [1, 1, 4, 4]), vi("w", F, [1, 1, 3, 3])], {"x": x4, "w": w3}, 11, f"[1, 1, {2 * G + 2}, {2 * G + 2}]"),
    ("maxpool_pads", [helper.make_node("MaxPool", ["x"], ["y"], name="big", kernel_shape=[2, 2], pads=[G, G, G, G])],
     [vi("x", F, [1, 1, 4, 4])], {"x": x4}, 11, f"[1, 1, {2 * G + 3}, {2 * G + 3}]"),
    ("random_normal", [helper.make_node("RandomNormal", [], ["y"], name="big", shape=[G, G])], [], {}, 11, f"[{G}, {G}]"),
    ("tfidf", [helper.make_node("TfIdfVectorizer", ["x"], ["y"], name="big", mode="TF", min_gram_length=1, max_gram_length=1,
                                max_skip_count=0, ngram_counts=[0], ngram_indexes=[HUGE], pool_int64s=[1])],
     [vi("x", I64, [4])], {"x": np.ones(4, np.int64)}, 11, f"[{HUGE + 1}]"),
    ("col2im", [helper.make_node("Col2Im", ["x", "i", "b"], ["y"], name="big", strides=[G, G])],
     [vi("x", F, [1, 1, 1]), vi("i", I64, [2]), vi("b", I64, [2])],
     {"x": np.ones((1, 1, 1), np.float32), "i": np.array([G, G]), "b": np.array([1, 1])}, 18, f"[1, 1, {G}, {G}]"),
    ("center_crop_pad", [helper.make_node("CenterCropPad", ["x", "s"], ["y"], name="big")], [vi("x", F, [2, 2]), vi("s", I64, [2])],
     {"x": np.ones((2, 2), np.float32), "s": np.array([G, G])}, 18, f"[{G}, {G}]"),
    ("tile", [helper.make_node("Tile", ["x", "r"], ["y"], name="big")], [vi("x", F, [2, 2]), vi("r", I64, [2])],
     {"x": np.ones((2, 2), np.float32), "r": np.array([G, G])}, 13, f"[{2 * G}, {2 * G}]"),
    ("constant_of_shape", [helper.make_node("ConstantOfShape", ["s"], ["y"], name="big")], [vi("s", I64, [2])],
     {"s": np.array([G, G])}, 13, f"[{G}, {G}]"),
]


@pytest.mark.parametrize("case", HUGE_CASES, ids=[c[0] for c in HUGE_CASES])
def test_absurd_sizes_are_refused_before_any_allocation(case):
    _, nodes, inputs, feeds, opset, shape = case
    sess = session(nodes, inputs, [vi("y", F)], opset=opset)
    msg, peak = refused(sess, feeds)
    assert "Node 'big'" in msg and f"of shape {shape}" in msg
    assert "the machine's physical memory" in msg
    limit = int(msg.split("above the limit of ")[1].split(" ")[0])
    assert limit > 0
    # the refused tensors are of terabytes or more: the run allocated next to nothing
    assert peak < 20 * 2**20


MIB = 2**20

# (name, nodes, inputs, feeds, opset, a feed that fits under 1 MiB, the output shape it gives)
CAP_CASES = [
    ("resize", [helper.make_node("Resize", ["x", "", "", "s"], ["y"], name="big", mode="linear")],
     [vi("x", F, [1, 1, 4, 4]), vi("s", I64, [4])], {"x": x4, "s": np.array([1, 1, 1024, 1024])}, 19,
     {"s": np.array([1, 1, 64, 64])}, (1, 1, 64, 64)),
    ("hann", [helper.make_node("HannWindow", ["n"], ["y"], name="big")], [vi("n", I64, [])], {"n": np.array(10**6)}, 17,
     {"n": np.array(1000)}, (1000,)),
    ("mel", [helper.make_node("MelWeightMatrix", ["n", "d", "r", "lo", "hi"], ["y"], name="big")],
     [vi("n", I64, []), vi("d", I64, []), vi("r", I64, []), vi("lo", F, []), vi("hi", F, [])],
     {"n": np.array(64), "d": np.array(2**16), "r": np.array(8000), "lo": np.array(0, np.float32), "hi": np.array(4000, np.float32)},
     17, {"d": np.array(256)}, (129, 64)),
    ("expand", [helper.make_node("Expand", ["x", "s"], ["y"], name="big")], [vi("x", F, [1]), vi("s", I64, [2])],
     {"x": np.ones(1, np.float32), "s": np.array([1024, 1024])}, 13, {"s": np.array([16, 16])}, (16, 16)),
    ("pad", [helper.make_node("Pad", ["x", "p"], ["y"], name="big")], [vi("x", F, [2, 2]), vi("p", I64, [4])],
     {"x": np.ones((2, 2), np.float32), "p": np.array([600, 600, 600, 600])}, 13, {"p": np.array([1, 1, 1, 1])}, (4, 4)),
]


@pytest.mark.parametrize("case", CAP_CASES, ids=[c[0] for c in CAP_CASES])
def test_max_tensor_bytes_refuses_sizes_from_the_data(case):
    _, nodes, inputs, feeds, opset, small, out_shape = case
    sess = session(nodes, inputs, [vi("y", F)], opset=opset, cap=MIB)
    msg, peak = refused(sess, feeds)
    assert "Node 'big'" in msg
    assert f"above the limit of {MIB} bytes (SessionOptions.max_tensor_bytes)" in msg
    needed = int(msg.split(" needs ")[1].split(" ")[0])
    assert needed > MIB
    assert peak < needed // 2
    # the same node under the cap runs
    (y,) = sess.run(None, {**feeds, **small})
    assert y.shape == out_shape and y.dtype == np.float32


def test_eye_like_to_a_wider_type_is_checked_against_the_cap():
    sess = session([helper.make_node("EyeLike", ["x"], ["y"], name="big", dtype=TensorProto.DOUBLE)], [vi("x", I8, [None, None])],
                   [vi("y", TensorProto.DOUBLE)], opset=11, cap=MIB)
    msg, _ = refused(sess, {"x": np.zeros((400, 400), np.int8)})
    assert "of shape [400, 400] and dtype float64 needs 1280000 bytes" in msg
    (y,) = sess.run(None, {"x": np.zeros((3, 4), np.int8)})
    np.testing.assert_array_equal(y, np.eye(3, 4))


def test_conv_pads_are_checked_once_per_shape_and_valid_runs_are_exact():
    sess = session([helper.make_node("Conv", ["x", "w"], ["y"], name="big", pads=[1, 1, 1, 1])],
                   [vi("x", F, [1, 1, None, None]), vi("w", F, [1, 1, 3, 3])], [vi("y", F)], opset=11, cap=MIB)
    (y,) = sess.run(None, {"x": x4, "w": w3})
    assert y.shape == (1, 1, 4, 4)
    assert y[0, 0, 1, 1] == x4[0, 0, :3, :3].sum()
    msg, _ = refused(sess, {"x": np.ones((1, 1, 600, 600), np.float32), "w": w3})
    assert "Conv output of shape [1, 1, 600, 600]" in msg


# -- function expansion --------------------------------------------------------------------


def doubling_functions(depth):
    """f0(x) = x + 1; f_k(x) = f_{k-1}(f_{k-1}(x)): f_depth inlines to 2**depth nodes."""
    one = helper.make_node("Constant", [], ["one"], value=numpy_helper.from_array(np.ones(1, np.float32)))
    fns = [helper.make_function("loc", "f0", ["x"], ["y"], [one, helper.make_node("Add", ["x", "one"], ["y"])],
                                [helper.make_opsetid("", 17)])]
    for k in range(1, depth + 1):
        fns.append(helper.make_function(
            "loc", f"f{k}", ["x"], ["y"],
            [helper.make_node(f"f{k - 1}", ["x"], ["t"], domain="loc"), helper.make_node(f"f{k - 1}", ["t"], ["y"], domain="loc")],
            [helper.make_opsetid("", 17), helper.make_opsetid("loc", 1)],
        ))
    return fns


def test_exponential_function_expansion_is_refused_before_inlining():
    fns = doubling_functions(40)
    tracemalloc.start()
    try:
        with pytest.raises(GraphError) as info:
            session([helper.make_node("f40", ["X"], ["Y"], domain="loc", name="call")], [vi("X", F, [1])], [vi("Y", F, [1])],
                    opset=17, functions=fns, domains=("loc",))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    msg = str(info.value)
    assert "function 'loc:f40'" in msg and f"{2 * 2**40} in all" in msg
    assert f"expansion budget of {MAX_EXPANDED_NODES} nodes" in msg and "SessionOptions.max_expanded_nodes" in msg
    assert peak < 20 * 2**20


def test_expansion_budget_counts_subgraphs_and_can_be_raised():
    fns = doubling_functions(6)  # 2 * 64 nodes once inlined
    branch = helper.make_graph([helper.make_node("f6", ["X"], ["Z"], domain="loc")], "then", [], [vi("Z", F, [1])])
    other = helper.make_graph([helper.make_node("Identity", ["X"], ["W"])], "else", [], [vi("W", F, [1])])
    nodes = [helper.make_node("If", ["c"], ["Y"], then_branch=branch, else_branch=other)]
    args = ([vi("c", B, []), vi("X", F, [1])], [vi("Y", F, [1])])
    # If, the else branch's Identity and 64 calls of f0 (Constant, Add)
    msg = r"node '' \(If\), whose subgraphs call function 'loc:f6' \(128 nodes\), brings the graph to more than 100 nodes \(130 in all\)"
    with pytest.raises(GraphError, match=msg):
        session(nodes, *args, opset=17, functions=fns, domains=("loc",), max_expanded_nodes=100)
    sess = session(nodes, *args, opset=17, functions=fns, domains=("loc",), max_expanded_nodes=200)
    (y,) = sess.run(None, {"c": np.array(True), "X": np.array([0.5], np.float32)})
    np.testing.assert_array_equal(y, np.array([64.5], np.float32))


def test_max_expanded_nodes_is_a_declared_positive_option():
    so = onnxrt.SessionOptions()
    assert so.max_expanded_nodes == MAX_EXPANDED_NODES == 1_000_000
    with pytest.raises(InvalidOptionError):
        so.max_expanded_nodes = 0
    so.max_expanded_nodes = 5_000_000
    assert so.max_expanded_nodes == 5_000_000


# -- outputs the caller owns ---------------------------------------------------------------


def aliasing_model():
    w = numpy_helper.from_array(np.array([1.5, 2.5], np.float32), "W")
    s = numpy_helper.from_array(np.array([4], np.int64), "s")
    nodes = [
        helper.make_node("Relu", ["X"], ["A"]),
        helper.make_node("Identity", ["A"], ["B"]),
        helper.make_node("Reshape", ["A", "s"], ["C"]),
        helper.make_node("Identity", ["X"], ["D"]),
        helper.make_node("Identity", ["W"], ["E"]),
    ]
    graph = helper.make_graph(nodes, "g", [vi("X", F, [4])], [vi("B", F, [4]), vi("C", F, [4]), vi("D", F, [4]), vi("E", F, [2])], [w, s])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def assert_independent(outs, x):
    b, c, d, e = outs
    for i in range(4):
        assert not np.shares_memory(outs[i], x)
        for j in range(i + 1, 4):
            assert not np.shares_memory(outs[i], outs[j])
    b[:] = -7
    np.testing.assert_array_equal(c, [1, 0, 3, 0])
    d[:] = 9
    np.testing.assert_array_equal(x, [1, -2, 3, -4])
    e[:] = 0


@pytest.mark.parametrize("how", ["run", "run_with_ort_values", "io_binding", "onnx_inference"])
def test_outputs_share_no_memory(how):
    m = aliasing_model()
    sess = onnxrt.InferenceSession(m.SerializeToString())
    for _ in range(2):  # the first run and a later one take different paths
        x = np.array([1, -2, 3, -4], np.float32)
        if how == "run":
            outs = sess.run(None, {"X": x})
        elif how == "run_with_ort_values":
            outs = [v.numpy() for v in sess.run_with_ort_values(None, {"X": onnxrt.OrtValue.ortvalue_from_numpy(x)})]
        elif how == "io_binding":
            binding = sess.io_binding()
            binding.bind_cpu_input("X", x)
            for n in "BCDE":
                binding.bind_output(n)
            sess.run_with_iobinding(binding)
            outs = binding.copy_outputs_to_cpu()
        else:
            outs = list(onnxrt.OnnxInference(m).run({"X": x}).values())
        assert_independent(outs, x)
        # the initializer is intact for the next run
        (e,) = sess.run(["E"], {"X": x})
        np.testing.assert_array_equal(e, [1.5, 2.5])


def test_an_output_fetched_twice_gives_two_arrays():
    sess = onnxrt.InferenceSession(aliasing_model().SerializeToString())
    b1, c, b2 = sess.run(["B", "C", "B"], {"X": np.array([1, -2, 3, -4], np.float32)}, onnxrt.RunOptions())
    b1[:] = 0
    np.testing.assert_array_equal(b2, [1, 0, 3, 0])
    np.testing.assert_array_equal(c, [1, 0, 3, 0])


def test_distinct_outputs_are_not_copied():
    # two fresh outputs and non-overlapping views of one buffer stay as the kernels made them
    nodes = [helper.make_node("Split", ["X"], ["P", "Q"], axis=0, num_outputs=2)]
    sess = session(nodes, [vi("X", F, [4])], [vi("P", F, [2]), vi("Q", F, [2])], opset=18)
    p, q = sess.run(None, {"X": np.arange(4, dtype=np.float32)})
    p[:] = 5
    np.testing.assert_array_equal(q, [2, 3])


# -- RunOptions.terminate in loops ---------------------------------------------------------


@pytest.fixture
def started():
    """A custom operator that sets an event when it first runs (inside the loop's body)."""
    event = threading.Event()

    def mark(v):
        event.set()
        return v + np.float32(1)

    onnxrt.register_function("MarkStarted", mark, domain="test.limits", replace=True)
    return event


def terminated_from_another_thread(sess, feeds, event):
    ro = onnxrt.RunOptions()
    errors: list[BaseException] = []

    def work():
        try:
            sess.run(None, feeds, ro)
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    t = threading.Thread(target=work, daemon=True)
    t.start()
    assert event.wait(60)
    ro.terminate = True
    t.join(60)
    assert not t.is_alive()
    assert len(errors) == 1
    return errors[0]


def test_terminate_stops_a_loop_of_a_trillion_iterations(started):
    body = helper.make_graph(
        [helper.make_node("MarkStarted", ["v"], ["v2"], domain="test.limits"), helper.make_node("Identity", ["c"], ["c2"])],
        "body", [vi("i", I64, []), vi("c", B, []), vi("v", F, [1])], [vi("c2", B, []), vi("v2", F, [1])],
    )
    sess = session([helper.make_node("Loop", ["M", "", "v0"], ["vf"], body=body, name="loop")], [vi("M", I64, []), vi("v0", F, [1])],
                   [vi("vf", F, [1])], opset=17, domains=("test.limits",))
    err = terminated_from_another_thread(sess, {"M": np.array(10**12), "v0": np.zeros(1, np.float32)}, started)
    assert isinstance(err, RunTerminatedError)
    assert "Node 'loop' (Loop)" in str(err)
    assert "Exiting due to terminate flag being set to true (RunOptions.terminate)." in str(err)
    # the session runs on with fresh options
    (vf,) = sess.run(None, {"M": np.array(3), "v0": np.zeros(1, np.float32)}, onnxrt.RunOptions())
    np.testing.assert_array_equal(vf, [3.0])


def test_terminate_stops_a_scan(started):
    body = helper.make_graph([helper.make_node("MarkStarted", ["s"], ["s2"], domain="test.limits"), helper.make_node("Identity", ["e"], ["o"])],
                             "body", [vi("s", F, [1]), vi("e", F, [])], [vi("s2", F, [1]), vi("o", F, [])])
    sess = session([helper.make_node("Scan", ["s0", "xs"], ["sf", "ys"], body=body, num_scan_inputs=1, name="scan")],
                   [vi("s0", F, [1]), vi("xs", F, [None])], [vi("sf", F, [1]), vi("ys", F, [None])], opset=17, domains=("test.limits",))
    err = terminated_from_another_thread(sess, {"s0": np.zeros(1, np.float32), "xs": np.zeros(10**7, np.float32)}, started)
    assert isinstance(err, RunTerminatedError)
    assert "Node 'scan' (Scan)" in str(err) and "RunOptions.terminate" in str(err)
    sf, ys = sess.run(None, {"s0": np.zeros(1, np.float32), "xs": np.arange(3, dtype=np.float32)})
    np.testing.assert_array_equal(sf, [3.0])
    np.testing.assert_array_equal(ys, [0, 1, 2])
