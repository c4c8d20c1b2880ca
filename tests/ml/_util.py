"""Helpers of the ml tests: one-node models of the ai.onnx.ml domain, run by onnxrt and by onnxruntime."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper

import onnxrt


def value_info(name: str, value: Any) -> onnx.ValueInfoProto:
    """A graph input typed after a numpy array (strings: object arrays) or a (TypeProto, value) pair."""
    if isinstance(value, tuple):
        return helper.make_value_info(name, value[0])
    elem = TensorProto.STRING if value.dtype == object else helper.np_dtype_to_tensor_dtype(value.dtype)
    return helper.make_tensor_value_info(name, elem, None)


def feed_value(value: Any) -> Any:
    return value[1] if isinstance(value, tuple) else value


def ml_model(op: str, inputs: list[tuple[str, Any]], n_outputs: int = 1, out_types: list[onnx.TypeProto] | None = None,
             ml_opset: int = 3, opset: int = 18, **atts: Any) -> onnx.ModelProto:
    """A model with one ai.onnx.ml node; outputs are untyped unless ``out_types`` is given."""
    outs = [f"out{i}" for i in range(n_outputs)]
    node = helper.make_node(op, [n for n, _ in inputs], outs, domain="ai.onnx.ml", name=f"{op}_node", **atts)
    if out_types:
        ovis = [helper.make_value_info(o, t) for o, t in zip(outs, out_types)]
    else:
        ovis = [helper.make_empty_tensor_value_info(o) for o in outs]
    graph = helper.make_graph([node], op, [value_info(n, v) for n, v in inputs], ovis)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("ai.onnx.ml", ml_opset)])
    model.ir_version = 9
    return model


def feeds_of(inputs: list[tuple[str, Any]]) -> dict[str, Any]:
    return {n: feed_value(v) for n, v in inputs}


def run_onnxrt(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    return onnxrt.InferenceSession(model.SerializeToString()).run(None, feeds)


def run_ort(model: onnx.ModelProto, feeds: dict[str, Any]) -> list[Any]:
    import onnxruntime as ort

    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def run_op(op: str, inputs: list[tuple[str, Any]], n_outputs: int = 1, **atts: Any) -> list[Any]:
    """onnxrt's outputs of a one-node model."""
    return run_onnxrt(ml_model(op, inputs, n_outputs, **atts), feeds_of(inputs))


def assert_same(got: Any, expected: Any, atol: float = 1e-6, rtol: float = 1e-5) -> None:
    """Same type, dtype, shape and values (exact for labels and strings, close for floats)."""
    if isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected)
        for g, e in zip(got, expected):
            assert_same(g, e, atol, rtol)
        return
    if isinstance(expected, dict):
        assert isinstance(got, dict) and list(got) == list(expected)
        np.testing.assert_allclose(list(got.values()), list(expected.values()), atol=atol, rtol=rtol)
        return
    assert isinstance(got, np.ndarray), type(got)
    expected = np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    if got.dtype.kind in "fc":
        np.testing.assert_allclose(got, expected, atol=atol, rtol=rtol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, expected)


def compare_with_ort(op: str, inputs: list[tuple[str, Any]], n_outputs: int = 1, atol: float = 1e-6, **atts: Any) -> list[Any]:
    """Run one node with onnxrt and onnxruntime; assert identical outputs; return onnxrt's."""
    model = ml_model(op, inputs, n_outputs, **atts)
    feeds = feeds_of(inputs)
    ours = run_onnxrt(model, feeds)
    theirs = run_ort(model, feeds)
    for g, e in zip(ours, theirs):
        assert_same(g, e, atol=atol)
    return ours
