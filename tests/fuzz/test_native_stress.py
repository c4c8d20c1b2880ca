"""Native-kernel stress: the fast paths of Conv (Winograd, bands, depthwise, grouped, 1x1), pooling,
Attention and the RNNs against their reference kernels, over random geometries, under the
argument-layout debug mode (onnxrt.native.layout.DEBUG: every team call's block is checked).

Each case builds one model with onnx.helper and runs it in two sessions: fast paths on
(with 1 or 2 threads, the input declared with its shape or without one, fed C-contiguous or
as a strided view) and fast paths off (``SessionOptions.fast_paths = False``: the numpy
reference kernels, one thread). Results must agree within a bound derived from the
arithmetic (below). CI runs a bounded number of cases; ``pytest -m stress`` runs many more
(``ONNXRT_STRESS_CASES`` sets how many per family).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from onnxrt.native import layout

EPS32 = float(np.finfo(np.float32).eps)
#: cases per family: a few in every run, many with -m stress
QUICK = 6
LONG = int(os.environ.get("ONNXRT_STRESS_CASES", "150"))


@pytest.fixture(autouse=True)
def _debug_native(monkeypatch):
    monkeypatch.setattr(layout, "DEBUG", True)


def _model(node, inputs, out_name="Y", opset=23):
    graph = helper.make_graph([node], "stress", inputs, [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _inp(name, shape, typed):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, list(shape) if typed else None)


def _sessions(model, threads):
    fast = onnxrt.SessionOptions()
    fast.intra_op_num_threads = threads
    ref = onnxrt.SessionOptions()
    ref.fast_paths = False
    ref.intra_op_num_threads = 1
    return onnxrt.OnnxInference(model, options=fast), onnxrt.OnnxInference(model, options=ref)


def _strided(rng, shape, contiguous):
    """A float32 array of ``shape``: C-contiguous, or a view at a stride of 2 in its last axis."""
    if contiguous:
        return rng.standard_normal(shape).astype(np.float32)
    wide = rng.standard_normal(tuple(shape[:-1]) + (2 * shape[-1],)).astype(np.float32)
    return wide[..., ::2]


def _check(fast, ref, feeds, tol):
    for _ in range(2):  # the first run may take other paths than the later ones (prepared executors)
        got = fast.run(feeds)["Y"]
    want = ref.run(feeds)["Y"]
    assert got.shape == want.shape and got.dtype == want.dtype == np.float32
    err = np.abs(got.astype(np.float64) - want.astype(np.float64))
    assert np.all(err <= tol), f"max error {err.max():.3g} above the bound (max {np.max(tol):.3g})"
    return {r["path"] for r in fast.fast_paths()}


# -- Conv ------------------------------------------------------------------------------------

def _conv_case(rng):
    kind = rng.choice(["winograd", "bands", "depthwise", "grouped", "pointwise", "any"])
    n = int(rng.integers(1, 3))
    c = int(rng.choice([3, 4, 8, 16, 32]))
    k = 3 if kind in ("winograd", "bands", "depthwise") else int(rng.choice([1, 3, 5]))
    if kind == "pointwise":
        k = 1
    group = {"depthwise": c, "grouped": next(g for g in (4, 2, 1) if c % g == 0)}.get(kind, 1)
    m = c if kind == "depthwise" else int(rng.choice([4, 8, 16, 32])) * group
    stride = 1 if kind in ("winograd", "pointwise") else int(rng.choice([1, 2]))
    dil = 1 if kind in ("winograd", "bands", "pointwise") else int(rng.choice([1, 2]))
    hw = int(rng.integers(k * dil, 40)) if kind != "bands" else int(rng.integers(48, 72))
    pad = int(rng.integers(0, k))
    return dict(n=n, c=c, m=m, k=k, group=group, stride=stride, dil=dil, hw=hw, pad=pad, bias=bool(rng.integers(0, 2)))


def _run_conv(seed):
    rng = np.random.default_rng(seed)
    p = _conv_case(rng)
    typed, contiguous, threads = bool(rng.integers(0, 2)), bool(rng.integers(0, 2)), int(rng.choice([1, 2]))
    xs = (p["n"], p["c"], p["hw"], p["hw"])
    ws = (p["m"], p["c"] // p["group"], p["k"], p["k"])
    inputs = [_inp("X", xs, typed)]
    names = ["X", "W"] + (["B"] if p["bias"] else [])
    w = rng.standard_normal(ws).astype(np.float32) / np.sqrt(ws[1] * ws[2] * ws[3])
    b = rng.standard_normal(p["m"]).astype(np.float32)
    inits = [helper.make_tensor("W", TensorProto.FLOAT, ws, w.ravel())]
    if p["bias"]:
        inits.append(helper.make_tensor("B", TensorProto.FLOAT, [p["m"]], b))
    node = helper.make_node("Conv", names, ["Y"], group=p["group"], strides=[p["stride"]] * 2,
                            dilations=[p["dil"]] * 2, pads=[p["pad"]] * 4, kernel_shape=[p["k"]] * 2)
    model = _model(node, inputs)
    model.graph.initializer.extend(inits)
    fast, ref = _sessions(model, threads)
    x = _strided(rng, xs, contiguous)
    # |error| <= (K + 2) u sum|x||w| + |b| u for a sum of K products (u the unit roundoff), on
    # either side; Winograd F(2x2, 3x3) adds its transforms' rounding: a factor of 8 covers
    # the growth of its 4x4 input and output transforms (entries of magnitude <= 2)
    absmodel = _model(helper.make_node("Conv", ["X", "W"], ["Y"], group=p["group"], strides=[p["stride"]] * 2,
                                       dilations=[p["dil"]] * 2, pads=[p["pad"]] * 4, kernel_shape=[p["k"]] * 2),
                      [_inp("X", xs, True)])
    absmodel.graph.initializer.append(helper.make_tensor("W", TensorProto.FLOAT, ws, np.abs(w).ravel()))
    s = onnxrt.OnnxInference(absmodel, options=ref.options).run({"X": np.abs(x)})["Y"].astype(np.float64)
    k_terms = ws[1] * ws[2] * ws[3]
    tol = 2 * 8 * (k_terms + 2) * EPS32 * (s + (np.abs(b).max() if p["bias"] else 0.0)) + 1e-30
    paths = _check(fast, ref, {"X": x}, tol)
    return p, paths


# -- pooling ---------------------------------------------------------------------------------

def _run_pool(seed):
    rng = np.random.default_rng(seed)
    op = str(rng.choice(["MaxPool", "AveragePool"]))
    k = int(rng.choice([2, 3, 5]))
    stride = int(rng.choice([1, 2]))
    dil = int(rng.choice([1, 2])) if op == "MaxPool" else 1
    pad = int(rng.integers(0, k // 2 + 1))
    hw = int(rng.integers(k * dil + 1, 64))
    c = int(rng.choice([1, 8, 32, 64]))
    xs = (int(rng.integers(1, 3)), c, hw, hw)
    typed, contiguous, threads = bool(rng.integers(0, 2)), bool(rng.integers(0, 2)), int(rng.choice([1, 2]))
    attrs = dict(kernel_shape=[k, k], strides=[stride, stride], pads=[pad] * 4, ceil_mode=int(rng.integers(0, 2)))
    if op == "MaxPool":
        attrs["dilations"] = [dil, dil]
    else:
        attrs["count_include_pad"] = int(rng.integers(0, 2))
    model = _model(helper.make_node(op, ["X"], ["Y"], **attrs), [_inp("X", xs, typed)], opset=22)
    fast, ref = _sessions(model, threads)
    x = _strided(rng, xs, contiguous)
    # a maximum is exact; an average of at most k*k terms: (k*k + 2) u max|x|
    tol = 0.0 if op == "MaxPool" else (k * k + 2) * EPS32 * float(np.abs(x).max())
    return (op, attrs), _check(fast, ref, {"X": x}, tol)


# -- Attention -------------------------------------------------------------------------------

def _run_attention(seed):
    rng = np.random.default_rng(seed)
    b, h, sq, skv, d = int(rng.integers(1, 3)), int(rng.choice([1, 2, 4])), int(rng.integers(1, 64)), \
        int(rng.integers(1, 96)), int(rng.choice([8, 16, 32, 64]))
    causal = int(rng.integers(0, 2))
    typed, contiguous, threads = bool(rng.integers(0, 2)), bool(rng.integers(0, 2)), int(rng.choice([1, 2]))
    shapes = {"Q": (b, h, sq, d), "K": (b, h, skv, d), "V": (b, h, skv, d)}
    model = _model(helper.make_node("Attention", ["Q", "K", "V"], ["Y"], is_causal=causal),
                   [_inp(n, s, typed) for n, s in shapes.items()])
    fast, ref = _sessions(model, threads)
    feeds = {n: _strided(rng, s, contiguous) for n, s in shapes.items()}
    # scores: d products each, (d + 2) u |q||k| d; softmax's exp and sum add ~(skv + 4) u
    # relative to each probability; the weighted sum of skv values (skv + 2) u max|v|. The
    # scores' error e moves the probabilities by at most 2e relatively.
    qk = d * float(np.abs(feeds["Q"]).max()) * float(np.abs(feeds["K"]).max()) / np.sqrt(d)
    vmax = float(np.abs(feeds["V"]).max())
    tol = (2 * (d + 2) * EPS32 * qk + (2 * skv + 8) * EPS32) * vmax * 4
    return (b, h, sq, skv, d, causal), _check(fast, ref, feeds, tol)


# -- RNNs ------------------------------------------------------------------------------------

def _run_rnn(seed):
    rng = np.random.default_rng(seed)
    op = str(rng.choice(["LSTM", "GRU", "RNN"]))
    gates = {"LSTM": 4, "GRU": 3, "RNN": 1}[op]
    t, batch, inp, hid = int(rng.integers(1, 24)), int(rng.integers(1, 4)), int(rng.choice([4, 16, 64])), \
        int(rng.choice([8, 32, 128]))
    direction = str(rng.choice(["forward", "reverse", "bidirectional"]))
    dirs = 2 if direction == "bidirectional" else 1
    typed, contiguous, threads = bool(rng.integers(0, 2)), bool(rng.integers(0, 2)), int(rng.choice([1, 2]))
    scale = 1 / np.sqrt(hid)
    w = (rng.standard_normal((dirs, gates * hid, inp)) * scale).astype(np.float32)
    r = (rng.standard_normal((dirs, gates * hid, hid)) * scale).astype(np.float32)
    bias = (rng.standard_normal((dirs, 2 * gates * hid)) * 0.1).astype(np.float32)
    node = helper.make_node(op, ["X", "W", "R", "B"], ["Y"], hidden_size=hid, direction=direction)
    model = _model(node, [_inp("X", (t, batch, inp), typed)], opset=22)
    model.graph.initializer.extend([helper.make_tensor("W", TensorProto.FLOAT, w.shape, w.ravel()),
                                    helper.make_tensor("R", TensorProto.FLOAT, r.shape, r.ravel()),
                                    helper.make_tensor("B", TensorProto.FLOAT, bias.shape, bias.ravel())])
    fast, ref = _sessions(model, threads)
    x = _strided(rng, (t, batch, inp), contiguous)
    # each step's gates sum inp + hid products of magnitude <= |x| |w| (or |h| <= 1 times |r|):
    # (inp + hid + 4) u per step, squashed by activations of slope <= 1 and carried through the
    # cell state for at most t steps
    per_step = (inp + hid + 4) * EPS32 * (float(np.abs(x).max()) * inp * scale * 3 + hid * scale * 3 + 1)
    tol = 4 * t * per_step
    return (op, t, batch, inp, hid, direction), _check(fast, ref, {"X": x}, tol)


FAMILIES = {"conv": _run_conv, "pool": _run_pool, "attention": _run_attention, "rnn": _run_rnn}


@pytest.mark.parametrize("family", sorted(FAMILIES))
@pytest.mark.parametrize("seed", range(QUICK))
def test_native_paths_agree_with_the_reference(family, seed):
    FAMILIES[family](1000 * (1 + sorted(FAMILIES).index(family)) + seed)


def test_the_stress_cases_reach_the_native_conv_paths():
    """The generator is not vacuous: its conv cases take several compiled paths."""
    seen = set()
    for seed in range(QUICK * 4):
        seen |= _run_conv(50_000 + seed)[1]
    assert len(seen - {"reference"}) >= 3, seen


@pytest.mark.stress
@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_native_paths_stress(family):
    for seed in range(LONG):
        FAMILIES[family](10_000_000 + 100_000 * sorted(FAMILIES).index(family) + seed)
