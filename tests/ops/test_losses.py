"""NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: spec examples, plain loops, onnxruntime, dtypes, errors."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_losses import (
    NegativeLogLikelihoodLoss,
    negative_log_likelihood_loss,
    softmax_cross_entropy_loss,
)

ELEM = {np.dtype(np.float32): TensorProto.FLOAT, np.dtype(np.float64): TensorProto.DOUBLE,
        np.dtype(np.float16): TensorProto.FLOAT16, np.dtype(np.int64): TensorProto.INT64,
        np.dtype(np.int32): TensorProto.INT32}


def loop_nll(x, target, weight, reduction, ignore_index):
    """The spec's loop: one sample at a time, float64."""
    n, c = x.shape[:2]
    loss = np.zeros(target.shape)
    wsum = 0.0
    for pos in itertools.product(*[range(s) for s in target.shape]):
        t = int(target[pos])
        if ignore_index is not None and t == ignore_index:
            continue
        w = 1.0 if weight is None else float(weight[t])
        loss[pos] = -float(x[(pos[0], t) + pos[1:]]) * w
        wsum += w
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.array(loss.sum())
    with np.errstate(invalid="ignore"):  # every sample ignored: nan, as the kernel gives
        return np.array(np.float64(loss.sum()) / wsum)


def loop_log_softmax(x):
    out = np.empty(x.shape)
    for pos in itertools.product(*[range(s) for i, s in enumerate(x.shape) if i != 1]):
        idx = (pos[0], slice(None)) + pos[1:]
        row = x[idx].astype(np.float64)
        out[idx] = row - np.log(np.sum(np.exp(row)))
    return out


def test_spec_examples():
    x = np.array([[[1.0, 2.0], [2.0, 2.0], [3.0, 2.0]], [[0.0, 1.0], [2.0, 2.0], [1.0, 2]]], np.float32)
    target = np.array([[2, 1], [0, 2]])
    weight = np.array([0.2, 0.3, 0.1], np.float32)
    np.testing.assert_array_equal(negative_log_likelihood_loss(x, target, reduction="none"), [[-3, -2], [-0, -2]])
    np.testing.assert_allclose(negative_log_likelihood_loss(x, target, weight, "sum"), -1.1, rtol=1e-6)
    # the spec prints -1.57: -1.1 / (0.1 + 0.3 + 0.2 + 0.1) rounded
    np.testing.assert_allclose(negative_log_likelihood_loss(x, target, weight, "mean"), -1.1 / 0.7, rtol=1e-6)


