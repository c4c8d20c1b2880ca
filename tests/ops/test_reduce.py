"""Reductions: the Reduce* table, ArgMax/ArgMin, CumSum/CumProd, TopK and Det — values, shapes, dtypes, versions, errors."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import KernelError
from onnxrt.ops_cpu import family_reduce
from onnxrt.ops_cpu.family_reduce import REDUCTIONS, reduce
from onnxrt.ops_cpu.op_argmax import argmax, argmin
from onnxrt.ops_cpu.op_cumsum import cumprod, cumsum
from onnxrt.ops_cpu.op_det import det
from onnxrt.ops_cpu.op_topk import topk

from ..helpers import make_single_node_model

F, D, I32, I64 = TensorProto.FLOAT, TensorProto.DOUBLE, TensorProto.INT32, TensorProto.INT64

# --------------------------------------------------------------------------------------
# Plain definitions from the spec text, in float64 (the oracle)
# --------------------------------------------------------------------------------------

PLAIN = {
    "ReduceSum": lambda x, ax, k: np.sum(x, axis=ax, keepdims=k),
    "ReduceMean": lambda x, ax, k: np.mean(x, axis=ax, keepdims=k),
    "ReduceMax": lambda x, ax, k: np.max(x, axis=ax, keepdims=k),
    "ReduceMin": lambda x, ax, k: np.min(x, axis=ax, keepdims=k),
    "ReduceProd": lambda x, ax, k: np.prod(x, axis=ax, keepdims=k),
    "ReduceL1": lambda x, ax, k: np.sum(np.abs(x), axis=ax, keepdims=k),
    "ReduceL2": lambda x, ax, k: np.sqrt(np.sum(x * x, axis=ax, keepdims=k)),
    "ReduceLogSum": lambda x, ax, k: np.log(np.sum(x, axis=ax, keepdims=k)),
    "ReduceLogSumExp": lambda x, ax, k: np.log(np.sum(np.exp(x), axis=ax, keepdims=k)),
    "ReduceSumSquare": lambda x, ax, k: np.sum(x * x, axis=ax, keepdims=k),
}
NAMES = [r.name for r in REDUCTIONS]


def run_model(model, feeds):
    return onnxrt.InferenceSession(model.SerializeToString()).run(None, feeds)


def reduce_model(op, x, axes, keepdims, opset, noop=None):
    """A one-node model passing axes as attribute or input depending on the opset."""
    row = next(r for r in REDUCTIONS if r.name == op)
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    atts = {"keepdims": keepdims}
    inputs = [("x", elem, list(x.shape))]
    inits = []
    if axes is not None and opset < row.axes_input_since:
        atts["axes"] = list(axes)
    elif axes is not None:
        inputs.append(("axes", I64, [len(axes)]))
        inits.append(helper.make_tensor("axes", I64, [len(axes)], list(axes)))
    if noop is not None:
        atts["noop_with_empty_axes"] = noop
    return make_single_node_model(op, inputs, [("y", elem, None)], opset=opset, initializers=inits, **atts)


def test_table_has_one_row_per_operator_and_builds_classes():
    assert len(NAMES) == len(set(NAMES)) == 10
    for name in NAMES:
        cls = getattr(family_reduce, name)
        assert cls.__module__ == family_reduce.__name__
        assert onnxrt.registry.versions_of(name) == list(next(r.versions for r in REDUCTIONS if r.name == name))


@pytest.mark.parametrize("op", NAMES)
@pytest.mark.parametrize("axes", [None, (0,), (1,), (-1,), (0, 2), (2, -3)])
@pytest.mark.parametrize("keepdims", [0, 1])
def test_reduce_float_against_plain_definition(op, axes, keepdims):
    rng = np.random.default_rng(hash((op, axes, keepdims)) % 2**32)
    x = rng.uniform(0.5, 2.0, size=(3, 4, 5)).astype(np.float32)
    got = reduce(op, x, axes, keepdims)
    want = PLAIN[op](x.astype(np.float64), None if axes is None else tuple(axes), bool(keepdims))
    assert got.dtype == np.float32
    assert got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=2e-5)


@pytest.mark.parametrize("op", NAMES)
@pytest.mark.parametrize("opset", [1, 11, 13, 18, 20, 28])
def test_reduce_through_the_engine_every_version(op, opset):
    row = next(r for r in REDUCTIONS if r.name == op)
    if opset < min(row.versions):
        pytest.skip("no version")
    x = np.random.default_rng(opset).uniform(0.5, 2.0, size=(2, 3, 4)).astype(np.float32)
    axes = (-1, 0) if opset >= 11 else (2, 0)  # negative axes from 11
    (y,) = run_model(reduce_model(op, x, axes, 0, opset), {"x": x})
    want = PLAIN[op](x.astype(np.float64), (2, 0), False)
    assert y.shape == (3,) and y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=2e-5)


@pytest.mark.parametrize("op", NAMES)
def test_reduce_matches_onnxruntime(op):
    x = np.random.default_rng(7).uniform(0.1, 3.0, size=(4, 5, 6)).astype(np.float32)
    model = reduce_model(op, x, (1, -1), 1, 18)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (got,) = run_model(model, {"x": x})
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint32, np.uint64])
@pytest.mark.parametrize("op", NAMES)
def test_reduce_integers_stay_integers(op, dtype):
    x = np.arange(1, 13, dtype=dtype).reshape(3, 4)
    got = reduce(op, x, [1], 0)
    assert got.dtype == dtype and got.shape == (3,)
    plain = PLAIN[op](x.astype(np.float64), (1,), False)
    if op in ("ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceMean"):
        np.testing.assert_array_equal(got, np.trunc(plain).astype(dtype))  # truncated like a C cast
    else:
        np.testing.assert_array_equal(got, plain.astype(dtype))


def test_reduce_sum_int32_does_not_widen_and_wraps():
    x = np.array([2**31 - 1, 1], dtype=np.int32)
    got = reduce("ReduceSum", x, None, 0)
    assert got.dtype == np.int32 and got.shape == ()
    assert int(got) == -(2**31)


def test_reduce_mean_integer_truncates_toward_zero():
    x = np.array([[-3, -4], [3, 4]], dtype=np.int32)
    np.testing.assert_array_equal(reduce("ReduceMean", x, [1], 0), np.array([-3, 3], np.int32))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
@pytest.mark.parametrize("op", NAMES)
def test_reduce_half_types_accumulate_in_float32(op, dtype):
    x = np.random.default_rng(3).uniform(0.97, 1.03, size=(8, 300)).astype(dtype)  # the product stays in range
    got = reduce(op, x, [1], 1)
    assert got.dtype == np.dtype(dtype) and got.shape == (8, 1)
    want = PLAIN[op](x.astype(np.float64), (1,), True)
    tol = 1e-2 if dtype == np.float16 else 2e-2
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol)


def test_reduce_sum_float16_long_row_is_accurate():
    # 4096 ones in float16 accumulate to 2048 when each step rounds; float32 accumulation is exact
    x = np.ones(4096, dtype=np.float16)
    assert float(reduce("ReduceSum", x, None, 0)) == 4096.0


EMPTY_IDENTITY = {
    "ReduceSum": 0.0,
    "ReduceProd": 1.0,
    "ReduceMax": -np.inf,
    "ReduceMin": np.inf,
    "ReduceL1": 0.0,
    "ReduceL2": 0.0,
    "ReduceSumSquare": 0.0,
    "ReduceLogSum": -np.inf,
    "ReduceLogSumExp": -np.inf,
    "ReduceMean": 0.0,  # undefined by the spec; onnxruntime gives 0
}


@pytest.mark.parametrize("op", NAMES)
def test_reduce_empty_set(op):
    x = np.zeros((2, 0, 4), dtype=np.float32)
    got = reduce(op, x, [1], 1)
    assert got.shape == (2, 1, 4) and got.dtype == np.float32
    np.testing.assert_array_equal(got, np.full((2, 1, 4), EMPTY_IDENTITY[op], np.float32))


@pytest.mark.parametrize("op", NAMES)
def test_reduce_empty_non_reduced_axis(op):
    x = np.zeros((0, 3), dtype=np.float32)
    got = reduce(op, x, [1], 0)
    assert got.shape == (0,) and got.dtype == np.float32


def test_reduce_max_min_empty_integers_and_bool():
    assert int(reduce("ReduceMax", np.zeros((0,), np.int32), None, 0)) == np.iinfo(np.int32).min
    assert int(reduce("ReduceMin", np.zeros((0,), np.uint8), None, 0)) == 255
    assert bool(reduce("ReduceMax", np.zeros((0,), bool), None, 0)) is False
    assert bool(reduce("ReduceMin", np.zeros((0,), bool), None, 0)) is True


def test_reduce_max_bool_and_nan_propagation():
    b = np.array([[True, False], [False, False]])
    np.testing.assert_array_equal(reduce("ReduceMax", b, [1], 0), [True, False])
    np.testing.assert_array_equal(reduce("ReduceMin", b, [1], 0), [False, False])
    x = np.array([1.0, np.nan, 3.0], np.float32)
    assert np.isnan(reduce("ReduceMax", x, None, 0))  # NaN propagates (the spec is silent; numpy's rule)


def test_reduce_log_sum_exp_is_stable():
    x = np.array([[1000.0, 1000.0], [-1000.0, -1000.0], [-np.inf, -np.inf]], np.float32)
    got = reduce("ReduceLogSumExp", x, [1], 0)
    np.testing.assert_allclose(got[:2], [1000 + np.log(2), -1000 + np.log(2)], rtol=1e-6)
    assert got[2] == -np.inf


def test_noop_with_empty_axes_and_empty_axes_input():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    assert reduce("ReduceSum", x, [], 1, noop_with_empty_axes=1) is x
    np.testing.assert_array_equal(reduce("ReduceSum", x, [], 0, noop_with_empty_axes=0), np.float32(15))
    model = make_single_node_model(
        "ReduceSum",
        [("x", F, [2, 3]), ("axes", I64, [0])],
        [("y", F, None)],
        opset=13,
        initializers=[helper.make_tensor("axes", I64, [0], [])],
        noop_with_empty_axes=1,
    )
    (y,) = run_model(model, {"x": x})
    np.testing.assert_array_equal(y, x)
    model = make_single_node_model("ReduceMean", [("x", F, [2, 3])], [("y", F, None)], opset=18, keepdims=0)
    (y,) = run_model(model, {"x": x})  # axes omitted: reduce everything
    assert y.shape == () and float(y) == 2.5


def test_reduce_rank0_input():
    x = np.array(3.0, np.float32)
    got = reduce("ReduceSum", x, None, 1)
    assert got.shape == () and float(got) == 3.0


def test_reduce_axes_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(KernelError, match=r"axes 2 is out of range for a tensor of rank 2, expected \[-2, 1\]"):
        reduce("ReduceSum", x, [2], 1)
    with pytest.raises(KernelError, match=r"repeats an axis"):
        reduce("ReduceSum", x, [1, -1], 1)
    model = reduce_model("ReduceL1", x, (5,), 1, 18)
    with pytest.raises(onnxrt.errors.KernelError, match=r"Node 'node' \(ReduceL1\).*axes 5 is out of range"):
        run_model(model, {"x": x})


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    st.sampled_from(["ReduceSum", "ReduceMax", "ReduceMin", "ReduceSumSquare", "ReduceL1"]),
    st.lists(st.integers(1, 4), min_size=1, max_size=4),
    st.data(),
)
def test_reduce_hypothesis_against_onnxruntime(op, shape, data):
    rank = len(shape)
    axes = data.draw(st.lists(st.integers(-rank, rank - 1), unique_by=lambda a: a % rank, max_size=rank))
    keep = data.draw(st.integers(0, 1))
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    model = reduce_model(op, x, tuple(axes) if axes else None, keep, 18)
    (want,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
    (got,) = run_model(model, {"x": x})
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------------------
# ArgMax / ArgMin
# --------------------------------------------------------------------------------------


def test_argmax_argmin_first_and_last_index():
    x = np.array([[2, 2, 1], [0, 3, 3]], np.int32)
    np.testing.assert_array_equal(argmax(x, 1, 0), [0, 1])
    np.testing.assert_array_equal(argmax(x, 1, 0, select_last_index=1), [1, 2])
    np.testing.assert_array_equal(argmin(x, 0, 1), [[1, 0, 0]])
    y = np.array([[1.0, 1.0], [1.0, 1.0]], np.float32)
    np.testing.assert_array_equal(argmin(y, -1, 1, select_last_index=1), [[1], [1]])
    out = argmax(np.zeros((2, 3, 4), np.float16), -2, 1)
    assert out.dtype == np.int64 and out.shape == (2, 1, 4)


@pytest.mark.parametrize("dtype", [np.uint8, np.int16, np.float64, ml_dtypes.bfloat16])
def test_argmax_types(dtype):
    x = np.array([[1, 5, 5, 0]], dtype=dtype)
    np.testing.assert_array_equal(argmax(x, 1, 0), [1])
    np.testing.assert_array_equal(argmax(x, 1, 0, 1), [2])


def test_argmax_version_without_select_last_index_and_errors():
    x = np.array([[3.0, 3.0]], np.float32)
    model = make_single_node_model("ArgMax", [("x", F, [1, 2])], [("y", I64, None)], opset=11, axis=1)
    (y,) = run_model(model, {"x": x})
    np.testing.assert_array_equal(y, [[0]])
    with pytest.raises(KernelError, match=r"axis 2 is out of range for a tensor of rank 2"):
        argmax(x, 2)
    with pytest.raises(KernelError, match=r"empty axis"):
        argmax(np.zeros((2, 0), np.float32), 1)


# --------------------------------------------------------------------------------------
# CumSum / CumProd
# --------------------------------------------------------------------------------------


def loop_cumulate(x, axis, exclusive, reverse, op, identity):
    x = np.moveaxis(x.astype(np.float64), axis, -1)
    out = np.empty_like(x)
    n = x.shape[-1]
    for idx in itertools.product(*[range(d) for d in x.shape[:-1]]):
        acc = identity
        order = range(n - 1, -1, -1) if reverse else range(n)
        for i in order:
            if exclusive:
                out[idx + (i,)] = acc
                acc = op(acc, x[idx + (i,)])
            else:
                acc = op(acc, x[idx + (i,)])
                out[idx + (i,)] = acc
    return np.moveaxis(out, -1, axis)


@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("axis", [0, 1, -1])
def test_cumsum_cumprod_against_loop(exclusive, reverse, axis):
    x = np.random.default_rng(1).integers(1, 4, size=(3, 4, 2)).astype(np.float32)
    got = cumsum(x, np.array(axis), exclusive, reverse)
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_allclose(got, loop_cumulate(x, axis, exclusive, reverse, lambda a, b: a + b, 0.0))
    got = cumprod(x, np.array([axis], np.int32), exclusive, reverse)
    np.testing.assert_allclose(got, loop_cumulate(x, axis, exclusive, reverse, lambda a, b: a * b, 1.0))


def test_cumsum_spec_example_and_types():
    x = np.array([1, 2, 3], np.int32)
    np.testing.assert_array_equal(cumsum(x, np.array(0)), [1, 3, 6])
    np.testing.assert_array_equal(cumsum(x, np.array(0), exclusive=1), [0, 1, 3])
    np.testing.assert_array_equal(cumsum(x, np.array(0), reverse=1), [6, 5, 3])
    np.testing.assert_array_equal(cumsum(x, np.array(0), exclusive=1, reverse=1), [5, 3, 0])
    np.testing.assert_array_equal(cumprod(x, np.array(0), exclusive=1, reverse=1), [6, 3, 1])
    assert cumsum(x, np.array(0)).dtype == np.int32
    h = np.full(3000, 1, np.float16)
    assert float(cumsum(h, np.array(0))[-1]) == 3000.0  # float32 accumulation
    assert cumsum(np.ones(4, ml_dtypes.bfloat16), np.array(0)).dtype == ml_dtypes.bfloat16
    with pytest.raises(KernelError, match="rank >= 1"):
        cumsum(np.array(1.0, np.float32), np.array(0))


# --------------------------------------------------------------------------------------
# TopK
# --------------------------------------------------------------------------------------


def test_topk_spec_example_and_ties_by_index():
    x = np.array([[0, 1, 2, 3], [7, 6, 5, 4], [8, 11, 10, 9]], np.float32)
    v, i = topk(x, 3, axis=1)
    np.testing.assert_array_equal(v, [[3, 2, 1], [7, 6, 5], [11, 10, 9]])
    np.testing.assert_array_equal(i, [[3, 2, 1], [0, 1, 2], [1, 2, 3]])
    assert v.dtype == np.float32 and i.dtype == np.int64
    t = np.array([1, 3, 3, 1, 3], np.int32)
    v, i = topk(t, 4, largest=1)
    np.testing.assert_array_equal(i, [1, 2, 4, 0])
    v, i = topk(t, 3, largest=0)
    np.testing.assert_array_equal(v, [1, 1, 3])
    np.testing.assert_array_equal(i, [0, 3, 1])


def test_topk_versions_and_errors():
    x = np.array([[1.0, 4.0, 2.0]], np.float32)
    m1 = make_single_node_model("TopK", [("x", F, [1, 3])], [("v", F, None), ("i", I64, None)], opset=1, k=2)
    v, i = run_model(m1, {"x": x})
    np.testing.assert_array_equal(i, [[1, 2]])
    m11 = make_single_node_model(
        "TopK", [("x", F, [1, 3]), ("k", I64, [1])], [("v", F, None), ("i", I64, None)], opset=11, largest=0
    )
    v, i = run_model(m11, {"x": x, "k": np.array([2], np.int64)})
    np.testing.assert_array_equal(v, [[1.0, 2.0]])
    assert topk(x, 0)[0].shape == (1, 0)
    with pytest.raises(KernelError, match=r"k is 4, expected a value in \[0, 3\]"):
        topk(x, 4)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 30), st.integers(0, 3), st.booleans(), st.integers(0, 2**31))
def test_topk_matches_onnxruntime(n, kk, largest, seed):
    k = min(kk, n)
    x = np.random.default_rng(seed).integers(0, 4, size=(3, n)).astype(np.float32)  # many ties
    model = make_single_node_model(
        "TopK", [("x", F, [3, n]), ("k", I64, [1])], [("v", F, None), ("i", I64, None)], opset=11, largest=int(largest)
    )
    feeds = {"x": x, "k": np.array([k], np.int64)}
    want = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = run_model(model, feeds)
    np.testing.assert_array_equal(got[0], want[0])
    np.testing.assert_array_equal(got[1], want[1])


@settings(max_examples=25, deadline=None)
@given(st.integers(256, 700), st.integers(1, 30), st.booleans(), st.integers(0, 2**31), st.sampled_from([np.float32, np.int32, np.uint8]))
def test_topk_partition_path_keeps_ties_by_index(n, k, largest, seed, dtype):
    """Small k on a long axis takes the partition path: same values and indices as a full stable sort."""
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 6, size=(4, n)).astype(dtype)
    if dtype == np.float32:
        x[1, rng.integers(0, n, 3)] = np.nan
    v, i = topk(x, k, axis=-1, largest=int(largest))
    key = np.where(np.isnan(x), np.inf, x) if dtype == np.float32 else x.astype(np.float64)
    for r in range(4):
        order = sorted(range(n), key=lambda j: (-key[r, j] if largest else key[r, j], j))[:k]
        assert i[r].tolist() == order
    np.testing.assert_array_equal(v, np.take_along_axis(x, i, axis=-1))
    v0, i0 = topk(x.T, k, axis=0, largest=int(largest))
    np.testing.assert_array_equal(i0, i.T)


# --------------------------------------------------------------------------------------
# Det
# --------------------------------------------------------------------------------------


def test_det_batches_and_types():
    x = np.array([[[1.0, 2.0], [3.0, 4.0]], [[2.0, 0.0], [0.0, 2.0]]], np.float32)
    got = det(x)
    assert got.shape == (2,) and got.dtype == np.float32
    np.testing.assert_allclose(got, [-2.0, 4.0], rtol=1e-6)
    assert det(x[0]).shape == ()
    assert det(x.astype(np.float16)).dtype == np.float16
    np.testing.assert_allclose(det(x.astype(ml_dtypes.bfloat16)).astype(np.float32), [-2.0, 4.0])
    with pytest.raises(KernelError, match=r"square matrix .* got shape \[2, 3\]"):
        det(np.zeros((2, 3), np.float32))
