"""Neural-network operators: onnxrt vs onnxruntime on typical CNN / sequence layer sizes.

Usage: python benchmarks/bench_nn.py [--repeat 10] [--rounds 3] [--only conv,pool] [--threads N]
Prints a markdown table of median and minimum times, the ratios onnxrt/onnxruntime (lower
is better) and the target ratio of issue 4 (Conv and pooling <= 1.5, the rest <= 2). The
verdict uses the median; on a shared machine the minimum tells what each runtime does when
it is not preempted. Operators onnxrt does not implement are skipped with a note. Each case
first checks that both runtimes give the same outputs (rtol 1e-3).

Each runtime runs in a worker process of its own (``_workers.py``), kept for all the
cases: for each case both workers build the one-node model, warm it up (at least 3 runs,
or onnxrt's ``engine.warmup_runs``), then time chunks of ``--repeat`` runs on command,
taking turns over ``--rounds`` rounds; figures are medians (and minimums) of all the timed
runs. Without ``--threads`` each runtime keeps its defaults (onnxruntime: a default
``SessionOptions``, no thread or spinning settings); ``--threads N`` sets
``intra_op_num_threads`` = N in both (onnxrt's caps its kernel pool and BLAS).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Iterator
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from _common import fmt_time, markdown_table  # noqa: E402
from _workers import WorkerSet, inner_calls, load_outputs, outputs_agree  # noqa: E402

F = TensorProto.FLOAT


def _model(
    op: str,
    inputs: list[tuple[str, np.ndarray | list[int]]],
    n_outputs: int = 1,
    opset: int = 21,
    **atts: Any,
) -> onnx.ModelProto:
    """One-node model; an input given as an array is an initializer (weights), a list is a fed shape, '' is omitted."""
    feeds, inits = [], []
    for name, value in inputs:
        if not name:  # an omitted optional input
            continue
        if isinstance(value, np.ndarray):
            inits.append(numpy_helper.from_array(value, name))
        else:
            feeds.append(helper.make_tensor_value_info(name, F, value))
    outs = [f"y{i}" for i in range(n_outputs)]
    node = helper.make_node(op, [n for n, _ in inputs], outs, **atts)
    graph = helper.make_graph([node], op, feeds, [helper.make_tensor_value_info(o, F, None) for o in outs], inits)
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


def cases(rng: np.random.Generator) -> Iterator[tuple[str, str, str, float, onnx.ModelProto, dict[str, np.ndarray]]]:
    """(family, label, op_type, target ratio, model, feeds) per benchmarked case."""

    def rand(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    x56 = rand(1, 64, 56, 56)
    yield ("conv", "Conv 3x3 64->64 56x56", "Conv", 1.5,
           _model("Conv", [("x", [1, 64, 56, 56]), ("w", rand(64, 64, 3, 3, scale=0.05)), ("b", rand(64))], pads=[1, 1, 1, 1]),
           {"x": x56})
    yield ("conv", "Conv 1x1 256->64 56x56", "Conv", 1.5,
           _model("Conv", [("x", [1, 256, 56, 56]), ("w", rand(64, 256, 1, 1, scale=0.05)), ("b", rand(64))]),
           {"x": rand(1, 256, 56, 56)})
    yield ("conv", "Conv depthwise 3x3 128ch 56x56", "Conv", 1.5,
           _model("Conv", [("x", [1, 128, 56, 56]), ("w", rand(128, 1, 3, 3)), ("b", rand(128))], pads=[1, 1, 1, 1], group=128),
           {"x": rand(1, 128, 56, 56)})
    yield ("conv", "ConvTranspose 4x4/2 64->32 28->56", "ConvTranspose", 1.5,
           _model("ConvTranspose", [("x", [1, 64, 28, 28]), ("w", rand(64, 32, 4, 4, scale=0.05)), ("b", rand(32))],
                  strides=[2, 2], pads=[1, 1, 1, 1]),
           {"x": rand(1, 64, 28, 28)})
    yield ("pool", "MaxPool 3x3/2 64ch 112->56", "MaxPool", 1.5,
           _model("MaxPool", [("x", [1, 64, 112, 112])], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1]),
           {"x": rand(1, 64, 112, 112)})
    yield ("pool", "AveragePool 3x3/1 pad 1 64ch 56x56", "AveragePool", 1.5,
           _model("AveragePool", [("x", [1, 64, 56, 56])], kernel_shape=[3, 3], pads=[1, 1, 1, 1]),
           {"x": x56})
    yield ("norm", "BatchNormalization 64ch 56x56", "BatchNormalization", 2.0,
           _model("BatchNormalization", [("x", [1, 64, 56, 56]), ("s", rand(64)), ("bias", rand(64)), ("mean", rand(64)),
                                         ("var", np.abs(rand(64)) + 0.5)]),
           {"x": x56})
    yield ("norm", "LayerNormalization 128x768", "LayerNormalization", 2.0,
           _model("LayerNormalization", [("x", [1, 128, 768]), ("s", rand(768)), ("bias", rand(768))], axis=-1),
           {"x": rand(1, 128, 768)})
    yield ("vision", "Resize linear x2 64ch 56->112", "Resize", 2.0,
           _model("Resize", [("x", [1, 64, 56, 56]), ("", None),
                             ("scales", np.array([1, 1, 2, 2], np.float32))], mode="linear"),
           {"x": x56})
    # NonMaxSuppression: 1,000 boxes, one class
    corners = rng.uniform(0, 100, (1000, 2)).astype(np.float32)
    sizes = rng.uniform(5, 30, (1000, 2)).astype(np.float32)
    boxes = np.concatenate([corners, corners + sizes], axis=1)[None]
    nms = _model("NonMaxSuppression", [("boxes", [1, 1000, 4]), ("scores", [1, 1, 1000]),
                                       ("max_out", np.array([200], np.int64)), ("iou", np.array([0.5], np.float32)),
                                       ("score_th", np.array([0.0], np.float32))])
    nms.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    yield ("vision", "NonMaxSuppression 1,000 boxes", "NonMaxSuppression", 2.0, nms,
           {"boxes": boxes, "scores": rng.uniform(0, 1, (1, 1, 1000)).astype(np.float32)})
    hid = 128
    yield ("rnn", "LSTM seq 50 hidden 128", "LSTM", 2.0,
           _model("LSTM", [("x", [50, 1, 128]), ("w", rand(1, 4 * hid, 128, scale=0.1)), ("r", rand(1, 4 * hid, hid, scale=0.1)),
                           ("b", rand(1, 8 * hid, scale=0.1))], n_outputs=1, hidden_size=hid),
           {"x": rand(50, 1, 128)})
    yield ("attention", "Attention seq 128, 8 heads x 64", "Attention", 2.0,
           _model("Attention", [("q", [1, 8, 128, 64]), ("k", [1, 8, 128, 64]), ("v", [1, 8, 128, 64])], opset=23),
           {"q": rand(1, 8, 128, 64), "k": rand(1, 8, 128, 64), "v": rand(1, 8, 128, 64)})


def case_model(label: str) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """The workers' factory (``_workers.py``): the one-node model and feeds of a case."""
    for _, lab, _, _, model, feeds in cases(np.random.default_rng(0)):
        if lab == label:
            return model, feeds
    raise KeyError(label)


