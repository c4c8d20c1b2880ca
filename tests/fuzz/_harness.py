"""Single-node models from fuzz cases, the three runtimes (onnxrt, onnx.reference, onnxruntime) and the comparison."""

from __future__ import annotations

import importlib.util
from collections import Counter
from dataclasses import dataclass
from typing import Any

import numpy as np
import onnx
from onnx import helper, numpy_helper

import onnxrt
from onnxrt.errors import OnnxRuntimeError

from ._gen import BF16, F8, I4, STRING, Node, P, elem_type, is_float

IR_VERSION = 11
#: onnxruntime is a test extra: without it the fuzzer compares with onnx.reference alone
HAVE_ORT = importlib.util.find_spec("onnxruntime") is not None


@dataclass
class Case:
    """A drawn example: the operator, its opset, the node and how inputs are declared."""

    op: str
    opset: int
    node: Node
    #: 'static' (concrete dims), 'symbolic' (dim_param names) or 'rank' (unknown dims)
    declare: str = "static"
    #: store the P parameters as initializers instead of feeding them
    const_params: bool = False
    domain: str = ""

    def describe(self) -> str:
        parts = []
        for i, v in enumerate(self.node.inputs):
            if v is None:
                parts.append(f"x{i}=<omitted>")
                continue
            arr = np.asarray(v.value if isinstance(v, P) else v)
            kind = "init" if isinstance(v, P) and self.const_params else "feed"
            body = np.array2string(arr, threshold=40, max_line_width=200) if arr.dtype != STRING else repr(arr.tolist())
            parts.append(f"x{i}: {kind} {arr.dtype}{list(arr.shape)} = {body}")
        return f"{self.op}-{self.opset} attrs={self.node.attrs!r} declare={self.declare}\n  " + "\n  ".join(parts)


def _value_info(name: str, arr: np.ndarray, declare: str) -> onnx.ValueInfoProto:
    if declare == "static":
        shape: Any = list(arr.shape)
    elif declare == "symbolic":
        shape = [f"{name}_d{i}" for i in range(arr.ndim)]
    else:
        shape = [None] * arr.ndim
    return helper.make_tensor_value_info(name, elem_type(arr.dtype), shape)


def build_model(case: Case, strict: bool = True) -> tuple[onnx.ModelProto, dict[str, np.ndarray], list[int]]:
    """The single-node model (inputs typed, outputs with an element type and no shape), its feeds,
    and the element types onnx's type inference declares for the outputs (the spec's types)."""
    names, graph_inputs, inits, feeds = [], [], [], {}
    for i, v in enumerate(case.node.inputs):
        if v is None:
            names.append("")
            continue
        name = f"x{i}"
        names.append(name)
        arr = np.asarray(v.value if isinstance(v, P) else v)
        if isinstance(v, P) and case.const_params:
            inits.append(numpy_helper.from_array(arr, name))
        else:
            graph_inputs.append(_value_info(name, arr, case.declare))
            feeds[name] = arr
    while names and names[-1] == "":
        names.pop()
    outs = [f"y{i}" for i in range(case.node.n_outputs)]
    node = helper.make_node(case.op, names, outs, name="fuzzed", domain=case.domain, **case.node.attrs)
    opsets = [helper.make_opsetid(case.domain, case.opset)]
    graph = helper.make_graph([node], "fuzz", graph_inputs, [helper.make_empty_tensor_value_info(o) for o in outs], inits)
    model = helper.make_model(graph, opset_imports=opsets, ir_version=IR_VERSION)
    try:
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=True)
    except onnx.shape_inference.InferenceError:
        if strict:
            raise
        inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
    types = [o.type.tensor_type.elem_type for o in inferred.graph.output]
    # onnx infers no type for a few old versions (Compress-9...): those keep the first input's type
    first = next((v.value if isinstance(v, P) else v for v in case.node.inputs if v is not None), None)
    types = [t or (elem_type(first.dtype) if first is not None else t) for t in types]
    del model.graph.output[:]
    model.graph.output.extend(helper.make_tensor_value_info(o, t, None) for o, t in zip(outs, types))
    return model, feeds, types


# -- the runtimes ----------------------------------------------------------------------


def run_onnxrt(model: onnx.ModelProto, feeds: dict[str, np.ndarray], options: Any = None) -> list[Any]:
    return onnxrt.InferenceSession(model, sess_options=options).run(None, feeds)


def run_reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[Any]:
    from onnx.reference import ReferenceEvaluator

    return list(ReferenceEvaluator(model).run(None, feeds))


class OrtRefused(Exception):
    """onnxruntime has no kernel for the case (NOT_IMPLEMENTED) or rejects the graph (INVALID_GRAPH)."""


def run_ort(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[Any]:
    import onnxruntime as ort
    from onnxruntime.capi import onnxruntime_pybind11_state as state

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 4
    # onnxruntime spins its idle threads by default, stealing the CPU from the other runtimes
    opts.add_session_config_entry("session.intra_op.allow_spinning", "0")
    try:
        sess = ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])
    except (state.NotImplemented, state.InvalidGraph) as e:
        raise OrtRefused(str(e).splitlines()[0][:200]) from None
    return sess.run(None, feeds)


