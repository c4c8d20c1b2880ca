"""Shape and layout operators: values, shapes, dtypes, views, versions, allocation guard and errors."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import AllocationError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu._alloc import check_alloc, tensor_limit
from onnxrt.ops_cpu.op_compress import compress
from onnxrt.ops_cpu.op_concat import concat
from onnxrt.ops_cpu.op_constant_of_shape import constant_of_shape
from onnxrt.ops_cpu.op_depth_to_space import depth_to_space, space_to_depth
from onnxrt.ops_cpu.op_expand import expand
from onnxrt.ops_cpu.op_eye_like import eye_like
from onnxrt.ops_cpu.op_flatten import flatten
from onnxrt.ops_cpu.op_non_zero import non_zero
from onnxrt.ops_cpu.op_one_hot import one_hot
from onnxrt.ops_cpu.op_pad import pad
from onnxrt.ops_cpu.op_range import range_
from onnxrt.ops_cpu.op_reshape import reshape
from onnxrt.ops_cpu.op_reverse_sequence import reverse_sequence
from onnxrt.ops_cpu.op_slice import slice_
from onnxrt.ops_cpu.op_split import split
from onnxrt.ops_cpu.op_squeeze import squeeze, unsqueeze
from onnxrt.ops_cpu.op_tile import tile
from onnxrt.ops_cpu import op_transpose
from onnxrt.ops_cpu.op_transpose import transpose
from onnxrt.ops_cpu.op_trilu import trilu
from onnxrt.ops_cpu.op_unique import unique
from onnxrt.ops_cpu.op_where import where

from ..helpers import make_single_node_model

F, I64 = TensorProto.FLOAT, TensorProto.INT64

#: one sample per kind of element type the layout operators accept
SAMPLES = {
    "float32": np.arange(12, dtype=np.float32).reshape(3, 4),
    "int8": np.arange(12, dtype=np.int8).reshape(3, 4),
    "uint64": np.arange(12, dtype=np.uint64).reshape(3, 4),
    "bool": (np.arange(12).reshape(3, 4) % 3 == 0),
    "string": np.array([str(i) for i in range(12)], dtype=object).reshape(3, 4),
    "complex64": (np.arange(12) + 1j).astype(np.complex64).reshape(3, 4),
    "bfloat16": np.arange(12).astype(ml_dtypes.bfloat16).reshape(3, 4),
    "float8e4m3fn": np.arange(12).astype(ml_dtypes.float8_e4m3fn).reshape(3, 4),
    "int4": (np.arange(12) % 8).astype(ml_dtypes.int4).reshape(3, 4),
}


def run_model(model, feeds, options=None):
    return onnxrt.InferenceSession(model.SerializeToString(), sess_options=options).run(None, feeds)


def ort_run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def same(got, want):
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    np.testing.assert_array_equal(got, want)


# --------------------------------------------------------------------------------------
# Reshape, Flatten, Squeeze, Unsqueeze: views
# --------------------------------------------------------------------------------------


def test_reshape_zero_minus_one_and_views():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    y = reshape(x, np.array([0, -1], np.int64))
    assert y.shape == (2, 12) and np.shares_memory(x, y)
    assert reshape(x, [4, 0, 2]).shape == (4, 3, 2)
    assert reshape(x, [-1]).shape == (24,)
    assert reshape(np.zeros((0, 3), np.float32), [3, 0], allowzero=1).shape == (3, 0)
    assert reshape(np.zeros((2, 0), np.float32), [0, 0]).shape == (2, 0)


@pytest.mark.parametrize(
    "shape, message",
    [
        ([5, -1], r"cannot reshape a tensor of shape \[2, 3, 4\] \(24 elements\) into \[5, -1\]"),
        ([-1, -1], r"more than one -1"),
        ([7, 3], r"cannot reshape a tensor of shape \[2, 3, 4\] \(24 elements\) into \[7, 3\]"),
        ([1, 1, 1, 0], r"copies dimension 3 \(a 0\) of an input of rank 3"),
        ([-2, 12], r"negative dimension -2"),
    ],
)
def test_reshape_errors(shape, message):
    with pytest.raises(KernelError, match=message):
        reshape(np.zeros((2, 3, 4), np.float32), shape)


def test_reshape_allowzero_with_minus_one_fails_and_engine_message():
    with pytest.raises(KernelError, match="both 0 and -1"):
        reshape(np.zeros((0, 4)), [0, -1], allowzero=1)
    model = make_single_node_model("Reshape", [("x", F, [2, 3]), ("s", I64, [2])], [("y", F, None)], opset=14)
    with pytest.raises(KernelError, match=r"Node 'node' \(Reshape\) failed on inputs \[x: float32\[2,3\], s: int64\[2\]\]: cannot reshape"):
        run_model(model, {"x": np.zeros((2, 3), np.float32), "s": np.array([4, 2], np.int64)})


def test_reshape_version_1_attribute_and_all_types():
    x = np.arange(6, dtype=np.float32)
    m = make_single_node_model("Reshape", [("x", F, [6])], [("y", F, None)], opset=1, shape=[2, 3])
    (y,) = run_model(m, {"x": x})
    same(y, x.reshape(2, 3))
    for v in SAMPLES.values():
        same(reshape(v, [4, 3]), v.reshape(4, 3))


def test_flatten_axes():
    x = np.zeros((2, 3, 4, 5), np.int32)
    assert flatten(x, 0).shape == (1, 120)
    assert flatten(x, 2).shape == (6, 20)
    assert flatten(x, 4).shape == (120, 1)
    assert flatten(x, -1).shape == (24, 5)
    assert np.shares_memory(flatten(x, 1), x)
    with pytest.raises(KernelError, match=r"axis 5 is out of range for a tensor of rank 4, expected \[-4, 4\]"):
        flatten(x, 5)


def test_squeeze_unsqueeze():
    x = np.zeros((1, 3, 1, 2), np.float32)
    assert squeeze(x).shape == (3, 2)
    assert squeeze(x, np.array([0], np.int64)).shape == (3, 1, 2)
    assert squeeze(x, [-2]).shape == (1, 3, 2)
    assert np.shares_memory(squeeze(x), x)
    with pytest.raises(KernelError, match=r"cannot squeeze axis 1 of size 3"):
        squeeze(x, [1])
    y = np.zeros((3, 4, 5), np.float32)
    assert unsqueeze(y, [0, 4]).shape == (1, 3, 4, 5, 1)
    assert unsqueeze(y, [2, 0]).shape == (1, 3, 1, 4, 5)
    assert unsqueeze(y, np.array([-1], np.int64)).shape == (3, 4, 5, 1)
    assert unsqueeze(np.float32(1.0), [0]).shape == (1,)
    with pytest.raises(KernelError, match="repeats an axis"):
        unsqueeze(y, [1, 1])


@pytest.mark.parametrize("opset", [1, 11, 13, 21, 25])
def test_squeeze_unsqueeze_versions(opset):
    x = np.zeros((3, 1, 2), np.float32)
    if opset < 13:
        ms = make_single_node_model("Squeeze", [("x", F, [3, 1, 2])], [("y", F, None)], opset=opset, axes=[1])
        mu = make_single_node_model("Unsqueeze", [("x", F, [3, 1, 2])], [("y", F, None)], opset=opset, axes=[0])
        (ys,) = run_model(ms, {"x": x})
        (yu,) = run_model(mu, {"x": x})
    else:
        ax = [helper.make_tensor("a", I64, [1], [1])]
        ms = make_single_node_model("Squeeze", [("x", F, [3, 1, 2]), ("a", I64, [1])], [("y", F, None)], opset=opset, initializers=ax)
        ax0 = [helper.make_tensor("a", I64, [1], [0])]
        mu = make_single_node_model("Unsqueeze", [("x", F, [3, 1, 2]), ("a", I64, [1])], [("y", F, None)], opset=opset, initializers=ax0)
        (ys,) = run_model(ms, {"x": x})
        (yu,) = run_model(mu, {"x": x})
    assert ys.shape == (3, 2) and yu.shape == (1, 3, 1, 2)


# --------------------------------------------------------------------------------------
# Transpose
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "shape, perm",
    [
        ((3, 4), None),
        ((2, 3, 4), (1, 0, 2)),
        ((1000, 300), (1, 0)),
        ((1024, 512), (1, 0)),  # power-of-two stride: the padded path
        ((32, 64, 512), (0, 2, 1)),
        ((4, 16, 32, 64), (0, 2, 3, 1)),
        ((2, 3, 128, 256), (3, 2, 1, 0)),
        ((1, 3, 256, 256), (0, 2, 3, 1)),
        ((8, 1, 64, 1, 128), (4, 1, 2, 0, 3)),
        ((64, 64, 64), (0, 1, 2)),
    ],
)
def test_transpose_values_and_layout(shape, perm):
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    got = transpose(x, perm)
    want = np.transpose(x, perm)
    same(got, want)
    assert got.flags.c_contiguous and not np.shares_memory(got, x)


@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_transpose_every_type(kind):
    x = SAMPLES[kind]
    same(transpose(x), x.T)
    big = np.tile(x, (100, 30))  # above the small-copy threshold
    same(transpose(big, [1, 0]), big.T)


def test_transpose_non_contiguous_input_and_errors():
    x = np.arange(240, dtype=np.float64).reshape(10, 24)[:, ::2]
    same(transpose(x), x.T)
    big = np.arange(2 * 200 * 300, dtype=np.float32).reshape(2, 200, 300)[:, ::2, 1:]
    same(transpose(big, (2, 0, 1)), big.transpose(2, 0, 1))
    with pytest.raises(KernelError, match=r"perm \[0, 0\] is not a permutation"):
        transpose(np.zeros((2, 2)), [0, 0])
    node = helper.make_node("Transpose", ["x"], ["y"], perm=[1, 1], name="t")
    with pytest.raises(InvalidAttributeError, match=r"Node 't' \(Transpose\): attribute 'perm' \[1, 1\] repeats an axis"):
        onnxrt.ops_cpu.op_transpose.Transpose(node, since_version=13)


@pytest.mark.parametrize("shape", [(131, 205), (3, 37, 45), (5, 8, 16), (2, 3, 9, 7), (64, 3, 200)])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.uint32])
def test_compiled_batched_transpose_edges_and_bits(shape, dtype, monkeypatch):
    # 8x8 register blocks, rows and columns left over, batches; the bits go through as
    # they are (NaN payloads, -0.0); forced splits over the pool give the same result
    pytest.importorskip("numba")
    rng = np.random.default_rng(5)
    bits = rng.integers(0, 1 << 32, shape, dtype=np.uint64).astype(np.uint32)
    x = bits.view(dtype)
    perm = list(range(len(shape) - 2)) + [len(shape) - 1, len(shape) - 2]
    want = np.transpose(x, perm)
    from onnxrt.fastpaths import transpose as fast_transpose

    # small shapes take the compiled path too (called directly)
    out_shape, dims = fast_transpose.batched_2d(x.shape, perm)
    for part in (fast_transpose.TRANSPOSE_PART, 64):
        monkeypatch.setattr(fast_transpose, "TRANSPOSE_PART", part)
        got = fast_transpose.transpose_compiled(x, out_shape, dims)
        assert got.dtype == dtype and got.shape == want.shape and got.flags.c_contiguous
        np.testing.assert_array_equal(got.view(np.uint32), want.view(np.uint32))
    # a non-contiguous input
    view = x[..., ::2, 1:]
    out_shape, dims = fast_transpose.batched_2d(view.shape, perm)
    np.testing.assert_array_equal(fast_transpose.transpose_compiled(view, out_shape, dims).view(np.uint32),
                                  np.transpose(view, perm).view(np.uint32))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(1, 40), min_size=1, max_size=5), st.randoms(use_true_random=False))
def test_transpose_hypothesis(shape, rnd):
    perm = list(range(len(shape)))
    rnd.shuffle(perm)
    x = np.random.default_rng(len(shape)).standard_normal(shape).astype(np.float32)
    same(transpose(x, perm), np.transpose(x, perm))


# --------------------------------------------------------------------------------------
# Concat, Split
# --------------------------------------------------------------------------------------


def test_concat():
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    b = np.arange(4, dtype=np.int64).reshape(2, 2)
    same(concat(a, b, axis=1), np.concatenate([a, b], 1))
    same(concat(a, a, axis=-2), np.concatenate([a, a], 0))
    same(concat(a, np.zeros((2, 0), np.int64), axis=1), a)
    s = SAMPLES["string"]
    same(concat(s, s, axis=0), np.concatenate([s, s]))
    with pytest.raises(KernelError, match=r"input 1 has shape \[2, 2\], which cannot be joined on axis 0"):
        concat(a, b, axis=0)
    with pytest.raises(KernelError, match="axis 2 is out of range"):
        concat(a, a, axis=2)


def test_concat_version_1_default_axis():
    a = np.ones((2, 3), np.float32)
    node = helper.make_node("Concat", ["a", "b"], ["y"])
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info(n, F, [2, 3]) for n in "ab"], [helper.make_tensor_value_info("y", F, None)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 1)])
    model.ir_version = 3
    (y,) = run_model(model, {"a": a, "b": a})
    assert y.shape == (2, 6)


def test_split_sizes_and_uneven_num_outputs():
    x = np.arange(10, dtype=np.float32)
    parts = split(x, [2, 3, 5])
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3, 4], [5, 6, 7, 8, 9]]
    assert all(np.shares_memory(p, x) for p in parts if p.size)
    parts = split(x, None, 0, num_outputs=4)  # ceil(10/4) = 3: 3, 3, 3, 1
    assert [len(p) for p in parts] == [3, 3, 3, 1]
    assert [len(p) for p in split(x, [0, 10])] == [0, 10]
    with pytest.raises(KernelError, match=r"split \[2, 2\] must be non-negative and sum to 10"):
        split(x, [2, 2])


@pytest.mark.parametrize("opset", [1, 2, 11, 13, 18])
def test_split_versions(opset):
    x = np.arange(12, dtype=np.float32).reshape(2, 6)
    outs = [("a", F, None), ("b", F, None), ("c", F, None)]
    m = make_single_node_model("Split", [("x", F, [2, 6])], outs, opset=opset, axis=1)
    res = run_model(m, {"x": x})
    assert [r.shape for r in res] == [(2, 2)] * 3
    if opset < 13:
        m = make_single_node_model("Split", [("x", F, [2, 6])], outs[:2], opset=opset, axis=1, split=[1, 5])
        feeds = {"x": x}
    else:
        m = make_single_node_model("Split", [("x", F, [2, 6]), ("s", I64, [2])], outs[:2], opset=opset, axis=1)
        feeds = {"x": x, "s": np.array([1, 5], np.int64)}
    a, b = run_model(m, feeds)
    same(a, x[:, :1])
    same(b, x[:, 1:])


def test_split_errors():
    x = np.arange(7, dtype=np.float32)
    m = make_single_node_model("Split", [("x", F, [7])], [("a", F, None), ("b", F, None)], opset=13)
    with pytest.raises(KernelError, match=r"cannot split an axis of length 7 into 2 equal parts"):
        run_model(m, {"x": x})
    m = make_single_node_model("Split", [("x", F, [7])], [("a", F, None), ("b", F, None)], opset=18, num_outputs=2)
    a, b = run_model(m, {"x": x})
    assert a.shape == (4,) and b.shape == (3,)
    m = make_single_node_model("Split", [("x", F, [7])], [("a", F, None)], opset=18, num_outputs=2)
    with pytest.raises(onnxrt.errors.GraphError, match="'num_outputs' is 2, but the node has 1 outputs"):
        run_model(m, {"x": x})


# --------------------------------------------------------------------------------------
# Slice
# --------------------------------------------------------------------------------------


def test_slice_clamping_and_negative_steps():
    x = np.arange(20, dtype=np.int32).reshape(4, 5)
    same(slice_(x, [1, 0], [3, 10]), x[1:3, 0:5])
    same(slice_(x, [-1], [-1000], [1], [-1]), x[:, ::-1])
    same(slice_(x, [10], [0], [0], [-2]), x[3:0:-2])
    same(slice_(x, [2**62], [-(2**62)], [1], [-1]), x[:, ::-1])
    same(slice_(x, [0], [-1], [-1]), x[:, :-1])
    same(slice_(x, [3], [1], [0]), x[3:1])  # empty
    with pytest.raises(KernelError, match="steps must not be 0"):
        slice_(x, [0], [1], [0], [0])
    with pytest.raises(KernelError, match="same length"):
        slice_(x, [0, 1], [1], [0])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(-12, 12), st.integers(-12, 12), st.sampled_from([-3, -2, -1, 1, 2, 3]))
def test_slice_matches_onnxruntime(n, start, end, step):
    x = np.arange(n * 2, dtype=np.float32).reshape(n, 2)
    model = make_single_node_model(
        "Slice",
        [("x", F, [n, 2]), ("s", I64, [1]), ("e", I64, [1]), ("a", I64, [1]), ("p", I64, [1])],
        [("y", F, None)],
        opset=13,
    )
    feeds = {"x": x, "s": np.array([start]), "e": np.array([end]), "a": np.array([0]), "p": np.array([step])}
    same(run_model(model, feeds)[0], ort_run(model, feeds)[0])


def test_slice_version_1_attributes():
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    m = make_single_node_model("Slice", [("x", F, [3, 4])], [("y", F, None)], opset=1, starts=[1], ends=[100], axes=[1])
    same(run_model(m, {"x": x})[0], x[:, 1:])


# --------------------------------------------------------------------------------------
# Pad
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_modes_against_numpy(mode):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = pad(x, [1, 2, 2, 1], mode, np.float32(9.5) if mode == "constant" else None)
    kw = {"constant_values": 9.5} if mode == "constant" else {}
    same(got, np.pad(x, [(1, 2), (2, 1)], mode=mode, **kw))


def test_pad_negative_axes_and_defaults():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    same(pad(x, [-1, 1, 0, -2]), np.pad(x[1:, :2], [(0, 0), (1, 0)]))
    same(pad(x, [2, 2], axes=np.array([-1])), np.pad(x, [(0, 0), (2, 2)]))
    s = pad(SAMPLES["string"], [0, 1, 0, 1])
    assert s.dtype == object and s[0, 0] == "" and s[0, 1] == "0"
    b = pad(SAMPLES["bool"], [1, 0, 0, 0], "constant", np.array(True))
    assert b.dtype == bool and b[0].all()
    with pytest.raises(KernelError, match=r"pads has 3 values, expected 4"):
        pad(x, [1, 1, 1])
    with pytest.raises(KernelError, match="cannot pad axis 0, which is empty"):
        pad(np.zeros((0, 2), np.float32), [1, 0, 0, 0], "edge")


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
def test_pad_matches_onnxruntime(mode):
    x = np.random.default_rng(0).standard_normal((2, 5, 6)).astype(np.float32)
    model = make_single_node_model(
        "Pad", [("x", F, [2, 5, 6]), ("p", I64, [4]), ("c", F, []), ("a", I64, [2])], [("y", F, None)], opset=19, mode=mode
    )
    feeds = {"x": x, "p": np.array([1, -1, 3, 2]), "c": np.array(1.5, np.float32), "a": np.array([1, 2])}
    same(run_model(model, feeds)[0], ort_run(model, feeds)[0])


def test_pad_versions_1_and_2():
    x = np.ones((2, 2), np.float32)
    m1 = make_single_node_model("Pad", [("x", F, [2, 2])], [("y", F, None)], opset=1, paddings=[0, 1, 0, 1], value=3.0)
    (y,) = run_model(m1, {"x": x})
    same(y, np.pad(x, [(0, 0), (1, 1)], constant_values=3.0))
    m2 = make_single_node_model("Pad", [("x", F, [2, 2])], [("y", F, None)], opset=2, pads=[1, 0, 1, 0], mode="edge")
    (y,) = run_model(m2, {"x": x})
    same(y, np.ones((4, 2), np.float32))
    m = make_single_node_model("Pad", [("x", F, [2, 2]), ("p", I64, [4])], [("y", F, None)], opset=18, mode="wrap")
    with pytest.raises(InvalidAttributeError, match=r"'mode' is 'wrap', expected one of \['constant', 'reflect', 'edge'\] at version 18"):
        run_model(m, {"x": x, "p": np.array([0, 0, 0, 0])})


# --------------------------------------------------------------------------------------
# Tile, Expand, ConstantOfShape, Range: sizes and the allocation guard
# --------------------------------------------------------------------------------------


def test_tile_and_expand():
    x = np.array([[1, 2]], np.int16)
    same(tile(x, np.array([2, 3])), np.tile(x, (2, 3)))
    same(tile(SAMPLES["string"], [1, 2]), np.tile(SAMPLES["string"], (1, 2)))
    same(tile(x, [0, 1]), np.zeros((0, 2), np.int16))
    with pytest.raises(KernelError, match="repeats has 1 values, expected 2"):
        tile(x, [2])
    y = expand(np.array([[1.0], [2.0]], np.float32), np.array([2, 1, 3]))
    same(y, np.broadcast_to(np.array([[1.0], [2.0]], np.float32), (2, 2, 3)).copy())
    assert y.flags.writeable and y.flags.c_contiguous
    same(expand(np.ones((3, 1), np.float32), [1, 1]), np.ones((3, 1), np.float32))
    with pytest.raises(KernelError, match=r"cannot broadcast an input of shape \[3\] to shape \[2\]"):
        expand(np.ones(3), [2])


def test_tile_version_1():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    m = make_single_node_model(
        "Tile", [("x", F, [2, 3]), ("t", F, []), ("a", F, [])], [("y", F, None)], opset=1
    )
    (y,) = run_model(m, {"x": x, "t": np.array(2.0, np.float32), "a": np.array(1.0, np.float32)})
    same(y, np.tile(x, (1, 2)))


def test_allocation_guard():
    with pytest.raises(AllocationError, match=r"ConstantOfShape output of shape \[1152921504606846976\] and dtype float32 needs"):
        constant_of_shape(np.array([2**60], np.int64))
    with pytest.raises(AllocationError, match="Tile output"):
        tile(np.ones((1000, 1000), np.float64), [10**6, 10**6])
    with pytest.raises(AllocationError, match="Expand output"):
        expand(np.ones((1,), np.float32), [2**30, 2**30, 2**10])
    with pytest.raises(AllocationError, match="Range output"):
        range_(np.array(0, np.int64), np.array(2**62, np.int64), np.array(1, np.int64))
    with pytest.raises(AllocationError, match="Pad output"):
        pad(np.ones((2, 2), np.float32), [2**40, 0, 2**40, 0])
    check_alloc([10, 10], np.float32)  # fine
    assert tensor_limit({}) > 2**20


def test_allocation_guard_reads_session_options():
    opts = onnxrt.SessionOptions()
    opts.max_tensor_bytes = 1000
    m = make_single_node_model("ConstantOfShape", [("s", I64, [1])], [("y", F, None)], opset=20)
    (y,) = run_model(m, {"s": np.array([250], np.int64)}, opts)
    assert y.shape == (250,)
    with pytest.raises(AllocationError, match="needs 1004 bytes, above the limit of 1000 bytes"):
        run_model(m, {"s": np.array([251], np.int64)}, opts)
    m = make_single_node_model("Expand", [("x", F, [1]), ("s", I64, [1])], [("y", F, None)], opset=13)
    with pytest.raises(AllocationError):
        run_model(m, {"x": np.ones(1, np.float32), "s": np.array([10**6])}, opts)


def test_constant_of_shape_types():
    y = constant_of_shape(np.array([2, 3]))
    same(y, np.zeros((2, 3), np.float32))
    same(constant_of_shape(np.array([], np.int64), np.array([7], np.int32)), np.array(7, np.int32))
    for dt in (ml_dtypes.int4, ml_dtypes.float8_e5m2, ml_dtypes.bfloat16, np.bool_, ml_dtypes.uint2):
        out = constant_of_shape(np.array([2]), np.ones(1, dt))
        assert out.dtype == np.dtype(dt) and out.shape == (2,)
    with pytest.raises(KernelError, match="negative dimension"):
        constant_of_shape(np.array([2, -1]))


def test_range():
    same(range_(np.array(3), np.array(9), np.array(3)), np.array([3, 6]))
    same(range_(np.array(10, np.int32), np.array(4, np.int32), np.array(-2, np.int32)), np.array([10, 8, 6], np.int32))
    same(range_(np.float32(1), np.float32(2), np.float32(0.25)), np.array([1, 1.25, 1.5, 1.75], np.float32))
    same(range_(np.float32(5), np.float32(1), np.float32(1)), np.zeros(0, np.float32))
    h = range_(np.float16(0), np.float16(4000), np.float16(1))  # exact beyond 2048 with float32 stash
    assert h.dtype == np.float16 and h.shape == (4000,) and float(h[-1]) == 4000.0
    h0 = range_(np.float16(0), np.float16(4000), np.float16(1), stash_type=0)  # float16 steps stall at 2048
    assert float(h0[-1]) == 2048.0
    b = range_(np.array(1, ml_dtypes.bfloat16), np.array(3, ml_dtypes.bfloat16), np.array(0.5, ml_dtypes.bfloat16))
    assert b.dtype == ml_dtypes.bfloat16 and b.astype(np.float32).tolist() == [1, 1.5, 2, 2.5]
    with pytest.raises(KernelError, match="delta must not be 0"):
        range_(np.array(1), np.array(2), np.array(0))


# --------------------------------------------------------------------------------------
# DepthToSpace, SpaceToDepth, Trilu, EyeLike, OneHot
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_to_space_spec_formula_and_inverse(mode):
    x = np.arange(2 * 8 * 2 * 3, dtype=np.float32).reshape(2, 8, 2, 3)
    b, c, h, w = x.shape
    if mode == "DCR":
        tmp = np.reshape(x, [b, 2, 2, c // 4, h, w]).transpose(0, 3, 4, 1, 5, 2)
    else:
        tmp = np.reshape(x, [b, c // 4, 2, 2, h, w]).transpose(0, 1, 4, 2, 5, 3)
    want = tmp.reshape(b, c // 4, h * 2, w * 2)
    got = depth_to_space(x, 2, mode)
    same(got, want)
    same(space_to_depth(got, 2, mode), x)


@pytest.mark.parametrize("mode", ["DCR", "CRD"])
def test_depth_space_match_onnxruntime(mode):
    x = np.random.default_rng(1).standard_normal((1, 18, 4, 5)).astype(np.float32)
    m = make_single_node_model("DepthToSpace", [("x", F, [1, 18, 4, 5])], [("y", F, None)], opset=13, blocksize=3, mode=mode)
    same(run_model(m, {"x": x})[0], ort_run(m, {"x": x})[0])
    z = np.random.default_rng(2).standard_normal((2, 3, 4, 6)).astype(np.float32)
    m = make_single_node_model("SpaceToDepth", [("x", F, [2, 3, 4, 6])], [("y", F, None)], opset=13, blocksize=2)
    same(run_model(m, {"x": z})[0], ort_run(m, {"x": z})[0])
    with pytest.raises(KernelError, match="not divisible by blocksize"):
        depth_to_space(x, 4)


def test_trilu():
    x = np.arange(1, 13, dtype=np.int64).reshape(3, 4)
    same(trilu(x), np.triu(x))
    same(trilu(x, 1, upper=0), np.tril(x, 1))
    same(trilu(x, -5), x)
    same(trilu(x, 7, upper=0), x)
    same(trilu(np.stack([x, x]), -1), np.triu(np.stack([x, x]), -1))
    s = trilu(SAMPLES["string"][:, :3], 0, upper=0)
    assert s[0, 1] == "" and s[1, 0] == "4"
    with pytest.raises(KernelError, match="rank >= 2"):
        trilu(np.ones(3))


def test_eye_like_and_onehot():
    same(eye_like(np.zeros((2, 3), np.int32), k=1), np.eye(2, 3, 1, dtype=np.int32))
    same(eye_like(np.zeros((3, 3), np.float32), np.dtype(np.float64), -1), np.eye(3, 3, -1))
    m = make_single_node_model("EyeLike", [("x", F, [2, 2])], [("y", TensorProto.INT8, None)], opset=22, dtype=TensorProto.INT8)
    (y,) = run_model(m, {"x": np.zeros((2, 2), np.float32)})
    same(y, np.eye(2, dtype=np.int8))
    idx = np.array([[1, 9], [-1, 2]], np.int64)
    got = one_hot(idx, np.array(3), np.array([0, 5], np.float32), axis=-1)
    want = np.array([[[0, 5, 0], [0, 0, 0]], [[0, 0, 5], [0, 0, 5]]], np.float32)
    same(got, want)
    same(one_hot(idx, np.float32(3.7), np.array([0, 5], np.float32), axis=0), np.moveaxis(want, -1, 0))
    same(one_hot(np.array([1.9]), np.array([2]), np.array(["off", "on"], dtype=object)), np.array([["off", "on"]], dtype=object))


def test_onehot_matches_onnxruntime():
    idx = np.array([[0, 3, -2], [5, -4, 1]], np.int64)
    m = make_single_node_model(
        "OneHot", [("i", I64, [2, 3]), ("d", I64, []), ("v", F, [2])], [("y", F, None)], opset=11, axis=1
    )
    feeds = {"i": idx, "d": np.array(4, np.int64), "v": np.array([-1.0, 2.0], np.float32)}
    same(run_model(m, feeds)[0], ort_run(m, feeds)[0])


# --------------------------------------------------------------------------------------
# Where, NonZero, Unique, Compress, ReverseSequence
# --------------------------------------------------------------------------------------


def test_where_broadcast_and_types():
    c = np.array([[True], [False]])
    same(where(c, np.array([1, 2, 3], np.uint16), np.array([9], np.uint16)), np.array([[1, 2, 3], [9, 9, 9]], np.uint16))
    s = where(np.array([True, False]), np.array(["a", "b"], dtype=object), np.array(["c", "d"], dtype=object))
    same(s, np.array(["a", "d"], dtype=object))
    bf = where(np.array([True, False]), np.ones(2, ml_dtypes.bfloat16), np.zeros(2, ml_dtypes.bfloat16))
    assert bf.dtype == ml_dtypes.bfloat16
    with pytest.raises(KernelError, match="do not broadcast"):
        where(np.array([True, False, True]), np.ones(2), np.ones(2))


def test_nonzero():
    x = np.array([[1, 0], [1, 1]], np.int32)
    same(non_zero(x), np.array([[0, 1, 1], [0, 0, 1]], np.int64))
    same(non_zero(np.array(["", "a", "b"], dtype=object)), np.array([[1, 2]], np.int64))
    # a scalar gives (0, N), the spec's text (onnxruntime gives (1, N))
    same(non_zero(np.array(0.0, np.float32)), np.zeros((0, 0), np.int64))
    same(non_zero(np.array(2.0, np.float32)), np.zeros((0, 1), np.int64))
    same(non_zero(np.zeros((2, 0, 3), bool)), np.zeros((3, 0), np.int64))


def test_unique_spec_examples():
    y, i, inv, c = unique(np.array([2, 1, 1, 3, 4, 3], np.float32), sorted=0)
    same(y, np.array([2, 1, 3, 4], np.float32))
    assert i.tolist() == [0, 1, 3, 4] and inv.tolist() == [0, 1, 1, 2, 3, 2] and c.tolist() == [1, 2, 2, 1]
    assert i.dtype == inv.dtype == c.dtype == np.int64
    y, i, inv, c = unique(np.array([[1, 3], [2, 3]], np.int32))
    assert y.tolist() == [1, 2, 3] and i.tolist() == [0, 2, 1] and inv.tolist() == [0, 2, 1, 2] and c.tolist() == [1, 1, 2]
    y, i, inv, c = unique(np.array([[1, 0, 0], [1, 0, 0], [2, 3, 4]], np.int8), axis=0)
    assert y.tolist() == [[1, 0, 0], [2, 3, 4]] and i.tolist() == [0, 2] and inv.tolist() == [0, 0, 1] and c.tolist() == [2, 1]
    x4 = np.array([[[1.0, 1.0], [0.0, 1.0], [2.0, 1.0], [0.0, 1.0]], [[1.0, 1.0], [0.0, 1.0], [2.0, 1.0], [0.0, 1.0]]], np.float32)
    y, i, inv, c = unique(x4, axis=1)
    same(y, np.array([[[0, 1], [1, 1], [2, 1]], [[0, 1], [1, 1], [2, 1]]], np.float32))
    assert i.tolist() == [1, 0, 2] and inv.tolist() == [1, 0, 2, 0] and c.tolist() == [2, 1, 1]


def test_unique_strings_axis_and_unsorted():
    s = np.array([["b", "a"], ["a", "c"], ["b", "a"]], dtype=object)
    y, i, inv, c = unique(s, axis=0)
    same(y, np.array([["a", "c"], ["b", "a"]], dtype=object))
    assert inv.tolist() == [1, 0, 1] and c.tolist() == [1, 2]
    y, i, inv, c = unique(s, axis=-2, sorted=0)
    same(y, np.array([["b", "a"], ["a", "c"]], dtype=object))
    assert i.tolist() == [0, 1] and inv.tolist() == [0, 1, 0]
    y, *_ = unique(np.array([3, 1, 2], ml_dtypes.bfloat16))
    assert y.dtype == ml_dtypes.bfloat16 and y.astype(np.float32).tolist() == [1, 2, 3]


def test_unique_matches_onnxruntime():
    x = np.random.default_rng(5).integers(0, 4, size=(6, 3)).astype(np.float32)
    outs = [("y", F, None), ("i", I64, None), ("v", I64, None), ("c", I64, None)]
    for kw in ({"sorted": 1}, {"sorted": 1, "axis": 0}, {"sorted": 0, "axis": 1}):
        m = make_single_node_model("Unique", [("x", F, [6, 3])], outs, opset=11, **kw)
        for g, w in zip(run_model(m, {"x": x}), ort_run(m, {"x": x})):
            same(g, w)


def test_compress():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    same(compress(x, np.array([False, True, True]), 0), x[1:])
    same(compress(x, np.array([True]), -1), x[:, :1])
    same(compress(x, np.array([True, False, True])), np.array([0, 2], np.float32))
    with pytest.raises(KernelError, match="condition has 4 values, more than the 3 slices"):
        compress(x, np.array([True] * 4), 0)


def test_reverse_sequence_spec_examples():
    x = np.array([[0.0, 4, 8, 12], [1, 5, 9, 13], [2, 6, 10, 14], [3, 7, 11, 15]], np.float32)
    got = reverse_sequence(x, np.array([4, 3, 2, 1]), batch_axis=1, time_axis=0)
    same(got, np.array([[3.0, 6, 9, 12], [2, 5, 8, 13], [1, 4, 10, 14], [0, 7, 11, 15]], np.float32))
    y = np.arange(16, dtype=np.float32).reshape(4, 4)
    got = reverse_sequence(y, np.array([1, 2, 3, 4]), batch_axis=0, time_axis=1)
    same(got, np.array([[0.0, 1, 2, 3], [5, 4, 6, 7], [10, 9, 8, 11], [15, 14, 13, 12]], np.float32))
    z = np.arange(24).reshape(3, 2, 4).astype(object).astype(str).astype(object)
    got = reverse_sequence(z, np.array([3, 1]), batch_axis=1, time_axis=0)
    assert got.dtype == object and got[0, 0, 0] == z[2, 0, 0] and got[0, 1, 0] == z[0, 1, 0]
    with pytest.raises(KernelError, match=r"sequence_lens holds 5, out of range \[0, 4\]"):
        reverse_sequence(y, np.array([5, 1, 1, 1]), 0, 1)


@pytest.mark.parametrize(
    "op, inputs",
    [
        ("Transpose", lambda v: [v]),
        ("Reshape", lambda v: [v, np.array([2, -1])]),
        ("Flatten", lambda v: [v]),
        ("Concat", lambda v: [v, v]),
        ("Tile", lambda v: [v, np.array([2, 1])]),
        ("Expand", lambda v: [v[:1], np.array([2, 4])]),
        ("Trilu", lambda v: [v]),
        ("Compress", lambda v: [v, np.array([True, False, True])]),
        ("Pad", lambda v: [v, np.array([1, 0, 0, 1])]),
        ("Slice", lambda v: [v, np.array([-1]), np.array([-10]), np.array([0]), np.array([-1])]),
        ("ReverseSequence", lambda v: [v, np.array([2, 3, 1, 3])]),
    ],
)
@pytest.mark.parametrize("kind", sorted(SAMPLES))
def test_layout_ops_keep_every_element_type(op, inputs, kind):
    v = SAMPLES[kind]
    node = helper.make_node(op, [f"i{k}" for k in range(len(inputs(v)))], ["y"], **({"axis": 0} if op == "Concat" else {}))
    cls, since = onnxrt.registry.resolve(op, "", 25 if op not in ("Compress", "ReverseSequence", "Trilu", "Concat", "Tile", "Expand") else 28)
    (y,) = cls(node, since_version=since).run(*inputs(v))
    assert y.dtype == v.dtype


def test_loops_over_permutations_of_rank4():
    x = np.random.default_rng(3).standard_normal((6, 5, 40, 70)).astype(np.float32)
    for perm in itertools.permutations(range(4)):
        same(transpose(x, perm), np.transpose(x, perm))
