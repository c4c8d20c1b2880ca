"""Linear algebra: MatMul, MatMulInteger, Gemm, Einsum — values, shapes, dtypes, versions and errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_einsum import einsum
from onnxrt.ops_cpu.op_gemm import gemm
from onnxrt.ops_cpu.op_matmul import matmul, matmul_integer

from ..helpers import make_single_node_model

F, D = TensorProto.FLOAT, TensorProto.DOUBLE


def run_model(model, feeds):
    return onnxrt.InferenceSession(model.SerializeToString()).run(None, feeds)


def ort_run(model, feeds):
    return ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)


def rnd(shape, dtype=np.float32, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# --------------------------------------------------------------------------------------
# MatMul
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sa, sb, so",
    [
        ((3,), (3,), ()),
        ((3,), (2, 3, 4), (2, 4)),
        ((2, 3, 4), (4,), (2, 3)),
        ((5, 3), (3, 4), (5, 4)),
        ((2, 1, 5, 3), (7, 3, 4), (2, 7, 5, 4)),
    ],
)
def test_matmul_shapes(sa, sb, so):
    a, b = rnd(sa, seed=1), rnd(sb, seed=2)
    got = matmul(a, b)
    assert got.shape == so and got.dtype == np.float32
    np.testing.assert_allclose(got, np.matmul(a.astype(np.float64), b.astype(np.float64)), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.int32, np.int64, np.uint32, np.uint64, np.float16, ml_dtypes.bfloat16])
def test_matmul_types(dtype):
    a = np.arange(12).reshape(3, 4).astype(dtype)
    b = np.arange(8).reshape(4, 2).astype(dtype)
    got = matmul(a, b)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), np.arange(12).reshape(3, 4) @ np.arange(8).reshape(4, 2))


def test_matmul_float16_accumulates_in_float32():
    a = np.full((1, 4096), 1.0, np.float16)
    b = np.full((4096, 1), 1.0, np.float16)
    assert float(matmul(a, b)[0, 0]) == 4096.0


def test_matmul_errors_and_versions():
    with pytest.raises(KernelError, match=r"cannot multiply matrices of shapes \[2, 3\] and \[2, 3\]"):
        matmul(np.ones((2, 3), np.float32), np.ones((2, 3), np.float32))
    with pytest.raises(KernelError, match="rank >= 1"):
        matmul(np.float32(1.0), np.ones(2, np.float32))
    for opset in (1, 9, 13):
        m = make_single_node_model("MatMul", [("a", F, [2, 3]), ("b", F, [3, 2])], [("y", F, None)], opset=opset)
        a, b = rnd((2, 3)), rnd((3, 2), seed=1)
        (y,) = run_model(m, {"a": a, "b": b})
        np.testing.assert_allclose(y, a @ b, rtol=1e-6)


# --------------------------------------------------------------------------------------
# MatMulInteger
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("ta, tb", [(np.uint8, np.uint8), (np.int8, np.uint8), (np.uint8, np.int8), (np.int8, np.int8)])
def test_matmul_integer_matches_plain_and_onnxruntime(ta, tb):
    rng = np.random.default_rng(3)
    a = rng.integers(np.iinfo(ta).min, np.iinfo(ta).max, size=(4, 6), endpoint=True).astype(ta)
    b = rng.integers(np.iinfo(tb).min, np.iinfo(tb).max, size=(6, 5), endpoint=True).astype(tb)
    za = np.array(rng.integers(0, 10), ta)
    zb = np.array(rng.integers(0, 10), tb)
    got = matmul_integer(a, b, za, zb)
    want = (a.astype(np.int64) - int(za)) @ (b.astype(np.int64) - int(zb))
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got, want)
    ea, eb = helper.np_dtype_to_tensor_dtype(np.dtype(ta)), helper.np_dtype_to_tensor_dtype(np.dtype(tb))
    m = make_single_node_model(
        "MatMulInteger", [("a", ea, [4, 6]), ("b", eb, [6, 5]), ("za", ea, []), ("zb", eb, [])],
        [("y", TensorProto.INT32, None)], opset=10,
    )
    feeds = {"a": a, "b": b, "za": za, "zb": zb}
    np.testing.assert_array_equal(run_model(m, feeds)[0], want.astype(np.int32))
    if (ta, tb) != (np.uint8, np.int8):
        # onnxruntime's uint8 x int8 kernel saturates pairs of products in int16 (vpmaddubsw)
        # and drifts from the exact value on full-range inputs; the other pairs are exact
        np.testing.assert_array_equal(run_model(m, feeds)[0], ort_run(m, feeds)[0])


def test_matmul_integer_per_row_and_column_zero_points_and_batches():
    rng = np.random.default_rng(4)
    a = rng.integers(0, 255, size=(2, 3, 4)).astype(np.uint8)
    b = rng.integers(0, 255, size=(4, 5)).astype(np.uint8)
    za = np.array([1, 2, 3], np.uint8)
    zb = np.array([5, 6, 7, 8, 9], np.uint8)
    got = matmul_integer(a, b, za, zb)
    want = (a.astype(np.int64) - za.reshape(3, 1)) @ (b.astype(np.int64) - zb.reshape(1, 5))
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(matmul_integer(a, b), a.astype(np.int64) @ b.astype(np.int64))
    with pytest.raises(KernelError, match="zero point has 2 values, expected 1 or 3"):
        matmul_integer(a, b, np.array([1, 2], np.uint8))


# --------------------------------------------------------------------------------------
# Gemm
# --------------------------------------------------------------------------------------


def plain_gemm(a, b, c, alpha, beta, ta, tb):
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    y = alpha * ((a64.T if ta else a64) @ (b64.T if tb else b64))
    return y if c is None else y + beta * c.astype(np.float64)


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("cshape", [None, (), (1,), (4,), (3, 1), (3, 4)])
@pytest.mark.parametrize("alpha, beta", [(1.0, 1.0), (0.5, 2.0), (2.0, 0.0)])
def test_gemm_against_plain(ta, tb, cshape, alpha, beta):
    a = rnd((5, 3) if ta else (3, 5), seed=1)
    b = rnd((4, 5) if tb else (5, 4), seed=2)
    c = None if cshape is None else rnd(cshape, seed=3)
    got = gemm(a, b, c, alpha, beta, ta, tb)
    assert got.shape == (3, 4) and got.dtype == np.float32
    np.testing.assert_allclose(got, plain_gemm(a, b, c, alpha, beta, ta, tb), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float64, np.float16, ml_dtypes.bfloat16, np.int32, np.int64, np.uint32, np.uint64])
def test_gemm_types(dtype):
    a = np.arange(6).reshape(2, 3).astype(dtype)
    b = np.arange(6).reshape(3, 2).astype(dtype)
    c = np.ones(2, dtype)
    got = gemm(a, b, c, 2.0, 3.0)
    assert got.dtype == np.dtype(dtype)
    want = 2 * (np.arange(6).reshape(2, 3) @ np.arange(6).reshape(3, 2)) + 3
    np.testing.assert_array_equal(got.astype(np.float64), want)


def test_gemm_does_not_modify_inputs():
    a, b, c = rnd((3, 4)), rnd((4, 2), seed=1), rnd((3, 2), seed=2)
    for arr in (a, b, c):
        arr.flags.writeable = False
    gemm(a, b, c, 0.5, 2.0)
    gemm(a, b, c)


def test_gemm_matches_onnxruntime_and_versions():
    a, b, c = rnd((3, 6)), rnd((4, 6), seed=1), rnd((4,), seed=2)
    m = make_single_node_model(
        "Gemm", [("a", F, [3, 6]), ("b", F, [4, 6]), ("c", F, [4])], [("y", F, None)], opset=13, transB=1, alpha=0.7, beta=1.3
    )
    feeds = {"a": a, "b": b, "c": c}
    np.testing.assert_allclose(run_model(m, feeds)[0], ort_run(m, feeds)[0], rtol=1e-5)
    m11 = make_single_node_model("Gemm", [("a", F, [3, 6]), ("b", F, [6, 4])], [("y", F, None)], opset=11)
    (y,) = run_model(m11, {"a": a, "b": b.T.copy()})
    np.testing.assert_allclose(y, a @ b.T, rtol=1e-5)
    m6 = make_single_node_model("Gemm", [("a", F, [3, 6]), ("b", F, [4, 6]), ("c", F, [4])], [("y", F, None)], opset=6, transB=1)
    with pytest.raises(KernelError, match=r"without broadcast=1 it must be \[3, 4\]"):
        run_model(m6, feeds)
    m6b = make_single_node_model(
        "Gemm", [("a", F, [3, 6]), ("b", F, [4, 6]), ("c", F, [4])], [("y", F, None)], opset=6, transB=1, broadcast=1
    )
    np.testing.assert_allclose(run_model(m6b, feeds)[0], a @ b.T + c, rtol=1e-5)


@pytest.mark.parametrize("rows", [1, 3, 16, 17])
@pytest.mark.parametrize("tb", [0, 1])
@pytest.mark.parametrize("cshape", [None, (24,), (1, 24), (1,), "rows"])
@pytest.mark.parametrize("relu", [False, True])
def test_gemm_small_rows_compiled_loop_matches_numpy(rows, tb, cshape, relu):
    """A few float32 rows run the compiled dense loop (product, bias and the fused Relu in
    one call); more rows, a C that is not one value per column, and ONNXRT_JIT=0 take
    numpy's path. Both agree within float32 rounding, NaN and -0 included."""
    from onnxrt import native as _jit

    a = rnd((rows, 40), seed=4)
    a[0, 3] = np.nan if rows > 1 else a[0, 3]
    b = rnd((24, 40) if tb else (40, 24), seed=5)
    c = None if cshape is None else rnd((rows, 24) if cshape == "rows" else cshape, seed=6)
    inputs = [("a", F, [rows, 40]), ("b", F, list(b.shape))] + ([("c", F, list(c.shape))] if c is not None else [])
    feeds = {"a": a, "b": b} | ({"c": c} if c is not None else {})
    nodes = [helper.make_node("Gemm", [n for n, _, _ in inputs], ["g"], transB=tb)]
    nodes.append(helper.make_node("Relu", ["g"], ["y"]) if relu else helper.make_node("Identity", ["g"], ["y"]))
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs], [helper.make_tensor_value_info("y", F, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    got = run_model(model, feeds)[0]
    with _jit.disabled():
        plain = run_model(model, feeds)[0]
    want = plain_gemm(a, b, c, 1.0, 1.0, 0, tb)
    if relu:
        want = np.where(want < 0, 0, want)
    assert got.shape == plain.shape == (rows, 24) and got.dtype == plain.dtype == np.float32
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.array_equal(np.isnan(got), np.isnan(plain))


def test_gemm_dense_loop_checks_new_operands_again():
    # the compiled loop checks B and C once per pair of arrays: a session fed new ones
    # (other values, a float64 or transposed B, a C per row) gets results for those
    pytest.importorskip("numba")
    from onnxrt import native as _jit

    if _jit.kernels() is None:
        pytest.skip("compiled kernels disabled")
    graph = helper.make_graph(
        [helper.make_node("Gemm", ["a", "b", "c"], ["y"])],
        "g",
        [helper.make_tensor_value_info("a", F, [None, None]), helper.make_tensor_value_info("b", F, [None, None]),
         helper.make_tensor_value_info("c", F, None)],
        [helper.make_tensor_value_info("y", F, None)],
    )
    sess = onnxrt.InferenceSession(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]))
    a = rnd((3, 8), seed=1)
    for b, c in [
        (rnd((8, 5), seed=2), rnd((5,), seed=3)),
        (rnd((8, 5), seed=4), rnd((5,), seed=3)),
        (np.asfortranarray(rnd((8, 5), seed=5)), rnd((1, 5), seed=6)),
        (rnd((8, 6), seed=7), rnd((3, 6), seed=8)),
        (rnd((8, 5), seed=2), rnd((5,), seed=3)),
    ]:
        (got,) = sess.run(None, {"a": a, "b": b, "c": c})
        assert got.shape == (3, b.shape[1]) and got.dtype == np.float32
        np.testing.assert_allclose(got, a @ b + c, rtol=1e-5, atol=1e-5)
    with pytest.raises(onnxrt.OnnxRuntimeError):  # an input of the wrong type is still refused
        sess.run(None, {"a": a, "b": rnd((8, 5), seed=2).astype(np.float64), "c": rnd((5,), seed=3)})


