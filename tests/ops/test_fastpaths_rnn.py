"""LSTM's declared fast path (onnxrt.fastpaths.rnn) against the reference kernel."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from tests.ops.fastpath_check import check_path

F = TensorProto.FLOAT


def _model(S, N, I, H, direction, lens=False, **attrs):
    D = 2 if direction == "bidirectional" else 1
    rng = np.random.default_rng(H)
    inits = [numpy_helper.from_array((rng.standard_normal((D, 4 * H, I)) / np.sqrt(I)).astype(np.float32), "W"),
             numpy_helper.from_array((rng.standard_normal((D, 4 * H, H)) / np.sqrt(H)).astype(np.float32), "R"),
             numpy_helper.from_array(rng.standard_normal((D, 8 * H)).astype(np.float32), "B")]
    ins = ["X", "W", "R", "B"] + (["lens"] if lens else [])
    node = helper.make_node("LSTM", ins, ["Y", "Yh", "Yc"], hidden_size=H, direction=direction, **attrs)
    vi = [helper.make_tensor_value_info("X", F, [S, N, I])]
    if lens:
        vi.append(helper.make_tensor_value_info("lens", TensorProto.INT32, [N]))
    g = helper.make_graph([node], "lstm", vi, [helper.make_tensor_value_info(n, F, None) for n in ("Y", "Yh", "Yc")], inits)
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 14)])


# each step: sums of I + H products of unit scale, through sigmoid/tanh (slopes <= 1) and a state
# recurrence; float32 rounding of another order: (I + H) * eps per step, over S steps
def _tol(S, I, H):
    return S * (I + H) * float(np.finfo(np.float32).eps) * 4


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("S, N, I, H", [(20, 1, 16, 32), (7, 9, 5, 128)])
def test_compiled_steps(direction, S, N, I, H):
    x = np.random.default_rng(0).standard_normal((S, N, I)).astype(np.float32) * 2
    fast, _ = check_path(_model(S, N, I, H, direction), {"X": x}, "LSTM", "compiled steps", rtol=0, atol=_tol(S, I, H))
    D = 2 if direction == "bidirectional" else 1
    assert [a.shape for a in fast] == [(S, D, N, H), (D, N, H), (D, N, H)]
    assert all(a.dtype == np.float32 for a in fast)


def test_other_configurations_keep_the_reference_loop_under_the_path():
    """With partial sequence lengths the path is picked but the reference's masked loop runs: equal results."""
    S, N, I, H = 6, 3, 4, 8
    x = np.random.default_rng(1).standard_normal((S, N, I)).astype(np.float32)
    feeds = {"X": x, "lens": np.array([6, 2, 0], np.int32)}
    fast, ref = check_path(_model(S, N, I, H, "forward", lens=True), feeds, "LSTM", "compiled steps")
    assert (fast[0][2:, 0, 1] == 0).all() and (fast[1][0, 2] == 0).all()
    sess = onnxrt.OnnxInference(_model(S, N, I, H, "forward", activations=["Sigmoid", "Tanh", "Relu"]))
    sess.run({"X": x})
    y = sess.run({"X": x})["Y"]
    assert y.dtype == np.float32 and y.shape == (S, 1, N, H)
