"""The score transforms shared by the ml kernels: LOGISTIC, SOFTMAX, SOFTMAX_ZERO, PROBIT."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnxrt.ops_ml._common import logistic, probit, row_max, row_sum, softmax, softmax_zero

from ._util import ml_model, run_onnxrt, run_ort

RNG = np.random.default_rng(5)


def loop_softmax_zero(row):
    """Plain definition (onnxruntime's): scores with |s| <= 1e-7 count as zeros and stay s * exp(-max)."""
    mx = max(row)
    e = [math.exp(v - mx) if abs(v) > 1e-7 else v * math.exp(-mx) for v in row]
    total = sum(v for v, s in zip(e, row) if abs(s) > 1e-7)
    return [v / total if total else float("nan") for v in e]


@pytest.mark.parametrize("shape", [(5,), (3, 4), (200, 3), (200, 40), (2, 3, 4)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_transforms_against_plain_formulas(shape, dtype):
    x = (RNG.standard_normal(shape) * 4).astype(dtype)
    x.reshape(-1)[::3] = 0  # zeros for SOFTMAX_ZERO
    np.testing.assert_allclose(logistic(x), 1 / (1 + np.exp(-x.astype(np.float64))), rtol=1e-5, atol=1e-7)
    e = np.exp(x.astype(np.float64) - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(softmax(x), e / e.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-7)
    rows = x.reshape(-1, shape[-1]).astype(np.float64)
    expected = np.array([loop_softmax_zero(list(r)) for r in rows]).reshape(shape)
    np.testing.assert_allclose(softmax_zero(x), expected, rtol=1e-5, atol=1e-7)
    for fn in (logistic, softmax, softmax_zero):
        assert fn(x).dtype == dtype and fn(x).shape == shape
    np.testing.assert_allclose(row_max(x), x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(row_sum(x), x.sum(axis=-1, keepdims=True), rtol=1e-5, atol=1e-5)


def test_logistic_has_no_overflow():
    x = np.array([-1000.0, -100.0, 0.0, 100.0, 1000.0], np.float32)
    with np.errstate(all="raise"):
        y = logistic(x)
    assert y.tolist() == [0.0, pytest.approx(3.7e-44, abs=1e-43), 0.5, 1.0, 1.0]


def test_probit_is_the_normal_quantile():
    p = np.array([0.025, 0.5, 0.8413447460685429, 0.975])
    np.testing.assert_allclose(probit(p), [-1.959963984540054, 0.0, 1.0, 1.959963984540054], rtol=1e-9, atol=1e-12)


def test_softmax_zero_row_of_zeros_is_nan_like_onnxruntime():
    # the spec does not define SOFTMAX_ZERO; onnxruntime divides 0 by 0 on an all-zero row
    x = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 2.0]], np.float32)
    atts = dict(coefficients=[0.0] * 9, intercepts=[0.0, 0.0, 0.0], classlabels_ints=[0, 1, 2], post_transform="SOFTMAX_ZERO")
    model = ml_model("LinearClassifier", [("X", x)], 2, **atts)
    ours, theirs = run_onnxrt(model, {"X": x})[1], run_ort(model, {"X": x})[1]
    assert np.isnan(ours).all() and np.isnan(theirs).all()
    z = softmax_zero(x)
    assert np.isnan(z[0]).all()
    np.testing.assert_allclose(z[1], [np.exp(-1) / (np.exp(-1) + 1), 0.0, 1 / (np.exp(-1) + 1)], rtol=1e-6)
