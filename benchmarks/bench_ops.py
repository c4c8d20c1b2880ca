"""Gather/scatter family: onnxrt vs onnxruntime vs onnx.reference at 1e5, 1e6 and 1e7 elements.

Usage: python benchmarks/bench_ops.py [--sizes 1e5,1e6,1e7] [--repeat 15]
Prints a markdown table of median times (runtimes run alternately in one process) and
the ratios onnxrt/onnxruntime (lower is better) and onnx.reference/onnxrt (higher is better).
"""

from __future__ import annotations

import _env  # noqa: F401  (first: OpenBLAS reads its settings when numpy loads it)

import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from _common import check_same, fmt_time, make_runners, markdown_table, time_alternating  # noqa: E402


def _model(op: str, inputs: list[tuple[str, int, list[int]]], **atts):
    node = helper.make_node(op, [n for n, _, _ in inputs], ["y"], **atts)
    graph = helper.make_graph(
        [node], op, [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)]
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])
    m.ir_version = 8
    return m


def cases(n: int, rng: np.random.Generator):
    """(label, model, feeds) per benchmarked operator; ``n`` elements in data and output."""
    rows, cols = 1000, n // 1000
    data = rng.standard_normal((rows, cols)).astype(np.float32)
    idx_full = rng.integers(0, rows, size=(rows, cols)).astype(np.int64)
    F, I = TensorProto.FLOAT, TensorProto.INT64
    yield (
        "Gather axis=0",
        _model("Gather", [("data", F, [rows, cols]), ("indices", I, [rows])], axis=0),
        {"data": data, "indices": rng.permutation(rows).astype(np.int64)},
    )
    yield (
        "GatherElements axis=0",
        _model("GatherElements", [("data", F, [rows, cols]), ("indices", I, [rows, cols])], axis=0),
        {"data": data, "indices": idx_full},
    )
    for red in ("none", "add"):
        yield (
            f"ScatterElements {red}",
            _model("ScatterElements", [("data", F, [rows, cols]), ("indices", I, [rows, cols]), ("updates", F, [rows, cols])], axis=0, reduction=red),
            {"data": data, "indices": idx_full, "updates": data[::-1].copy()},
        )
    yield (
        "ScatterND",
        _model("ScatterND", [("data", F, [rows, cols]), ("indices", I, [rows, 1]), ("updates", F, [rows, cols])]),
        {"data": data, "indices": rng.permutation(rows).astype(np.int64).reshape(rows, 1), "updates": data[::-1].copy()},
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="1e5,1e6,1e7")
    parser.add_argument("--repeat", type=int, default=15)
    parser.add_argument("--no-reference", action="store_true")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    rows = []
    for size in [int(float(s)) for s in args.sizes.split(",")]:
        for label, model, feeds in cases(size, rng):
            # onnx.reference is slow: fewer rounds at large sizes
            runners = make_runners(model, with_reference=not args.no_reference)
            check_same(runners, feeds)
            slow = {"onnx.reference": 3 if size >= 10**7 else 7}
            med = time_alternating(runners, feeds, repeat=args.repeat, slow=slow)
            ratio = med["onnxrt"] / med["onnxruntime"]
            ref = med.get("onnx.reference")
            rows.append(
                [
                    label,
                    f"{size:.0e}",
                    fmt_time(med["onnxrt"]),
                    fmt_time(med["onnxruntime"]),
                    fmt_time(ref),
                    f"{ratio:.2f}",
                    f"{ref / med['onnxrt']:.1f}" if ref else "-",
                ]
            )
            print(f"  {label} {size:.0e}: onnxrt/ort {ratio:.2f}", file=sys.stderr)
    print(markdown_table(["operator", "elements", "onnxrt", "onnxruntime", "onnx.reference", "onnxrt/ort", "reference/onnxrt"], rows))


if __name__ == "__main__":
    main()
