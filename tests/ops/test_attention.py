"""Attention, RotaryEmbedding, TensorScatter, SwiGLU and LinearAttention: onnxruntime on random cases, plain definitions, errors."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import IndexOutOfRangeError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_attention import Attention, attention
from onnxrt.ops_cpu.op_linear_attention import linear_attention
from onnxrt.ops_cpu.op_rotary_embedding import rotary_embedding
from onnxrt.ops_cpu.op_swiglu import swiglu
from onnxrt.ops_cpu.op_tensor_scatter import tensor_scatter

ELEM = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float16): TensorProto.FLOAT16,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(ml_dtypes.bfloat16): TensorProto.BFLOAT16,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.int32): TensorProto.INT32,
}


def single_node(op, opset, inputs, outputs, **attrs):
    """Model and feeds; ``inputs`` is a list of (name, array or None for an omitted input)."""
    names = [n if v is not None else "" for n, v in inputs]
    while names and not names[-1]:
        names.pop()
    node = helper.make_node(op, names, outputs, **attrs)
    gi = [helper.make_tensor_value_info(n, ELEM[v.dtype], v.shape) for n, v in inputs if v is not None]
    go = [helper.make_empty_tensor_value_info(o) for o in outputs if o]
    model = helper.make_model(helper.make_graph([node], "g", gi, go), opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 11
    return model, {n: v for n, v in inputs if v is not None}


def compare_with_onnxruntime(op, opset, inputs, outputs, rtol=1e-5, atol=1e-5, **attrs):
    model, feeds = single_node(op, opset, inputs, outputs, **attrs)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxrt.InferenceSession(model).run(None, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype and g.shape == e.shape
        e = e.astype(np.float64)
        # onnxruntime writes the lowest float where a boolean mask disallows a key (mode-2
        # qk output); the spec says such positions contribute -inf, which onnxrt writes
        e[e <= np.finfo(np.float32).min] = -np.inf
        np.testing.assert_allclose(g.astype(np.float64), e, rtol=rtol, atol=atol)
    return got


# --------------------------------------------------------------------------------------
# Attention
# --------------------------------------------------------------------------------------


def plain_attention(Q, K, V, mask=None, scale=None, causal=False, softcap=0.0):
    """One (batch, q-head) pair at a time, 4-D inputs, float64: the spec's pattern literally."""
    B, Hq, Sq, D = Q.shape
    Hkv, Sk = K.shape[1], K.shape[2]
    scale = 1 / math.sqrt(D) if scale is None else scale
    Y = np.zeros((B, Hq, Sq, V.shape[-1]))
    for b in range(B):
        for h in range(Hq):
            kh = h // (Hq // Hkv)
            s = (Q[b, h] * math.sqrt(scale)) @ (K[b, kh] * math.sqrt(scale)).T
            if softcap:
                s = softcap * np.tanh(s / softcap)
            if mask is not None:
                m = np.broadcast_to(mask, (B, Hq, Sq, Sk))[b, h]
                s = s + (np.where(m, 0, -np.inf) if m.dtype == bool else m)
            if causal:
                s = s + np.where(np.tril(np.ones((Sq, Sk), bool)), 0, -np.inf)
            e = np.exp(s - s.max(axis=-1, keepdims=True))
            Y[b, h] = (e / e.sum(axis=-1, keepdims=True)) @ V[b, kh]
    return Y


@pytest.mark.parametrize("hq,hkv", [(4, 4), (6, 2), (4, 1)])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("mask", [None, "bool", "float"])
def test_attention_against_plain_definition(hq, hkv, causal, mask):
    rng = np.random.default_rng(hq * 10 + hkv)
    Q = rng.standard_normal((2, hq, 5, 8))
    K = rng.standard_normal((2, hkv, 5, 8))
    V = rng.standard_normal((2, hkv, 5, 6))
    m = None
    if mask == "bool":
        m = rng.random((2, 1, 5, 5)) > 0.3
        m[..., 0] = True  # no fully masked row
    elif mask == "float":
        m = rng.standard_normal((5, 5))
    Y, pk, pv, qk = attention(Q, K, V, m, is_causal=int(causal), softcap=1.5)
    assert Y.dtype == np.float64 and Y.shape == (2, hq, 5, 6)
    np.testing.assert_allclose(Y, plain_attention(Q, K, V, m, causal=causal, softcap=1.5), rtol=1e-12, atol=1e-12)
    assert pk is K or np.array_equal(pk, K)


