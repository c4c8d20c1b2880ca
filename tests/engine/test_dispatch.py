"""The dispatcher (onnxrt.dispatch): declared fast paths picked once per node and input signature.

The first test is the recipe of docs/architecture.md ("Adding a fast path") written out:
a fast path for Abs on float32 tensors, declared, picked, listed and checked against the
reference kernel.
"""

from __future__ import annotations

import importlib
import pkgutil

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt import dispatch
from onnxrt.cli import main as cli_main


def _model(op_type: str, elem: int = TensorProto.FLOAT, **attrs):
    node = helper.make_node(op_type, ["X"], ["Y"], **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("X", elem, None)],
                              [helper.make_tensor_value_info("Y", elem, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])


def _reference_options() -> onnxrt.SessionOptions:
    so = onnxrt.SessionOptions()
    so.fast_paths = False
    return so


# -- the recipe ---------------------------------------------------------------------------

def abs_by_where(op, x):
    """|x| of a float32 tensor with numpy's where (an example path: exact, as the reference)."""
    return (np.where(x < 0, -x, x).astype(np.float32, copy=False),)


def test_recipe_a_declared_path_is_picked_listed_and_agrees_with_the_reference(capsys):
    calls = []

    def path(op, x):
        calls.append(x.shape)
        return abs_by_where(op, x)

    with dispatch.declared("Abs", "test: where", lambda op, x: x.dtype == np.float32 and x.size >= 4, path,
                           native=False):
        sess = onnxrt.OnnxInference(_model("Abs"))
        ref = onnxrt.OnnxInference(_model("Abs"), options=_reference_options())
        x = np.array([[-1.5, 0.0, 2.0, -0.5], [3.0, -4.0, np.inf, 1.0]], np.float32)
        y = sess.run({"X": x})["Y"]
        expected = ref.run({"X": x})["Y"]
        assert y.dtype == np.float32 and y.shape == (2, 4)
        np.testing.assert_array_equal(y, expected)  # both exact: the same function
        assert calls == [(2, 4)]
        rows = sess.fast_paths()
        assert [(r["op_type"], r["path"]) for r in rows] == [("Abs", "test: where")]
        assert rows[0]["signature"][0][:2] == (np.dtype(np.float32), (2, 4))
        # the condition is false for a tiny tensor: the reference kernel runs, and says so
        small = np.array([-1.0, 1.0], np.float32)
        np.testing.assert_array_equal(sess.run({"X": small})["Y"], np.array([1.0, 1.0], np.float32))
        assert calls == [(2, 4)]
        assert {r["path"] for r in sess.fast_paths()} == {"test: where", "reference"}
        # a session with fast paths off never calls it
        ref.run({"X": x})
        assert calls == [(2, 4)] and ref.fast_paths() == []
        # onnxrt ops --paths lists it
        assert cli_main(["ops", "--paths"]) == 0
        out = capsys.readouterr().out
        assert "test: where" in out and "Abs" in out
    assert all(p.name != "test: where" for p in dispatch.paths_for("Abs"))


def test_choice_is_kept_per_signature_and_prepared_once():
    prepared = []

    def prepare(op, x):
        prepared.append((x.dtype, x.shape))
        scale = np.float32(2.0)
        return lambda x: (np.abs(x) * scale / scale,)

    with dispatch.declared("Abs", "test: prepared", lambda op, x: x.dtype == np.float32, prepare,
                           native=False, prepared=True):
        sess = onnxrt.OnnxInference(_model("Abs"))
        for shape in [(3,), (3,), (2, 2), (3,), (2, 2)]:
            x = np.linspace(-1, 1, int(np.prod(shape)), dtype=np.float32).reshape(shape)
            y = sess.run({"X": x})["Y"]
            np.testing.assert_array_equal(y, np.abs(x))
            assert y.shape == shape and y.dtype == np.float32
        assert prepared == [(np.dtype(np.float32), (3,)), (np.dtype(np.float32), (2, 2))]


def test_a_path_that_declines_falls_back_to_the_reference():
    def declining(op, x):
        return None

    with dispatch.declared("Abs", "test: declines", lambda op, x: True, declining, native=False):
        sess = onnxrt.OnnxInference(_model("Abs", TensorProto.DOUBLE))
        x = np.array([-2.0, 5.0], np.float64)
        y = sess.run({"X": x})["Y"]
        np.testing.assert_array_equal(y, np.array([2.0, 5.0]))
        assert y.dtype == np.float64


def test_native_paths_are_skipped_while_compiled_kernels_are_off():
    calls = []

    def path(op, x):
        calls.append(1)
        return (np.abs(x),)

    with dispatch.declared("Abs", "test: native", lambda op, x: True, path, native=True):
        sess = onnxrt.OnnxInference(_model("Abs"))
        x = np.array([-1.0, 1.0], np.float32)
        with onnxrt.native.disabled():
            np.testing.assert_array_equal(sess.run({"X": x})["Y"], np.array([1.0, 1.0], np.float32))
        assert calls == []
        if onnxrt.native.kernels() is not None:  # numba installed: the path runs once they are on
            sess.run({"X": x})
            assert calls == [1]


def test_declaring_a_name_twice_is_refused():
    with dispatch.declared("Abs", "test: twice", lambda op, x: False, abs_by_where, native=False):
        with pytest.raises(ValueError, match="already declares"):
            dispatch.fast_path("Abs", "test: twice", when=lambda op, x: False)(abs_by_where)


def test_operators_without_paths_are_bound_to_their_kernel():
    sess = onnxrt.OnnxInference(_model("Neg"))
    step = sess.plan.steps[0]
    assert not isinstance(step.fn, dispatch.Dispatcher)
    assert step.fn == step.op._run


def test_modules_table_matches_the_declarations():
    """Every module of onnxrt.fastpaths is in MODULES, and MODULES sends each operator to the
    module that declares its paths."""
    import onnxrt.fastpaths as fp

    names = {m.name for m in pkgutil.iter_modules(fp.__path__) if not m.name.startswith("_")}
    assert set(fp.MODULES.values()) == names
    for mod in sorted(names):
        importlib.import_module(f"onnxrt.fastpaths.{mod}")
    declared = {(p.domain, p.op_type): p.module.rsplit(".", 1)[-1] for p in dispatch.all_paths()
                if p.module.startswith("onnxrt.fastpaths.")}
    assert declared == fp.MODULES
    for p in dispatch.all_paths():
        assert p.doc, f"{p.op_type}: fast path {p.name!r} has no docstring"
