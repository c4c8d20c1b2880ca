"""The engine: loading, graph checks, planning, feeds, external data and the session API."""

from __future__ import annotations

import io
import os

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.errors import (
    GraphError,
    InvalidFeedError,
    KernelError,
    ModelLoadError,
    SecurityError,
    UnsupportedOperatorError,
)

from ..helpers import make_single_node_model


def _chain_model(opset: int = 18) -> onnx.ModelProto:
    """Y = Relu(X + B) * 2, Z = Shape(X); nodes stored in reverse order on purpose."""
    nodes = [
        helper.make_node("Mul", ["r", "two"], ["Y"], name="mul"),
        helper.make_node("Relu", ["s"], ["r"], name="relu"),
        helper.make_node("Add", ["X", "B"], ["s"], name="add"),
        helper.make_node("Shape", ["X"], ["Z"], name="shape"),
    ]
    graph = helper.make_graph(
        nodes,
        "chain",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, ["N", 3]), helper.make_tensor_value_info("Z", TensorProto.INT64, [2])],
        [numpy_helper.from_array(np.array([1.0, -2.0, 0.5], np.float32), "B"), numpy_helper.from_array(np.array(2.0, np.float32), "two")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


X = np.array([[0.5, 1.0, -3.0], [-1.0, 4.0, 2.0]], dtype=np.float32)
EXPECTED_Y = np.maximum(X + np.array([1.0, -2.0, 0.5], np.float32), 0) * 2


def test_sources_path_bytes_file_proto(tmp_path):
    model = _chain_model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    sources = [str(path), path, model.SerializeToString(), io.BytesIO(model.SerializeToString()), model, open(path, "rb")]
    for src in sources:
        sess = onnxrt.InferenceSession(src)
        y, z = sess.run(None, {"X": X})
        np.testing.assert_allclose(y, EXPECTED_Y)
        assert y.dtype == np.float32 and y.shape == (2, 3)
        np.testing.assert_array_equal(z, [2, 3])
        assert z.dtype == np.int64
    sources[-1].close()


def test_onnx_inference_dict_and_intermediate():
    oinf = onnxrt.OnnxInference(_chain_model())
    res = oinf.run({"X": X})
    assert sorted(res) == ["Y", "Z"]
    full = oinf.run({"X": X}, intermediate=True)
    assert {"X", "B", "two", "s", "r", "Y", "Z"} <= set(full)
    np.testing.assert_allclose(full["s"], X + np.array([1.0, -2.0, 0.5], np.float32))
    np.testing.assert_allclose(full["r"], np.maximum(full["s"], 0))


def test_run_any_named_value():
    sess = onnxrt.InferenceSession(_chain_model())
    r, y = sess.run(["r", "Y"], {"X": X})
    np.testing.assert_allclose(r * 2, y)
    with pytest.raises(InvalidFeedError, match="'nope'"):
        sess.run(["nope"], {"X": X})


def test_session_metadata():
    sess = onnxrt.InferenceSession(_chain_model())
    (inp,) = sess.get_inputs()
    assert (inp.name, inp.shape, inp.type) == ("X", ["N", 3], "tensor(float)")
    outs = sess.get_outputs()
    assert [(o.name, o.type) for o in outs] == [("Y", "tensor(float)"), ("Z", "tensor(int64)")]
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_nodes_are_sorted_and_values_released():
    # unoptimised: the optimiser fuses Add+Relu, this test looks at the plan of the graph as written
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    oinf = onnxrt.OnnxInference(_chain_model(), options=so)
    order = [st.name for st in oinf.plan.steps]
    assert order.index("add") < order.index("relu") < order.index("mul")
    names = {s: n for n, s in oinf.plan.slots.items()}
    frees = {st.name: {names[s] for s in st.frees} for st in oinf.plan.steps}
    assert frees["relu"] == {"s"}  # s is released right after its last reader
    assert frees["mul"] == {"r"}
    assert "X" in frees["shape"] | frees["add"]


def test_caller_arrays_not_modified_and_outputs_owned():
    model = make_single_node_model("Identity", [("x", TensorProto.FLOAT, [3])], [("y", TensorProto.FLOAT, [3])])
    sess = onnxrt.InferenceSession(model)
    x = np.array([1.0, 2.0, 3.0], np.float32)
    (y,) = sess.run(None, {"x": x})
    y[0] = 100.0
    assert x[0] == 1.0 and x.flags.writeable
    # a constant returned as output is a fresh copy each run
    graph = helper.make_graph(
        [helper.make_node("Identity", ["c"], ["y"])], "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
        [numpy_helper.from_array(np.array([1.0, 2.0], np.float32), "c")],
    )
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    (a,) = sess.run(None, {})
    a[:] = 7
    (b,) = sess.run(None, {})
    np.testing.assert_array_equal(b, [1.0, 2.0])


# ------------------------------------------------------------------------------------------
# feeds
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "feeds, pattern",
    [
        ({}, r"Missing input 'X'"),
        ({"X": X, "x2": X}, r"Unknown input 'x2'.*Did you mean 'X'"),
        ({"X": X.astype(np.float64)}, r"Input 'X' expects element type float.*dtype float64"),
        ({"X": X[0]}, r"Input 'X' expects rank 2.*got rank 1"),
        ({"X": np.zeros((2, 4), np.float32)}, r"Input 'X' expects dimension 1 to be 3.*got 4"),
        ({"X": [[1.0, "a", 3.0]]}, r"Input 'X' \(tensor\(float\)\): the list cannot be converted to a tensor of float32"),
        ({"X": [[1.0, 2.0], [3.0]]}, r"Input 'X' \(tensor\(float\)\): the list cannot be converted"),
        ({"X": "abc"}, r"Input 'X' expects a numpy array.*got str"),
    ],
)
def test_feed_errors(feeds, pattern):
    sess = onnxrt.InferenceSession(_chain_model())
    with pytest.raises(InvalidFeedError, match=pattern):
        sess.run(None, feeds)


