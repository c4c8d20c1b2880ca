"""InferenceSession: the onnxruntime-compatible front of the engine."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .dtypes import ONNX_TO_NP, type_shape, type_string
from .errors import (
    InvalidArgumentError,
    InvalidFeedError,
    InvalidOptionError,
    ModelConfigError,
    SessionStateError,
)
from .inference import OnnxInference, _distinct
from .iobinding import IOBinding
from .options import CURRENT_RUN_OPTIONS, ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions, check_terminate
from .ortvalue import OrtMemoryInfo, OrtValue, SparseTensor, _strings, cpu_memory_info
from .providers import LOGGER, SHARED_ALLOCATORS, log, normalize_providers
from .tools.profiling import Profiler

__all__ = [
    "ExecutionMode",
    "ExecutionOrder",
    "GraphOptimizationLevel",
    "InferenceSession",
    "ModelMetadata",
    "NodeArg",
    "OrtEpAssignedNode",
    "OrtEpAssignedSubgraph",
    "RunOptions",
    "SessionOptions",
]


@dataclass(frozen=True)
class NodeArg:
    """A graph input or output as onnxruntime describes it."""

    name: str
    shape: list[int | str | None] | None
    type: str


@dataclass(frozen=True)
class ModelMetadata:
    """The model's metadata, as onnxruntime's ``get_modelmeta()`` returns it."""

    producer_name: str
    graph_name: str
    domain: str
    description: str
    graph_description: str
    version: int
    custom_metadata_map: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class OrtEpAssignedNode:
    """A node of the graph a session runs, as ``get_provider_graph_assignment_info`` lists it."""

    name: str
    op_type: str
    domain: str


@dataclass(frozen=True)
class OrtEpAssignedSubgraph:
    """Nodes an execution provider runs together (onnxrt: one node each, on the CPU)."""

    ep_name: str
    nodes: tuple[OrtEpAssignedNode, ...]

    def get_nodes(self) -> list[OrtEpAssignedNode]:
        return list(self.nodes)


_RECORD_ASSIGNMENT = "session.record_ep_graph_assignment_info"


def _model_proto(source: Any) -> tuple[Any, Any]:
    """(the ModelProto, what the engine loads: ``source`` itself unless reading consumed it)."""
    from onnx import ModelProto

    from .model import load_model

    if isinstance(source, ModelProto):
        return source, source
    proto, _ = load_model(source)
    return proto, source if isinstance(source, str | bytes | os.PathLike) else proto


def _options_from_model(model: Any, options: SessionOptions) -> SessionOptions:
    """``options`` updated by the session options the model carries in its metadata
    ``ort_config`` (JSON ``{"session_options": {...}}``), as onnxruntime reads them when the
    environment variable ``ORT_LOAD_CONFIG_FROM_MODEL`` is ``1``: ``intra_op_num_threads``,
    ``inter_op_num_threads`` (ints >= 0), ``execution_mode`` (0, 1),
    ``graph_optimization_level`` (0, 1, 2, 3, 99), ``enable_profiling`` (0, 1); other keys are
    ignored. The model's values win; a copy is returned when there are any."""
    import json

    if os.environ.get("ORT_LOAD_CONFIG_FROM_MODEL") != "1":
        return options
    text = next((p.value for p in model.metadata_props if p.key == "ort_config"), None)
    if text is None:
        return options
    try:
        config = json.loads(text)
    except ValueError as e:
        raise ModelConfigError(f"Json stored in the `ort_config` key cannot be parsed: {e}") from None
    entries = config.get("session_options") if isinstance(config, dict) else None
    if not isinstance(entries, dict) or not entries:
        return options
    options = options._copy()

    def integer(key: str, allowed: Any) -> int:
        value = entries[key]
        if type(value) is not int:
            raise ModelConfigError(f"{key} option in the model file must be an integer, got {value!r} (metadata 'ort_config').")
        if not allowed(value):
            raise ModelConfigError(f"Unsupported value for {key} in the model's ORT config (metadata 'ort_config'): {value}.")
        return value

    if "intra_op_num_threads" in entries:
        options.intra_op_num_threads = integer("intra_op_num_threads", lambda v: v >= 0)
    if "inter_op_num_threads" in entries:
        options.inter_op_num_threads = integer("inter_op_num_threads", lambda v: v >= 0)
    if "execution_mode" in entries:
        options.execution_mode = ExecutionMode(integer("execution_mode", lambda v: v in (0, 1)))
    if "graph_optimization_level" in entries:
        levels = {m.value for m in GraphOptimizationLevel}
        options.graph_optimization_level = GraphOptimizationLevel(integer("graph_optimization_level", levels.__contains__))
    if "enable_profiling" in entries:
        options.enable_profiling = bool(integer("enable_profiling", lambda v: v in (0, 1)))
    return options


