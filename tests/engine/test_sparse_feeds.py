"""Sparse tensors as feeds: an input declared sparse takes a checked SparseTensor, a dense
input refuses one, and malformed or oversized sparse feeds get InvalidFeedError before
anything of the dense size is built."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt import OrtSparseFormat, SparseTensor
from onnxrt.errors import InvalidFeedError, InvalidTypeError

F = TensorProto.FLOAT
CPU = onnxrt.OrtDevice.make("cpu", 0)


def sparse_model(nodes=None, shape=(3, 4), elem=F, out_dense=False):
    s_in = helper.make_value_info("S", helper.make_sparse_tensor_type_proto(elem, list(shape) if shape else None))
    if nodes is None:  # the graph hands its sparse input to its output
        nodes, outputs = [], [s_in]
    else:
        outputs = [helper.make_tensor_value_info("Y", elem, None)]
    graph = helper.make_graph(nodes, "g", [s_in, helper.make_tensor_value_info("X", F, [2])],
                              outputs + [helper.make_tensor_value_info("X2", F, [2])])
    graph.node.append(helper.make_node("Neg", ["X"], ["X2"]))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


X = np.array([1, -2], np.float32)


def coo(values=(1.5, -2.0, 3.0), indices=(1, 5, 11), shape=(3, 4)):
    return SparseTensor.sparse_coo_from_numpy(list(shape), np.array(values, np.float32), np.array(indices, np.int64), CPU)


def raw_sparse(values, indices, shape, fmt=OrtSparseFormat.ORT_SPARSE_COO):
    """A SparseTensor built without the constructors' checks (as a caller could after changing its arrays)."""
    return SparseTensor(fmt, list(shape), np.asarray(values, np.float32), tuple(np.asarray(i) for i in indices))


@pytest.mark.parametrize("wrap", [False, True], ids=["bare", "ortvalue"])
@pytest.mark.parametrize("make", [
    lambda: coo(),
    lambda: SparseTensor.sparse_coo_from_numpy([3, 4], np.array([1.5, -2.0, 3.0], np.float32),
                                               np.array([[0, 1], [1, 1], [2, 3]], np.int64), CPU),
    lambda: SparseTensor.sparse_csr_from_numpy([3, 4], np.array([1.5, -2.0, 3.0], np.float32), np.array([1, 1, 3], np.int64),
                                               np.array([0, 1, 2, 3], np.int64), CPU),
], ids=["coo_linear", "coo_coordinates", "csr"])
def test_a_sparse_input_passes_through_as_a_checked_copy(make, wrap):
    sess = onnxrt.InferenceSession(sparse_model())
    st = make()
    feed = onnxrt.OrtValue.ort_value_from_sparse_tensor(st) if wrap else st
    out, x2 = sess.run(None, {"S": feed, "X": X})
    np.testing.assert_array_equal(x2, -X)
    assert isinstance(out, SparseTensor) and out is not st
    assert out.format() == st.format() and out.dense_shape() == [3, 4] and out.data_type() == "sparse_tensor(float)"
    np.testing.assert_array_equal(out.values(), [1.5, -2.0, 3.0])
    assert out.values().dtype == np.float32
    assert not np.shares_memory(out.values(), st.values())
    if st.format() == OrtSparseFormat.ORT_SPARSE_COO:
        np.testing.assert_array_equal(out.as_coo_view().indices(), st.as_coo_view().indices())
    else:
        np.testing.assert_array_equal(out.as_csrc_view().inner(), [1, 1, 3])
        np.testing.assert_array_equal(out.as_csrc_view().outer(), [0, 1, 2, 3])


def test_onnx_inference_takes_a_sparse_feed_too():
    res = onnxrt.OnnxInference(sparse_model()).run({"S": coo(), "X": X})
    np.testing.assert_array_equal(res["S"].values(), [1.5, -2.0, 3.0])
    np.testing.assert_array_equal(res["X2"], -X)


def test_a_standard_operator_fed_a_sparse_tensor_is_named():
    sess = onnxrt.InferenceSession(sparse_model([helper.make_node("Relu", ["S"], ["Y"], name="relu")]))
    with pytest.raises(InvalidTypeError, match=r"Node 'relu' \(Relu\).*SparseTensor"):
        sess.run(None, {"S": coo(), "X": X})


def test_a_dense_input_refuses_a_sparse_tensor():
    sess = onnxrt.InferenceSession(sparse_model())
    with pytest.raises(InvalidFeedError, match=r"Input 'X' expects a numpy array of type tensor\(float\), got SparseTensor"):
        sess.run(None, {"S": coo(), "X": coo([1.0], [0], [2])})
    with pytest.raises(InvalidFeedError, match="Input 'X': a sparse tensor can only feed an input declared as a sparse tensor"):
        sess.run(None, {"S": coo(), "X": onnxrt.OrtValue.ort_value_from_sparse_tensor(coo([1.0], [0], [2]))})


