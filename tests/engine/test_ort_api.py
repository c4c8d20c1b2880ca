"""onnxruntime's Python API on onnxrt: module functions, options, OrtValue, SparseTensor, IOBinding, runs; onnxruntime as the oracle."""

from __future__ import annotations

import gc
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

F, I64, STR = TensorProto.FLOAT, TensorProto.INT64, TensorProto.STRING
X = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)


def _model(nodes, inputs, outputs, inits=(), opset=18, **kw):
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info(*i) for i in inputs], [helper.make_tensor_value_info(*o) for o in outputs],
        [numpy_helper.from_array(v, k) for k, v in inits],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], **kw)


def _mul_model():
    """Y = X * W with W an initializer (onnxruntime's mul_1.onnx has X * X)."""
    return _model(
        [helper.make_node("Mul", ["X", "W"], ["Y"])], [("X", F, [3, 2])], [("Y", F, [3, 2])],
        [("W", np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32))],
    )


def _identity(elem, shape):
    return _model([helper.make_node("Identity", ["x"], ["y"])], [("x", elem, shape)], [("y", elem, None)])


def _both(model, **kw):
    data = model.SerializeToString()
    return onnxrt.InferenceSession(data, **kw), ort.InferenceSession(data, providers=["CPUExecutionProvider"])


# ------------------------------------------------------------------------------------------
# module functions and providers
# ------------------------------------------------------------------------------------------


def test_telemetry_calls_are_accepted():
    for module in (onnxrt, ort):
        assert module.disable_telemetry_events() is None
        assert module.enable_telemetry_events() is None


def test_module_functions():
    assert onnxrt.get_available_providers() == ["CPUExecutionProvider"]
    every = onnxrt.get_all_providers()
    assert every[-1] == "CPUExecutionProvider" and "CUDAExecutionProvider" in every
    assert set(ort.get_all_providers()) <= set(every)
    assert onnxrt.get_device() == ort.get_device() == "CPU"
    assert onnxrt.get_version_string() == onnxrt.__version__
    info = onnxrt.get_build_info()
    assert "Build Info" in info and onnxrt.__version__ in info and np.__version__ in info
    for name in ("get_all_providers", "get_available_providers", "get_build_info", "get_device", "get_version_string",
                 "OrtValue", "SparseTensor", "IOBinding", "ExecutionMode", "ModelMetadata", "OrtDevice", "OrtSparseFormat"):
        assert name in onnxrt.__all__


