"""Control flow: per-iteration overhead of Loop (1,000 iterations) and Scan (1,000 steps), onnxrt vs onnxruntime.

Usage: python benchmarks/bench_control_flow.py [--iterations 1000] [--repeat 15] [--reference] [--cpu-time]

Each model runs at ``--iterations`` and at 1 iteration; the per-iteration overhead is
(time(N) - time(1)) / (N - 1), which removes the fixed cost of a run (feeds, outputs,
the node around the loop). The bodies are small (a few element-wise nodes on 16 floats), so
what is measured is the engine's cost per iteration: binding the body's inputs, running
its plan, collecting carried values and scan outputs. Prints a markdown table and the
ratio onnxrt/onnxruntime (lower is better; the target is <= 2). ``--cpu-time`` times with the
process's CPU time instead of the wall clock, onnxruntime on one thread: on a machine shared
with other jobs this leaves out the time the process waits for a core.
"""

from __future__ import annotations

import _env  # noqa: F401  (first: OpenBLAS reads its settings when numpy loads it)

import argparse
import os
import sys
import time

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from _common import check_same, fmt_time, make_runners, markdown_table, ort_session, time_alternating  # noqa: E402

F, I64, B = TensorProto.FLOAT, TensorProto.INT64, TensorProto.BOOL
WIDTH = 16


def loop_model():
    """Loop(M, cond): x <- x * 0.5 + 1 carried, x scanned; the body ends the loop never (cond passes through)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Mul", ["x_in", "half"], ["xh"]),
            helper.make_node("Add", ["xh", "one"], ["x_out"]),
            helper.make_node("Identity", ["x_out"], ["x_scan"]),
        ],
        "loop_body",
        [helper.make_tensor_value_info("i", I64, []), helper.make_tensor_value_info("cond_in", B, []),
         helper.make_tensor_value_info("x_in", F, [WIDTH])],
        [helper.make_tensor_value_info("cond_out", B, []), helper.make_tensor_value_info("x_out", F, [WIDTH]),
         helper.make_tensor_value_info("x_scan", F, [WIDTH])],
        [helper.make_tensor("half", F, [], [0.5]), helper.make_tensor("one", F, [], [1.0])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "cond", "x0"], ["x_final", "xs"], body=body)],
        "bench_loop",
        [helper.make_tensor_value_info("M", I64, []), helper.make_tensor_value_info("cond", B, []),
         helper.make_tensor_value_info("x0", F, [WIDTH])],
        [helper.make_tensor_value_info("x_final", F, [WIDTH]), helper.make_tensor_value_info("xs", F, [None, WIDTH])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def scan_model():
    """Scan-9 over axis 0: s <- s * 0.5 + x_t carried, s scanned (an exponential moving sum)."""
    body = helper.make_graph(
        [
            helper.make_node("Mul", ["s_in", "half"], ["sh"]),
            helper.make_node("Add", ["sh", "x_t"], ["s_out"]),
            helper.make_node("Identity", ["s_out"], ["y_t"]),
        ],
        "scan_body",
        [helper.make_tensor_value_info("s_in", F, [WIDTH]), helper.make_tensor_value_info("x_t", F, [WIDTH])],
        [helper.make_tensor_value_info("s_out", F, [WIDTH]), helper.make_tensor_value_info("y_t", F, [WIDTH])],
        [helper.make_tensor("half", F, [], [0.5])],
    )
    graph = helper.make_graph(
        [helper.make_node("Scan", ["s0", "x"], ["s_final", "ys"], body=body, num_scan_inputs=1)],
        "bench_scan",
        [helper.make_tensor_value_info("s0", F, [WIDTH]), helper.make_tensor_value_info("x", F, [None, WIDTH])],
        [helper.make_tensor_value_info("s_final", F, [WIDTH]), helper.make_tensor_value_info("ys", F, [None, WIDTH])],
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    m.ir_version = 8
    return m


def _single_thread_ort(model):
    return ort_session(model.SerializeToString(), threads=1)


def _cpu_times(runners, big, small, repeat):
    """Median process CPU time per runtime, at ``big`` and at ``small``, runtimes taking turns."""
    import statistics

    times = {k: ([], []) for k in runners}
    for _ in range(repeat):
        for name, fn in runners.items():
            for feeds, bucket in ((big, times[name][0]), (small, times[name][1])):
                t0 = time.process_time()
                fn(feeds)
                bucket.append(time.process_time() - t0)
    return ({k: statistics.median(v[0]) for k, v in times.items()}, {k: statistics.median(v[1]) for k, v in times.items()})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--iterations", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--reference", action="store_true", help="also time onnx.reference (slow)")
    parser.add_argument("--cpu-time", action="store_true", help="CPU time of the process, onnxruntime on one thread")
    args = parser.parse_args()
    n = args.iterations
    rng = np.random.default_rng(0)
    x0 = rng.standard_normal(WIDTH).astype(np.float32)
    cases = [
        ("Loop (M and cond), 4-node body", loop_model(),
         lambda k: {"M": np.array(k, np.int64), "cond": np.array(True), "x0": x0}),
        ("Scan-9 axis 0, 3-node body", scan_model(),
         lambda k: {"s0": x0, "x": rng.standard_normal((k, WIDTH)).astype(np.float32)}),
    ]
    rows = []
    for label, model, feeds_of in cases:
        runners = make_runners(model, with_reference=args.reference)
        big, small = feeds_of(n), feeds_of(1)
        check_same(runners, big)
        if args.cpu_time:
            runners["onnxruntime"] = _single_thread_ort(model)
            t_big, t_small = _cpu_times(runners, big, small, args.repeat)
        else:
            slow = {"onnx.reference": 3}
            t_big = time_alternating(runners, big, repeat=args.repeat, slow=slow)
            t_small = time_alternating(runners, small, repeat=args.repeat * 4, slow=slow)
        per = {k: max(t_big[k] - t_small[k], 0.0) / (n - 1) for k in t_big}
        ratio = per["onnxrt"] / per["onnxruntime"]
        rows.append(
            [
                label,
                str(n),
                fmt_time(t_big["onnxrt"]),
                fmt_time(t_big["onnxruntime"]),
                fmt_time(per["onnxrt"]),
                fmt_time(per["onnxruntime"]),
                f"{ratio:.2f}",
            ]
            + ([fmt_time(per.get("onnx.reference"))] if args.reference else [])
        )
        print(f"  {label}: per iteration onnxrt/ort {ratio:.2f}", file=sys.stderr)
    headers = ["model", "iterations", "onnxrt total", "onnxruntime total", "onnxrt / iter", "onnxruntime / iter", "onnxrt/ort"]
    if args.reference:
        headers.append("onnx.reference / iter")
    print(markdown_table(headers, rows))


if __name__ == "__main__":
    main()
