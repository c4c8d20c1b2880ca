"""Real models: onnxrt vs onnxruntime (default options) vs onnx.reference, latency, session creation, peak memory.

Usage: python benchmarks/bench_models.py [--models squeezenet,resnet50] [--repeat 5] [--rounds 3] [--no-reference] [--chart out.png]

Models: the nine light networks shipped with onnx (input arange(n)/n as float32 in the
declared shape, outputs compared with the shipped ones, rtol 1e-3: the "output ok" column), an MLP of 5 layers
at batch 1 and a skl2onnx logistic regression at 1 row.

Each runtime runs in a worker process of its own (``_workers.py``), started fresh for
each model, with its default options (onnxruntime: a default ``SessionOptions``, no
thread or spinning settings). Each worker loads the model, first builds and runs a small
model (so that libraries loaded on first use, onnxrt's compiled kernels among them, are
in the baseline), creates the session, warms it up (at least 3 runs, or onnxrt's
``engine.warmup_runs``), then times chunks of ``--repeat`` runs on command, the two
workers taking turns over ``--rounds`` rounds; latencies are medians of all the timed
runs (calls under 100 µs are timed in batches, the same count for both). Session creation
is the median of three more creations after the first. Peak memory is the worker's peak
resident set size after the warm-up (/proc VmHWM; Linux only) above its resident set
before the session was created (the runtime imported, the model loaded and the small
model run). onnx.reference runs once, in a third worker, after the other two have closed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import fmt_time, markdown_table  # noqa: E402
from _workers import WorkerSet, inner_calls, load_outputs, outputs_agree  # noqa: E402

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


def worker_model(name: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The workers' factory (``_workers.py``): (model, feeds)."""
    model, feeds, _ = load(name)
    return model, feeds


#: resident memory the small warm-up model added in the onnxrt workers (bytes): mostly
#: numba and LLVM, loaded once per process at the first compiled kernel
_JIT_RSS: list[int] = []


def bench(name: str, repeat: int, rounds: int, with_reference: bool) -> dict:
    _, _, expected = load(name)
    out: dict = {"model": name}
    outdir = tempfile.mkdtemp(prefix="bench-models-")
    try:
        with WorkerSet(["onnxrt", "onnxruntime"]) as ws:
            loads = ws.load(outputs_dir=outdir, factory="bench_models:worker_model", args=[name], warmup=3, creates=3, preload=True)
            for rt, e in ws.errors.items():
                print(f"  {name}: {rt} failed: {e[:200]}", file=sys.stderr)
            for rt, r in loads.items():
                if r.get("ok"):
                    out[f"create_{rt}"] = statistics.median(r["creates_s"])
                    out[f"mem_{rt}"] = (r["peak_rss"] - r["base_rss"]) or None
                    if rt == "onnxrt" and r.get("preload_rss"):
                        _JIT_RSS.append(r["preload_rss"])
            warm = [statistics.median(r["warm_s"]) for r in loads.values() if r.get("ok") and r["warm_s"]]
            times = ws.time(rounds=rounds, repeat=repeat, inner=inner_calls(max(warm, default=1.0)))
            for rt, v in times.items():
                out[rt] = statistics.median(v)
        got = load_outputs(outdir, "onnxrt")
        if expected is not None:
            want, rtol = [expected], 1e-3
        else:
            want, rtol = load_outputs(outdir, "onnxruntime"), 1e-4
        # reported, not asserted: squeezenet's shipped output is the softmax of logits ~1e10 that
        # are equal in exact arithmetic (constant weights); float32 products differ by one or two
        # ulps (2048 at 1e10) from one output channel to the next (OpenBLAS's sgemm rounds rows
        # 6-11 of each 12-row tile differently), and exp(-2048) is 0, so the softmax is far from
        # uniform. onnxruntime's kernels happen to round identical rows identically.
        out["matches"], out["max_diff"] = outputs_agree(got[:1] if got else None, want[:1] if want else None, rtol=rtol, atol=1e-5)
        if not out["matches"]:
            print(f"  {name}: output differs from the expected one (max abs diff {out['max_diff']:.3g})", file=sys.stderr)
        if with_reference:
            with WorkerSet(["onnx.reference"]) as ws:
                r = ws.load(factory="bench_models:worker_model", args=[name], warmup=0)["onnx.reference"]
                if r.get("ok"):
                    out["onnx.reference"] = r["first_run_s"]
                else:
                    print(f"  onnx.reference failed on {name}: {r.get('error', '?')[:100]}", file=sys.stderr)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
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
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per chunk")
    parser.add_argument("--rounds", type=int, default=3, help="chunks per runtime, the workers taking turns")
    parser.add_argument("--no-reference", action="store_true")
    parser.add_argument("--chart", default="benchmarks/out/models.png")
    args = parser.parse_args()
    results = []
    for name in args.models.split(","):
        r = bench(name, args.repeat, args.rounds, not args.no_reference)
        if "onnxrt" not in r or "onnxruntime" not in r:
            print(f"  {name}: not measured (a runtime failed)", file=sys.stderr)
            continue
        results.append(r)
        print(f"  {name}: onnxrt/ort {r['onnxrt'] / r['onnxruntime']:.2f}", file=sys.stderr, flush=True)
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
    load_avg = f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"
    print(f"each runtime in its own worker process, default options; {os.cpu_count()} cores, load average at the end: {load_avg}\n")
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
        print(f"onnxrt's resident memory added by the small warm-up model (mostly numba and LLVM, loaded once per "
              f"process at the first compiled kernel; outside the peaks above): {statistics.median(_JIT_RSS) / 2**20:.0f} MB resident")
    if args.chart:
        os.makedirs(os.path.dirname(args.chart) or ".", exist_ok=True)
        try:
            chart(results, args.chart)
            print(f"chart: {args.chart}")
        except ImportError:
            print("matplotlib is not installed (pip install onnxrt[bench]): no chart")


if __name__ == "__main__":
    main()