def test_unavailable_providers_warn_and_fall_back_to_cpu():
    data = _mul_model().SerializeToString()
    with pytest.warns(UserWarning, match="CUDAExecutionProvider"):
        sess = onnxrt.InferenceSession(data, providers=["CUDAExecutionProvider", "CPUExecutionProvider"])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    assert sess.get_provider_options() == {"CPUExecutionProvider": {}}
    (y,) = sess.run(None, {"X": X})
    np.testing.assert_array_equal(y, X * X)
    with pytest.warns(UserWarning, match="TensorrtExecutionProvider"):
        sess.set_providers([("TensorrtExecutionProvider", {"device_id": 0})])
    assert sess.get_providers() == ["CPUExecutionProvider"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        sess.set_providers(["CPUExecutionProvider"], [{}])
        sess.set_providers(None)
    assert sess.get_providers() == ["CPUExecutionProvider"]


def test_unknown_provider_in_set_providers_is_an_error_as_in_onnxruntime():
    sess, ref = _both(_mul_model())
    with pytest.raises(RuntimeError, match="Unknown Provider Type: InvalidProvider") as theirs:
        ref.set_providers(["InvalidProvider"])
    with pytest.raises(onnxrt.NotApplicableError, match="Unknown Provider Type: InvalidProvider") as ours:
        sess.set_providers(["InvalidProvider"])
    assert isinstance(ours.value, RuntimeError) and isinstance(theirs.value, RuntimeError)
    with pytest.raises(onnxrt.InvalidOptionError, match="providers must be a list"):
        sess.set_providers("CPUExecutionProvider")
    with pytest.raises(onnxrt.InvalidOptionError, match="one per provider"):
        sess.set_providers(["CPUExecutionProvider"], [{}, {}])


# ------------------------------------------------------------------------------------------
# SessionOptions and RunOptions
# ------------------------------------------------------------------------------------------

_SHARED_DEFAULTS = [
    "enable_profiling", "intra_op_num_threads", "inter_op_num_threads", "log_verbosity_level", "logid",
    "optimized_model_filepath", "enable_cpu_mem_arena", "enable_mem_pattern", "enable_mem_reuse",
    "use_deterministic_compute", "use_per_session_threads",
]


def test_session_options_defaults_follow_onnxruntime():
    ours, theirs = onnxrt.SessionOptions(), ort.SessionOptions()
    for name in _SHARED_DEFAULTS:
        assert getattr(ours, name) == getattr(theirs, name), name
    for name in ("graph_optimization_level", "execution_mode", "execution_order"):
        assert getattr(ours, name).name == getattr(theirs, name).name, name
    assert ours.strict is False and ours.max_tensor_bytes is None
    assert onnxrt.ExecutionMode.ORT_PARALLEL == int(ort.ExecutionMode.ORT_PARALLEL)
    ro, rt = onnxrt.RunOptions(), ort.RunOptions()
    for name in ("log_verbosity_level", "logid", "only_execute_path_to_fetches", "terminate"):
        assert getattr(ro, name) == getattr(rt, name), name


@pytest.mark.parametrize("cls", ["SessionOptions", "RunOptions"])
def test_unknown_option_is_an_attribute_error_as_in_onnxruntime(cls):
    theirs, ours = getattr(ort, cls)(), getattr(onnxrt, cls)()
    with pytest.raises(AttributeError):
        theirs.intra_op_num_thread = 2
    with pytest.raises(onnxrt.UnknownOptionError, match=rf"{cls} has no attribute 'intra_op_num_thread'") as e:
        ours.intra_op_num_thread = 2
    assert isinstance(e.value, AttributeError)
    with pytest.raises(AttributeError):
        ours.no_such_option  # noqa: B018
    assert not hasattr(ours, "intra_op_num_thread")


@pytest.mark.parametrize(
    "cls, name, value",
    [
        ("SessionOptions", "intra_op_num_threads", "2"),
        ("SessionOptions", "intra_op_num_threads", 2.0),
        ("SessionOptions", "inter_op_num_threads", None),
        ("SessionOptions", "graph_optimization_level", 1),
        ("SessionOptions", "execution_mode", 1),
        ("SessionOptions", "enable_profiling", "yes"),
        ("SessionOptions", "optimized_model_filepath", 3),
        ("SessionOptions", "logid", None),
        ("SessionOptions", "log_severity_level", "1"),
        ("RunOptions", "log_severity_level", "1"),
        ("RunOptions", "terminate", "no"),
        ("RunOptions", "logid", 5),
    ],
)
def test_wrong_option_type_is_a_type_error_as_in_onnxruntime(cls, name, value):
    theirs, ours = getattr(ort, cls)(), getattr(onnxrt, cls)()
    before = getattr(ours, name)
    with pytest.raises(TypeError):
        setattr(theirs, name, value)
    with pytest.raises(onnxrt.InvalidOptionError, match=rf"{cls}\.{name} expects") as e:
        setattr(ours, name, value)
    assert isinstance(e.value, TypeError)
    assert getattr(ours, name) == before


def test_option_values_converted_as_onnxruntime_converts_them():
    so, ref = onnxrt.SessionOptions(), ort.SessionOptions()
    for o in (so, ref):
        o.intra_op_num_threads = np.int64(3)
        o.enable_profiling = 1
        o.execution_mode = (onnxrt if o is so else ort).ExecutionMode.ORT_PARALLEL
    assert so.intra_op_num_threads == ref.intra_op_num_threads == 3 and type(so.intra_op_num_threads) is int
    assert so.enable_profiling is True and ref.enable_profiling is True
    so.enable_profiling = ref.enable_profiling = np.False_
    assert so.enable_profiling is False and ref.enable_profiling is False
    assert so.execution_mode == onnxrt.ExecutionMode.ORT_PARALLEL
    so.max_tensor_bytes = 1000
    assert so.max_tensor_bytes == 1000
    so.strict = True
    assert so.strict is True
    with pytest.raises(onnxrt.InvalidOptionError, match="max_tensor_bytes expects an int >= 0, got -1"):
        so.max_tensor_bytes = -1
    with pytest.raises(onnxrt.InvalidOptionError, match="intra_op_num_threads expects an int >= 0"):
        so.intra_op_num_threads = -1
    so.optimized_model_filepath = __import__("pathlib").Path("m.onnx")
    assert so.optimized_model_filepath == "m.onnx"


def test_config_entries():
    so, ro = onnxrt.SessionOptions(), onnxrt.RunOptions()
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    assert so.get_session_config_entry("session.intra_op.allow_spinning") == "0"
    ro.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
    assert ro.get_run_config_entry("memory.enable_memory_arena_shrinkage") == "cpu:0"
    with pytest.raises(RuntimeError, match="SessionOptions does not have configuration with key: INVALID_KEY"):
        ort.SessionOptions().get_session_config_entry("INVALID_KEY")
    with pytest.raises(onnxrt.ConfigEntryError, match="SessionOptions does not have configuration with key: INVALID_KEY") as e:
        so.get_session_config_entry("INVALID_KEY")
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(onnxrt.ConfigEntryError, match="RunOptions does not have configuration with key: k"):
        ro.get_run_config_entry("k")
    with pytest.raises(TypeError):
        ort.SessionOptions().add_session_config_entry("a", 1)
    with pytest.raises(onnxrt.InvalidOptionError, match=r"expects \(str, str\), got \(str, int\)"):
        so.add_session_config_entry("a", 1)


def test_session_options_pickle_with_everything_added():
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = 1
    so.add_session_config_entry("k", "v")
    so.add_free_dimension_override_by_name("N", 4)
    so.add_initializer("W", onnxrt.OrtValue.ortvalue_from_numpy(np.full((3, 2), 2, np.float32)))
    copy = pickle.loads(pickle.dumps(so))
    assert copy.intra_op_num_threads == 1 and copy.get_session_config_entry("k") == "v"
    with pytest.raises(onnxrt.UnknownOptionError):
        copy.foo = 1
    (y,) = onnxrt.InferenceSession(_mul_model(), copy).run(None, {"X": X})
    np.testing.assert_array_equal(y, X * 2)
    sess = pickle.loads(pickle.dumps(onnxrt.InferenceSession(_mul_model(), so)))
    np.testing.assert_array_equal(sess.run(None, {"X": X})[0], X * 2)


def test_register_custom_ops_library_is_not_applicable():
    with pytest.raises(onnxrt.NotApplicableError, match="onnxrt.register") as e:
        onnxrt.SessionOptions().register_custom_ops_library("./libcustom_op_library.so")
    assert isinstance(e.value, RuntimeError)


def test_execution_mode_parallel_gives_the_same_results():
    so = onnxrt.SessionOptions()
    assert so.execution_mode == onnxrt.ExecutionMode.ORT_SEQUENTIAL
    so.execution_mode = onnxrt.ExecutionMode.ORT_PARALLEL
    (y,) = onnxrt.InferenceSession(_mul_model(), so).run(None, {"X": X})
    np.testing.assert_array_equal(y, X * X)
    assert y.dtype == np.float32


# ------------------------------------------------------------------------------------------
# free dimension overrides
# ------------------------------------------------------------------------------------------


def _free_dims_model():
    x = helper.make_tensor_value_info("x", F, ["Dim1", "Dim2", 5])
    x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    x.type.tensor_type.shape.dim[1].denotation = "DATA_CHANNEL"
    y = helper.make_tensor_value_info("y", F, ["Dim1", "Dim2", 5])
    graph = helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize(
    "method, overrides",
    [
        ("add_free_dimension_override_by_name", [("Dim1", 4), ("Dim2", 6)]),
        ("add_free_dimension_override_by_denotation", [("DATA_BATCH", 3), ("DATA_CHANNEL", 5)]),
        ("add_free_dimension_override_by_name", [("Dim1", 4)]),
    ],
)
def test_free_dimension_overrides_fix_the_dimension(method, overrides):
    data = _free_dims_model().SerializeToString()
    so, ref_so = onnxrt.SessionOptions(), ort.SessionOptions()
    for name, value in overrides:
        getattr(so, method)(name, value)
        getattr(ref_so, method)(name, value)
    sess, ref = onnxrt.InferenceSession(data, so), ort.InferenceSession(data, ref_so, providers=["CPUExecutionProvider"])
    assert sess.get_inputs()[0].shape == ref.get_inputs()[0].shape
    assert sess.get_outputs()[0].shape == ref.get_outputs()[0].shape
    shape = [d if isinstance(d, int) else 2 for d in sess.get_inputs()[0].shape]
    x = -np.arange(np.prod(shape), dtype=np.float32).reshape(shape)
    (y,) = sess.run(None, {"x": x})
    np.testing.assert_array_equal(y, ref.run(None, {"x": x})[0])
    assert y.shape == tuple(shape) and y.dtype == np.float32
    wrong = list(shape)
    wrong[0] += 1
    with pytest.raises(onnxrt.InvalidFeedError, match=rf"Input 'x' expects dimension 0 to be {shape[0]}"):
        sess.run(None, {"x": np.zeros(wrong, np.float32)})


def test_free_dimension_override_errors():
    data = _free_dims_model().SerializeToString()
    so = onnxrt.SessionOptions()
    so.add_free_dimension_override_by_denotation("DATA_BATCH", 3)
    so.add_free_dimension_override_by_name("Dim1", 4)
    with pytest.raises(onnxrt.InvalidOptionError, match="Conflicting free dimension overrides"):
        onnxrt.InferenceSession(data, so)
    x = helper.make_tensor_value_info("x", F, [7, 5])
    x.type.tensor_type.shape.dim[0].denotation = "DATA_BATCH"
    fixed = helper.make_model(helper.make_graph([helper.make_node("Abs", ["x"], ["y"])], "g", [x], [helper.make_tensor_value_info("y", F, None)]))
    so = onnxrt.SessionOptions()
    so.add_free_dimension_override_by_denotation("DATA_BATCH", 3)
    with pytest.raises(onnxrt.InvalidOptionError, match="fixed dimension size 7 .* does not equal the specified override of 3"):
        onnxrt.InferenceSession(fixed, so)
    with pytest.raises(onnxrt.InvalidOptionError, match="expects an int >= 0"):
        so.add_free_dimension_override_by_name("Dim1", -2)
    with pytest.raises(onnxrt.InvalidOptionError, match="expects an int"):
        so.add_free_dimension_override_by_name("Dim1", "3")
    so = onnxrt.SessionOptions()
    so.add_free_dimension_override_by_name("Dim1", 2)
    so.add_free_dimension_override_by_name("Dim1", 6)  # the first stays, as in onnxruntime
    assert onnxrt.InferenceSession(data, so).get_inputs()[0].shape == [2, "Dim2", 5]


def test_free_dimension_override_leaves_the_callers_proto_alone():
    model = _free_dims_model()
    before = model.SerializeToString()
    so = onnxrt.SessionOptions()
    so.add_free_dimension_override_by_name("Dim1", 4)
    assert onnxrt.InferenceSession(model, so).get_inputs()[0].shape == [4, "Dim2", 5]
    assert model.SerializeToString() == before


# ------------------------------------------------------------------------------------------
# initializers from the options
# ------------------------------------------------------------------------------------------


def test_add_initializer_replaces_the_models_value():
    model = _mul_model()
    before = model.SerializeToString()
    w = np.array([[2.0, 1.0], [4.0, 3.0], [6.0, 5.0]], np.float32)
    so, ref_so = onnxrt.SessionOptions(), ort.SessionOptions()
    so.add_initializer("W", onnxrt.OrtValue.ortvalue_from_numpy(w))
    ref_value = ort.OrtValue.ortvalue_from_numpy(w)
    ref_so.add_initializer("W", ref_value)
    (y,) = onnxrt.InferenceSession(model, so).run(["Y"], {"X": X})
    (expected,) = ort.InferenceSession(before, ref_so, providers=["CPUExecutionProvider"]).run(["Y"], {"X": X})
    np.testing.assert_array_equal(y, expected)
    np.testing.assert_array_equal(y, X * w)
    assert y.dtype == np.float32 and model.SerializeToString() == before
    so2 = onnxrt.SessionOptions()
    so2.add_initializer("W", w * 3)  # a numpy array also works
    np.testing.assert_array_equal(onnxrt.InferenceSession(model, so2).run(None, {"X": X})[0], X * w * 3)


@pytest.mark.parametrize(
    "name, value, pattern",
    [
        ("Q", np.ones((3, 2), np.float32), "'Q' is not an initializer of the model"),
        ("W", np.ones((1, 2), np.float32), r"'W' has shape \[3, 2\], the value given \[1, 2\]"),
        ("W", np.ones((3, 2), np.float64), "'W' is float, the value given is float64"),
    ],
)
def test_add_initializer_refuses_what_cannot_replace(name, value, pattern):
    so = onnxrt.SessionOptions()
    so.add_initializer(name, onnxrt.OrtValue.ortvalue_from_numpy(value))
    with pytest.raises(onnxrt.InvalidOptionError, match=pattern):
        onnxrt.InferenceSession(_mul_model(), so)
    with pytest.raises(onnxrt.InvalidOptionError, match="must be an OrtValue or a numpy array"):
        so.add_initializer("W", [1.0, 2.0])


@pytest.fixture
def external_model(tmp_path):
    """A model whose initializer W lives in W.bin, which is then deleted."""
    model = _mul_model()
    onnx.external_data_helper.convert_model_to_external_data(model, all_tensors_to_one_file=True, location="W.bin", size_threshold=0)
    path = tmp_path / "m.onnx"
    onnx.save_model(model, str(path))
    os.remove(tmp_path / "W.bin")
    return path


def test_add_external_initializers(external_model):
    w = np.full((3, 2), 3, np.float32)
    for source in (str(external_model), external_model.read_bytes()):
        so, ref_so = onnxrt.SessionOptions(), ort.SessionOptions()
        so.add_external_initializers(["W"], [onnxrt.OrtValue.ortvalue_from_numpy(w)])
        keep = ort.OrtValue.ortvalue_from_numpy(w)
        ref_so.add_external_initializers(["W"], [keep])
        (y,) = onnxrt.InferenceSession(source, so).run(None, {"X": X})
        np.testing.assert_array_equal(y, ort.InferenceSession(source, ref_so, providers=["CPUExecutionProvider"]).run(None, {"X": X})[0])
        np.testing.assert_array_equal(y, X * 3)
    with pytest.raises(onnxrt.ModelLoadError, match="W.bin"):
        onnxrt.InferenceSession(str(external_model))
    so = onnxrt.SessionOptions()
    so.add_external_initializers(["W"], [np.ones((2, 2), np.float32)])
    with pytest.raises(onnxrt.InvalidOptionError, match=r"has shape \[3, 2\], the value given \[2, 2\]"):
        onnxrt.InferenceSession(str(external_model), so)
    so = onnxrt.SessionOptions()
    so.add_external_initializers(["W"], [w])
    with pytest.raises(onnxrt.InvalidOptionError, match="keeps its data in the model"):
        onnxrt.InferenceSession(_mul_model(), so)
    with pytest.raises(onnxrt.InvalidOptionError, match="got 1 names and 2 values"):
        so.add_external_initializers(["W"], [w, w])


def test_add_external_initializers_from_files_in_memory(external_model):
    buf = np.full((3, 2), 4, np.float32).tobytes()
    for data in (buf, bytearray(buf), np.frombuffer(buf, np.uint8)):
        so = onnxrt.SessionOptions()
        so.add_external_initializers_from_files_in_memory(["W.bin"], [data], [len(buf)])
        (y,) = onnxrt.InferenceSession(str(external_model), so).run(None, {"X": X})
        ref_so = ort.SessionOptions()
        ref_so.add_external_initializers_from_files_in_memory(["W.bin"], [buf], [len(buf)])
        np.testing.assert_array_equal(y, ort.InferenceSession(str(external_model), ref_so, providers=["CPUExecutionProvider"]).run(None, {"X": X})[0])
        np.testing.assert_array_equal(y, X * 4)
        assert y.dtype == np.float32
    so = onnxrt.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["Z.bin"], [buf], [len(buf)])
    with pytest.raises(onnxrt.InvalidOptionError, match="'W.bin', which is not among the files"):
        onnxrt.InferenceSession(str(external_model), so)
    so = onnxrt.SessionOptions()
    so.add_external_initializers_from_files_in_memory(["W.bin"], [buf], [8])
    with pytest.raises(onnxrt.InvalidOptionError, match="reads 24 bytes at offset 0 of file 'W.bin', which holds 8 bytes"):
        onnxrt.InferenceSession(str(external_model), so)
    with pytest.raises(onnxrt.InvalidOptionError, match="said to hold 100 bytes, its buffer has 24"):
        so.add_external_initializers_from_files_in_memory(["W.bin"], [buf], [100])


