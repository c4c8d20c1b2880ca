"""OnnxInference: load, check and plan a model once, then run it on dicts of values."""

from __future__ import annotations

import difflib
import operator
import os
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import onnx

from . import compat
from .dtypes import ONNX_TO_NP, elem_name, same_dtype, type_shape, type_string
from .errors import InvalidFeedError, OnnxRuntimeError, describe_value
from .functions import check_expansion, expansion_budget, function_key
from .model import check_versions, initializer_array, load_limit, load_model, read_weights_apart
from . import native as _jit
from . import dispatch
from .native import no_jit_run
from .context import ExecutionContext
from .parallel import _TLS, EAGER_BLAS_SIZE, RunScope, gate_enter, gate_exit
from .plan import Hooks, Plan, Step, optimization_level
from .ortvalue import SparseFeed


def _static_info(model: onnx.ModelProto, options: Any) -> dict[str, Any]:
    """Static element types and shapes of the main graph's values (onnx shape inference),
    for the optimiser's shape folding; empty when inference fails or optimisation is off."""
    if optimization_level(options) <= 0 or not model.graph.node:
        return {}
    from .optim.graph import value_info_map

    try:
        inferred = onnx.shape_inference.infer_shapes(_without_weights(model), check_type=False, strict_mode=False,
                                                     data_prop=True)
    except Exception:  # noqa: BLE001  (inference is a help, never a requirement)
        return value_info_map(model.graph)
    return value_info_map(inferred.graph)


#: elements from which a floating-point initializer reaches shape inference without its data
_WEIGHT_ELEMENTS = 1024


def _is_weight(t: onnx.TensorProto) -> bool:
    return t.data_type in _FLOAT_TYPES and _elements(t) >= _WEIGHT_ELEMENTS


def _one_copy(proto: onnx.ModelProto, limit: int | None) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    """(the model without its weights' data, the weights decoded): the large floating-point
    initializers stored in the model (not external data) decoded and checked once, their data
    cleared, the rest copied into a fresh proto so that the parsed one, and the memory of its
    data, can go (protobuf frees a message's buffers with the message, not field by field)."""
    held: dict[str, np.ndarray] = {}
    for t in proto.graph.initializer:
        if t.data_location != onnx.TensorProto.EXTERNAL and _is_weight(t) and t.name not in held:
            held[t.name] = initializer_array(t, None, limit)
            for field in ("raw_data", "float_data", "double_data", "int32_data"):
                t.ClearField(field)
    if not held:
        return proto, held
    light = onnx.ModelProto()
    light.CopyFrom(proto)
    return light, held


def _without_weights(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model for onnx's shape inference, its large floating-point initializers keeping
    their names, types and dims but not their data. Inference serialises the model and
    parses a copy (gpt2 exported with its weights inside: 1.3 -> 3.2 GB of peak memory); it
    reads initializers' values only to propagate shapes, which come from small integer
    tensors (kept whole). The caller's model is not modified."""
    graph = model.graph
    if not any(_is_weight(t) for t in graph.initializer):
        return model
    light = onnx.ModelProto()
    for field in ("ir_version", "producer_name", "producer_version", "domain", "model_version", "doc_string"):
        setattr(light, field, getattr(model, field))
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    g = light.graph
    g.name = graph.name
    g.node.extend(graph.node)
    g.input.extend(graph.input)
    g.output.extend(graph.output)
    g.value_info.extend(graph.value_info)
    g.sparse_initializer.extend(graph.sparse_initializer)
    declared = {i.name for i in graph.input}
    for t in graph.initializer:
        if _is_weight(t):
            # an input typed as the tensor instead (IR < 4 models already list it as one)
            if t.name not in declared:
                g.input.append(onnx.helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)))
        else:
            g.initializer.append(t)
    return light


_FLOAT_TYPES = frozenset({onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16,
                          onnx.TensorProto.BFLOAT16})


def _elements(t: onnx.TensorProto) -> int:
    n = 1
    for d in t.dims:
        n *= d
    return n


class _InputSpec:
    """What a graph input accepts, precomputed for fast feed validation."""

    __slots__ = ("name", "kind", "elem_type", "shape", "type_str", "optional", "np_dtype", "rank", "static", "static_get", "static_dims", "sparse")

    def __init__(self, vi: onnx.ValueInfoProto, optional: bool):
        self.name = vi.name
        tp = vi.type
        self.kind = tp.WhichOneof("value") if vi.HasField("type") else None
        self.type_str = type_string(tp) if self.kind else "unknown"
        self.elem_type = tp.tensor_type.elem_type if self.kind == "tensor_type" else 0
        self.shape = type_shape(tp) if self.kind == "tensor_type" else None
        self.optional = optional
        # the fast path of _check_feed: a numeric dtype, a rank, the static dims
        dt = ONNX_TO_NP.get(self.elem_type) if self.kind == "tensor_type" else None
        self.np_dtype = dt if dt is not None and dt.kind != "O" else None
        self.rank = len(self.shape) if self.shape is not None else -1
        self.static = tuple((a, d) for a, d in enumerate(self.shape or ()) if isinstance(d, int))
        # the static dims read with one itemgetter call: a tuple of them, or the bare value
        # for a single static axis (as itemgetter returns it)
        axes = tuple(a for a, _ in self.static)
        self.static_get = operator.itemgetter(*axes) if axes else None
        dims = tuple(d for _, d in self.static)
        self.static_dims = dims[0] if len(dims) == 1 else dims
        #: a sparse tensor input's check (onnxrt.ortvalue.SparseFeed), None for other kinds
        self.sparse = SparseFeed(vi.name, self.type_str, tp) if self.kind == "sparse_tensor_type" else None


