"""ArrayFeatureExtractor, Binarizer, Scaler, Normalizer, Imputer, FeatureVectorizer, OneHotEncoder."""

from __future__ import annotations

import numpy as np
import pytest

from onnxrt.errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from onnxrt.ops_ml.op_array_feature_extractor import array_feature_extractor
from onnxrt.ops_ml.op_feature_vectorizer import feature_vectorizer
from onnxrt.ops_ml.op_preprocessing import binarizer, imputer, normalizer, scaler

from ._util import compare_with_ort, ml_model, run_op, run_ort

RNG = np.random.default_rng(7)
X = np.array([[1.0, -2.0, 3.0], [0.0, 0.0, 0.0], [-1.0, -4.0, 0.5]], dtype=np.float32)

# ------------------------------------------------------------------------------------------
# ArrayFeatureExtractor
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_array_feature_extractor_matches_onnxruntime(dtype):
    x = np.arange(24).reshape(2, 3, 4).astype(dtype)
    (z,) = compare_with_ort("ArrayFeatureExtractor", [("X", x), ("Y", np.array([0, 3, 3], np.int64))])
    np.testing.assert_array_equal(z, x[..., [0, 3, 3]])
    assert z.dtype == dtype and z.shape == (2, 3, 3)


def test_array_feature_extractor_shapes():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    # 1-D data is one row; the indices are flattened whatever their shape
    (z,) = compare_with_ort("ArrayFeatureExtractor", [("X", x[0]), ("Y", np.array([2, 1], np.int64))])
    assert z.shape == (1, 2) and z.tolist() == [[2.0, 1.0]]
    (z,) = compare_with_ort("ArrayFeatureExtractor", [("X", x), ("Y", np.array([[1], [3]], np.int64))])
    assert z.tolist() == [[1, 3], [5, 7], [9, 11]]
    (z,) = compare_with_ort("ArrayFeatureExtractor", [("X", x), ("Y", np.array(2, np.int64))])
    assert z.shape == (3, 1)


def test_array_feature_extractor_strings():
    x = np.array([["a", "b", "c"], ["d", "e", "f"]], dtype=object)
    (z,) = compare_with_ort("ArrayFeatureExtractor", [("X", x), ("Y", np.array([2, 0], np.int64))])
    assert z.dtype == object and z.tolist() == [["c", "a"], ["f", "d"]]


def test_array_feature_extractor_out_of_range():
    x = np.zeros((2, 4), np.float32)
    with pytest.raises(IndexOutOfRangeError, match=r"Y holds 4, out of range \[0, 3\]"):
        array_feature_extractor(x, np.array([1, 4]))
    with pytest.raises(IndexOutOfRangeError, match="holds -1"):
        run_op("ArrayFeatureExtractor", [("X", x), ("Y", np.array([-1], np.int64))])


# ------------------------------------------------------------------------------------------
# Binarizer
# ------------------------------------------------------------------------------------------


def test_binarizer_matches_onnxruntime():
    x = RNG.standard_normal((5, 4)).astype(np.float32)
    (y,) = compare_with_ort("Binarizer", [("X", x)], threshold=0.25)
    np.testing.assert_array_equal(y, (x > np.float32(0.25)).astype(np.float32))


def test_binarizer_double():
    # onnxruntime has a float kernel only
    x = RNG.standard_normal((5, 4))
    (y,) = run_op("Binarizer", [("X", x)], threshold=0.25)
    assert y.dtype == np.float64
    np.testing.assert_array_equal(y, (x > 0.25).astype(np.float64))


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_binarizer_integers(dtype):
    # onnxruntime has no integer kernel; the schema allows int32/int64
    (y,) = run_op("Binarizer", [("X", np.array([[-1, 0, 1, 2]], dtype))], threshold=0.5)
    assert y.dtype == dtype and y.tolist() == [[0, 0, 1, 1]]


def test_binarizer_nan_gives_zero():
    # the spec maps everything not greater than the threshold to 0; onnxruntime raises on NaN
    x = np.array([np.nan, 1.0, -1.0], np.float32)
    assert binarizer(x, 0.0).tolist() == [0.0, 1.0, 0.0]
    with pytest.raises(Exception, match="NaN"):
        run_ort(ml_model("Binarizer", [("X", x)]), {"X": x})