# ------------------------------------------------------------------------------------------
# feeds
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "elem, shape, feed",
    [
        (F, [3, 2], [[1, 2], [3, 4], [5, 6]]),
        (F, [3, 2], [[1.5, 2], [3, 4], [5, 6]]),
        (F, None, [1.0, 2.0]),
        (F, [2], []),
        (I64, [2], [1.7, -2.2]),
        (TensorProto.INT32, [2], [1, 2]),
        (TensorProto.BOOL, [2], [1, 0]),
        (TensorProto.FLOAT16, [2], [1.0, 2.5]),
        (TensorProto.DOUBLE, [2], [True, False]),
        (TensorProto.UINT8, [1, 2], [np.array([3, 4], np.uint8)]),
        (STR, [2, 2], [["a", "b"], ["c", "é"]]),
        (STR, [2], [1, 2.5]),
    ],
)
def test_lists_are_converted_as_onnxruntime_converts_them(elem, shape, feed):
    if feed == [] and shape == [2]:
        shape = [0]
    sess, ref = _both(_identity(elem, shape))
    (y,) = sess.run(None, {"x": feed})
    (expected,) = ref.run(None, {"x": feed})
    assert y.dtype == expected.dtype and y.shape == expected.shape
    np.testing.assert_array_equal(y, expected)