ATTENTION_CASES = [
    dict(),
    dict(is_causal=1),
    dict(scale=0.3),
    dict(softcap=2.5),
    dict(mask="bool4"),
    dict(mask="float2"),
    dict(mask="float3", is_causal=1),
    dict(past=3),
    dict(past=3, is_causal=1, mask="float2"),
    dict(qk_mode=0, mask="float2"),
    dict(qk_mode=1, softcap=3.0, mask="float2"),
    dict(qk_mode=2, mask="bool4"),
    dict(qk_mode=3, mask="bool4", past=2),
]


def _attention_inputs(rng, three_d, hq, hkv, case, dtype=np.float32, sq=4, skv=6, d=8, dv=8):
    B = 2
    Q = rng.standard_normal((B, hq, sq, d)).astype(dtype)
    K = rng.standard_normal((B, hkv, skv, d)).astype(dtype)
    V = rng.standard_normal((B, hkv, skv, dv)).astype(dtype)
    past = case.get("past", 0)
    total = skv + past
    mask = None
    kind = case.get("mask")
    if kind == "bool4":
        mask = rng.random((B, hq, sq, total)) > 0.3
        mask[..., -1] = True
    elif kind == "float2":
        mask = rng.standard_normal((sq, total)).astype(dtype)
    elif kind == "float3":
        mask = rng.standard_normal((B, 1, sq, total)).astype(dtype)
    pk = pv = None
    if past:
        pk = rng.standard_normal((B, hkv, past, d)).astype(dtype)
        pv = rng.standard_normal((B, hkv, past, dv)).astype(dtype)
    attrs = {k: v for k, v in case.items() if k in ("is_causal", "scale", "softcap")}
    if three_d:
        Q = Q.transpose(0, 2, 1, 3).reshape(B, sq, hq * d)
        K = K.transpose(0, 2, 1, 3).reshape(B, skv, hkv * d)
        V = V.transpose(0, 2, 1, 3).reshape(B, skv, hkv * dv)
        attrs.update(q_num_heads=hq, kv_num_heads=hkv)
    inputs = [("Q", Q), ("K", K), ("V", V), ("attn_mask", mask), ("past_key", pk), ("past_value", pv)]
    outputs = ["Y"]
    if past or "qk_mode" in case:
        outputs += ["present_key", "present_value"] if past else ["", ""]
    if "qk_mode" in case:
        outputs.append("qk")
        attrs["qk_matmul_output_mode"] = case["qk_mode"]
    return inputs, outputs, attrs


@pytest.mark.parametrize("three_d", [False, True], ids=["4d", "3d"])
@pytest.mark.parametrize("hq,hkv", [(3, 3), (6, 3), (4, 1)])
@pytest.mark.parametrize("case", ATTENTION_CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()) or "plain")
def test_attention_against_onnxruntime(three_d, hq, hkv, case):
    rng = np.random.default_rng(len(str(case)) + hq)
    inputs, outputs, attrs = _attention_inputs(rng, three_d, hq, hkv, case)
    compare_with_onnxruntime("Attention", 23, inputs, outputs, **attrs)


@pytest.mark.parametrize(
    "attrs",
    [dict(is_causal=1), dict(is_causal=1, left_window_size=2), dict(left_window_size=1, right_window_size=2), dict()],
)
def test_attention_nonpad_and_windows_against_onnxruntime(attrs):
    rng = np.random.default_rng(12)
    Q = rng.standard_normal((3, 2, 3, 8)).astype(np.float32)
    K = rng.standard_normal((3, 2, 7, 8)).astype(np.float32)
    V = rng.standard_normal((3, 2, 7, 8)).astype(np.float32)
    nonpad = np.array([7, 4, 5], np.int64)
    mask = rng.standard_normal((3, 7)).astype(np.float32)
    opset = 25 if "left_window_size" in attrs or "right_window_size" in attrs else 24
    compare_with_onnxruntime(
        "Attention", opset,
        [("Q", Q), ("K", K), ("V", V), ("attn_mask", mask), ("pk", None), ("pv", None), ("nonpad", nonpad)],
        ["Y"], **attrs,
    )