# ------------------------------------------------------------------------------------------
# Scaler
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_scaler_matches_onnxruntime(dtype):
    x = (RNG.standard_normal((4, 3)) * 10).astype(dtype)
    (y,) = compare_with_ort("Scaler", [("X", x)], offset=[1.0, -2.0, 0.5], scale=[2.0, 0.5, -1.0], atol=1e-5)
    assert y.dtype == np.float32
    expected = (x.astype(np.float64) - [1.0, -2.0, 0.5]) * [2.0, 0.5, -1.0]
    np.testing.assert_allclose(y, expected, rtol=1e-6)


def test_scaler_broadcasts_single_values():
    # the spec allows one value or one per feature for each attribute (onnxruntime wants equal lengths)
    (y,) = run_op("Scaler", [("X", X)], offset=[1.0], scale=[2.0, 3.0, 4.0])
    np.testing.assert_allclose(y, (X - 1) * [2.0, 3.0, 4.0])
    (y,) = run_op("Scaler", [("X", X[0])], offset=[0.5, 0, 0], scale=[2.0])
    np.testing.assert_allclose(y, (X[0] - [0.5, 0, 0]) * 2)
    with pytest.raises(KernelError, match="'scale' has 2 values, expected 1 or 3"):
        scaler(X, np.zeros(1, np.float32), np.ones(2, np.float32))


# ------------------------------------------------------------------------------------------
# Normalizer
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_normalizer_matches_onnxruntime(norm, dtype):
    x = (RNG.standard_normal((5, 4)) * 5).astype(dtype)
    x[1] = 0  # a zero divisor leaves the row as it is
    (y,) = compare_with_ort("Normalizer", [("X", x)], norm=norm, atol=1e-6)
    assert y.dtype == np.float32


def test_normalizer_formulas():
    y = normalizer(X, "L2")
    # signs are kept: X / sqrt(sum(X^2)), not the spec's sqrt(X^2 / sum(X^2))
    np.testing.assert_allclose(y[0], X[0] / np.sqrt(14.0), rtol=1e-6)
    np.testing.assert_allclose(normalizer(X, "L1")[2], X[2] / 5.5, rtol=1e-6)
    np.testing.assert_allclose(normalizer(X, "MAX")[2], X[2] / 0.5, rtol=1e-6)
    assert normalizer(X, "MAX")[1].tolist() == [0.0, 0.0, 0.0]
    (y,) = run_op("Normalizer", [("X", X[0])], norm="L1")
    assert y.shape == (3,)


def test_normalizer_rejects_unknown_norm():
    with pytest.raises(InvalidAttributeError, match=r"'norm' is 'L3'"):
        run_op("Normalizer", [("X", X)], norm="L3")


# ------------------------------------------------------------------------------------------
# Imputer
# ------------------------------------------------------------------------------------------


def test_imputer_nan_and_per_feature_values():
    x = np.array([[1.0, np.nan, 3.0], [np.nan, 0.0, np.nan]], np.float32)
    (y,) = compare_with_ort("Imputer", [("X", x)], imputed_value_floats=[9.0, 8.0, 7.0], replaced_value_float=float("nan"))
    assert y.tolist() == [[1.0, 8.0, 3.0], [9.0, 0.0, 7.0]]
    (y,) = compare_with_ort("Imputer", [("X", x)], imputed_value_floats=[5.0], replaced_value_float=0.0)
    assert y[1, 1] == 5.0 and np.isnan(y[0, 1])


@pytest.mark.parametrize("dtype", [np.int64, np.int32])
def test_imputer_integers(dtype):
    x = np.array([[1, -1, 3], [-1, 2, -1]], dtype)
    (y,) = run_op("Imputer", [("X", x)], imputed_value_int64s=[5, 6, 7], replaced_value_int64=-1)
    assert y.dtype == dtype and y.tolist() == [[1, 6, 3], [5, 2, 7]]
    if dtype == np.int64:
        compare_with_ort("Imputer", [("X", x)], imputed_value_int64s=[5, 6, 7], replaced_value_int64=-1)


def test_imputer_errors():
    with pytest.raises(InvalidAttributeError, match="neither"):
        run_op("Imputer", [("X", X)], replaced_value_float=0.0)
    with pytest.raises(KernelError, match="integer imputed values but a float32 input"):
        run_op("Imputer", [("X", X)], imputed_value_int64s=[1])
    with pytest.raises(KernelError, match="'imputed_value' has 2 values, expected 1 or 3"):
        imputer(X, np.array([1.0, 2.0], np.float32), 0.0)


