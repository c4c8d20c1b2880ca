"""The execution context a session owns (onnxrt.context): each session keeps its own thread
cap under concurrent runs, and importing onnxrt or building a session changes nothing of
the process (tuning is opt-in: onnxrt.tune_process)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from numpy.lib.stride_tricks import sliding_window_view
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt import native, parallel
from onnxrt.context import ExecutionContext

from ..helpers import run_in_threads

EPS32 = float(np.finfo(np.float32).eps)
C, HW, N = 32, 56, 256


def _model() -> bytes:
    """Conv 3x3 32->32 on 56x56 (pads 1) and a 256x256 MatMul: large enough for the team,
    the pool and BLAS's threads."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((C, C, 3, 3)) / 10).astype(np.float32)
    b = rng.standard_normal((N, N)).astype(np.float32)
    nodes = [helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1]),
             helper.make_node("MatMul", ["A", "B"], ["Z"])]
    g = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, C, HW, HW]),
         helper.make_tensor_value_info("A", TensorProto.FLOAT, [N, N])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None), helper.make_tensor_value_info("Z", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B")],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _weights(model: bytes) -> tuple[np.ndarray, np.ndarray]:
    import onnx

    m = onnx.load_from_string(model)
    inits = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
    return inits["W"], inits["B"]


def _conv64(x: np.ndarray, w: np.ndarray) -> np.ndarray:
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    win = sliding_window_view(xp, (3, 3), axis=(2, 3))  # (1, C, HW, HW, 3, 3)
    return np.einsum("nchwij,ocij->nohw", win, w.astype(np.float64))


def _bounds(feeds: dict, w: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Exact (float64) results and the float32 rounding bound of any summation order:
    K * eps * sum |terms| for K terms (K = 288 for the convolution, 256 for the product)."""
    x, a = feeds["X"], feeds["A"]
    y, z = _conv64(x, w), a.astype(np.float64) @ b.astype(np.float64)
    by = C * 9 * EPS32 * _conv64(np.abs(x), np.abs(w))
    bz = N * EPS32 * (np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64))
    return y, z, by + 1e-30, bz + 1e-30


def _options(threads: int) -> onnxrt.SessionOptions:
    so = onnxrt.SessionOptions()
    so.intra_op_num_threads = threads
    return so


def test_two_sessions_keep_their_own_thread_cap_under_eight_threads():
    """Sessions capped at 1 and 2 threads, run from 8 threads at once (4 each): inside every
    run a kernel sees its own session's cap, each context's peak stays at its cap (and
    the 2-thread one uses 2 threads where the process has them), and every output agrees
    with the single-threaded run and with float64 within the float32 bound of its sums."""
    model = _model()
    w, b = _weights(model)
    rng = np.random.default_rng(1)
    feeds = [{"X": rng.standard_normal((1, C, HW, HW)).astype(np.float32),
              "A": rng.standard_normal((N, N)).astype(np.float32)} for _ in range(4)]
    alone = onnxrt.InferenceSession(model, _options(1))
    expected = [alone.run(None, f) for f in feeds]
    for f, (y, z) in zip(feeds, expected):
        y64, z64, by, bz = _bounds(f, w, b)
        assert y.shape == (1, C, HW, HW) and y.dtype == np.float32 and z.shape == (N, N) and z.dtype == np.float32
        assert np.all(np.abs(y - y64) <= by) and np.all(np.abs(z - z64) <= bz)

    sessions = {1: onnxrt.InferenceSession(model, _options(1)), 2: onnxrt.InferenceSession(model, _options(2))}
    for s in sessions.values():
        s.run(None, feeds[0])  # the first run (numpy paths) out of the way
    contexts = {t: s._engine._context for t, s in sessions.items()}
    assert all(type(c) is ExecutionContext and c.threads == t for t, c in contexts.items())
    for c in contexts.values():
        c.reset_peak()
    seen: dict[int, set] = {1: set(), 2: set()}
    lock = threading.Lock()
    results: list[tuple[int, int, list]] = []

    def worker(i: int) -> None:
        cap = 1 + i % 2
        sess = sessions[cap]

        def probe(step, args, res, dt):  # in the running thread, between kernels
            with lock:
                seen[cap].add(parallel.current_threads())

        for k in range(6):
            j = (i + k) % len(feeds)
            if k % 2:
                out = sess._engine.run(feeds[j], trace=probe)
                got = [out["Y"], out["Z"]]
            else:
                got = sess.run(None, feeds[j])
            with lock:
                results.append((cap, j, got))

    assert run_in_threads(worker, 8) == []
    assert len(results) == 48
    kernel_threads = parallel.KERNEL_THREADS
    assert seen[1] == {1} and seen[2] == {min(2, kernel_threads)}
    assert contexts[1].peak_threads == 1
    assert contexts[2].peak_threads == min(2, kernel_threads)
    for cap, j, (y, z) in results:
        ey, ez = expected[j]
        _, _, by, bz = _bounds(feeds[j], w, b)
        assert y.shape == ey.shape and y.dtype == np.float32 and z.shape == ez.shape and z.dtype == np.float32
        # both within the bound of the exact value: at most twice the bound apart
        assert np.all(np.abs(y - ey) <= 2 * by), cap
        assert np.all(np.abs(z - ez) <= 2 * bz), cap


def test_context_from_options():
    assert ExecutionContext.from_options(None).threads is None
    assert ExecutionContext.from_options(_options(0)).threads is None
    assert ExecutionContext.from_options(_options(3)).threads == 3
    with pytest.raises(ValueError):
        ExecutionContext("many")  # type: ignore[arg-type]


def test_scratch_buffers_belong_to_the_session():
    """Inside a run, scratch buffers come from the running session's context (per thread):
    two sessions never share one, and outside a run the thread's own are used."""
    a, b = ExecutionContext(), ExecutionContext()
    with parallel.RunScope(a):
        ba = parallel.scratch("t", (4, 4), np.float32)
        assert a.buffers()[("t", np.dtype(np.float32))].ctypes.data == ba.ctypes.data
    with parallel.RunScope(b):
        bb = parallel.scratch("t", (4, 4), np.float32)
    assert not np.shares_memory(ba, bb)
    bo = parallel.scratch("t", (4, 4), np.float32)
    assert not np.shares_memory(bo, ba) and not np.shares_memory(bo, bb)
    assert bo.shape == (4, 4) and bo.dtype == np.float32


def test_pool_workers_take_the_callers_cap_and_context():
    """A pool loop's chunks, on whichever thread, see the caller's cap and scope."""
    ctx = ExecutionContext(2)
    got = []
    lock = threading.Lock()

    def chunk(lo: int, hi: int) -> None:
        with lock:
            got.append((parallel.current_threads(), parallel._TLS.scope.context is ctx, parallel._TLS.in_loop))

    with parallel.RunScope(ctx, eager=True):
        parallel.parallel_for(8, chunk, work_per_item=parallel.MIN_PARALLEL_WORK)
    assert got and all(t == min(2, parallel.KERNEL_THREADS) and same and in_loop for t, same, in_loop in got)
    assert ctx.peak_threads == min(2, parallel.KERNEL_THREADS)
    assert parallel._TLS.scope is None and parallel._TLS.threads is None


def test_disabled_switches_only_the_calling_thread():
    """native.disabled() is thread-local: another thread keeps the compiled paths meanwhile."""
    if not native.ENABLED:
        pytest.skip("compiled kernels disabled by the environment")
    inside = threading.Event()
    done = threading.Event()
    other: list[bool] = []

    def elsewhere() -> None:
        inside.wait(5)
        other.append(native.active())
        done.set()

    t = threading.Thread(target=elsewhere)
    t.start()
    with native.disabled():
        assert not native.active() and native.kernels() is None
        inside.set()
        assert done.wait(5)
    t.join()
    assert other == [True] and native.active()


def test_blas_arbiter_runs_the_smallest_wish_in_flight():
    """A boost asked for while another block holds BLAS at one thread stays at one thread;
    alone it is granted; the last block out restores the library's own count."""
    from onnxrt.native import blas

    def count() -> int:  # the libraries' own answer (those numpy loaded, which the arbiter manages)
        return max(get() for get, _ in blas._blas_libs())

    if not blas._blas_libs():
        pytest.skip("no BLAS library found")
    own = count()
    blas._blas_enter(1)
    blas._blas_enter(1)  # another session's run holding one thread
    assert count() == 1 and blas._blas_boost(1, 2) == 1 and count() == 1
    assert blas._blas_boost(2, 1) == 1
    blas._blas_exit(1)
    assert blas._blas_boost(1, 2) == 2 and count() == 2
    blas._blas_boost(2, 1)
    assert count() == 1
    blas._blas_exit(1)
    assert count() == own and blas._WANTS == {}


_PROBE = r"""
import ctypes, json, os, sys
calls = []
_CDLL = ctypes.CDLL
class Spy(_CDLL):
    def __getattr__(self, name):
        if name == "mallopt":
            calls.append(name)
        return super().__getattr__(name)
ctypes.CDLL = Spy
before = dict(os.environ)
import numpy as np
import onnxrt
from onnxrt import _memory
after_import = dict(os.environ)
sess = onnxrt.InferenceSession(sys.argv[1])
(y,) = sess.run(None, {"X": np.arange(6, dtype=np.float32).reshape(2, 3)})
after_session = dict(os.environ)
state = {"import_env": after_import == before, "session_env": after_session == before,
         "calls_before_opt_in": list(calls), "applied": dict(_memory.APPLIED), "y": y.tolist()}
if len(sys.argv) > 2:
    state["opt_in"] = onnxrt.tune_process(malloc=True, blas_thread_timeout=True)
    state["calls_after_opt_in"] = list(calls)
    state["env_after_opt_in"] = os.environ.get("OPENBLAS_THREAD_TIMEOUT")
print(json.dumps(state))
"""


def _relu_model(path: str) -> None:
    g = helper.make_graph([helper.make_node("Relu", ["X"], ["Y"])], "g",
                          [helper.make_tensor_value_info("X", TensorProto.FLOAT, [2, 3])],
                          [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [2, 3])])
    with open(path, "wb") as f:
        f.write(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString())


def _probe(tmp_path, *extra: str, env: dict | None = None) -> dict:
    path = str(tmp_path / "relu.onnx")
    _relu_model(path)
    base = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_THREAD_TIMEOUT", "ONNXRT_MALLOPT")}
    out = subprocess.run([sys.executable, "-c", _PROBE, path, *extra], env={**base, **(env or {})},
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_import_and_sessions_leave_the_process_alone(tmp_path):
    """import onnxrt and a session's build and run set no environment variable and do not
    touch the allocator (mallopt never looked up); tune_process is the opt-in, and it does
    call mallopt (the spy works) and reports the BLAS timeout as too late after numpy."""
    state = _probe(tmp_path, "opt-in")
    assert state["import_env"] is True and state["session_env"] is True
    assert state["calls_before_opt_in"] == [] and state["applied"] == {}
    assert state["y"] == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]
    if sys.platform.startswith("linux"):
        assert state["opt_in"] == {"malloc": True, "blas_thread_timeout": False}
        assert state["calls_after_opt_in"] == ["mallopt"]
    assert state["env_after_opt_in"] is None  # numpy was loaded: nothing written


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's mallopt")
def test_onnxrt_mallopt_environment_opt_in(tmp_path):
    """ONNXRT_MALLOPT=1 in the environment tunes the allocator when the first session is built."""
    state = _probe(tmp_path, env={"ONNXRT_MALLOPT": "1"})
    assert state["import_env"] is True and state["session_env"] is True
    assert state["calls_before_opt_in"] == ["mallopt"] and state["applied"] == {"malloc": True}