class _FeedType:
    """What the session converts for one graph input before the engine checks it."""

    __slots__ = ("type_str", "tensor", "string", "dtype", "scalar", "sparse")

    def __init__(self, vi: Any):
        tp = vi.type
        self.type_str = type_string(tp)
        self.tensor = tp.WhichOneof("value") == "tensor_type"
        self.sparse = tp.WhichOneof("value") == "sparse_tensor_type"
        elem = tp.tensor_type.elem_type if self.tensor else 0
        dt = ONNX_TO_NP.get(elem)
        self.string = dt is not None and dt.kind == "O"
        self.dtype = None if dt is None or self.string else dt
        self.scalar = self.tensor and type_shape(tp) == []


def _list_to_array(name: str, value: list[Any], ft: _FeedType) -> np.ndarray:
    """A (nested) list as a tensor of the input's declared element type, as onnxruntime
    converts lists (numpy's conversion to that type; strings: str, bytes decoded as UTF-8,
    anything else by ``str``)."""
    if ft.string:
        try:
            arr = np.array(value, dtype=object)
        except ValueError as e:
            raise InvalidFeedError(f"Input {name!r} ({ft.type_str}): the list is not a regular nested list: {e}") from None
        flat = arr.reshape(-1)
        for i, x in enumerate(flat):
            if isinstance(x, bytes):
                flat[i] = x.decode("utf-8", errors="surrogateescape")
            elif isinstance(x, list | tuple | np.ndarray | dict):
                raise InvalidFeedError(
                    f"Input {name!r} ({ft.type_str}): the list is not a regular nested list of strings "
                    f"(an element is a {type(x).__name__})."
                )
            elif not isinstance(x, str):
                flat[i] = str(x)
        return arr
    if ft.dtype is None:
        raise InvalidFeedError(f"Input {name!r} ({ft.type_str}): a list cannot be converted to this type; pass a numpy array.")
    try:
        with np.errstate(all="ignore"):
            return np.array(value, dtype=ft.dtype)
    except (ValueError, TypeError, OverflowError) as e:
        raise InvalidFeedError(
            f"Input {name!r} ({ft.type_str}): the list cannot be converted to a tensor of {ft.dtype}: {e}"
        ) from None


def _unwrap(name: str, value: OrtValue, sparse: bool = False) -> Any:
    """The value an OrtValue holds; a sparse tensor only for an input declared sparse
    (``sparse``), where the engine checks it (onnxrt.ortvalue.SparseFeed)."""
    inner = value._value
    if isinstance(inner, SparseTensor) and not sparse:
        raise InvalidFeedError(
            f"Input {name!r}: a sparse tensor can only feed an input declared as a sparse tensor "
            f"(as in onnxruntime); pass the dense tensor."
        )
    return inner


