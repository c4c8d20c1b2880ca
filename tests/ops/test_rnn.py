"""RNN, GRU and LSTM: onnxruntime on random cases, a plain per-sample loop, layouts, dtypes, versions, errors."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.errors import InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_rnn import gru, lstm, parse_activations, recurrent, rnn

N_GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
INPUT_NAMES = ["X", "W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"]


def _model(cell, inputs, attrs, n_out, opset, elem=TensorProto.FLOAT):
    names = INPUT_NAMES[: len(inputs)]
    node_in = [n if v is not None else "" for n, v in zip(names, inputs)]
    while node_in and node_in[-1] == "":
        node_in.pop()
    outs = ["Y", "Y_h", "Y_c"][:n_out]
    node = helper.make_node(cell, node_in, outs, **attrs)
    gi = [
        helper.make_tensor_value_info(n, TensorProto.INT32 if n == "sequence_lens" else elem, v.shape)
        for n, v in zip(names, inputs)
        if v is not None
    ]
    go = [helper.make_tensor_value_info(o, elem, None) for o in outs]
    model = helper.make_model(helper.make_graph([node], "g", gi, go), opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    feeds = {n: v for n, v in zip(names, inputs) if v is not None}
    return model, feeds


def run_both(cell, inputs, attrs, opset=22):
    n_out = 3 if cell == "LSTM" else 2
    model, feeds = _model(cell, inputs, attrs, n_out, opset)
    expected = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, feeds)
    got = onnxrt.InferenceSession(model).run(None, feeds)
    return got, expected


def make_case(rng, cell, S=5, N=3, I=4, H=6, direction="forward", lens=None, init=True, peep=False, dtype=np.float32):
    G = N_GATES[cell]
    D = 2 if direction == "bidirectional" else 1
    X = rng.standard_normal((S, N, I)).astype(dtype)
    W = (rng.standard_normal((D, G * H, I)) * 0.5).astype(dtype)
    R = (rng.standard_normal((D, G * H, H)) * 0.5).astype(dtype)
    B = (rng.standard_normal((D, 2 * G * H)) * 0.5).astype(dtype)
    sl = None if lens is None else np.array(lens, np.int32)
    ih = rng.standard_normal((D, N, H)).astype(dtype) if init else None
    ins = [X, W, R, B, sl, ih]
    if cell == "LSTM":
        ic = rng.standard_normal((D, N, H)).astype(dtype) if init else None
        P = rng.standard_normal((D, 3 * H)).astype(dtype) if peep else None
        ins += [ic, P]
    return ins


CASES = [
    dict(direction="forward"),
    dict(direction="reverse"),
    dict(direction="bidirectional"),
    dict(direction="forward", lens=[5, 2, 3]),
    dict(direction="reverse", lens=[5, 2, 3]),
    dict(direction="bidirectional", lens=[1, 5, 4]),
    dict(direction="bidirectional", lens=[5, 0, 3]),
    dict(direction="forward", clip=0.5),
    dict(direction="bidirectional", clip=0.3, lens=[3, 5, 1]),
    dict(direction="forward", init=False),
]


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("case", CASES, ids=lambda c: "-".join(f"{k}={v}" for k, v in c.items()))
def test_against_onnxruntime(cell, case):
    rng = np.random.default_rng(abs(hash((cell, str(case)))) % 2**32)
    case = dict(case)
    clip = case.pop("clip", None)
    ins = make_case(rng, cell, **case)
    H = ins[2].shape[-1]
    attrs = dict(hidden_size=H, direction=case["direction"])
    if clip is not None:
        attrs["clip"] = clip
    got, expected = run_both(cell, ins, attrs)
    assert len(got) == len(expected)
    for g, e in zip(got, expected):
        assert g.dtype == np.float32 and g.shape == e.shape
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    ("cell", "attrs", "peep"),
    [
        ("GRU", dict(linear_before_reset=1), False),
        ("GRU", dict(linear_before_reset=1, direction="bidirectional"), False),
        ("LSTM", dict(), True),
        ("LSTM", dict(direction="bidirectional", clip=0.4), True),
        ("LSTM", dict(input_forget=1), False),
        ("LSTM", dict(input_forget=1), True),
        ("RNN", dict(activations=["LeakyRelu"], activation_alpha=[0.3]), False),
        ("RNN", dict(activations=["Relu"]), False),
        ("RNN", dict(activations=["Affine", "ScaledTanh"], activation_alpha=[0.3, 0.7],
                     activation_beta=[0.1, 2.0], direction="bidirectional"), False),
        ("GRU", dict(activations=["HardSigmoid", "Elu"], activation_alpha=[0.3, 0.7], activation_beta=[0.1]), False),
        ("GRU", dict(activations=["HardSigmoid", "Elu"], activation_alpha=[0.3]), False),
        ("GRU", dict(activations=["Tanh", "LeakyRelu"], activation_alpha=[0.3]), False),
        ("LSTM", dict(activations=["HardSigmoid", "ThresholdedRelu", "Softsign"], activation_alpha=[0.3, 0.1]), False),
        ("LSTM", dict(activations=["Sigmoid", "Softplus", "Relu"]), False),
        ("LSTM", dict(activations=["Sigmoid", "Tanh", "Tanh", "Sigmoid", "Relu", "Softsign"],
                      direction="bidirectional"), True),
    ],
)
def test_options_against_onnxruntime(cell, attrs, peep):
    rng = np.random.default_rng(7)
    ins = make_case(rng, cell, direction=attrs.get("direction", "forward"), peep=peep)
    attrs = dict(hidden_size=ins[2].shape[-1], **attrs)
    got, expected = run_both(cell, ins, attrs)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5)


# --------------------------------------------------------------------------------------
# A plain definition from the spec's equations, one sample and one step at a time
# --------------------------------------------------------------------------------------


def _sig(x):
    return 1 / (1 + np.exp(-x))


def loop_lstm(X, W, R, B, initial_h, initial_c, P, reverse=False):
    S, N, _ = X.shape
    H = R.shape[-1]
    Wi, Wo, Wf, Wc = np.split(W[0], 4)
    Ri, Ro, Rf, Rc = np.split(R[0], 4)
    Wb, Rb = np.split(B[0], 2)
    Pi, Po, Pf = np.split(P[0], 3)
    Y = np.zeros((S, 1, N, H))
    Yh = np.zeros((1, N, H))
    Yc = np.zeros((1, N, H))
    for n in range(N):
        h, c = initial_h[0, n].astype(np.float64), initial_c[0, n].astype(np.float64)
        steps = range(S - 1, -1, -1) if reverse else range(S)
        for t in steps:
            x = X[t, n]
            i = _sig(x @ Wi.T + h @ Ri.T + Pi * c + Wb[:H] + Rb[:H])
            f = _sig(x @ Wf.T + h @ Rf.T + Pf * c + Wb[2 * H:3 * H] + Rb[2 * H:3 * H])
            ct = np.tanh(x @ Wc.T + h @ Rc.T + Wb[3 * H:] + Rb[3 * H:])
            c = f * c + i * ct
            o = _sig(x @ Wo.T + h @ Ro.T + Po * c + Wb[H:2 * H] + Rb[H:2 * H])
            h = o * np.tanh(c)
            Y[t, 0, n] = h
        Yh[0, n], Yc[0, n] = h, c
    return Y, Yh, Yc


@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.float16, ml_dtypes.bfloat16])
def test_lstm_against_plain_loop_every_dtype(dtype, reverse):
    rng = np.random.default_rng(3)
    X, W, R, B, _, ih, ic, P = make_case(rng, "LSTM", peep=True, dtype=np.float64)
    cast = [a.astype(dtype) for a in (X, W, R, B, ih, ic, P)]
    Y, Yh, Yc = lstm(cast[0], cast[1], cast[2], cast[3], None, cast[4], cast[5], cast[6],
                     hidden_size=6, direction="reverse" if reverse else "forward")
    ref = loop_lstm(*[a.astype(np.float64) for a in cast], reverse=reverse)
    tol = {np.float64: 1e-12, np.float32: 1e-5, np.float16: 3e-3, ml_dtypes.bfloat16: 3e-2}[dtype]
    for got, exp in zip((Y, Yh, Yc), ref):
        assert got.dtype == np.dtype(dtype) and got.shape == exp.shape
        np.testing.assert_allclose(got.astype(np.float64), exp, rtol=tol, atol=tol * 5)


@pytest.mark.parametrize("direction", ["forward", "reverse", "bidirectional"])
@pytest.mark.parametrize("N,H", [(1, 6), (2, 128), (9, 5)])
def test_lstm_compiled_recurrence_against_plain_loop(direction, N, H, monkeypatch):
    """float32 LSTMs of the common configuration run their time steps in one compiled call
    (R's rows four at a time below a batch of 8, BLAS from 8);
    checked against the float64 loop, with inputs large enough to saturate the gates."""
    from onnxrt import native as _jit; from onnxrt.native import loops as _jit_kernels

    if _jit.kernels() is None:
        pytest.skip("numba is not installed")
    calls = []
    real = _jit_kernels.lstm_default
    monkeypatch.setattr(_jit_kernels, "lstm_default", lambda *a: calls.append(1) or real(*a))
    rng = np.random.default_rng(H)
    X, W, R, B, _, ih, ic, _ = make_case(rng, "LSTM", S=7, N=N, I=5, H=H, direction=direction, dtype=np.float64)
    X *= 4  # sigmoid and tanh near 0 and 1 as well as in between
    X[2, 0, 0] = 40.0
    R /= np.sqrt(H)
    f32 = [a.astype(np.float32) for a in (X, W, R, B, ih, ic)]
    saved = [a.copy() for a in f32]
    from onnxrt.fastpaths.rnn import lstm_steps  # the fast path's compiled steps

    Y, Yh, Yc = lstm(f32[0], f32[1], f32[2], f32[3], None, f32[4], f32[5], hidden_size=H, direction=direction,
                     lstm_steps=lstm_steps)
    assert len(calls) == (2 if direction == "bidirectional" else 1)
    for got in (Y, Yh, Yc):
        assert got.dtype == np.float32
    x64, w64, r64, b64, h64, c64 = (a.astype(np.float64) for a in f32)
    for d in range(Y.shape[1]):
        reverse = direction == "reverse" or d == 1
        ref = loop_lstm(x64, w64[d:d + 1], r64[d:d + 1], b64[d:d + 1], h64[d:d + 1], c64[d:d + 1],
                        np.zeros((1, 3 * H)), reverse=reverse)
        for got, exp in zip((Y[:, d:d + 1], Yh[d:d + 1], Yc[d:d + 1]), ref):
            assert got.shape == exp.shape
            np.testing.assert_allclose(got, exp, rtol=1e-5, atol=2e-6)
    for a, before in zip(f32, saved):
        np.testing.assert_array_equal(a, before)


def loop_gru(X, W, R, B, h0, lbr):
    S, N, _ = X.shape
    H = R.shape[-1]
    Wz, Wr, Wh = np.split(W[0], 3)
    Rz, Rr, Rh = np.split(R[0], 3)
    Wbz, Wbr, Wbh, Rbz, Rbr, Rbh = np.split(B[0], 6)
    Y = np.zeros((S, 1, N, H))
    h = h0[0].astype(np.float64)
    for t in range(S):
        x = X[t]
        z = _sig(x @ Wz.T + h @ Rz.T + Wbz + Rbz)
        r = _sig(x @ Wr.T + h @ Rr.T + Wbr + Rbr)
        if lbr:
            ht = np.tanh(x @ Wh.T + r * (h @ Rh.T + Rbh) + Wbh)
        else:
            ht = np.tanh(x @ Wh.T + (r * h) @ Rh.T + Rbh + Wbh)
        h = (1 - z) * ht + z * h
        Y[t, 0] = h
    return Y, h[None]


@pytest.mark.parametrize("lbr", [0, 1])
def test_gru_against_plain_loop_double(lbr):
    rng = np.random.default_rng(11)
    X, W, R, B, _, h0 = make_case(rng, "GRU", dtype=np.float64)
    Y, Yh = gru(X, W, R, B, None, h0, linear_before_reset=lbr)
    eY, eYh = loop_gru(X, W, R, B, h0, lbr)
    assert Y.dtype == np.float64 and Y.shape == (5, 1, 3, 6) and Yh.shape == (1, 3, 6)
    np.testing.assert_allclose(Y, eY, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(Yh, eYh, rtol=1e-12, atol=1e-12)


def test_rnn_spec_equation_and_sequence_lens_semantics():
    rng = np.random.default_rng(5)
    X, W, R, B, _, h0 = make_case(rng, "RNN", dtype=np.float64)
    lens = np.array([5, 2, 0], np.int32)
    Y, Yh = rnn(X, W, R, B, lens, h0)
    Wb, Rb = np.split(B[0], 2)
    h = h0[0].copy()
    for t in range(2):
        h = np.tanh(X[t] @ W[0].T + h @ R[0].T + Wb + Rb)
    np.testing.assert_allclose(Y[1, 0, 1], h[1])
    np.testing.assert_allclose(Yh[0, 1], h[1])
    # past a sequence's length: zero outputs; an empty sequence has a zero final state
    assert np.all(Y[2:, 0, 1] == 0) and np.all(Y[:, 0, 2] == 0) and np.all(Yh[0, 2] == 0)


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
@pytest.mark.parametrize("direction", ["forward", "bidirectional"])
def test_layout_1_is_the_batch_major_transpose(cell, direction):
    rng = np.random.default_rng(2)
    ins = make_case(rng, cell, direction=direction, lens=[4, 5, 2])
    ref = recurrent(cell, *ins, direction=direction)
    X = ins[0].transpose(1, 0, 2)
    states = [None if a is None else a.transpose(1, 0, 2) for a in ins[5:7]]
    got = recurrent(cell, X, *ins[1:5], *states, *ins[7:], direction=direction, layout=1)
    np.testing.assert_array_equal(got[0], ref[0].transpose(2, 0, 1, 3))
    for g, r in zip(got[1:], ref[1:]):
        np.testing.assert_array_equal(g, r.transpose(1, 0, 2))
    assert got[0].flags.c_contiguous


@pytest.mark.parametrize("cell", ["RNN", "GRU", "LSTM"])
def test_empty_sequence_and_batch(cell):
    G = N_GATES[cell]
    f = np.float32
    res = recurrent(cell, np.zeros((0, 2, 3), f), np.ones((1, G * 4, 3), f), np.ones((1, G * 4, 4), f),
                    initial_h=np.full((1, 2, 4), 0.5, f))
    assert res[0].shape == (0, 1, 2, 4)
    np.testing.assert_array_equal(res[1], np.full((1, 2, 4), 0.5, f))  # no step: the initial state
    res = recurrent(cell, np.zeros((3, 0, 3), f), np.ones((1, G * 4, 3), f), np.ones((1, G * 4, 4), f))
    assert res[0].shape == (3, 1, 0, 4) and all(r.shape == (1, 0, 4) for r in res[1:])


def test_inputs_are_not_modified():
    rng = np.random.default_rng(4)
    ins = make_case(rng, "LSTM", peep=True, lens=[5, 3, 1])
    copies = [None if a is None else a.copy() for a in ins]
    for a in ins:
        if a is not None:
            a.flags.writeable = False
    lstm(*ins)
    for a, b in zip(ins, copies):
        if a is not None:
            np.testing.assert_array_equal(a, b)


def test_older_versions_through_the_engine():
    rng = np.random.default_rng(9)
    ins = make_case(rng, "GRU")
    # GRU-1: no linear_before_reset, default direction spelled 'foward' in the schema
    model, feeds = _model("GRU", ins, dict(hidden_size=6), 2, opset=1)
    model.ir_version = 3
    got = onnxrt.InferenceSession(model).run(None, feeds)
    ref = gru(*ins)
    np.testing.assert_allclose(got[0], ref[0], rtol=1e-6)
    ins = make_case(rng, "LSTM", peep=True)
    for opset in (1, 7, 14):
        model, feeds = _model("LSTM", ins, dict(hidden_size=6), 3, opset=opset)
        model.ir_version = 3 if opset < 8 else 7
        got = onnxrt.InferenceSession(model).run(None, feeds)
        ref = lstm(*ins)
        for g, r in zip(got, ref):
            np.testing.assert_allclose(g, r, rtol=1e-6)


def test_activation_parameters_are_consumed_in_order():
    (acts,) = parse_activations(["LeakyRelu", "Tanh", "HardSigmoid"], [0.1, 0.2], [0.3], "LSTM", 1)
    assert [(a[1], a[2]) for a in acts] == [(0.1, 0.0), (0.0, 0.0), (0.2, 0.3)]
    (acts,) = parse_activations(["Elu", "Tanh", "ThresholdedRelu"], None, None, "LSTM", 1)
    assert [a[1] for a in acts] == [1.0, 0.0, 1.0]


def test_errors():
    rng = np.random.default_rng(0)
    X, W, R, B, _, h0 = make_case(rng, "GRU")
    with pytest.raises(InvalidAttributeError, match="direction must be one of"):
        gru(X, W, R, direction="sideways")
    with pytest.raises(InvalidAttributeError, match="activation 'Swish' is not one of"):
        gru(X, W, R, activations=["Sigmoid", "Swish"])
    with pytest.raises(InvalidAttributeError, match="expects 4 activations"):
        gru(X, W, R, direction="bidirectional", activations=["Sigmoid", "Tanh"])
    with pytest.raises(KernelError, match=r"W must have shape \[1, 18, 4\], got \[1, 18, 5\]"):
        gru(X, np.zeros((1, 18, 5), np.float32), R)
    with pytest.raises(KernelError, match="hidden_size is 7"):
        gru(X, W, R, hidden_size=7)
    with pytest.raises(KernelError, match=r"sequence_lens holds 9, expected values in \[0, 5\]"):
        gru(X, W, R, B, np.array([1, 9, 2], np.int32))
    with pytest.raises(KernelError, match=r"initial_h must have shape \[1, 3, 6\]"):
        gru(X, W, R, B, None, h0[:, :2])
    node = helper.make_node("LSTM", ["X", "W", "R"], ["Y"], hidden_size=6, direction="up")
    from onnxrt.ops_cpu.op_rnn import LSTM

    with pytest.raises(InvalidAttributeError, match="attribute 'direction' is 'up'"):
        LSTM(node)
