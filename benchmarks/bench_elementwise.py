"""Element-wise, reduction and layout operators: onnxrt vs onnxruntime at about 1e6 elements.

Usage: python benchmarks/bench_elementwise.py [--repeat 25] [--ort-threads N] [--reference]
Prints a markdown table of median times (runtimes run alternately in one process) and the
ratio onnxrt/onnxruntime (lower is better; the target is <= 1.3). Operators onnxrt does not
register yet are skipped with a note. ``--ort-threads 1`` compares against a single-threaded
onnxruntime (numpy kernels run on one core). onnxruntime's worker threads spin-wait after
each run by default, which steals the CPU from the runtime timed next on a small machine:
the benchmark turns spinning off (``--ort-spin`` keeps it).
"""

from __future__ import annotations

import _env  # noqa: F401  (first: OpenBLAS reads its settings when numpy loads it)

import argparse
import os
import sys

import numpy as np
from onnx import TensorProto, helper

sys.path.insert(0, os.path.dirname(__file__))
from _common import fmt_time, make_runners, markdown_table, ort_session, time_alternating  # noqa: E402

F, F16, I64 = TensorProto.FLOAT, TensorProto.FLOAT16, TensorProto.INT64
OPSET = 18
TARGET = 1.3


def _model(op: str, inputs: list[tuple[str, int, list[int]]], out_type: int = F, initializers=(), **atts):
    names = [n for n, _, _ in inputs] + [t.name for t in initializers]
    node = helper.make_node(op, names, ["y"], **atts)
    graph = helper.make_graph(
        [node],
        op,
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [helper.make_tensor_value_info("y", out_type, None)],
        list(initializers),
    )
    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    m.ir_version = 8
    return m


def cases(rng: np.random.Generator):
    """(label, op_type, model, feeds) per benchmarked operator, about 1e6 elements each."""
    n = 1000
    x = rng.standard_normal((n, n)).astype(np.float32)
    x2 = rng.standard_normal((n, n)).astype(np.float32)
    row = rng.standard_normal((n,)).astype(np.float32)
    shape = [n, n]
    yield "Add (broadcast [1000,1000]+[1000])", "Add", _model("Add", [("a", F, shape), ("b", F, [n])]), {"a": x, "b": row}
    yield "Mul [1000,1000]", "Mul", _model("Mul", [("a", F, shape), ("b", F, shape)]), {"a": x, "b": x2}
    for op in ("Relu", "Sigmoid", "Erf"):
        yield f"{op} [1000,1000]", op, _model(op, [("x", F, shape)]), {"x": x}
    yield "Cast float32->float16", "Cast", _model("Cast", [("x", F, shape)], out_type=F16, to=F16), {"x": x}
    for label, axis in (("inner", 1), ("outer", 0)):
        axes = helper.make_tensor("axes", I64, [1], [axis])
        yield (
            f"ReduceSum {label} axis",
            "ReduceSum",
            _model("ReduceSum", [("x", F, shape)], initializers=[axes], keepdims=1),
            {"x": x},
        )
    yield "Softmax axis=-1", "Softmax", _model("Softmax", [("x", F, shape)], axis=-1), {"x": x}
    yield "Transpose [1000,1000]", "Transpose", _model("Transpose", [("x", F, shape)], perm=[1, 0]), {"x": x}
    half = [n // 2, n]
    yield (
        "Concat 2x[500,1000] axis=0",
        "Concat",
        _model("Concat", [("a", F, half), ("b", F, half)], axis=0),
        {"a": x[: n // 2].copy(), "b": x[n // 2 :].copy()},
    )
    m = 512
    a = rng.standard_normal((m, m)).astype(np.float32)
    b = rng.standard_normal((m, m)).astype(np.float32)
    yield "MatMul 512x512", "MatMul", _model("MatMul", [("a", F, [m, m]), ("b", F, [m, m])]), {"a": a, "b": b}


def _check_close(runners, feeds, atol: float) -> None:
    """Every runtime gives onnxrt's outputs (MatMul sums in another order: atol scales with it)."""
    ref = runners["onnxrt"](feeds)
    for name, fn in runners.items():
        if name == "onnxrt":
            continue
        for a, b in zip(ref, fn(feeds)):
            np.testing.assert_allclose(np.asarray(a, np.float64), np.asarray(b, np.float64), rtol=1e-3, atol=atol, err_msg=name)


def _ort_session(runners, model, threads: int, spin: bool) -> None:
    """Replace the onnxruntime runner: ``threads`` intra-op threads (0: its default), spinning or not."""
    runners["onnxruntime"] = ort_session(model.SerializeToString(), threads, spin)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=25)
    parser.add_argument("--ort-threads", type=int, default=0, help="onnxruntime intra-op threads (0: its default)")
    parser.add_argument("--ort-spin", action="store_true", help="leave onnxruntime's thread spinning on")
    parser.add_argument("--reference", action="store_true", help="also time onnx.reference")
    args = parser.parse_args()
    from onnxrt import registry

    rng = np.random.default_rng(0)
    rows = []
    for label, op, model, feeds in cases(rng):
        if registry.lookup(op, "", OPSET) is None:
            print(f"  skipped {label}: onnxrt has no {op} kernel for opset {OPSET} yet", file=sys.stderr)
            rows.append([label, "-", "-", "-", "skipped (not registered)"])
            continue
        runners = make_runners(model, with_reference=args.reference)
        _ort_session(runners, model, args.ort_threads, args.ort_spin)
        _check_close(runners, feeds, atol=1e-3 if op == "MatMul" else 1e-5)
        med = time_alternating(runners, feeds, repeat=args.repeat, slow={"onnx.reference": 5})
        ratio = med["onnxrt"] / med["onnxruntime"]
        rows.append(
            [label, fmt_time(med["onnxrt"]), fmt_time(med["onnxruntime"]), f"{ratio:.2f}", "ok" if ratio <= TARGET else f"> {TARGET}"]
        )
        print(f"  {label}: onnxrt/ort {ratio:.2f}", file=sys.stderr)
    threads = args.ort_threads or "default"
    spin = "on" if args.ort_spin else "off"
    print(f"onnxruntime intra-op threads: {threads}, spinning {spin}; numpy {np.__version__}; {os.cpu_count()} CPUs")
    print(markdown_table(["operator", "onnxrt", "onnxruntime", "onnxrt/ort", f"target <= {TARGET}"], rows))


if __name__ == "__main__":
    main()
