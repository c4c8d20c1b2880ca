"""The ai.onnx.ml kernels' declared fast paths (onnxrt.fastpaths.ml) against their reference kernels.

Each test builds a one-node model whose input makes the path apply, checks the session
picked it, and compares every output (dtype, shape, values; labels exactly) with a session
on the reference kernels (SessionOptions.fast_paths = False). Tolerances follow the
arithmetic: the compiled kernels sum F products in another order than BLAS (float32: F
eps sum|terms|), the transforms (softmax, logistic) do not amplify absolute errors.
"""

from __future__ import annotations

import numpy as np
import pytest

import onnxrt
from onnxrt import dispatch, native
from onnxrt.fastpaths import ml as fastml
from tests.ops.fastpath_check import picked

from ._util import ml_model

EPS32, EPS64 = float(np.finfo(np.float32).eps), float(np.finfo(np.float64).eps)


def check_path(model, feeds, op_type, path, rtol=0.0, atol=0.0):
    """Run ``model`` with fast paths (twice: the second run has the compiled kernels),
    assert ``op_type`` picked ``path``, and compare with the reference session: the same
    dtypes and shapes, float outputs within rtol/atol, labels (ints, strings) equal."""
    sess = onnxrt.OnnxInference(model)
    sess.run(feeds)
    got = sess.run(feeds)
    assert path in picked(sess, op_type), sess.fast_paths()
    so = onnxrt.SessionOptions()
    so.fast_paths = False
    ref_sess = onnxrt.OnnxInference(model, options=so)
    expected = ref_sess.run(feeds)
    assert ref_sess.fast_paths() == []
    fast, ref = [got[k] for k in expected], [expected[k] for k in expected]
    for a, b in zip(fast, ref):
        assert a.dtype == b.dtype and a.shape == b.shape, (a.dtype, a.shape, b.dtype, b.shape)
        if a.dtype.kind == "f":
            np.testing.assert_allclose(a, b, rtol=rtol, atol=atol)
        else:
            np.testing.assert_array_equal(a, b)
    return fast, ref


@pytest.fixture(autouse=True)
def compiled():
    if native.kernels(fastml.ML_LOOPS) is None:
        pytest.skip("no compiled kernels")


def _linear_atts(rng, n_scores, n_labels, nf, post, strings=False):
    atts = dict(coefficients=rng.standard_normal(n_scores * nf).tolist(), intercepts=rng.standard_normal(n_scores).tolist(),
                post_transform=post)
    if strings:
        atts["classlabels_strings"] = [f"k{i}" for i in range(n_labels)]
    else:
        atts["classlabels_ints"] = list(range(10, 10 + n_labels))
    return atts


def _score_tol(x, atts, nf, dtype):
    """|x|.|w| + |b| bounds the terms' magnitude; nf + 1 terms summed in another order."""
    w = np.abs(np.asarray(atts["coefficients"])).reshape(-1, nf)
    mag = float((np.abs(x.astype(np.float64)) @ w.T).max() + np.abs(atts["intercepts"]).max())
    eps = EPS64 if dtype == np.float64 else EPS32
    return (nf + 1) * eps * mag


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO", "PROBIT"])
@pytest.mark.parametrize("rows", [1, 5, 4001])
@pytest.mark.parametrize("strings", [False, True])
def test_linear_classifier_compiled(post, rows, strings, monkeypatch):
    # 4001 rows in parts of 250 rows: the pool shares them
    monkeypatch.setattr(fastml, "LINEAR_PART_MACS", 250 * 24)
    rng = np.random.default_rng(1)
    nf = 6
    atts = _linear_atts(rng, 4, 4, nf, post, strings)
    x = rng.standard_normal((rows, nf)).astype(np.float32)
    fast, ref = check_path(ml_model("LinearClassifier", [("X", x)], 2, **atts), {"X": x}, "LinearClassifier",
                           "compiled linear", atol=_score_tol(x, atts, nf, np.float32) + EPS32)
    assert fast[0].shape == (rows,) and fast[1].shape == (rows, 4) and fast[1].dtype == np.float32
    assert fast[0].dtype == (np.dtype(object) if strings else np.int64)


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_linear_classifier_compiled_other_input_types(dtype):
    rng = np.random.default_rng(2)
    nf = 5
    atts = _linear_atts(rng, 3, 3, nf, "SOFTMAX")
    x = (rng.standard_normal((7, nf)) * 3).astype(dtype)
    tol = _score_tol(x, atts, nf, np.float64 if dtype == np.float64 else np.float32)
    fast, _ = check_path(ml_model("LinearClassifier", [("X", x)], 2, **atts), {"X": x}, "LinearClassifier",
                         "compiled linear", atol=tol + EPS32)
    assert fast[1].dtype == np.float32 and fast[1].shape == (7, 3)
    # one row as [F]
    fast, _ = check_path(ml_model("LinearClassifier", [("X", x[0])], 2, **atts), {"X": x[0]}, "LinearClassifier",
                         "compiled linear", atol=tol + EPS32)
    assert fast[0].shape == (1,) and fast[1].shape == (1, 3)


