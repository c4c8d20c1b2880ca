"""Normalisation and dropout: BatchNormalization, Instance/Layer/Group/RMS/Lp/MeanVariance normalisation,
LRN and Dropout against onnxruntime on random cases and plain definitions written from the spec."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.errors import GraphError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_batch_normalization import batch_normalization, batch_normalization_training
from onnxrt.ops_cpu.op_dropout import dropout
from onnxrt.ops_cpu.op_lrn import lrn
from onnxrt.ops_cpu.op_normalization import (
    add_cols,
    add_rows,
    group_normalization,
    instance_normalization,
    layer_normalization,
    lp_normalization,
    mean_variance_normalization,
    rms_normalization,
)

F32 = np.float32
BF16 = ml_dtypes.bfloat16


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _model(op, inputs, attrs=None, opset=22, n_out=1, inits=None):
    """One node; ``inputs`` is an ordered name -> array dict (None leaves an optional input out)."""
    inits = inits or {}
    names = [n if v is not None else "" for n, v in inputs.items()]
    while names and names[-1] == "":
        names.pop()
    outs = ["y", "out1", "out2", "out3", "out4"][:n_out]
    node = helper.make_node(op, names, outs, **(attrs or {}))
    gi = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v))
        for n, v in inputs.items()
        if v is not None and n not in inits
    ]
    go = [helper.make_value_info(o, onnx.TypeProto()) for o in outs]
    graph = helper.make_graph(node and [node], "g", gi, go, [numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def _feeds(inputs, inits=None):
    return {n: np.asarray(v) for n, v in inputs.items() if v is not None and n not in (inits or {})}


def run_onnxrt(model, feeds):
    return onnxrt.InferenceSession(model).run(None, feeds)


def run_ort(model, feeds):
    model = onnx.shape_inference.infer_shapes(model)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def both(op, inputs, attrs=None, opset=22, n_out=1, inits=None):
    model = _model(op, inputs, attrs, opset, n_out, inits)
    feeds = _feeds(inputs, inits)
    return run_onnxrt(model, feeds), run_ort(model, feeds)


def assert_close(got, expected, rtol=1e-5, atol=1e-5):
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, (got.shape, expected.shape)
    assert got.dtype == expected.dtype, (got.dtype, expected.dtype)
    np.testing.assert_allclose(got.astype(np.float64), expected.astype(np.float64), rtol=rtol, atol=atol)


def readonly(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


# --------------------------------------------------------------------------------------------
# row primitives (BLAS rank-1 updates)
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(3, 5), (4, 300), (1, 1000), (0, 300)])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_row_and_column_additions(shape, dtype):
    rng = np.random.default_rng(0)
    y = rng.standard_normal(shape).astype(dtype)
    r = rng.standard_normal(shape[0]).astype(dtype)
    c = rng.standard_normal(shape[1]).astype(dtype)
    expected = y - 2 * r[:, None] + c[None, :]
    add_rows(y, r, -2.0)
    add_cols(y, c)
    np.testing.assert_allclose(y, expected, rtol=1e-6)


# --------------------------------------------------------------------------------------------
# BatchNormalization
# --------------------------------------------------------------------------------------------


def plain_bn(x, s, b, m, v, eps):
    shape = (1, -1) + (1,) * (x.ndim - 2)
    xs = x.astype(np.float64)
    return (xs - m.reshape(shape)) / np.sqrt(v.reshape(shape) + eps) * s.reshape(shape) + b.reshape(shape)


def _bn_params(rng, c, dtype=F32):
    return (
        rng.standard_normal(c).astype(dtype),
        rng.standard_normal(c).astype(dtype),
        rng.standard_normal(c).astype(dtype),
        (rng.random(c) + 0.5).astype(dtype),
    )


@pytest.mark.parametrize("opset", [7, 9, 14, 15])
@pytest.mark.parametrize("shape", [(2, 3), (2, 3, 5), (2, 4, 5, 6), (1, 3, 2, 3, 4)])
def test_batchnorm_inference_against_onnxruntime(opset, shape):
    rng = np.random.default_rng(1)
    x = rng.standard_normal(shape).astype(F32)
    s, b, m, v = _bn_params(rng, shape[1])
    inputs = {"X": x, "scale": s, "B": b, "mean": m, "var": v}
    (got,), (exp,) = both("BatchNormalization", inputs, {"epsilon": 1e-3}, opset=opset)
    assert_close(got, exp)
    assert_close(got, plain_bn(x, s, b, m, v, 1e-3).astype(F32))


@pytest.mark.parametrize("dtype", [np.float16, np.float64])
def test_batchnorm_other_float_types_against_onnxruntime(dtype):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 4, 4)).astype(dtype)
    inputs = dict(zip(["X", "scale", "B", "mean", "var"], (x, *_bn_params(rng, 3, dtype))))
    (got,), (exp,) = both("BatchNormalization", inputs, opset=15)
    assert_close(got, exp, rtol=2e-3 if dtype == np.float16 else 1e-12, atol=2e-3 if dtype == np.float16 else 1e-12)


def test_batchnorm_bfloat16_and_mixed_types():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 4)).astype(BF16)
    s, b, m, v = _bn_params(rng, 3)
    (y,) = run_onnxrt(_model("BatchNormalization", {"X": x, "scale": s, "B": b, "mean": m, "var": v}, opset=15), {"X": x, "scale": s, "B": b, "mean": m, "var": v})
    assert y.dtype == np.dtype(BF16)
    np.testing.assert_allclose(y.astype(np.float64), plain_bn(x, s, b, m, v, 1e-5), rtol=1e-2, atol=1e-2)


def test_batchnorm_non_spatial_version_7_against_onnxruntime():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((3, 2, 4)).astype(F32)
    s, b, m, v = (a.reshape(2, 4) for a in _bn_params(rng, 8))
    inputs = {"X": x, "scale": s, "B": b, "mean": m, "var": v}
    (got,), (exp,) = both("BatchNormalization", inputs, {"spatial": 0}, opset=7)
    assert_close(got, exp)
    expected = (x - m) / np.sqrt(v + 1e-5) * s + b
    assert_close(got, expected.astype(F32))


@pytest.mark.parametrize("opset", [14, 15])
def test_batchnorm_training_mode_against_onnxruntime(opset):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 5, 5)).astype(F32)
    s, b, m, v = _bn_params(rng, 3)
    inputs = {"X": x, "scale": s, "B": b, "mean": m, "var": v}
    got, exp = both("BatchNormalization", inputs, {"training_mode": 1, "momentum": 0.8}, opset=opset, n_out=3)
    for g, e in zip(got, exp):
        assert_close(g, e, rtol=1e-4, atol=1e-5)
    cur_mean = x.mean(axis=(0, 2, 3))
    cur_var = x.var(axis=(0, 2, 3))  # population variance
    assert_close(got[1], (m * 0.8 + cur_mean * 0.2).astype(F32))
    assert_close(got[2], (v * 0.8 + cur_var * 0.2).astype(F32))
    assert_close(got[0], plain_bn(x, s, b, cur_mean, cur_var, 1e-5).astype(F32), rtol=1e-4, atol=1e-5)


def test_batchnorm_training_old_versions_five_outputs():
    rng = np.random.default_rng(6)
    x = rng.standard_normal((4, 2, 3)).astype(F32)
    s, b, m, v = _bn_params(rng, 2)
    inputs = {"X": x, "scale": s, "B": b, "mean": m, "var": v}
    cur_mean, cur_var = x.mean(axis=(0, 2)), x.var(axis=(0, 2))
    for opset, attrs in [(6, {}), (7, {}), (9, {}), (1, {"consumed_inputs": [0, 0, 0, 1, 1]})]:
        model = _model("BatchNormalization", inputs, attrs, opset=opset, n_out=5)
        y, rm, rv, sm, sv = run_onnxrt(model, _feeds(inputs))
        assert_close(y, plain_bn(x, s, b, cur_mean, cur_var, 1e-5).astype(F32), rtol=1e-4)
        assert_close(rm, (m * 0.9 + cur_mean * 0.1).astype(F32))
        assert_close(rv, (v * 0.9 + cur_var * 0.1).astype(F32))
        assert_close(sm, cur_mean.astype(F32))
        assert_close(sv, cur_var.astype(F32))
    # is_test=1 (versions 1 and 6), or a single output (7 and 9): inference
    for opset, attrs, n_out in [(6, {"is_test": 1}, 1), (1, {"is_test": 1, "consumed_inputs": [0]}, 1), (7, {}, 1), (9, {}, 1)]:
        (y,) = run_onnxrt(_model("BatchNormalization", inputs, attrs, opset=opset, n_out=n_out), _feeds(inputs))
        assert_close(y, plain_bn(x, s, b, m, v, 1e-5).astype(F32))


def test_batchnorm_training_non_spatial():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((5, 2, 3)).astype(F32)
    s, b, m, v = (a.reshape(2, 3) for a in _bn_params(rng, 6))
    y, rm, rv, sm, sv = batch_normalization_training(x, s, b, m, v, epsilon=1e-5, momentum=0.9, spatial=False)
    cur_mean, cur_var = x.mean(axis=0), x.var(axis=0)
    assert rm.shape == (2, 3) and sv.shape == (2, 3)
    assert_close(y, ((x - cur_mean) / np.sqrt(cur_var + 1e-5) * s + b).astype(F32), rtol=1e-4)
    assert_close(sv, cur_var.astype(F32))


def test_batchnorm_initializer_fold_is_reused_and_correct():
    rng = np.random.default_rng(8)
    x = rng.standard_normal((2, 3, 4)).astype(F32)
    s, b, m, v = _bn_params(rng, 3)
    inits = {"scale": s, "B": b, "mean": m, "var": v}
    sess = onnxrt.InferenceSession(_model("BatchNormalization", {"X": x, **inits}, opset=15, inits=inits))
    for k in range(3):
        xk = x * (k + 1)
        (y,) = sess.run(None, {"X": xk})
        assert_close(y, plain_bn(xk, s, b, m, v, 1e-5).astype(F32))


def test_batchnorm_errors():
    x = np.zeros((2, 3, 4), F32)
    with pytest.raises(KernelError, match=r"scale has shape \[4\], expected \[3\]"):
        batch_normalization(x, np.ones(4, F32), np.ones(3, F32), np.ones(3, F32), np.ones(3, F32))
    with pytest.raises(KernelError, match="rank >= 2"):
        batch_normalization(np.zeros(3, F32), np.ones(3, F32), np.ones(3, F32), np.ones(3, F32), np.ones(3, F32))


# --------------------------------------------------------------------------------------------
# InstanceNormalization, GroupNormalization
# --------------------------------------------------------------------------------------------


def plain_standardize(x, axes, eps):
    xs = x.astype(np.float64)
    mean = xs.mean(axis=axes, keepdims=True)
    var = ((xs - mean) ** 2).mean(axis=axes, keepdims=True)
    return (xs - mean) / np.sqrt(var + eps)


@pytest.mark.parametrize("opset", [6, 22])
@pytest.mark.parametrize("shape", [(2, 3, 5), (2, 4, 6, 7), (1, 2, 300), (2, 3, 2, 2, 2)])
def test_instance_norm_against_onnxruntime(opset, shape):
    rng = np.random.default_rng(9)
    x = (rng.standard_normal(shape) * 3 + 1).astype(F32)
    s = rng.standard_normal(shape[1]).astype(F32)
    b = rng.standard_normal(shape[1]).astype(F32)
    (got,), (exp,) = both("InstanceNormalization", {"input": x, "scale": s, "B": b}, {"epsilon": 1e-4}, opset=opset)
    assert_close(got, exp, rtol=1e-4, atol=1e-5)
    cshape = (1, -1) + (1,) * (len(shape) - 2)
    expected = plain_standardize(x, tuple(range(2, len(shape))), 1e-4) * s.reshape(cshape) + b.reshape(cshape)
    assert_close(got, expected.astype(F32), rtol=1e-4, atol=1e-5)


def test_instance_norm_half_types_and_version_1():
    rng = np.random.default_rng(10)
    x = rng.standard_normal((2, 3, 6)).astype(np.float16)
    s, b = np.ones(3, np.float16), np.zeros(3, np.float16)
    (got,), (exp,) = both("InstanceNormalization", {"input": x, "scale": s, "B": b}, opset=6)
    assert_close(got, exp, rtol=3e-3, atol=3e-3)
    xb = x.astype(BF16)
    yb = instance_normalization(xb, s.astype(BF16), b.astype(BF16))
    assert yb.dtype == np.dtype(BF16)
    np.testing.assert_allclose(yb.astype(F32), plain_standardize(x, (2,), 1e-5), atol=2e-2)
    (y1,) = run_onnxrt(_model("InstanceNormalization", {"input": x.astype(F32), "scale": s.astype(F32), "B": b.astype(F32)}, {"consumed_inputs": [0]}, opset=1), {"input": x.astype(F32), "scale": s.astype(F32), "B": b.astype(F32)})
    assert_close(y1, plain_standardize(x, (2,), 1e-5).astype(F32), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("groups", [1, 2, 6])
@pytest.mark.parametrize("shape", [(2, 6, 5), (2, 6, 4, 3), (1, 6, 300)])
def test_group_norm_21_against_onnxruntime(groups, shape):
    rng = np.random.default_rng(11)
    x = (rng.standard_normal(shape) * 2 - 1).astype(F32)
    s = rng.standard_normal(shape[1]).astype(F32)
    b = rng.standard_normal(shape[1]).astype(F32)
    (got,), (exp,) = both("GroupNormalization", {"X": x, "scale": s, "bias": b}, {"num_groups": groups, "epsilon": 1e-3}, opset=21)
    assert_close(got, exp, rtol=1e-4, atol=1e-5)
    n, c = shape[:2]
    grouped = plain_standardize(x.reshape(n, groups, -1), (2,), 1e-3).reshape(shape)
    cshape = (1, -1) + (1,) * (len(shape) - 2)
    assert_close(got, (grouped * s.reshape(cshape) + b.reshape(cshape)).astype(F32), rtol=1e-4, atol=1e-5)


def test_group_norm_18_scale_per_group():
    rng = np.random.default_rng(12)
    x = rng.standard_normal((2, 4, 3)).astype(F32)
    s = np.array([2.0, -1.0], F32)
    b = np.array([0.5, 3.0], F32)
    (got,), (exp,) = both("GroupNormalization", {"X": x, "scale": s, "bias": b}, {"num_groups": 2}, opset=18)
    grouped = plain_standardize(x.reshape(2, 2, -1), (2,), 1e-5)
    expected = (grouped * s.reshape(1, 2, 1) + b.reshape(1, 2, 1)).reshape(x.shape)
    assert_close(got, expected.astype(F32), rtol=1e-4, atol=1e-5)
    assert_close(got, exp, rtol=1e-4, atol=1e-5)


def test_group_norm_stash_and_half_types():
    rng = np.random.default_rng(13)
    x = (rng.standard_normal((2, 4, 5)) * 10 + 100).astype(np.float16)
    s, b = np.ones(4, np.float16), np.zeros(4, np.float16)
    y = group_normalization(x, s, b, 2)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float64), plain_standardize(x.reshape(2, 2, -1), (2,), 1e-5).reshape(x.shape), atol=2e-2)
    yb = group_normalization(x.astype(BF16), s.astype(BF16), b.astype(BF16), 2)
    assert yb.dtype == np.dtype(BF16)


def test_group_and_instance_errors():
    x = np.zeros((2, 6, 3), F32)
    with pytest.raises(KernelError, match="num_groups is 4, expected a positive divisor of the 6 channels"):
        group_normalization(x, np.ones(6, F32), np.ones(6, F32), 4)
    with pytest.raises(KernelError, match=r"scale has shape \[3\], expected \[6\]"):
        group_normalization(x, np.ones(3, F32), np.ones(6, F32), 3)
    with pytest.raises(KernelError, match=r"B has shape \[2\], expected \[6\]"):
        instance_normalization(x, np.ones(6, F32), np.ones(2, F32))
    with pytest.raises(GraphError, match="num_groups"):
        run_onnxrt(_model("GroupNormalization", {"X": x, "scale": np.ones(6, F32), "bias": np.ones(6, F32)}, {"num_groups": 0}, opset=21), {})


# --------------------------------------------------------------------------------------------
# LayerNormalization, RMSNormalization
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("axis", [0, 1, -1, 2, -3])
@pytest.mark.parametrize("with_bias", [True, False])
def test_layer_norm_against_onnxruntime(axis, with_bias):
    rng = np.random.default_rng(14)
    x = (rng.standard_normal((3, 4, 300)) * 2 + 5).astype(F32)
    tail = x.shape[axis % 3:]
    s = rng.standard_normal(tail).astype(F32)
    b = rng.standard_normal(tail).astype(F32) if with_bias else None
    got, exp = both("LayerNormalization", {"X": x, "Scale": s, "B": b}, {"axis": axis, "epsilon": 1e-4}, opset=17, n_out=3)
    for g, e in zip(got, exp):
        assert_close(g, e, rtol=1e-4, atol=1e-4)
    ax = tuple(range(axis % 3, 3))
    expected = plain_standardize(x, ax, 1e-4) * s + (0 if b is None else b)
    assert_close(got[0], expected.astype(F32), rtol=1e-4, atol=1e-4)
    assert got[1].shape == x.shape[: axis % 3] + (1,) * len(ax) and got[1].dtype == np.float32
    assert_close(got[1], x.astype(np.float64).mean(axis=ax, keepdims=True).astype(F32), rtol=1e-5)


def test_layer_norm_broadcast_scale_and_short_rows():
    rng = np.random.default_rng(15)
    x = rng.standard_normal((2, 3, 4)).astype(F32)
    for s, b in [(np.float32(2.0).reshape(1), np.float32(1.0).reshape(1)), (rng.standard_normal((3, 1)).astype(F32), None), (rng.standard_normal((2, 3, 4)).astype(F32), rng.standard_normal(4).astype(F32))]:
        (got, _, _), (exp, _, _) = both("LayerNormalization", {"X": x, "Scale": s, "B": b}, {"axis": 1}, opset=17, n_out=3)
        assert_close(got, exp, rtol=1e-4, atol=1e-5)


def test_layer_norm_half_types_and_stash():
    rng = np.random.default_rng(16)
    x = rng.standard_normal((3, 8)).astype(np.float16)
    s = rng.standard_normal(8).astype(np.float16)
    b = rng.standard_normal(8).astype(np.float16)
    got, exp = both("LayerNormalization", {"X": x, "Scale": s, "B": b}, opset=17, n_out=3)
    assert got[0].dtype == np.float16 and got[1].dtype == np.float32
    for g, e in zip(got, exp):
        assert_close(g, e, rtol=2e-3, atol=2e-3)
    yb, mb, ib = layer_normalization(x.astype(BF16), s.astype(BF16), b.astype(BF16), stash_type=np.dtype(BF16))
    assert yb.dtype == mb.dtype == ib.dtype == np.dtype(BF16)
    np.testing.assert_allclose(yb.astype(F32), got[0].astype(F32), atol=0.1)
    y64, m64, _ = layer_normalization(x.astype(np.float64), s.astype(np.float64), None, stash_type=np.dtype(np.float64))
    assert y64.dtype == m64.dtype == np.float64
    np.testing.assert_allclose(y64, plain_standardize(x, (1,), 1e-5) * s.astype(np.float64), rtol=1e-12)


def test_layer_norm_errors():
    x = np.zeros((2, 3), F32)
    with pytest.raises(KernelError, match="axis is 2, out of range"):
        layer_normalization(x, np.ones(3, F32), axis=2)
    with pytest.raises(KernelError, match=r"Scale of shape \[2\] does not broadcast"):
        layer_normalization(x, np.ones(2, F32))
    with pytest.raises(GraphError, match="stash_type"):
        run_onnxrt(_model("LayerNormalization", {"X": x, "Scale": np.ones(3, F32)}, {"stash_type": 7}, opset=17), {"X": x, "Scale": np.ones(3, F32)})


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_rms_norm_against_onnxruntime(axis):
    rng = np.random.default_rng(17)
    x = (rng.standard_normal((4, 5, 260)) * 3).astype(F32)
    s = rng.standard_normal(x.shape[axis % 3:]).astype(F32)
    (got,), (exp,) = both("RMSNormalization", {"X": x, "scale": s}, {"axis": axis, "epsilon": 1e-3}, opset=23)
    assert_close(got, exp, rtol=1e-4, atol=1e-5)
    ax = tuple(range(axis % 3, 3))
    xs = x.astype(np.float64)
    expected = xs / np.sqrt((xs**2).mean(axis=ax, keepdims=True) + 1e-3) * s
    assert_close(got, expected.astype(F32), rtol=1e-4, atol=1e-5)


def test_rms_norm_output_takes_scale_type():
    x = np.array([[3.0, 4.0]], np.float16)
    y = rms_normalization(x, np.array([1.0, 2.0], F32), epsilon=0.0)
    assert y.dtype == np.float32
    r = np.sqrt(12.5)
    np.testing.assert_allclose(y, [[3.0 / r, 8.0 / r]], rtol=1e-3)


# --------------------------------------------------------------------------------------------
# LpNormalization, MeanVarianceNormalization
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [1, 22])
@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_lp_norm_against_onnxruntime(opset, p, axis):
    rng = np.random.default_rng(18)
    x = rng.standard_normal((3, 4, 5)).astype(F32)
    x[1, :, :] = 0.0  # a zero norm along some lines: their output is zero
    (got,), (exp,) = both("LpNormalization", {"input": x}, {"p": p, "axis": axis}, opset=opset)
    assert_close(got, exp, rtol=1e-5, atol=1e-6)
    norm = np.linalg.norm(x.astype(np.float64), ord=p, axis=axis, keepdims=True)
    expected = np.divide(x, norm, out=np.zeros(x.shape), where=norm != 0)
    assert_close(got, expected.astype(F32), rtol=1e-5, atol=1e-6)


def test_lp_norm_types_and_errors():
    x = np.array([[3.0, 4.0], [0.0, 0.0]], np.float16)
    y = lp_normalization(x, axis=1, p=2)
    assert y.dtype == np.float16
    np.testing.assert_array_equal(y, np.array([[0.6, 0.8], [0, 0]], np.float16))
    yb = lp_normalization(x.astype(BF16), axis=1, p=1)
    assert yb.dtype == np.dtype(BF16)
    np.testing.assert_allclose(yb.astype(F32), [[3 / 7, 4 / 7], [0, 0]], rtol=1e-2)
    with pytest.raises(InvalidAttributeError, match="'p' is 3, expected 1 or 2"):
        run_onnxrt(_model("LpNormalization", {"input": x}, {"p": 3}), {"input": x})


@pytest.mark.parametrize("axes", [None, [0, 2, 3], [1], [2, 3], [-1]])
@pytest.mark.parametrize("opset", [9, 13])
def test_mvn_against_onnxruntime(axes, opset):
    rng = np.random.default_rng(19)
    x = (rng.standard_normal((2, 3, 4, 5)) * 4 + 2).astype(F32)
    attrs = {} if axes is None else {"axes": axes}
    (got,), (exp,) = both("MeanVarianceNormalization", {"X": x}, attrs, opset=opset)
    assert_close(got, exp, rtol=1e-4, atol=1e-5)
    ax = tuple(a % 4 for a in (axes or [0, 2, 3]))
    xs = x.astype(np.float64)
    mean = xs.mean(axis=ax, keepdims=True)
    expected = (xs - mean) / (np.sqrt(((xs - mean) ** 2).mean(axis=ax, keepdims=True)) + 1e-9)
    assert_close(got, expected.astype(F32), rtol=1e-4, atol=1e-5)


def test_mvn_half_types():
    x = np.array([[[[1.0, 2.0, 3.0]]]], np.float16)
    y = mean_variance_normalization(x, axes=[3])
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(F32), [[[[-1.2247, 0.0, 1.2247]]]], atol=2e-3)
    assert mean_variance_normalization(x.astype(BF16), axes=[3]).dtype == np.dtype(BF16)


# --------------------------------------------------------------------------------------------
# LRN
# --------------------------------------------------------------------------------------------


def plain_lrn(x, size, alpha, beta, bias):
    """The spec's window with an explicit loop over channels."""
    c = x.shape[1]
    xs = x.astype(np.float64)
    out = np.empty_like(xs)
    for ch in range(c):
        lo = max(0, ch - (size - 1) // 2)
        hi = min(c - 1, ch + -(-(size - 1) // 2))
        sq = (xs[:, lo : hi + 1] ** 2).sum(axis=1)
        out[:, ch] = xs[:, ch] / (bias + alpha / size * sq) ** beta
    return out


@pytest.mark.parametrize("size", [1, 2, 3, 5, 6, 20])
@pytest.mark.parametrize("opset", [1, 13])
def test_lrn_against_onnxruntime(size, opset):
    rng = np.random.default_rng(20)
    x = rng.standard_normal((2, 7, 4, 5)).astype(F32) * 3
    attrs = {"size": size, "alpha": 0.02, "beta": 0.75, "bias": 1.5}
    model = _model("LRN", {"X": x}, attrs, opset=opset)
    (got,) = run_onnxrt(model, {"X": x})
    assert_close(got, plain_lrn(x, size, 0.02, 0.75, 1.5).astype(F32), rtol=1e-5, atol=1e-6)
    if size % 2:  # onnxruntime refuses even sizes (the window is then asymmetric)
        assert_close(got, run_ort(model, {"X": x})[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("beta", [0.5, 1.0, 0.3])
@pytest.mark.parametrize("shape", [(2, 5), (1, 4, 6), (1, 3, 2, 2, 2)])
def test_lrn_other_ranks_and_betas(beta, shape):
    rng = np.random.default_rng(21)
    x = rng.standard_normal(shape).astype(F32)
    y = lrn(x, 3, alpha=0.5, beta=beta, bias=2.0)
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_allclose(y, plain_lrn(x, 3, 0.5, beta, 2.0), rtol=1e-5)


def test_lrn_half_types_and_errors():
    x = np.random.default_rng(22).standard_normal((1, 6, 3, 3)).astype(np.float16)
    (got,), (exp,) = both("LRN", {"X": x}, {"size": 3}, opset=13)
    assert_close(got, exp, rtol=2e-3, atol=2e-3)
    assert lrn(x.astype(BF16), 3).dtype == np.dtype(BF16)
    with pytest.raises(GraphError, match="size"):
        run_onnxrt(_model("LRN", {"X": x}, {"size": 0}, opset=13), {"X": x})
    with pytest.raises(KernelError, match="rank >= 2"):
        lrn(np.zeros(3, F32), 3)


# --------------------------------------------------------------------------------------------
# Dropout
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("opset", [7, 10, 12, 13, 22])
def test_dropout_inference_is_identity(opset):
    x = np.random.default_rng(23).standard_normal((3, 4)).astype(F32)
    attrs = {"ratio": 0.3} if opset < 12 else {}
    y, mask = run_onnxrt(_model("Dropout", {"data": x}, attrs, opset=opset, n_out=2), {"data": x})
    np.testing.assert_array_equal(y, x)
    # versions 7 and 10 leave the mask unspecified: onnxruntime's zeros (False)
    assert mask.shape == x.shape and (mask.all() if opset >= 12 else not mask.any())
    assert mask.dtype == (np.bool_ if opset >= 10 else np.float32)
    (y1,) = run_onnxrt(_model("Dropout", {"data": x}, attrs, opset=opset), {"data": x})
    np.testing.assert_array_equal(y1, x)


def test_dropout_training_is_seeded_and_scaled():
    x = np.ones((200, 100), F32)
    inputs = {"data": x, "ratio": np.array(0.25, F32), "training_mode": np.array(True)}
    model = _model("Dropout", inputs, {"seed": 7}, opset=22, n_out=2)
    y, mask = run_onnxrt(model, inputs)
    y2, mask2 = run_onnxrt(model, inputs)
    assert mask.dtype == np.bool_ and y.dtype == np.float32
    np.testing.assert_array_equal(mask, mask2)  # the seed makes every run the same
    np.testing.assert_array_equal(y, y2)
    np.testing.assert_allclose(y, np.where(mask, 1 / 0.75, 0.0).astype(F32), rtol=1e-6)
    # the kept fraction is 1 - ratio: 20000 Bernoulli draws, 5 standard deviations
    assert abs(mask.mean() - 0.75) < 5 * np.sqrt(0.75 * 0.25 / mask.size)
    assert abs(y.mean() - 1.0) < 0.05  # dropout keeps the expectation
    other, _ = run_onnxrt(_model("Dropout", inputs, {"seed": 8}, opset=22, n_out=2), inputs)
    assert not np.array_equal(other, y)


def test_dropout_training_ratio_and_mode_inputs():
    x = np.random.default_rng(24).standard_normal((5, 6)).astype(F32)
    out, mask = dropout(x, 0.0, True, seed=1)
    np.testing.assert_array_equal(out, x)
    assert mask.all()
    out, mask = dropout(x, 0.5, False, seed=1)
    np.testing.assert_array_equal(out, x)
    out, mask = dropout(x, 0.5, True, seed=3)
    np.testing.assert_allclose(out, np.where(mask, x * 2, 0), rtol=1e-6)
    with pytest.raises(KernelError, match=r"ratio is 1.0, expected a value in \[0, 1\)"):
        dropout(x, 1.0, True)
    # the default ratio input is 0.5 and the default mode inference
    (y,) = run_onnxrt(_model("Dropout", {"data": x, "ratio": None, "training_mode": np.array(False)}, opset=13), {"data": x, "training_mode": np.array(False)})
    np.testing.assert_array_equal(y, x)


def test_dropout_unseeded_draws_differ_and_types():
    x = np.ones((64, 64), np.float16)
    a, ma = dropout(x, 0.5, True)
    b, mb = dropout(x, 0.5, True)
    assert not np.array_equal(ma, mb)
    assert a.dtype == np.float16
    np.testing.assert_array_equal(a, np.where(ma, 2, 0).astype(np.float16))
    xb = np.ones((10, 10), BF16)
    yb, mb = dropout(xb, 0.5, True, seed=0)
    assert yb.dtype == np.dtype(BF16)
    x8 = np.ones((10, 10), ml_dtypes.float8_e4m3fn)
    y8, m8 = dropout(x8, 0.5, True, seed=0)
    assert y8.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    np.testing.assert_array_equal(y8.astype(F32), np.where(m8, 2.0, 0.0))


@pytest.mark.parametrize("opset", [1, 6])
def test_dropout_old_versions_train_unless_is_test(opset):
    x = np.ones((50, 40), F32)
    attrs = {"ratio": 0.4} if opset == 6 else {"ratio": 0.4, "consumed_inputs": [0]}
    y, mask = run_onnxrt(_model("Dropout", {"data": x}, attrs, opset=opset, n_out=2), {"data": x})
    assert mask.dtype == np.float32 and set(np.unique(mask)) <= {0.0, 1.0}
    np.testing.assert_allclose(y, mask / 0.6, rtol=1e-6)
    assert 0.4 < mask.mean() < 0.8
    y, mask = run_onnxrt(_model("Dropout", {"data": x}, {**attrs, "is_test": 1}, opset=opset, n_out=2), {"data": x})
    np.testing.assert_array_equal(y, x)
    assert (mask == 1).all()


# --------------------------------------------------------------------------------------------
# every kernel leaves its inputs alone
# --------------------------------------------------------------------------------------------


def test_inputs_are_not_modified():
    rng = np.random.default_rng(25)
    x = readonly(rng.standard_normal((2, 4, 300)).astype(F32))
    c = readonly(np.ones(4, F32))
    t = readonly(np.ones(300, F32))
    before = x.copy()
    batch_normalization(x, c, c, c, c)
    batch_normalization_training(x, c, c, c, c)
    instance_normalization(x, c, c)
    group_normalization(x, c, c, 2)
    layer_normalization(x, t, t)
    rms_normalization(x, t)
    lp_normalization(x, 1, 2)
    mean_variance_normalization(x, [0, 2])
    lrn(x, 3)
    dropout(x, 0.5, True, seed=0)
    np.testing.assert_array_equal(x, before)


def test_batch_normalization_infinite_scale_follows_the_formula():
    # found by tests/fuzz: folding Y = X * a + (B - mean * a) with a = scale / sqrt(var + eps)
    # infinite gives inf - inf = NaN; the spec's (X - mean) / sqrt(var + eps) * scale + B is +-inf
    x = np.array([[-3.0, -2.75], [-2.5, 0.0]], np.float32)
    scale = np.array([0.5, np.inf], np.float32)
    bias = np.array([1.0, 2.0], np.float32)
    mean = np.array([1.0, -2.5], np.float32)
    var = np.array([1.0, 1.0], np.float32)
    y = batch_normalization(x, scale, bias, mean, var, epsilon=0.0)
    np.testing.assert_array_equal(y, [[-1.0, -np.inf], [-0.75, np.inf]])
    assert y.dtype == np.float32
    inputs = {"x": x, "s": scale, "b": bias, "m": mean, "v": var}
    model = _model("BatchNormalization", inputs, {"epsilon": 0.0}, opset=15)
    np.testing.assert_array_equal(run_onnxrt(model, _feeds(inputs))[0], y)


@pytest.mark.parametrize("axis, with_bias, scale_shape", [(-1, True, (48,)), (-1, False, (48,)), (1, True, (5, 48)), (2, True, (1, 48)), (0, True, (3, 5, 48))])
def test_compiled_layer_normalization_equals_the_numpy_path(axis, with_bias, scale_shape):
    """float32 LayerNormalization through the numba row loop (statistics in float64) against
    the numpy passes: Y, Mean and InvStdDev, same shapes and dtypes, float32 rounding apart."""
    from onnxrt import native as _jit
    from onnxrt.ops_cpu.op_normalization import layer_normalization

    rng = np.random.default_rng(21)
    x = (rng.standard_normal((3, 5, 48)) * 4 + 100).astype(np.float32)  # a large mean: cancellation matters
    scale = rng.standard_normal(scale_shape).astype(np.float32)
    bias = rng.standard_normal(scale_shape).astype(np.float32) if with_bias else None
    assert _jit.kernels() is not None
    from onnxrt.fastpaths.norm import layer_norm_compiled
    from onnxrt.ops_cpu.op_normalization import _as_columns

    ax = axis % 3
    got = layer_norm_compiled(x, ax, 1e-5, _as_columns(scale, x.shape, ax), None if bias is None else _as_columns(bias, x.shape, ax))
    expected = layer_normalization(x, scale, bias, axis=axis, epsilon=1e-5)  # the reference kernel
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype == np.float32 and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=2e-5, atol=2e-5)
    # against float64
    x64 = x.astype(np.float64)
    red = tuple(range(axis % 3, 3))
    mu = x64.mean(axis=red, keepdims=True)
    ref = (x64 - mu) / np.sqrt(((x64 - mu) ** 2).mean(axis=red, keepdims=True) + 1e-5) * scale
    if with_bias:
        ref = ref + bias
    np.testing.assert_allclose(got[0], ref, rtol=1e-4, atol=1e-4)


def test_compiled_batch_normalization_equals_the_numpy_path():
    from onnxrt import native as _jit
    from onnxrt.ops_cpu.op_batch_normalization import batch_normalization

    rng = np.random.default_rng(22)
    x = rng.standard_normal((2, 7, 9, 11)).astype(np.float32)
    params = [rng.standard_normal(7).astype(np.float32) for _ in range(3)] + [rng.uniform(0.5, 2, 7).astype(np.float32)]
    from onnxrt.fastpaths.norm import affine_compiled
    from onnxrt.ops_cpu.op_batch_normalization import fold_statistics

    assert _jit.kernels() is not None
    a, b = fold_statistics(x, *params, 1e-5, True)
    y = affine_compiled(x, a.astype(np.float32), b.astype(np.float32), False)
    expected = batch_normalization(x, *params)  # the reference kernel
    assert y.dtype == np.float32 and y.shape == x.shape
    np.testing.assert_array_equal(y, expected)  # same two roundings per element
