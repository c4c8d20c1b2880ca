"""Random generators: shapes, dtypes, seeds (reproducible runs), distribution moments, errors, and why
the conformance values of Bernoulli cannot be matched."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import InvalidAttributeError, KernelError
from onnxrt.ops_cpu import op_random
from onnxrt.ops_cpu.op_random import bernoulli, multinomial, random_normal, random_uniform

FLOATS = [
    (TensorProto.FLOAT, np.float32),
    (TensorProto.DOUBLE, np.float64),
    (TensorProto.FLOAT16, np.float16),
    (TensorProto.BFLOAT16, ml_dtypes.bfloat16),
]


def session(op, inputs, opset=22, **attrs):
    """A session over one node; ``inputs`` maps names to example arrays (for their types)."""
    node = helper.make_node(op, list(inputs), ["y"], **attrs)
    gi = [helper.make_tensor_value_info(n, _elem(v.dtype), v.shape) for n, v in inputs.items()]
    graph = helper.make_graph([node], "g", gi, [helper.make_empty_tensor_value_info("y")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return onnxrt.InferenceSession(model)


def _elem(dtype):
    return helper.np_dtype_to_tensor_dtype(np.dtype(dtype))


# --------------------------------------------------------------------------------------
# shapes, dtypes, seeds
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("elem,dtype", FLOATS)
@pytest.mark.parametrize("op", ["RandomNormal", "RandomUniform"])
def test_generators_shape_and_dtype(op, elem, dtype):
    sess = session(op, {}, shape=[3, 0, 2] if elem == TensorProto.DOUBLE else [4, 5], dtype=elem)
    (y,) = sess.run(None, {})
    assert y.dtype == np.dtype(dtype)
    assert y.shape == ((3, 0, 2) if elem == TensorProto.DOUBLE else (4, 5))


@pytest.mark.parametrize("op", ["RandomNormalLike", "RandomUniformLike"])
def test_like_generators_take_shape_and_type_from_input(op):
    x16 = np.zeros((2, 3, 4), np.float16)
    (y,) = session(op, {"x": x16}).run(None, {"x": x16})
    assert y.dtype == np.float16 and y.shape == (2, 3, 4)
    xi = np.zeros((5,), np.int64)
    (y,) = session(op, {"x": xi}, dtype=TensorProto.DOUBLE).run(None, {"x": xi})
    assert y.dtype == np.float64 and y.shape == (5,)
    with pytest.raises(KernelError, match="must then be a float type, got int64"):
        session(op, {"x": xi}).run(None, {"x": xi})


@pytest.mark.parametrize("op,attrs", [("RandomNormal", dict(shape=[50])), ("RandomUniform", dict(shape=[50]))])
def test_seed_makes_runs_reproducible_and_no_seed_does_not(op, attrs):
    a = session(op, {}, seed=3.0, **attrs)
    b = session(op, {}, seed=3.0, **attrs)
    (ya,), (ya2,), (yb,) = a.run(None, {}), a.run(None, {}), b.run(None, {})
    np.testing.assert_array_equal(ya, ya2)  # every run of a seeded node gives the same values
    np.testing.assert_array_equal(ya, yb)  # so does another session
    (yc,) = session(op, {}, seed=3.5, **attrs).run(None, {})
    assert not np.array_equal(ya, yc)  # another seed, other values
    free = session(op, {}, **attrs)
    (f1,), (f2,) = free.run(None, {}), free.run(None, {})
    assert not np.array_equal(f1, f2)  # without a seed: fresh randomness at every run


def test_seeded_bernoulli_and_multinomial_are_reproducible():
    p = np.full((1000,), 0.5)
    np.testing.assert_array_equal(bernoulli(p, seed=1.0), bernoulli(p, seed=1.0))
    assert not np.array_equal(bernoulli(p, seed=1.0), bernoulli(p, seed=2.0))
    logits = np.zeros((3, 10))
    np.testing.assert_array_equal(multinomial(logits, 100, seed=4.0), multinomial(logits, 100, seed=4.0))


# --------------------------------------------------------------------------------------
# distribution moments
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16, ml_dtypes.bfloat16])
def test_normal_moments(dtype):
    y = random_normal((200_000,), dtype, mean=2.5, scale=0.5, seed=11.0).astype(np.float64)
    # standard error of the mean: 0.5 / sqrt(2e5) ~ 0.0011; bfloat16 rounds each value by up to ~1%
    tol = 0.02 if dtype == ml_dtypes.bfloat16 else 0.006
    assert abs(y.mean() - 2.5) < tol
    assert abs(y.std() - 0.5) < tol
    assert abs(np.mean(((y - y.mean()) / y.std()) ** 3)) < 0.05  # symmetric
    assert abs(np.mean(((y - y.mean()) / y.std()) ** 4) - 3) < 0.1  # normal kurtosis


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_uniform_bounds_and_moments(dtype):
    y = random_uniform((200_000,), dtype, low=-1.0, high=3.0, seed=12.0).astype(np.float64)
    assert y.min() >= -1.0 and y.max() <= 3.0
    assert abs(y.mean() - 1.0) < 0.01
    assert abs(y.var() - 16 / 12) < 0.02
    hist, _ = np.histogram(y, bins=8, range=(-1, 3))
    assert np.all(np.abs(hist / len(y) - 1 / 8) < 0.005)  # flat


@pytest.mark.parametrize("out_elem,out_dtype", [(None, np.float32), (TensorProto.DOUBLE, np.float64),
                                                (TensorProto.BOOL, np.bool_), (TensorProto.INT32, np.int32),
                                                (TensorProto.UINT8, np.uint8), (TensorProto.BFLOAT16, ml_dtypes.bfloat16)])
def test_bernoulli_dtype_values_and_frequencies(out_elem, out_dtype):
    p = np.repeat(np.array([0.0, 0.1, 0.5, 0.9, 1.0], np.float32), 40_000).reshape(5, -1)
    attrs = {} if out_elem is None else {"dtype": out_elem}
    (y,) = session("Bernoulli", {"p": p}, seed=5.0, **attrs).run(None, {"p": p})
    assert y.dtype == np.dtype(out_dtype) and y.shape == p.shape
    yf = y.astype(np.float64)
    assert set(np.unique(yf)) <= {0.0, 1.0}
    freq = yf.mean(axis=1)
    np.testing.assert_allclose(freq, [0.0, 0.1, 0.5, 0.9, 1.0], atol=0.01)
    assert freq[0] == 0 and freq[-1] == 1  # p = 0 and p = 1 are certain


@pytest.mark.parametrize("out_elem,out_dtype", [(None, np.int32), (TensorProto.INT64, np.int64)])
def test_multinomial_shape_dtype_and_frequencies(out_elem, out_dtype):
    probs = np.array([[0.1, 0.0, 0.6, 0.3], [0.25, 0.25, 0.25, 0.25]])
    with np.errstate(divide="ignore"):
        logits = (np.log(probs) + 7.0).astype(np.float32)  # unnormalised log-probabilities
    attrs = {"sample_size": 50_000} | ({} if out_elem is None else {"dtype": out_elem})
    (y,) = session("Multinomial", {"x": logits}, seed=6.0, **attrs).run(None, {"x": logits})
    assert y.dtype == np.dtype(out_dtype) and y.shape == (2, 50_000)
    assert y.min() >= 0 and y.max() <= 3
    for row in range(2):
        freq = np.bincount(y[row], minlength=4) / 50_000
        np.testing.assert_allclose(freq, probs[row], atol=0.01)
    assert not np.any(y[0] == 1)  # a class of probability 0 is never drawn


def test_multinomial_older_version_and_low_precision_input():
    x = np.zeros((3, 5), ml_dtypes.bfloat16)
    (y,) = session("Multinomial", {"x": x}, sample_size=7).run(None, {"x": x})
    assert y.shape == (3, 7) and y.dtype == np.int32
    x = np.zeros((2, 4), np.float16)
    (y,) = session("Multinomial", {"x": x}, opset=7, sample_size=3, seed=1.0).run(None, {"x": x})
    assert y.shape == (2, 3)


# --------------------------------------------------------------------------------------
# errors
# --------------------------------------------------------------------------------------


def test_errors():
    with pytest.raises(InvalidAttributeError, match="'dtype' names int32"):
        session("RandomNormal", {}, shape=[2], dtype=TensorProto.INT32)
    with pytest.raises(InvalidAttributeError, match="'dtype' names float32, expected one of"):
        session("Multinomial", {"x": np.zeros((1, 2), np.float32)}, dtype=TensorProto.FLOAT)
    with pytest.raises(InvalidAttributeError, match=r"'shape' is \[2, -1\]"):
        session("RandomUniform", {}, shape=[2, -1])
    with pytest.raises(KernelError, match=r"probabilities must lie in \[0, 1\], got 1.5"):
        bernoulli(np.array([0.5, 1.5]))
    with pytest.raises(KernelError, match=r"shape \(batch_size, class_size\)"):
        multinomial(np.zeros(3))


# --------------------------------------------------------------------------------------
# the conformance cases of Bernoulli
# --------------------------------------------------------------------------------------


@pytest.fixture
def numpy_global_state():
    state = np.random.get_state()
    yield
    np.random.set_state(state)


def _capture(monkeypatch, export):
    """Run one of onnx's case exporters, returning (node, inputs, outputs) instead of registering a test."""
    from onnx.backend.test.case.node import bernoulli as case

    captured = []
    monkeypatch.setattr(case, "expect", lambda node, inputs, outputs, name, **kw: captured.append((node, inputs, outputs)))
    export()
    return captured[0]