@pytest.mark.parametrize(
    "elem, feed, pattern",
    [
        (TensorProto.UINT8, [1, 300], "cannot be converted to a tensor of uint8"),
        (I64, [2**70, 1], "cannot be converted to a tensor of int64"),
        (F, [1.0, "a"], "cannot be converted to a tensor of float32"),
        (F, [[1.0], [2.0, 3.0]], "cannot be converted"),
        (STR, [["a"], ["b", "c"]], "not a regular nested list"),
    ],
)
def test_lists_that_cannot_convert_are_refused(elem, feed, pattern):
    sess, ref = _both(_identity(elem, None))
    if elem != STR:  # onnxruntime takes a ragged list of strings (its elements' str)
        with pytest.raises(RuntimeError):
            ref.run(None, {"x": feed})
    with pytest.raises(onnxrt.InvalidFeedError, match=rf"Input 'x' \(tensor\(\w+\)\): .*{pattern}"):
        sess.run(None, {"x": feed})


def test_feed_lists_are_not_modified():
    sess = onnxrt.InferenceSession(_identity(F, [2]))
    feed = {"x": [1, 2]}
    (y,) = sess.run(None, feed)
    assert feed == {"x": [1, 2]} and y.dtype == np.float32


def test_missing_input_is_a_value_error_as_in_onnxruntime():
    model = _model(
        [helper.make_node("And", ["input1:0", "input:0"], ["output:0"])],
        [("input1:0", TensorProto.BOOL, [2, 2]), ("input:0", TensorProto.BOOL, [2, 2])], [("output:0", TensorProto.BOOL, [2, 2])],
    )
    sess, ref = _both(model)
    a = np.array([[True, True], [False, False]])
    with pytest.raises(ValueError, match=r"Required inputs \(\['input1:0'\]\) are missing"):
        ref.run([], {"input:0": a})
    with pytest.raises(ValueError, match=r"Required inputs \(\['input1:0'\]\) are missing from input feed \(\['input:0'\]\)\. Missing input 'input1:0'") as e:
        sess.run([], {"input:0": a})
    assert isinstance(e.value, onnxrt.InvalidFeedError)
    assert issubclass(onnxrt.InvalidFeedError, onnxrt.OnnxRuntimeError)


@pytest.mark.parametrize("feed", [np.array([3.0], np.float32), np.array([[3.0]], np.float32), np.array(3.0, np.float32)])
def test_scalar_input_takes_one_element(feed):
    model = _model([helper.make_node("Add", ["s", "v"], ["y"])], [("s", F, []), ("v", F, [3])], [("y", F, [3])])
    sess, ref = _both(model)
    v = np.array([1.0, 2.0, 3.0], np.float32)
    (y,) = sess.run(None, {"s": feed, "v": v})
    (expected,) = ref.run(None, {"s": feed, "v": v})
    np.testing.assert_array_equal(y, [4.0, 5.0, 6.0])
    assert y.dtype == np.float32 and y.shape == (3,)
    # onnxruntime passes [1, 1] through (its Add broadcasts to [1, 3]); onnxrt reads the
    # declared scalar, so the output has the declared shape [3]
    np.testing.assert_array_equal(y, expected.reshape(3))
    assert feed.flags.writeable and feed.shape in ((1,), (1, 1), ())


def test_scalar_input_passes_through_as_the_declared_scalar():
    sess = onnxrt.InferenceSession(_identity(F, []))
    (y,) = sess.run(None, {"x": np.array([7.0], np.float32)})
    assert y.shape == () and y.dtype == np.float32 and float(y) == 7.0
    with pytest.raises(onnxrt.InvalidFeedError, match=r"Input 'x' expects rank 0"):
        sess.run(None, {"x": np.array([1.0, 2.0], np.float32)})


@pytest.mark.parametrize(
    "x",
    [
        np.array(["this", "is", "identity", "test"]).reshape(2, 2),
        np.array([b"this", b"is", b"identity", b"test"]).reshape(2, 2),
        np.array(["this", "is", "identity", "test"], object).reshape(2, 2),
        np.array([b"must", b"have", b"same", b"size"], dtype=np.void).reshape(2, 2),
    ],
)
def test_string_inputs_of_every_numpy_kind(x):
    sess, ref = _both(_identity(STR, [2, 2]))
    (y,) = sess.run(None, {"x": x})
    assert y.dtype == object and y.shape == (2, 2)
    if x.dtype.kind != "S":  # onnxruntime misreads fixed-width bytes arrays ("identitytest")
        assert y.tolist() == ref.run(None, {"x": x})[0].tolist()
    assert y.tolist() == [[s.decode() if isinstance(s, bytes) else str(s) for s in row] for row in x.tolist()]
    assert all(isinstance(s, str) for s in y.reshape(-1))


def test_ortvalue_feeds_and_run_with_ort_values():
    sess, ref = _both(_mul_model())
    v = onnxrt.OrtValue.ortvalue_from_numpy(X)
    (y,) = sess.run(["Y"], {"X": v})
    np.testing.assert_array_equal(y, ref.run(["Y"], {"X": ort.OrtValue.ortvalue_from_numpy(X)})[0])
    out = sess.run_with_ort_values(["Y"], {"X": v})
    assert isinstance(out, list) and isinstance(out[0], onnxrt.OrtValue)
    np.testing.assert_array_equal(out[0].numpy(), X * X)
    assert out[0].data_type() == "tensor(float)" and out[0].shape() == [3, 2]
    np.testing.assert_array_equal(v.numpy(), X)  # still valid after the run
    with pytest.raises(onnxrt.InvalidFeedError, match="input 'X' must be an OrtValue, got ndarray"):
        sess.run_with_ort_values(["Y"], {"X": X})