def test_linear_classifier_binary_encoding_stays_on_the_reference():
    rng = np.random.default_rng(3)
    atts = _linear_atts(rng, 1, 2, 4, "LOGISTIC")
    x = rng.standard_normal((3, 4)).astype(np.float32)
    sess = onnxrt.OnnxInference(ml_model("LinearClassifier", [("X", x)], 2, **atts))
    out = sess.run({"X": x})
    assert picked(sess, "LinearClassifier") == {"reference"}
    s = x.astype(np.float64) @ np.asarray(atts["coefficients"]) + atts["intercepts"][0]
    p = 1 / (1 + np.exp(-s))
    np.testing.assert_allclose(out["out1"], np.stack([1 - p, p], axis=1), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(out["out0"], np.where(s > 0, 11, 10))


@pytest.mark.parametrize("post", ["NONE", "SOFTMAX", "LOGISTIC", "PROBIT"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_linear_regressor_compiled(post, dtype):
    rng = np.random.default_rng(4)
    nf, targets = 6, 3
    atts = dict(coefficients=rng.standard_normal(targets * nf).tolist(), intercepts=rng.standard_normal(targets).tolist(),
                targets=targets, post_transform=post)
    x = rng.standard_normal((300, nf)).astype(dtype)
    # float64 scores are rounded to float32 at the end: one float32 ulp more
    tol = _score_tol(x, atts, nf, dtype) + EPS32 * 10
    fast, _ = check_path(ml_model("LinearRegressor", [("X", x)], **atts), {"X": x}, "LinearRegressor",
                         "compiled linear", atol=tol, rtol=2 * EPS32)
    assert fast[0].shape == (300, targets) and fast[0].dtype == np.float32


def _svc_atts(rng, n_classes, kernel, prob, nf=5, post="NONE", strings=False):
    vpc = rng.integers(1, 6, n_classes)
    n_sv = int(vpc.sum())
    pairs = n_classes * (n_classes - 1) // 2
    atts = dict(coefficients=rng.standard_normal((n_classes - 1) * n_sv).tolist(), rho=rng.standard_normal(pairs).tolist(),
                kernel_type=kernel, kernel_params=[0.3, 0.2, 3.0], post_transform=post, vectors_per_class=vpc.tolist(),
                support_vectors=rng.standard_normal(n_sv * nf).tolist())
    if strings:
        atts["classlabels_strings"] = [f"c{i}" for i in range(n_classes)]
    else:
        atts["classlabels_ints"] = list(range(n_classes))
    if prob:
        atts["prob_a"] = (-rng.uniform(0.5, 2, pairs)).tolist()
        atts["prob_b"] = rng.uniform(-0.2, 0.2, pairs).tolist()
    return atts


# the kernel computes in float64 like the reference (decision values agree to ~1e-12);
# libsvm's coupling then iterates to a tolerance: the same iterations, float32 results
# within a few float32 ulp
SVM_RTOL, SVM_ATOL = 8 * EPS32, 1e-7


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("n_classes, prob, post, strings",
                         [(3, True, "NONE", False), (3, False, "NONE", False), (2, False, "LOGISTIC", True),
                          (4, True, "SOFTMAX", False), (2, True, "NONE", True)])
def test_svm_classifier_compiled(kernel, n_classes, prob, post, strings):
    rng = np.random.default_rng(5)
    atts = _svc_atts(rng, n_classes, kernel, prob, post=post, strings=strings)
    for x in (rng.standard_normal((9, 5)).astype(np.float32), rng.standard_normal((4, 5))):
        fast, _ = check_path(ml_model("SVMClassifier", [("X", x)], 2, **atts), {"X": x}, "SVMClassifier",
                             "compiled svm", rtol=SVM_RTOL, atol=SVM_ATOL)
        assert fast[0].shape == (len(x),) and fast[1].dtype == np.float32
        assert fast[1].shape == (len(x), n_classes if prob or n_classes == 2 else n_classes * (n_classes - 1) // 2)


def test_svm_compiled_many_rows_over_the_pool(monkeypatch):
    monkeypatch.setattr(fastml, "SVM_PART_MACS", 1000)
    rng = np.random.default_rng(6)
    x = rng.standard_normal((2000, 5)).astype(np.float32)
    atts = _svc_atts(rng, 4, "RBF", True)
    check_path(ml_model("SVMClassifier", [("X", x)], 2, **atts), {"X": x}, "SVMClassifier", "compiled svm",
               rtol=SVM_RTOL, atol=SVM_ATOL)
    reg = dict(coefficients=rng.standard_normal(40).tolist(), rho=[0.3], kernel_type="RBF", kernel_params=[0.2, 0.0, 0.0],
               n_supports=40, support_vectors=rng.standard_normal(200).tolist())
    fast, _ = check_path(ml_model("SVMRegressor", [("X", x)], **reg), {"X": x}, "SVMRegressor", "compiled svm",
                         rtol=2 * EPS32, atol=1e-9)
    assert fast[0].shape == (2000, 1) and fast[0].dtype == np.float32


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("one_class", [0, 1])
def test_svm_regressor_compiled(kernel, one_class):
    rng = np.random.default_rng(7)
    atts = dict(coefficients=rng.standard_normal(12).tolist(), rho=[0.1], kernel_type=kernel, kernel_params=[0.3, 0.2, 3.0],
                n_supports=12, support_vectors=rng.standard_normal(12 * 4).tolist(), one_class=one_class)
    x = rng.standard_normal((33, 4)).astype(np.float32)
    # float64 sums of 12 terms, rounded to float32 once (one_class: exactly +-1)
    fast, _ = check_path(ml_model("SVMRegressor", [("X", x)], **atts), {"X": x}, "SVMRegressor", "compiled svm",
                         rtol=2 * EPS32, atol=1e-9)
    assert fast[0].shape == (33, 1) and fast[0].dtype == np.float32


def test_linear_svm_classifier_has_no_compiled_path():
    # without support vectors SVMClassifier is a linear model: the reference's product
    rng = np.random.default_rng(8)
    atts = dict(coefficients=rng.standard_normal(12).tolist(), rho=[0.5], kernel_type="LINEAR", classlabels_ints=[0, 1, 2])
    x = rng.standard_normal((5, 4)).astype(np.float32)
    sess = onnxrt.OnnxInference(ml_model("SVMClassifier", [("X", x)], 2, **atts))
    out = sess.run({"X": x})
    assert picked(sess, "SVMClassifier") == {"reference"}
    scores = x.astype(np.float64) @ np.asarray(atts["coefficients"]).reshape(3, 4).T + 0.5
    np.testing.assert_allclose(out["out1"], scores, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
@pytest.mark.parametrize("layout", ["rows", "one row", "fortran", "pool"])
def test_normalizer_compiled(norm, dtype, layout, monkeypatch):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal((50, 7)) * 4).astype(dtype)
    x[3] = 0  # a zero row stays as it is
    if layout == "one row":
        x = x[1]
    elif layout == "fortran":
        x = np.asfortranarray(x)
    elif layout == "pool":
        monkeypatch.setattr(fastml, "NORMALIZER_PART_ELEMENTS", 70)  # parts of 10 rows
    # a sum of 7 terms then one division: (7 + 1) eps relative
    fast, _ = check_path(ml_model("Normalizer", [("X", x)], norm=norm), {"X": x}, "Normalizer", "compiled rows",
                         rtol=8 * EPS32, atol=1e-30)
    assert fast[0].shape == x.shape and fast[0].dtype == np.float32


def test_every_ml_path_is_listed_with_a_first_line():
    from onnxrt.fastpaths import MODULES

    for op in ("LinearClassifier", "LinearRegressor", "SVMClassifier", "SVMRegressor", "Normalizer", "TreeEnsemble",
               "TreeEnsembleRegressor", "TreeEnsembleClassifier"):
        assert MODULES[("ai.onnx.ml", op)] == "ml"
        paths = dispatch.paths_for(op, "ai.onnx.ml")
        assert paths and all(p.doc and p.native and p.prepared for p in paths)


# -- tree ensembles ---------------------------------------------------------------------------------

from ._random_trees import random_trees, random_v5, v1_attributes  # noqa: E402

# a target's score sums at most 7 float64 votes (|w| <= ~4) in another order, then rounds
# to float32 once: a float32 ulp of the result, or 7 eps64 sum|w| near zero
TREE_RTOL, TREE_ATOL = EPS32, 1e-12
GRID = [-np.inf, -1.0, 0.0, 1.0, np.inf, np.nan, 0.25]
XVALUES = np.array([-np.inf, -1.0, 0.0, 0.25, 0.5, 1.0, np.inf, np.nan])


def _class_atts(rng, base):
    nodes, leaves = random_trees(rng, 7, 6, 4, modes=("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT"), missing=True,
                                 grid=GRID)
    votes = [(t, n, int(rng.integers(0, 3)), float(np.float32(rng.standard_normal()))) for t, n in leaves]
    atts = v1_attributes(nodes, "class", votes)
    atts["classlabels_int64s"] = [5, 6, 7]
    if base:
        atts["base_values"] = [0.1, -0.2, 0.3]
    return atts


@pytest.mark.parametrize("rows", [1, 40, 1100])
@pytest.mark.parametrize("base", [False, True])  # without base values the "has a vote" rule needs the leaves
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64])
def test_tree_classifier_compiled_walk(rows, base, dtype, monkeypatch):
    monkeypatch.setattr(fastml, "TREE_PART_STEPS", 64)  # 1100 rows: parts over the pool
    rng = np.random.default_rng(10)
    atts = _class_atts(rng, base)
    x = rng.choice(XVALUES if dtype != np.int64 else np.array([-1, 0, 1, 2]), size=(rows, 4)).astype(dtype)
    fast, _ = check_path(ml_model("TreeEnsembleClassifier", [("X", x)], 2, ml_opset=1, **atts), {"X": x},
                         "TreeEnsembleClassifier", "compiled walk", rtol=TREE_RTOL, atol=TREE_ATOL)
    assert fast[0].shape == (rows,) and fast[0].dtype == np.int64
    assert fast[1].shape == (rows, 3) and fast[1].dtype == np.float32


@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE"])
@pytest.mark.parametrize("rows", [1, 3, 500])
@pytest.mark.parametrize("layout", ["C", "fortran", "one row"])
def test_tree_regressor_compiled_walk(aggregate, rows, layout):
    rng = np.random.default_rng(11)
    atts = _class_atts(rng, True)
    reg = dict(atts, n_targets=3, aggregate_function=aggregate, post_transform="SOFTMAX")
    for key in ("class_ids", "class_nodeids", "class_treeids", "class_weights", "classlabels_int64s"):
        val = reg.pop(key)
        if key != "classlabels_int64s":
            reg[key.replace("class_", "target_")] = val
    x = rng.choice(XVALUES, size=(rows, 4)).astype(np.float32)
    x = x[0] if layout == "one row" else (np.asfortranarray(x) if layout == "fortran" else x)
    fast, _ = check_path(ml_model("TreeEnsembleRegressor", [("X", x)], ml_opset=1, **reg), {"X": x},
                         "TreeEnsembleRegressor", "compiled walk", rtol=TREE_RTOL, atol=TREE_ATOL)
    assert fast[0].shape == (1 if layout == "one row" else rows, 3) and fast[0].dtype == np.float32


@pytest.mark.parametrize("dtype, elem", [(np.float32, 1), (np.float64, 11), (np.float16, 10)])
@pytest.mark.parametrize("aggregate", [0, 1])  # AVERAGE, SUM
def test_tree_ensemble_v5_compiled_walk(dtype, elem, aggregate):
    rng = np.random.default_rng(12)
    atts = random_v5(rng, 4, 4, 3, 2, modes=[0, 1, 2, 3], missing=True, grid=[-1.0, 0.0, 0.5, 1.0, 2.0],
                     dtype=np.float32 if dtype == np.float16 else dtype, aggregate=aggregate, post=0)
    x = rng.choice(np.array([-1.0, 0.0, 0.5, 0.75, 1.0, 2.0, np.nan]), size=(25, 3)).astype(dtype)
    model = ml_model("TreeEnsemble", [("X", x)], ml_opset=5, opset=21, **atts)
    # float16 outputs: the scores agree to float64 rounding, then round once to float16
    rtol = float(np.finfo(dtype).eps) if dtype != np.float64 else 16 * EPS64
    fast, _ = check_path(model, {"X": x}, "TreeEnsemble", "compiled walk", rtol=rtol, atol=TREE_ATOL)
    assert fast[0].dtype == dtype and fast[0].shape == (25, 2)


def test_tree_min_max_and_member_splits_stay_on_the_reference():
    rng = np.random.default_rng(13)
    x = rng.choice(np.array([-1.0, 0.0, 0.5, 1.0, 2.0]), size=(10, 3)).astype(np.float32)
    for aggregate, modes in ((2, [0, 1]), (1, [0, 6])):  # MIN; a BRANCH_MEMBER split
        atts = random_v5(rng, 3, 3, 3, 2, modes=modes, grid=[-1.0, 0.0, 0.5, 1.0, 2.0], aggregate=aggregate)
        sess = onnxrt.OnnxInference(ml_model("TreeEnsemble", [("X", x)], ml_opset=5, opset=21, **atts))
        y = sess.run({"X": x})
        (out,) = y.values()
        assert out.shape == (10, 2) and out.dtype == np.float32
        assert picked(sess, "TreeEnsemble") == {"reference"}