def test_symbolic_dims_accept_any_size_and_empty():
    sess = onnxrt.InferenceSession(_chain_model())
    y, z = sess.run(None, {"X": np.zeros((0, 3), np.float32)})
    assert y.shape == (0, 3) and y.dtype == np.float32
    np.testing.assert_array_equal(z, [0, 3])


# ------------------------------------------------------------------------------------------
# loading and graph checks
# ------------------------------------------------------------------------------------------


def test_missing_and_garbage_models(tmp_path):
    with pytest.raises(ModelLoadError, match="does not exist"):
        onnxrt.InferenceSession(str(tmp_path / "missing.onnx"))
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x00\xffgarbage" * 10)
    with pytest.raises(ModelLoadError, match="not a valid ONNX"):
        onnxrt.InferenceSession(str(bad))
    good = _chain_model().SerializeToString()
    with pytest.raises(ModelLoadError):
        onnxrt.InferenceSession(good[: len(good) // 3])
    with pytest.raises(ModelLoadError, match="is empty"):
        onnxrt.InferenceSession(b"")
    with pytest.raises(ModelLoadError, match="Cannot load a model from a int"):
        onnxrt.InferenceSession(3)


def test_newer_versions_rejected():
    m = _chain_model()
    m.ir_version = onnx.IR_VERSION + 1
    with pytest.raises(ModelLoadError, match="IR version"):
        onnxrt.InferenceSession(m)
    m = _chain_model(opset=onnx.defs.onnx_opset_version() + 1)
    with pytest.raises(ModelLoadError, match="opset"):
        onnxrt.InferenceSession(m)


def test_unsupported_operator_named_at_load():
    model = make_single_node_model("NoSuchOp", [("x", TensorProto.FLOAT, [1])], [("y", TensorProto.FLOAT, [1])], domain="my.domain", node_name="weird")
    with pytest.raises(UnsupportedOperatorError, match=r"Node 'weird' uses operator 'NoSuchOp' of domain 'my.domain' at opset 1"):
        onnxrt.InferenceSession(model)
    # a version below every registered one lists what onnxrt has
    model = make_single_node_model("ScatterElements", [("d", TensorProto.FLOAT, [1]), ("i", TensorProto.INT64, [1]), ("u", TensorProto.FLOAT, [1])], [("y", TensorProto.FLOAT, [1])], opset=10)
    with pytest.raises(UnsupportedOperatorError, match=r"opset 10; onnxrt implements versions \[11, 13, 16, 18\]"):
        onnxrt.InferenceSession(model)


def _graph_model(nodes, inputs=("X",), outputs=("Y",)):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in inputs],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in outputs],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