#: errors a runtime raises for an operator (or opset) it does not implement
NOT_IMPLEMENTED = {"UnsupportedOperatorError", "NotImplementedError", "NotImplemented"}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=10, help="timed runs per chunk")
    parser.add_argument("--rounds", type=int, default=3, help="chunks per runtime, the workers taking turns")
    parser.add_argument("--only", default="", help="comma-separated families: conv,pool,norm,vision,rnn,attention")
    parser.add_argument("--max-seconds", type=float, default=15.0)
    parser.add_argument("--threads", type=int, default=None, help="threads of both runtimes (default: their own defaults)")
    args = parser.parse_args()

    only = {f.strip() for f in args.only.split(",") if f.strip()}
    rows = []
    outdir = tempfile.mkdtemp(prefix="bench-nn-")
    try:
        with WorkerSet(["onnxrt", "onnxruntime"]) as ws:
            for family, label, op, target, _model_, _feeds_ in cases(np.random.default_rng(0)):
                if only and family not in only:
                    continue
                loads = ws.load(outputs_dir=outdir, factory="bench_nn:case_model", args=[label], warmup=3, threads=args.threads)
                bad = {rt: r for rt, r in loads.items() if not r.get("ok")} | {rt: {"error": e} for rt, e in ws.errors.items() if rt not in loads}
                if "onnxrt" in bad and bad["onnxrt"].get("type") in NOT_IMPLEMENTED:
                    print(f"  skipped {label}: onnxrt has no {op} kernel ({bad['onnxrt']['error'][:120]})", file=sys.stderr)
                    rows.append([label, "-", "-", "-", "-", "-", f"{target:.1f}", "skipped (not implemented)"])
                    continue
                same, diff = outputs_agree(load_outputs(outdir, "onnxrt"), load_outputs(outdir, "onnxruntime"), rtol=1e-3, atol=1e-5)
                if bad or not same:
                    for rt, r in bad.items():
                        print(f"  {label}: {rt}: {r.get('error', '?')[:300]}", file=sys.stderr)
                    if not bad:
                        print(f"  {label}: outputs differ (max abs diff {diff:.3g})", file=sys.stderr)
                    rows.append([label, "-", "-", "-", "-", "-", f"{target:.1f}", "failed or outputs differ"])
                    continue
                warm = max(statistics.median(r["warm_s"] or [r["first_run_s"]]) for r in loads.values())
                res = ws.time(rounds=args.rounds, repeat=args.repeat, inner=inner_calls(warm), max_seconds=args.max_seconds)
                (ma, mina), (mb, minb) = ((statistics.median(res[rt]), min(res[rt])) for rt in ("onnxrt", "onnxruntime"))
                ratio = ma / mb
                verdict = "ok" if ratio <= target else "slower than target"
                rows.append([label, fmt_time(ma), fmt_time(mb), f"{ratio:.2f}", f"{fmt_time(mina)} / {fmt_time(minb)}",
                             f"{mina / minb:.2f}", f"{target:.1f}", verdict])
                print(f"  {label}: onnxrt/ort median {ratio:.2f}, min {mina / minb:.2f}", file=sys.stderr, flush=True)
    finally:
        shutil.rmtree(outdir, ignore_errors=True)
    threads = "defaults" if args.threads is None else f"{args.threads} thread(s)"
    load_avg = f"{os.getloadavg()[0]:.1f}" if hasattr(os, "getloadavg") else "?"
    print(f"each runtime in its own worker process; threads: {threads}; {os.cpu_count()} cores, load average at the end: {load_avg}")
    print(markdown_table(["case", "onnxrt (median)", "onnxruntime (median)", "ratio", "min onnxrt / ort", "ratio (min)", "target", "verdict"], rows))


if __name__ == "__main__":
    main()