@pytest.mark.parametrize("export", ["export_bernoulli_with_seed", "export_bernoulli_without_dtype", "export_bernoulli_with_dtype"])
def test_bernoulli_conformance_values_cannot_be_matched(monkeypatch, numpy_global_state, export):
    """Why ``test_bernoulli*`` stay in expected_failures.txt: their expected values are draws of numpy's
    global RandomState at collection time, which the node (and its ``seed`` attribute) never reaches.

    With the same node and the same input, two global states give two different expected
    outputs; an implementation that is a function of (input, seed) can match at most one of
    them. onnxrt checks what can be checked: shape, dtype and 0/1 values.
    """
    from onnx.backend.test.case.node.bernoulli import Bernoulli

    fixed = np.linspace(0.05, 0.95, 10)
    monkeypatch.setattr(np.random, "uniform", lambda low, high, size: fixed.copy())  # same input every time
    cases = []
    for state in range(5):
        np.random.seed(state)
        cases.append(_capture(monkeypatch, getattr(Bernoulli, export)))
    node1, (x1,), (y1,) = cases[0]
    assert all(node == node1 and np.array_equal(x, x1) for node, (x,), _ in cases)
    distinct = {tuple(y.tolist()) for _, _, (y,) in cases}
    assert len(distinct) > 1  # same node, same seed attribute, same input: different expected outputs

    # what onnxrt guarantees on the conformance node: the shape and dtype of the expected output
    graph = helper.make_graph(
        [node1], "bernoulli", [helper.make_tensor_value_info("x", _elem(x1.dtype), x1.shape)],
        [helper.make_empty_tensor_value_info("y")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 22)])
    model.ir_version = 10
    (y,) = onnxrt.InferenceSession(model).run(None, {"x": x1})
    assert y.shape == y1.shape and y.dtype == y1.dtype
    assert set(np.unique(y)) <= {0, 1}


def test_random_family_is_one_table():
    names = [s.name for s in op_random.RANDOM]
    assert names == ["RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial"]
    for name in names:
        assert getattr(op_random, name).__doc__
