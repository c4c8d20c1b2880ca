"""onnxruntime's Python API test behaviours (onnxruntime_test_python.py's cases) on onnxrt, over models rebuilt with onnx.helper."""

from __future__ import annotations

import json
import os
import pickle
import threading
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.providers import check_and_normalize_provider_args

F, I64, STR, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING, TensorProto.BOOL
X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
SQUARES = np.array([[1.0, 4.0], [9.0, 16.0], [25.0, 36.0]], np.float32)


def _vi(name, elem, shape):
    return helper.make_tensor_value_info(name, elem, shape)


def _make(nodes, inputs, outputs, inits=(), opset=13, **kw):
    graph = helper.make_graph(nodes, "g", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in inits])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kw)


def mul_1():
    """onnxruntime's mul_1.onnx: Y = X * W, W = [[1, 2], [3, 4], [5, 6]] (an initializer)."""
    return _make([helper.make_node("Mul", ["X", "W"], ["Y"])], [_vi("X", F, [3, 2])], [_vi("Y", F, [3, 2])], [("W", X.copy())])


def matmul(rows):
    """matmul_1.onnx (rows 3) and matmul_2.onnx (rows "None", a symbolic dimension): Y = X @ [[1], [2]]."""
    w = np.array([[1.0], [2.0]], np.float32)
    return _make([helper.make_node("MatMul", ["X", "W"], ["Y"])], [_vi("X", F, [rows, 2])], [_vi("Y", F, [rows, 1])], [("W", w)])


def logicaland():
    return _make(
        [helper.make_node("And", ["input1:0", "input:0"], ["output:0"])],
        [_vi("input1:0", B, [2, 2]), _vi("input:0", B, [2, 2])],
        [_vi("output:0", B, [2, 2])],
    )


def identity_string():
    return _make([helper.make_node("Identity", ["input:0"], ["output:0"])], [_vi("input:0", STR, [2, 2])], [_vi("output:0", STR, [2, 2])])


def _seq(name, elem):
    return helper.make_tensor_sequence_value_info(name, elem, None)


