"""Real models: onnxrt vs onnxruntime (default options) vs onnx.reference, latency, session creation, peak memory.

Usage: python benchmarks/bench_models.py [--models squeezenet,resnet50] [--repeat 7] [--no-reference] [--chart out.png]

Models: the nine light networks shipped with onnx (input arange(n)/n as float32 in the
declared shape, outputs compared with the shipped ones, rtol 1e-3: the "output ok" column), an MLP of 5 layers
at batch 1 and a skl2onnx logistic regression at 1 row. Latencies are medians of
alternating runs in one process (onnx.reference runs once: it is slow); session
creation is the median of three after a warm-up. Peak memory is
the peak resident set size of a fresh process that creates the session and runs it three times, above
the process with the runtime imported (/proc VmHWM; Linux only), measured per runtime in its
own subprocess.
"""

from __future__ import annotations

import _env  # noqa: F401  (first: OpenBLAS reads its settings when numpy loads it)

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(__file__))
from _common import fmt_time, markdown_table, ort_session  # noqa: E402

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
LIGHT_MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def mlp_model(layers: int = 5, width: int = 128) -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    nodes, inits = [], []
    prev = "X"
    for i in range(layers):
        inits.append(numpy_helper.from_array((rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32), f"W{i}"))
        inits.append(numpy_helper.from_array(rng.standard_normal(width).astype(np.float32) * 0.1, f"B{i}"))
        nodes.append(helper.make_node("MatMul", [prev, f"W{i}"], [f"m{i}"]))
        nodes.append(helper.make_node("Add", [f"m{i}", f"B{i}"], [f"a{i}"]))
        out = "Y" if i == layers - 1 else f"h{i}"
        nodes.append(helper.make_node("Relu", [f"a{i}"], [out]))
        prev = out
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [1, width])], [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [1, width])], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def logreg_model() -> onnx.ModelProto:
    from skl2onnx import to_onnx
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    x = rng.standard_normal((200, 10)).astype(np.float32)
    y = (x[:, 0] + x[:, 1] > 0).astype(np.int64)
    return to_onnx(LogisticRegression().fit(x, y), x[:1], options={"zipmap": False}, target_opset={"": 17, "ai.onnx.ml": 3})


def load(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray], np.ndarray | None]:
    """(model, feeds, expected first output or None)."""
    if name == "mlp5":
        m = mlp_model()
        return m, {"X": np.random.default_rng(1).standard_normal((1, 128)).astype(np.float32)}, None
    if name == "logreg":
        m = logreg_model()
        return m, {m.graph.input[0].name: np.random.default_rng(1).standard_normal((1, 10)).astype(np.float32)}, None
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    m = onnx.load(path)
    inits = {i.name for i in m.graph.initializer}
    inp = next(i for i in m.graph.input if i.name not in inits)
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    n = int(np.prod(shape))
    x = (np.arange(n, dtype=np.float64) / n).astype(np.float32).reshape(shape)
    expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    return m, {inp.name: x}, expected


def make_session(runtime: str, model: onnx.ModelProto):
    data = model.SerializeToString()
    if runtime == "onnxrt":
        import onnxrt

        s = onnxrt.InferenceSession(data)
        return lambda feeds: s.run(None, feeds)
    if runtime == "onnxruntime":
        return ort_session(data)
    from onnx.reference import ReferenceEvaluator

    r = ReferenceEvaluator(model)
    return lambda feeds: r.run(None, feeds)


def _vm(field: str) -> int:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field):
                return int(line.split()[1]) * 1024
    return 0


def child(name: str, runtime: str) -> None:
    """Subprocess mode: peak RSS of creating a session and running it three times, above the
    process with the model loaded and the runtime's libraries loaded (they are not the
    run's: scipy alone, which onnxrt imports, is ~15 MB of resident code). onnxrt loads
    numba and LLVM at its first compiled kernel, once per process: the baseline includes
    them (one tiny kernel call), and their footprint is reported apart ("jit")."""
    model, feeds, _ = load(name)
    __import__("onnxrt" if runtime == "onnxrt" else "onnxruntime" if runtime == "onnxruntime" else "onnx.reference")
    jit = 0
    if runtime == "onnxrt":
        from onnxrt import native as _jit; from onnxrt.ops_cpu import _fastmath

        before = _vm("VmRSS:")
        if _jit.kernels() is not None:
            _fastmath.sigmoid(np.zeros(_fastmath.JIT_MIN_SIZE, np.float32))
        jit = _vm("VmRSS:") - before
    base = _vm("VmRSS:")
    run = make_session(runtime, model)
    # three runs for every runtime: onnxrt's compiled kernels start at a session's second run
    # (its first takes the numpy paths), so the steady state's peak is in the third
    for _ in range(3):
        run(feeds)
    print(json.dumps({"peak": _vm("VmHWM:"), "base": base, "jit": jit}))


def peak_memory(name: str, runtime: str) -> int | None:
    if not os.path.exists("/proc/self/status"):
        return None
    proc = subprocess.run([sys.executable, __file__, "--child", name, runtime], capture_output=True, text=True)
    if proc.returncode != 0:
        return None
    d = json.loads(proc.stdout.strip().splitlines()[-1])
    if d.get("jit"):
        _JIT_RSS.append(d["jit"])
    return d["peak"] - d["base"]


#: resident memory that loading numba and LLVM added in the onnxrt children (bytes)
_JIT_RSS: list[int] = []