def test_a_sparse_input_refuses_a_dense_array():
    sess = onnxrt.InferenceSession(sparse_model())
    with pytest.raises(InvalidFeedError, match=r"Input 'S' \(sparse_tensor\(float\)\) expects a sparse tensor, got an array of float32"):
        sess.run(None, {"S": np.zeros((3, 4), np.float32), "X": X})


# (id, the feed, what the message says)
BAD = [
    ("negative", lambda: raw_sparse([1, 2], [[-1, 3]], (3, 4)), "index 0 is -1, outside the 12 elements of dense shape [3, 4]"),
    ("out_of_range", lambda: raw_sparse([1, 2], [[3, 12]], (3, 4)), "index 1 is 12, outside the 12 elements"),
    ("coordinate_out_of_range", lambda: raw_sparse([1, 2], [[[0, 1], [1, 4]]], (3, 4)), "index 1 is [1, 4], outside dense shape [3, 4] on axis 1"),
    ("descending", lambda: raw_sparse([1, 2], [[5, 3]], (3, 4)), "index 1 (3 linearised) comes after index 0 (5)"),
    ("duplicate", lambda: raw_sparse([1, 2], [[[1, 1], [1, 1]]], (3, 4)), "index 1 (5 linearised) repeats index 0 (5)"),
    ("one_value_two_indices", lambda: raw_sparse([1], [[1, 2]], (3, 4)), "indices must have shape [1] (linearised) or [1, 2]"),
    ("float_indices", lambda: raw_sparse([1], [np.array([1.0])], (3, 4)), "indices must be int64; they are float64"),
    ("csr_row_unsorted", lambda: raw_sparse([1, 2, 3], [[2, 0, 1], [0, 2, 2, 3]], (3, 4), OrtSparseFormat.ORT_SPARSE_CSRC),
     "index 1 (0 linearised) comes after index 0 (2)"),
    ("csr_outer", lambda: raw_sparse([1, 2], [[0, 1], [0, 2, 1, 2]], (3, 4), OrtSparseFormat.ORT_SPARSE_CSRC),
     "outer indices must start at 0, never decrease and end at 2"),
    ("csr_column_out_of_range", lambda: raw_sparse([1], [[4], [0, 1, 1, 1]], (3, 4), OrtSparseFormat.ORT_SPARSE_CSRC),
     "outside dense shape [3, 4] on axis 1"),
    ("wrong_dtype", lambda: SparseTensor.sparse_coo_from_numpy([3, 4], np.ones(1, np.float64), np.array([0]), CPU),
     "expects values of element type float, got an array of dtype float64"),
    ("wrong_shape", lambda: coo([1.0], [0], (4, 3)), "expects dense shape [3, 4], got [4, 3]"),
]


@pytest.mark.parametrize("case", BAD, ids=[c[0] for c in BAD])
def test_malformed_sparse_feeds_are_refused(case):
    _, make, message = case
    sess = onnxrt.InferenceSession(sparse_model())
    for feed in (make(), onnxrt.OrtValue.ort_value_from_sparse_tensor(make())):
        with pytest.raises(InvalidFeedError) as info:
            sess.run(None, {"S": feed, "X": X})
        assert "Input 'S' (sparse_tensor(float))" in str(info.value)
        assert message in str(info.value), str(info.value)


def test_indices_changed_after_construction_are_checked_at_the_run():
    idx = np.array([1, 5, 11], np.int64)
    st = SparseTensor.sparse_coo_from_numpy([3, 4], np.ones(3, np.float32), idx, CPU)
    sess = onnxrt.InferenceSession(sparse_model())
    idx[2] = -7  # the tensor shares the caller's array
    with pytest.raises(InvalidFeedError, match="index 2 is -7"):
        sess.run(None, {"S": st, "X": X})


def test_a_huge_dense_shape_is_refused_before_anything_dense_is_built():
    sess_model = sparse_model(shape=None)
    so = onnxrt.SessionOptions()
    so.max_tensor_bytes = 2**20
    sess = onnxrt.InferenceSession(sess_model, so)
    st = coo([1.0, 2.0], [0, 10**12 - 1], (10**6, 10**6))
    tracemalloc.start()
    try:
        with pytest.raises(InvalidFeedError) as info:
            sess.run(None, {"S": st, "X": X})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "dense shape [1000000, 1000000] of float32 needs 4000000000000 bytes, above the limit of 1048576 bytes" in str(info.value)
    assert peak < 2**20
    # without the cap the machine's memory is the limit; a dense form that fits passes through
    (out, _) = onnxrt.InferenceSession(sess_model).run(None, {"S": coo([1.0, 2.0], [0, 10**6 - 1], (1000, 1000)), "X": X})
    assert out.dense_shape() == [1000, 1000]
    np.testing.assert_array_equal(out.as_coo_view().indices(), [0, 10**6 - 1])