def test_undefined_name():
    model = _graph_model([helper.make_node("Relu", ["nope"], ["Y"], name="r")])
    with pytest.raises(GraphError, match=r"Node 'r' \(Relu\) reads 'nope'"):
        onnxrt.InferenceSession(model)


def test_duplicate_output():
    model = _graph_model([helper.make_node("Relu", ["X"], ["Y"], name="a"), helper.make_node("Neg", ["X"], ["Y"], name="b")])
    with pytest.raises(GraphError, match=r"'Y' is produced twice.*'a'.*'b'"):
        onnxrt.InferenceSession(model)


def test_cycle():
    model = _graph_model(
        [
            helper.make_node("Add", ["X", "b"], ["a"], name="n1"),
            helper.make_node("Relu", ["a"], ["b"], name="n2"),
            helper.make_node("Neg", ["a"], ["Y"], name="n3"),
        ]
    )
    with pytest.raises(GraphError, match=r"cycle through nodes 'n1' \(Add\), 'n2' \(Relu\)"):
        onnxrt.InferenceSession(model)


def test_missing_required_attribute_and_wrong_type():
    node = helper.make_node("Gather", ["d", "i"], ["y"], name="g", axis=1.5)
    graph = helper.make_graph(
        [node], "g",
        [helper.make_tensor_value_info("d", TensorProto.FLOAT, [2]), helper.make_tensor_value_info("i", TensorProto.INT64, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    with pytest.raises(onnxrt.InvalidAttributeError, match=r"Node 'g' \(Gather\): attribute 'axis' must be of type INT, got FLOAT"):
        onnxrt.InferenceSession(model)


def test_kernel_failure_names_node_and_chains():
    model = _graph_model([helper.make_node("Add", ["X", "Z"], ["Y"], name="adder")], inputs=("X",))
    model.graph.input.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, None))
    sess = onnxrt.InferenceSession(model)
    with pytest.raises(KernelError, match=r"Node 'adder' \(Add\) failed on inputs \[X: float32\[2\], Z: float32\[3\]\]") as exc:
        sess.run(None, {"X": np.zeros(2, np.float32), "Z": np.zeros(3, np.float32)})
    assert isinstance(exc.value.__cause__, ValueError)


# ------------------------------------------------------------------------------------------
# external data
# ------------------------------------------------------------------------------------------


def _external_model(location: str) -> onnx.ModelProto:
    model = make_single_node_model("Add", [("x", TensorProto.FLOAT, [4])], [("y", TensorProto.FLOAT, [4])])
    model.graph.node[0].input.append("w")
    t = TensorProto()
    t.name = "w"
    t.data_type = TensorProto.FLOAT
    t.dims.append(4)
    t.data_location = TensorProto.EXTERNAL
    for k, v in (("location", location), ("offset", "0"), ("length", "16")):
        e = t.external_data.add()
        e.key, e.value = k, v
    model.graph.initializer.append(t)
    return model


def test_external_data_inside_folder(tmp_path):
    (tmp_path / "weights.bin").write_bytes(np.arange(4, dtype=np.float32).tobytes())
    path = tmp_path / "m.onnx"
    path.write_bytes(_external_model("weights.bin").SerializeToString())
    (y,) = onnxrt.InferenceSession(str(path)).run(None, {"x": np.ones(4, np.float32)})
    np.testing.assert_array_equal(y, [1, 2, 3, 4])


@pytest.mark.parametrize("location", ["/etc/passwd", "../outside.bin", "sub/../../outside.bin"])
def test_external_data_escaping_folder_refused(tmp_path, location):
    folder = tmp_path / "model"
    folder.mkdir()
    (tmp_path / "outside.bin").write_bytes(np.zeros(4, np.float32).tobytes())
    path = folder / "m.onnx"
    path.write_bytes(_external_model(location).SerializeToString())
    with pytest.raises(SecurityError, match="'w'"):
        onnxrt.InferenceSession(str(path))


def test_external_data_symlink_outside_refused(tmp_path):
    folder = tmp_path / "model"
    folder.mkdir()
    secret = tmp_path / "secret.bin"
    secret.write_bytes(np.zeros(4, np.float32).tobytes())
    os.symlink(secret, folder / "link.bin")
    path = folder / "m.onnx"
    path.write_bytes(_external_model("link.bin").SerializeToString())
    with pytest.raises(SecurityError, match="outside the model's folder"):
        onnxrt.InferenceSession(str(path))


# ------------------------------------------------------------------------------------------
# values the engine carries, functions, backend
# ------------------------------------------------------------------------------------------


def test_sequences_optionals_maps_flow_through():
    seq_t = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("Identity", ["s"], ["t"])], "g", [seq_t], [helper.make_tensor_sequence_value_info("t", TensorProto.FLOAT, None)]
    )
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]))
    (out,) = sess.run(None, {"s": [np.ones(2, np.float32), np.zeros(3, np.float32)]})
    assert isinstance(out, list) and [a.shape for a in out] == [(2,), (3,)]
    with pytest.raises(InvalidFeedError, match="expects a sequence"):
        sess.run(None, {"s": np.ones(2, np.float32)})


