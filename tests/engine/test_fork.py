"""Fork safety: os.fork() while another thread runs a BLAS-heavy model neither deadlocks the
parent nor the child, and the child runs the model correctly (onnxrt.parallel's at-fork
handlers; native.blas and native.team reset their state in the child)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux") or not hasattr(os, "fork"),
                                reason="os.fork on Linux")

_SCRIPT = r"""
import json, os, sys, threading, time
import numpy as np
from onnx import TensorProto, helper, numpy_helper
import onnxrt

rng = np.random.default_rng(0)
n = 384
w = (rng.standard_normal((32, 32, 3, 3)) / 10).astype(np.float32)
b = rng.standard_normal((n, n))
nodes = [helper.make_node("Conv", ["X", "W"], ["Y"], pads=[1, 1, 1, 1]),
         helper.make_node("MatMul", ["A", "B"], ["Z"]),     # float64: BLAS's own threads
         helper.make_node("MatMul", ["A32", "B32"], ["Z32"])]  # float32: the team's blocks
g = helper.make_graph(nodes, "g",
    [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, 32, 56, 56]),
     helper.make_tensor_value_info("A", TensorProto.DOUBLE, [n, n]),
     helper.make_tensor_value_info("A32", TensorProto.FLOAT, [n, n])],
    [helper.make_tensor_value_info(v, t, None) for v, t in (("Y", TensorProto.FLOAT), ("Z", TensorProto.DOUBLE),
                                                            ("Z32", TensorProto.FLOAT))],
    [numpy_helper.from_array(w, "W"), numpy_helper.from_array(b, "B"),
     numpy_helper.from_array(b.astype(np.float32), "B32")])
model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()
sess = onnxrt.InferenceSession(model)
feeds = {"X": rng.standard_normal((1, 32, 56, 56)).astype(np.float32), "A": rng.standard_normal((n, n))}
feeds["A32"] = feeds["A"].astype(np.float32)
expected = sess.run(None, feeds)
exact_z = feeds["A"] @ b
# float32 sums of K terms in any order: K * eps * sum |terms|
bound32 = n * np.finfo(np.float32).eps * (np.abs(feeds["A"]) @ np.abs(b))
conv_tol = 32 * 9 * np.finfo(np.float32).eps * 4 * float(np.abs(expected[0]).max() + 1)


def correct(out):
    y, z, z32 = out
    return (y.shape == (1, 32, 56, 56) and y.dtype == np.float32 and z.dtype == np.float64
            and z32.dtype == np.float32 and np.allclose(z, exact_z, rtol=1e-10, atol=1e-9)
            and bool(np.all(np.abs(z32 - exact_z) <= 2 * bound32 + 1e-6))
            and float(np.abs(y - expected[0]).max()) <= conv_tol)


assert correct(expected)
runs = [0]
bad = []
stop = threading.Event()


def loop():
    while not stop.is_set():
        out = sess.run(None, feeds)
        if not correct(out):
            bad.append(runs[0])
        runs[0] += 1


t = threading.Thread(target=loop, daemon=True)
t.start()
children = []
for i in range(int(sys.argv[1])):
    seen = runs[0]
    while runs[0] == seen:  # a run in flight on the other thread
        time.sleep(0.001)
    time.sleep(0.002 * (i % 4))
    pid = os.fork()
    if pid == 0:
        code = 1
        try:
            out = sess.run(None, feeds)
            out2 = onnxrt.InferenceSession(model).run(None, feeds)  # a new session in the child too
            code = 0 if correct(out) and correct(out2) else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    children.append(os.waitstatus_to_exitcode(status))
stop.set()
t.join(30)
print(json.dumps({"children": children, "runs": runs[0], "bad": bad, "alive": t.is_alive()}))
"""


def test_fork_while_another_thread_runs_a_model():
    forks = 6
    env = {k: v for k, v in os.environ.items() if k != "OPENBLAS_NUM_THREADS"}
    try:
        out = subprocess.run([sys.executable, "-c", _SCRIPT, str(forks)], capture_output=True, text=True, timeout=240,
                             env=env)
    except subprocess.TimeoutExpired as e:  # a deadlock in the parent or a child
        pytest.fail(f"fork deadlocked: {e.stderr!r}")
    assert out.returncode == 0, out.stderr
    state = json.loads(out.stdout.strip().splitlines()[-1])
    assert state["children"] == [0] * forks
    assert state["bad"] == [] and not state["alive"] and state["runs"] >= forks