@pytest.mark.parametrize("dtype", [np.float16, np.float64, ml_dtypes.bfloat16])
def test_attention_dtypes(dtype):
    rng = np.random.default_rng(5)
    inputs, outputs, attrs = _attention_inputs(rng, False, 4, 2, dict(is_causal=1, past=2, qk_mode=3), dtype=dtype)
    ref_inputs = [(n, None if v is None else v.astype(np.float64)) for n, v in inputs]
    kw = dict(is_causal=1, qk_matmul_output_mode=3)
    ref = attention(*[v for _, v in ref_inputs], **kw)
    got = attention(*[v for _, v in inputs], **kw)
    tol = {np.float16: 2e-3, np.float64: 1e-12, ml_dtypes.bfloat16: 2e-2}[dtype]
    for g, r in zip(got, ref):
        assert g.dtype == np.dtype(dtype)
        np.testing.assert_allclose(g.astype(np.float64), r, rtol=tol, atol=tol)


def test_attention_fully_masked_rows_are_zero_and_guard_does_not_leak():
    rng = np.random.default_rng(1)
    Q, K, V = (rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(3))
    mask = np.array([[True, True, True], [False, False, False], [True, False, True]])
    Y, _, _, P = attention(Q, K, V, mask, qk_matmul_output_mode=3)
    assert not np.isnan(Y).any() and not np.isnan(P).any()
    assert np.all(Y[:, :, 1] == 0) and np.all(P[:, :, 1] == 0)
    np.testing.assert_allclose(P.sum(-1)[:, :, [0, 2]], 1, rtol=1e-6)
    # causal with a negative offset (more queries than valid keys): leading rows are empty
    Y, *_ = attention(Q, K, V, None, None, None, np.array([1]), is_causal=1)
    assert np.all(Y[:, :, :2] == 0) and np.any(Y[:, :, 2] != 0)


COMPILED_CASES = [
    # (batch, q heads, kv heads, q rows, keys, head size, value size, three_d, mask shape or None, extra attributes)
    (1, 8, 8, 128, 128, 64, 64, False, None, {}),  # the benchmark's shape: both threads share the items
    (2, 6, 2, 33, 70, 16, 24, False, (2, 1, 1, 70), {"is_causal": 1}),  # GQA, key padding mask + causal
    (2, 4, 1, 5, 9, 8, 8, True, (5, 9), {}),  # 3-D inputs (heads split by a transposed view), MQA
    (1, 2, 2, 300, 260, 8, 8, False, (1, 2, 300, 260), {"scale": 0.3}),  # several row blocks per head
]


