"""LinearClassifier, LinearRegressor, SVMClassifier, SVMRegressor: spec formulas, onnxruntime, libsvm."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.special import erfinv

from onnxrt.errors import InvalidAttributeError, KernelError
from onnxrt.ops_ml.op_svm import kernel_matrix, pairwise_coupling

from ._util import compare_with_ort, ml_model, run_onnxrt, run_op, run_ort
from .test_transforms import loop_softmax_zero

RNG = np.random.default_rng(3)
X = RNG.standard_normal((12, 4)).astype(np.float32)
TRANSFORMS = ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"]


def _sigmoid(v):
    return 1 / (1 + np.exp(-v))


def softmax(s):
    e = np.exp(s - s.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def softmax_zero(s):
    return np.array([loop_softmax_zero(list(r)) for r in s])


def _probit(p):
    return np.sqrt(2) * erfinv(2 * np.asarray(p, np.float64) - 1)


# ------------------------------------------------------------------------------------------
# LinearClassifier
# ------------------------------------------------------------------------------------------

COEF3 = RNG.standard_normal(12).round(3).tolist()
INTER3 = [0.1, -0.2, 0.3]


@pytest.mark.parametrize("post", TRANSFORMS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int64, np.int32])
def test_linear_classifier_multiclass_matches_onnxruntime(post, dtype):
    x = (X * 3).astype(dtype)
    labels, z = compare_with_ort(
        "LinearClassifier", [("X", x)], 2, atol=1e-5, coefficients=COEF3, intercepts=INTER3, classlabels_ints=[4, 5, 6], post_transform=post
    )
    raw = x.astype(np.float64) @ np.array(COEF3).reshape(3, 4).T + INTER3
    assert labels.dtype == np.int64 and labels.tolist() == np.array([4, 5, 6])[raw.argmax(1)].tolist()
    expected = {"NONE": raw, "LOGISTIC": _sigmoid(raw), "SOFTMAX": softmax(raw), "SOFTMAX_ZERO": softmax_zero(raw)}[post]
    assert z.dtype == np.float32
    np.testing.assert_allclose(z, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("post", TRANSFORMS)
def test_linear_classifier_binary_single_score(post):
    # one intercept and two labels: the label is the second when s > 0 (onnxruntime's encoding)
    labels, z = compare_with_ort(
        "LinearClassifier", [("X", X)], 2, coefficients=COEF3[:4], intercepts=[0.1], classlabels_strings=["no", "yes"], post_transform=post
    )
    s = X.astype(np.float64) @ np.array(COEF3[:4]) + 0.1
    assert labels.tolist() == np.where(s > 0, "yes", "no").tolist()
    if post == "LOGISTIC":
        np.testing.assert_allclose(z, np.stack([1 - _sigmoid(s), _sigmoid(s)], 1), rtol=1e-5)
    else:
        np.testing.assert_allclose(z, np.stack([1 - s, s], 1), rtol=1e-5, atol=1e-6)


def test_linear_classifier_probit_is_exact():
    labels, z = run_op("LinearClassifier", [("X", X)], 2, coefficients=[0.01] * 12, intercepts=[0.2, 0.5, 0.7], classlabels_ints=[0, 1, 2], post_transform="PROBIT")
    raw = X.astype(np.float64) @ np.full((4, 3), 0.01) + [0.2, 0.5, 0.7]
    np.testing.assert_allclose(z, _probit(raw), rtol=1e-5, atol=1e-6)
    # onnxruntime approximates erfinv (about 1e-3 off)
    model = ml_model("LinearClassifier", [("X", X)], 2, coefficients=[0.01] * 12, intercepts=[0.2, 0.5, 0.7], classlabels_ints=[0, 1, 2], post_transform="PROBIT")
    theirs = run_ort(model, {"X": X})[1]
    assert 1e-5 < np.abs(theirs - _probit(raw)).max() < 1e-2


def test_linear_classifier_one_dimensional_input_and_no_intercepts():
    labels, z = compare_with_ort("LinearClassifier", [("X", X[0])], 2, coefficients=COEF3, intercepts=INTER3, classlabels_ints=[0, 1, 2])
    assert z.shape == (1, 3) and labels.shape == (1,)
    # without intercepts the score count comes from coefficients / features
    labels, z = run_op("LinearClassifier", [("X", X)], 2, coefficients=COEF3, classlabels_ints=[0, 1, 2])
    np.testing.assert_allclose(z, X.astype(np.float64) @ np.array(COEF3).reshape(3, 4).T, rtol=1e-5, atol=1e-6)


def test_linear_classifier_errors():
    with pytest.raises(InvalidAttributeError, match="defines no class labels"):
        run_op("LinearClassifier", [("X", X)], 2, coefficients=COEF3, intercepts=INTER3)
    with pytest.raises(InvalidAttributeError, match="3 intercepts .* but 2 class labels"):
        run_op("LinearClassifier", [("X", X)], 2, coefficients=COEF3, intercepts=INTER3, classlabels_ints=[0, 1])
    with pytest.raises(KernelError, match="12 coefficients, expected 3 x 5"):
        run_op("LinearClassifier", [("X", np.zeros((2, 5), np.float32))], 2, coefficients=COEF3, intercepts=INTER3, classlabels_ints=[0, 1, 2])


# ------------------------------------------------------------------------------------------
# LinearRegressor
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("post", TRANSFORMS)
def test_linear_regressor_multi_target_matches_onnxruntime(post):
    (y,) = compare_with_ort("LinearRegressor", [("X", X)], coefficients=COEF3, intercepts=INTER3, targets=3, post_transform=post, atol=1e-5)
    assert y.dtype == np.float32 and y.shape == (12, 3)


@pytest.mark.parametrize("post", TRANSFORMS)
@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_linear_regressor_other_input_types(post, dtype):
    # onnxruntime implements float only
    x = (X * 2).astype(dtype)
    (y,) = run_op("LinearRegressor", [("X", x)], coefficients=COEF3, intercepts=INTER3, targets=3, post_transform=post)
    raw = x.astype(np.float64) @ np.array(COEF3).reshape(3, 4).T + INTER3
    expected = {"NONE": raw, "LOGISTIC": _sigmoid(raw), "SOFTMAX": softmax(raw), "SOFTMAX_ZERO": softmax_zero(raw)}[post]
    assert y.dtype == np.float32
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-5)


def test_linear_regressor_single_target():
    (y,) = compare_with_ort("LinearRegressor", [("X", X)], coefficients=COEF3[:4], intercepts=[0.5])
    np.testing.assert_allclose(y[:, 0], X.astype(np.float64) @ COEF3[:4] + 0.5, rtol=1e-5, atol=1e-6)
    (y1,) = compare_with_ort("LinearRegressor", [("X", X[0])], coefficients=COEF3[:4])
    assert y1.shape == (1, 1)
    # the spec applies post_transform to any target count; onnxruntime skips it for one target
    model = ml_model("LinearRegressor", [("X", X)], coefficients=COEF3[:4], intercepts=[0.5], post_transform="LOGISTIC")
    np.testing.assert_allclose(run_onnxrt(model, {"X": X})[0], _sigmoid(y), rtol=1e-5)
    np.testing.assert_allclose(run_ort(model, {"X": X})[0], y, rtol=1e-6)


def test_linear_regressor_errors():
    with pytest.raises(InvalidAttributeError, match="1 intercepts, expected 2"):
        run_op("LinearRegressor", [("X", X)], coefficients=COEF3[:8], intercepts=[1.0], targets=2)
    # fewer coefficients than targets x features (more are tolerated, as onnxruntime does:
    # tests/engine/test_exporter_quirks.py)
    with pytest.raises(KernelError, match="5 coefficients, expected 2 x 3"):
        run_op("LinearRegressor", [("X", X[:, :3])], coefficients=COEF3[:5], targets=2)


# ------------------------------------------------------------------------------------------
# SVM kernels and libsvm's pairwise coupling
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["LINEAR", "POLY", "RBF", "SIGMOID"])
def test_kernel_matrix_formulas(kind):
    x, sv = RNG.standard_normal((5, 3)), RNG.standard_normal((4, 3))
    k = kernel_matrix(x, sv, kind, 0.3, 0.5, 3.0)
    dot = np.array([[a @ b for b in sv] for a in x])
    dist = np.array([[((a - b) ** 2).sum() for b in sv] for a in x])
    expected = {"LINEAR": dot, "POLY": (0.3 * dot + 0.5) ** 3, "RBF": np.exp(-0.3 * dist), "SIGMOID": np.tanh(0.3 * dot + 0.5)}[kind]
    np.testing.assert_allclose(k, expected, rtol=1e-12, atol=1e-12)


def test_pairwise_coupling_solves_the_quadratic_problem():
    # p minimises p^T Q p subject to sum(p) = 1: p = Q^-1 1 / (1^T Q^-1 1), up to libsvm's tolerance
    k = 5
    r = RNG.uniform(0.05, 0.95, size=(50, k, k))
    r = np.triu(r, 1)
    r = r + np.swapaxes(1 - r, 1, 2) * (np.tril(np.ones((k, k)), -1) > 0)
    p = pairwise_coupling(r)
    assert p.shape == (50, k)
    np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-9)
    for row, pr in zip(r, p):
        q = -row.T * row
        np.fill_diagonal(q, [(row[:, t] ** 2).sum() - row[t, t] ** 2 for t in range(k)])
        exact = np.linalg.solve(q, np.ones(k))
        exact /= exact.sum()
        np.testing.assert_allclose(pr, exact, atol=5e-3)


def test_pairwise_coupling_small_batches_take_the_same_steps():
    # a batch of up to 4 rows runs on Python floats, larger ones vectorized: same results
    for k in (2, 3, 6):
        r = RNG.uniform(0.02, 0.98, size=(9, k, k))
        r = np.triu(r, 1)
        r = r + np.swapaxes(1 - r, 1, 2) * (np.tril(np.ones((k, k)), -1) > 0)
        np.testing.assert_allclose(pairwise_coupling(r), np.concatenate([pairwise_coupling(r[i:i + 3]) for i in range(0, 9, 3)]), rtol=1e-12, atol=1e-14)


SV = [1.0, 0.0, 0.0, 1.0, -1.0, -1.0, 0.5, 0.5]  # 4 support vectors of 2 features
X2 = RNG.standard_normal((20, 2)).astype(np.float32)


def _svc(post="NONE", vpc=(2, 2), n_classes=2, prob=False, kernel="RBF"):
    k = len(vpc)
    pairs = k * (k - 1) // 2
    atts = dict(
        coefficients=RNG.standard_normal((k - 1) * sum(vpc)).round(3).tolist(),
        rho=RNG.standard_normal(pairs).round(3).tolist(),
        classlabels_ints=list(range(n_classes)),
        kernel_type=kernel,
        kernel_params=[0.5, 0.25, 2.0],
        post_transform=post,
        vectors_per_class=list(vpc),
        support_vectors=SV[: 2 * sum(vpc)],
    )
    if prob:
        atts["prob_a"] = (-RNG.uniform(0.5, 2, pairs)).round(3).tolist()
        atts["prob_b"] = RNG.uniform(-0.2, 0.2, pairs).round(3).tolist()
    return atts


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
@pytest.mark.parametrize("prob", [False, True])
@pytest.mark.parametrize("vpc", [(2, 2), (1, 2, 1), (1, 1, 1, 1)])
def test_svm_classifier_matches_onnxruntime(kernel, prob, vpc):
    atts = _svc(vpc=vpc, n_classes=len(vpc), prob=prob, kernel=kernel)
    labels, z = compare_with_ort("SVMClassifier", [("X", X2)], 2, atol=2e-5, **atts)
    n_pairs = len(vpc) * (len(vpc) - 1) // 2
    assert z.shape == (20, len(vpc) if prob or len(vpc) == 2 else n_pairs)
    if prob:
        np.testing.assert_allclose(z.sum(axis=1), 1.0, rtol=1e-5)


@pytest.mark.parametrize("post", TRANSFORMS)
@pytest.mark.parametrize("vpc", [(2, 2), (1, 2, 1)])
@pytest.mark.parametrize("prob", [False, True])
def test_svm_classifier_post_transforms(post, vpc, prob):
    compare_with_ort("SVMClassifier", [("X", X2)], 2, atol=2e-5, **_svc(post=post, vpc=vpc, n_classes=len(vpc), prob=prob))


def test_svm_classifier_binary_decision():
    atts = _svc()
    labels, z = run_op("SVMClassifier", [("X", X2)], 2, **atts)
    k = kernel_matrix(X2.astype(np.float64), np.array(SV).reshape(4, 2), "RBF", 0.5, 0.25, 2.0)
    coef = np.array(atts["coefficients"])
    d = k @ coef + atts["rho"][0]
    # libsvm: class 0 gets the vote when d > 0; Z is [-d, d] (onnxruntime's layout)
    assert labels.tolist() == np.where(d > 0, 0, 1).tolist()
    np.testing.assert_allclose(z, np.stack([-d, d], 1), rtol=1e-5, atol=1e-6)


def test_svm_classifier_linear_mode():
    # no support vectors: one linear score per class, X coef^T + rho
    coef = RNG.standard_normal(6).round(3).tolist()
    labels, z = compare_with_ort("SVMClassifier", [("X", X2)], 2, coefficients=coef, rho=[0.1, -0.2, 0.3], classlabels_ints=[0, 1, 2], kernel_type="LINEAR", kernel_params=[0.0, 0.0, 0.0])
    # rho[0] goes to every class score, as in onnxruntime
    raw = X2.astype(np.float64) @ np.array(coef).reshape(3, 2).T + 0.1
    assert labels.tolist() == raw.argmax(1).tolist()
    np.testing.assert_allclose(z, raw, rtol=1e-5, atol=1e-6)
    labels, z = run_op("SVMClassifier", [("X", X2)], 2, coefficients=coef[:2], rho=[0.1], classlabels_strings=["a", "b"], kernel_type="LINEAR")
    s = X2.astype(np.float64) @ coef[:2] + 0.1
    assert labels.tolist() == np.where(s > 0, "b", "a").tolist()


def test_svm_classifier_errors():
    atts = _svc()
    with pytest.raises(InvalidAttributeError, match="expected 1 \\(one per pair of classes\\)"):
        run_op("SVMClassifier", [("X", X2)], 2, **{**atts, "rho": [0.1, 0.2]})
    with pytest.raises(InvalidAttributeError, match="'kernel_type' is 'CUBIC'"):
        run_op("SVMClassifier", [("X", X2)], 2, **{**atts, "kernel_type": "CUBIC"})
    with pytest.raises(KernelError, match="support vectors of 2 features, the input has 3"):
        run_op("SVMClassifier", [("X", np.zeros((1, 3), np.float32))], 2, **atts)


@pytest.mark.parametrize("kernel", ["LINEAR", "POLY", "RBF", "SIGMOID"])
def test_svm_regressor_matches_onnxruntime(kernel):
    atts = dict(coefficients=[0.5, -0.7, 0.3, 0.2], rho=[0.1], kernel_type=kernel, kernel_params=[0.5, 0.1, 2.0], n_supports=4, support_vectors=SV)
    (y,) = compare_with_ort("SVMRegressor", [("X", X2)], atol=2e-5, **atts)
    k = kernel_matrix(X2.astype(np.float64), np.array(SV).reshape(4, 2), kernel, 0.5, 0.1, 2.0)
    np.testing.assert_allclose(y[:, 0], k @ atts["coefficients"] + 0.1, rtol=1e-5, atol=1e-6)
    (y,) = compare_with_ort("SVMRegressor", [("X", X2)], one_class=1, **atts)
    assert set(np.unique(y).tolist()) <= {-1.0, 1.0}


def test_svm_regressor_linear_and_transform():
    (y,) = compare_with_ort("SVMRegressor", [("X", X2)], coefficients=[0.5, -0.7], rho=[0.1], kernel_type="LINEAR", kernel_params=[0.0, 0.0, 0.0])
    np.testing.assert_allclose(y[:, 0], X2.astype(np.float64) @ [0.5, -0.7] + 0.1, rtol=1e-5, atol=1e-6)
    # post_transform applies (onnxruntime ignores it)
    (z,) = run_op("SVMRegressor", [("X", X2)], coefficients=[0.5, -0.7], rho=[0.1], kernel_type="LINEAR", post_transform="LOGISTIC")
    np.testing.assert_allclose(z, _sigmoid(y), rtol=1e-5)
    with pytest.raises(InvalidAttributeError, match="3 coefficients, expected n_supports=4"):
        run_op("SVMRegressor", [("X", X2)], coefficients=[0.5, -0.7, 0.1], n_supports=4, support_vectors=SV, kernel_type="RBF")


@pytest.mark.parametrize("dtype", [np.float64, np.int64, np.int32])
def test_svm_other_input_types(dtype):
    # the schema allows double and integer inputs; the kernels compute in float64 whatever the input
    x = (X2 * 3).astype(dtype)
    atts = _svc(vpc=(1, 2, 1), n_classes=3, prob=True)
    labels, z = run_op("SVMClassifier", [("X", x)], 2, **atts)
    labels64, z64 = run_op("SVMClassifier", [("X", x.astype(np.float64))], 2, **atts)
    assert labels.tolist() == labels64.tolist() and z.dtype == np.float32
    np.testing.assert_allclose(z, z64, rtol=1e-6)
    if dtype == np.float64:  # onnxruntime has a double SVMClassifier (not a double SVMRegressor)
        compare_with_ort("SVMClassifier", [("X", x)], 2, atol=2e-5, **atts)
    reg = dict(coefficients=[0.5, -0.7, 0.3, 0.2], rho=[0.1], kernel_type="POLY", kernel_params=[0.5, 0.1, 2.0], n_supports=4, support_vectors=SV)
    (y,) = run_op("SVMRegressor", [("X", x)], **reg)
    k = kernel_matrix(x.astype(np.float64), np.array(SV).reshape(4, 2), "POLY", 0.5, 0.1, 2.0)
    np.testing.assert_allclose(y[:, 0], k @ reg["coefficients"] + 0.1, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("small_product", [64_000_000, 0])
def test_svm_kernel_blocks_of_rows(monkeypatch, small_product):
    # more rows than one kernel block holds, blocks of either size: they must join seamlessly
    from onnxrt.ops_ml import op_svm

    monkeypatch.setattr(op_svm, "_SMALL_PRODUCT", small_product)
    monkeypatch.setattr(op_svm, "_KERNEL_BLOCK", 600 * 1500)
    rng = np.random.default_rng(9)
    sv = rng.standard_normal((600, 3))
    coef = rng.standard_normal(600)
    x = rng.standard_normal((4000, 3)).astype(np.float32)
    atts = dict(coefficients=coef.tolist(), rho=[0.25], kernel_type="RBF", kernel_params=[0.3, 0.0, 0.0], n_supports=600, support_vectors=sv.reshape(-1).tolist())
    (y,) = run_op("SVMRegressor", [("X", x)], **atts)
    sv32 = sv.astype(np.float32).astype(np.float64)  # attributes hold float32
    expected = kernel_matrix(x.astype(np.float64), sv32, "RBF", np.float32(0.3), 0.0, 0.0) @ coef.astype(np.float32) + 0.25
    np.testing.assert_allclose(y[:, 0], expected, rtol=1e-5, atol=1e-5)


def test_linear_models_on_many_rows():
    # a tall, thin product goes by blocks of rows: same result as onnxruntime's
    x = RNG.standard_normal((2000, 4)).astype(np.float32)
    compare_with_ort("LinearClassifier", [("X", x)], 2, atol=1e-5, coefficients=COEF3, intercepts=INTER3, classlabels_ints=[0, 1, 2], post_transform="SOFTMAX")
    (y,) = compare_with_ort("LinearRegressor", [("X", x)], atol=1e-5, coefficients=COEF3, intercepts=INTER3, targets=3)
    np.testing.assert_allclose(y, x.astype(np.float64) @ np.array(COEF3).reshape(3, 4).T + INTER3, rtol=1e-5, atol=1e-5)