def _check_feed(spec: _InputSpec, value: Any) -> Any:
    """Validate one feed; returns the value the engine uses (a read-only view for arrays)."""
    if type(value) is np.ndarray and spec.np_dtype is not None and value.dtype == spec.np_dtype:
        shape = value.shape
        get = spec.static_get
        if spec.rank < 0 or (len(shape) == spec.rank and (get is None or get(shape) == spec.static_dims)):
            if value.flags.writeable:  # kernels see a read-only view: the caller's array cannot change
                value = value.view()
                value.flags.writeable = False
            return value
    return _check_feed_slow(spec, value)


# numpy (>= 2) keeps its floating-point error state in a context variable: setting it to a
# prepared "ignore everything" value costs a third of np.errstate's construction, enter and
# exit (~0.4 us against ~1.4 us), which counts on graphs that run in ~10 us. Private names:
# any other numpy takes np.errstate.
try:
    from numpy._core._ufunc_config import _extobj_contextvar as _FP_STATE
    from numpy._core._ufunc_config import _make_extobj

    _FP_IGNORE = _make_extobj(all="ignore")
except (ImportError, AttributeError, TypeError):  # pragma: no cover (numpy 1.x)
    _FP_STATE = None


def _large_feed(feeds: dict[str, Any]) -> bool:
    """Whether a feed is large enough for the run to hold BLAS at one thread (RunScope)."""
    for v in feeds.values():
        if type(v) is np.ndarray and v.size >= EAGER_BLAS_SIZE:
            return True
    return False


def _readonly(value: Any) -> Any:
    """A read-only view of an array (other values as they are): kernels cannot change it."""
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and value.flags.writeable:
        value = value.view()
        value.flags.writeable = False
    return value


def _check_feed_slow(spec: _InputSpec, value: Any) -> Any:
    """Every case but a well-formed numeric tensor: conversions and the error messages."""
    name = spec.name
    kind = spec.kind
    if kind == "optional_type":
        if value is None:
            return None
        return [_readonly(v) for v in value] if isinstance(value, list | tuple) else _readonly(value)
    if kind == "sequence_type":
        if not isinstance(value, list | tuple):
            raise InvalidFeedError(f"Input {name!r} expects a sequence ({spec.type_str}), got {type(value).__name__}.")
        for i, v in enumerate(value):
            if not isinstance(v, np.ndarray | np.generic):
                raise InvalidFeedError(f"Input {name!r} expects a sequence of numpy arrays, element {i} is a {type(v).__name__}.")
        return [_readonly(v) for v in value]
    if kind == "map_type":
        if not isinstance(value, dict):
            raise InvalidFeedError(f"Input {name!r} expects a map ({spec.type_str}), got {type(value).__name__}.")
        return value
    if kind == "sparse_tensor_type":
        return spec.sparse.check(value)
    if kind != "tensor_type":
        return value
    if not isinstance(value, np.ndarray):
        if isinstance(value, np.generic):
            value = np.asarray(value)
        elif isinstance(value, list | tuple):
            raise InvalidFeedError(
                f"Input {name!r} expects a tensor ({spec.type_str}), got a {type(value).__name__}; "
                f"pass a numpy array."
            )
        else:
            raise InvalidFeedError(
                f"Input {name!r} expects a numpy array of type {spec.type_str}, got {type(value).__name__}."
            )
    if spec.elem_type and not same_dtype(value.dtype, spec.elem_type):
        raise InvalidFeedError(
            f"Input {name!r} expects element type {elem_name(spec.elem_type)} ({spec.type_str}), "
            f"got an array of dtype {value.dtype}."
        )
    if value.dtype.kind in "US":
        value = value.astype(object)
    if spec.shape is not None:
        if len(spec.shape) != value.ndim:
            raise InvalidFeedError(
                f"Input {name!r} expects rank {len(spec.shape)} (shape {_fmt_shape(spec.shape)}), "
                f"got rank {value.ndim} (shape {list(value.shape)})."
            )
        for axis, (want, got) in enumerate(zip(spec.shape, value.shape)):
            if isinstance(want, int) and want != got:
                raise InvalidFeedError(
                    f"Input {name!r} expects dimension {axis} to be {want} (shape {_fmt_shape(spec.shape)}), "
                    f"got {got} (shape {list(value.shape)})."
                )
    if value.flags.writeable:  # kernels see a read-only view: the caller's array cannot change
        value = value.view()
        value.flags.writeable = False
    return value


