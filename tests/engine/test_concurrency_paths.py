"""Convolutions on their heavy fast paths (Winograd, bands, depthwise, pointwise groups on the
team, prepared executors) run from several threads at once: one session shared by the
threads, and several sessions with different thread caps side by side. Every output agrees
with a single-threaded run on the reference kernels within float32 rounding of its sums, and
the sessions report (``fast_paths()``) that the heavy paths were taken.

Under concurrency the team serves one caller at a time: the others' team jobs decline and
run on their caller (prepared executors then run their table's unprepared entry), so these
tests cover those fallbacks racing with the team's jobs too.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt import native
from onnxrt.ops_cpu.op_conv import conv

from ..helpers import run_in_threads

F = TensorProto.FLOAT
_EPS = float(np.finfo(np.float32).eps)

pytestmark = pytest.mark.skipif(native.kernels() is None, reason="the heavy paths need the compiled kernels")

#: the model's inputs
INPUTS = {"x1": (1, 64, 28, 28), "x2": (2, 64, 16, 16), "x3": (1, 8, 60, 60), "x4": (1, 16, 30, 30)}

#: output -> (input, W shape, attributes, the path its node takes with fast paths on, Winograd's error factor)
LAYERS = {
    "prep_winograd": ("x1", (48, 64, 3, 3), {"pads": [1] * 4}, "prepared winograd", 16),
    "winograd": ("x2", (40, 64, 3, 3), {"pads": [1] * 4}, "winograd", 16),
    "bands": ("x3", (16, 8, 3, 3), {"pads": [1] * 4}, "bands", 1),
    "prep_depthwise": ("x1", (64, 1, 3, 3), {"group": 64, "pads": [1] * 4}, "prepared depthwise", 1),
    "depthwise": ("x2", (64, 1, 3, 3), {"group": 64, "strides": [2, 2], "pads": [1] * 4}, "depthwise compiled", 1),
    "prep_groups": ("x1", (64, 16, 1, 1), {"group": 4}, "prepared grouped 1x1", 1),
    "groups": ("x2", (64, 16, 1, 1), {"group": 4}, "pointwise groups on the team", 1),
    "prep_1x1": ("x1", (32, 64, 1, 1), {}, "prepared 1x1", 1),
    "prep_im2col": ("x4", (64, 16, 3, 3), {"pads": [1] * 4}, "prepared im2col", 1),
}


def _weights() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(2024)
    return {out: (rng.standard_normal(ws).astype(np.float32) * 0.5, rng.standard_normal(ws[0]).astype(np.float32))
            for out, (_, ws, _, _, _) in LAYERS.items()}


WEIGHTS = _weights()


def _model():
    nodes, inits = [], []
    for out, (inp, _, atts, _, _) in LAYERS.items():
        w, b = WEIGHTS[out]
        inits += [numpy_helper.from_array(w, f"w_{out}"), numpy_helper.from_array(b, f"b_{out}")]
        nodes.append(helper.make_node("Conv", [inp, f"w_{out}", f"b_{out}"], [out], name=out, **atts))
    graph = helper.make_graph(nodes, "heavy", [helper.make_tensor_value_info(n, F, list(s)) for n, s in INPUTS.items()],
                              [helper.make_tensor_value_info(out, F, None) for out in LAYERS], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


MODEL = _model()


def _feeds(seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {n: rng.standard_normal(s).astype(np.float32) for n, s in INPUTS.items()}


def _bounds(feeds: dict[str, np.ndarray]) -> dict[str, float]:
    """Per output, twice the float32 rounding of its sums: K = C/group * prod(kernel) terms,
    each output's error at most K eps sum |x| |w| (+ |b|) per path, Winograd's transforms at
    most 16 times that (4 for the input's, 9/4 for the weights', on sums of depth C)."""
    out = {}
    for name, (inp, ws, atts, _, factor) in LAYERS.items():
        w, b = WEIGHTS[name]
        depth = ws[1] * int(np.prod(ws[2:]))
        scale = conv(np.abs(feeds[inp]).astype(np.float64), np.abs(w).astype(np.float64),
                     np.abs(b).astype(np.float64), **atts)
        out[name] = 2 * factor * (depth + 1) * _EPS * float(scale.max())
    return out


def _reference(seeds) -> dict[int, dict[str, np.ndarray]]:
    """Single-threaded runs on the reference kernels."""
    so = onnxrt.SessionOptions()
    so.fast_paths = False
    so.intra_op_num_threads = 1
    ref = onnxrt.OnnxInference(MODEL, options=so)
    out = {seed: ref.run(_feeds(seed)) for seed in seeds}
    assert ref.fast_paths() == []
    return out


def _check(got: dict[str, np.ndarray], want: dict[str, np.ndarray], bounds: dict[str, float]) -> None:
    for name in LAYERS:
        g, r = got[name], want[name]
        assert g.dtype == np.float32 and g.shape == r.shape, (name, g.dtype, g.shape, r.shape)
        err = float(np.max(np.abs(g.astype(np.float64) - r)))
        assert err <= bounds[name], (name, err, bounds[name])


def _paths(sess: onnxrt.OnnxInference) -> dict[str, set[str]]:
    picked: dict[str, set[str]] = {}
    for row in sess.fast_paths():
        if row["native"]:
            picked.setdefault(row["name"], set()).add(row["path"])
    return picked


#: with one thread no team job has parts: these prepared entries give way to their unprepared entry
_ONE_THREAD = {"prepared depthwise": "depthwise compiled", "prepared grouped 1x1": "pointwise groups on the team",
               "prepared 1x1": "1x1", "prepared im2col": "im2col compiled"}


def _assert_heavy_paths(sess: onnxrt.OnnxInference, one_thread: bool = False) -> None:
    picked = _paths(sess)
    for name, (*_, path, _) in LAYERS.items():
        if one_thread:
            path = _ONE_THREAD.get(path, path)
        assert picked.get(name) == {path}, (name, picked.get(name), path)


def test_one_session_from_six_threads():
    seeds = range(6)
    want = _reference(seeds)
    bounds = {seed: _bounds(_feeds(seed)) for seed in seeds}
    sess = onnxrt.OnnxInference(MODEL)
    sess.run(_feeds(99))  # (the first run: whatever ONNXRT_JIT says, the second has the compiled paths)
    results: dict[tuple[int, int], dict[str, np.ndarray]] = {}

    def worker(i: int) -> None:
        feeds = _feeds(i)
        for k in range(4):
            results[(i, k)] = sess.run(feeds)

    errors = run_in_threads(worker, 6)
    assert not errors, errors
    assert len(results) == 24
    for (seed, _), got in results.items():
        _check(got, want[seed], bounds[seed])
    _assert_heavy_paths(sess)


def test_several_sessions_with_their_own_thread_caps_from_eight_threads():
    """Four sessions of the model (caps 1, 2, none, none) each run from two threads at once;
    their prepared executors and Winograd transforms are their own nodes'."""
    seeds = range(8)
    want = _reference(seeds)
    bounds = {seed: _bounds(_feeds(seed)) for seed in seeds}
    sessions = []
    for cap in (1, 2, 0, 0):
        so = onnxrt.SessionOptions()
        so.intra_op_num_threads = cap
        sess = onnxrt.OnnxInference(MODEL, options=so)
        sess.run(_feeds(99))
        sessions.append(sess)
    results: dict[tuple[int, int], dict[str, np.ndarray]] = {}

    def worker(i: int) -> None:
        sess, feeds = sessions[i % 4], _feeds(i)
        for k in range(3):
            results[(i, k)] = sess.run(feeds)

    errors = run_in_threads(worker, 8)
    assert not errors, errors
    assert len(results) == 24
    for (seed, _), got in results.items():
        _check(got, want[seed], bounds[seed])
    for sess, cap in zip(sessions, (1, 2, 0, 0)):
        _assert_heavy_paths(sess, one_thread=cap == 1)
    # each session's nodes hold their own transform of the same initializer
    transforms = [next(st.op for st in s.plan.steps if st.name == "prep_winograd").weights_cache["winograd"][1]
                  for s in sessions]
    assert len({id(u) for u in transforms}) == 4
    for u in transforms[1:]:
        np.testing.assert_array_equal(u, transforms[0])