@pytest.fixture
def in_tmp(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def restore_logger():
    yield
    onnxrt.set_default_logger_callback(None)
    onnxrt.set_default_logger_severity(2)
    onnxrt.set_default_logger_verbosity(0)


def _session(model, so=None, **kw):
    return onnxrt.InferenceSession(model.SerializeToString(), sess_options=so, **kw)


# ------------------------------------------------------------------------------------------
# module functions
# ------------------------------------------------------------------------------------------


def test_version_build_info_device_providers():
    assert onnxrt.get_version_string() == onnxrt.__version__
    assert "Build Info" in onnxrt.get_build_info()
    assert onnxrt.get_device() == "CPU"
    assert onnxrt.get_all_providers()[-1] == "CPUExecutionProvider"
    sess = _session(mul_1(), providers=onnxrt.get_available_providers())
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert "TvmExecutionProvider" not in onnxrt.get_available_providers()


def test_deserialization_from_path_object(tmp_path):
    path = tmp_path / "mul_1.onnx"
    onnx.save(mul_1(), path)
    out = onnxrt.InferenceSession(path).run(None, {"X": X})[0]
    np.testing.assert_array_equal(out, SQUARES)


def test_invalid_set_providers():
    sess = _session(mul_1(), providers=["CPUExecutionProvider"])
    with pytest.raises(RuntimeError, match="Unknown Provider Type: InvalidProvider"):
        sess.set_providers(["InvalidProvider"])


# ------------------------------------------------------------------------------------------
# logging
# ------------------------------------------------------------------------------------------


def test_logger_callback_receives_session_records(restore_logger):
    records = []
    onnxrt.set_default_logger_callback(lambda *r: records.append(r), severity=0)
    sess = _session(mul_1())
    assert records, "creating a session at Verbose severity logs"
    (out,) = sess.run(["Y"], {"X": X})
    np.testing.assert_array_equal(out, X * X)
    for severity, category, logid, location, message in records:
        assert isinstance(severity, int) and 0 <= severity <= 4
        assert category == "onnxrt" and isinstance(logid, str)
        assert location.startswith("session.py:") and isinstance(message, str)
    messages = [r[4] for r in records]
    assert any(m.startswith("Session options SessionOptions(") for m in messages)
    assert any(m.startswith("Session successfully initialized") for m in messages)
    assert any(m.startswith("Run: feeds ['X'], fetches ['Y']") for m in messages)
    assert any(m.startswith("Run finished in") for m in messages)
    # back to the default sink: the callback hears nothing more
    onnxrt.set_default_logger_callback(None)
    onnxrt.set_default_logger_severity(2)
    n = len(records)
    np.testing.assert_array_equal(sess.run(["Y"], {"X": X})[0], X * X)
    _session(mul_1())
    assert len(records) == n


def test_logger_severity_filters_and_logids(restore_logger):
    records = []
    onnxrt.set_default_logger_callback(lambda *r: records.append(r), severity=1)
    so = onnxrt.SessionOptions()
    so.logid = "mine"
    sess = _session(mul_1(), so)
    assert {r[0] for r in records} == {1} and {r[2] for r in records} == {"mine"}
    records.clear()
    sess.run(None, {"X": X})
    assert records == []  # a run logs at Verbose only
    ro = onnxrt.RunOptions()
    ro.log_severity_level = 0
    ro.logid = "run-7"
    ro.run_tag = "tagged"
    sess.run(None, {"X": X}, ro)
    assert [r[2] for r in records] == ["run-7", "run-7"]
    assert records[0][4].startswith("Run (run tag 'tagged'): feeds ['X']")
    # the session's own level wins over the default logger's
    records.clear()
    so = onnxrt.SessionOptions()
    so.log_severity_level = 3
    _session(mul_1(), so)
    assert records == []


def test_logger_verbosity_adds_node_records(restore_logger):
    records = []
    model = _make(
        [helper.make_node("Abs", ["X"], ["A"], name="abs_0"), helper.make_node("Neg", ["A"], ["Y"], name="neg_0")],
        [_vi("X", F, [3, 2])], [_vi("Y", F, [3, 2])],
    )
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = _session(model, so)
    onnxrt.set_default_logger_callback(lambda *r: records.append(r[4]), severity=0)
    sess.run(None, {"X": X})
    assert not any(m.startswith("Node ") for m in records)
    onnxrt.set_default_logger_verbosity(1)
    records.clear()
    np.testing.assert_array_equal(sess.run(None, {"X": X})[0], -np.abs(X))
    nodes = [m for m in records if m.startswith("Node ")]
    assert [m.split(" ran in")[0] for m in nodes] == ["Node 'abs_0' (Abs)", "Node 'neg_0' (Neg)"]


def test_logger_argument_errors(restore_logger):
    def cb(*_):
        pass

    onnxrt.set_default_logger_callback(lambda sev, cat, lid, loc, msg: None)
    onnxrt.set_default_logger_callback(cb, severity=0)
    onnxrt.set_default_logger_callback(cb, severity=4)
    for bad in (5, -1):
        with pytest.raises(RuntimeError, match="Invalid logging severity"):
            onnxrt.set_default_logger_callback(cb, severity=bad)
        with pytest.raises(RuntimeError):  # onnxruntime refuses the same
            ort.set_default_logger_callback(cb, severity=bad)
        with pytest.raises(onnxrt.LoggerError):
            onnxrt.set_default_logger_severity(bad)
    with pytest.raises(onnxrt.LoggerError, match="callback must be a callable") as info:
        onnxrt.set_default_logger_callback("not a callable")
    assert isinstance(info.value, RuntimeError)
    with pytest.raises(onnxrt.InvalidOptionError):
        onnxrt.set_default_logger_verbosity("1")
    ort.set_default_logger_callback(None)
    ort.set_default_logger_severity(2)


def test_logger_callback_that_raises_does_not_stop_the_session(restore_logger):
    seen = []

    def raising(*_):
        raise ValueError("intentional error from callback")

    onnxrt.set_default_logger_callback(raising, severity=0)
    hook = __import__("sys").unraisablehook
    __import__("sys").unraisablehook = lambda u: seen.append(u.exc_value)
    try:
        sess = _session(mul_1())
        np.testing.assert_array_equal(sess.run(None, {"X": X})[0], SQUARES)
    finally:
        __import__("sys").unraisablehook = hook
    assert seen and all(isinstance(e, ValueError) for e in seen)


def test_logger_callback_that_raises_under_the_default_unraisable_hook(restore_logger, monkeypatch, capsys):
    """Python's own hook takes only its internal argument type: onnxrt prints the report itself."""
    import sys

    monkeypatch.setattr(sys, "unraisablehook", sys.__unraisablehook__)

    def raising(*_):
        raise ValueError("intentional error from callback")

    onnxrt.set_default_logger_callback(raising, severity=0)
    np.testing.assert_array_equal(_session(mul_1()).run(None, {"X": X})[0], SQUARES)
    err = capsys.readouterr().err
    assert "Exception ignored in the onnxrt logger callback" in err
    assert "ValueError: intentional error from callback" in err


def test_logger_default_sink_is_python_logging(restore_logger, caplog):
    onnxrt.set_default_logger_severity(0)
    with caplog.at_level("DEBUG", logger="onnxrt"):
        _session(mul_1())
    assert any("Session successfully initialized" in r.getMessage() for r in caplog.records)


# ------------------------------------------------------------------------------------------
# runs
# ------------------------------------------------------------------------------------------


def test_run_model_and_memory_infos():
    sess = _session(mul_1())
    (inp,) = sess.get_inputs()
    (out,) = sess.get_outputs()
    assert (inp.name, inp.shape, inp.type) == ("X", [3, 2], "tensor(float)")
    assert (out.name, out.shape) == ("Y", [3, 2])
    infos = sess.get_input_memory_infos() + sess.get_output_memory_infos()
    ref_sess = ort.InferenceSession(mul_1().SerializeToString(), providers=["CPUExecutionProvider"])
    ref = ref_sess.get_input_memory_infos()[0]
    for mi in infos:
        assert (mi.name, mi.device_id, int(mi.mem_type), int(mi.allocator_type), int(mi.device_mem_type), mi.device_vendor_id) == (
            ref.name, ref.device_id, int(ref.mem_type), int(ref.allocator_type), int(ref.device_mem_type), ref.device_vendor_id
        )
    assert sess.get_input_epdevices() == [None]
    np.testing.assert_array_equal(sess.run([out.name], {inp.name: X})[0], SQUARES)


def test_run_async_calls_back_with_results():
    event = threading.Event()
    got = {}

    def callback(res, data, err):
        got.update(res=res, data=data, err=err, thread=threading.current_thread())
        event.set()

    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 2
    sess = _session(mul_1(), so)
    sess.run_async(["Y"], {"X": X}, callback, {"id": 123456})
    assert event.wait(10)
    assert got["err"] == "" and got["data"] == {"id": 123456} and len(got["res"]) == 1
    assert got["thread"] is not threading.current_thread()
    np.testing.assert_array_equal(got["res"][0], SQUARES)


def test_run_model_from_bytes_and_matmul_contiguity():
    sess = onnxrt.InferenceSession(matmul(3).SerializeToString())
    assert [a.shape for a in sess.get_inputs() + sess.get_outputs()] == [[3, 2], [3, 1]]
    x = np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], np.float32)[:, [1, 0]]
    expected = np.array([[5.0], [11.0], [17.0]], np.float32)
    np.testing.assert_array_equal(sess.run(["Y"], {"X": x})[0], expected)
    np.testing.assert_array_equal(sess.run(["Y"], {"X": np.ascontiguousarray(x)})[0], expected)
    x_t = np.asfortranarray(X)
    np.testing.assert_array_equal(sess.run(["Y"], {"X": x_t})[0], expected)


def test_symbolic_dimension_named_none():
    sess = _session(matmul("None"))
    assert sess.get_inputs()[0].shape == ["None", 2]
    assert sess.get_outputs()[0].shape == ["None", 1]
    np.testing.assert_array_equal(sess.run(["Y"], {"X": X})[0], [[5.0], [11.0], [17.0]])