def _stats(value: Any) -> str:
    """min/max/mean/NaN count of a numeric array, for verbose=2."""
    if not isinstance(value, np.ndarray) or value.size == 0 or value.dtype.kind not in "biufc":
        return ""
    v = value.astype(np.float64) if value.dtype.kind != "c" else np.abs(value)
    nans = int(np.isnan(v).sum())
    finite = v[~np.isnan(v)] if nans else v
    if finite.size == 0:
        return f" nan={nans}"
    return f" min={finite.min():.6g} max={finite.max():.6g} mean={finite.mean():.6g} nan={nans}"


def _verbose_trace(level: int, fLOG: Any, inner: Callable[..., None] | None) -> Callable[..., None]:
    log = fLOG or (lambda *a: print(*a, file=sys.stdout))

    def trace(st: Step, args: list[Any], res: tuple[Any, ...], dt: float) -> None:
        ins = ", ".join(describe_value(a) for a in args)
        outs = ", ".join(describe_value(r) for r in res)
        log(f"{st.op_type}({st.name!r}) [{ins}] -> [{outs}] {dt * 1e3:.3f} ms")
        if level >= 2:
            for name, r in zip(st.node.output, res):
                stats = _stats(r)
                if stats:
                    log(f"    {name}:{stats}")
        if inner is not None:
            inner(st, args, res, dt)

    return trace


def _fmt_shape(shape: list[Any]) -> str:
    return "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"


def _output_value(v: Any) -> Any:
    """What the caller receives: arrays it owns (never a view of a constant or of a feed)."""
    if isinstance(v, np.ndarray):
        return v if v.flags.writeable else v.copy()
    if isinstance(v, np.generic):
        return np.asarray(v)
    if isinstance(v, list):
        return [_output_value(x) for x in v]
    return v


def _distinct(out: list[Any]) -> list[Any]:
    """``out`` (in place) with each array that shares memory with an earlier one replaced by
    a copy: outputs B = Identity(A) and C = Reshape(A) are one buffer in the engine, and the
    caller must be able to write one without changing the other (onnxruntime's outputs are
    independent). Arrays are grouped by the buffer that owns their memory (numpy keeps the
    owner in ``base``), so the common case costs one ``id`` per output; views of one buffer
    that do not overlap (Split's parts) stay as they are."""
    if len(out) == 2:  # two fresh arrays: nothing to look at
        a, b = out
        if type(a) is np.ndarray and type(b) is np.ndarray and a is not b and a.base is None and b.base is None:
            return out
    seen: set[int] = set()
    for v in out:  # the common case: every output owns its buffer, or none shares an owner
        if type(v) is np.ndarray:
            b = v.base
            k = id(v) if b is None else id(b)
            if k in seen:
                return _distinct_slow(out)
            seen.add(k)
        elif isinstance(v, list):
            return _distinct_slow(out)
    return out


def _distinct_slow(out: list[Any]) -> list[Any]:
    owners: dict[int, list[np.ndarray]] = {}
    for i, v in enumerate(out):
        if isinstance(v, list):
            out[i] = v = list(v)
            items = enumerate(v)
        else:
            items = ((None, v),)
        for j, a in items:
            if type(a) is not np.ndarray:
                continue
            key = id(a if a.base is None else a.base)
            seen = owners.get(key)
            if seen is None:
                owners[key] = [a]
            elif any(np.may_share_memory(a, b) for b in seen):
                if j is None:
                    out[i] = a.copy()
                else:
                    v[j] = a.copy()
            else:
                seen.append(a)
    return out


def _graph_domains(graph: onnx.GraphProto, found: set[str]) -> set[str]:
    for node in graph.node:
        found.add("" if node.domain == "ai.onnx" else node.domain)
        for att in node.attribute:
            if att.type == onnx.AttributeProto.GRAPH:
                _graph_domains(att.g, found)
            elif att.type == onnx.AttributeProto.GRAPHS:
                for g in att.graphs:
                    _graph_domains(g, found)
    return found


def _opset_map(target_opset: Any) -> dict[str, int]:
    if isinstance(target_opset, dict):
        return {("" if d == "ai.onnx" else d): int(v) for d, v in target_opset.items()}
    if isinstance(target_opset, int) and not isinstance(target_opset, bool):
        return {"": target_opset}
    raise OnnxRuntimeError(f"target_opset must be an int (the ai.onnx opset) or a dict domain -> version, got {target_opset!r}.")