@pytest.mark.parametrize("case", COMPILED_CASES, ids=lambda c: f"b{c[0]}h{c[1]}/{c[2]}s{c[3]}x{c[4]}")
def test_attention_compiled_items_match_the_numpy_path(case, monkeypatch):
    """float32 Attention runs the compiled loop (BLAS products per item around a softmax in
    cache); the numpy path (compiled kernels off) is the reference, with NaN and fully
    masked rows, float and boolean masks broadcast along batch, heads or rows."""
    from onnxrt import native as _jit
    from onnxrt.fastpaths import attention as fast_attention

    b, hq, hkv, sq, sk, d, dv, three_d, mask_shape, attrs = case
    rng = np.random.default_rng(sk)
    Q = rng.standard_normal((b, hq, sq, d)).astype(np.float32)
    K = rng.standard_normal((b, hkv, sk, d)).astype(np.float32)
    V = rng.standard_normal((b, hkv, sk, dv)).astype(np.float32)
    Q[0, 0, 1, 0] = np.nan  # a NaN score: its row of Y is NaN
    K[-1, -1, sk - 3, 0] = np.nan  # a NaN in one column (where the vectorised maximum may skip it)
    mask = None
    if mask_shape is not None:
        mask = rng.standard_normal(mask_shape).astype(np.float32)
        if mask_shape[-2] == 1:
            mask = mask > -0.5  # a boolean key mask
        else:
            mask[..., 2, :] = -np.inf  # fully masked rows: zeros
    if three_d:
        Q, K, V = (a.transpose(0, 2, 1, 3).reshape(b, a.shape[2], -1) for a in (Q, K, V))
        attrs = {**attrs, "q_num_heads": hq, "kv_num_heads": hkv}
    saved = [a.copy() for a in (Q, K, V)]
    calls = []
    assert _jit.kernels() is not None
    # the compiled items of the fast path (onnxrt.fastpaths.attention) against the reference kernel
    items = lambda *a: calls.append(1) or fast_attention._items(*a)  # noqa: E731
    Y, present_k, present_v, _ = attention(Q, K, V, mask, want_qk=False, items=items, **attrs)
    assert calls, "the compiled path did not run"
    ref, ref_k, ref_v, _ = attention(Q, K, V, mask, want_qk=False, **attrs)
    assert Y.dtype == np.float32 and Y.shape == ref.shape
    np.testing.assert_allclose(Y, ref, rtol=2e-5, atol=2e-6)
    assert np.array_equal(np.isnan(Y), np.isnan(ref)) and np.isnan(Y).any()
    if mask_shape is not None and mask_shape[-2] != 1:
        rows = Y[:, 2] if three_d else Y[:, :, 2]
        assert np.all(rows == 0)
    np.testing.assert_array_equal(present_k, ref_k)
    np.testing.assert_array_equal(present_v, ref_v)
    for a, before in zip((Q, K, V), saved):
        np.testing.assert_array_equal(a, before)