def test_run_from_two_threads_with_their_run_options():
    so = onnxrt.SessionOptions()
    so.log_verbosity_level = 1
    so.logid = "MultiThreadsTest"
    sess = _session(mul_1(), so)
    errors, results = [], []

    def work(tag):
        ro = onnxrt.RunOptions()
        ro.logid = tag
        try:
            for _ in range(20):
                results.append(sess.run([], {"X": X}, run_options=ro)[0])
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    threads = [threading.Thread(target=work, args=(f"thread{i}",)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == [] and len(results) == 80
    for r in results:
        np.testing.assert_array_equal(r, SQUARES)


def test_lists_as_inputs():
    sess = _session(mul_1())
    np.testing.assert_array_equal(sess.run([], {"X": X.tolist()})[0], SQUARES)
    strings = np.array(["this", "is", "identity", "test"], dtype=str).reshape((2, 2))
    out = _session(identity_string()).run([], {"input:0": strings.tolist()})[0]
    np.testing.assert_equal(out, strings)


def test_boolean_inputs_keep_the_graph_order():
    sess = _session(logicaland())
    assert [(a.name, a.shape, a.type) for a in sess.get_inputs()] == [
        ("input1:0", [2, 2], "tensor(bool)"), ("input:0", [2, 2], "tensor(bool)")
    ]
    assert [(a.name, a.type) for a in sess.get_outputs()] == [("output:0", "tensor(bool)")]
    a = np.array([[True, True], [False, False]])
    b = np.array([[True, False], [True, False]])
    out = sess.run(["output:0"], {"input1:0": a, "input:0": b})[0]
    assert out.dtype == bool
    np.testing.assert_array_equal(out, [[True, False], [False, False]])


@pytest.mark.parametrize(
    "x, expected",
    [
        (np.array(["this", "is", "identity", "test"], dtype=str).reshape((2, 2)), None),
        (np.array(["Olá", "你好", "여보세요", "hello"], dtype=str).reshape((2, 2)), None),
        (np.array(["this", "is", "identity", "test"], object).reshape((2, 2)), None),
        (np.array([b"this", b"is", b"identity", b"test"]).reshape((2, 2)), "bytes"),
        (np.array([b"must", b"have", b"same", b"size"], dtype=np.void).reshape((2, 2)), [["must", "have"], ["same", "size"]]),
    ],
    ids=["str", "unicode", "object", "bytes", "void"],
)
def test_string_inputs_of_every_kind(x, expected):
    sess = _session(identity_string())
    assert [(a.name, a.shape, a.type) for a in sess.get_inputs() + sess.get_outputs()] == [
        ("input:0", [2, 2], "tensor(string)"), ("output:0", [2, 2], "tensor(string)")
    ]
    out = sess.run(["output:0"], {"input:0": x})[0]
    assert out.dtype == object and out.shape == (2, 2)
    if expected == "bytes":
        np.testing.assert_equal(out.astype("|S8"), x)
    elif expected is not None:
        np.testing.assert_equal(out, np.array(expected, dtype=object))
    else:
        np.testing.assert_equal(out, x)


def test_missing_input_message_and_type():
    sess = _session(logicaland())
    with pytest.raises(ValueError, match=r"Required inputs \(\['input1:0'\]\) are missing from input feed \(\['input:0'\]\)"):
        sess.run([], {"input:0": np.array([[True, True], [False, False]])})


def test_outputs_are_views_over_session_buffers_and_never_alias_inputs():
    shape = [1, 2, 2, 2]
    model = _make(
        [helper.make_node("Add", ["input_0", "ten"], ["plus_10"], name="Add0")],
        [_vi("input_0", F, shape)], [_vi("plus_10", F, shape), _vi("input_0", F, shape)],
        [("ten", np.array(10, np.float32))], opset=21,
    )
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = _session(model, so)
    kept = []
    for i in range(7):
        x = np.full(shape, float(i), np.float32)
        out = sess.run(None, {"input_0": x})
        np.testing.assert_array_equal(out[0], x + 10)
        np.testing.assert_array_equal(out[1], x)
        assert not np.shares_memory(out[1], x)
        kept.append(out)
    for i, out in enumerate(kept):
        np.testing.assert_array_equal(out[0], np.full(shape, i + 10.0, np.float32))
        np.testing.assert_array_equal(out[1], np.full(shape, float(i), np.float32))
    res = _session(mul_1()).run(None, {"X": X})[0]
    assert res.base is not None


# ------------------------------------------------------------------------------------------
# sequences and optionals
# ------------------------------------------------------------------------------------------


def test_sequence_length():
    model = _make([helper.make_node("SequenceLength", ["X"], ["Y"])], [_seq("X", F)], [_vi("Y", I64, [])], opset=12)
    sess = _session(model)
    assert [(a.name, a.type) for a in sess.get_inputs()] == [("X", "seq(tensor(float))")]
    assert [(a.name, a.type) for a in sess.get_outputs()] == [("Y", "tensor(int64)")]
    x = [np.arange(6, dtype=np.float32).reshape(2, 3)] * 2
    out = sess.run(["Y"], {"X": x})[0]
    assert out.dtype == np.int64 and out.shape == () and out == 2


def test_sequence_construct_and_insert():
    t1 = np.array([1, 0, 3, 44, 23, 11], np.int64).reshape(2, 3)
    t2 = np.arange(1, 7, dtype=np.int64).reshape(2, 3)
    construct = _make(
        [helper.make_node("SequenceConstruct", ["tensor1", "tensor2"], ["output_sequence"])],
        [_vi("tensor1", I64, [2, 3]), _vi("tensor2", I64, [2, 3])], [_seq("output_sequence", I64)], opset=12,
    )
    sess = _session(construct)
    assert [a.type for a in sess.get_inputs()] == ["tensor(int64)", "tensor(int64)"]
    assert sess.get_outputs()[0].type == "seq(tensor(int64))"
    out = sess.run(["output_sequence"], {"tensor1": t1, "tensor2": t2})[0]
    assert isinstance(out, list)
    np.testing.assert_array_equal(out, [t1, t2])

    insert = _make(
        [helper.make_node("SequenceInsert", ["input_seq", "tensor"], ["output_sequence"])],
        [_seq("input_seq", I64), _vi("tensor", I64, [2, 3])], [_seq("output_sequence", I64)], opset=12,
    )
    so = onnxrt.SessionOptions()
    so.execution_mode = onnxrt.ExecutionMode.ORT_SEQUENTIAL
    sess = _session(insert, so)
    assert [(a.name, a.type) for a in sess.get_inputs()] == [("input_seq", "seq(tensor(int64))"), ("tensor", "tensor(int64)")]
    out = sess.run(["output_sequence"], {"tensor": t1, "input_seq": []})[0]
    np.testing.assert_array_equal(out, [t1])


def test_optional_sequence_input_and_type_strings():
    opt = helper.make_optional_type_proto(helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None)))
    model = _make(
        [helper.make_node("Identity", ["x"], ["y"])],
        [helper.make_value_info("x", opt)], [helper.make_value_info("y", opt)], opset=16,
    )
    sess, ref = _session(model), ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].type == ref.get_inputs()[0].type == "optional(seq(tensor(float)))"
    x = [np.array([1, 2, 3, 4, 5], np.float32)]
    out = sess.run(["y"], {"x": x})[0]
    np.testing.assert_array_equal(out, x)
    np.testing.assert_array_equal(out, ref.run(["y"], {"x": x})[0])


def test_map_type_strings_match_onnxruntime():
    """A map input (DictVectorizer) and a sequence-of-maps output (ZipMap): type strings and values as onnxruntime's."""
    ml = [helper.make_opsetid("", 13), helper.make_opsetid("ai.onnx.ml", 1)]
    map_in = helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, None))
    vec = helper.make_model(
        helper.make_graph(
            [helper.make_node("DictVectorizer", ["m"], ["v"], domain="ai.onnx.ml", int64_vocabulary=[1, 2, 3])],
            "g", [helper.make_value_info("m", map_in)], [_vi("v", F, [None, 3])],
        ),
        opset_imports=ml,
    ).SerializeToString()
    zip_out = helper.make_sequence_type_proto(helper.make_map_type_proto(I64, helper.make_tensor_type_proto(F, None)))
    zipmap = helper.make_model(
        helper.make_graph(
            [helper.make_node("ZipMap", ["x"], ["z"], domain="ai.onnx.ml", classlabels_int64s=[10, 20])],
            "g", [_vi("x", F, [None, 2])], [helper.make_value_info("z", zip_out)],
        ),
        opset_imports=ml,
    ).SerializeToString()
    for data, arg, feed in ((vec, "get_inputs", {"m": {1: 2.0, 3: 4.0}}), (zipmap, "get_outputs", {"x": np.array([[0.25, 0.75]], np.float32)})):
        ours = onnxrt.InferenceSession(data)
        ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
        assert getattr(ours, arg)()[0].type == getattr(ref, arg)()[0].type
        got, want = ours.run(None, feed)[0], ref.run(None, feed)[0]
        if isinstance(want, list):
            assert got == want == [{10: 0.25, 20: 0.75}]
        else:
            np.testing.assert_array_equal(got, want)
    assert onnxrt.InferenceSession(vec).get_inputs()[0].type == "map(int64,tensor(float))"
    assert onnxrt.InferenceSession(zipmap).get_outputs()[0].type == "seq(map(int64,tensor(float)))"


