"""Attention's declared fast paths (onnxrt.fastpaths.attention) against the reference kernel."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

from tests.ops.fastpath_check import check_path

F = TensorProto.FLOAT


def _model(outputs=("y",), mask=False, **attrs):
    ins = ["q", "k", "v"] + (["m"] if mask else [])
    node = helper.make_node("Attention", ins, list(outputs), **attrs)
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, F, None) for n in ins],
                          [helper.make_tensor_value_info(o, F, None) for o in outputs if o])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 23)])


def _qkv(b, hq, hkv, sq, sk, d, seed=0):
    rng = np.random.default_rng(seed)
    return {"q": rng.standard_normal((b, hq, sq, d)).astype(np.float32),
            "k": rng.standard_normal((b, hkv, sk, d)).astype(np.float32),
            "v": rng.standard_normal((b, hkv, sk, d)).astype(np.float32)}


def _tol(d, sk):
    # scores: sums of d products of unit normals (|s| ~ sqrt(d)), exp of them to ~1 ulp, Y sums of
    # sk probabilities times unit values: K * eps * sum|terms| with K = d + sk
    return (d + sk) * float(np.finfo(np.float32).eps) * 8


@pytest.mark.parametrize("shape, attrs, mask", [((1, 8, 8, 128, 128, 64), {}, False),
                                                ((2, 6, 2, 33, 70, 16), {"is_causal": 1}, False),
                                                ((1, 2, 2, 40, 60, 8), {"scale": 0.3}, True)])
def test_compiled_items(shape, attrs, mask):
    feeds = _qkv(*shape)
    if mask:
        feeds["m"] = np.random.default_rng(9).standard_normal((shape[3], shape[4])).astype(np.float32)
    fast, _ = check_path(_model(mask=mask, **attrs), feeds, "Attention", "compiled items", rtol=2e-5,
                         atol=_tol(shape[5], shape[4]))
    b, hq, _, sq, _, d = shape
    assert fast[0].shape == (b, hq, sq, d) and fast[0].dtype == np.float32


@pytest.mark.parametrize("outputs, attrs", [(("y", "", "", "qk"), {"qk_matmul_output_mode": 3}),
                                            (("y",), {"softcap": 5.0})])
def test_compiled_softmax_rows(outputs, attrs):
    feeds = _qkv(1, 4, 2, 64, 96, 16, seed=1)  # 4 * 64 * 96 scores: the compiled rows (4096+)
    fast, _ = check_path(_model(outputs, **attrs), feeds, "Attention", "compiled softmax rows", rtol=1e-5,
                         atol=_tol(16, 96))
    assert fast[0].shape == (1, 4, 64, 16) and all(a.dtype == np.float32 for a in fast)
    if len(fast) > 1:  # probabilities (mode 3): rows sum to 1
        assert fast[1].shape == (1, 4, 64, 96)
        np.testing.assert_allclose(fast[1].sum(axis=-1), 1.0, rtol=96 * 2**-23)
