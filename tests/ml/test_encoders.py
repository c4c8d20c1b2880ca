"""LabelEncoder (1, 2, 4), CategoryMapper and the map operators CastMap, DictVectorizer, ZipMap."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxrt.errors import IndexOutOfRangeError, InvalidAttributeError, KernelError

from ._util import compare_with_ort, feeds_of, ml_model, run_onnxrt, run_op, run_ort

S = np.array(["Amy", "Sally", "Dori", "Amy", "Bob"], dtype=object)

# ------------------------------------------------------------------------------------------
# LabelEncoder 1
# ------------------------------------------------------------------------------------------


def test_label_encoder_1_both_directions():
    (y,) = compare_with_ort("LabelEncoder", [("X", S)], ml_opset=1, classes_strings=["Bob", "Amy", "Sally"], default_int64=-7)
    assert y.dtype == np.int64 and y.tolist() == [1, 2, -7, 1, 0]
    x = np.array([[0, 2], [5, -1]], np.int64)
    (y,) = compare_with_ort("LabelEncoder", [("X", x)], ml_opset=1, classes_strings=["Bob", "Amy", "Sally"], default_string="?")
    assert y.dtype == object and y.tolist() == [["Bob", "Sally"], ["?", "?"]]


# ------------------------------------------------------------------------------------------
# LabelEncoder 2
# ------------------------------------------------------------------------------------------


def test_label_encoder_2_spec_example():
    (y,) = compare_with_ort("LabelEncoder", [("X", S[:4])], ml_opset=2, keys_strings=["Amy", "Sally"], values_int64s=[5, 6], default_int64=-1)
    assert y.tolist() == [5, 6, -1, 5]


@pytest.mark.parametrize(
    "keys,values,x,expected",
    [
        ("keys_int64s", "values_strings", np.array([3, 1, 9], np.int64), ["c", "a", "_Unused"]),
        ("keys_int64s", "values_floats", np.array([3, 1, 9], np.int64), [3.5, 1.5, -0.0]),
        ("keys_floats", "values_int64s", np.array([3.0, 1.0, 9.0], np.float32), [30, 10, -1]),
        ("keys_floats", "values_strings", np.array([[3.0], [9.0]], np.float32), [["c"], ["_Unused"]]),
        ("keys_strings", "values_floats", np.array(["3", "1", "x"], object), [3.5, 1.5, -0.0]),
    ],
)
def test_label_encoder_2_every_pair_of_types(keys, values, x, expected):
    key_values = {"keys_int64s": [1, 3], "keys_floats": [1.0, 3.0], "keys_strings": ["1", "3"]}[keys]
    out_values = {"values_strings": ["a", "c"], "values_floats": [1.5, 3.5], "values_int64s": [10, 30]}[values]
    (y,) = compare_with_ort("LabelEncoder", [("X", x)], ml_opset=2, **{keys: key_values, values: out_values})
    assert y.tolist() == expected
    assert y.dtype == {"values_strings": object, "values_floats": np.float32, "values_int64s": np.int64}[values]


def test_label_encoder_2_float_keys_are_bitwise():
    # the spec: bit-wise comparison, so a NaN key maps the same NaN and -0.0 differs from 0.0
    x = np.array([np.nan, 0.0, -0.0, 2.0], np.float32)
    (y,) = run_op("LabelEncoder", [("X", x)], ml_opset=2, keys_floats=[float("nan"), 0.0], values_int64s=[7, 8])
    assert y.tolist() == [7, 8, -1, -1]


def test_label_encoder_repeated_key():
    # version 2 says nothing: the first key wins, as in onnxruntime
    (y,) = compare_with_ort("LabelEncoder", [("X", S[:2])], ml_opset=2, keys_strings=["Amy", "Amy", "Sally"], values_int64s=[1, 2, 3])
    assert y.tolist() == [1, 3]
    # version 4's spec: "If a key is repeated, the last key takes precedence"; onnxruntime keeps the first
    model = ml_model("LabelEncoder", [("X", S[:2])], ml_opset=4, keys_strings=["Amy", "Amy", "Sally"], values_int64s=[1, 2, 3])
    assert run_onnxrt(model, {"X": S[:2]})[0].tolist() == [2, 3]
    assert run_ort(model, {"X": S[:2]})[0].tolist() == [1, 3]


# ------------------------------------------------------------------------------------------
# LabelEncoder 4
# ------------------------------------------------------------------------------------------


def _tensor(name, dtype, values):
    values = np.asarray(values, dtype=dtype if dtype is not object else object)
    if dtype is object:
        return helper.make_tensor(name, TensorProto.STRING, values.shape, [v.encode() for v in values])
    return helper.make_tensor(name, helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), values.shape, values.tolist())


@pytest.mark.parametrize("key_dtype", [np.int64, np.int32, np.int16, np.float32, np.float64, object])
@pytest.mark.parametrize("value_dtype", [np.int64, np.int32, np.int16, np.float32, np.float64, object])
def test_label_encoder_4_tensor_attributes(key_dtype, value_dtype):
    keys = ["1", "2", "3"] if key_dtype is object else [1, 2, 3]
    values = ["a", "b", "c"] if value_dtype is object else [10, 20, 30]
    default = ["zz"] if value_dtype is object else [-9]
    x = np.array(["3", "1", "7"], object) if key_dtype is object else np.array([3, 1, 7], key_dtype)
    atts = dict(
        keys_tensor=_tensor("k", key_dtype, keys),
        values_tensor=_tensor("v", value_dtype, values),
        default_tensor=_tensor("d", value_dtype, default),
    )
    (y,) = run_op("LabelEncoder", [("X", x)], ml_opset=4, **atts)
    expected = [values[2], values[0], default[0]]
    assert y.dtype == np.dtype(value_dtype) and y.tolist() == expected
    try:
        theirs = run_ort(ml_model("LabelEncoder", [("X", x)], ml_opset=4, **atts), {"X": x})
    except Exception:  # noqa: BLE001  (onnxruntime lacks some of the type pairs)
        return
    assert theirs[0].tolist() == expected


def test_label_encoder_4_defaults_without_default_tensor():
    x = np.array([1, 5], np.int64)
    (y,) = run_op("LabelEncoder", [("X", x)], ml_opset=4, keys_int64s=[1], values_tensor=_tensor("v", np.int16, [4]))
    assert y.dtype == np.int16 and y.tolist() == [4, -1]
    (y,) = run_op("LabelEncoder", [("X", x)], ml_opset=4, keys_int64s=[1], values_tensor=_tensor("v", np.float64, [4.5]))
    assert y.dtype == np.float64 and y[0] == 4.5 and y[1] == 0 and np.signbit(y[1])
    (y,) = run_op("LabelEncoder", [("X", x)], ml_opset=4, keys_int64s=[1], values_strings=["a"])
    assert y.tolist() == ["a", "_Unused"]


def test_label_encoder_4_nan_key_matches_every_nan():
    nan_a = np.float32(np.nan)
    nan_b = np.array([0x7FC00001], np.uint32).view(np.float32)[0]  # another NaN payload
    x = np.array([nan_a, nan_b, 1.0], np.float32)
    (y,) = compare_with_ort("LabelEncoder", [("X", x)], ml_opset=4, keys_floats=[float("nan"), 1.0], values_int64s=[7, 8])
    assert y.tolist() == [7, 7, 8]


def test_label_encoder_errors():
    with pytest.raises(InvalidAttributeError, match="exactly one of"):
        run_op("LabelEncoder", [("X", S)], ml_opset=2, keys_strings=["a"], keys_int64s=[1], values_int64s=[1])
    with pytest.raises(InvalidAttributeError, match="2 keys and 1 values"):
        run_op("LabelEncoder", [("X", S)], ml_opset=2, keys_strings=["a", "b"], values_int64s=[1])
    with pytest.raises(KernelError, match="the keys are strings but the input has dtype int64"):
        run_op("LabelEncoder", [("X", np.array([1], np.int64))], ml_opset=2, keys_strings=["a"], values_int64s=[1])


def test_label_encoder_keeps_shape_and_handles_empty():
    x = np.array([["Amy", "Bob"], ["Bob", "Amy"]], object)
    (y,) = run_op("LabelEncoder", [("X", x)], ml_opset=2, keys_strings=["Amy"], values_int64s=[1])
    assert y.shape == (2, 2) and y.tolist() == [[1, -1], [-1, 1]]
    (y,) = run_op("LabelEncoder", [("X", np.zeros((0, 3), object))], ml_opset=2, keys_strings=["Amy"], values_int64s=[1])
    assert y.shape == (0, 3) and y.dtype == np.int64


# ------------------------------------------------------------------------------------------
# CategoryMapper
# ------------------------------------------------------------------------------------------


def test_category_mapper_both_directions():
    atts = dict(cats_strings=["cat", "dog", "cow"], cats_int64s=[1, 2, 3])
    (y,) = compare_with_ort("CategoryMapper", [("X", np.array([["dog", "bird"], ["cow", "cat"]], object))], default_int64=-5, **atts)
    assert y.tolist() == [[2, -5], [3, 1]]
    (y,) = compare_with_ort("CategoryMapper", [("X", np.array([3, 0, 1], np.int64))], default_string="none", **atts)
    assert y.tolist() == ["cow", "none", "cat"]


def test_category_mapper_length_mismatch():
    with pytest.raises(InvalidAttributeError, match="'cats_strings' has 2 values and 'cats_int64s' 1"):
        run_op("CategoryMapper", [("X", S)], cats_strings=["a", "b"], cats_int64s=[1])


# ------------------------------------------------------------------------------------------
# Maps: CastMap, DictVectorizer, ZipMap
# ------------------------------------------------------------------------------------------


def _map_type(key, value):
    return helper.make_map_type_proto(key, helper.make_tensor_type_proto(value, None))


def _tensor_type(elem):
    return helper.make_tensor_type_proto(elem, None)


MAP_F = {3: 1.5, 1: 2.25, 0: -1.0}


@pytest.mark.parametrize("cast_to,elem", [("TO_FLOAT", TensorProto.FLOAT), ("TO_STRING", TensorProto.STRING), ("TO_INT64", TensorProto.INT64)])
@pytest.mark.parametrize("form", ["DENSE", "SPARSE"])
def test_cast_map_matches_onnxruntime(cast_to, elem, form):
    inputs = [("X", (_map_type(TensorProto.INT64, TensorProto.FLOAT), MAP_F))]
    model = ml_model("CastMap", inputs, out_types=[_tensor_type(elem)], cast_to=cast_to, map_form=form, max_map=6)
    ours, theirs = run_onnxrt(model, feeds_of(inputs)), run_ort(model, feeds_of(inputs))
    assert ours[0].dtype == theirs[0].dtype and ours[0].shape == theirs[0].shape
    assert ours[0].tolist() == theirs[0].tolist()


def test_cast_map_values():
    inputs = [("X", (_map_type(TensorProto.INT64, TensorProto.FLOAT), {0: 2.7, 1: -2.7, 2: 1e10}))]
    (y,) = run_onnxrt(ml_model("CastMap", inputs, cast_to="TO_INT64"), feeds_of(inputs))
    assert y.tolist() == [[2, -2, 10000000000]]
    (y,) = run_onnxrt(ml_model("CastMap", inputs, cast_to="TO_STRING"), feeds_of(inputs))
    assert y.tolist() == [["2.700000", "-2.700000", "10000000000.000000"]]
    # string values (onnxruntime's Python API cannot feed map(int64, string))
    inputs = [("X", (_map_type(TensorProto.INT64, TensorProto.STRING), {2: "7", 0: "-1.5"}))]
    (y,) = run_onnxrt(ml_model("CastMap", inputs, cast_to="TO_FLOAT"), feeds_of(inputs))
    assert y.dtype == np.float32 and y.tolist() == [[-1.5, 7.0]]
    (y,) = run_onnxrt(ml_model("CastMap", inputs, cast_to="TO_STRING", map_form="SPARSE", max_map=3), feeds_of(inputs))
    assert y.tolist() == [["-1.5", "0.f", "7"]]
    with pytest.raises(KernelError, match="cannot convert"):
        run_onnxrt(ml_model("CastMap", inputs, cast_to="TO_INT64"), feeds_of(inputs))


def test_cast_map_sparse_keys():
    inputs = [("X", (_map_type(TensorProto.INT64, TensorProto.FLOAT), MAP_F))]
    model = ml_model("CastMap", inputs, map_form="SPARSE", max_map=3)
    # keys beyond max_map are dropped, as onnxruntime does
    assert run_onnxrt(model, feeds_of(inputs))[0].tolist() == run_ort(model, feeds_of(inputs))[0].tolist() == [[-1.0, 2.25, 0.0]]
    inputs = [("X", (_map_type(TensorProto.INT64, TensorProto.FLOAT), {-1: 1.0}))]
    with pytest.raises(IndexOutOfRangeError, match="map key -1 is negative"):
        run_onnxrt(ml_model("CastMap", inputs, map_form="SPARSE", max_map=3), feeds_of(inputs))


def test_dict_vectorizer_spec_example_and_types():
    inputs = [("X", (_map_type(TensorProto.STRING, TensorProto.FLOAT), {"a": 4.0, "c": 8.0, "q": 1.0}))]
    model = ml_model("DictVectorizer", inputs, string_vocabulary=["a", "c", "b", "z"])
    ours, theirs = run_onnxrt(model, feeds_of(inputs))[0], run_ort(model, feeds_of(inputs))[0]
    assert ours.dtype == theirs.dtype == np.float32
    assert ours.tolist() == theirs.tolist() == [[4.0, 8.0, 0.0, 0.0]]
    inputs = [("X", (_map_type(TensorProto.INT64, TensorProto.INT64), {5: 4, 2: 8}))]
    (y,) = run_onnxrt(ml_model("DictVectorizer", inputs, int64_vocabulary=[2, 3, 5]), feeds_of(inputs))
    assert y.dtype == np.int64 and y.tolist() == [[8, 0, 4]]
    inputs = [("X", (_map_type(TensorProto.INT64, TensorProto.STRING), {5: "x"}))]
    (y,) = run_onnxrt(ml_model("DictVectorizer", inputs, int64_vocabulary=[2, 3, 5]), feeds_of(inputs))
    assert y.dtype == object and y.tolist() == [["", "", "x"]]
    inputs = [("X", (_map_type(TensorProto.INT64, TensorProto.DOUBLE), {3: np.float64(0.1)}))]
    (y,) = run_onnxrt(ml_model("DictVectorizer", inputs, int64_vocabulary=[2, 3]), feeds_of(inputs))
    assert y.dtype == np.float64 and y.tolist() == [[0.0, 0.1]]


def test_dict_vectorizer_needs_one_vocabulary():
    inputs = [("X", (_map_type(TensorProto.STRING, TensorProto.FLOAT), {"a": 1.0}))]
    with pytest.raises(InvalidAttributeError, match="exactly one of 'string_vocabulary' and 'int64_vocabulary'"):
        run_onnxrt(ml_model("DictVectorizer", inputs), feeds_of(inputs))


def test_zip_map_builds_a_list_of_dicts():
    z = np.array([[0.1, 0.9], [0.7, 0.3]], np.float32)
    for atts in ({"classlabels_int64s": [3, 7]}, {"classlabels_strings": ["a", "b"]}):
        elem = TensorProto.INT64 if "classlabels_int64s" in atts else TensorProto.STRING
        seq = helper.make_sequence_type_proto(_map_type(elem, TensorProto.FLOAT))
        model = ml_model("ZipMap", [("X", z)], out_types=[seq], **atts)
        ours, theirs = run_onnxrt(model, {"X": z})[0], run_ort(model, {"X": z})[0]
        assert ours == theirs
        keys = list(atts.values())[0]
        assert ours == [{keys[0]: float(np.float32(0.1)), keys[1]: float(np.float32(0.9))}, {keys[0]: float(np.float32(0.7)), keys[1]: float(np.float32(0.3))}]
        assert all(type(v) is float for row in ours for v in row.values())


def test_zip_map_one_row_and_errors():
    (y,) = run_op("ZipMap", [("X", np.array([0.25, 0.75], np.float32))], classlabels_strings=["a", "b"])
    assert y == [{"a": 0.25, "b": 0.75}]
    with pytest.raises(KernelError, match="has 3 labels, the input has shape \\[2, 2\\]"):
        run_op("ZipMap", [("X", np.zeros((2, 2), np.float32))], classlabels_strings=["a", "b", "c"])


def test_map_value_type_comes_from_the_graph():
    # Python floats do not say float or double: the graph's declaration decides
    inputs = [("X", (_map_type(TensorProto.STRING, TensorProto.DOUBLE), {"b": 0.1}))]
    (y,) = run_onnxrt(ml_model("DictVectorizer", inputs, string_vocabulary=["a", "b"]), feeds_of(inputs))
    assert y.dtype == np.float64 and y.tolist() == [[0.0, 0.1]]
    inputs = [("X", (_map_type(TensorProto.STRING, TensorProto.FLOAT), {"b": 0.1}))]
    (y,) = run_onnxrt(ml_model("DictVectorizer", inputs, string_vocabulary=["a", "b"]), feeds_of(inputs))
    assert y.dtype == np.float32 and y[0, 1] == np.float32(0.1)
