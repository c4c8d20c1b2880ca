"""The compiled (numba) paths of SVMClassifier, SVMRegressor, LinearClassifier, LinearRegressor and Normalizer against their numpy paths, onnxruntime and scikit-learn."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import onnxrt
from onnxrt import native as _jit
from onnxrt.fastpaths import ml as fastml

from ._util import ml_model, run_onnxrt, run_ort

numba = pytest.importorskip("numba")

ROWS = [1, 3, 7, 300]
TRANSFORMS = ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"]


@pytest.fixture(autouse=True)
def compiled():
    """numba is a dependency: the compiled kernels must load for these tests to mean anything."""
    assert _jit.kernels(fastml.ML_LOOPS) is not None, _jit.LOAD_ERROR


def both_paths(model, feeds):
    """(compiled outputs, numpy outputs) of one model, each from a fresh session. The
    compiled session runs twice: its first run binds the kernels' constants, later ones may
    take the operators' direct paths, and both must give the same outputs."""
    sess = onnxrt.InferenceSession(model.SerializeToString())
    got = sess.run(None, feeds)
    again = sess.run(None, feeds)
    for a, b in zip(got, again):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    with _jit.disabled():
        expected = run_onnxrt(model, feeds)
    return got, expected


def assert_outputs(got, expected, rtol=1e-6, atol=1e-7):
    """Same count, shapes and dtypes; labels exactly equal, floats close."""
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert isinstance(g, np.ndarray) and g.shape == e.shape and g.dtype == e.dtype, (g.shape, g.dtype, e.shape, e.dtype)
        if g.dtype.kind == "f":
            np.testing.assert_allclose(g, e, rtol=rtol, atol=atol, equal_nan=True)
        else:
            np.testing.assert_array_equal(g, e)


# ------------------------------------------------------------------------------------------
# the float64 exp of the kernels
# ------------------------------------------------------------------------------------------


def test_exp_nonpositive_is_within_two_ulp():
    from onnxrt.native import ml_loops as _jit_ml

    @numba.njit
    def run(a):
        out = np.empty_like(a)
        for i in range(a.size):
            out[i] = _jit_ml._exp_nonpositive(a[i])
        return out

    rng = np.random.default_rng(0)
    x = np.concatenate([-rng.uniform(0, 708.3, 200_000), -rng.uniform(0, 2, 200_000), -np.exp(rng.uniform(-700, 0, 50_000))])
    y = run(x)
    ref = np.exp(x)
    assert (np.abs(y - ref) <= 2 * np.spacing(ref)).all()
    special = np.array([0.0, -0.0, 1.0, 50.0, np.inf, -708.0, -708.4, -745.2, -1e4, -np.inf, np.nan])
    got = run(special)
    # positive arguments count as 0 (RBF's exponent, clipped); exp below 2.5e-308 flushes to 0
    np.testing.assert_array_equal(got[:5], 1.0)
    np.testing.assert_allclose(got[5], np.exp(-708.0), rtol=1e-15)
    np.testing.assert_array_equal(got[6:10], 0.0)
    assert np.isnan(got[10])


# ------------------------------------------------------------------------------------------
# SVMClassifier and SVMRegressor
# ------------------------------------------------------------------------------------------