def test_run_with_ort_values_sequence_output():
    model = _model(
        [helper.make_node("SequenceConstruct", ["a", "b"], ["s"])],
        [("a", I64, [2, 3]), ("b", I64, [2, 3])], [],
    )
    model.graph.output.append(helper.make_tensor_sequence_value_info("s", I64, None))
    sess = onnxrt.InferenceSession(model)
    a, b = np.arange(6).reshape(2, 3), -np.arange(6).reshape(2, 3)
    (seq,) = sess.run_with_ort_values(None, {"a": onnxrt.OrtValue.ortvalue_from_numpy(a), "b": onnxrt.OrtValue.ortvalue_from_numpy(b)})
    assert seq.is_tensor_sequence() and not seq.is_tensor() and seq.has_value()
    assert seq.data_type() == sess.get_outputs()[0].type == "seq(tensor(int64))"
    with pytest.raises(onnxrt.InvalidArgumentError, match="not a tensor"):
        seq.numpy()
    (ref,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"a": a, "b": b})
    (ours,) = sess.run(None, {"a": a, "b": b})
    assert len(ours) == len(ref) == 2
    for got, want in zip(ours, ref):
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype == np.int64


def test_run_options_terminate():
    sess = onnxrt.InferenceSession(_mul_model())
    ro = onnxrt.RunOptions()
    (y,) = sess.run(None, {"X": X}, ro)
    np.testing.assert_array_equal(y, X * X)
    ro.terminate = True
    with pytest.raises(onnxrt.RunTerminatedError, match="terminate flag") as e:
        sess.run(None, {"X": X}, ro)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(onnxrt.InvalidOptionError, match="run_options must be an onnxrt.RunOptions"):
        sess.run(None, {"X": X}, {"terminate": False})


def test_run_options_terminate_set_during_a_run_stops_at_the_next_node():
    ro = onnxrt.RunOptions()
    calls = []

    def flag(x):
        calls.append(1)
        if not x.any():  # zeros fed: ask the run to stop
            ro.terminate = True
        return x

    onnxrt.register_function("SetTerminate", flag, domain="test.ort_api", versions=(1,))
    graph = helper.make_graph(
        [helper.make_node("SetTerminate", ["x"], ["a"], domain="test.ort_api"), helper.make_node("SetTerminate", ["a"], ["y"], domain="test.ort_api")],
        "g", [helper.make_tensor_value_info("x", F, [2])], [helper.make_tensor_value_info("y", F, [2])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18), helper.make_opsetid("test.ort_api", 1)])
    so = onnxrt.SessionOptions()
    so.graph_optimization_level = onnxrt.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = onnxrt.InferenceSession(model, so)
    with pytest.raises(onnxrt.RunTerminatedError):
        sess.run(None, {"x": np.zeros(2, np.float32)}, ro)
    assert len(calls) == 1
    ro.terminate = False
    (y,) = sess.run(None, {"x": np.ones(2, np.float32)}, ro)
    np.testing.assert_array_equal(y, [1.0, 1.0])
    assert len(calls) == 3


# ------------------------------------------------------------------------------------------
# run_async
# ------------------------------------------------------------------------------------------


def test_run_async_calls_back_on_another_thread():
    sess = onnxrt.InferenceSession(_mul_model())
    done = threading.Event()
    got = {}

    def callback(res, data, err):
        got.update(res=res, data=data, err=err, thread=threading.get_ident())
        done.set()

    sess.run_async(["Y"], {"X": X}, callback, {"id": 123456})
    assert done.wait(10)
    assert got["err"] == "" and got["data"] == {"id": 123456} and len(got["res"]) == 1
    np.testing.assert_array_equal(got["res"][0], X * X)
    assert got["res"][0].dtype == np.float32 and got["thread"] != threading.get_ident()


def test_run_async_reports_run_errors_to_the_callback():
    sess, ref = _both(_mul_model())
    results = []
    for s in (sess, ref):
        done = threading.Event()
        s.run_async(["Y"], {"X": X.astype(np.float64)}, lambda res, data, err: (results.append((res, data, err)), done.set()), "ud")
        assert done.wait(10)
    (ours, theirs) = results
    assert ours[0] == theirs[0] == [] and ours[1] == theirs[1] == "ud"
    assert "float64" in ours[2] and "double" in theirs[2]


def test_run_async_checks_missing_inputs_before_starting():
    sess, ref = _both(_mul_model())
    for s in (sess, ref):
        with pytest.raises(ValueError, match=r"Required inputs \(\['X'\]\) are missing from input feed \(\['Q'\]\)"):
            s.run_async(["Y"], {"Q": X}, lambda *a: None, None)
    with pytest.raises(onnxrt.InvalidArgumentError, match="callback must be callable"):
        sess.run_async(["Y"], {"X": X}, None, None)


# ------------------------------------------------------------------------------------------
# ModelMetadata
# ------------------------------------------------------------------------------------------


def test_get_modelmeta_matches_onnxruntime():
    model = _mul_model()
    model.producer_name, model.domain, model.doc_string, model.model_version = "prod", "dom", "desc", 3
    model.graph.doc_string = "graph desc"
    helper.set_model_props(model, {"author": "me", "k": "v"})
    sess, ref = _both(model)
    ours, theirs = sess.get_modelmeta(), ref.get_modelmeta()
    assert isinstance(ours, onnxrt.ModelMetadata)
    for name in ("producer_name", "graph_name", "domain", "description", "graph_description", "version", "custom_metadata_map"):
        assert getattr(ours, name) == getattr(theirs, name), name
    assert ours.version == 3 and ours.custom_metadata_map == {"author": "me", "k": "v"}


# ------------------------------------------------------------------------------------------
# optimized_model_filepath
# ------------------------------------------------------------------------------------------


def _foldable_model():
    """Y = X + (A * B): the product of two constants folds into one initializer."""
    return _model(
        [helper.make_node("Mul", ["A", "B"], ["AB"]), helper.make_node("Add", ["X", "AB"], ["Y"])],
        [("X", F, [3, 2])], [("Y", F, [3, 2])],
        [("A", np.arange(6, dtype=np.float32).reshape(3, 2)), ("B", np.full((3, 2), 2, np.float32))],
        ir_version=9,
    )


def test_optimized_model_filepath_writes_the_optimised_graph(tmp_path):
    path = tmp_path / "opt.onnx"
    so = onnxrt.SessionOptions()
    so.optimized_model_filepath = str(path)
    (y,) = onnxrt.InferenceSession(_foldable_model(), so).run(None, {"X": X})
    written = onnx.load(str(path))
    assert [n.op_type for n in written.graph.node] == ["Add"]
    assert len(written.graph.initializer) == 1
    np.testing.assert_array_equal(numpy_helper.to_array(written.graph.initializer[0]), np.arange(6).reshape(3, 2) * 2)
    (again,) = onnxrt.InferenceSession(str(path)).run(None, {"X": X})
    (theirs,) = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"X": X})
    np.testing.assert_array_equal(again, y)
    np.testing.assert_array_equal(theirs, y)
    np.testing.assert_array_equal(y, X + np.arange(6, dtype=np.float32).reshape(3, 2) * 2)


