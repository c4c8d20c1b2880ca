"""A model the session parses itself keeps one copy of its weights: the plan's arrays (OnnxInference.model / structure)."""

from __future__ import annotations

import pickle

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt


def _model():
    rng = np.random.default_rng(0)
    w = rng.standard_normal((64, 32)).astype(np.float32)          # a weight: 2048 elements
    b = rng.standard_normal(32).astype(np.float32)                 # small: stays in the proto
    h = rng.standard_normal((32, 40)).astype(np.float16)           # a float16 weight
    g = helper.make_graph(
        [helper.make_node("MatMul", ["x", "w"], ["m"]), helper.make_node("Add", ["m", "b"], ["a"]),
         helper.make_node("Cast", ["a"], ["c"], to=TensorProto.FLOAT16), helper.make_node("MatMul", ["c", "h"], ["y"])],
        "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT16, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b"), numpy_helper.from_array(h, "h")],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]), w, b, h


def test_a_parsed_model_holds_its_weights_once(tmp_path):
    model, w, b, h = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32)
    expected = onnxrt.OnnxInference(model).run({"x": x})["y"]
    for source in (str(path), model.SerializeToString()):
        oinf = onnxrt.OnnxInference(source)
        got = oinf.run({"x": x})["y"]
        assert got.dtype == np.float16 and got.shape == (3, 40)
        np.testing.assert_array_equal(got, expected)
        # the structure keeps names, types and dims, not the weights' data; small tensors whole
        inits = {t.name: t for t in oinf.structure.graph.initializer}
        assert list(inits["w"].dims) == [64, 32] and inits["w"].data_type == TensorProto.FLOAT
        assert not inits["w"].raw_data and not inits["w"].float_data and not inits["h"].raw_data
        np.testing.assert_array_equal(numpy_helper.to_array(inits["b"]), b)
        # the plan's constants are the arrays set aside: no second copy
        assert oinf.plan.initializers["w"] is oinf._held["w"] and oinf.plan.initializers["h"] is oinf._held["h"]
        # model gives the whole proto back, weights included, bit for bit
        full = {t.name: numpy_helper.to_array(t) for t in oinf.model.graph.initializer}
        np.testing.assert_array_equal(full["w"], w)
        np.testing.assert_array_equal(full["h"], h)
        assert full["h"].dtype == np.float16
        # the tools that read the whole model still work: the plan as written, pickling
        inter = oinf.run({"x": x}, intermediate=True)
        assert set(inter) >= {"m", "a", "c", "y"} and inter["a"].dtype == np.float32
        np.testing.assert_array_equal(pickle.loads(pickle.dumps(oinf)).run({"x": x})["y"], expected)


def test_a_model_given_as_a_proto_is_used_as_it_is():
    model, w, _, _ = _model()
    oinf = onnxrt.OnnxInference(model)
    assert oinf.model is model and oinf.structure is model
    assert model.graph.initializer[0].raw_data  # the caller's proto is not modified
    np.testing.assert_array_equal(numpy_helper.to_array(model.graph.initializer[0]), w)


def test_the_session_api_reads_the_structure(tmp_path):
    model, *_ = _model()
    model.producer_name = "weights-once"
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    sess = onnxrt.InferenceSession(str(path))
    assert [i.name for i in sess.get_inputs()] == ["x"]
    assert sess.get_modelmeta().producer_name == "weights-once"


def test_a_file_is_read_with_its_weights_apart(tmp_path):
    from onnxrt.model import read_weights_apart

    model, w, b, h = _model()
    ids = numpy_helper.from_array(np.arange(5000, dtype=np.int64), "ids")  # large, not floating point
    model.graph.initializer.append(ids)
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    light, held = read_weights_apart(str(path))
    assert sorted(held) == ["h", "w"] and held["w"].dtype == np.float32 and held["h"].dtype == np.float16
    np.testing.assert_array_equal(held["w"], w)
    np.testing.assert_array_equal(held["h"], h)
    inits = {t.name: t for t in light.graph.initializer}
    np.testing.assert_array_equal(numpy_helper.to_array(inits["ids"]), np.arange(5000))
    np.testing.assert_array_equal(numpy_helper.to_array(inits["b"]), b)
    assert not inits["w"].raw_data and list(inits["w"].dims) == [64, 32]
    # the rest of the model is what protobuf parses from the whole file
    whole = onnx.load(str(path))
    for t in whole.graph.initializer:
        if t.name in held:
            t.ClearField("raw_data")
    assert light.SerializeToString() == whole.SerializeToString()


def test_an_unusual_or_broken_file_is_parsed_whole(tmp_path):
    from onnxrt.errors import ModelLoadError
    from onnxrt.model import read_weights_apart

    model, *_ = _model()
    path = tmp_path / "m.onnx"
    data = model.SerializeToString()
    path.write_bytes(data[: len(data) - 100])  # truncated inside the weights
    assert read_weights_apart(str(path)) is None
    with pytest.raises(ModelLoadError):
        onnxrt.OnnxInference(str(path))
    # raw_data of another size than the dims: the usual error, naming the initializer
    model.graph.initializer[0].raw_data = model.graph.initializer[0].raw_data[:-4]
    path.write_bytes(model.SerializeToString())
    assert read_weights_apart(str(path)) is None
    with pytest.raises(ModelLoadError, match="'w'"):
        onnxrt.OnnxInference(str(path))
    # a model without weights: nothing to set apart
    small = helper.make_model(helper.make_graph([helper.make_node("Neg", ["x"], ["y"])], "g",
                                                [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
                                                [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])]))
    path.write_bytes(small.SerializeToString())
    assert read_weights_apart(str(path)) is None


def test_a_weight_over_the_tensor_cap_is_refused(tmp_path):
    from onnxrt.errors import ModelLoadError

    model, *_ = _model()
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    so = onnxrt.SessionOptions()
    so.max_tensor_bytes = 4096
    with pytest.raises(ModelLoadError, match="'w'"):
        onnxrt.InferenceSession(str(path), so)