def _svc_atts(rng, n_classes, kernel, prob, nf=5, post="NONE", strings=False):
    vpc = rng.integers(1, 6, n_classes)
    n_sv = int(vpc.sum())
    pairs = n_classes * (n_classes - 1) // 2
    atts = dict(
        coefficients=rng.standard_normal((n_classes - 1) * n_sv).tolist(),
        rho=rng.standard_normal(pairs).tolist(),
        kernel_type=kernel,
        kernel_params=[0.3, 0.2, 3.0],
        post_transform=post,
        vectors_per_class=vpc.tolist(),
        support_vectors=rng.standard_normal(n_sv * nf).tolist(),
    )
    if strings:
        atts["classlabels_strings"] = [f"c{i}" for i in range(n_classes)]
    else:
        atts["classlabels_ints"] = (np.arange(n_classes) * 3 - 2).tolist()
    if prob:
        atts["prob_a"] = (-rng.uniform(0.5, 3, pairs)).tolist()
        atts["prob_b"] = rng.uniform(-0.3, 0.3, pairs).tolist()
    return atts


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("prob", [False, True])
def test_svm_classifier_compiled_equals_numpy(kernel, n_classes, prob):
    rng = np.random.default_rng(n_classes * 10 + prob)
    atts = _svc_atts(rng, n_classes, kernel, prob)
    for n in ROWS:
        x = rng.standard_normal((n, 5)).astype(np.float32)
        model = ml_model("SVMClassifier", [("X", x)], 2, **atts)
        got, expected = both_paths(model, {"X": x})
        assert got[0].dtype == np.int64 and got[1].dtype == np.float32
        assert got[1].shape == (n, n_classes if prob or n_classes == 2 else n_classes * (n_classes - 1) // 2)
        assert_outputs(got, expected, rtol=1e-6, atol=1e-6)
        if prob:
            np.testing.assert_allclose(got[1].sum(axis=1), 1.0, rtol=1e-5)
        if n_classes > 2 or prob:  # against onnxruntime (its float32 kernels: 1e-5 apart)
            theirs = run_ort(model, {"X": x})
            np.testing.assert_array_equal(got[0], theirs[0])
            np.testing.assert_allclose(got[1], theirs[1], atol=2e-5)


@pytest.mark.parametrize("post", TRANSFORMS)
@pytest.mark.parametrize("prob", [False, True])
def test_svm_classifier_compiled_transforms_and_string_labels(post, prob):
    rng = np.random.default_rng(5)
    for n_classes in (2, 4):
        atts = _svc_atts(rng, n_classes, "RBF", prob, post=post, strings=True)
        x = rng.standard_normal((9, 5)).astype(np.float32)
        got, expected = both_paths(ml_model("SVMClassifier", [("X", x)], 2, **atts), {"X": x})
        assert got[0].dtype == object
        assert_outputs(got, expected, rtol=1e-6, atol=1e-6)


def test_svm_classifier_compiled_nan_rows():
    # a NaN feature gives NaN decision values: no vote for the first class of each pair, NaN probabilities
    rng = np.random.default_rng(7)
    atts = _svc_atts(rng, 3, "RBF", True)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    x[1, 2] = np.nan
    got, expected = both_paths(ml_model("SVMClassifier", [("X", x)], 2, **atts), {"X": x})
    assert_outputs(got, expected)
    assert np.isnan(got[1][1]).all() and not np.isnan(got[1][[0, 2, 3]]).any()


@pytest.mark.parametrize("part_macs", [4_000_000, 1_000])
def test_svm_compiled_rows_split_over_the_pool(monkeypatch, part_macs):
    # many rows, in parts small enough for the kernel pool: the parts must join seamlessly
    monkeypatch.setattr(fastml, "SVM_PART_MACS", part_macs)
    rng = np.random.default_rng(8)
    atts = _svc_atts(rng, 4, "RBF", True)
    x = rng.standard_normal((2000, 5)).astype(np.float32)
    got, expected = both_paths(ml_model("SVMClassifier", [("X", x)], 2, **atts), {"X": x})
    assert_outputs(got, expected, rtol=1e-6, atol=1e-6)
    reg = dict(coefficients=rng.standard_normal(40).tolist(), rho=[0.3], kernel_type="RBF", kernel_params=[0.2, 0.0, 0.0],
               n_supports=40, support_vectors=rng.standard_normal(200).tolist())
    got, expected = both_paths(ml_model("SVMRegressor", [("X", x)], **reg), {"X": x})
    assert_outputs(got, expected, rtol=1e-9, atol=1e-9)


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor_compiled_equals_numpy(kernel, one_class):
    rng = np.random.default_rng(9)
    atts = dict(coefficients=rng.standard_normal(7).tolist(), rho=[0.25], kernel_type=kernel, kernel_params=[0.4, 0.1, 2.0],
                n_supports=7, support_vectors=rng.standard_normal(21).tolist(), one_class=one_class)
    for n in ROWS:
        x = rng.standard_normal((n, 3)).astype(np.float32)
        model = ml_model("SVMRegressor", [("X", x)], **atts)
        got, expected = both_paths(model, {"X": x})
        assert got[0].shape == (n, 1) and got[0].dtype == np.float32
        assert_outputs(got, expected, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got[0], run_ort(model, {"X": x})[0], rtol=1e-5, atol=1e-5)


# ------------------------------------------------------------------------------------------
# LinearClassifier, LinearRegressor
# ------------------------------------------------------------------------------------------


def _linear_atts(rng, n_scores, n_labels, nf=6, post="NONE", strings=False):
    atts = dict(coefficients=rng.standard_normal(n_scores * nf).tolist(), intercepts=rng.standard_normal(n_scores).tolist(),
                post_transform=post)
    if strings:
        atts["classlabels_strings"] = [f"k{i}" for i in range(n_labels)]
    else:
        atts["classlabels_ints"] = list(range(10, 10 + n_labels))
    return atts


@pytest.mark.parametrize("post", TRANSFORMS)
@pytest.mark.parametrize("scores_labels", [(3, 3), (2, 2), (1, 2), (1, 1), (4, 6)])
@pytest.mark.parametrize("strings", [False, True])
def test_linear_classifier_compiled_equals_numpy(post, scores_labels, strings):
    n_scores, n_labels = scores_labels
    rng = np.random.default_rng(n_scores * 7 + n_labels)
    atts = _linear_atts(rng, n_scores, n_labels, post=post, strings=strings)
    for n in ROWS:
        x = (rng.standard_normal((n, 6)) * 2).astype(np.float32)
        model = ml_model("LinearClassifier", [("X", x)], 2, **atts)
        got, expected = both_paths(model, {"X": x})
        assert got[1].dtype == np.float32 and got[1].shape == (n, 2 if (n_scores, n_labels) == (1, 2) else n_scores)
        # probit's slope amplifies the last-bit differences of the scores (summed in another order)
        assert_outputs(got, expected, rtol=2e-5 if post == "PROBIT" else 2e-6, atol=1e-6)
        # onnxruntime approximates probit, leaves a softmax of the binary encoding out and
        # rejects one score with one label
        if post != "PROBIT" and n_labels > 1 and not (post.startswith("SOFTMAX") and n_scores == 1):
            theirs = run_ort(model, {"X": x})
            np.testing.assert_array_equal(got[0], theirs[0])
            np.testing.assert_allclose(got[1], theirs[1], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
@pytest.mark.parametrize("op", ["SVMClassifier", "LinearClassifier"])
def test_classifiers_compiled_input_types_and_shapes(op, dtype):
    """Vectors, Fortran-ordered and strided inputs of every input type: both paths agree."""
    rng = np.random.default_rng(6)
    if op == "SVMClassifier":
        atts, x, rtol = _svc_atts(rng, 3, "RBF", True), rng.standard_normal((11, 5)) * 2, 1e-6
    else:
        atts, x, rtol = _linear_atts(rng, 3, 3, post="SOFTMAX"), rng.standard_normal((12, 6)) * 3, 2e-6
    x = x.astype(dtype)
    for feed in (x, x[0], np.asfortranarray(x), x[::2]):
        got, expected = both_paths(ml_model(op, [("X", feed)], 2, **atts), {"X": feed})
        assert got[1].shape == (1 if feed.ndim == 1 else feed.shape[0], 3)
        assert_outputs(got, expected, rtol=rtol, atol=1e-6)


def test_linear_classifier_compiled_nan_and_infinite_scores():
    # np.argmax's rule (the first NaN wins) and softmax's NaN rows, in both paths
    atts = dict(coefficients=[1.0, 0.0, 0.0, 1.0, 1.0, 1.0], intercepts=[0.0, 0.0, 0.0], classlabels_ints=[0, 1, 2])
    x = np.array([[1.0, 2.0], [np.nan, 0.0], [0.0, np.nan], [np.inf, 0.0], [-np.inf, 0.0], [0.0, 0.0]], np.float32)
    for post in ("NONE", "SOFTMAX", "LOGISTIC"):
        got, expected = both_paths(ml_model("LinearClassifier", [("X", x)], 2, post_transform=post, **atts), {"X": x})
        assert_outputs(got, expected)


@pytest.mark.parametrize("part_macs", [2_000_000, 100])
@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"])
def test_linear_models_compiled_many_rows(monkeypatch, part_macs, post):
    # blocks of 256 rows inside the kernel, parts over the pool: the same values as numpy's
    monkeypatch.setattr(fastml, "LINEAR_PART_MACS", part_macs)
    rng = np.random.default_rng(12)
    x = rng.standard_normal((3001, 6)).astype(np.float32)
    atts = _linear_atts(rng, 5, 5, post=post)
    got, expected = both_paths(ml_model("LinearClassifier", [("X", x)], 2, **atts), {"X": x})
    assert_outputs(got, expected, rtol=2e-6, atol=1e-6)
    reg = dict(coefficients=atts["coefficients"], intercepts=atts["intercepts"], targets=5, post_transform=post)
    got, expected = both_paths(ml_model("LinearRegressor", [("X", x)], **reg), {"X": x})
    assert_outputs(got, expected, rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("post", TRANSFORMS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_linear_regressor_compiled_equals_numpy(post, dtype):
    rng = np.random.default_rng(13)
    for targets in (1, 3):
        atts = dict(coefficients=rng.standard_normal(targets * 4).tolist(), intercepts=rng.standard_normal(targets).tolist(),
                    targets=targets, post_transform=post)
        for n in ROWS:
            x = (rng.standard_normal((n, 4)) * 2).astype(dtype)
            got, expected = both_paths(ml_model("LinearRegressor", [("X", x)], **atts), {"X": x})
            assert got[0].shape == (n, targets) and got[0].dtype == np.float32
            assert_outputs(got, expected, rtol=2e-6, atol=1e-6)


# ------------------------------------------------------------------------------------------
# Normalizer
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_normalizer_compiled_equals_numpy(norm, dtype):
    rng = np.random.default_rng(14)
    for n in (*ROWS, 64, 100):
        x = (rng.standard_normal((n, 5)) * 4).astype(dtype)
        x[0] = 0  # a zero row stays as it is
        model = ml_model("Normalizer", [("X", x)], norm=norm)
        got, expected = both_paths(model, {"X": x})
        assert got[0].shape == (n, 5) and got[0].dtype == np.float32
        assert_outputs(got, expected, rtol=1e-6, atol=1e-7)
        if dtype != np.int64 or norm != "MAX":
            np.testing.assert_allclose(got[0], run_ort(model, {"X": x})[0], rtol=1e-5, atol=1e-6)


def test_normalizer_compiled_shapes_and_special_values(monkeypatch):
    x = np.array([[1.0, np.nan, 2.0], [np.inf, 1.0, 0.0], [-3.0, -1.0, -2.0], [0.0, 0.0, 0.0]], np.float32)
    for norm in ("MAX", "L1", "L2"):
        for feed in (x, x[2], np.asfortranarray(x), x[:, :0]):
            got, expected = both_paths(ml_model("Normalizer", [("X", feed)], norm=norm), {"X": feed})
            assert_outputs(got, expected)
    # a large input goes through normalizer() by parts over the pool
    monkeypatch.setattr(fastml, "NORMALIZER_PART_ELEMENTS", 64)
    big = np.random.default_rng(15).standard_normal((1000, 3)).astype(np.float32)
    got, expected = both_paths(ml_model("Normalizer", [("X", big)], norm="L2"), {"X": big})
    assert_outputs(got, expected)


# ------------------------------------------------------------------------------------------
# scikit-learn models, as the benchmark converts them
# ------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def classification():
    pytest.importorskip("sklearn")
    pytest.importorskip("skl2onnx")
    from sklearn.datasets import make_classification

    x, y = make_classification(900, 12, n_informative=6, n_classes=3, random_state=0)
    return x.astype(np.float32), y


def _convert(model, x):
    from skl2onnx import to_onnx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return to_onnx(model, x[:1], options={id(model): {"zipmap": False}}, target_opset={"": 21, "ai.onnx.ml": 3})


@pytest.mark.parametrize("binary", [False, True])
@pytest.mark.parametrize("kind", ["svc_rbf", "svc_poly", "logistic"])
def test_sklearn_models_compiled_and_numpy(classification, binary, kind):
    from sklearn.linear_model import LogisticRegression
    from sklearn.svm import SVC

    x, y = classification
    if binary:
        y = (y == 1).astype(np.int64)
    est = {"svc_rbf": lambda: SVC(probability=True, random_state=0),
           "svc_poly": lambda: SVC(kernel="poly", degree=2, probability=True, random_state=0),
           "logistic": lambda: LogisticRegression(max_iter=1000)}[kind]()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        est.fit(x[:600], y[:600])
    onx = _convert(est, x)
    rng = np.random.default_rng(16)
    sess = onnxrt.InferenceSession(onx.SerializeToString())  # one session for every batch size
    for n in (1, 2, 5, 300, 1):
        xs = x[rng.integers(0, len(x), n)]
        got, expected = both_paths(onx, {"X": xs})
        assert_outputs(got, expected, rtol=1e-6, atol=1e-6)
        assert_outputs(sess.run(None, {"X": xs}), got, rtol=0, atol=0)
        np.testing.assert_array_equal(got[0], est.predict(xs))
        np.testing.assert_allclose(got[1], est.predict_proba(xs), atol=1e-4, rtol=0)