SHAPES = [(4, 5), (3, 5, 2), (2, 4, 3, 2), (2, 3, 2, 1, 2)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("ignore_index", [None, 1, -3])
def test_against_plain_loops(shape, reduction, weighted, ignore_index):
    rng = np.random.default_rng(len(shape) * 7 + (ignore_index or 0))
    x = rng.standard_normal(shape)
    c = shape[1]
    target = rng.integers(0, c, (shape[0],) + shape[2:])
    if ignore_index is not None:
        target.reshape(-1)[::3] = ignore_index
    weight = rng.random(c) if weighted else None
    got = negative_log_likelihood_loss(x, target, weight, reduction, ignore_index)
    exp = loop_nll(x, target, weight, reduction, ignore_index)
    assert got.dtype == np.float64 and got.shape == exp.shape
    np.testing.assert_allclose(got, exp, rtol=1e-12)
    loss, log_prob = softmax_cross_entropy_loss(x, target, weight, reduction, ignore_index)
    lp = loop_log_softmax(x)
    np.testing.assert_allclose(log_prob, lp, rtol=1e-12)
    np.testing.assert_allclose(loss, loop_nll(lp, target, weight, reduction, ignore_index), rtol=1e-12)


def _run_onnxruntime(op, opset, x, t, w, attrs, n_out):
    names = ["x", "t"] + (["w"] if w is not None else [])
    outs = ["y", "log_prob"][:n_out]
    node = helper.make_node(op, names, outs, **attrs)
    feeds = dict(zip(names, [x, t] + ([w] if w is not None else [])))
    gi = [helper.make_tensor_value_info(n, ELEM[v.dtype], v.shape) for n, v in feeds.items()]
    go = [helper.make_empty_tensor_value_info(o) for o in outs]
    model = helper.make_model(helper.make_graph([node], "g", gi, go), opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    exp = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxrt.InferenceSession(model).run(None, feeds)
    return got, exp


@pytest.mark.parametrize("op,opset,n_out", [("NegativeLogLikelihoodLoss", 22, 1), ("NegativeLogLikelihoodLoss", 12, 1),
                                           ("SoftmaxCrossEntropyLoss", 13, 2), ("SoftmaxCrossEntropyLoss", 12, 2)])
@pytest.mark.parametrize("shape", SHAPES[:3])
@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("case", ["plain", "weight", "ignore", "weight+ignore", "int32"])
def test_against_onnxruntime(op, opset, n_out, shape, reduction, case):
    rng = np.random.default_rng(abs(hash((op, shape, reduction, case))) % 2**32)
    x = rng.standard_normal(shape).astype(np.float32)
    t = rng.integers(0, shape[1], (shape[0],) + shape[2:]).astype(np.int32 if case == "int32" else np.int64)
    w = rng.random(shape[1]).astype(np.float32) if "weight" in case else None
    attrs = {"reduction": reduction}
    if "ignore" in case:
        t.reshape(-1)[::2] = -1
        attrs["ignore_index"] = -1
    got, exp = _run_onnxruntime(op, opset, x, t, w, attrs, n_out)
    for g, e in zip(got, exp):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dtype,tol", [(np.float16, 2e-3), (ml_dtypes.bfloat16, 2e-2), (np.float32, 1e-6)])
def test_low_precision_types(dtype, tol):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((6, 5, 3)) * 3).astype(dtype)
    t = rng.integers(0, 5, (6, 3))
    w = rng.random(5).astype(dtype)
    xf, wf = x.astype(np.float64), w.astype(np.float64)
    loss, lp = softmax_cross_entropy_loss(x, t, w, "mean", 2)
    assert loss.dtype == np.dtype(dtype) and loss.shape == () and lp.dtype == np.dtype(dtype)
    ref_lp = loop_log_softmax(xf)
    np.testing.assert_allclose(lp.astype(np.float64), ref_lp, rtol=tol, atol=tol * 4)
    np.testing.assert_allclose(float(loss), loop_nll(ref_lp, t, wf, "mean", 2), rtol=tol * 2)
    nll = negative_log_likelihood_loss(x, t, None, "none")
    assert nll.dtype == np.dtype(dtype) and nll.shape == (6, 3)


def test_log_softmax_is_stable_for_large_scores():
    x = np.array([[1000.0, 0.0, -1000.0]], np.float32)
    loss, lp = softmax_cross_entropy_loss(x, np.array([2]), reduction="none")
    assert np.isfinite(lp).all()
    np.testing.assert_allclose(lp, [[0.0, -1000.0, -2000.0]])
    np.testing.assert_allclose(loss, [2000.0])


def test_every_sample_ignored_gives_nan_mean_like_onnxruntime():
    x = np.zeros((2, 3), np.float32)
    t = np.array([1, 1])
    assert np.isnan(negative_log_likelihood_loss(x, t, ignore_index=1))
    assert negative_log_likelihood_loss(x, t, reduction="sum", ignore_index=1) == 0


def test_inputs_not_modified():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 4)).astype(np.float32)
    t = np.array([0, 3, 1])
    w = np.ones(4, np.float32)
    for a in (x, t, w):
        a.flags.writeable = False
    softmax_cross_entropy_loss(x, t, w, "mean", 3)
    negative_log_likelihood_loss(x, t, w, "none", 3)


def test_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(IndexOutOfRangeError, match=r"target holds 3, outside the 3 classes \[0, 2\]"):
        negative_log_likelihood_loss(x, np.array([0, 3]))
    with pytest.raises(IndexOutOfRangeError, match="and not ignore_index=-1"):
        negative_log_likelihood_loss(x, np.array([-2, 0]), ignore_index=-1)
    with pytest.raises(KernelError, match=r"weight must have shape \[3\], got \[2\]"):
        negative_log_likelihood_loss(x, np.array([0, 1]), np.ones(2, np.float32))
    with pytest.raises(KernelError, match=r"target must have shape \[2\], got \[2, 1\]"):
        negative_log_likelihood_loss(x, np.zeros((2, 1), np.int64))
    node = helper.make_node("NegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="max")
    with pytest.raises(InvalidAttributeError, match="'reduction' is 'max'"):
        NegativeLogLikelihoodLoss(node)