def test_model_local_function_with_attribute_reference():
    fn = helper.make_function(
        "custom",
        "ScaledRelu",
        ["a"],
        ["b"],
        [
            helper.make_node("Relu", ["a"], ["r"]),
            helper.make_node("Gather", ["r", "idx"], ["b"], axis=0),
            helper.make_node("Constant", [], ["idx"], value_ints=[0]),
        ],
        [helper.make_opsetid("", 18)],
    )
    graph = helper.make_graph(
        [helper.make_node("ScaledRelu", ["X"], ["Y"], domain="custom", name="call")],
        "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("custom", 1)], functions=[fn])
    (y,) = onnxrt.InferenceSession(model).run(None, {"X": np.array([-1.0, 2.0, 3.0], np.float32)})
    np.testing.assert_array_equal(y, [0.0])


def test_backend_run_node_and_run_model():
    from onnxrt import backend

    node = helper.make_node("Gather", ["d", "i"], ["y"], axis=0)
    (y,) = backend.run_node(node, [np.arange(6).reshape(3, 2), np.array([2, 0])])
    np.testing.assert_array_equal(y, [[4, 5], [0, 1]])
    y, z = backend.run_model(_chain_model(), [X])
    np.testing.assert_allclose(y, EXPECTED_Y)
    assert backend.supports_device("CPU") and not backend.supports_device("CUDA")


def test_custom_operator_in_ten_lines():
    import onnxrt

    onnxrt.register_function("Square", lambda x, scale: (x * x * scale).astype(x.dtype), domain="test.custom", scale=1.0)
    model = make_single_node_model(
        "Square", [("x", TensorProto.FLOAT, [2])], [("y", TensorProto.FLOAT, [2])], domain="test.custom", scale=3.0
    )
    (y,) = onnxrt.InferenceSession(model).run(None, {"x": np.array([1.0, 2.0], np.float32)})
    np.testing.assert_array_equal(y, [3.0, 12.0])
    assert y.dtype == np.float32


# ------------------------------------------------------------------------------------------
# element types against the schemas
# ------------------------------------------------------------------------------------------


def test_forbidden_input_type_rejected_at_run():
    model = make_single_node_model("Relu", [("x", TensorProto.INT32, [2])], [("y", TensorProto.INT32, [2])], opset=13, node_name="r")
    sess = onnxrt.InferenceSession(model)
    with pytest.raises(onnxrt.InvalidTypeError, match=r"Node 'r' \(Relu\): input 'X' has type tensor\(int32\), which Relu-13 does not accept"):
        sess.run(None, {"x": np.array([1, -1], np.int32)})
    # Relu-14 accepts int32
    model = make_single_node_model("Relu", [("x", TensorProto.INT32, [2])], [("y", TensorProto.INT32, [2])], opset=14)
    (y,) = onnxrt.InferenceSession(model).run(None, {"x": np.array([1, -1], np.int32)})
    np.testing.assert_array_equal(y, [1, 0])
    assert y.dtype == np.int32


def test_no_silent_promotion_between_inputs():
    model = make_single_node_model(
        "Add", [("a", TensorProto.FLOAT, [2]), ("b", TensorProto.DOUBLE, [2])], [("y", TensorProto.FLOAT, [2])], node_name="plus"
    )
    sess = onnxrt.InferenceSession(model)
    for _ in range(2):  # the check is not skipped on later runs when the first one failed
        with pytest.raises(onnxrt.InvalidTypeError, match=r"input 'B' has type tensor\(double\) but input 'A' has tensor\(float\)"):
            sess.run(None, {"a": np.ones(2, np.float32), "b": np.ones(2, np.float64)})


def test_backend_run_node_with_an_omitted_middle_input():
    from onnxrt import backend

    node = helper.make_node("Clip", ["x", "", "hi"], ["y"])
    (y,) = backend.run_node(node, [np.array([-2.0, 0.5, 3.0], np.float32), np.array(1.0, np.float32)])
    np.testing.assert_array_equal(y, [-2.0, 0.5, 1.0])
    assert y.dtype == np.float32


def test_unnamed_output_never_feeds_an_omitted_input():
    # TopK's values output is unnamed (""); Clip's min is omitted (""): Clip must see no min
    graph = helper.make_graph(
        [
            helper.make_node("TopK", ["x", "k"], ["", "idx"], name="topk"),
            helper.make_node("Clip", ["x", "", "hi"], ["y"], name="clip"),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4]), helper.make_tensor_value_info("idx", TensorProto.INT64, [2])],
        [numpy_helper.from_array(np.array([2], np.int64), "k"), numpy_helper.from_array(np.array(10.0, np.float32), "hi")],
    )
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)]))
    y, idx = sess.run(None, {"x": np.array([-5.0, 1.0, 20.0, 3.0], np.float32)})
    np.testing.assert_array_equal(y, [-5.0, 1.0, 10.0, 3.0])
    np.testing.assert_array_equal(idx, [2, 3])