# ------------------------------------------------------------------------------------------
# options
# ------------------------------------------------------------------------------------------


def test_options_defaults_and_round_trips():
    so, ref = onnxrt.SessionOptions(), ort.SessionOptions()
    assert so.graph_optimization_level == ref.graph_optimization_level == onnxrt.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.execution_mode == ExecutionModeRef.ORT_SEQUENTIAL == 0
    assert so.log_severity_level == ref.log_severity_level == -1
    ro, ro_ref = onnxrt.RunOptions(), ort.RunOptions()
    assert ro.log_severity_level == ro_ref.log_severity_level == -1
    for level in onnxrt.GraphOptimizationLevel:
        so.graph_optimization_level = level
        assert so.graph_optimization_level is level
        assert int(level) == int(ort.GraphOptimizationLevel.__members__[level.name])
    so.execution_mode = onnxrt.ExecutionMode.ORT_PARALLEL
    assert so.execution_mode == onnxrt.ExecutionMode.ORT_PARALLEL
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_ENABLE_EXTENDED
    sess = _session(logicaland(), so)
    a = np.array([[True, True], [False, False]])
    sess.run([], {"input1:0": a, "input:0": a})
    so.add_session_config_entry("CONFIG_KEY", "CONFIG_VAL")
    assert so.get_session_config_entry("CONFIG_KEY") == "CONFIG_VAL"
    with pytest.raises(RuntimeError, match="SessionOptions does not have configuration with key: INVALID_KEY"):
        so.get_session_config_entry("INVALID_KEY")
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    np.testing.assert_array_equal(_session(mul_1()).run([], {"X": X}, ro)[0], SQUARES)


ExecutionModeRef = onnxrt.ExecutionMode


def test_free_dimension_overrides():
    dims = [("Dim1", "DATA_BATCH"), ("Dim2", "DATA_CHANNEL"), (5, None)]
    shape = helper.make_tensor_type_proto(F, [d for d, _ in dims])
    for dim, (_, denotation) in zip(shape.tensor_type.shape.dim, dims):
        if denotation:
            dim.denotation = denotation
    model = _make([helper.make_node("Abs", ["x"], ["y"])], [helper.make_value_info("x", shape)], [_vi("y", F, None)])
    so = onnxrt.SessionOptions()
    so.add_free_dimension_override_by_denotation("DATA_BATCH", 3)
    so.add_free_dimension_override_by_denotation("DATA_CHANNEL", 5)
    assert _session(model, so).get_inputs()[0].shape == [3, 5, 5]
    so = onnxrt.SessionOptions()
    so.add_free_dimension_override_by_name("Dim1", 4)
    so.add_free_dimension_override_by_name("Dim2", 6)
    sess = _session(model, so)
    assert (sess.get_inputs()[0].name, sess.get_inputs()[0].shape) == ("x", [4, 6, 5])


def test_add_initializer_overrides_the_model():
    so = onnxrt.SessionOptions()
    so.add_initializer("W", onnxrt.OrtValue.ortvalue_from_numpy(np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], np.float32)))
    out = _session(mul_1(), so, providers=["CPUExecutionProvider"]).run(["Y"], {"X": X})[0]
    np.testing.assert_array_equal(out, [[2.0, 2.0], [12.0, 12.0], [30.0, 30.0]])


def _pad_model_with_external_pads():
    """A Pad whose pads initializer lives in an external file nobody wrote ('Pads_not_on_disk.bin')."""
    pads = numpy_helper.from_array(np.array([0, 0, 1, 1], np.int64), "Pads_not_on_disk")
    pads.ClearField("int64_data")
    pads.ClearField("raw_data")
    pads.data_location = TensorProto.EXTERNAL
    for k, v in (("location", "Pads_not_on_disk.bin"), ("offset", "0"), ("length", "32")):
        entry = pads.external_data.add()
        entry.key, entry.value = k, v
    graph = helper.make_graph(
        [helper.make_node("Pad", ["x", "Pads_not_on_disk"], ["y"])], "g", [_vi("x", F, [2, 2])], [_vi("y", F, [3, 3])], [pads]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


def test_external_initializers_from_the_user(in_tmp):
    x = np.arange(4, dtype=np.float32).reshape(2, 2)
    expected = np.pad(x, ((0, 1), (0, 1)))
    so = onnxrt.SessionOptions()
    so.add_external_initializers(["Pads_not_on_disk"], [onnxrt.OrtValue.ortvalue_from_numpy(np.array([0, 0, 1, 1], np.int64))])
    sess = onnxrt.InferenceSession(_pad_model_with_external_pads().SerializeToString(), sess_options=so, providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], expected)
    data = np.array([0, 0, 1, 1], np.int64).tobytes()
    so = onnxrt.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Pads_not_on_disk.bin"], [data], [len(data)])
    sess = onnxrt.InferenceSession(_pad_model_with_external_pads().SerializeToString(), sess_options=so)
    np.testing.assert_array_equal(sess.run(None, {"x": x})[0], expected)