def bench(name: str, repeat: int, with_reference: bool, with_memory: bool) -> dict:
    model, feeds, expected = load(name)
    out: dict = {"model": name}
    runs = {}
    # session creation: the median of three, alternating runtimes (the first one of a
    # process also pays for imports: it is only a warm-up)
    created: dict[str, list[float]] = {"onnxrt": [], "onnxruntime": []}
    for i in range(4):
        for rt in created:
            t0 = time.perf_counter()
            runs[rt] = make_session(rt, model)
            if i:
                created[rt].append(time.perf_counter() - t0)
    for rt, v in created.items():
        out[f"create_{rt}"] = statistics.median(v)
    res = runs["onnxrt"](feeds)
    if expected is not None:
        got, want, rtol = np.asarray(res[0], np.float64), np.asarray(expected, np.float64), 1e-3
    else:
        got, want, rtol = np.asarray(res[0], np.float64), np.asarray(runs["onnxruntime"](feeds)[0], np.float64), 1e-4
    # reported, not asserted: squeezenet's shipped output is the softmax of logits ~1e10 that
    # are equal in exact arithmetic (constant weights); float32 products differ by one or two
    # ulps (2048 at 1e10) from one output channel to the next (OpenBLAS's sgemm rounds rows
    # 6-11 of each 12-row tile differently), and exp(-2048) is 0, so the softmax is far from
    # uniform. onnxruntime's kernels happen to round identical rows identically.
    out["matches"] = bool(np.allclose(got, want, rtol=rtol, atol=1e-5))
    out["max_diff"] = float(np.max(np.abs(got - want))) if got.shape == want.shape else float("nan")
    if not out["matches"]:
        print(f"  {name}: output differs from the expected one (max abs diff {out['max_diff']:.3g})", file=sys.stderr)
    runs["onnxruntime"](feeds)
    runs["onnxrt"](feeds)  # onnxrt's compiled kernels load at a session's second run: before timing
    times: dict[str, list[float]] = {k: [] for k in runs}
    inner = 200 if name in ("mlp5", "logreg") else 1
    for _ in range(repeat):
        for rt, fn in runs.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                fn(feeds)
            times[rt].append((time.perf_counter() - t0) / inner)
    for rt, v in times.items():
        out[rt] = statistics.median(v)
    if with_reference:
        try:
            ref_run = make_session("onnx.reference", model)
            t0 = time.perf_counter()
            ref_run(feeds)
            out["onnx.reference"] = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            print(f"  onnx.reference failed on {name}: {type(e).__name__}: {str(e)[:100]}", file=sys.stderr)
    if with_memory:
        for rt in ("onnxrt", "onnxruntime"):
            out[f"mem_{rt}"] = peak_memory(name, rt)
    return out


def chart(results: list[dict], path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = [r["model"] for r in results]
    ratios = [r["onnxrt"] / r["onnxruntime"] for r in results]
    fig, ax = plt.subplots(figsize=(9, 4))
    ax.bar(names, ratios, color=["#4a7bd0" if v <= 1.5 else "#d05a4a" for v in ratios])
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.axhline(1.2, color="gray", linestyle="--", linewidth=0.8, label="1.2x")
    ax.set_ylabel("onnxrt / onnxruntime (median latency)")
    ax.set_title("onnxrt vs onnxruntime (lower is better)")
    ax.legend()
    plt.xticks(rotation=30, ha="right")
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", default=",".join(LIGHT_MODELS + ["mlp5", "logreg"]))
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--chart", default="benchmarks/out/models.png")
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "RUNTIME"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    results = []
    for name in args.models.split(","):
        r = bench(name, args.repeat, not args.no_reference, not args.no_memory)
        results.append(r)
        print(f"  {name}: onnxrt/ort {r['onnxrt'] / r['onnxruntime']:.2f}", file=sys.stderr)
    rows = []
    for r in results:
        mem = lambda k: f"{r[k] / 2**20:.0f} MB" if r.get(k) else "-"  # noqa: E731
        mem_ratio = f"{r['mem_onnxrt'] / r['mem_onnxruntime']:.2f}" if r.get("mem_onnxrt") and r.get("mem_onnxruntime") else "-"
        rows.append(
            [
                r["model"],
                fmt_time(r["onnxrt"]),
                fmt_time(r["onnxruntime"]),
                fmt_time(r.get("onnx.reference")),
                f"{r['onnxrt'] / r['onnxruntime']:.2f}",
                f"{r['create_onnxrt']:.2f} s / {r['create_onnxruntime']:.2f} s",
                f"{r['create_onnxrt'] / r['create_onnxruntime']:.2f}",
                f"{mem('mem_onnxrt')} / {mem('mem_onnxruntime')}",
                mem_ratio,
                "yes" if r["matches"] else f"no ({r['max_diff']:.2g})",
            ]
        )
    print(
        markdown_table(
            ["model", "onnxrt", "onnxruntime", "onnx.reference", "ratio", "session creation (onnxrt / ort)", "ratio", "peak memory (onnxrt / ort)", "ratio", "output ok"],
            rows,
        )
    )
    light = [r["onnxrt"] / r["onnxruntime"] for r in results if r["model"] in LIGHT_MODELS]
    if light:
        print(f"\ngeometric mean of light-model latency ratios: {float(np.exp(np.mean(np.log(light)))):.2f}")
    if _JIT_RSS:
        print(f"onnxrt's compiled-kernel runtime (numba and LLVM, loaded once per process at the first compiled "
              f"kernel; outside the peaks above): {statistics.median(_JIT_RSS) / 2**20:.0f} MB resident")
    if args.chart:
        os.makedirs(os.path.dirname(args.chart) or ".", exist_ok=True)
        try:
            chart(results, args.chart)
            print(f"chart: {args.chart}")
        except ImportError:
            print("matplotlib is not installed (pip install onnxrt[bench]): no chart")


if __name__ == "__main__":
    main()