def test_sequence_feed_elements_are_protected():
    seq_t = helper.make_tensor_sequence_value_info("s", TensorProto.FLOAT, None)
    graph = helper.make_graph(
        [helper.make_node("SequenceAt", ["s", "zero"], ["t"]), helper.make_node("Identity", ["t"], ["y"])], "g", [seq_t],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(np.array(0, np.int64), "zero")],
    )
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 16)]))
    a = np.ones(2, np.float32)
    (y,) = sess.run(None, {"s": [a]})
    y[:] = 5
    np.testing.assert_array_equal(a, [1, 1])
    assert a.flags.writeable
    with pytest.raises(InvalidFeedError, match="element 0 is a list"):
        sess.run(None, {"s": [[1.0, 2.0]]})


@pytest.mark.parametrize("large", [False, True])
def test_runs_compute_floating_point_errors_silently_and_restore_numpy_state(large):
    """0/0, log(0) and overflow are results the spec defines: no RuntimeWarning from a run
    (small runs set numpy's error state directly, large ones through np.errstate), and the
    caller's numpy error state is the same afterwards."""
    import warnings

    n = 40000 if large else 4
    nodes = [helper.make_node("Div", ["x", "z"], ["q"]), helper.make_node("Log", ["z"], ["l"]), helper.make_node("Exp", ["big"], ["e"])]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, [n]) for k in ("x", "z", "big")],
        [helper.make_tensor_value_info(k, TensorProto.FLOAT, [n]) for k in ("q", "l", "e")],
    )
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())
    x = np.zeros(n, np.float32)
    x[1::2] = 1.0
    feeds = {"x": x, "z": np.zeros(n, np.float32), "big": np.full(n, 1000.0, np.float32)}
    before = np.geterr()
    np.seterr(all="raise")
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            q, lg, e = sess.run(None, feeds)
        assert np.geterr() == {"divide": "raise", "over": "raise", "under": "raise", "invalid": "raise"}
    finally:
        np.seterr(**before)
    assert q.dtype == lg.dtype == e.dtype == np.float32 and q.shape == (n,)
    assert np.isnan(q[0]) and q[1] == np.inf
    assert (lg == -np.inf).all() and (e == np.inf).all()