class InferenceSession:
    """``InferenceSession(model, sess_options=None, providers=None, provider_options=None)``;
    ``run(output_names, input_feed)``.

    ``model`` is a path, bytes, a binary file object or an ``onnx.ModelProto``. ``run``
    returns a list in the order of ``output_names`` (all outputs when None or empty); any
    named value of the graph may be requested (onnxruntime only takes graph outputs).

    Deviations from onnxruntime: the only provider is ``CPUExecutionProvider``; other
    known providers are dropped with a ``UserWarning`` (as onnxruntime's CPU packages do).
    Feeds may be numpy arrays, :class:`~onnxrt.OrtValue`, or (nested) Python lists,
    converted to the input's declared element type as onnxruntime converts them. A declared
    scalar input also takes an array of one element (shape ``[1]``, ``[1, 1]``), as
    onnxruntime does; onnxrt reads it as the scalar the model declares, so outputs follow
    the declared shapes (onnxruntime passes the ``[1]`` through and warns). Errors are
    onnxrt's own; a missing input raises :class:`~onnxrt.InvalidFeedError`, a ``ValueError``
    as in onnxruntime.
    """

    def __init__(
        self,
        path_or_bytes: Any,
        sess_options: SessionOptions | None = None,
        providers: Any = None,
        provider_options: Any = None,
        **kwargs: Any,
    ):
        from .session_model import prepare_model, write_optimized_model

        t_start = time.perf_counter()
        self._options = sess_options or SessionOptions()
        if not isinstance(self._options, SessionOptions):
            raise InvalidOptionError(f"sess_options must be an onnxrt.SessionOptions, got {type(self._options).__name__}.")
        self._log_level = self._options.log_severity_level
        self._logid = self._options.logid
        self._verbosity = self._options.log_verbosity_level
        self._profiler: Profiler | None = None
        self._log(1, f"Session options {self._options!r}")
        self._providers = normalize_providers(providers, provider_options, strict=False)
        model = prepare_model(path_or_bytes, self._options)
        if os.environ.get("ORT_LOAD_CONFIG_FROM_MODEL") == "1":
            proto, model = _model_proto(model)
            self._options = _options_from_model(proto, self._options)
        self._log(0, "Initializing session.")
        self._engine = OnnxInference(model, options=self._options)
        graph = self._engine.structure.graph
        inits = self._engine.initializer_names
        self._inputs = [NodeArg(vi.name, type_shape(vi.type), type_string(vi.type)) for vi in graph.input if vi.name not in inits]
        self._overridable = [
            NodeArg(vi.name, type_shape(vi.type), type_string(vi.type))
            for vi in graph.input
            if vi.name in inits and self._engine.overridable
        ]
        self._outputs = [NodeArg(vi.name, type_shape(vi.type), type_string(vi.type)) for vi in graph.output]
        self._feed_types = {vi.name: _FeedType(vi) for vi in graph.input if vi.HasField("type")}
        # scalar and string inputs go through _feeds on every run (shape [1], bytes arrays)
        self._convert_always = any(ft.scalar or ft.string for ft in self._feed_types.values())
        path = getattr(self._options, "optimized_model_filepath", "")
        if path:
            write_optimized_model(self._engine, path, self._options)
        if self._options.enable_profiling:
            self._start_profiling()
        if self._log_on(0):
            plan = self._engine.plan
            self._log(
                0,
                f"Session successfully initialized in {(time.perf_counter() - t_start) * 1e3:.3f} ms: "
                f"{len(graph.node)} nodes in the model, {len(plan.steps)} in the plan "
                f"(optimisation level {int(self._options.graph_optimization_level)}, passes {list(plan.applied_passes)}), "
                f"inputs {[a.name for a in self._inputs]}, outputs {[a.name for a in self._outputs]}.",
            )

    def __getstate__(self) -> dict[str, Any]:
        """Sessions pickle (for multiprocessing): the engine is rebuilt from the model's bytes;
        a profiling session starts a fresh trace in the copy."""
        state = dict(self.__dict__)
        state["_profiler"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._options.enable_profiling:
            self._start_profiling()

    def _start_profiling(self) -> None:
        self._profiler = Profiler(self._options.profile_file_prefix, self._engine.warmup_runs)
        self._profiling_start_ns = time.time_ns()

    # -- logging -----------------------------------------------------------------------

    def _log_on(self, severity: int, level: int = -1) -> bool:
        """Whether a record of ``severity`` passes (``level``: a run's severity, -1 the session's)."""
        if level < 0:
            level = self._log_level
        return severity >= (level if level >= 0 else LOGGER.severity)

    def _log(self, severity: int, message: str, level: int = -1, logid: str | None = None) -> None:
        """Log one record from the caller's place (when its severity passes the filter)."""
        if not self._log_on(severity, level):
            return
        import sys

        frame = sys._getframe(1)
        location = f"session.py:{frame.f_lineno} {frame.f_code.co_name}"
        log(severity, self._logid if logid is None else logid, location, message)

    @property
    def engine(self) -> OnnxInference:
        """The underlying :class:`OnnxInference`."""
        return self._engine

    def get_inputs(self) -> list[NodeArg]:
        return list(self._inputs)

    def get_outputs(self) -> list[NodeArg]:
        return list(self._outputs)

    def get_overridable_initializers(self) -> list[NodeArg]:
        return list(self._overridable)

    def get_providers(self) -> list[str]:
        """Always ``["CPUExecutionProvider"]``."""
        return list(self._providers)

    def get_provider_options(self) -> dict[str, dict[str, str]]:
        """``{"CPUExecutionProvider": {}}``: the CPU provider has no options (as in onnxruntime)."""
        return {p: {} for p in self._providers}

    def set_providers(self, providers: Any = None, provider_options: Any = None) -> None:
        """Choose the providers: CPU is the only one; other known providers are dropped with a
        ``UserWarning``, an unknown name raises :class:`~onnxrt.NotApplicableError` (a
        ``RuntimeError``, as onnxruntime's "Unknown Provider Type")."""
        self._providers = normalize_providers(providers, provider_options, strict=True)

    def get_session_options(self) -> SessionOptions:
        return self._options

    def get_modelmeta(self) -> ModelMetadata:
        """The model's metadata (producer, graph name, domain, descriptions, version, custom
        metadata). The ModelProto itself is ``session.engine.model``."""
        m = self._engine.structure
        return ModelMetadata(
            producer_name=m.producer_name,
            graph_name=m.graph.name,
            domain=m.domain,
            description=m.doc_string,
            graph_description=m.graph.doc_string,
            version=int(m.model_version),
            custom_metadata_map={p.key: p.value for p in m.metadata_props},
        )

    # -- runs --------------------------------------------------------------------------

    def _feeds(self, feed: dict[str, Any]) -> dict[str, Any]:
        """A new feed dict: OrtValues unwrapped, lists converted, bytes arrays of string
        inputs decoded, single-element arrays of scalar inputs read as scalars."""
        out: dict[str, Any] = {}
        types = self._feed_types
        for name, value in feed.items():
            ft = types.get(name)
            if isinstance(value, OrtValue):
                value = _unwrap(name, value, ft is not None and ft.sparse)
            if ft is not None and ft.tensor:
                if type(value) is list:
                    value = _list_to_array(name, value, ft)
                elif ft.string and isinstance(value, np.ndarray) and value.dtype.kind in "SV":
                    if value.dtype.kind == "V":  # fixed-size raw bytes, as onnxruntime takes them
                        value = np.array([v.tobytes() for v in value.reshape(-1)], dtype=object).reshape(value.shape)
                    value = _strings(value)
                if ft.scalar and isinstance(value, np.ndarray) and value.ndim and value.size == 1:
                    value = value.reshape(())
            out[name] = value
        return out

    def run(self, output_names: list[str] | None, input_feed: dict[str, Any], run_options: RunOptions | None = None) -> list[Any]:
        """Run the model; returns the requested outputs as a list of numpy arrays (lists for
        sequences). ``run_options.terminate`` is checked before the run and after each node."""
        if (
            run_options is None and not output_names and type(input_feed) is dict and self._profiler is None
            and not self._convert_always and (self._log_level if self._log_level >= 0 else LOGGER.severity) > 0
        ):
            # the hot path: arrays in, every output out, nothing to log or profile
            for v in input_feed.values():
                if type(v) is not np.ndarray:
                    break
            else:
                try:
                    outs = self._engine.run_outputs(input_feed)
                except InvalidFeedError as e:
                    raise self._missing_inputs_error(input_feed, e) from None
                # views over the engine's buffers, as onnxruntime's results are (``base`` set)
                return [r.view() if type(r) is np.ndarray and r.base is None else r for r in outs]
        if not isinstance(input_feed, dict):
            raise InvalidFeedError(f"input_feed must be a dict name -> value, got {type(input_feed).__name__}.")
        if isinstance(output_names, str):
            raise InvalidArgumentError(f"output_names must be a list of names or None, got the str {output_names!r}.")
        if run_options is not None and getattr(run_options, "_adapters", None):
            params: dict[str, Any] = {}
            for adapter in run_options._adapters:
                params.update(adapter._params)
            input_feed = {**params, **input_feed}
        if self._convert_always:
            input_feed = self._feeds(input_feed)
        else:
            for v in input_feed.values():
                if type(v) is not np.ndarray:
                    input_feed = self._feeds(input_feed)
                    break
        try:
            if (
                run_options is None
                and not output_names
                and self._profiler is None
                and (self._log_level if self._log_level >= 0 else LOGGER.severity) > 0
            ):
                return [_session_owned(r) for r in self._engine.run_outputs(input_feed)]  # the hot path
            return self._run(output_names, input_feed, run_options)
        except InvalidFeedError as e:
            raise self._missing_inputs_error(input_feed, e) from None

    def _missing_inputs_error(self, input_feed: dict[str, Any], e: InvalidFeedError) -> InvalidFeedError:
        """``e``, or onnxruntime's words for missing inputs first (code matches them), then the engine's details."""
        missing = [n for n in self._engine.plan.required_inputs if n not in input_feed]
        if not missing:
            return e
        return InvalidFeedError(f"Required inputs ({missing}) are missing from input feed ({list(input_feed)}). {e}")

    def _run(self, output_names: list[str] | None, input_feed: dict[str, Any], run_options: RunOptions | None) -> list[Any]:
        if run_options is None:
            return self._run_logged(output_names, input_feed, None)
        # Loop and Scan find the options here and stop between iterations when terminate is set
        token = CURRENT_RUN_OPTIONS.set(run_options)
        try:
            return self._run_logged(output_names, input_feed, run_options)
        finally:
            CURRENT_RUN_OPTIONS.reset(token)

    def _run_logged(self, output_names: list[str] | None, input_feed: dict[str, Any], run_options: RunOptions | None) -> list[Any]:
        names = list(output_names) if output_names else None
        trace = self._terminator(run_options) if run_options is not None else None
        level, logid, verbosity = self._log_level, self._logid, self._verbosity
        if run_options is not None:
            if run_options.log_severity_level >= 0:
                level = run_options.log_severity_level
            logid = run_options.logid or logid
            verbosity = max(verbosity, run_options.log_verbosity_level)
        if self._log_on(0, level):
            tag = f" (run tag {run_options.run_tag!r})" if run_options is not None and run_options.run_tag else ""
            self._log(
                0, f"Run{tag}: feeds {sorted(input_feed)}, fetches {names or [a.name for a in self._outputs]}.", level, logid
            )
            if max(verbosity, LOGGER.verbosity) >= 1:
                trace = self._node_logger(trace, level, logid)
            t0 = time.perf_counter()
            results = self._run_traced(names, input_feed, trace)
            self._log(0, f"Run{tag} finished in {(time.perf_counter() - t0) * 1e3:.3f} ms.", level, logid)
            return results
        return self._run_traced(names, input_feed, trace)

    def _node_logger(self, inner: Callable[..., None] | None, level: int, logid: str) -> Callable[..., None]:
        """A run's trace that logs a Verbose record per node (verbosity >= 1), then calls ``inner``."""

        def trace(st: Any, args: Any, res: Any, dt: float) -> None:
            self._log(0, f"Node {st.name!r} ({st.op_type}) ran in {dt * 1e3:.3f} ms.", level, logid)
            if inner is not None:
                inner(st, args, res, dt)

        return trace

    def _run_traced(self, names: list[str] | None, input_feed: dict[str, Any], trace: Callable[..., None] | None) -> list[Any]:
        if self._profiler is not None:
            node_trace = self._profiler.node_trace()
            if trace is not None:
                stop = trace

                def trace(st: Any, args: Any, res: Any, dt: float) -> None:
                    node_trace(st, args, res, dt)
                    stop(st, args, res, dt)
            else:
                trace = node_trace
            t0 = time.perf_counter_ns()
            res = self._engine.run(input_feed, output_names=names, trace=trace)
            self._profiler.model_event(t0, time.perf_counter_ns(), node_trace.warmup)
        elif trace is not None:
            res = self._engine.run(input_feed, output_names=names, trace=trace)
        else:
            res = self._engine.run(input_feed, output_names=names)
        if names is None:
            return [_session_owned(r) for r in res.values()]
        out = [_session_owned(res[n]) for n in names]
        # a name requested twice: two arrays the caller may write independently
        return _distinct(out) if len(out) > 1 else out

    @staticmethod
    def _terminator(run_options: Any) -> Callable[..., None]:
        if not isinstance(run_options, RunOptions):
            raise InvalidOptionError(f"run_options must be an onnxrt.RunOptions, got {type(run_options).__name__}.")

        def stop(*_: Any) -> None:
            check_terminate(run_options)

        stop()
        return stop

    def run_async(
        self,
        output_names: list[str] | None,
        input_feed: dict[str, Any],
        callback: Callable[[list[Any], Any, str], None],
        user_data: Any,
        run_options: RunOptions | None = None,
    ) -> None:
        """Run on another thread and call ``callback(results, user_data, err)`` there:
        ``results`` the list :meth:`run` returns and ``err`` ``""``, or ``[]`` and the error's
        message. Missing inputs raise :class:`~onnxrt.InvalidFeedError` here, before the
        thread starts, as in onnxruntime. Deviation: a new thread per call (onnxruntime takes
        one of its intra-op pool)."""
        if not callable(callback):
            raise InvalidArgumentError(f"run_async: callback must be callable, got {type(callback).__name__}.")
        if not isinstance(input_feed, dict):
            raise InvalidFeedError(f"input_feed must be a dict name -> value, got {type(input_feed).__name__}.")
        missing = [n for n in self._engine.plan.required_inputs if n not in input_feed]
        if missing:
            raise InvalidFeedError(f"Required inputs ({missing}) are missing from input feed ({list(input_feed)}).")
        feed = dict(input_feed)
        names = list(output_names) if output_names else None

        def work() -> None:
            try:
                results = self.run(names, feed, run_options)
            except Exception as e:  # noqa: BLE001  (the callback receives every failure)
                callback([], user_data, str(e))
                return
            callback(results, user_data, "")

        threading.Thread(target=work, name="onnxrt-run-async", daemon=True).start()

    def run_with_ort_values(
        self, output_names: list[str] | None, input_dict_ort_values: dict[str, OrtValue], run_options: RunOptions | None = None
    ) -> list[OrtValue]:
        """:meth:`run` with :class:`~onnxrt.OrtValue` feeds; returns OrtValues (over the
        result arrays, no copy)."""
        if not isinstance(input_dict_ort_values, dict):
            raise InvalidFeedError(f"input_dict_ort_values must be a dict name -> OrtValue, got {type(input_dict_ort_values).__name__}.")
        for name, v in input_dict_ort_values.items():
            if not isinstance(v, OrtValue):
                raise InvalidFeedError(f"run_with_ort_values: input {name!r} must be an OrtValue, got {type(v).__name__}.")
        return [OrtValue(r) for r in self.run(output_names, input_dict_ort_values, run_options)]

    def io_binding(self) -> IOBinding:
        """A new :class:`~onnxrt.IOBinding` of this session."""
        return IOBinding(self)

    def run_with_iobinding(self, iobinding: IOBinding, run_options: RunOptions | None = None) -> None:
        """Run with the inputs and outputs bound in ``iobinding`` (made by :meth:`io_binding`)."""
        if not isinstance(iobinding, IOBinding) or iobinding._session is not self:
            raise InvalidArgumentError("IOBinding must be used with the session that created it.")
        iobinding._run(run_options)

    def end_profiling(self) -> str:
        """Stop profiling and write the trace (Chrome trace event format); returns its path.

        Returns ``""`` when profiling was not enabled, as onnxruntime does.
        """
        if self._profiler is None:
            return ""
        path = self._profiler.write()
        self._profiler = None
        return path

    def get_profiling_start_time_ns(self) -> int:
        """When profiling started, in nanoseconds since the epoch (0 when not profiling)."""
        return self._profiling_start_ns if self._profiler is not None else 0

    # -- memory and provider assignment ------------------------------------------------

    def get_input_memory_infos(self) -> list[OrtMemoryInfo]:
        """Where each input is read from: CPU memory (numpy arrays), one per input."""
        return [cpu_memory_info() for _ in self._inputs]

    def get_output_memory_infos(self) -> list[OrtMemoryInfo]:
        """Where each output is written: CPU memory (numpy arrays), one per output."""
        return [cpu_memory_info() for _ in self._outputs]

    def get_input_epdevices(self) -> list[None]:
        """The execution-provider device of each input: ``None`` for each (onnxruntime too
        gives ``None`` where no plug-in provider device was selected; onnxrt has none)."""
        return [None for _ in self._inputs]

    def get_provider_graph_assignment_info(self) -> list[OrtEpAssignedSubgraph]:
        """The nodes each provider runs: one subgraph per node the session runs (after
        onnxrt's optimisations), all on ``CPUExecutionProvider``. Needs the session entry
        ``session.record_ep_graph_assignment_info`` = ``"1"``, as in onnxruntime (else
        :class:`~onnxrt.SessionStateError`, a ``RuntimeError``)."""
        if self._options._config.get(_RECORD_ASSIGNMENT) != "1":
            raise SessionStateError(
                f"Session configuration entry '{_RECORD_ASSIGNMENT}' must be set to \"1\" to retrieve EP graph "
                f"assignment information (add_session_config_entry('{_RECORD_ASSIGNMENT}', '1') before creating the session)."
            )
        return [
            OrtEpAssignedSubgraph(
                "CPUExecutionProvider",
                (OrtEpAssignedNode(st.name, st.op_type, st.node.proto.domain),),
            )
            for st in self._engine.plan.steps
        ]

    def uses_shared_allocator(self) -> bool:
        """Whether the session takes the CPU allocator registered by
        :func:`onnxrt.create_and_register_allocator` (the entry ``session.use_env_allocators``
        is ``"1"`` and one is registered). numpy allocates the arrays either way."""
        return self._options._config.get("session.use_env_allocators") == "1" and any(
            k[0] == "CPUExecutionProvider" for k in SHARED_ALLOCATORS
        )


def _session_owned(value: Any) -> Any:
    """A result array as a view over the engine's buffer (no copy), so that ``base`` names
    the buffer the session allocated, as onnxruntime's results do."""
    if type(value) is np.ndarray and value.base is None:
        return value.view()
    return value