def test_imputer_keeps_input_unchanged():
    x = X.copy()
    y = imputer(x, np.array([7.0], np.float32), 0.0)
    assert (x == X).all() and y[1].tolist() == [7.0, 7.0, 7.0]


# ------------------------------------------------------------------------------------------
# FeatureVectorizer
# ------------------------------------------------------------------------------------------


def test_feature_vectorizer_pads_and_cuts():
    a = np.array([[1, 2], [3, 4]], np.float32)
    b = np.array([[5.5], [6.5]], np.float32)
    (y,) = compare_with_ort("FeatureVectorizer", [("A", a), ("B", b)], inputdimensions=[3, 1])
    assert y.tolist() == [[1, 2, 0, 5.5], [3, 4, 0, 6.5]]
    (y,) = compare_with_ort("FeatureVectorizer", [("A", a), ("B", b)], inputdimensions=[1, 1])
    assert y.tolist() == [[1, 5.5], [3, 6.5]]


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_feature_vectorizer_types_and_ranks(dtype):
    a = np.arange(8).reshape(2, 2, 2).astype(dtype)
    b = np.array([[5], [6]], dtype)
    (y,) = compare_with_ort("FeatureVectorizer", [("A", a), ("B", b)], inputdimensions=[4, 1])
    assert y.dtype == np.float32 and y.tolist() == [[0, 1, 2, 3, 5], [4, 5, 6, 7, 6]]
    (y,) = compare_with_ort("FeatureVectorizer", [("A", np.array([1, 2], dtype)), ("B", np.array([3], dtype))], inputdimensions=[2, 1])
    assert y.shape == (1, 3)


def test_feature_vectorizer_errors():
    with pytest.raises(KernelError, match="input 1 has 3 rows, input 0 has 2"):
        feature_vectorizer([np.zeros((2, 1)), np.zeros((3, 1))], [1, 1])
    with pytest.raises(KernelError, match="'inputdimensions' has 1 values for 2 inputs"):
        feature_vectorizer([np.zeros((2, 1)), np.zeros((2, 1))], [1])


# ------------------------------------------------------------------------------------------
# OneHotEncoder
# ------------------------------------------------------------------------------------------


def test_one_hot_encoder_ints_and_floats():
    (y,) = compare_with_ort("OneHotEncoder", [("X", np.array([[1, 5], [2, 3]], np.int64))], cats_int64s=[1, 2, 3])
    assert y.shape == (2, 2, 3) and y.dtype == np.float32
    assert y[0].tolist() == [[1, 0, 0], [0, 0, 0]] and y[1].tolist() == [[0, 1, 0], [0, 0, 1]]
    # floats are truncated toward zero: 1.7 -> 1, -0.5 -> 0
    for dtype in (np.float32, np.float64, np.int32):
        x = np.array([[1.7, 2.2, -0.5]]).astype(dtype)
        (y,) = run_op("OneHotEncoder", [("X", x)], cats_int64s=[1, 2, 0])
        expected = [[[1, 0, 0], [0, 1, 0], [0, 0, 1]]] if dtype != np.int32 else [[[1, 0, 0], [0, 1, 0], [0, 0, 1]]]
        assert y.tolist() == expected


def test_one_hot_encoder_strings_and_duplicates():
    (y,) = compare_with_ort("OneHotEncoder", [("X", np.array([["a", "c", "b"]], object))], cats_strings=["a", "b"])
    assert y.tolist() == [[[1, 0], [0, 0], [0, 1]]]
    # a category listed twice answers at its last position, as onnxruntime does
    (y,) = compare_with_ort("OneHotEncoder", [("X", np.array([1, 2], np.int64))], cats_int64s=[1, 1, 2])
    assert y.tolist() == [[0, 1, 0], [0, 0, 1]]


def test_one_hot_encoder_unknown_with_zeros_0():
    with pytest.raises(KernelError, match="unknown category 'c'"):
        run_op("OneHotEncoder", [("X", np.array([["a", "c"]], object))], cats_strings=["a", "b"], zeros=0)
    with pytest.raises(InvalidAttributeError, match="exactly one of 'cats_strings' and 'cats_int64s'"):
        run_op("OneHotEncoder", [("X", np.array([1], np.int64))])