def _conv_model():
    """A small mnist-like model: Conv (8x1x5x5 weights, 800 bytes) + Add of a bias (32 bytes)."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((8, 1, 5, 5)).astype(np.float32)
    b = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    return _make(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[2, 2, 2, 2]), helper.make_node("Add", ["c", "b"], ["y"])],
        [_vi("x", F, [1, 1, 8, 8])], [_vi("y", F, [1, 8, 8, 8])], [("w", w), ("b", b)],
    )


def test_model_serialization_and_external_initializers(in_tmp):
    so = onnxrt.SessionOptions()
    so.log_severity_level = 1
    so.logid = "TestModelSerialization"
    so.optimized_model_filepath = "./PythonApiTestOptimizedModel.onnx"
    _session(mul_1(), so)
    assert os.path.isfile(so.optimized_model_filepath)

    os.mkdir("testdata")
    x = np.random.default_rng(1).standard_normal((1, 1, 8, 8)).astype(np.float32)
    expected = _session(_conv_model()).run(None, {"x": x})[0]
    for target, data in (("./m_ext.onnx", "ext.bin"), (os.path.join("./testdata/", "m_ext_dir.onnx"), "ext_dir.bin")):
        so = onnxrt.SessionOptions()
        so.optimized_model_filepath = target
        so.add_session_config_entry("session.optimized_model_external_initializers_file_name", data)
        so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "100")
        _session(_conv_model(), so)
        folder = os.path.dirname(target)
        assert os.path.isfile(target) and os.path.isfile(os.path.join(folder, data))
        # the large weights went out, the small bias stayed in
        assert os.path.getsize(os.path.join(folder, data)) >= 800
        np.testing.assert_allclose(onnxrt.InferenceSession(target).run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-5)


def test_optimized_model_from_a_model_with_external_data(in_tmp):
    model = _conv_model()
    onnx.save(model, "orig.onnx", save_as_external_data=True, all_tensors_to_one_file=True, location="orig.bin", size_threshold=0)
    x = np.ones((1, 1, 8, 8), np.float32)
    expected = _session(_conv_model()).run(None, {"x": x})[0]
    so = onnxrt.SessionOptions()
    so.optimized_model_filepath = "model_opt_with_ext_data_1.onnx"
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "model_opt_with_ext_data_1.bin")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "100")
    onnxrt.InferenceSession("orig.onnx", sess_options=so)
    so2 = onnxrt.SessionOptions()
    so2.optimized_model_filepath = "model_opt_with_ext_data_2.onnx"
    so2.add_session_config_entry("session.optimized_model_external_initializers_file_name", "model_opt_with_ext_data_2.bin")
    so2.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "10")
    onnxrt.InferenceSession("model_opt_with_ext_data_1.onnx", sess_options=so2)
    assert os.path.isfile("model_opt_with_ext_data_2.onnx") and os.path.isfile("model_opt_with_ext_data_2.bin")
    os.remove("model_opt_with_ext_data_1.onnx")
    sess = onnxrt.InferenceSession("model_opt_with_ext_data_2.onnx", sess_options=onnxrt.SessionOptions())
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], expected, rtol=1e-5, atol=1e-5)


def _with_ort_config(config):
    model = mul_1()
    entry = model.metadata_props.add()
    entry.key, entry.value = "ort_config", config if isinstance(config, str) else json.dumps(config)
    return model.SerializeToString()


def test_session_options_from_the_model(in_tmp, monkeypatch):
    config = {"session_options": {"inter_op_num_threads": 5, "intra_op_num_threads": 2, "graph_optimization_level": 99, "enable_profiling": 1}}
    data = _with_ort_config(config)
    monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "0")
    assert onnxrt.InferenceSession(data).get_session_options().inter_op_num_threads == 0
    monkeypatch.setenv("ORT_LOAD_CONFIG_FROM_MODEL", "1")
    user = onnxrt.SessionOptions()
    sess = onnxrt.InferenceSession(data, sess_options=user)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    so, so_ref = sess.get_session_options(), ref.get_session_options()
    assert (so.inter_op_num_threads, so.intra_op_num_threads) == (5, 2)
    assert (so_ref.inter_op_num_threads, so_ref.intra_op_num_threads) == (5, 2)
    assert so.execution_mode == onnxrt.ExecutionMode.ORT_SEQUENTIAL
    assert so.graph_optimization_level == onnxrt.GraphOptimizationLevel.ORT_ENABLE_ALL
    assert so.enable_profiling is True and so_ref.enable_profiling is True
    assert user.enable_profiling is False  # the caller's options are not changed
    sess.run(None, {"X": X})
    path = sess.end_profiling()
    assert os.path.isfile(path)
    os.remove(path)
    os.remove(ref.end_profiling())
    level3 = onnxrt.InferenceSession(_with_ort_config({"session_options": {"graph_optimization_level": 3}}))
    assert level3.get_session_options().graph_optimization_level == onnxrt.GraphOptimizationLevel.ORT_ENABLE_LAYOUT
    np.testing.assert_array_equal(level3.run(None, {"X": X})[0], SQUARES)
    for bad, words in (
        ({"session_options": {"enable_profiling": True}}, "enable_profiling option in the model file must be an integer"),
        ({"session_options": {"graph_optimization_level": 4}}, "Unsupported value for graph_optimization_level"),
        ({"session_options": {"intra_op_num_threads": -3}}, "Unsupported value for intra_op_num_threads"),
        ("notjson{", "cannot be parsed"),
    ):
        with pytest.raises(onnxrt.ModelConfigError, match=words) as info:
            onnxrt.InferenceSession(_with_ort_config(bad))
        assert isinstance(info.value, RuntimeError)
        with pytest.raises(RuntimeError):
            ort.InferenceSession(_with_ort_config(bad), providers=["CPUExecutionProvider"])


# ------------------------------------------------------------------------------------------
# profiling
# ------------------------------------------------------------------------------------------


def test_profiling_file_and_start_times(in_tmp):
    so = onnxrt.SessionOptions()
    so.enable_profiling = True
    sess = _session(mul_1(), so)
    sess.run([], {"X": X})
    path = sess.end_profiling()
    assert os.path.basename(path).startswith("onnxrt_profile_") and path.endswith(".json")
    with open(path) as f:
        lines = f.readlines()
    assert "[" in lines[0] and "]" in lines[-1] and len(lines) >= 4
    for line in lines[1:-1]:
        for tag in ("pid", "dur", "ts", "ph", "X", "name", "args"):
            assert tag in line
    assert len(json.load(open(path))) == len(lines) - 2
    assert sess.end_profiling() == ""
    starts = []
    for _ in range(3):
        s = _session(mul_1(), so)
        starts.append(s.get_profiling_start_time_ns())
        os.remove(s.end_profiling())
    assert starts == sorted(starts)
    import time

    assert abs(starts[-1] - time.time_ns()) < 60e9  # nanoseconds since the epoch
    assert _session(mul_1()).get_profiling_start_time_ns() == 0


# ------------------------------------------------------------------------------------------
# OrtValue, SparseTensor, OrtDevice, memory infos, allocators
# ------------------------------------------------------------------------------------------


def test_ort_value_basics_and_session_feed():
    v = onnxrt.OrtValue.ortvalue_from_numpy(X)
    assert (v.device_name(), v.shape(), v.data_type(), v.is_tensor(), v.tensor_size_in_bytes()) == ("cpu", [3, 2], "tensor(float)", True, 24)
    sess = _session(mul_1())
    np.testing.assert_array_equal(sess.run(["Y"], {"X": v})[0], SQUARES)
    np.testing.assert_array_equal(v.numpy(), X)
    (out,) = sess.run_with_ort_values(["Y"], {"X": v})
    assert isinstance(out, onnxrt.OrtValue)
    np.testing.assert_array_equal(out.numpy(), SQUARES)
    typed = onnxrt.OrtValue.ortvalue_from_numpy_with_onnx_type(X, 1)
    assert typed.is_tensor() and typed.element_type() == 1 and typed.shape() == [3, 2]
    with pytest.raises(onnxrt.NotApplicableError):
        onnxrt.OrtValue.ortvalue_from_numpy(X, "cuda", 0)


def test_ort_value_array_and_dlpack_protocols():
    arr = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    v = onnxrt.OrtValue.ortvalue_from_numpy(arr)
    assert np.asarray(v).ctypes.data == v.data_ptr() == np.asarray(v, dtype=np.float32).ctypes.data
    f64 = np.asarray(v, dtype=np.float64)
    assert f64.dtype == np.float64
    np.testing.assert_array_equal(f64, arr)
    np.testing.assert_array_equal(np.array(v), arr)
    for a in (np.array([1, 2, 3], np.int64), np.array([True, False, True])):
        got = np.asarray(onnxrt.OrtValue.ortvalue_from_numpy(a))
        assert got.dtype == a.dtype
        np.testing.assert_array_equal(got, a)
    assert v.__dlpack_device__() == (1, 0)
    np.testing.assert_array_equal(onnxrt.OrtValue.from_dlpack(v.__dlpack__()).numpy(), arr)
    flat = np.array([1.0, 2.0, 3.0, 4.0], np.float32)
    got = onnxrt.OrtValue.from_dlpack(flat)
    assert got.shape() == [4]
    src = onnxrt.OrtValue.ortvalue_from_numpy(flat)
    assert onnxrt.OrtValue.from_dlpack(src).data_ptr() == src.data_ptr()
    b = onnxrt.OrtValue.from_dlpack(onnxrt.OrtValue.ortvalue_from_numpy(np.array([True, False, True, False]))).numpy()
    assert b.dtype == bool
    u = onnxrt.OrtValue.from_dlpack(onnxrt.OrtValue.ortvalue_from_numpy(np.array([1, 2, 255], np.uint8))).numpy()
    assert u.dtype == np.uint8
    np.testing.assert_array_equal(u, [1, 2, 255])


def test_sparse_tensors():
    cpu = onnxrt.OrtDevice.make("cpu", 0)
    values = np.array([1.0, 2.0, 3.0], np.float32)
    indices = np.array([3, 5, 15], np.int64)
    st = onnxrt.SparseTensor.sparse_coo_from_numpy([9, 9], values, indices, cpu)
    assert (st.format(), st.dense_shape(), st.data_type(), st.device_name()) == (
        onnxrt.OrtSparseFormat.ORT_SPARSE_COO, [9, 9], "sparse_tensor(float)", "cpu"
    )
    assert not st.values().flags.writeable and not st.as_coo_view().indices().flags.writeable
    back = onnxrt.OrtValue.ort_value_from_sparse_tensor(st).as_sparse_tensor()
    np.testing.assert_array_equal(back.values(), values)
    strs = onnxrt.SparseTensor.sparse_coo_from_numpy([9, 9], np.array(["xyz", "yxz", "zyx"]), indices, cpu)
    assert strs.data_type() == "sparse_tensor(string)"
    np.testing.assert_array_equal(strs.values(), ["xyz", "yxz", "zyx"])
    with pytest.raises(RuntimeError):
        st.to_cuda(onnxrt.OrtDevice.make("cuda", 0))
    inner = np.array([1, 1, 1], np.int64)
    outer = np.array([0, 1, 2, 3, 3, 3, 3, 3, 3, 3], np.int64)
    csr = onnxrt.SparseTensor.sparse_csr_from_numpy([9, 9], values, inner, outer, cpu)
    assert csr.format() == onnxrt.OrtSparseFormat.ORT_SPARSE_CSRC
    np.testing.assert_array_equal(csr.as_csrc_view().inner(), inner)
    np.testing.assert_array_equal(csr.as_csrc_view().outer(), outer)


def test_ort_device_and_memory_info_match_onnxruntime():
    cpu = onnxrt.OrtDevice.make("cpu", 0)
    assert (cpu.device_id(), cpu.device_type(), cpu.device_vendor_id(), cpu.device_mem_type()) == (0, 0, onnxrt.OrtDeviceVendorId.NONE, 0)
    assert onnxrt.OrtDevice.make("cuda", 0).device_vendor_id() == onnxrt.OrtDeviceVendorId.NVIDIA == 0x10DE
    for enum_name in ("OrtAllocatorType", "OrtMemType", "OrtDeviceMemoryType", "OrtMemoryInfoDeviceType"):
        ours, ref = getattr(onnxrt, enum_name), getattr(ort, enum_name)
        assert {k: int(v) for k, v in ours.__members__.items()} == {k: int(v) for k, v in ref.__members__.items()}
    def row(mi):
        return (mi.name, mi.device_id, int(mi.mem_type), int(mi.allocator_type), int(mi.device_mem_type), mi.device_vendor_id)

    for name in ("Cpu", "Cuda", "CudaPinned", "DML"):
        ours = onnxrt.OrtMemoryInfo(name, onnxrt.OrtAllocatorType.ORT_DEVICE_ALLOCATOR, 1, onnxrt.OrtMemType.CPU_INPUT)
        ref = ort.OrtMemoryInfo(name, ort.OrtAllocatorType.ORT_DEVICE_ALLOCATOR, 1, ort.OrtMemType.CPU_INPUT)
        assert row(ours) == row(ref)
    mi = onnxrt.OrtMemoryInfo("Cpu", onnxrt.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxrt.OrtMemType.DEFAULT)
    assert (mi.name, mi.device_id, mi.mem_type, mi.allocator_type, mi.device_mem_type, mi.device_vendor_id) == (
        "Cpu", 0, onnxrt.OrtMemType.DEFAULT, onnxrt.OrtAllocatorType.ORT_ARENA_ALLOCATOR, onnxrt.OrtDeviceMemoryType.DEFAULT, 0
    )
    with pytest.raises(onnxrt.InvalidArgumentError, match="Specified device is not supported"):
        onnxrt.OrtMemoryInfo("cpu", onnxrt.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxrt.OrtMemType.DEFAULT)
    for dm in onnxrt.OrtDeviceMemoryType:
        ours = onnxrt.OrtMemoryInfo.create_v2("Test", onnxrt.OrtMemoryInfoDeviceType.CPU, 0, 0, dm, 128, onnxrt.OrtAllocatorType.ORT_ARENA_ALLOCATOR)
        ref = ort.OrtMemoryInfo.create_v2(
            "Test", ort.OrtMemoryInfoDeviceType.CPU, 0, 0, ort.OrtDeviceMemoryType(int(dm)), 128, ort.OrtAllocatorType.ORT_ARENA_ALLOCATOR
        )
        assert (ours.name, ours.device_id, int(ours.mem_type), int(ours.device_mem_type), ours.device_vendor_id) == (
            ref.name, ref.device_id, int(ref.mem_type), int(ref.device_mem_type), ref.device_vendor_id
        )


def test_arena_config_and_shared_allocators():
    cfg = onnxrt.OrtArenaCfg(8, 0, 4, 2)
    assert (cfg.max_mem, cfg.arena_extend_strategy, cfg.initial_chunk_size_bytes, cfg.max_dead_bytes_per_chunk) == (8, 0, 4, 2)
    assert cfg.initial_growth_chunk_size_bytes == cfg.max_power_of_two_extend_bytes == -1
    keys = {"max_mem": 32, "arena_extend_strategy": 11, "initial_chunk_size_bytes": 18, "max_dead_bytes_per_chunk": 14,
            "initial_growth_chunk_size_bytes": 12, "max_power_of_two_extend_bytes": 17}
    cfg = onnxrt.OrtArenaCfg(keys)
    ref = ort.OrtArenaCfg(keys)
    assert {k: getattr(cfg, k) for k in keys} == {k: getattr(ref, k) for k in keys} == keys
    with pytest.raises(onnxrt.InvalidArgumentError, match="Invalid OrtArenaCfg option: bogus"):
        onnxrt.OrtArenaCfg({"bogus": 1})
    mi = onnxrt.OrtMemoryInfo("Cpu", onnxrt.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxrt.OrtMemType.DEFAULT)
    so = onnxrt.SessionOptions()
    so.add_session_config_entry("session.use_env_allocators", "1")
    onnxrt.create_and_register_allocator(mi, None)
    assert _session(mul_1(), so).uses_shared_allocator()
    assert not _session(mul_1()).uses_shared_allocator()
    np.testing.assert_array_equal(_session(mul_1(), so).run(None, {"X": X})[0], SQUARES)
    cuda = onnxrt.OrtMemoryInfo("Cuda", onnxrt.OrtAllocatorType.ORT_ARENA_ALLOCATOR, 0, onnxrt.OrtMemType.DEFAULT)
    with pytest.raises(onnxrt.NotApplicableError):
        onnxrt.create_and_register_allocator_v2("CUDAExecutionProvider", cuda, {}, onnxrt.OrtArenaCfg(0, -1, -1, -1))


# ------------------------------------------------------------------------------------------
# provider arguments, graph assignment, pickling, tree ensembles
# ------------------------------------------------------------------------------------------


def test_check_and_normalize_provider_args_as_onnxruntime():
    from onnxruntime.capi.onnxruntime_inference_collection import check_and_normalize_provider_args as ref

    valid = ["a", "b", "c"]
    for providers, options in (
        (None, None), (["a"], None), (["a", "b"], None), ([("a", {1: 2}), "b"], None), (["a", "b"], [{1: 2}, {}]),
    ):
        assert check_and_normalize_provider_args(providers, options, valid) == ref(providers, options, valid)
    with pytest.warns(UserWarning, match="Duplicate provider 'a'"):
        got = check_and_normalize_provider_args(["a", "b", "a"], [{"x": 1}, {}, {"y": 2}], valid)
    assert got == (["a", "b"], [{"x": "1"}, {}])
    for providers, options in ((3, None), ([3], None), (["a"], 3), (["a"], ["not dict"]), (["a", "b"], [{1: 2}]), ([("a", {1: 2})], [{3: 4}])):
        with pytest.raises(ValueError):
            check_and_normalize_provider_args(providers, options, valid)
        with pytest.raises(ValueError):
            ref(providers, options, valid)


def _add_mul_add():
    return _make(
        [
            helper.make_node("Add", ["a", "b"], ["s"], name="add_0"),
            helper.make_node("Mul", ["s", "c"], ["p"], name="mul_0"),
            helper.make_node("Add", ["p", "a"], ["y"], name="add_1"),
        ],
        [_vi("a", F, [2]), _vi("b", F, [2]), _vi("c", F, [2])], [_vi("y", F, [2])],
    )


def test_graph_provider_assignment_info():
    so = onnxrt.SessionOptions()
    so.add_session_config_entry("session.record_ep_graph_assignment_info", "1")
    # the optimised graph's nodes are listed: Add, Mul, Add are one FusedElementwise node
    fused = _session(_add_mul_add(), so).get_provider_graph_assignment_info()
    assert [(n.domain, n.op_type) for s in fused for n in s.get_nodes()] == [("onnxrt", "FusedElementwise")]
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    subgraphs = _session(_add_mul_add(), so).get_provider_graph_assignment_info()
    assert len(subgraphs) == 3
    assert all(s.ep_name == "CPUExecutionProvider" and len(s.get_nodes()) == 1 for s in subgraphs)
    ids = sorted(f"{n.domain}:{n.op_type}/{n.name}" for s in subgraphs for n in s.get_nodes())
    assert ids == [":Add/add_0", ":Add/add_1", ":Mul/mul_0"]
    with pytest.raises(onnxrt.SessionStateError, match="Session configuration entry 'session.record_ep_graph_assignment_info' must be set to \"1\""):
        _session(_add_mul_add()).get_provider_graph_assignment_info()


def test_session_pickles_and_keeps_its_options():
    so = onnxrt.SessionOptions()
    so.logid = "pickled"
    sess = _session(mul_1(), so)
    copy = pickle.loads(pickle.dumps(sess))
    assert copy.get_session_options().logid == "pickled"
    np.testing.assert_array_equal(copy.run(None, {"X": X})[0], SQUARES)
    with pytest.raises(Exception):  # noqa: B017  (onnxruntime's sessions do not pickle at all)
        pickle.dumps(ort.InferenceSession(mul_1().SerializeToString(), providers=["CPUExecutionProvider"]))


def _tree(nodes_modes, nodes_values, true_ids, false_ids, class_nodeids, class_weights, base_values=(-0.405,)):
    n = len(nodes_modes)
    node = helper.make_node(
        "TreeEnsembleClassifier", ["X"], ["label", "probs"], domain="ai.onnx.ml",
        nodes_treeids=[0] * n, nodes_nodeids=list(range(n)), nodes_featureids=[0] * n, nodes_values=nodes_values,
        nodes_modes=nodes_modes, nodes_truenodeids=true_ids, nodes_falsenodeids=false_ids,
        nodes_missing_value_tracks_true=[0] * n, nodes_hitrates=[1.0] * n,
        class_treeids=[0] * len(class_weights), class_nodeids=class_nodeids, class_ids=[0] * len(class_weights),
        class_weights=class_weights, classlabels_int64s=[0, 1], post_transform="LOGISTIC", base_values=list(base_values),
    )
    graph = helper.make_graph(
        [node], "t", [_vi("X", F, [None, 3])], [_vi("label", I64, [None]), _vi("probs", F, [None, 2])]
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 15), helper.make_opsetid("ai.onnx.ml", 3)]).SerializeToString()


@pytest.mark.parametrize(
    "args, p1",
    [
        ((["BRANCH_LT", "LEAF", "LEAF"], [0.5, 0.0, 0.0], [1, 0, 0], [2, 0, 0], [1, 2], [0.3, -0.3]), 1 / (1 + np.exp(0.105))),
        ((["LEAF"], [0.0], [0], [0], [0], [0.0]), 1 / (1 + np.exp(0.405))),
        ((["LEAF"], [0.0], [0], [0], [0], [-0.405], [0.0]), 1 / (1 + np.exp(0.405))),
    ],
    ids=["split", "leaf", "leaf-negative-weight"],
)
def test_tree_ensemble_logistic_binary(args, p1):
    data = _tree(*args)
    x = {"X": np.array([[0.1, 0.0, 0.0]], np.float32)}
    ours = onnxrt.InferenceSession(data).run(None, x)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, x)
    np.testing.assert_allclose(ours[1][0][1], p1, atol=1e-5)
    np.testing.assert_allclose(ours[1], ref[1], atol=1e-6)
    np.testing.assert_array_equal(ours[0], ref[0])


# ------------------------------------------------------------------------------------------
# LoRA adapters
# ------------------------------------------------------------------------------------------


def test_adapter_export_read_round_trip_and_onnxruntime_files(tmp_path):
    p1 = np.arange(1, 11, dtype=np.float32).reshape(5, 2)
    p2 = np.arange(1, 11, dtype=np.int64).reshape(2, 5)
    params = {
        "param_1": onnxrt.OrtValue.ortvalue_from_numpy_with_onnx_type(p1, 1),
        "param_2": onnxrt.OrtValue.ortvalue_from_numpy_with_onnx_type(p2, 7),
    }
    fmt = onnxrt.AdapterFormat()
    fmt.set_adapter_version(1)
    fmt.set_model_version(1)
    fmt.set_parameters(params)
    ours_path = str(tmp_path / "ours.onnx_adapter")
    fmt.export_adapter(ours_path)
    # onnxruntime writes the same kind of file from the same parameters
    ref = ort.AdapterFormat()
    ref.set_adapter_version(1)
    ref.set_model_version(1)
    ref.set_parameters({k: ort.OrtValue.ortvalue_from_numpy(v.numpy()) for k, v in params.items()})
    ref_path = str(tmp_path / "ref.onnx_adapter")
    ref.export_adapter(ref_path)
    for path in (ours_path, ref_path):
        for reader in (onnxrt.AdapterFormat.read_adapter, ort.AdapterFormat.read_adapter):
            back = reader(path)
            assert (back.get_adapter_version(), back.get_model_version()) == (1, 1)
            got = back.get_parameters()
            assert sorted(got) == ["param_1", "param_2"]
            for key, value in got.items():
                assert value.is_tensor() and value.element_type() == params[key].element_type()
                assert value.shape() == params[key].shape()
                np.testing.assert_array_equal(value.numpy(), params[key].numpy())
    back = onnxrt.AdapterFormat.read_adapter(ours_path)
    assert back.get_format_version() == 1
    assert not back.get_parameters()["param_1"].numpy().flags.writeable  # a view over the mapped file
    with pytest.raises(onnxrt.AdapterFormatError, match="cannot read the adapter file"):
        onnxrt.AdapterFormat.read_adapter(str(tmp_path / "missing.onnx_adapter"))
    (tmp_path / "bad.onnx_adapter").write_bytes(b"\x08\0\0\0NOPE" + b"\0" * 16)
    with pytest.raises(onnxrt.AdapterFormatError, match="TORT"):
        onnxrt.AdapterFormat.read_adapter(str(tmp_path / "bad.onnx_adapter"))
    with pytest.raises(onnxrt.InvalidArgumentError, match="scalar"):
        fmt.set_parameters({"s": np.array(1.0, np.float32)})


def _lora_model():
    """y = x @ W + (x @ lora_A) @ lora_B, the two LoRA parameters graph inputs defaulting to
    initializers (zeros: the base model)."""
    rng = np.random.default_rng(3)
    w = rng.integers(-3, 4, (4, 4)).astype(np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("MatMul", ["input_x", "W"], ["base"]),
            helper.make_node("MatMul", ["input_x", "lora_A"], ["down"]),
            helper.make_node("MatMul", ["down", "lora_B"], ["up"]),
            helper.make_node("Add", ["base", "up"], ["output"]),
        ],
        "lora",
        [_vi("input_x", F, [None, 4]), _vi("lora_A", F, [4, 2]), _vi("lora_B", F, [2, 4])],
        [_vi("output", F, [None, 4])],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(np.zeros((4, 2), np.float32), "lora_A"),
         numpy_helper.from_array(np.zeros((2, 4), np.float32), "lora_B")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]).SerializeToString(), w


def test_run_with_an_active_lora_adapter(tmp_path):
    data, w = _lora_model()
    a = np.arange(8, dtype=np.float32).reshape(4, 2)
    b = np.ones((2, 4), np.float32)
    fmt = onnxrt.AdapterFormat()
    fmt.set_parameters({"lora_A": a, "lora_B": b})
    path = str(tmp_path / "two_params.onnx_adapter")
    fmt.export_adapter(path)
    x = np.ones((4, 4), np.float32)
    sess = onnxrt.InferenceSession(data)
    ref = ort.InferenceSession(data, providers=["CPUExecutionProvider"])
    base = sess.run(None, {"input_x": x}, onnxrt.RunOptions())[0]
    np.testing.assert_array_equal(base, x @ w)
    np.testing.assert_array_equal(base, ref.run(None, {"input_x": x}, ort.RunOptions())[0])
    adapter = onnxrt.LoraAdapter()
    adapter.Load(path)
    ro = onnxrt.RunOptions()
    ro.add_active_adapter(adapter)
    got = sess.run(None, {"input_x": x}, ro)[0]
    np.testing.assert_array_equal(got, x @ w + x @ a @ b)
    ref_adapter = ort.LoraAdapter()
    ref_adapter.Load(path)
    ref_ro = ort.RunOptions()
    ref_ro.add_active_adapter(ref_adapter)
    np.testing.assert_array_equal(got, ref.run(None, {"input_x": x}, ref_ro)[0])
    # the base model again without the adapter; a feed of the same name wins over the adapter
    np.testing.assert_array_equal(sess.run(None, {"input_x": x})[0], x @ w)
    zeros = np.zeros((2, 4), np.float32)
    np.testing.assert_array_equal(sess.run(None, {"input_x": x, "lora_B": zeros}, ro)[0], x @ w)
    with pytest.raises(onnxrt.InvalidOptionError, match="Load"):
        ro.add_active_adapter(onnxrt.LoraAdapter())
    with pytest.raises(onnxrt.InvalidOptionError):
        ro.add_active_adapter(path)


def test_run_refuses_a_bare_string_of_output_names():
    with pytest.raises(onnxrt.InvalidArgumentError, match="output_names") as info:
        _session(mul_1()).run("Y", {"X": X})
    assert isinstance(info.value, TypeError)