# -- comparison ------------------------------------------------------------------------

#: (rtol, atol) per float element type; atol is scaled by max(1, max|expected|)
TOLERANCES = {
    np.dtype(np.float64): (1e-9, 1e-11),
    np.dtype(np.float32): (1e-4, 1e-5),
    np.dtype(np.float16): (4e-3, 2e-3),
    BF16: (1.6e-2, 1.6e-2),
}


def _bits(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(a).view(f"u{a.dtype.itemsize}").reshape(a.shape)


def _as_f64(a: np.ndarray) -> np.ndarray:
    return np.asarray(a).astype(np.float64)


def mismatch(actual: Any, expected: Any, exact: bool, tol: float, tol_dtype: Any = None) -> str | None:
    """Why ``actual`` (onnxrt) differs from ``expected`` (an oracle), or None when they agree.

    Shapes and dtypes must be equal; integers, booleans and strings exactly; floats within the
    tolerance of their type (NaN where NaN, infinities of the same sign), or bit for bit when
    ``exact`` (operators that only move or convert values)."""
    if not isinstance(expected, np.ndarray):
        expected = np.asarray(expected)
    if not isinstance(actual, np.ndarray):
        return f"onnxrt returned {type(actual).__name__}, not an array"
    if actual.shape != expected.shape:
        return f"shape {actual.shape} != {expected.shape}"
    # tensor(string) is an object array in onnxrt and onnxruntime, a str array in onnx.reference
    if actual.dtype != expected.dtype and not (actual.dtype.kind in "OUS" and expected.dtype.kind in "OUS"):
        return f"dtype {actual.dtype} != {expected.dtype}"
    if actual.size == 0:
        return None
    if actual.dtype == STRING or actual.dtype.kind in "OUS":
        return None if actual.tolist() == expected.tolist() else "strings differ"
    bad = differing(actual, expected, exact, tol, tol_dtype)
    return _diff_report(actual, expected, bad) if bad.any() else None


def differing(actual: np.ndarray, expected: np.ndarray, exact: bool, tol: float, tol_dtype: Any = None) -> np.ndarray:
    """The positions where two numeric arrays of one shape and dtype disagree (see mismatch)."""
    dt = actual.dtype
    if not is_float(dt):
        if dt in I4:
            return actual.astype(np.int8) != expected.astype(np.int8)
        return actual != expected
    a, e = _as_f64(actual), _as_f64(expected)
    nan_a, nan_e = np.isnan(a), np.isnan(e)
    if exact:
        ok = (nan_a & nan_e) | ((_bits(actual) == _bits(expected)) & ~nan_a & ~nan_e)
        # +0 and -0 are the same value; their sign is not what these operators are about
        ok |= (a == 0) & (e == 0)
        return ~ok
    if dt in F8:
        rtol, atol = 0.0, 0.0
    else:
        rtol, atol = TOLERANCES[dt]
        if tol_dtype is not None and np.dtype(tol_dtype) in TOLERANCES:  # the looser of the two
            rtol, atol = (max(x, y) for x, y in zip((rtol, atol), TOLERANCES[np.dtype(tol_dtype)]))
    rtol, atol = rtol * tol, atol * tol
    finite = np.isfinite(e)
    scale = max(1.0, float(np.max(np.abs(e[finite]))) if finite.any() else 1.0)
    with np.errstate(invalid="ignore"):
        close = np.abs(a - e) <= atol * scale + rtol * np.abs(e)
    inf_same = ~finite & ~nan_e & (a == e)
    return ~((nan_a & nan_e) | (finite & ~nan_a & close) | inf_same)


#: while the deviations of a case are checked: (id(onnxrt output), id(oracle output)) -> the
#: positions the comparison rejected, so that predicates judge exactly those
REJECTED: dict[tuple[int, int], np.ndarray] = {}


def _diff_report(actual: np.ndarray, expected: np.ndarray, bad: np.ndarray | None = None) -> str:
    if bad is None:
        bad = actual != expected
    idx = np.argwhere(bad)[:4]
    items = ", ".join(f"{tuple(int(i) for i in ix)}: {actual[tuple(ix)]!r} vs {expected[tuple(ix)]!r}" for ix in idx)
    return f"{int(np.sum(bad))} of {actual.size} values differ ({items})"


@dataclass
class Deviation:
    """A known, proven oracle deviation from the spec: ``applies(case, feeds, onnxrt_outputs,
    oracle_outputs)`` recognises the exact situation, ``test`` names the test of tests/fuzz/test_oracle_disagreements.py
    that builds the minimal case and asserts both values."""

    op: str
    oracle: str
    applies: Any
    test: str


def check_case(case: Case, spec: Any, stats: Counter, deviations: list[Deviation], options: Any = None) -> None:
    """Run the case through onnxrt (a session with ``options``) and both oracles, compare, and count what happened."""
    model, feeds, types = build_model(case, strict=spec.strict_inference)
    originals = {k: v.copy() for k, v in feeds.items()}
    try:
        got = run_onnxrt(model, feeds, options)
        err = None
    except OnnxRuntimeError as e:
        got, err = None, e
    for k, v in feeds.items():  # the caller's arrays are never modified
        if mismatch(v, originals[k], True, 1.0) is not None:
            raise AssertionError(f"onnxrt modified input {k!r}\n{case.describe()}")

    oracles: dict[str, Any] = {}
    try:
        oracles["reference"] = run_reference(model, feeds)
    except Exception as e:  # noqa: BLE001  (the reference raises many kinds of errors)
        stats["reference raised"] += 1
        oracles["reference"] = e
    if spec.ort and spec.ort_skip is not None and spec.ort_skip(case, feeds):
        stats["onnxruntime skipped (it aborts)"] += 1
    elif spec.ort and HAVE_ORT:
        try:
            oracles["onnxruntime"] = [_ort_value(o, t) for o, t in zip(run_ort(model, feeds), types)]
        except OrtRefused as e:
            stats["onnxruntime refused"] += 1
            oracles["onnxruntime"] = e
        except Exception as e:  # noqa: BLE001  (a run-time failure of onnxruntime)
            stats["onnxruntime raised"] += 1
            oracles["onnxruntime"] = e

    succeeded = {k: v for k, v in oracles.items() if not isinstance(v, Exception)}
    if err is not None:
        if succeeded:
            names = ", ".join(succeeded)
            raise AssertionError(f"onnxrt raised {type(err).__name__}: {err}\nbut {names} ran the case\n{case.describe()}")
        stats["rejected by all"] += 1
        return

    if len(got) != len(types):
        raise AssertionError(f"onnxrt returned {len(got)} outputs, the node names {len(types)}\n{case.describe()}")
    for i, (g, t) in enumerate(zip(got, types)):
        if not isinstance(g, np.ndarray):
            raise AssertionError(f"output {i} is a {type(g).__name__}, not an array\n{case.describe()}")
        if elem_type(g.dtype) != t:
            raise AssertionError(
                f"output {i} has dtype {g.dtype}, the spec's type is {onnx.TensorProto.DataType.Name(t)}\n{case.describe()}"
            )
    canon = case.node.canon or (lambda outs, node: outs)
    got_c = canon(list(got), case.node)
    tol_dtype = spec.tol_dtype(case) if spec.tol_dtype is not None else None
    verdicts: dict[str, tuple[list, list[str]]] = {}
    for name, outs in succeeded.items():
        outs_c = canon(list(outs), case.node)
        verdicts[name] = (outs_c, [
            f"output {i}: {why}"
            for i, (g, o) in enumerate(zip(got_c, outs_c))
            if (why := mismatch(g, o, spec.exact, spec.tol, tol_dtype)) is not None
        ])
    for name, (outs_c, problems) in verdicts.items():
        if not problems:
            stats[f"{name} agreed"] += 1
            continue
        REJECTED.clear()
        for g, o in zip(got_c, outs_c):
            if isinstance(g, np.ndarray) and isinstance(o, np.ndarray) and g.shape == o.shape and g.dtype == o.dtype and g.dtype.kind not in "OUS":
                REJECTED[(id(g), id(o))] = differing(g, o, spec.exact, spec.tol, tol_dtype)
        try:
            known = [
                d for d in deviations if d.op == case.op and d.oracle == name and d.applies(case, feeds, got_c, outs_c)
            ]
        finally:
            REJECTED.clear()
        if known:
            stats[f"{name} known deviation ({known[0].test})"] += 1
            continue
        shown = "\n".join(
            f"  output {i}: onnxrt {_short(g)}\n    {name:>15s} {_short(o)}" for i, (g, o) in enumerate(zip(got_c, outs_c))
        )
        others = "".join(
            f"\n  {k}: {'raised ' + type(v).__name__ + ': ' + str(v)[:200] if isinstance(v, Exception) else 'agreed' if not verdicts[k][1] else 'disagreed too'}"
            for k, v in oracles.items()
            if k != name
        )
        raise AssertionError(f"onnxrt and {name} disagree: {'; '.join(problems)}\n{case.describe()}\n{shown}{others}")
    if not succeeded:
        stats["no oracle ran"] += 1


def _ort_value(value: Any, elem: int) -> Any:
    """onnxruntime's Python API returns float 8 tensors as their uint8 bit patterns."""
    dt = onnx.helper.tensor_dtype_to_np_dtype(elem) if elem else None
    if isinstance(value, np.ndarray) and value.dtype == np.uint8 and dt is not None and np.dtype(dt) in F8:
        return value.view(dt)
    return value


def _short(a: Any) -> str:
    a = np.asarray(a)
    body = repr(a.tolist()) if a.dtype == STRING else np.array2string(a, threshold=30, max_line_width=160)
    return f"{a.dtype}{list(a.shape)} {body}"