def test_optimized_model_keeps_fused_operators_loadable(tmp_path):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
    model = _model(
        [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]), helper.make_node("Relu", ["c"], ["y"])],
        [("x", F, [1, 2, 5, 5])], [("y", F, [1, 4, 5, 5])], [("w", w)], ir_version=9,
    )
    path = tmp_path / "fused.onnx"
    so = onnxrt.SessionOptions()
    so.optimized_model_filepath = str(path)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    (y,) = onnxrt.InferenceSession(model, so).run(None, {"x": x})
    written = onnx.load(str(path))
    assert len(written.graph.node) == 1 and written.graph.node[0].domain == "onnxrt"
    assert "onnxrt" in {o.domain for o in written.opset_import}
    (again,) = onnxrt.InferenceSession(str(path)).run(None, {"x": x})
    np.testing.assert_allclose(again, y, rtol=1e-6, atol=1e-6)
    (expected,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_optimized_model_with_external_initializers(tmp_path):
    path = tmp_path / "sub" / "opt.onnx"
    so = onnxrt.SessionOptions()
    so.optimized_model_filepath = path  # a PathLike also works
    so.add_session_config_entry("session.optimized_model_external_initializers_file_name", "weights.bin")
    so.add_session_config_entry("session.optimized_model_external_initializers_min_size_in_bytes", "10")
    onnxrt.InferenceSession(_foldable_model(), so)
    assert (tmp_path / "sub" / "weights.bin").stat().st_size == 24
    proto = onnx.load(str(path), load_external_data=False)
    assert proto.graph.initializer[0].data_location == TensorProto.EXTERNAL
    (y,) = onnxrt.InferenceSession(str(path)).run(None, {"X": X})
    np.testing.assert_array_equal(y, X + np.arange(6, dtype=np.float32).reshape(3, 2) * 2)


# ------------------------------------------------------------------------------------------
# OrtValue
# ------------------------------------------------------------------------------------------


def test_ortvalue_from_numpy_matches_onnxruntime():
    ours, theirs = onnxrt.OrtValue.ortvalue_from_numpy(X), ort.OrtValue.ortvalue_from_numpy(X)
    for name in ("device_name", "shape", "data_type", "element_type", "is_tensor", "is_sparse_tensor", "is_tensor_sequence",
                 "has_value", "tensor_size_in_bytes", "data_ptr"):
        assert getattr(ours, name)() == getattr(theirs, name)(), name
    assert ours.data_ptr() == X.ctypes.data and np.shares_memory(ours.numpy(), X)
    assert ours.numpy().dtype == np.float32
    for dtype in (np.float16, np.bool_, np.int8, np.uint64, np.float64):
        a = np.zeros(3, dtype)
        assert onnxrt.OrtValue.ortvalue_from_numpy(a).element_type() == ort.OrtValue.ortvalue_from_numpy(a).element_type()
        assert onnxrt.OrtValue.ortvalue_from_numpy(a).data_type() == ort.OrtValue.ortvalue_from_numpy(a).data_type()


def test_ortvalue_copies_non_contiguous_arrays():
    nc = np.arange(12, dtype=np.float32).reshape(3, 4)[:, ::2]
    v = onnxrt.OrtValue.ortvalue_from_numpy(nc)
    np.testing.assert_array_equal(v.numpy(), nc)
    assert v.data_ptr() != nc.ctypes.data and v.numpy().flags.c_contiguous


def test_ortvalue_constructors():
    bits = np.array([0x3F80, 0x4000], np.uint16)  # bfloat16 1.0 and 2.0
    v = onnxrt.OrtValue.ortvalue_from_numpy_with_onnx_type(bits, TensorProto.BFLOAT16)
    assert v.element_type() == TensorProto.BFLOAT16 and v.data_type() == "tensor(bfloat16)"
    np.testing.assert_array_equal(v.numpy().astype(np.float32), [1.0, 2.0])
    w = onnxrt.OrtValue.ortvalue_from_numpy_with_onnx_type(X, TensorProto.FLOAT)
    assert w.shape() == [3, 2] and w.element_type() == 1
    with pytest.raises(onnxrt.InvalidArgumentError, match="item sizes 4 and 2"):
        onnxrt.OrtValue.ortvalue_from_numpy_with_onnx_type(X, TensorProto.FLOAT16)
    for element_type in (np.int32, TensorProto.INT64):
        z, r = onnxrt.OrtValue.ortvalue_from_shape_and_type([2, 3], element_type), ort.OrtValue.ortvalue_from_shape_and_type([2, 3], element_type)
        assert z.shape() == r.shape() == [2, 3] and z.data_type() == r.data_type()
        assert z.numpy().dtype == r.numpy().dtype and not z.numpy().any()
    s = onnxrt.OrtValue.ortvalue_from_numpy(np.array(["a", "bc"]))
    assert s.data_type() == "tensor(string)" and s.numpy().tolist() == ["a", "bc"]
    with pytest.raises(onnxrt.NotApplicableError, match="no raw data pointer"):
        s.data_ptr()
    with pytest.raises(onnxrt.InvalidArgumentError, match="expects a numpy array, got list"):
        onnxrt.OrtValue.ortvalue_from_numpy([1.0, 2.0])


def test_ortvalue_on_another_device_is_not_applicable():
    with pytest.raises(RuntimeError):
        ort.OrtValue.ortvalue_from_numpy(X, "cuda", 0)
    with pytest.raises(onnxrt.NotApplicableError, match="device 'cuda'") as e:
        onnxrt.OrtValue.ortvalue_from_numpy(X, "cuda", 0)
    assert isinstance(e.value, RuntimeError)
    with pytest.raises(onnxrt.NotApplicableError):
        onnxrt.OrtValue.ortvalue_from_shape_and_type([2], np.float32, "cuda", 0)


def test_ortvalue_update_inplace():
    a = np.zeros(3, np.float32)
    v = onnxrt.OrtValue.ortvalue_from_numpy(a)
    v.update_inplace(np.array([1.0, 2.0, 3.0], np.float32))
    np.testing.assert_array_equal(a, [1.0, 2.0, 3.0])
    v.update_inplace(onnxrt.OrtValue.ortvalue_from_numpy(np.full(3, 5, np.float32)))
    np.testing.assert_array_equal(a, [5.0, 5.0, 5.0])
    with pytest.raises(onnxrt.InvalidArgumentError, match="4 elements, the OrtValue 3"):
        v.update_inplace(np.ones(4, np.float32))
    with pytest.raises(onnxrt.InvalidArgumentError, match="float64, the OrtValue float32"):
        v.update_inplace(np.ones(3, np.float64))
    with pytest.raises(onnxrt.InvalidArgumentError, match="numpy.ndarray or an OrtValue"):
        v.update_inplace([1, 2, 3])
    np.testing.assert_array_equal(a, [5.0, 5.0, 5.0])


def test_ortvalue_array_protocol():
    v = onnxrt.OrtValue.ortvalue_from_numpy(X)
    same = np.asarray(v)
    assert same.ctypes.data == v.data_ptr() and same.dtype == np.float32
    assert np.asarray(v, dtype=np.float32).ctypes.data == v.data_ptr()
    f64 = np.asarray(v, dtype=np.float64)
    assert f64.dtype == np.float64 and np.array_equal(f64, X)
    copied = np.array(v)
    assert copied.ctypes.data != v.data_ptr() and np.array_equal(copied, X)


def test_ortvalue_dlpack():
    v = onnxrt.OrtValue.ortvalue_from_numpy(X)
    assert v.__dlpack_device__() == ort.OrtValue.ortvalue_from_numpy(X).__dlpack_device__() == (1, 0)
    for source in (v.to_dlpack(), v.__dlpack__(), v, X):
        w = onnxrt.OrtValue.from_dlpack(source)
        assert w.data_ptr() == X.ctypes.data and w.shape() == [3, 2]
        np.testing.assert_array_equal(w.numpy(), X)
    via_numpy = np.from_dlpack(v)
    assert via_numpy.ctypes.data == X.ctypes.data
    b = onnxrt.OrtValue.from_dlpack(onnxrt.OrtValue.ortvalue_from_numpy(np.array([True, False])))
    assert b.numpy().dtype == np.bool_ and b.numpy().tolist() == [True, False]
    u = onnxrt.OrtValue.from_dlpack(np.array([1, 0, 255], np.uint8).__dlpack__())
    assert u.numpy().dtype == np.uint8 and u.numpy().tolist() == [1, 0, 255]
    asbool = onnxrt.OrtValue.from_dlpack(np.array([1, 0], np.uint8).__dlpack__(), is_bool_tensor=True)
    assert asbool.numpy().dtype == np.bool_ and asbool.numpy().tolist() == [True, False]
    for shape in [(1, 8, 0, 128), (0,), (4, 0)]:
        z = onnxrt.OrtValue.from_dlpack(np.zeros(shape, np.float32).__dlpack__())
        assert z.shape() == list(shape)


# ------------------------------------------------------------------------------------------
# SparseTensor
# ------------------------------------------------------------------------------------------


def test_sparse_coo_matches_onnxruntime():
    shape, values, indices = [9, 9], np.array([1.0, 2.0, 3.0], np.float32), np.array([3, 5, 15], np.int64)
    ours = onnxrt.SparseTensor.sparse_coo_from_numpy(shape, values, indices, onnxrt.OrtDevice.make("cpu", 0))
    theirs = ort.SparseTensor.sparse_coo_from_numpy(shape, values, indices, ort.OrtDevice.make("cpu", 0))
    assert int(ours.format()) == int(theirs.format()) and ours.format() == onnxrt.OrtSparseFormat.ORT_SPARSE_COO
    assert ours.dense_shape() == theirs.dense_shape() == shape
    assert ours.data_type() == theirs.data_type() == "sparse_tensor(float)"
    assert ours.device_name() == "cpu"
    got_values, got_indices = ours.values(), ours.as_coo_view().indices()
    gc.collect()
    assert not got_values.flags.writeable and not got_indices.flags.writeable
    np.testing.assert_array_equal(got_values, values)
    np.testing.assert_array_equal(got_indices, indices)
    assert np.shares_memory(got_values, values)
    wrapped = onnxrt.OrtValue.ort_value_from_sparse_tensor(ours)
    assert wrapped.is_sparse_tensor() and not wrapped.is_tensor() and wrapped.data_type() == "sparse_tensor(float)"
    assert wrapped.shape() == [9, 9] and wrapped.as_sparse_tensor() is ours
    with pytest.raises(onnxrt.InvalidArgumentError, match="not a tensor"):
        wrapped.numpy()
    coords = onnxrt.SparseTensor.sparse_coo_from_numpy(shape, values, np.array([[0, 3], [0, 5], [1, 6]], np.int64), None)
    assert coords.as_coo_view().indices().shape == (3, 2)
    strings = onnxrt.SparseTensor.sparse_coo_from_numpy(shape, np.array(["xyz", "yxz", "zyx"]), indices, None)
    assert strings.data_type() == "sparse_tensor(string)" and strings.values().tolist() == ["xyz", "yxz", "zyx"]


def test_sparse_csr_matches_onnxruntime():
    shape, values = [9, 9], np.array([1.0, 2.0, 3.0], np.float32)
    inner, outer = np.array([1, 1, 1], np.int64), np.array([0, 1, 2, 3, 3, 3, 3, 3, 3, 3], np.int64)
    ours = onnxrt.SparseTensor.sparse_csr_from_numpy(shape, values, inner, outer, onnxrt.OrtDevice.make("cpu", 0))
    theirs = ort.SparseTensor.sparse_csr_from_numpy(shape, values, inner, outer, ort.OrtDevice.make("cpu", 0))
    assert int(ours.format()) == int(theirs.format()) and ours.format() == onnxrt.OrtSparseFormat.ORT_SPARSE_CSRC
    assert ours.dense_shape() == theirs.dense_shape() and ours.data_type() == theirs.data_type()
    view = ours.as_csrc_view()
    assert not view.inner().flags.writeable and not view.outer().flags.writeable
    np.testing.assert_array_equal(view.inner(), inner)
    np.testing.assert_array_equal(view.outer(), outer)
    with pytest.raises(onnxrt.InvalidArgumentError, match="not COO"):
        ours.as_coo_view()
    with pytest.raises(onnxrt.InvalidArgumentError, match="not block sparse"):
        ours.as_blocksparse_view()


@pytest.mark.parametrize(
    "make, pattern",
    [
        (lambda S: S.sparse_coo_from_numpy([9, 9], np.ones(3, np.float32), np.array([3, 5], np.int64), None), r"coo_indices must have shape \[3\]"),
        (lambda S: S.sparse_coo_from_numpy([9, 9], np.ones(3, np.float32), np.array([3, 5, 81], np.int64), None), r"linear indices must lie in \[0, 81\)"),
        (lambda S: S.sparse_coo_from_numpy([9, 9], np.ones(3, np.float32), np.array([3.0, 5.0, 1.0]), None), "array of integers"),
        (lambda S: S.sparse_coo_from_numpy([9, 9], np.ones((3, 1), np.float32), np.array([3, 5, 1]), None), "values must be a 1-D"),
        (lambda S: S.sparse_csr_from_numpy([9, 9], np.ones(3, np.float32), np.array([1, 1]), np.arange(10), None), "inner_indices must have 3"),
        (lambda S: S.sparse_csr_from_numpy([9, 9], np.ones(3, np.float32), np.array([1, 1, 1]), np.array([0, 1, 2, 3]), None), "outer_indices must have 10"),
        (lambda S: S.sparse_csr_from_numpy([9, 9], np.ones(3, np.float32), np.array([1, 1, 20]), np.array([0, 1, 2, 3, 3, 3, 3, 3, 3, 3]), None), r"inner_indices must lie in \[0, 9\)"),
        (lambda S: S.sparse_csr_from_numpy([9, 9, 9], np.ones(3, np.float32), np.array([1, 1, 1]), np.arange(10), None), "CSR holds 2-D"),
        (lambda S: S.sparse_csr_from_numpy([9, 9], np.ones(3, np.float32), np.array([1, 1, 1]), np.array([0, 2, 1, 3, 3, 3, 3, 3, 3, 3]), None), "never decrease"),
    ],
)
def test_sparse_tensor_checks(make, pattern):
    with pytest.raises(onnxrt.InvalidArgumentError, match=pattern):
        make(onnxrt.SparseTensor)


def test_sparse_tensor_devices():
    st = onnxrt.SparseTensor.sparse_coo_from_numpy([2], np.ones(1, np.float32), np.array([1]), None)
    cuda = onnxrt.OrtDevice.make("cuda", 0)
    assert cuda.device_vendor_id() == onnxrt.OrtDeviceVendorId.NVIDIA == 0x10DE and cuda.device_type() == 1
    for name in ("cpu", "cuda", "dml", "cann", "gpu", "npu"):
        ours, theirs = onnxrt.OrtDevice.make(name, 0), ort.OrtDevice.make(name, 0)
        assert (ours.device_type(), ours.device_vendor_id()) == (theirs.device_type(), theirs.device_vendor_id()), name
    assert {m.name: int(m) for m in onnxrt.OrtDeviceVendorId} == {m.name: int(m) for m in ort.OrtDeviceVendorId}
    cpu = onnxrt.OrtDevice.make("cpu", 0)
    assert (cpu.device_type(), cpu.device_id(), cpu.device_mem_type(), cpu.device_vendor_id()) == (0, 0, 0, 0)
    with pytest.raises(onnxrt.NotApplicableError):
        st.to_cuda(cuda)
    with pytest.raises(onnxrt.NotApplicableError):
        onnxrt.SparseTensor.sparse_coo_from_numpy([2], np.ones(1, np.float32), np.array([1]), cuda)
    with pytest.raises(onnxrt.InvalidArgumentError, match="Unsupported device type"):
        onnxrt.OrtDevice.make("tpu", 0)
    sess = onnxrt.InferenceSession(_identity(F, [2]))
    with pytest.raises(onnxrt.InvalidFeedError, match="can only feed an input declared as a sparse tensor"):
        sess.run(None, {"x": onnxrt.OrtValue.ort_value_from_sparse_tensor(st)})


# ------------------------------------------------------------------------------------------
# IOBinding
# ------------------------------------------------------------------------------------------


def _two_outputs():
    return _model(
        [helper.make_node("Mul", ["x", "x"], ["y"]), helper.make_node("Neg", ["x"], ["z"])],
        [("x", F, [3, 2])], [("y", F, [3, 2]), ("z", F, [3, 2])],
    )


def test_iobinding_matches_onnxruntime():
    sess, ref = _both(_two_outputs())
    x = X.copy()
    results = []
    for s in (sess, ref):
        b = s.io_binding()
        b.bind_cpu_input("x", x)
        b.bind_output("z")
        b.bind_output("y")
        s.run_with_iobinding(b)
        results.append((b.copy_outputs_to_cpu(), [v.numpy() for v in b.get_outputs()]))
    (ours_cpu, ours_values), (theirs_cpu, theirs_values) = results
    for a, b_ in zip(ours_cpu + ours_values, theirs_cpu + theirs_values):
        np.testing.assert_array_equal(a, b_)
        assert a.dtype == b_.dtype == np.float32
    np.testing.assert_array_equal(ours_cpu[0], -X)
    np.testing.assert_array_equal(ours_cpu[1], X * X)


def test_iobinding_reads_bound_inputs_at_each_run_and_writes_bound_outputs():
    sess = onnxrt.InferenceSession(_two_outputs())
    x = X.copy()
    out = onnxrt.OrtValue.ortvalue_from_numpy(np.zeros((3, 2), np.float32))
    b = sess.io_binding()
    b.bind_ortvalue_input("x", onnxrt.OrtValue.ortvalue_from_numpy(x))
    b.bind_ortvalue_output("y", out)
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(out.numpy(), X * X)
    assert b.get_outputs()[0].data_ptr() == out.data_ptr()
    x *= 2  # the bound memory changes: the next run reads it
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(out.numpy(), 4 * X * X)
    b.bind_output("y")  # rebinding a name replaces it
    sess.run_with_iobinding(b)
    assert len(b.get_outputs()) == 1 and b.get_outputs()[0].data_ptr() != out.data_ptr()


def test_iobinding_raw_pointers():
    sess = onnxrt.InferenceSession(_two_outputs())
    x = X.copy()
    y = np.zeros((3, 2), np.float32)
    b = sess.io_binding()
    b.bind_input("x", "cpu", 0, np.float32, [3, 2], x.ctypes.data)
    b.bind_output("y", "cpu", 0, TensorProto.FLOAT, [3, 2], y.ctypes.data)
    sess.run_with_iobinding(b)
    np.testing.assert_array_equal(y, X * X)
    ref = ort.InferenceSession(_two_outputs().SerializeToString(), providers=["CPUExecutionProvider"])
    rb = ref.io_binding()
    rb.bind_input("x", "cpu", 0, np.float32, [3, 2], x.ctypes.data)
    rb.bind_output("y")
    ref.run_with_iobinding(rb)
    np.testing.assert_array_equal(rb.copy_outputs_to_cpu()[0], y)
    with pytest.raises(onnxrt.InvalidArgumentError, match="`element_type` and `shape` are to be provided"):
        b.bind_output("y", "cpu", 0, None, None, y.ctypes.data)


def test_iobinding_errors():
    sess = onnxrt.InferenceSession(_two_outputs())
    b = sess.io_binding()
    with pytest.raises(onnxrt.InvalidArgumentError, match=r"'nope' is not an input of the model; its inputs are \['x'\]"):
        b.bind_cpu_input("nope", X)
    b.bind_cpu_input("x", X)
    with pytest.raises(onnxrt.InvalidArgumentError, match="at least one output should be bound"):
        sess.run_with_iobinding(b)
    b.bind_ortvalue_output("y", onnxrt.OrtValue.ortvalue_from_numpy(np.zeros((2, 2), np.float32)))
    with pytest.raises(onnxrt.InvalidArgumentError, match=r"output 'y' is float32\[3, 2\], the memory bound to it holds float32\[2, 2\]"):
        sess.run_with_iobinding(b)
    b.clear_binding_outputs()
    assert b.get_outputs() == []
    readonly = onnxrt.OrtValue.from_dlpack(np.zeros((3, 2), np.float32).__dlpack__())
    with pytest.raises(onnxrt.InvalidArgumentError, match="bound to 'y' is read-only"):
        b.bind_ortvalue_output("y", readonly)
    with pytest.raises(onnxrt.NotApplicableError, match="device 'cuda'"):
        b.bind_output("y", "cuda", 0)
    with pytest.raises(onnxrt.NotApplicableError):
        b.bind_input("x", "cuda", 0, np.float32, [3, 2], X.ctypes.data)
    other = onnxrt.InferenceSession(_two_outputs()).io_binding()
    with pytest.raises(onnxrt.InvalidArgumentError, match="session that created it"):
        sess.run_with_iobinding(other)
    b.clear_binding_inputs()
    b.bind_output("y")
    with pytest.raises(onnxrt.InvalidFeedError, match="Missing input 'x'"):
        sess.run_with_iobinding(b)
    b.synchronize_inputs()
    b.synchronize_outputs()
