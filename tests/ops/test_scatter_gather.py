"""The gather/scatter family: spec examples, differential tests against plain loops, errors."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_gather import Gather, gather
from onnxrt.ops_cpu.op_gather_elements import gather_elements
from onnxrt.ops_cpu.op_gather_nd import gather_nd, scatter_nd
from onnxrt.ops_cpu.op_scatter_elements import ScatterElements, scatter_elements

from ..helpers import make_single_node_model

# --------------------------------------------------------------------------------------
# Plain-loop definitions straight from the spec text (the oracle of the differential tests)
# --------------------------------------------------------------------------------------

_LOOP_REDUCE = {
    "add": lambda a, b: a + b,
    "mul": lambda a, b: a * b,
    "max": np.maximum,
    "min": np.minimum,
}


def loop_scatter_elements(data, indices, updates, axis, reduction):
    out = data.copy()
    s = data.shape[axis]
    for pos in itertools.product(*[range(n) for n in indices.shape]):
        i = int(indices[pos])
        if i < 0:
            i += s
        target = list(pos)
        target[axis] = i
        target = tuple(target)
        if reduction == "none":
            out[target] = updates[pos]
        else:
            out[target] = _LOOP_REDUCE[reduction](out[target], updates[pos])
    return out


def loop_gather(data, indices, axis):
    s = data.shape[axis]
    out_shape = data.shape[:axis] + indices.shape + data.shape[axis + 1:]
    out = np.empty(out_shape, dtype=data.dtype)
    for pos in itertools.product(*[range(n) for n in out_shape]):
        pre = pos[:axis]
        ind = pos[axis:axis + indices.ndim]
        post = pos[axis + indices.ndim:]
        i = int(indices[ind]) if indices.ndim else int(indices)
        if i < 0:
            i += s
        out[pos] = data[pre + (i,) + post]
    return out


def loop_gather_elements(data, indices, axis):
    out = np.empty(indices.shape, dtype=data.dtype)
    s = data.shape[axis]
    for pos in itertools.product(*[range(n) for n in indices.shape]):
        i = int(indices[pos])
        if i < 0:
            i += s
        src = list(pos)
        src[axis] = i
        out[pos] = data[tuple(src)]
    return out


def loop_gather_nd(data, indices, b):
    k = indices.shape[-1]
    out_shape = indices.shape[:-1] + data.shape[b + k:]
    out = np.empty(out_shape, dtype=data.dtype)
    for pos in itertools.product(*[range(n) for n in indices.shape[:-1]]):
        coord = [int(c) for c in indices[pos]]
        coord = [c + data.shape[b + j] if c < 0 else c for j, c in enumerate(coord)]
        out[pos] = data[tuple(pos[:b]) + tuple(coord)]
    return out


def loop_scatter_nd(data, indices, updates, reduction):
    out = data.copy()
    for pos in itertools.product(*[range(n) for n in indices.shape[:-1]]):
        coord = tuple(int(c) + (data.shape[j] if c < 0 else 0) for j, c in enumerate(indices[pos]))
        if reduction == "none":
            out[coord] = updates[pos]
        else:
            out[coord] = _LOOP_REDUCE[reduction](out[coord], updates[pos])
    return out


# --------------------------------------------------------------------------------------
# Spec examples, verbatim
# --------------------------------------------------------------------------------------


def test_scatter_elements_spec_example_1():
    data = np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [0.0, 0.0, 0.0]], dtype=np.float32)
    indices = np.array([[1, 0, 2], [0, 2, 1]], dtype=np.int64)
    updates = np.array([[1.0, 1.1, 1.2], [2.0, 2.1, 2.2]], dtype=np.float32)
    expected = np.array([[2.0, 1.1, 0.0], [1.0, 0.0, 2.2], [0.0, 2.1, 1.2]], dtype=np.float32)
    out = scatter_elements(data, indices, updates)
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.float32 and out.shape == (3, 3)


def test_scatter_elements_spec_example_2():
    data = np.array([[1.0, 2.0, 3.0, 4.0, 5.0]], dtype=np.float32)
    indices = np.array([[1, 3]], dtype=np.int64)
    updates = np.array([[1.1, 2.1]], dtype=np.float32)
    out = scatter_elements(data, indices, updates, axis=1)
    np.testing.assert_array_equal(out, np.array([[1.0, 1.1, 3.0, 2.1, 5.0]], dtype=np.float32))
    assert out.dtype == np.float32 and out.shape == (1, 5)


def test_gather_spec_example_1():
    data = np.array([[1.0, 1.2], [2.3, 3.4], [4.5, 5.7]], dtype=np.float32)
    indices = np.array([[0, 1], [1, 2]], dtype=np.int64)
    expected = np.array([[[1.0, 1.2], [2.3, 3.4]], [[2.3, 3.4], [4.5, 5.7]]], dtype=np.float32)
    out = gather(data, indices, axis=0)
    np.testing.assert_array_equal(out, expected)
    assert out.shape == (2, 2, 2) and out.dtype == np.float32


def test_gather_spec_example_2():
    data = np.array([[1.0, 1.2, 1.9], [2.3, 3.4, 3.9], [4.5, 5.7, 5.9]], dtype=np.float32)
    indices = np.array([[0, 2]], dtype=np.int64)
    expected = np.array([[[1.0, 1.9]], [[2.3, 3.9]], [[4.5, 5.9]]], dtype=np.float32)
    out = gather(data, indices, axis=1)
    np.testing.assert_array_equal(out, expected)
    assert out.shape == (3, 1, 2) and out.dtype == np.float32


# --------------------------------------------------------------------------------------
# Differential tests
# --------------------------------------------------------------------------------------

DTYPES = [np.float32, np.float64, np.float16, np.int8, np.uint8, np.int32, np.int64, np.bool_]


def _values(rng, shape, dtype):
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if np.dtype(dtype).kind in "iu":
        return rng.integers(0, 100, size=shape).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)


@st.composite
def scatter_case(draw):
    rank = draw(st.integers(1, 4))
    shape = tuple(draw(st.lists(st.integers(1, 4), min_size=rank, max_size=rank)))
    axis = draw(st.integers(-rank, rank - 1))
    ishape = tuple(draw(st.integers(0 if i == 0 else 1, n)) for i, n in enumerate(shape))
    ishape = tuple(draw(st.integers(1, 5)) if i == (axis % rank) else d for i, d in enumerate(ishape))
    dtype = draw(st.sampled_from(DTYPES))
    itype = draw(st.sampled_from([np.int32, np.int64]))
    reduction = draw(st.sampled_from(["none", "add", "mul", "max", "min"]))
    seed = draw(st.integers(0, 2**31))
    return shape, ishape, axis, dtype, itype, reduction, seed


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scatter_case())
def test_scatter_elements_matches_loop(case):
    shape, ishape, axis, dtype, itype, reduction, seed = case
    if dtype == np.bool_ and reduction in ("add", "mul"):
        reduction = "max"
    rng = np.random.default_rng(seed)
    s = shape[axis]
    data = _values(rng, shape, dtype)
    indices = rng.integers(-s, s, size=ishape).astype(itype)  # duplicates are likely
    updates = _values(rng, ishape, dtype)
    before = data.copy()
    got = scatter_elements(data, indices, updates, axis=axis, reduction=reduction)
    want = loop_scatter_elements(data, indices, updates, axis % len(shape), reduction)
    np.testing.assert_array_equal(got, want)
    assert got.dtype == data.dtype and got.shape == data.shape
    np.testing.assert_array_equal(data, before)  # the input is untouched


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 4), st.integers(0, 3), st.sampled_from(DTYPES))
def test_gather_matches_loop(seed, rank, qrank, dtype):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(1, 4, size=rank))
    axis = int(rng.integers(-rank, rank))
    s = shape[axis]
    indices = rng.integers(-s, s, size=tuple(rng.integers(0, 3, size=qrank))).astype(np.int64)
    data = _values(rng, shape, dtype)
    got = gather(data, indices, axis=axis)
    want = loop_gather(data, indices, axis % rank)
    np.testing.assert_array_equal(got, want)
    assert got.shape == want.shape and got.dtype == data.dtype


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 4), st.sampled_from(DTYPES))
def test_gather_elements_matches_loop(seed, rank, dtype):
    rng = np.random.default_rng(seed)
    shape = tuple(rng.integers(1, 4, size=rank))
    axis = int(rng.integers(-rank, rank))
    ishape = tuple(int(rng.integers(1, n + 1)) if i != axis % rank else int(rng.integers(1, 5)) for i, n in enumerate(shape))
    s = shape[axis]
    indices = rng.integers(-s, s, size=ishape).astype(np.int32)
    data = _values(rng, shape, dtype)
    got = gather_elements(data, indices, axis=axis)
    np.testing.assert_array_equal(got, loop_gather_elements(data, indices, axis % rank))
    assert got.shape == ishape and got.dtype == data.dtype


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 4), st.integers(0, 2))
def test_gather_nd_matches_loop(seed, rank, batch_dims):
    rng = np.random.default_rng(seed)
    batch_dims = min(batch_dims, rank - 1)
    shape = tuple(int(x) for x in rng.integers(1, 4, size=rank))
    k = int(rng.integers(1, rank - batch_dims + 1))
    lead = tuple(int(x) for x in rng.integers(1, 3, size=int(rng.integers(0, 2))))
    ishape = shape[:batch_dims] + lead + (k,)
    cols = [rng.integers(-shape[batch_dims + j], shape[batch_dims + j], size=ishape[:-1]) for j in range(k)]
    indices = np.stack(cols, axis=-1).astype(np.int64)
    data = rng.standard_normal(shape).astype(np.float32)
    got = gather_nd(data, indices, batch_dims=batch_dims)
    want = loop_gather_nd(data, indices, batch_dims)
    np.testing.assert_array_equal(got, want)
    assert got.shape == want.shape and got.dtype == np.float32


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31), st.integers(1, 3), st.sampled_from(["none", "add", "mul", "max", "min"]))
def test_scatter_nd_matches_loop(seed, rank, reduction):
    rng = np.random.default_rng(seed)
    shape = tuple(int(x) for x in rng.integers(1, 4, size=rank))
    k = int(rng.integers(1, rank + 1))
    n = int(rng.integers(1, 6))
    indices = np.stack([rng.integers(-shape[j], shape[j], size=n) for j in range(k)], axis=-1).astype(np.int64)
    updates = rng.standard_normal((n,) + shape[k:]).astype(np.float64)
    data = rng.standard_normal(shape)
    got = scatter_nd(data, indices, updates, reduction=reduction)
    np.testing.assert_array_equal(got, loop_scatter_nd(data, indices, updates, reduction))
    assert got.shape == shape and got.dtype == np.float64


def test_scatter_elements_strings_and_bool():
    data = np.array([["a", "b", "c"]], dtype=object)
    out = scatter_elements(data, np.array([[2, 0]]), np.array([["x", "y"]], dtype=object), axis=1)
    assert out.tolist() == [["y", "b", "x"]] and out.dtype == object
    b = np.zeros((2, 2), dtype=bool)
    out = scatter_elements(b, np.array([[1, 1]]), np.array([[True, False]]), axis=0, reduction="max")
    assert out.tolist() == [[False, False], [True, False]] and out.dtype == np.bool_


def test_scatter_elements_duplicates_none_last_wins():
    data = np.zeros((1, 4), dtype=np.float32)
    out = scatter_elements(data, np.array([[1, 1, 1]]), np.array([[1.0, 2.0, 3.0]], np.float32), axis=1)
    np.testing.assert_array_equal(out, [[0.0, 3.0, 0.0, 0.0]])


def test_gather_empty_indices_shape():
    data = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    out = gather(data, np.zeros((0, 5), dtype=np.int64), axis=1)
    assert out.shape == (2, 0, 5, 4) and out.dtype == np.float32
    out = gather(data, np.array(2, dtype=np.int64), axis=2)  # scalar index: rank r - 1
    assert out.shape == (2, 3)
    np.testing.assert_array_equal(out, data[:, :, 2])


# --------------------------------------------------------------------------------------
# Errors
# --------------------------------------------------------------------------------------


def test_scatter_elements_index_out_of_range_names_index_and_bound():
    with pytest.raises(IndexOutOfRangeError, match=r"holds 5, out of range \[-5, 4\]"):
        scatter_elements(np.zeros((2, 5)), np.array([[0, 5]]), np.zeros((1, 2)), axis=1)
    with pytest.raises(IndexOutOfRangeError, match=r"holds -3, out of range \[-2, 1\]"):
        scatter_elements(np.zeros((2, 5)), np.array([[-3]]), np.zeros((1, 1)), axis=0)


def test_gather_index_out_of_range():
    with pytest.raises(IndexOutOfRangeError, match=r"holds 3, out of range \[-3, 2\] for axis 0"):
        gather(np.zeros(3), np.array([0, 3]))


def test_scatter_elements_shape_errors():
    with pytest.raises(KernelError, match="updates must have the shape of indices"):
        scatter_elements(np.zeros((2, 2)), np.zeros((1, 2), np.int64), np.zeros((2, 2)))
    with pytest.raises(KernelError, match="rank of data"):
        scatter_elements(np.zeros((2, 2)), np.zeros((2,), np.int64), np.zeros((2,)))


def test_error_in_graph_names_node_and_shapes():
    model = make_single_node_model(
        "ScatterElements",
        [("data", TensorProto.FLOAT, [2, 3]), ("idx", TensorProto.INT64, [1, 2]), ("upd", TensorProto.FLOAT, [1, 2])],
        [("y", TensorProto.FLOAT, None)],
        opset=18,
        node_name="scatter_node",
        axis=1,
    )
    sess = onnxrt.InferenceSession(model)
    with pytest.raises(IndexOutOfRangeError) as exc:
        sess.run(None, {"data": np.zeros((2, 3), np.float32), "idx": np.array([[0, 9]]), "upd": np.ones((1, 2), np.float32)})
    msg = str(exc.value)
    assert "'scatter_node'" in msg and "ScatterElements" in msg
    assert "float32[2,3]" in msg and "int64[1,2]" in msg and "holds 9" in msg
    assert isinstance(exc.value.__cause__, IndexOutOfRangeError)


def test_reduction_not_allowed_by_version():
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], reduction="max", name="n1")
    with pytest.raises(InvalidAttributeError, match=r"'reduction' is 'max'.*version 16"):
        ScatterElements(node, since_version=16)


def test_class_binding_and_signature():
    node = helper.make_node("Gather", ["d", "i"], ["y"], axis=1)
    op = Gather(node, since_version=13)
    (out,) = op.run(np.arange(6).reshape(2, 3), np.array([2, 0]))
    np.testing.assert_array_equal(out, [[2, 0], [5, 3]])
    assert op.args_default == ["data", "indices", "axis=0"]
    assert op.args_default_modified == ["axis=1"]
