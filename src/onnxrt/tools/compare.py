"""Compare onnxrt with onnxruntime on the same inputs, and find the first node whose output diverges."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper

from ..dtypes import onnx_type


@dataclass
class Difference:
    """How far two values are: max absolute and relative differences, and whether they agree."""

    name: str
    max_abs: float
    max_rel: float
    ok: bool
    note: str = ""


def stats(value: Any) -> str:
    """One-line statistics of a value (shape, dtype, min, max, mean, NaN count)."""
    if not isinstance(value, np.ndarray):
        return type(value).__name__
    head = f"{value.dtype}{list(value.shape)}"
    if value.size == 0 or value.dtype.kind not in "biufc":
        return head
    v = np.abs(value) if value.dtype.kind == "c" else value.astype(np.float64)
    nan = int(np.isnan(v).sum())
    f = v[~np.isnan(v)] if nan else v
    if f.size == 0:
        return f"{head} all NaN"
    return f"{head} min={f.min():.6g} max={f.max():.6g} mean={f.mean():.6g} nan={nan}"


def difference(name: str, a: Any, b: Any, rtol: float, atol: float) -> Difference:
    """Compare value ``a`` (onnxrt) with ``b`` (onnxruntime)."""
    if isinstance(a, list) or isinstance(b, list):
        if not (isinstance(a, list) and isinstance(b, list)) or len(a) != len(b):
            return Difference(name, float("inf"), float("inf"), False, "sequence lengths differ")
        diffs = [difference(f"{name}[{i}]", x, y, rtol, atol) for i, (x, y) in enumerate(zip(a, b))]
        worst = max(diffs, key=lambda d: d.max_abs, default=Difference(name, 0.0, 0.0, True))
        return Difference(name, worst.max_abs, worst.max_rel, all(d.ok for d in diffs), worst.note)
    a = np.asarray(a)
    b = np.asarray(b)
    if a.shape != b.shape:
        return Difference(name, float("inf"), float("inf"), False, f"shapes differ: {list(a.shape)} vs {list(b.shape)}")
    if a.dtype.kind in "OUS" or b.dtype.kind in "OUS" or a.dtype.kind == "b":
        same = bool(np.array_equal(a, b))
        return Difference(name, 0.0 if same else float("inf"), 0.0 if same else float("inf"), same)
    if a.size == 0:
        return Difference(name, 0.0, 0.0, True)
    x = a.astype(np.complex128 if a.dtype.kind == "c" else np.float64)
    y = b.astype(np.complex128 if b.dtype.kind == "c" else np.float64)
    both_nan = np.isnan(x) & np.isnan(y)
    d = np.where(both_nan, 0.0, np.abs(x - y))
    d = np.where(np.isnan(d), np.inf, d)
    rel = d / np.maximum(np.abs(y), 1e-12)
    ok = bool(np.all(d <= atol + rtol * np.abs(np.where(np.isnan(y), 0, y))))
    note = "" if a.dtype == b.dtype else f"dtypes differ: {a.dtype} vs {b.dtype}"
    return Difference(name, float(d.max()), float(rel.max()), ok and not note, note)


def _ort_session(model: onnx.ModelProto) -> Any:
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.log_severity_level = 3
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def compare(model: onnx.ModelProto, feeds: dict[str, Any], rtol: float = 1e-3, atol: float = 1e-5) -> list[Difference]:
    """Run both runtimes; one Difference per graph output."""
    import onnxrt

    ours = onnxrt.InferenceSession(model).run(None, feeds)
    theirs = _ort_session(model).run(None, feeds)
    names = [o.name for o in model.graph.output]
    return [difference(n, a, b, rtol, atol) for n, a, b in zip(names, ours, theirs)]


@dataclass
class Divergence:
    """The first node (in execution order) whose output differs beyond tolerance."""

    node_name: str
    op_type: str
    output: str
    ours: Any
    theirs: Any
    diff: Difference


def first_divergence(
    model: onnx.ModelProto,
    feeds: dict[str, Any],
    rtol: float = 1e-3,
    atol: float = 1e-5,
    progress: Any = None,
) -> Divergence | None:
    """Expose every node output of the main graph as an onnxruntime output and walk the
    nodes in onnxrt's execution order until one disagrees."""
    import onnxrt

    oinf = onnxrt.OnnxInference(model)
    values = oinf.run(feeds, intermediate=True)
    debug = onnx.ModelProto()
    debug.CopyFrom(model)
    existing = {o.name for o in debug.graph.output}
    candidates: list[tuple[Any, str]] = []
    for st in oinf.plan.steps:
        for out in st.node.output:
            if out and out in values and isinstance(values[out], np.ndarray) and not st.node.origin:
                candidates.append((st, out))
                if out not in existing:
                    debug.graph.output.append(helper.make_tensor_value_info(out, onnx_type(values[out].dtype), None))
                    existing.add(out)
    sess = _ort_session(debug)
    names = [o.name for o in debug.graph.output]
    theirs = dict(zip(names, sess.run(None, feeds)))
    iterator = progress(candidates) if progress is not None else candidates
    for st, out in iterator:
        if out not in theirs:
            continue
        d = difference(out, values[out], theirs[out], rtol, atol)
        if not d.ok:
            return Divergence(st.name, st.op_type, out, values[out], theirs[out], d)
    return None