def test_attention_without_an_ilp64_openblas_keeps_the_numpy_path(monkeypatch):
    import onnxrt
    from onnx import TensorProto, helper

    from onnxrt.fastpaths import attention as fast_attention

    rng = np.random.default_rng(3)
    Q, K, V = (rng.standard_normal((1, 2, 4, 8)).astype(np.float32) for _ in range(3))
    expected = attention(Q, K, V, want_qk=False)[0]
    monkeypatch.setattr(fast_attention, "blas_sgemm_address", lambda: None)
    monkeypatch.setattr(fast_attention, "_attention_compiled", lambda *a: pytest.fail("compiled path without BLAS"))
    node = helper.make_node("Attention", ["q", "k", "v"], ["y"])
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1, 2, 4, 8]) for n in "qkv"],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    sess = onnxrt.OnnxInference(helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)]))
    sess.run({"q": Q, "k": K, "v": V})
    Y = sess.run({"q": Q, "k": K, "v": V})["y"]
    assert {r["path"] for r in sess.fast_paths()} <= {"compiled softmax rows", "reference"}
    np.testing.assert_allclose(Y, expected, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(Y, plain_attention(Q, K, V), rtol=1e-5, atol=1e-6)


def test_attention_short_mask_is_padded_with_minus_infinity():
    rng = np.random.default_rng(13)
    Q, K, V = (rng.standard_normal((2, 2, 3, 4)) for _ in range(3))
    mask = rng.standard_normal((3, 2))
    full = np.concatenate([mask, np.full((3, 1), -np.inf)], axis=1)
    np.testing.assert_array_equal(attention(Q, K, V, mask)[0], attention(Q, K, V, full)[0])
    np.testing.assert_allclose(attention(Q, K, V, mask)[0], plain_attention(Q, K, V, full), rtol=1e-12)


def test_attention_softmax_precision_computes_the_softmax_in_that_type():
    rng = np.random.default_rng(2)
    Q, K, V = (rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(3))
    _, _, _, S = attention(Q, K, V, qk_matmul_output_mode=0)
    _, _, _, P16 = attention(Q, K, V, qk_matmul_output_mode=3, softmax_precision=10)
    assert P16.dtype == np.float32  # the output keeps T1
    np.testing.assert_array_equal(P16, P16.astype(np.float16).astype(np.float32))  # float16 values
    x = S.astype(np.float16)  # the softmax written with float16 operations
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(P16, (e / e.sum(axis=-1, keepdims=True)).astype(np.float32), rtol=1e-3)
    _, _, _, P64 = attention(Q, K, V, qk_matmul_output_mode=3, softmax_precision=11)
    s64 = S.astype(np.float64)
    e64 = np.exp(s64 - s64.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(P64, e64 / e64.sum(axis=-1, keepdims=True), rtol=1e-6)


def test_attention_float16_rounds_every_step_like_separate_operators():
    """The function body evaluated with float16 operators: scaled Q and K, QK^T, softmax and PV
    each rounded to float16. The conformance expectations are computed so."""
    rng = np.random.default_rng(21)
    Q, K, V = (rng.standard_normal((2, 3, 4, 8)).astype(np.float16) for _ in range(3))
    r = np.float16(math.sqrt(1 / math.sqrt(8)))
    s = np.matmul((Q * r).astype(np.float32), np.swapaxes(K * r, -1, -2).astype(np.float32)).astype(np.float16)
    s = s + np.where(np.tril(np.ones((4, 4), bool)), 0, -np.inf).astype(np.float16)
    e = np.exp(s - s.max(axis=-1, keepdims=True))
    p = e / e.sum(axis=-1, keepdims=True)
    ref = np.matmul(p.astype(np.float32), V.astype(np.float32)).astype(np.float16)
    Y, *_ = attention(Q, K, V, is_causal=1)
    assert Y.dtype == np.float16
    np.testing.assert_array_equal(Y, ref)


def test_attention_empty_sequences():
    f = np.float32
    Y, pk, pv, qk = attention(np.zeros((1, 2, 0, 4), f), np.ones((1, 2, 3, 4), f), np.ones((1, 2, 3, 5), f))
    assert Y.shape == (1, 2, 0, 5) and qk.shape == (1, 2, 0, 3)
    # no key at all: every query row is fully masked, hence zero
    with np.errstate(all="raise"):
        Y, _, _, P = attention(np.ones((1, 2, 3, 4), f), np.zeros((1, 2, 0, 4), f), np.zeros((1, 2, 0, 5), f),
                               qk_matmul_output_mode=3)
    assert Y.shape == (1, 2, 3, 5) and not Y.any() and P.shape == (1, 2, 3, 0)


def test_attention_does_not_modify_inputs():
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal((1, 2, 3, 4)).astype(np.float32) for _ in range(5)]
    copies = [a.copy() for a in arrays]
    for a in arrays:
        a.flags.writeable = False
    attention(arrays[0], arrays[1], arrays[2], np.zeros((3, 5), np.float32), arrays[3], arrays[4], softcap=1.0)
    for a, c in zip(arrays, copies):
        np.testing.assert_array_equal(a, c)


def test_attention_errors():
    q = np.zeros((1, 4, 2, 8), np.float32)
    k = np.zeros((1, 3, 2, 8), np.float32)
    with pytest.raises(KernelError, match=r"query head count \(4\) must be a multiple"):
        attention(q, k, k)
    with pytest.raises(KernelError, match="'q_num_heads' must be a positive head count"):
        attention(np.zeros((1, 2, 8), np.float32), np.zeros((1, 2, 8), np.float32), np.zeros((1, 2, 8), np.float32))
    with pytest.raises(KernelError, match="past_key and past_value must be given together"):
        attention(q, q, q, None, q)
    with pytest.raises(KernelError, match="attn_mask has 9 columns, more than the 2 keys"):
        attention(q, q, q, np.zeros((2, 9), np.float32))
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"], qk_matmul_output_mode=5)
    with pytest.raises(InvalidAttributeError, match="'qk_matmul_output_mode' is 5"):
        Attention(node)
    node = helper.make_node("Attention", ["Q", "K", "V"], ["Y"], softmax_precision=7)
    with pytest.raises(InvalidAttributeError, match="'softmax_precision' is 7"):
        Attention(node)


# --------------------------------------------------------------------------------------
# RotaryEmbedding
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rotary_dim", [0, 4])
@pytest.mark.parametrize("three_d", [False, True])
def test_rotary_embedding_against_onnxruntime(interleaved, rotary_dim, three_d):
    rng = np.random.default_rng(interleaved + 2 * rotary_dim)
    B, H, S, D = 2, 3, 5, 8
    half = (rotary_dim or D) // 2
    X = rng.standard_normal((B, H, S, D)).astype(np.float32)
    theta = rng.random((20, half)) * 6
    cos, sin = np.cos(theta).astype(np.float32), np.sin(theta).astype(np.float32)
    pos = rng.integers(0, 20, (B, S))
    attrs = dict(interleaved=interleaved, rotary_embedding_dim=rotary_dim)
    if three_d:
        X = X.transpose(0, 2, 1, 3).reshape(B, S, H * D)
        attrs["num_heads"] = H
    compare_with_onnxruntime("RotaryEmbedding", 23, [("X", X), ("cos", cos), ("sin", sin), ("pos", pos)], ["Y"], **attrs)


def test_rotary_embedding_plain_definition_and_dtypes():
    rng = np.random.default_rng(4)
    X = rng.standard_normal((1, 2, 3, 6))
    theta = rng.random((1, 3, 3))
    for dtype, tol in ((np.float64, 1e-12), (np.float16, 2e-3), (ml_dtypes.bfloat16, 2e-2)):
        Y = rotary_embedding(X.astype(dtype), np.cos(theta).astype(dtype), np.sin(theta).astype(dtype))
        assert Y.dtype == np.dtype(dtype) and Y.shape == X.shape
        exp = np.empty_like(X)
        for k in range(3):  # halves: feature k pairs with feature k + 3
            c, s = np.cos(theta[0, :, k])[None, :], np.sin(theta[0, :, k])[None, :]
            exp[0, :, :, k] = c * X[0, :, :, k] - s * X[0, :, :, k + 3]
            exp[0, :, :, k + 3] = s * X[0, :, :, k] + c * X[0, :, :, k + 3]
        np.testing.assert_allclose(Y.astype(np.float64), exp, rtol=tol, atol=tol)


def test_rotary_embedding_errors():
    X = np.zeros((1, 2, 3, 8), np.float32)
    cache = np.zeros((4, 4), np.float32)
    with pytest.raises(IndexOutOfRangeError, match=r"position_ids holds 4, outside \[0, 3\]"):
        rotary_embedding(X, cache, cache, np.array([[0, 1, 4]]))
    with pytest.raises(KernelError, match="'num_heads' must be positive"):
        rotary_embedding(np.zeros((1, 3, 8), np.float32), cache, cache, np.zeros((1, 3), np.int64))
    with pytest.raises(KernelError, match="rotary_embedding_dim must be even"):
        rotary_embedding(X, cache, cache, np.zeros((1, 3), np.int64), rotary_embedding_dim=3)


# --------------------------------------------------------------------------------------
# TensorScatter
# --------------------------------------------------------------------------------------


def loop_tensor_scatter(past, update, idx, axis, mode):
    out = past.copy()
    axis %= past.ndim
    cap, seq = past.shape[axis], update.shape[axis]
    for prefix in np.ndindex(past.shape[:axis]):
        for s in range(seq):
            c = idx[prefix[0]] + s
            if mode == "circular":
                c %= cap
            out[prefix + (c,)] = update[prefix + (s,)]
    return out


@pytest.mark.parametrize("mode", ["linear", "circular"])
@pytest.mark.parametrize("axis", [-2, 1, 2])
def test_tensor_scatter_against_loop_and_onnxruntime(mode, axis):
    rng = np.random.default_rng(8)
    past = rng.standard_normal((3, 2, 6, 4)).astype(np.float32)
    ushape = list(past.shape)
    ushape[axis] = 2
    update = rng.standard_normal(ushape).astype(np.float32)
    idx = np.array([0, 3, 5 if mode == "circular" else 4], np.int64) if past.shape[axis] == 6 else np.array([0, 0, 0], np.int64)
    got = tensor_scatter(past, update, idx, axis=axis, mode=mode)
    np.testing.assert_array_equal(got, loop_tensor_scatter(past, update, idx, axis, mode))
    compare_with_onnxruntime(
        "TensorScatter", 24, [("past", past), ("update", update), ("idx", idx)], ["out"], rtol=0, atol=0, axis=axis, mode=mode
    )


@pytest.mark.parametrize("dtype", [np.int8, np.bool_, object, ml_dtypes.int4, ml_dtypes.float8_e4m3fn, np.complex64])
def test_tensor_scatter_every_element_type(dtype):
    past = np.arange(24).reshape(2, 4, 3).astype(str if dtype is object else np.float32)
    if dtype is not object:
        past = (past.astype(np.float32) % 5).astype(dtype)
    else:
        past = past.astype(object)
    update = past[:, :1][:, ::-1].copy()
    got = tensor_scatter(past, update, np.array([3, 1]), axis=1)
    assert got.dtype == past.dtype
    np.testing.assert_array_equal(got, loop_tensor_scatter(past, update, [3, 1], 1, "linear"))


def test_tensor_scatter_errors_and_no_write_indices():
    past = np.zeros((2, 4, 3), np.float32)
    upd = np.ones((2, 2, 3), np.float32)
    got = tensor_scatter(past, upd)  # write_indices default to zeros
    assert np.all(got[:, :2] == 1) and np.all(got[:, 2:] == 0) and np.all(past == 0)
    with pytest.raises(IndexOutOfRangeError, match=r"write_indices\[1\] = 3 plus 2 updates passes the cache length 4"):
        tensor_scatter(past, upd, np.array([0, 3]), axis=1)
    with pytest.raises(InvalidAttributeError, match="axis cannot be 0"):
        tensor_scatter(past, upd, axis=0)
    with pytest.raises(KernelError, match="update must have the shape of past_cache"):
        tensor_scatter(past, np.ones((2, 2, 4), np.float32), axis=1)


# --------------------------------------------------------------------------------------
# SwiGLU
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype,tol", [(np.float32, 1e-6), (np.float64, 1e-12), (np.float16, 2e-3), (ml_dtypes.bfloat16, 2e-2)])
@pytest.mark.parametrize("alpha", [1.0, 0.5, 1.702])
def test_swiglu(dtype, tol, alpha):
    rng = np.random.default_rng(6)
    a = (rng.standard_normal((3, 4, 5)) * 4).astype(dtype)
    b = rng.standard_normal((3, 4, 5)).astype(dtype)
    af, bf = a.astype(np.float64), b.astype(np.float64)
    a32 = float(np.float32(alpha))  # attributes are float32
    exp = af / (1 + np.exp(-a32 * af)) * bf
    model, feeds = single_node("SwiGLU", 28, [("A", a), ("B", b)], ["Y"], alpha=alpha)
    (y,) = onnxrt.InferenceSession(model).run(None, feeds)
    assert y.dtype == np.dtype(dtype) and y.shape == a.shape
    np.testing.assert_allclose(y.astype(np.float64), exp, rtol=tol, atol=tol)
    with pytest.raises(KernelError, match=r"A and B must have the same shape, got \[3, 4, 5\] and \[4, 5\]"):
        swiglu(a, b[0])


# --------------------------------------------------------------------------------------
# LinearAttention
# --------------------------------------------------------------------------------------


def loop_linear_attention(q, k, v, state, decay, beta, hq, hkv, rule, scale=None):
    B, T, _ = q.shape
    dk = q.shape[2] // hq
    dv = v.shape[2] // hkv
    S = np.zeros((B, hkv, dk, dv)) if state is None else state.astype(np.float64).copy()
    out = np.zeros((B, T, hq * dv))
    scale = 1 / math.sqrt(dk) if scale is None else scale
    for b in range(B):
        for t in range(T):
            for h in range(hkv):
                kt = k[b, t, h * dk:(h + 1) * dk]
                vt = v[b, t, h * dv:(h + 1) * dv]
                if rule in ("gated", "gated_delta"):
                    g = decay[b, t].reshape(hkv, -1)[h]
                    S[b, h] = np.exp(g)[:, None] * S[b, h]
                if rule in ("delta", "gated_delta"):
                    bt = beta[b, t].reshape(-1)
                    bt = bt[h] if bt.size > 1 else bt[0]
                    S[b, h] = S[b, h] + bt * np.outer(kt, vt - S[b, h].T @ kt)
                else:
                    S[b, h] = S[b, h] + np.outer(kt, vt)
            for h in range(hq):
                qt = q[b, t, h * dk:(h + 1) * dk]
                out[b, t, h * dv:(h + 1) * dv] = scale * qt @ S[b, h // (hq // hkv)]
    return out, S


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("hq,hkv", [(2, 2), (4, 2), (3, 1)])
@pytest.mark.parametrize("per_head", [False, True])
@pytest.mark.parametrize("with_past", [False, True])
def test_linear_attention_against_plain_loop(rule, hq, hkv, per_head, with_past):
    rng = np.random.default_rng(hq + 3 * hkv)
    B, T, dk, dv = 2, 5, 4, 3
    q = rng.standard_normal((B, T, hq * dk)).astype(np.float32)
    k = rng.standard_normal((B, T, hkv * dk)).astype(np.float32)
    k /= np.linalg.norm(k.reshape(B, T, hkv, dk), axis=-1).repeat(dk, axis=-1).reshape(k.shape)
    v = rng.standard_normal((B, T, hkv * dv)).astype(np.float32)
    decay = -rng.random((B, T, hkv if per_head else hkv * dk)).astype(np.float32)
    beta = rng.random((B, T, hkv)).astype(np.float32)
    past = rng.standard_normal((B, hkv, dk, dv)).astype(np.float32) if with_past else None
    out, state = linear_attention(q, k, v, past, decay, beta, q_num_heads=hq, kv_num_heads=hkv, update_rule=rule)
    eo, es = loop_linear_attention(q, k, v, past, decay, beta, hq, hkv, rule)
    assert out.dtype == np.float32 and out.shape == (B, T, hq * dv) and state.shape == (B, hkv, dk, dv)
    np.testing.assert_allclose(out, eo, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(state, es, rtol=1e-5, atol=1e-5)


def test_linear_attention_against_onnxruntime_and_dtypes():
    rng = np.random.default_rng(9)
    B, T, hq, hkv, dk, dv = 2, 6, 4, 2, 4, 4
    q = rng.standard_normal((B, T, hq * dk)).astype(np.float32)
    k = rng.standard_normal((B, T, hkv * dk)).astype(np.float32) * 0.5
    v = rng.standard_normal((B, T, hkv * dv)).astype(np.float32)
    decay = -rng.random((B, T, hkv * dk)).astype(np.float32)
    beta = rng.random((B, T, 1)).astype(np.float32)
    past = rng.standard_normal((B, hkv, dk, dv)).astype(np.float32)
    inputs = [("q", q), ("k", k), ("v", v), ("past", past), ("decay", decay), ("beta", beta)]
    compare_with_onnxruntime("LinearAttention", 27, inputs, ["o", "s"], q_num_heads=hq, kv_num_heads=hkv, scale=0.3)
    ref = linear_attention(q, k, v, past, decay, beta, q_num_heads=hq, kv_num_heads=hkv)
    for dtype, tol in ((np.float16, 1e-2), (ml_dtypes.bfloat16, 6e-2)):
        got = linear_attention(*[x.astype(dtype) for _, x in inputs], q_num_heads=hq, kv_num_heads=hkv)
        for g, r in zip(got, ref):
            assert g.dtype == np.dtype(dtype)
            np.testing.assert_allclose(g.astype(np.float32), r, rtol=tol, atol=tol)


def test_linear_attention_errors():
    x = np.zeros((1, 2, 8), np.float32)
    with pytest.raises(KernelError, match="update_rule 'gated' needs the 'decay' input"):
        linear_attention(x, x, x, q_num_heads=2, kv_num_heads=2, update_rule="gated")
    with pytest.raises(KernelError, match="q_num_heads \\(3\\) must be a multiple of kv_num_heads \\(2\\)"):
        linear_attention(x, x, x, q_num_heads=3, kv_num_heads=2, update_rule="linear")
    with pytest.raises(InvalidAttributeError, match="update_rule must be one of"):
        linear_attention(x, x, x, q_num_heads=2, kv_num_heads=2, update_rule="fast")
