"""Profiling: per-node events in the Chrome trace event format onnxruntime writes (chrome://tracing, Perfetto)."""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

import numpy as np

from ..dtypes import NP_TO_ONNX, elem_name


def _type_shape(value: Any) -> dict[str, Any]:
    if isinstance(value, np.ndarray):
        code = NP_TO_ONNX.get(value.dtype)
        name = "string" if value.dtype.kind in "OUS" else (elem_name(code) if code else str(value.dtype))
        return {name: list(value.shape)}
    if isinstance(value, list):
        return {"sequence": [len(value)]}
    return {type(value).__name__: []}


class Profiler:
    """Collects one complete ('X') event per node run and per model run; thread-safe.

    The first ``warmup_runs`` runs carry one-time costs (kernels loading, weights prepared:
    ``OnnxInference.warmup_runs``): their events have ``args["warmup"] = True``, and
    :func:`summarize` leaves them out of the steady-state tables (:func:`warmup_runs` sums them).
    """

    def __init__(self, prefix: str = "onnxrt_profile", warmup_runs: int = 0):
        self.prefix = prefix
        self.start_ns = time.perf_counter_ns()
        self.wall_start = time.time()
        self.events: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        self.warmup_runs = warmup_runs
        #: runs started so far (the run index of the next node_trace)
        self.runs = 0

    def _us(self, t_ns: int) -> float:
        return (t_ns - self.start_ns) / 1e3

    def node_trace(self) -> Any:
        """A ``trace(step, args, results, seconds)`` callback for one run; its ``warmup``
        attribute says whether the run is one of the warm-up runs (pass it to :meth:`model_event`)."""
        tid = threading.get_ident() % 100000
        pid = os.getpid()
        with self._lock:
            warmup = self.runs < self.warmup_runs
            self.runs += 1

        def trace(st: Any, args: list[Any], res: tuple[Any, ...], dt: float) -> None:
            end = time.perf_counter_ns()
            dur = dt * 1e6
            event = {
                "cat": "Node",
                "pid": pid,
                "tid": tid,
                "dur": round(dur, 3),
                "ts": round(self._us(end) - dur, 3),
                "ph": "X",
                "name": f"{st.name or st.op_type}_kernel_time",
                "args": {
                    "op_name": st.op_type,
                    "node_name": st.name,
                    "provider": "CPUExecutionProvider",
                    "input_type_shape": [_type_shape(a) for a in args if a is not None],
                    "output_type_shape": [_type_shape(r) for r in res if r is not None],
                },
            }
            if warmup:
                event["args"]["warmup"] = True
            with self._lock:
                self.events.append(event)

        trace.warmup = warmup  # type: ignore[attr-defined]
        return trace

    def model_event(self, t0_ns: int, t1_ns: int, warmup: bool = False) -> None:
        with self._lock:
            self.events.append(
                {
                    "cat": "Session",
                    "pid": os.getpid(),
                    "tid": threading.get_ident() % 100000,
                    "dur": round((t1_ns - t0_ns) / 1e3, 3),
                    "ts": round(self._us(t0_ns), 3),
                    "ph": "X",
                    "name": "model_run",
                    "args": {"warmup": True} if warmup else {},
                }
            )

    def write(self, folder: str | None = None) -> str:
        """Write the events as a JSON array; returns the file's path."""
        stamp = time.strftime("%Y-%m-%d_%H-%M-%S", time.localtime(self.wall_start))
        path = os.path.join(folder or os.getcwd(), f"{self.prefix}_{stamp}_{os.getpid()}_{id(self) % 10000}.json")
        with self._lock:
            events = list(self.events)
        with open(path, "w", encoding="utf-8") as f:  # one event a line, as onnxruntime writes them
            f.write("[\n" + ",\n".join(json.dumps(e) for e in events) + "\n]\n")
        return path


def summarize(events: list[dict[str, Any]]) -> tuple[list[tuple[str, float, int]], list[tuple[str, str, float]]]:
    """(op type, total µs, count) by decreasing time, and the ten slowest (node, op type, µs),
    over the steady runs (warm-up runs' events are left out: see :func:`warmup_runs`)."""
    by_op: dict[str, list[float]] = {}
    nodes: dict[tuple[str, str], float] = {}
    for e in events:
        if e.get("cat") != "Node" or e["args"].get("warmup"):
            continue
        op = e["args"]["op_name"]
        by_op.setdefault(op, []).append(e["dur"])
        key = (e["args"].get("node_name") or e["name"], op)
        nodes[key] = nodes.get(key, 0.0) + e["dur"]
    ops = sorted(((k, float(sum(v)), len(v)) for k, v in by_op.items()), key=lambda t: -t[1])
    slow = sorted(((n, op, t) for (n, op), t in nodes.items()), key=lambda t: -t[2])[:10]
    return ops, slow


def warmup_runs(events: list[dict[str, Any]]) -> list[float]:
    """The durations (µs) of the warm-up runs of a trace, in order."""
    runs = [e for e in events if e.get("cat") == "Session" and e.get("name") == "model_run" and e["args"].get("warmup")]
    return [e["dur"] for e in sorted(runs, key=lambda e: e["ts"])]


def svg_bar_chart(rows: list[tuple[str, float]], title: str, unit: str = "ms") -> str:
    """A horizontal bar chart as a standalone SVG document (no plotting dependency)."""
    from xml.sax.saxutils import escape

    width, bar_h, left, top = 720, 22, 200, 40
    height = top + bar_h * len(rows) + 20
    vmax = max((v for _, v in rows), default=1.0) or 1.0
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" font-family="sans-serif" font-size="12">',
        f'<text x="10" y="22" font-size="15" font-weight="bold">{escape(title)}</text>',
    ]
    for i, (label, v) in enumerate(rows):
        y = top + i * bar_h
        w = (width - left - 90) * v / vmax
        parts.append(f'<text x="{left - 6}" y="{y + 15}" text-anchor="end">{escape(label[:28])}</text>')
        parts.append(f'<rect x="{left}" y="{y + 3}" width="{w:.1f}" height="{bar_h - 6}" fill="#4a7bd0"/>')
        parts.append(f'<text x="{left + w + 5:.1f}" y="{y + 15}">{v:.3f} {unit}</text>')
    parts.append("</svg>")
    return "\n".join(parts)