def test_gemm_errors():
    with pytest.raises(KernelError, match=r"cannot multiply A' \[2, 3\] by B' \[2, 3\]"):
        gemm(np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(KernelError, match=r"C of shape \[3\] does not broadcast to \[2, 2\]"):
        gemm(np.ones((2, 3)), np.ones((3, 2)), np.ones(3))
    with pytest.raises(KernelError, match="must be 2-D"):
        gemm(np.ones(3), np.ones((3, 2)))


# --------------------------------------------------------------------------------------
# Einsum
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "equation, shapes",
    [
        ("ij,jk->ik", [(3, 4), (4, 5)]),
        ("bij, bjk -> bik", [(2, 3, 4), (2, 4, 5)]),
        ("ii->i", [(4, 4)]),
        ("ij->ji", [(3, 4)]),
        ("i,i", [(5,), (5,)]),
        ("ij", [(3, 4)]),
        ("ba", [(3, 4)]),  # implicit: output in alphabetical order -> transpose
        ("Ab,bA", [(3, 4), (4, 3)]),
        ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
        ("ij,jk,kl->il", [(30, 40), (40, 50), (50, 20)]),
        ("bhqd,bhkd->bhqk", [(2, 4, 8, 16), (2, 4, 10, 16)]),
        ("i,j->ij", [(3,), (4,)]),
    ],
)
def test_einsum_against_numpy(equation, shapes):
    inputs = [rnd(s, seed=k) for k, s in enumerate(shapes)]
    got = einsum(equation, *inputs)
    want = np.einsum(equation.replace(" ", ""), *[x.astype(np.float64) for x in inputs])
    assert got.dtype == np.float32 and got.shape == np.shape(want)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_einsum_implicit_orders_upper_case_first():
    x = rnd((2, 3))
    assert einsum("aB", x).shape == (3, 2)  # 'B' < 'a' in ASCII


