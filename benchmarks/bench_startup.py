"""Cold start: a fresh process imports the runtime, builds a session and runs it once; onnxrt vs onnxruntime.

Usage: python benchmarks/bench_startup.py [--repeat 7] [--models squeezenet,shufflenet]

Each measurement is a new Python process (onnxrt and onnxruntime alternate, each with its
default options), for three jobs: ``import`` alone; import + session + first run of a small
CNN (the light models shipped in the onnx package); import + session + first run of a
two-node graph (MatMul + Add). The time is the child's whole life as the parent sees it
(interpreter start included, the same for both runtimes); the memory is the child's peak
resident set size (``ru_maxrss``). Medians over ``--repeat`` processes per runtime; the
targets of the start-up issue are a time ratio of at most 2 and a memory ratio of at most 1.5.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from _common import markdown_table  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
TIME_TARGET, MEMORY_TARGET = 2.0, 1.5

# The child: imports only the runtime it measures (onnxruntime's never imports onnx), so
# the parent passes the model's path and its input's name and shape.
CHILD = r"""
import json, resource, sys, time
t0 = time.perf_counter()
runtime, path, name, shape = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
if runtime == "onnxrt":
    import onnxrt as rt
else:
    import onnxruntime as rt
t1 = time.perf_counter()
first = None
if path:
    import numpy as np
    sess = rt.InferenceSession(path, providers=["CPUExecutionProvider"])
    t2 = time.perf_counter()
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    sess.run(None, {name: x})
    first = time.perf_counter() - t2
print(json.dumps({"import": t1 - t0, "first_run": first,
                  "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def two_node_model(path: str) -> tuple[str, list[int]]:
    """Y = X @ W + B, X float[8, 64]: the smallest real graph."""
    rng = np.random.default_rng(0)
    w = numpy_helper.from_array(rng.standard_normal((64, 32)).astype(np.float32), "W")
    b = numpy_helper.from_array(rng.standard_normal(32).astype(np.float32), "B")
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["XW"]), helper.make_node("Add", ["XW", "B"], ["Y"])],
        "two_nodes",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [8, 64])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [8, 32])],
        [w, b],
    )
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]), path)
    return "X", [8, 64]


def light_model(name: str) -> tuple[str, str, list[int]]:
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in inits)
    return path, inp.name, [d.dim_value for d in inp.type.tensor_type.shape.dim]


def one_process(runtime: str, path: str, name: str, shape: list[int]) -> dict[str, float]:
    t0 = time.perf_counter()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, runtime, path, name, json.dumps(shape)],
        capture_output=True, text=True, check=False,
    )
    wall = time.perf_counter() - t0
    if out.returncode:
        raise RuntimeError(f"{runtime} child failed:\n{out.stderr[-2000:]}")
    res = json.loads(out.stdout.strip().splitlines()[-1])
    res["wall"] = wall
    return res


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=7, help="fresh processes per runtime and job")
    parser.add_argument("--models", default="squeezenet,shufflenet", help="light CNNs of the onnx package")
    args = parser.parse_args()

    tmp = tempfile.mkdtemp(prefix="onnxrt_startup_")
    two_path = os.path.join(tmp, "two_nodes.onnx")
    two_name, two_shape = two_node_model(two_path)
    jobs: list[tuple[str, str, str, list[int]]] = [("import", "", "", [])]
    for m in [s for s in args.models.split(",") if s]:
        jobs.append((f"{m} (import + session + run)", *light_model(m)))
    jobs.append(("two-node graph (import + session + run)", two_path, two_name, two_shape))

    rows = []
    verdicts = []
    for label, path, name, shape in jobs:
        got: dict[str, list[dict[str, float]]] = {"onnxrt": [], "onnxruntime": []}
        for _ in range(args.repeat):  # alternating: noise hits both alike
            for runtime in got:
                got[runtime].append(one_process(runtime, path, name, shape))
        med = {rt: {k: statistics.median(r[k] for r in runs) for k in ("wall", "import", "rss_mb")} for rt, runs in got.items()}
        first = {rt: statistics.median(r["first_run"] for r in runs) if path else None for rt, runs in got.items()}
        t_ratio = med["onnxrt"]["wall"] / med["onnxruntime"]["wall"]
        m_ratio = med["onnxrt"]["rss_mb"] / med["onnxruntime"]["rss_mb"]
        ok = t_ratio <= TIME_TARGET and m_ratio <= MEMORY_TARGET
        verdicts.append(ok)
        rows.append([
            label,
            f"{med['onnxrt']['wall'] * 1e3:.0f} / {med['onnxruntime']['wall'] * 1e3:.0f} ms",
            f"{t_ratio:.2f}",
            f"{med['onnxrt']['import'] * 1e3:.0f} / {med['onnxruntime']['import'] * 1e3:.0f} ms",
            "-" if first["onnxrt"] is None else f"{first['onnxrt'] * 1e3:.1f} / {first['onnxruntime'] * 1e3:.1f} ms",
            f"{med['onnxrt']['rss_mb']:.0f} / {med['onnxruntime']['rss_mb']:.0f} MB",
            f"{m_ratio:.2f}",
            "ok" if ok else "missed",
        ])
        print(f"  {label}: time {t_ratio:.2f}, memory {m_ratio:.2f}", file=sys.stderr)
    import importlib.metadata as md

    versions = ", ".join(f"{p} {md.version(p)}" for p in ("onnxrt", "onnxruntime", "onnx", "numpy", "ml_dtypes"))
    print(f"\nCold start, median of {args.repeat} fresh processes per runtime ({versions}); ratios onnxrt / onnxruntime\n")
    print(markdown_table(
        ["job", "process time (onnxrt / ort)", "ratio", "import", "first run", "peak RSS (onnxrt / ort)", "ratio",
         f"time <= {TIME_TARGET}, memory <= {MEMORY_TARGET}"],
        rows,
    ))


if __name__ == "__main__":
    main()
