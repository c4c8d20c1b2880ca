"""Shape inference for the optimiser runs on the model without its large weights' data (onnxrt.inference._without_weights)."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt import inference
from onnxrt.optim.graph import value_info_map


def _model():
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 48)).astype(np.float32), "W")  # 3072 elements: stripped
    b = numpy_helper.from_array(rng.standard_normal(48).astype(np.float32), "B")  # small: kept
    shape = numpy_helper.from_array(np.array([0, 6, 8], np.int64), "shape")  # integers: kept (data propagation)
    nodes = [helper.make_node("MatMul", ["X", "W"], ["m"]), helper.make_node("Add", ["m", "B"], ["a"]),
             helper.make_node("Reshape", ["a", "shape"], ["r"]), helper.make_node("Relu", ["r"], ["Y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, ["n", 64])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], [w, b, shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _infer(m):
    return value_info_map(onnx.shape_inference.infer_shapes(m, check_type=False, strict_mode=False, data_prop=True).graph)


def test_inference_without_weights_gives_the_same_types_and_shapes():
    model = _model()
    before = model.SerializeToString()
    light = inference._without_weights(model)
    assert model.SerializeToString() == before  # the caller's model is untouched
    assert [t.name for t in light.graph.initializer] == ["B", "shape"]
    assert any(i.name == "W" for i in light.graph.input)
    full, stripped = _infer(model), _infer(light)
    for name in ("m", "a", "r", "Y"):
        assert str(full[name]) == str(stripped[name]), name
    assert "r" in stripped  # the Reshape's target came from the kept integer initializer
    # the stripped weight is typed as it is: the session computes the same outputs
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    y = onnxrt.OnnxInference(model).run({"X": x})["Y"]
    w = numpy_helper.to_array(model.graph.initializer[0])
    b = numpy_helper.to_array(model.graph.initializer[1])
    want = np.maximum((x @ w + b).reshape(3, 6, 8), 0)
    assert y.shape == (3, 6, 8) and y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=64 * 2 * np.finfo(np.float32).eps, atol=1e-5)


def test_models_without_large_weights_are_passed_as_they_are():
    m = _model()
    del m.graph.initializer[0]
    m.graph.input.append(helper.make_tensor_value_info("W", TensorProto.FLOAT, [64, 48]))
    assert inference._without_weights(m) is m