@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.uint8, np.float64, np.float16, ml_dtypes.bfloat16])
def test_einsum_types(dtype):
    a = np.arange(6).reshape(2, 3).astype(dtype)
    b = np.arange(3).astype(dtype)
    got = einsum("ij,j->i", a, b)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got.astype(np.float64), np.arange(6).reshape(2, 3) @ np.arange(3))


def test_einsum_matches_onnxruntime_and_errors():
    a, b = rnd((2, 3, 4)), rnd((2, 4, 5), seed=1)
    m = make_single_node_model("Einsum", [("a", F, [2, 3, 4]), ("b", F, [2, 4, 5])], [("y", F, None)], opset=12, equation="bij,bjk->bik")
    np.testing.assert_allclose(run_model(m, {"a": a, "b": b})[0], ort_run(m, {"a": a, "b": b})[0], rtol=1e-5)
    with pytest.raises(KernelError, match=r"equation 'ij,jk->ik' does not fit the inputs of shapes \[2, 3\], \[4, 5\]"):
        einsum("ij,jk->ik", rnd((2, 3)), rnd((4, 5)))
    node = helper.make_node("Einsum", ["a"], ["y"], equation=" ", name="e")
    with pytest.raises(InvalidAttributeError, match=r"Node 'e' \(Einsum\): attribute 'equation' must be a non-empty string"):
        onnxrt.ops_cpu.op_einsum.Einsum(node, since_version=12)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 6), st.integers(1, 6), st.integers(1, 6), st.integers(1, 3))
def test_matmul_batched_matches_onnxruntime(m, k, n, batch):
    a = rnd((batch, m, k), seed=m)
    b = rnd((k, n), seed=n)
    model = make_single_node_model("MatMul", [("a", F, [batch, m, k]), ("b", F, [k, n])], [("y", F, None)], opset=13)
    got = run_model(model, {"a": a, "b": b})[0]
    want = ort_run(model, {"a": a, "b": b})[0]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