def _prepared_model(model: Any, runtime: Any, target_opset: Any) -> Any:
    """The constructor's model: a GraphProto wrapped into a model, opsets overridden."""
    if runtime != "python":
        raise OnnxRuntimeError(
            f"runtime={runtime!r}: onnxrt has one runtime, 'python' (its numpy kernels); "
            f"onnxruntime is reached through onnxruntime.InferenceSession itself."
        )
    if isinstance(model, onnx.GraphProto):
        from .model import MAX_OPSET

        versions = {"": MAX_OPSET, "ai.onnx.ml": onnx.defs.onnx_ml_opset_version()}
        wanted = _opset_map(target_opset) if target_opset is not None else {}
        opsets = {d: wanted.get(d, versions.get(d, 1)) for d in sorted(_graph_domains(model, {""}) | set(wanted))}
        return onnx.helper.make_model(model, opset_imports=[onnx.helper.make_opsetid(d, v) for d, v in opsets.items()])
    if target_opset is None:
        return model
    proto, found_dir = load_model(model)
    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    wanted = _opset_map(target_opset)
    for op in copy.opset_import:
        domain = "" if op.domain == "ai.onnx" else op.domain
        if domain in wanted:
            op.version = wanted.pop(domain)
    for domain, version in wanted.items():
        copy.opset_import.append(onnx.helper.make_opsetid(domain, version))
    return copy, found_dir


