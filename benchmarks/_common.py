"""Shared benchmark machinery: alternating timed runs of several runtimes in one process, medians, tables.

The project's rule for onnxrt vs onnxruntime is now each runtime in its own worker process,
with onnxruntime's default options (``_workers.py``: bench_models, bench_nn, bench_zoo).
The in-process helpers here (``make_runners``, ``ort_session`` without spinning,
``time_alternating``) remain for the operator benchmarks not moved yet.
"""

from __future__ import annotations

import statistics
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx


def ort_options(threads: int = 0, spin: bool = False) -> Any:
    """onnxruntime session options for a side-by-side benchmark: ``threads`` intra-op threads
    (0: its default) and, unless ``spin``, worker threads that do not spin-wait after a run.

    Runtimes alternate in one process: onnxruntime's spinning threads would keep the second
    core busy for milliseconds after each of its runs, and onnxrt's next run, which uses
    that core through its own pool, would pay for them (a 3x3 convolution measured 5.3 ms
    right after an onnxruntime run, 3.2 ms alone).
    """
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    if threads:
        opts.intra_op_num_threads = threads
        opts.inter_op_num_threads = 1
    if not spin:
        opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
        opts.add_session_config_entry("session.inter_op.allow_spinning", "0")
    return opts


def ort_session(data: bytes, threads: int = 0, spin: bool = False) -> Callable[[dict[str, Any]], Any]:
    """run(feeds) of an onnxruntime session built with :func:`ort_options`."""
    import onnxruntime as ort

    sess = ort.InferenceSession(data, ort_options(threads, spin), providers=["CPUExecutionProvider"])
    return lambda feeds: sess.run(None, feeds)


def make_runners(model: onnx.ModelProto, with_reference: bool = True) -> dict[str, Callable[[dict[str, Any]], Any]]:
    """name -> run(feeds) for onnxrt, onnxruntime and (optionally) onnx.reference."""
    import onnxrt

    data = model.SerializeToString()
    runners: dict[str, Callable[[dict[str, Any]], Any]] = {}
    sess = onnxrt.InferenceSession(data)
    runners["onnxrt"] = lambda feeds: sess.run(None, feeds)
    runners["onnxruntime"] = ort_session(data)
    if with_reference:
        from onnx.reference import ReferenceEvaluator

        ref = ReferenceEvaluator(model)
        runners["onnx.reference"] = lambda feeds: ref.run(None, feeds)
    return runners


def time_alternating(
    runners: dict[str, Callable[[dict[str, Any]], Any]],
    feeds: dict[str, Any],
    repeat: int = 15,
    max_seconds: float = 20.0,
    slow: dict[str, int] | None = None,
) -> dict[str, float]:
    """Median seconds per runtime; runtimes take turns each round (noise hits all alike).

    ``slow`` caps the number of rounds for named runtimes (onnx.reference is slow). Calls
    that take under 100 us are timed in batches of up to 200 calls (the same count for
    every runtime, about 1 ms per batch): a single call that short is mostly the timer's
    and the scheduler's noise.
    """
    slow = slow or {}
    runners = dict(runners)
    warm: dict[str, float] = {}
    for name, fn in list(runners.items()):  # warm-up; a runtime that fails is left out
        try:
            fn(feeds)
            t0 = time.perf_counter()
            fn(feeds)
            warm[name] = time.perf_counter() - t0
        except Exception as e:  # noqa: BLE001
            print(f"  {name} failed: {type(e).__name__}: {str(e)[:120]}", file=sys.stderr)
            del runners[name]
    longest = max((t for n, t in warm.items() if n not in slow), default=1.0)
    inner = 1 if longest >= 1e-4 else min(200, max(1, int(1e-3 / max(longest, 1e-6))))
    times: dict[str, list[float]] = {k: [] for k in runners}
    start = time.perf_counter()
    for r in range(repeat):
        for name, fn in runners.items():
            if r >= slow.get(name, repeat):
                continue
            n = 1 if name in slow else inner
            t0 = time.perf_counter()
            for _ in range(n):
                fn(feeds)
            times[name].append((time.perf_counter() - t0) / n)
        if time.perf_counter() - start > max_seconds and r >= 2:
            break
    return {k: statistics.median(v) for k, v in times.items() if v}


def check_same(runners: dict[str, Callable[[dict[str, Any]], Any]], feeds: dict[str, Any], rtol: float = 1e-4) -> None:
    """Assert every runtime gives onnxrt's outputs (a benchmark of wrong results is worthless)."""
    ref = runners["onnxrt"](feeds)
    for name, fn in runners.items():
        if name in ("onnxrt", "onnx.reference"):
            continue
        for a, b in zip(ref, fn(feeds)):
            np.testing.assert_allclose(np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64), rtol=rtol, atol=1e-5, err_msg=name)


def fmt_time(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    if seconds < 1e-3:
        return f"{seconds * 1e6:.1f} µs"
    if seconds < 1:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds:.2f} s"


def markdown_table(headers: list[str], rows: list[list[str]]) -> str:
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    line = lambda cells: "| " + " | ".join(c.ljust(w) for c, w in zip(cells, widths)) + " |"  # noqa: E731
    out = [line(headers), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out.extend(line(r) for r in rows)
    return "\n".join(out)
