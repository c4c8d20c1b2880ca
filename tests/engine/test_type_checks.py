"""Node type rules hold on every run, fused or not: inputs declaring no element type, run-time type changes, fusions and folds."""

from __future__ import annotations

import types
import warnings

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto as T
from onnx import helper as h
from onnx import numpy_helper as nh

import onnxrt
from onnxrt import ModelWarning
from onnxrt.errors import GraphError, InvalidTypeError
from onnxrt.typecheck import check_input_types

ALL = None  # default options: every optimisation
NO_OPT = types.SimpleNamespace(graph_optimization_level=0)
STRICT = types.SimpleNamespace(strict=True)
LEVELS = pytest.mark.parametrize("options", [ALL, NO_OPT], ids=["optimized", "unoptimized"])


def _model(nodes, inputs, outputs, inits=(), opset=17) -> onnx.ModelProto:
    graph = h.make_graph(nodes, "g", inputs, outputs, list(inits))
    model = h.make_model(graph, opset_imports=[h.make_opsetid("", opset)])
    model.ir_version = 8
    return model


def _vi(name, elem=T.FLOAT, shape=None):
    return h.make_tensor_value_info(name, elem, shape)


def _engine(model, options=ALL):
    """The engine, with the load-time warning an untyped input gives (checked elsewhere) muted."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        return onnxrt.OnnxInference(model, options)


def _ops(engine):
    return [st.op_type for st in engine.plan.steps]


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.log_severity_level = 3
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _retyped(model, name, elem):
    """A copy of ``model`` whose input ``name`` declares ``elem``: what onnxruntime runs."""
    copy = onnx.ModelProto()
    copy.CopyFrom(model)
    for vi in copy.graph.input:
        if vi.name == name:
            vi.type.tensor_type.elem_type = elem
    return copy


# --- Conv + Add of an input with no declared element type -------------------------------------


def _conv_add(activation=None):
    rng = np.random.default_rng(0)
    w = rng.standard_normal((3, 2, 3, 3)).astype(np.float32)
    b = rng.standard_normal(3).astype(np.float32)
    nodes = [h.make_node("Conv", ["X", "W", "B"], ["c"], pads=[1, 1, 1, 1]), h.make_node("Add", ["c", "Z"], ["s" if activation else "Y"])]
    if activation:
        nodes.append(h.make_node(activation, ["s"], ["Y"]))
    return _model(
        nodes,
        [_vi("X", T.FLOAT, [1, 2, 5, 5]), _vi("Z", 0, [1, 3, 5, 5])],  # Z: elem_type 0
        [_vi("Y", T.FLOAT, None)],
        [nh.from_array(w, "W"), nh.from_array(b, "B")],
    )


@LEVELS
@pytest.mark.parametrize("activation", [None, "Relu"])
def test_conv_add_untyped_residual(options, activation):
    model = _conv_add(activation)
    engine = _engine(model, options)
    fused = options is ALL
    assert _ops(engine) == (["FusedConv"] if fused else ["Conv", "Add"] + ([activation] if activation else []))
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    z = rng.standard_normal((1, 3, 5, 5)).astype(np.float32)
    (expected,) = _ort(_retyped(model, "Z", T.FLOAT), {"X": x, "Z": z})
    y = engine.run({"X": x, "Z": z})["Y"]
    assert y.dtype == np.float32 and y.shape == (1, 3, 5, 5)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)
    # the same shape, another type: Add's T (and FusedConv's residual) refuses it every time
    with pytest.raises(InvalidTypeError, match=r"tensor\(int8\).*tensor\(float\)|tensor\(float\).*tensor\(int8\)"):
        engine.run({"X": x, "Z": np.ones((1, 3, 5, 5), np.int8)})
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        engine.run({"X": x, "Z": z.astype(np.float64)})
    with pytest.raises(InvalidTypeError, match=r"tensor\(int8\)"):
        engine.run_outputs({"X": x, "Z": np.ones((1, 3, 5, 5), np.int8)})
    np.testing.assert_array_equal(engine.run({"X": x, "Z": z})["Y"], y)  # float32 runs on


@LEVELS
def test_conv_add_untyped_first_run_wrong(options):
    """The first run already fed the wrong type (no float32 run before it)."""
    engine = _engine(_conv_add(), options)
    x = np.ones((1, 2, 5, 5), np.float32)
    with pytest.raises(InvalidTypeError):
        engine.run({"X": x, "Z": np.ones((1, 3, 5, 5), np.int8)})
    with pytest.raises(InvalidTypeError):
        engine.run({"X": x, "Z": np.ones((1, 3, 5, 5), np.float64)})
    assert engine.run({"X": x, "Z": np.zeros((1, 3, 5, 5), np.float32)})["Y"].dtype == np.float32


def test_conv_add_untyped_session_api():
    sess = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ModelWarning)
        sess = onnxrt.InferenceSession(_conv_add().SerializeToString())
    x = np.ones((1, 2, 5, 5), np.float32)
    assert sess.run(None, {"X": x, "Z": np.zeros((1, 3, 5, 5), np.float32)})[0].shape == (1, 3, 5, 5)
    with pytest.raises(InvalidTypeError):
        sess.run(None, {"X": x, "Z": np.zeros((1, 3, 5, 5), np.int8)})


# --- load time: a warning, or an error under strict --------------------------------------------


def test_untyped_input_warns_once_at_load():
    model = _conv_add()
    with pytest.warns(ModelWarning, match=r"Input 'Z' of graph 'g' declares no element type") as record:
        engine = onnxrt.OnnxInference(model)
    assert sum(issubclass(w.category, ModelWarning) for w in record) == 1
    x = np.ones((1, 2, 5, 5), np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # runs (and the unoptimised plan) warn no more
        for dt in (np.float32, np.float32):
            engine.run({"X": x, "Z": np.zeros((1, 3, 5, 5), dt)})
        engine.run({"X": x, "Z": np.zeros((1, 3, 5, 5), np.float32)}, intermediate=True)
    # onnxruntime refuses the model at load
    with pytest.raises(Exception, match="data type 0"):
        _ort(model, {"X": x, "Z": np.zeros((1, 3, 5, 5), np.float32)})


def test_untyped_input_strict_refused():
    with pytest.raises(GraphError, match=r"'Z'.*no element type.*strict"):
        onnxrt.OnnxInference(_conv_add(), STRICT)
    # an input with no type at all is refused as well
    model = _conv_add()
    model.graph.input[1].ClearField("type")
    with pytest.raises(GraphError, match=r"'Z'.*no element type.*strict"):
        onnxrt.OnnxInference(model, STRICT)


def test_typed_model_strict_loads_silently():
    model = _retyped(_conv_add(), "Z", T.FLOAT)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        engine = onnxrt.OnnxInference(model, STRICT)
    assert engine.plan._dynamic_steps == ()  # every type fixed: no per-run checks
    with pytest.raises(onnxrt.errors.InvalidFeedError, match="int8"):
        engine.run({"X": np.ones((1, 2, 5, 5), np.float32), "Z": np.ones((1, 3, 5, 5), np.int8)})


# --- run-time type changes of untyped inputs ---------------------------------------------------


def _add_abs():
    return _model(
        [h.make_node("Add", ["A", "B"], ["s"]), h.make_node("Abs", ["s"], ["Y"])],
        [_vi("A", 0, [2, 3]), _vi("B", 0, [2, 3])],
        [_vi("Y", 0, None)],
    )


@LEVELS
def test_untyped_inputs_change_type(options):
    model = _add_abs()
    engine = _engine(model, options)
    a = np.array([[1, -2, 3], [-4, 5, -6]])
    b = np.array([[-7, 1, 1], [1, -9, 2]])
    for dt, elem in ((np.float32, T.FLOAT), (np.int64, T.INT64), (np.float64, T.DOUBLE)):
        feeds = {"A": a.astype(dt), "B": b.astype(dt)}
        typed = _retyped(_retyped(model, "A", elem), "B", elem)
        typed.graph.output[0].type.tensor_type.elem_type = elem
        (expected,) = _ort(typed, feeds)
        y = engine.run(feeds)["Y"]
        assert y.dtype == dt and y.shape == (2, 3)
        np.testing.assert_array_equal(y, expected)
    with pytest.raises(InvalidTypeError, match=r"tensor\(int64\).*tensor\(float\)|tensor\(float\).*tensor\(int64\)"):
        engine.run({"A": a.astype(np.float32), "B": b.astype(np.int64)})
    with pytest.raises(InvalidTypeError, match=r"tensor\(uint32\)"):  # Abs-13 accepts uint32, Add does too: mixed
        engine.run({"A": a.astype(np.uint32), "B": b.astype(np.int32)})
    np.testing.assert_array_equal(engine.run({"A": a.astype(np.int32), "B": b.astype(np.int32)})["Y"], np.abs(a + b).astype(np.int32))


@LEVELS
def test_untyped_input_checked_downstream(options):
    """Abs(Z) + C: the Add two steps after the untyped input is checked on every run; Shape(Z)
    is int64 whatever Z holds, so what reads it runs for every Z."""
    c = np.array([1.5, -2.0, 0.25], np.float32)
    model = _model(
        [
            h.make_node("Abs", ["Z"], ["a"]),
            h.make_node("Add", ["a", "C"], ["Y"]),
            h.make_node("Shape", ["Z"], ["sh"]),
            h.make_node("Add", ["sh", "one"], ["S"]),
        ],
        [_vi("Z", 0, [3])],
        [_vi("Y", T.FLOAT, None), _vi("S", T.INT64, None)],
        [nh.from_array(c, "C"), nh.from_array(np.array([1], np.int64), "one")],
    )
    engine = _engine(model, options)
    z = np.array([-1.0, 2.0, -3.0], np.float32)
    out = engine.run({"Z": z})
    np.testing.assert_array_equal(out["Y"], np.abs(z) + c)
    np.testing.assert_array_equal(out["S"], [4])
    assert out["S"].dtype == np.int64
    (expected_y, expected_s) = _ort(_retyped(model, "Z", T.FLOAT), {"Z": z})
    np.testing.assert_array_equal(out["Y"], expected_y)
    np.testing.assert_array_equal(out["S"], expected_s)
    with pytest.raises(InvalidTypeError, match=r"tensor\(int32\)"):
        engine.run({"Z": z.astype(np.int32)})
    np.testing.assert_array_equal(engine.run({"Z": z})["Y"], np.abs(z) + c)


# --- other fusions with mismatched types ----------------------------------------------------


@LEVELS
def test_add_relu_untyped(options):
    model = _model(
        [h.make_node("Add", ["A", "B"], ["s"]), h.make_node("Relu", ["s"], ["Y"])],
        [_vi("A", 0, [2, 3]), _vi("B", 0, [2, 3])],
        [_vi("Y", 0, None)],
    )
    engine = _engine(model, options)
    assert _ops(engine) == (["FusedAdd"] if options is ALL else ["Add", "Relu"])
    a = np.array([[1, -2, 3], [-4, 5, -6]], np.float32)
    np.testing.assert_array_equal(engine.run({"A": a, "B": a})["Y"], np.maximum(a + a, 0))
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        engine.run({"A": a, "B": a.astype(np.float64)})
    # Add accepts uint8, Relu-14 does not: the fused node refuses it as the Relu did
    with pytest.raises(InvalidTypeError, match=r"tensor\(uint8\).*Relu|Relu.*tensor\(uint8\)"):
        engine.run({"A": a.astype(np.uint8), "B": a.astype(np.uint8)})
    y = engine.run({"A": a.astype(np.int32), "B": a.astype(np.int32)})["Y"]
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, np.maximum(a + a, 0).astype(np.int32))


@LEVELS
def test_matmul_add_to_gemm_untyped(options):
    rng = np.random.default_rng(2)
    b = rng.standard_normal((3, 4)).astype(np.float32)
    c = rng.standard_normal(4).astype(np.float32)
    model = _model(
        [h.make_node("MatMul", ["A", "Bw"], ["m"]), h.make_node("Add", ["m", "C"], ["Y"])],
        [_vi("A", 0, [2, 3])],
        [_vi("Y", T.FLOAT, None)],
        [nh.from_array(b, "Bw"), nh.from_array(c, "C")],
    )
    engine = _engine(model, options)
    assert _ops(engine) == (["Gemm"] if options is ALL else ["MatMul", "Add"])
    a = rng.standard_normal((2, 3)).astype(np.float32)
    (expected,) = _ort(_retyped(model, "A", T.FLOAT), {"A": a})
    y = engine.run({"A": a})["Y"]
    assert y.dtype == np.float32 and y.shape == (2, 4)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        engine.run({"A": a.astype(np.float64)})
    with pytest.raises(InvalidTypeError, match=r"tensor\(int32\)"):
        engine.run({"A": a.astype(np.int32)})


@LEVELS
def test_matmul_relu_untyped(options):
    b = np.arange(12, dtype=np.float32).reshape(3, 4) - 5
    model = _model(
        [h.make_node("MatMul", ["A", "Bw"], ["m"]), h.make_node("Relu", ["m"], ["Y"])],
        [_vi("A", 0, [2, 3])],
        [_vi("Y", T.FLOAT, None)],
        [nh.from_array(b, "Bw")],
    )
    engine = _engine(model, options)
    assert _ops(engine) == (["FusedMatMul"] if options is ALL else ["MatMul", "Relu"])
    a = np.array([[1, -1, 2], [0, 3, -2]], np.float32)
    np.testing.assert_array_equal(engine.run({"A": a})["Y"], np.maximum(a @ b, 0))
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        engine.run({"A": a.astype(np.float64)})


def _conv_concat(w2_dtype):
    w1 = np.ones((2, 1, 1, 1), np.float32)
    w2 = np.full((1, 1, 1, 1), 2, w2_dtype)
    return _model(
        [
            h.make_node("Conv", ["X", "W1"], ["c1"]),
            h.make_node("Conv", ["Z", "W2"], ["c2"]),
            h.make_node("Add", ["c2", "R"], ["a2"]),  # a residual: c2 becomes a FusedConv
            h.make_node("Concat", ["c1", "a2"], ["Y"], axis=1),
        ],
        [_vi("X", T.FLOAT, [1, 1, 3, 3]), _vi("Z", 0, [1, 1, 3, 3]), _vi("R", 0, [1, 1, 3, 3])],
        [_vi("Y", 0, None)],
        [nh.from_array(w1, "W1"), nh.from_array(w2, "W2")],
    )


@LEVELS
def test_conv_concat_untyped_segments(options):
    engine = _engine(_conv_concat(np.float32), options)
    assert _ops(engine) == (["ConvConcat"] if options is ALL else ["Conv", "Conv", "Add", "Concat"])
    x = np.arange(9, dtype=np.float32).reshape(1, 1, 3, 3)
    r = -np.ones((1, 1, 3, 3), np.float32)
    y = engine.run({"X": x, "Z": x, "R": r})["Y"]
    assert y.shape == (1, 3, 3, 3) and y.dtype == np.float32
    np.testing.assert_array_equal(y, np.concatenate([x, x, 2 * x + r], axis=1))
    for dt in (np.int8, np.float64):  # the residual of the second convolution
        with pytest.raises(InvalidTypeError, match=r"tensor\((int8|double)\)"):
            engine.run({"X": x, "Z": x, "R": r.astype(dt)})
    np.testing.assert_array_equal(engine.run({"X": x, "Z": x, "R": r})["Y"], y)


@LEVELS
def test_conv_concat_segments_of_two_types(options):
    """Each convolution is valid (float32, float64); Concat refuses the two types together."""
    engine = _engine(_conv_concat(np.float64), options)
    assert _ops(engine) == (["ConvConcat"] if options is ALL else ["Conv", "Conv", "Add", "Concat"])
    x = np.ones((1, 1, 3, 3), np.float32)
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        engine.run({"X": x, "Z": x.astype(np.float64), "R": x.astype(np.float64)})


@LEVELS
def test_conv_mul_by_other_type_not_folded(options):
    """Conv then Mul by a float64 constant: the Mul refuses it unoptimised; the fold into the
    weights (which would round the constant to float32 and run) is not made."""
    model = _model(
        [h.make_node("Conv", ["X", "W"], ["c"]), h.make_node("Mul", ["c", "k"], ["Y"])],
        [_vi("X", T.FLOAT, [1, 1, 3, 3])],
        [_vi("Y", T.FLOAT, None)],
        [nh.from_array(np.ones((2, 1, 1, 1), np.float32), "W"), nh.from_array(np.array([2.0, 3.0]).reshape(1, 2, 1, 1), "k")],
    )
    engine = _engine(model, options)
    assert _ops(engine) == ["Conv", "Mul"]
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        engine.run({"X": np.ones((1, 1, 3, 3), np.float32)})


@LEVELS
def test_constant_of_mixed_types_not_folded(options):
    model = _model(
        [h.make_node("Add", ["c1", "c2"], ["k"]), h.make_node("Add", ["X", "k"], ["Y"])],
        [_vi("X", T.FLOAT, [2])],
        [_vi("Y", T.FLOAT, None)],
        [nh.from_array(np.array([1, 2], np.float32), "c1"), nh.from_array(np.array([1, 2], np.float64), "c2")],
    )
    engine = _engine(model, options)
    assert _ops(engine) == ["Add", "Add"]
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        engine.run({"X": np.ones(2, np.float32)})


@LEVELS
def test_dropout_on_integers_not_removed(options):
    model = _model(
        [h.make_node("Dropout", ["X"], ["d"]), h.make_node("Neg", ["d"], ["Y"])],
        [_vi("X", T.INT32, [2])],
        [_vi("Y", T.INT32, None)],
    )
    engine = _engine(model, options)
    assert _ops(engine)[0] == "Dropout"
    with pytest.raises(InvalidTypeError, match=r"Dropout.*tensor\(int32\)"):
        engine.run({"X": np.ones(2, np.int32)})
    # a float one is still removed, and runs
    model.graph.input[0].type.tensor_type.elem_type = T.FLOAT
    model.graph.output[0].type.tensor_type.elem_type = T.FLOAT
    engine = _engine(model, options)
    assert _ops(engine) == (["Neg"] if options is ALL else ["Dropout", "Neg"])
    np.testing.assert_array_equal(engine.run({"X": np.array([1.5, -2], np.float32)})["Y"], [-1.5, 2])


def test_dense_chain_keeps_gemm_rules():
    rng = np.random.default_rng(3)
    b1, c1 = rng.standard_normal((4, 5)).astype(np.float32), rng.standard_normal(5).astype(np.float32)
    b2, c2 = rng.standard_normal((5, 2)).astype(np.float32), rng.standard_normal(2).astype(np.float32)
    model = _model(
        [
            h.make_node("Gemm", ["X", "B1", "C1"], ["g1"]),
            h.make_node("Relu", ["g1"], ["r1"]),
            h.make_node("Gemm", ["r1", "B2", "C2"], ["Y"]),
        ],
        [_vi("X", T.FLOAT, [1, 4])],
        [_vi("Y", T.FLOAT, [1, 2])],
        [nh.from_array(b1, "B1"), nh.from_array(c1, "C1"), nh.from_array(b2, "B2"), nh.from_array(c2, "C2")],
    )
    engine = _engine(model)
    assert _ops(engine) == ["DenseChain"]
    x = rng.standard_normal((1, 4)).astype(np.float32)
    (expected,) = _ort(model, {"X": x})
    np.testing.assert_allclose(engine.run({"X": x})["Y"], expected, rtol=1e-5, atol=1e-6)
    op = engine.plan.steps[0].op
    consts = [engine.plan.initializers[n] for n in engine.plan.steps[0].node.input[1:]]
    check_input_types(op, [x, *consts])  # the graph's own types pass
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        check_input_types(op, [x.astype(np.float64), *consts])
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        check_input_types(op, [x, consts[0], consts[1], consts[2].astype(np.float64), consts[3]])


# --- subgraphs: outer values' types are not fixed by the body -----------------------------------


@LEVELS
def test_if_branch_reads_untyped_outer(options):
    then = h.make_graph([h.make_node("Add", ["Z", "C"], ["t"])], "then", [], [_vi("t", T.FLOAT, None)],
                        [nh.from_array(np.array([1.0, 2.0], np.float32), "C")])
    other = h.make_graph([h.make_node("Neg", ["Z"], ["e"])], "else", [], [_vi("e", 0, None)])
    model = _model(
        [h.make_node("If", ["cond"], ["Y"], then_branch=then, else_branch=other)],
        [_vi("cond", T.BOOL, []), _vi("Z", 0, [2])],
        [_vi("Y", 0, None)],
    )
    engine = _engine(model, options)
    z = np.array([3.0, -4.0], np.float32)
    np.testing.assert_array_equal(engine.run({"cond": np.array(True), "Z": z})["Y"], [4.0, -2.0])
    with pytest.raises(InvalidTypeError, match=r"tensor\(int32\)"):
        engine.run({"cond": np.array(True), "Z": z.astype(np.int32)})
    y = engine.run({"cond": np.array(False), "Z": z.astype(np.int32)})["Y"]
    assert y.dtype == np.int32
    np.testing.assert_array_equal(y, [-3, 4])


def _loop(v_elem=0):
    """V (no declared element type) carried through a Loop body adding a float32 one."""
    body = h.make_graph(
        [h.make_node("Add", ["v", "one"], ["a"]), h.make_node("Relu", ["a"], ["v_out"]), h.make_node("Identity", ["c"], ["c_out"])],
        "body",
        [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("v", v_elem, None)],
        [_vi("c_out", T.BOOL, []), _vi("v_out", v_elem, None)],
    )
    return _model(
        [h.make_node("Loop", ["N", "", "V"], ["Y"], body=body)],
        [_vi("N", T.INT64, []), _vi("V", v_elem, [3])],
        [_vi("Y", v_elem, None)],
        [nh.from_array(np.ones(3, np.float32), "one")],
    )


@LEVELS
def test_loop_body_carried_untyped(options):
    model = _loop()
    engine = _engine(model, options)
    v = np.array([-5.0, 0.5, 2.0], np.float32)
    n = np.array(4, np.int64)
    (expected,) = _ort(_loop(T.FLOAT), {"N": n, "V": v})
    for _ in range(2):  # the second run takes the checked body's quick path
        y = engine.run({"N": n, "V": v})["Y"]
        assert y.dtype == np.float32 and y.shape == (3,)
        np.testing.assert_array_equal(y, expected)
    with pytest.raises(InvalidTypeError, match=r"tensor\(int32\)"):
        engine.run({"N": n, "V": v.astype(np.int32)})
    with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
        engine.run({"N": n, "V": v.astype(np.float64)})
    np.testing.assert_array_equal(engine.run({"N": n, "V": v})["Y"], expected)


@LEVELS
def test_loop_carried_type_changes_between_iterations(options):
    """The body turns v into float64: the second iteration's Add(v, float32 one) breaks T."""
    body = h.make_graph(
        [h.make_node("Add", ["v", "one"], ["a"]), h.make_node("Cast", ["a"], ["v_out"], to=T.DOUBLE),
         h.make_node("Identity", ["c"], ["c_out"])],
        "body",
        [_vi("i", T.INT64, []), _vi("c", T.BOOL, []), _vi("v", 0, None)],
        [_vi("c_out", T.BOOL, []), _vi("v_out", 0, None)],
    )
    model = _model(
        [h.make_node("Loop", ["N", "", "V"], ["Y"], body=body)],
        [_vi("N", T.INT64, []), _vi("V", T.FLOAT, [2])],
        [_vi("Y", 0, None)],
        [nh.from_array(np.ones(2, np.float32), "one")],
    )
    engine = _engine(model, options)
    v = np.array([1.0, 2.0], np.float32)
    y = engine.run({"N": np.array(1, np.int64), "V": v})["Y"]  # one iteration: valid
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, [2.0, 3.0])
    for _ in range(2):
        with pytest.raises(InvalidTypeError, match=r"tensor\(double\)"):
            engine.run({"N": np.array(3, np.int64), "V": v})
