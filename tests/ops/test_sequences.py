"""The sequence family and the optionals: kernels alone, in models, against onnxruntime, errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import IndexOutOfRangeError, KernelError
from onnxrt.ops_cpu.op_optional import OptionalGetElement, OptionalHasElement
from onnxrt.ops_cpu.op_sequence import (
    concat_from_sequence,
    sequence_at,
    sequence_erase,
    sequence_insert,
    split_to_sequence,
)

F, I64 = TensorProto.FLOAT, TensorProto.INT64


def _seq_vi(name: str, elem: int = F, shape=None) -> onnx.ValueInfoProto:
    return helper.make_tensor_sequence_value_info(name, elem, shape)


def _model(nodes, inputs, outputs, opset: int = 18, inits=()) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits))
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m


# --- kernels --------------------------------------------------------------------------------


def test_insert_erase_at_never_mutate_their_input():
    a, b, c = (np.full((2,), v, np.float32) for v in (1, 2, 3))
    seq = [a, b]
    out = sequence_insert(seq, c, np.array(0, np.int64))
    assert [t[0] for t in out] == [3, 1, 2] and len(seq) == 2
    out = sequence_insert(seq, c, np.array(-1, np.int32))  # -1: before the last tensor
    assert [t[0] for t in out] == [1, 3, 2]
    out = sequence_insert(seq, c)  # default: at the back
    assert [t[0] for t in out] == [1, 2, 3]
    out = sequence_insert(seq, c, np.array(2, np.int64))  # n is a valid insert position
    assert [t[0] for t in out] == [1, 2, 3]
    assert [t[0] for t in sequence_erase(seq)] == [1] and len(seq) == 2
    assert [t[0] for t in sequence_erase(seq, np.array(-2, np.int64))] == [2]
    assert sequence_at(seq, np.array(-1, np.int64)) is b
    assert sequence_at(seq, np.array(0, np.int32)) is a


@pytest.mark.parametrize(
    "fn, args, match",
    [
        (sequence_insert, (np.array(3, np.int64),), r"position is 3, out of range \[-2, 2\]"),
        (sequence_erase, (np.array(2, np.int64),), r"position is 2, out of range \[-2, 1\]"),
        (sequence_at, (np.array(-3, np.int64),), r"position is -3, out of range \[-2, 1\]"),
    ],
)
def test_positions_out_of_range(fn, args, match):
    seq = [np.zeros(1, np.float32), np.ones(1, np.float32)]
    call_args = (seq, np.zeros(1, np.float32), *args) if fn is sequence_insert else (seq, *args)
    with pytest.raises(IndexOutOfRangeError, match=match):
        fn(*call_args)


def test_erase_from_empty_sequence_and_non_scalar_position():
    with pytest.raises(KernelError, match="empty sequence"):
        sequence_erase([])
    with pytest.raises(KernelError, match="must be a scalar"):
        sequence_at([np.zeros(1)], np.array([0, 0]))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int8, np.uint64, bool, np.complex64, ml_dtypes.bfloat16, np.float16])
def test_split_to_sequence_every_mode(dtype):
    x = np.arange(24).reshape(2, 6, 2).astype(dtype)
    parts = split_to_sequence(x, None, axis=1)
    assert len(parts) == 6 and all(p.shape == (2, 1, 2) and p.dtype == x.dtype for p in parts)
    parts = split_to_sequence(x, None, axis=-2, keepdims=0)
    assert len(parts) == 6 and parts[3].shape == (2, 2)
    np.testing.assert_array_equal(parts[3], x[:, 3])
    parts = split_to_sequence(x, np.array(4, np.int64), axis=1)  # scalar: last piece shorter
    assert [p.shape[1] for p in parts] == [4, 2]
    parts = split_to_sequence(x, np.array([1, 0, 5], np.int32), axis=1, keepdims=0)  # keepdims ignored
    assert [p.shape for p in parts] == [(2, 1, 2), (2, 0, 2), (2, 5, 2)]
    np.testing.assert_array_equal(np.concatenate(parts, axis=1), x)


def test_split_to_sequence_errors():
    x = np.zeros((2, 6), np.float32)
    with pytest.raises(KernelError, match=r"sum to 5, expected the size 6 of axis 1"):
        split_to_sequence(x, np.array([2, 3]), axis=1)
    with pytest.raises(KernelError, match="scalar split must be positive"):
        split_to_sequence(x, np.array(0), axis=1)
    with pytest.raises(KernelError, match="out of range"):
        split_to_sequence(x, None, axis=2)


def test_concat_from_sequence_concat_and_stack():
    seq = [np.arange(6).reshape(2, 3) + 10 * k for k in range(3)]
    out = concat_from_sequence(seq, axis=1)
    np.testing.assert_array_equal(out, np.concatenate(seq, axis=1))
    out = concat_from_sequence(seq, axis=-1, new_axis=1)  # new axis at the end: [-r-1, r] range
    assert out.shape == (2, 3, 3)
    np.testing.assert_array_equal(out, np.stack(seq, axis=2))
    out = concat_from_sequence(seq, axis=2, new_axis=1)
    assert out.shape == (2, 3, 3)
    strings = [np.array(["a", "b"], dtype=object), np.array(["c"], dtype=object)]
    out = concat_from_sequence(strings, axis=0)
    assert out.dtype == object and out.tolist() == ["a", "b", "c"]
    with pytest.raises(KernelError, match="non-empty sequence"):
        concat_from_sequence([], axis=0)
    with pytest.raises(KernelError, match="cannot be concatenated on axis 0"):
        concat_from_sequence([np.zeros((2, 3)), np.zeros((2, 4))], axis=0)


def test_optional_kernels():
    has = OptionalHasElement(helper.make_node("OptionalHasElement", ["x"], ["y"]), since_version=18)
    assert has.run(None)[0].dtype == bool and not has.run(None)[0]
    assert has.run()[0].shape == () and not has.run()[0]  # no input at all (18)
    assert has.run(np.zeros(0))[0]  # an empty tensor is still an element
    assert has.run([])[0]  # so is an empty sequence
    get = OptionalGetElement(helper.make_node("OptionalGetElement", ["x"], ["y"]), since_version=18)
    x = np.arange(3)
    assert get.run(x)[0] is x
    with pytest.raises(KernelError, match="empty optional"):
        get.run(None)


# --- in models ------------------------------------------------------------------------------


def test_sequence_model_against_onnxruntime():
    import onnxruntime as ort

    nodes = [
        helper.make_node("SequenceEmpty", [], ["s0"], dtype=F),
        helper.make_node("SequenceInsert", ["s0", "x"], ["s1"]),
        helper.make_node("SequenceInsert", ["s1", "y", "zero"], ["s2"]),
        helper.make_node("SequenceConstruct", ["x", "y", "x"], ["s3"]),
        helper.make_node("SequenceErase", ["s3", "one"], ["s4"]),
        helper.make_node("ConcatFromSequence", ["s2"], ["cat"], axis=0),
        helper.make_node("ConcatFromSequence", ["s4"], ["stack"], axis=1, new_axis=1),
        helper.make_node("SequenceLength", ["s4"], ["n"]),
        helper.make_node("SequenceAt", ["s2", "one"], ["at"]),
        helper.make_node("SplitToSequence", ["cat"], ["parts"], axis=0),
        helper.make_node("SequenceLength", ["parts"], ["nparts"]),
    ]
    inits = [helper.make_tensor("zero", I64, [], [0]), helper.make_tensor("one", I64, [], [1])]
    m = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [2, 3]), helper.make_tensor_value_info("y", F, [2, 3])],
        [helper.make_tensor_value_info(n, t, None) for n, t in
         (("cat", F), ("stack", F), ("n", I64), ("at", F), ("nparts", I64))] + [_seq_vi("s4")],
        inits=inits,
    )
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 3)).astype(np.float32), "y": rng.standard_normal((2, 3)).astype(np.float32)}
    got = onnxrt.InferenceSession(m.SerializeToString()).run(None, feeds)
    want = ort.InferenceSession(m.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    for g, w in zip(got[:5], want[:5]):
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_array_equal(g, w)
    assert isinstance(got[5], list) and len(got[5]) == 2
    for g, w in zip(got[5], want[5]):
        np.testing.assert_array_equal(g, w)


def test_sequence_feed_is_not_modified():
    m = _model(
        [helper.make_node("SequenceInsert", ["s", "x"], ["t"]), helper.make_node("SequenceErase", ["t"], ["u"])],
        [_seq_vi("s"), helper.make_tensor_value_info("x", F, [1])],
        [_seq_vi("t"), _seq_vi("u")],
    )
    seq = [np.zeros(1, np.float32)]
    t, u = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"s": seq, "x": np.ones(1, np.float32)})
    assert len(seq) == 1 and len(t) == 2 and len(u) == 1


def test_optional_nodes_over_tensors_and_sequences():
    seq_tp = helper.make_sequence_type_proto(helper.make_tensor_type_proto(F, None))
    nodes = [
        helper.make_node("Optional", ["x"], ["ox"]),
        helper.make_node("Optional", [], ["empty"], type=seq_tp),
        helper.make_node("OptionalHasElement", ["ox"], ["has_x"]),
        helper.make_node("OptionalHasElement", ["empty"], ["has_empty"]),
        helper.make_node("OptionalHasElement", [""], ["has_nothing"]),
        helper.make_node("OptionalGetElement", ["ox"], ["back"]),
        helper.make_node("SequenceConstruct", ["x"], ["s"]),
        helper.make_node("Optional", ["s"], ["os"]),
        helper.make_node("OptionalGetElement", ["os"], ["s_back"]),
    ]
    m = _model(
        nodes,
        [helper.make_tensor_value_info("x", F, [3])],
        [helper.make_tensor_value_info(n, TensorProto.BOOL, []) for n in ("has_x", "has_empty", "has_nothing")]
        + [helper.make_tensor_value_info("back", F, [3]), _seq_vi("s_back")],
    )
    x = np.arange(3, dtype=np.float32)
    has_x, has_empty, has_nothing, back, s_back = onnxrt.InferenceSession(m.SerializeToString()).run(None, {"x": x})
    assert has_x.dtype == bool and bool(has_x) and not has_empty and not has_nothing
    np.testing.assert_array_equal(back, x)
    assert len(s_back) == 1
    np.testing.assert_array_equal(s_back[0], x)


def test_empty_optional_input_reaches_any_operator_as_none():
    """An omitted optional input (``""``) arrives as None; the kernel applies its default."""
    m = _model(
        [helper.make_node("SequenceInsert", ["s", "x", ""], ["t"]), helper.make_node("SequenceErase", ["t", ""], ["u"])],
        [_seq_vi("s"), helper.make_tensor_value_info("x", F, [1])],
        [_seq_vi("u")],
    )
    (u,) = onnxrt.InferenceSession(m.SerializeToString()).run(
        None, {"s": [np.zeros(1, np.float32)], "x": np.ones(1, np.float32)}
    )
    assert len(u) == 1 and u[0][0] == 0.0


def test_optional_graph_input_fed_with_none():
    opt_tp = helper.make_optional_type_proto(helper.make_tensor_type_proto(F, [2]))
    m = _model(
        [helper.make_node("OptionalHasElement", ["o"], ["h"])],
        [helper.make_value_info("o", opt_tp)],
        [helper.make_tensor_value_info("h", TensorProto.BOOL, [])],
    )
    sess = onnxrt.InferenceSession(m.SerializeToString())
    assert not sess.run(None, {"o": None})[0]
    assert sess.run(None, {"o": np.zeros(2, np.float32)})[0]


def test_sequence_at_out_of_range_in_a_model_names_the_node():
    m = _model(
        [helper.make_node("SequenceAt", ["s", "p"], ["y"], name="at")],
        [_seq_vi("s"), helper.make_tensor_value_info("p", I64, [])],
        [helper.make_tensor_value_info("y", F, None)],
    )
    with pytest.raises(IndexOutOfRangeError, match=r"'at'.*position is 5, out of range \[-1, 0\]"):
        onnxrt.InferenceSession(m.SerializeToString()).run(None, {"s": [np.zeros(1, np.float32)], "p": np.array(5)})
