"""InferenceSession: the onnxruntime-compatible front of the engine."""

from __future__ import annotations

import enum
import time
from dataclasses import dataclass
from typing import Any

from .dtypes import type_shape, type_string
from .errors import InvalidFeedError
from .inference import OnnxInference
from .tools.profiling import Profiler


class GraphOptimizationLevel(enum.IntEnum):
    """Optimisation levels, with onnxruntime's names."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class SessionOptions:
    """Options of a session; the attribute names follow onnxruntime's where they exist."""

    def __init__(self) -> None:
        self.graph_optimization_level: GraphOptimizationLevel = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.enable_profiling: bool = False
        self.profile_file_prefix: str = "onnxrt_profile"
        self.intra_op_num_threads: int = 0
        self.inter_op_num_threads: int = 0
        self.log_severity_level: int = 2
        #: refuse any single tensor larger than this many bytes (None: no cap)
        self.max_tensor_bytes: int | None = None

    def __repr__(self) -> str:
        return f"SessionOptions({vars(self)!r})"


class RunOptions:
    """Per-run options (kept for onnxruntime compatibility)."""

    def __init__(self) -> None:
        self.log_severity_level = 2
        self.run_tag = ""


@dataclass(frozen=True)
class NodeArg:
    """A graph input or output as onnxruntime describes it."""

    name: str
    shape: list[int | str | None] | None
    type: str


class InferenceSession:
    """``InferenceSession(model, sess_options=None, providers=None)``; ``run(output_names, input_feed)``.

    ``model`` is a path, bytes, a binary file object or an ``onnx.ModelProto``.
    ``run`` returns a list in the order of ``output_names`` (all outputs when None);
    any named value of the graph may be requested.
    """

    def __init__(self, path_or_bytes: Any, sess_options: SessionOptions | None = None, providers: Any = None, **kwargs: Any):
        self._options = sess_options or SessionOptions()
        self._providers = list(providers) if providers else ["CPUExecutionProvider"]
        self._engine = OnnxInference(path_or_bytes, options=self._options)
        graph = self._engine.model.graph
        inits = self._engine.initializer_names
        self._inputs = [NodeArg(vi.name, type_shape(vi.type), type_string(vi.type)) for vi in graph.input if vi.name not in inits]
        self._overridable = [
            NodeArg(vi.name, type_shape(vi.type), type_string(vi.type))
            for vi in graph.input
            if vi.name in inits and self._engine.overridable
        ]
        self._outputs = [NodeArg(vi.name, type_shape(vi.type), type_string(vi.type)) for vi in graph.output]
        self._profiler: Profiler | None = None
        if self._options.enable_profiling:
            self._profiler = Profiler(self._options.profile_file_prefix)

    def __getstate__(self) -> dict[str, Any]:
        """Sessions pickle (for multiprocessing): the engine is rebuilt from the model's bytes;
        a profiling session starts a fresh trace in the copy."""
        state = dict(self.__dict__)
        state["_profiler"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        if self._options.enable_profiling:
            self._profiler = Profiler(self._options.profile_file_prefix)

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
        return list(self._providers)

    def get_session_options(self) -> SessionOptions:
        return self._options

    def get_modelmeta(self) -> Any:
        return self._engine.model

    def run(self, output_names: list[str] | None, input_feed: dict[str, Any], run_options: RunOptions | None = None) -> list[Any]:
        if not isinstance(input_feed, dict):
            raise InvalidFeedError(f"input_feed must be a dict name -> value, got {type(input_feed).__name__}.")
        if not output_names and self._profiler is None:
            return self._engine.run_outputs(input_feed)  # the hot path
        names = list(output_names) if output_names else None
        if self._profiler is not None:
            t0 = time.perf_counter_ns()
            res = self._engine.run(input_feed, output_names=names, trace=self._profiler.node_trace())
            self._profiler.model_event(t0, time.perf_counter_ns())
        else:
            res = self._engine.run(input_feed, output_names=names)
        if names is None:
            return list(res.values())
        return [res[n] for n in names]

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
        return self._profiler.start_ns if self._profiler is not None else 0