class OnnxInference:
    """The engine: ``OnnxInference(model).run({"X": x})`` returns ``{"Y": y}``.

    ``model`` is a path, bytes, a binary file object, an ``onnx.ModelProto`` or an
    ``onnx.GraphProto`` (wrapped into a model importing the opsets of the domains it uses,
    the newest onnxrt runs unless ``target_opset`` says otherwise). ``options`` are
    ``SessionOptions``. As in mlprodict, ``runtime`` names the runtime: onnxrt has only
    ``"python"`` (mlprodict's ``python_compiled`` and ``onnxruntime1`` are not offered;
    other values raise). ``target_opset`` (an int for ai.onnx, or a dict domain -> version)
    replaces the model's opset imports, so kernels resolve at those versions, where
    mlprodict only used it to pick its operator implementations.
    """

    #: the runtime's name (mlprodict's API): onnxrt has only "python"
    runtime = "python"

    def __init__(self, model: Any, options: Any = None, runtime: str = "python", target_opset: Any = None):
        prepared = _prepared_model(model, runtime, target_opset)
        base_dir = None
        if isinstance(prepared, tuple):
            prepared, base_dir = prepared
        self._build(prepared, options, base_dir)

    def _sibling(self, model: onnx.ModelProto) -> OnnxInference:
        """An engine of a model derived from this one: same options, same folder for external data."""
        engine = OnnxInference.__new__(OnnxInference)
        engine._build(model, self.options, self.base_dir)
        return engine

    def _build(self, model: Any, options: Any, base_dir: str | None = None) -> None:
        apart = read_weights_apart(os.fspath(model), load_limit(options)) if isinstance(model, str | os.PathLike) else None
        if apart is not None:  # a file's weights read straight into arrays (OnnxInference.model)
            proto, held = apart
            found_dir = os.path.dirname(os.path.abspath(os.fspath(model)))
        else:
            proto, found_dir = load_model(model)
            held = {}
        base_dir = found_dir or base_dir
        #: what this session's runs share (onnxrt.context): SessionOptions.intra_op_num_threads > 0
        #: caps the kernels' threads during runs, scratch buffers; every run enters it (RunScope)
        self._context = ExecutionContext.from_options(options)
        self._threads = self._context.threads
        self.base_dir = base_dir
        self.options = options
        #: False (SessionOptions.fast_paths, or ONNXRT_FASTPATHS=0): every node runs its
        #: reference kernel and no compiled code (onnxrt.dispatch); every run then takes _first
        self._fast_paths = bool(getattr(options, "fast_paths", True)) and dispatch.ENABLED
        self.opsets = check_versions(proto)
        #: the weights decoded once and held by the plan; ``structure`` keeps no data for them
        self._held: dict[str, np.ndarray] = held
        if proto is not model and not held:  # parsed here (a path, bytes, a file): the session's own copy
            proto, self._held = _one_copy(proto, load_limit(options))
        self._structure: onnx.ModelProto = proto
        functions = {function_key(f.domain, f.name, getattr(f, "overload", "")): f for f in proto.functions}
        self._functions = functions
        # before onnx's shape inference, which inlines the functions too (2**depth nodes)
        check_expansion(proto.graph.node, functions, expansion_budget(options))
        #: IR >= 4: an initializer also listed as an input is a default a feed may override;
        #: before, every initializer was listed as an input and is a constant (onnxruntime's rule)
        self.overridable = proto.ir_version >= 4
        inits = {i.name for i in proto.graph.initializer} | {i.values.name for i in proto.graph.sparse_initializer}
        compat.check_input_types(proto.graph, options, frozenset() if self.overridable else inits)
        # feeds are checked against their inputs' declared element types (validate_feeds)
        self.plan = Plan(
            proto.graph, self.opsets, base_dir, functions, options=options,
            value_info=_static_info(proto, options), overridable_initializers=self.overridable, checked_feeds=True,
            constants=self._held,
        )
        self._plain: Plan | None = None
        if optimization_level(options) > 0:
            self.plan.enable_specialisation()  # (onnxrt.specialise: shape arithmetic once per signature)
        #: the next run is the session's first: numpy kernels only (see :meth:`_first`)
        self._first_run = (_jit.ENABLED and not _jit.EAGER) or not self._fast_paths
        #: warmup_runs: 2 while the first run leaves compiled kernels to the second
        self._warmups = 2 if self._first_run and not _jit.compiled_loaded() else 1
        #: jobs the team of compiled workers took in the last run (onnxrt.parallel.RunScope)
        self.team_jobs = 0
        #: a model with a large constant holds BLAS at one thread for its runs (RunScope)
        self._eager_blas = any(
            isinstance(v, np.ndarray) and v.size >= EAGER_BLAS_SIZE for v in self.plan.initializers.values()
        )
        graph = proto.graph
        #: the model's own initializer names (the plan's constants also hold folded values)
        self.initializer_names = {i.name for i in graph.initializer} | {i.values.name for i in graph.sparse_initializer}
        inits = self.initializer_names
        self._specs = {vi.name: _InputSpec(vi, vi.name in inits) for vi in graph.input if self.overridable or vi.name not in inits}
        for spec in self._specs.values():
            if spec.sparse is not None:  # a sparse feed's dense form is held to the tensor cap
                spec.sparse.limit = load_limit(self.options)
        self.input_names = [vi.name for vi in graph.input]
        self.output_names = [o.name for o in graph.output]

    # ------------------------------------------------------------------------------

    def validate_feeds(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Check names, types, ranks and static dims; returns the feeds the plan reads."""
        if not isinstance(inputs, dict):
            raise InvalidFeedError(f"Inputs must be a dict name -> value, got {type(inputs).__name__}.")
        specs = self._specs
        feeds: dict[str, Any] = {}
        for name, value in inputs.items():
            spec = specs.get(name)
            if spec is None:
                lowered = {n.lower(): n for n in specs}
                close = difflib.get_close_matches(str(name).lower(), list(lowered), n=1, cutoff=0.5)
                hint = f" Did you mean {lowered[close[0]]!r}?" if close else ""
                raise InvalidFeedError(
                    f"Unknown input {name!r}; the model's inputs are {list(specs)!r}.{hint}"
                )
            feeds[name] = _check_feed(spec, value)
        for name in self.plan.required_inputs:
            if name not in feeds:
                raise InvalidFeedError(
                    f"Missing input {name!r} (expected {specs[name].type_str}); "
                    f"the model needs {self.plan.required_inputs!r}."
                )
        return feeds

    def run(
        self,
        inputs: dict[str, Any],
        intermediate: bool = False,
        verbose: int = 0,
        output_names: list[str] | None = None,
        fLOG: Any = None,
        trace: Callable[..., None] | None = None,
        node_time: bool = False,
    ) -> Any:
        """Run the model; returns ``{output name: value}``.

        ``inputs`` is a dict name -> value, or a pandas DataFrame: a column named like an
        input feeds it (columns ``x_0 .. x_{k-1}`` feed a [rows, k] input ``x``), and a
        model with a single input takes every column, in order, as its [rows, columns]
        matrix (mlprodict fed each column as its own [rows, 1] input; onnxrt follows
        ``onnxrt.dask``'s rules, and pandas is only imported for a DataFrame).
        ``intermediate=True`` returns every named value of the graph (inputs, initializers
        and every node output). ``output_names`` selects outputs and may name any
        intermediate value. ``verbose=1`` prints every node as it runs (operator, name,
        input and output shapes and dtypes, time); ``verbose=2`` adds statistics of each
        output (min, max, mean, NaN count). ``fLOG`` replaces ``print`` for that output.
        ``trace(step, args, results, seconds)`` is called after every node.
        ``node_time=True`` returns ``(outputs, times)`` as mlprodict did: one dict per node
        run, ``{"i", "name", "op_type", "time"}`` (seconds), in run order; the nodes are
        those of the optimised plan (fused nodes keep the name of their first node) unless
        ``intermediate=True`` or a value the optimiser removed is requested.
        """
        if self._first_run and not _TLS.no_jit:  # (inside _first: a reference session keeps _first_run)
            return self._first(self.run, inputs, intermediate, verbose, output_names, fLOG, trace, node_time)
        if not isinstance(inputs, dict) and type(inputs).__module__.startswith("pandas"):
            from .tools.frames import frame_feeds, is_dataframe

            if is_dataframe(inputs):
                inputs = frame_feeds(inputs, self._specs, self.plan.required_inputs)
        if node_time:
            times: list[dict[str, Any]] = []
            inner = trace

            def trace(st: Step, args: list[Any], res: tuple[Any, ...], dt: float) -> None:
                times.append({"i": len(times), "name": st.name, "op_type": st.op_type, "time": dt})
                if inner is not None:
                    inner(st, args, res, dt)

            return self.run(inputs, intermediate, verbose, output_names, fLOG, trace), times
        feeds = self.validate_feeds(inputs)
        # numpy's floating-point warnings (0/0, overflow) are results the spec defines, not
        # user errors: onnxrt, like onnxruntime, computes them silently. Matrix products use
        # BLAS's own threads; other large kernels split over onnxrt's pool (onnxrt.parallel);
        # SessionOptions.intra_op_num_threads caps both
        with np.errstate(all="ignore"), RunScope(self._context, self._eager_blas or _large_feed(feeds), self, self.plan.uses_blas):
            return self._run(feeds, intermediate, verbose, output_names, fLOG, trace)

    def fast_paths(self) -> list[dict[str, Any]]:
        """What the dispatcher picked for each node of the main graph whose operator
        declares fast paths (:mod:`onnxrt.dispatch`): one row per node and input signature
        met so far, ``{"name", "op_type", "signature", "native", "path"}`` (``path`` is
        ``"reference"`` where no fast path applied; ``native``: compiled kernels were
        active for that call)."""
        rows = []
        for st in self.plan.steps:
            fn = st.fn
            if not isinstance(fn, dispatch.Dispatcher):
                continue
            for key, path in fn.choices():
                rows.append({"name": st.name, "op_type": st.op_type, "signature": key[1:], "native": key[0],
                             "path": path})
        return rows

    @property
    def warmup_runs(self) -> int:
        """How many runs carry one-time costs before the steady state: the first (kernels
        loaded, weights prepared) and, where compiled kernels start at the second run
        (ONNXRT_JIT=auto, the default, in a process that has not loaded them yet), the
        second too; and, for a model with large constants (whose products may run on BLAS's
        threads), the runs in which the session's ProductPolicy times its two ways of running
        them. Timings skip them (``onnxrt bench``, ``onnxrt profile``)."""
        if self._eager_blas and self.plan.uses_blas and self._fast_paths:
            return max(self._warmups, self._context.products.settling_runs())
        return self._warmups

    def _first(self, fn: Callable[..., Any], *args: Any) -> Any:
        """The session's first run, on the kernels' numpy paths: compiled kernels start with
        the second (onnxrt.native.EAGER says why; ONNXRT_JIT=1 starts them at once),
        unless the process has loaded them already (another session's runs paid for numba
        and LLVM: this session's first run then takes the compiled paths too, as its later
        runs will). A first run that fails leaves the next one first."""
        if not self._fast_paths:  # every run of the session on reference kernels, no compiled code
            with no_jit_run():
                return fn(*args)
        self._first_run = False
        if _jit.compiled_loaded():
            self._warmups = 1
            return fn(*args)
        try:
            with no_jit_run():
                return fn(*args)
        except BaseException:
            self._first_run = True
            raise

    def run_outputs(self, inputs: dict[str, Any]) -> list[Any]:
        """The graph outputs, in order, as a list: :meth:`run` without options, with the
        least overhead (``InferenceSession.run(None, feeds)`` comes here)."""
        if self._first_run and not _TLS.no_jit:  # (inside _first: a reference session keeps _first_run)
            return self._first(self.run_outputs, inputs)
        feeds = self.validate_feeds(inputs)
        eager = self._eager_blas or _large_feed(feeds)
        if _FP_STATE is None:
            with np.errstate(all="ignore"), RunScope(self._context, eager, self, self.plan.uses_blas):
                values = self.plan.run_dict(feeds)
        else:
            token = _FP_STATE.set(_FP_IGNORE)
            try:
                if eager or self._threads is not None:
                    with RunScope(self._context, eager, self, self.plan.uses_blas):
                        values = self.plan.run_dict(feeds)
                elif self.plan.uses_blas:  # a small run with default threads: its scope would only gate fork
                    gate_enter()
                    try:
                        values = self.plan.run_dict(feeds)
                    finally:
                        gate_exit()
                else:
                    values = self.plan.run_dict(feeds)
            finally:
                _FP_STATE.reset(token)
        out = []
        for s in self.plan.output_slots:
            v = values[s]
            out.append(v if type(v) is np.ndarray and v.flags.writeable else _output_value(v))
        return _distinct(out) if len(out) > 1 else out

    def _run(
        self,
        feeds: dict[str, Any],
        intermediate: bool,
        verbose: int,
        output_names: list[str] | None,
        fLOG: Any,
        trace: Callable[..., None] | None,
    ) -> dict[str, Any]:
        plan = self.plan
        if output_names is None and not (intermediate or verbose or trace is not None):
            values = plan.run_dict(feeds)  # the hot path
            if len(plan.output_names) == 1:
                return {plan.output_names[0]: _output_value(values[plan.output_slots[0]])}
            return dict(zip(plan.output_names, _distinct([_output_value(values[s]) for s in plan.output_slots])))
        wanted = output_names if output_names is not None else self.output_names
        if intermediate or any(n not in plan.slots for n in wanted):
            plan = self.plain_plan  # the values of the graph as written, before optimisation
        extra = [n for n in wanted if n not in plan.output_names]
        for n in extra:
            if n not in plan.slots:
                close = difflib.get_close_matches(str(n), list(plan.slots), n=1)
                hint = f" Did you mean {close[0]!r}?" if close else ""
                raise InvalidFeedError(f"Requested output {n!r} is not a value of the graph.{hint}")
        keep = intermediate or bool(extra)
        if keep or verbose or trace is not None:
            hook = _verbose_trace(verbose, fLOG, trace) if verbose else trace
            values = plan.new_values(feeds)
            plan.execute(values, Hooks(after=hook, keep=keep))
            if intermediate:
                names = [n for n, s in plan.slots.items() if s < len(values)]
                return dict(zip(names, _distinct([_output_value(values[plan.slots[n]]) for n in names])))
        else:
            values = plan.run_dict(feeds)
        slots = plan.slots
        return dict(zip(wanted, _distinct([_output_value(values[slots[n]]) for n in wanted])))

    @property
    def plain_plan(self) -> Plan:
        """The plan of the graph as written (no optimisation), built on first use: it serves
        ``intermediate=True`` and requests for values the optimiser folded or fused away."""
        if self._plain is None:
            if optimization_level(self.options) <= 0:
                self._plain = self.plan
            else:
                self._plain = Plan(
                    self.structure.graph, self.opsets, self.base_dir, self._functions, options=self.options, optimize=False,
                    checked_feeds=True, constants=self._held,
                )
        return self._plain

    @property
    def model(self) -> onnx.ModelProto:
        """The model (onnx.ModelProto) this session runs, weights included.

        A model given as a ModelProto is that object. A model the session parsed itself (a
        path, bytes, a file object) keeps one copy of its weights: the arrays the plan holds
        (the proto's copy is dropped once they are decoded, as onnxruntime keeps its tensors
        and not the proto: gpt2's peak memory 1,476 -> 980 MB). This property then builds the
        full proto again from :attr:`structure` and those arrays, on every access; use
        :attr:`structure` for the graph's nodes, inputs, outputs and metadata."""
        if not self._held:
            return self._structure
        full = onnx.ModelProto()
        full.CopyFrom(self._structure)
        for t in full.graph.initializer:
            a = self._held.get(t.name)
            if a is not None:
                a = np.ascontiguousarray(a)
                t.raw_data = (a if sys.byteorder == "little" else a.byteswap()).tobytes()
        return full

    @property
    def structure(self) -> onnx.ModelProto:
        """The model without the data of the large floating-point initializers the session
        holds as arrays (their names, types and dims stay): cheap to read, not to run (see
        :attr:`model`). The same object as :attr:`model` when no data was set aside."""
        return self._structure

    def __getstate__(self) -> dict[str, Any]:
        """Pickled as the model's bytes, its folder and the options; the plan is rebuilt on load."""
        return {"model": self.model.SerializeToString(), "base_dir": self.base_dir, "options": self.options}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._build(state["model"], state["options"], state["base_dir"])

    def to_python(self, npz_path: str | None = None) -> str:
        """Source of a standalone module defining ``run(inputs: dict) -> dict`` that reproduces
        this model with onnxrt's kernels, one line per node. Initializers are embedded, or
        written to ``npz_path`` (loaded from the module's folder) when given."""
        from .tools.export import to_python

        return to_python(self, npz_path=npz_path)

    # --- inspection (mlprodict's toolkit): the work is in onnxrt.tools ---------------

    def to_dot(
        self, rankdir: str = "TB", show_shapes: bool = True, recursive: bool = True, add_functions: bool = True, **params: Any
    ) -> str:
        """Graphviz DOT text of the model: inputs, initializers, operators (in run order,
        with their first attributes) and outputs as distinct boxes, edges labelled with the
        value's name, element type and shape when known (:meth:`infer_shapes`), If/Loop/Scan
        bodies as clusters (``recursive=False``: not drawn), model-local functions as clusters
        beside the graph (``add_functions=False``: not drawn); ``params`` are Graphviz graph
        attributes (``size="7"``...), as mlprodict's. mlprodict drew bodies only when
        ``recursive`` and shapes only with ``add_rt_shapes``; onnxrt draws both by default
        (``show_shapes=False`` leaves only the names on the edges)."""
        from .tools.dot import to_dot

        return to_dot(
            self.model, self.infer_shapes(), rankdir=rankdir, show_shapes=show_shapes,
            recursive=recursive, add_functions=add_functions, **params,
        )

    def to_svg(self, rankdir: str = "TB", **kwargs: Any) -> str:
        """:meth:`to_dot` (same options) rendered as an SVG document by the ``graphviz``
        package (extra ``onnxrt[graph]``) and Graphviz's ``dot`` program; a
        MissingDependencyError names whichever is missing. mlprodict had no such method
        (its notebooks drew the DOT)."""
        from .tools.dot import to_svg

        return to_svg(self.to_dot(rankdir=rankdir, **kwargs))

    def to_text(self) -> str:
        """A readable listing: inputs, initializers (dtype, shape, small values), nodes in
        run order with their attributes (subgraphs below their node), outputs, functions.
        mlprodict's ``to_text`` drew a text diagram of the graph; this one lists it."""
        from .tools.text import to_text

        return to_text(self.model)

    def to_json(self, indent: int | None = None) -> Any:
        """:meth:`to_text`'s content as JSON-serialisable data (a dict: ir_version, opsets,
        name, inputs, initializers, nodes, outputs, functions; NaN and infinities as strings).
        With ``indent`` (an int), the JSON text itself, as mlprodict's ``to_json(indent=2)``
        returned (its text was a dump of the protobuf; onnxrt's follows the listing)."""
        from .tools.text import model_data

        data = model_data(self.model)
        if indent is None:
            return data
        import json

        return json.dumps(data, indent=indent)

    def infer_shapes(self) -> dict[str, Any]:
        """Static type and shape of every value of the main graph, name ->
        :class:`onnxrt.tools.shapes.ValueInfo` (``shape`` with symbolic dims kept, ``dtype``,
        ``type``, ``origin``): declared types, onnx's shape inference, then onnxrt's rules
        where it stops (model-local functions, ai.onnx.ml operators, schema type
        constraints); unknown values say so (``origin="unknown"``). mlprodict ran its own
        per-operator shape functions and returned ShapeObjects, assuming the first
        dimension of every input was the batch."""
        from .tools.shapes import infer_shapes

        return infer_shapes(self.model, self.opsets)

    def infer_types(self) -> dict[str, Any]:
        """name -> numpy dtype of every tensor value (the type string for sequences, maps
        and optionals, None where unknown), from :meth:`infer_shapes`; as mlprodict's."""
        from .tools.shapes import infer_types

        return infer_types(self.model, self.opsets)

    def infer_sizes(self, inputs: dict[str, Any]) -> dict[str, Any]:
        """Memory estimate of a run: ``inputs`` maps each input to an array or a shape.
        Each node's temporary memory is its outputs' bytes; the peak follows the run order,
        a value freed after its last reader (see :func:`onnxrt.tools.shapes.infer_sizes`
        for the dict returned). mlprodict ran its kernels' size functions on the inputs and
        returned ``{"#node": sizes}``; onnxrt runs nothing, it works from static shapes."""
        from .tools.shapes import infer_sizes

        return infer_sizes(self.model, inputs, self.opsets)

    def global_index(self, name: str) -> int:
        """A stable integer for a value name (mlprodict's API): inputs, initializers, node
        outputs in run order and outputs are numbered first, the same on every engine of
        the model; a name the graph does not have gets the next free integer, as in
        mlprodict."""
        index = getattr(self, "_global_index", None)
        if index is None:
            from .tools.intermediate import node_outputs

            index = {}
            graph = self.model.graph
            names = [i.name for i in graph.input] + [i.name for i in graph.initializer]
            names += [i.values.name for i in graph.sparse_initializer]
            names += node_outputs(self.model) + [o.name for o in graph.output]
            for n in names:
                index.setdefault(n, len(index))
            self._global_index = index
        if name not in index:
            index[name] = len(index)
        return index[name]

    def switch_initializers_dtype(self, dtype: Any = np.float64) -> OnnxInference:
        """An engine computing this float32 model in ``dtype`` (float64 by default):
        initializers, constants, declared types and Cast targets switched, Casts inserted
        around operators whose schema has no room for the new type; its float inputs and
        outputs are declared in ``dtype`` too (feed it float64 arrays); ``.switched`` on the
        new engine lists the changes. mlprodict changed its engine's initializers in place
        and returned that list; onnxrt's plan is built once, so it returns a new engine."""
        from .tools.precision import switch_dtype

        model, done = switch_dtype(self.model, dtype, self.base_dir, self.opsets)
        other = self._sibling(model)
        #: what switch_initializers_dtype changed: (what, where, detail)
        other.switched = done
        return other

    def compare_precision(self, inputs: dict[str, Any], dtype: Any = np.float64) -> list[dict[str, Any]]:
        """Run this float32 model and its :meth:`switch_initializers_dtype` twin on the same
        inputs; one dict per float node output, in run order, with ``i``, ``name``,
        ``op_type``, ``output``, ``dtype``, ``max_abs`` and ``max_rel`` (the drift of
        float32 from the wider run). onnxrt's own: mlprodict left the comparison to its users."""
        from .tools.precision import precision_rows

        if not isinstance(inputs, dict) and type(inputs).__module__.startswith("pandas"):
            from .tools.frames import frame_feeds

            inputs = frame_feeds(inputs, self._specs, self.plan.required_inputs)
        return precision_rows(self, self.switch_initializers_dtype(dtype), inputs)

    def build_intermediate(self, outputs: Any = None) -> dict[str, OnnxInference]:
        """An ordered dict node output -> OnnxInference of a model computing only that value
        from the model's inputs (every input kept, so the same feeds run each), in run
        order; ``outputs`` (a name or a list) selects some. As mlprodict's, without its
        ``overwrite_types``: the output's type comes from :meth:`infer_shapes`."""
        from collections import OrderedDict

        from .tools.intermediate import cut_model, select_outputs

        infos = self.infer_shapes()
        res: OrderedDict[str, OnnxInference] = OrderedDict()
        for name in select_outputs(self.model, outputs):
            res[name] = self._sibling(cut_model(self.model, name, infos))
        return res

    def __str__(self) -> str:
        """The model as text (:meth:`to_text`); mlprodict printed the protobuf."""
        return self.to_text()

    # ------------------------------------------------------------------------------

    def __repr__(self) -> str:
        return f"OnnxInference(inputs={self.input_names!r}, outputs={self.output_names!r}, nodes={len(self.plan.steps)})"
