"""SessionOptions and RunOptions: onnxruntime's attribute names, types and checks, and the enums they take."""

from __future__ import annotations

import enum
import operator
import os
from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from .errors import ConfigEntryError, InvalidOptionError, NotApplicableError, RunTerminatedError, UnknownOptionError


class GraphOptimizationLevel(enum.IntEnum):
    """Optimisation levels, with onnxruntime's names and values (``ORT_ENABLE_LAYOUT`` runs
    what ``ORT_ENABLE_EXTENDED`` runs: onnxrt has no layout passes)."""

    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_LAYOUT = 3
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    """onnxruntime's execution modes. onnxrt runs the nodes of a graph one after another in
    both; ``ORT_PARALLEL`` is accepted and kept, and large kernels still split over threads."""

    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    """onnxruntime's node orders. onnxrt keeps the graph's topological order in all of them."""

    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


# ------------------------------------------------------------------------------------------
# value checks: each takes the option's full name (for messages) and the value, returns the
# value stored; the types accepted are onnxruntime's (an int also takes a bool or a numpy
# integer, a bool also takes an int), a wrong type raises InvalidOptionError (a TypeError)
# ------------------------------------------------------------------------------------------

Check = Callable[[str, Any], Any]


def _int(minimum: int | None = None) -> Check:
    def check(what: str, value: Any) -> int:
        try:
            number = operator.index(value)
        except TypeError:
            raise InvalidOptionError(f"{what} expects an int, got {type(value).__name__} {value!r}.") from None
        if minimum is not None and number < minimum:
            raise InvalidOptionError(f"{what} expects an int >= {minimum}, got {number}.")
        return int(number)

    return check


def _optional_int(minimum: int) -> Check:
    as_int = _int(minimum)

    def check(what: str, value: Any) -> int | None:
        return None if value is None else as_int(what, value)

    return check


def _bool(what: str, value: Any) -> bool:
    kind = type(value)
    if isinstance(value, bool) or (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_")):  # numpy.bool_
        return bool(value)
    try:
        return bool(operator.index(value))
    except TypeError:
        raise InvalidOptionError(f"{what} expects a bool, got {type(value).__name__} {value!r}.") from None


def _str(what: str, value: Any) -> str:
    if not isinstance(value, str):
        raise InvalidOptionError(f"{what} expects a str, got {type(value).__name__} {value!r}.")
    return value


def _path(what: str, value: Any) -> str:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    if not isinstance(value, str):
        raise InvalidOptionError(f"{what} expects a str path, got {type(value).__name__} {value!r}.")
    return value


def _enum(cls: type[enum.IntEnum]) -> Check:
    def check(what: str, value: Any) -> enum.IntEnum:
        if not isinstance(value, cls):
            raise InvalidOptionError(
                f"{what} expects a member of onnxrt.{cls.__name__} ({', '.join(m.name for m in cls)}), "
                f"got {type(value).__name__} {value!r}."
            )
        return value

    return check


class _Options:
    """Attributes declared in ``_SPEC`` (name -> (check, default)); anything else is refused."""

    _SPEC: dict[str, tuple[Check, Any]] = {}

    def __init__(self) -> None:
        for name, (_, default) in self._SPEC.items():
            object.__setattr__(self, name, default)
        object.__setattr__(self, "_config", {})

    def __setattr__(self, name: str, value: Any) -> None:
        spec = self._SPEC.get(name)
        if spec is None:
            raise UnknownOptionError(
                f"{type(self).__name__} has no attribute {name!r}; its attributes are {sorted(self._SPEC)}."
            )
        object.__setattr__(self, name, spec[0](f"{type(self).__name__}.{name}", value))

    def __getattr__(self, name: str) -> Any:  # only called for names that do not exist
        raise UnknownOptionError(
            f"{type(self).__name__} has no attribute {name!r}; its attributes are {sorted(self._SPEC)}."
        )

    def __delattr__(self, name: str) -> None:
        raise UnknownOptionError(f"{type(self).__name__}.{name} cannot be deleted.")

    def _add_entry(self, method: str, key: Any, value: Any) -> None:
        if not isinstance(key, str) or not isinstance(value, str):
            raise InvalidOptionError(
                f"{type(self).__name__}.{method} expects (str, str), got ({type(key).__name__}, {type(value).__name__})."
            )
        self._config[key] = value

    def _get_entry(self, key: Any) -> str:
        if not isinstance(key, str):
            raise InvalidOptionError(f"A configuration key is a str, got {type(key).__name__} {key!r}.")
        try:
            return self._config[key]
        except KeyError:
            raise ConfigEntryError(f"{type(self).__name__} does not have configuration with key: {key}") from None

    def _copy(self) -> Any:
        """A copy whose tables (configuration entries, overrides) are the copy's own."""
        new = object.__new__(type(self))
        for key, value in self.__dict__.items():
            object.__setattr__(new, key, dict(value) if isinstance(value, dict) else value)
        return new

    def __repr__(self) -> str:
        shown = {name: getattr(self, name) for name in self._SPEC}
        return f"{type(self).__name__}({shown!r})"


class SessionOptions(_Options):
    """Options of a session, with onnxruntime's attribute names, defaults and type checks.

    Setting an attribute onnxruntime does not have raises :class:`~onnxrt.UnknownOptionError`
    (an ``AttributeError``), a value of the wrong type :class:`~onnxrt.InvalidOptionError`
    (a ``TypeError``). Deviations from onnxruntime:

    * ``max_tensor_bytes`` (onnxrt's own): refuse any single tensor larger than this many
      bytes (None: no cap but physical memory).
    * ``max_expanded_nodes`` (onnxrt's own, default 1,000,000): the most nodes one graph
      (its subgraphs included) may have once model-local functions are inlined; a model
      above it is refused when the session is created, before any inlining.
    * ``strict`` (onnxrt's own, default False): the one-time warnings onnxrt gives for models
      that break the ONNX specification become errors.
    * ``fast_paths`` (onnxrt's own, default True): False runs every node on its reference
      kernel in numpy, without compiled code (:mod:`onnxrt.dispatch`), to tell a fast path's
      discrepancy from the model's own; ``ONNXRT_FASTPATHS=0`` does so for the whole process.
    * ``profile_file_prefix`` defaults to ``"onnxrt_profile"``.
    * ``log_severity_level`` (-1: the default logger's, see
      :func:`onnxrt.set_default_logger_severity`) and ``logid`` filter and label the records
      the session logs at its creation and runs (to :func:`onnxrt.set_default_logger_callback`'s
      callback); ``log_verbosity_level`` >= 1 adds a record per node at Verbose severity.
    * ``optimized_model_filepath`` also takes an ``os.PathLike``; the file is always ONNX
      (never onnxruntime's ORT format) and holds onnxrt's fused operators (domain ``onnxrt``).
    * Thread counts must be >= 0 (0: onnxrt chooses). ``inter_op_num_threads``,
      ``execution_mode``, ``execution_order``, the memory
      pattern and reuse flags, ``use_deterministic_compute`` and ``use_per_session_threads``
      are kept for compatibility and change nothing: onnxrt runs nodes in graph order on numpy
      arrays and is deterministic.
    * ``enable_cpu_mem_arena`` (True): the runs of a large model allocate from onnxrt's run
      arena (numpy's allocator for the run's thread; docs/threads.md); False keeps numpy's.
    * ``register_custom_ops_library`` raises :class:`~onnxrt.NotApplicableError`: native
      libraries cannot be loaded; register Python kernels with :func:`onnxrt.register`.
    """

    _SPEC = {
        "graph_optimization_level": (_enum(GraphOptimizationLevel), GraphOptimizationLevel.ORT_ENABLE_ALL),
        "enable_profiling": (_bool, False),
        "profile_file_prefix": (_str, "onnxrt_profile"),
        "intra_op_num_threads": (_int(0), 0),
        "inter_op_num_threads": (_int(0), 0),
        "log_severity_level": (_int(), -1),
        "log_verbosity_level": (_int(), 0),
        "logid": (_str, ""),
        "execution_mode": (_enum(ExecutionMode), ExecutionMode.ORT_SEQUENTIAL),
        "execution_order": (_enum(ExecutionOrder), ExecutionOrder.DEFAULT),
        "optimized_model_filepath": (_path, ""),
        "enable_cpu_mem_arena": (_bool, True),
        "enable_mem_pattern": (_bool, True),
        "enable_mem_reuse": (_bool, True),
        "use_deterministic_compute": (_bool, False),
        "use_per_session_threads": (_bool, True),
        "max_tensor_bytes": (_optional_int(0), None),
        "max_expanded_nodes": (_int(1), 1_000_000),  # functions.MAX_EXPANDED_NODES
        "strict": (_bool, False),
        "fast_paths": (_bool, True),
    }

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "_free_dims_by_name", {})
        object.__setattr__(self, "_free_dims_by_denotation", {})
        object.__setattr__(self, "_initializers", {})
        object.__setattr__(self, "_external_initializers", {})
        object.__setattr__(self, "_external_files", {})

    def add_session_config_entry(self, key: str, value: str) -> None:
        """Set a configuration entry (onnxruntime's ``"session.*"`` keys). onnxrt reads
        ``session.optimized_model_external_initializers_file_name`` and
        ``session.optimized_model_external_initializers_min_size_in_bytes`` (where
        ``optimized_model_filepath`` puts large initializers); the others are kept only."""
        self._add_entry("add_session_config_entry", key, value)

    def get_session_config_entry(self, key: str) -> str:
        """The entry's value; :class:`~onnxrt.ConfigEntryError` (a ``RuntimeError``) when never set."""
        return self._get_entry(key)

    def _add_dim(self, table: dict[str, int], method: str, name: Any, value: Any) -> None:
        if not isinstance(name, str):
            raise InvalidOptionError(f"SessionOptions.{method} expects a str name, got {type(name).__name__} {name!r}.")
        size = _int(0)(f"SessionOptions.{method}({name!r}, ...)", value)
        table.setdefault(name, size)  # the first value given for a name stays, as in onnxruntime

    def add_free_dimension_override_by_name(self, dim_name: str, dim_value: int) -> None:
        """Fix the symbolic dimension ``dim_name`` of the graph's inputs (and outputs) to
        ``dim_value``: the inputs report it and a feed of another size is refused.
        Deviation: a negative size is refused here (onnxruntime accepts it)."""
        self._add_dim(self._free_dims_by_name, "add_free_dimension_override_by_name", dim_name, dim_value)

    def add_free_dimension_override_by_denotation(self, dim_denotation: str, dim_value: int) -> None:
        """Fix every input dimension whose denotation is ``dim_denotation`` (``"DATA_BATCH"``)
        to ``dim_value``; a fixed dimension of another size is an error at session creation."""
        self._add_dim(self._free_dims_by_denotation, "add_free_dimension_override_by_denotation", dim_denotation, dim_value)

    def add_initializer(self, name: str, val: Any) -> None:
        """Replace the model's initializer ``name`` by ``val`` (an :class:`~onnxrt.OrtValue`,
        or a numpy array) in the sessions made with these options. Deviation: onnxruntime
        ignores an unknown name and takes another shape or element type; onnxrt refuses them
        when the session is created. The array is read, never written."""
        self._initializers[_name("add_initializer", name)] = _array("add_initializer", name, val)

    def add_external_initializers(self, names: list[str], values: list[Any]) -> None:
        """Give the values of initializers whose data the model keeps in external files
        (``values``: :class:`~onnxrt.OrtValue` or numpy arrays, one per name)."""
        names, values = _pairs("add_external_initializers", names, values)
        for n, v in zip(names, values):
            self._external_initializers[_name("add_external_initializers", n)] = _array("add_external_initializers", n, v)

    def add_external_initializers_from_files_in_memory(
        self, names: list[str], buffers: list[Any], lengths: list[int]
    ) -> None:
        """Give the contents of the external data files the model names (``names``: file names
        as the model's ``location`` fields spell them; ``buffers``: bytes-like; ``lengths``:
        how many bytes of each buffer are the file)."""
        names, buffers = _pairs("add_external_initializers_from_files_in_memory", names, buffers)
        names, lengths = _pairs("add_external_initializers_from_files_in_memory", names, lengths)
        for n, b, ln in zip(names, buffers, lengths):
            key = _name("add_external_initializers_from_files_in_memory", n)
            try:
                data = memoryview(b).cast("B")
            except TypeError:
                raise InvalidOptionError(
                    f"SessionOptions.add_external_initializers_from_files_in_memory: the buffer of {n!r} is a "
                    f"{type(b).__name__}, not a bytes-like object."
                ) from None
            size = _int(0)(f"the length of file {n!r}", ln)
            if size > data.nbytes:
                raise InvalidOptionError(
                    f"SessionOptions.add_external_initializers_from_files_in_memory: file {n!r} is said to hold "
                    f"{size} bytes, its buffer has {data.nbytes}."
                )
            self._external_files[key] = bytes(data[:size])

    def register_custom_ops_library(self, library_path: str) -> None:
        """Not applicable: onnxrt cannot load native custom-operator libraries."""
        raise NotApplicableError(
            f"onnxrt cannot load the native custom-operator library {library_path!r}: its kernels are "
            f"Python functions; register them with onnxrt.register (see docs/custom_operators.md)."
        )


#: the RunOptions of the run in progress in this thread (InferenceSession.run with options):
#: Loop and Scan read it once per call and check ``terminate`` before every iteration
CURRENT_RUN_OPTIONS: ContextVar[Any] = ContextVar("onnxrt_run_options", default=None)


def check_terminate(run_options: Any) -> None:
    """Raise RunTerminatedError when ``run_options`` (None: never) has ``terminate`` set."""
    if run_options is not None and run_options.terminate:
        raise RunTerminatedError("Exiting due to terminate flag being set to true (RunOptions.terminate).")


class RunOptions(_Options):
    """Per-run options, with onnxruntime's attribute names and type checks.

    ``terminate`` set to True (from any thread) makes runs using these options stop before
    their next node, or a Loop's or Scan's next iteration, with :class:`~onnxrt.RunTerminatedError`. ``run_tag`` is onnxrt's own
    (a free label, added to the run's log records). ``log_severity_level`` (-1: the
    session's), ``log_verbosity_level`` and ``logid`` filter and label the run's log records.
    ``only_execute_path_to_fetches`` is kept and changes nothing (onnxrt runs what the
    fetches need either way). Run configuration entries are kept only.
    """

    _SPEC = {
        "log_severity_level": (_int(), -1),
        "log_verbosity_level": (_int(), 0),
        "logid": (_str, ""),
        "run_tag": (_str, ""),
        "only_execute_path_to_fetches": (_bool, False),
        "terminate": (_bool, False),
    }

    def __init__(self) -> None:
        super().__init__()
        object.__setattr__(self, "_adapters", [])

    def add_active_adapter(self, adapter: Any) -> None:
        """Make a loaded :class:`~onnxrt.LoraAdapter` active in the runs using these options:
        its parameters are fed as the model's inputs of the same names (a feed given to
        ``run`` for a name wins; adapters added later win over earlier ones)."""
        from .adapters import LoraAdapter

        if not isinstance(adapter, LoraAdapter):
            raise InvalidOptionError(f"RunOptions.add_active_adapter expects an onnxrt.LoraAdapter, got {type(adapter).__name__}.")
        if not adapter._loaded:
            raise InvalidOptionError("RunOptions.add_active_adapter: the adapter holds no parameters; call its Load(path) first.")
        self._adapters.append(adapter)

    def add_run_config_entry(self, key: str, value: str) -> None:
        """Set a run configuration entry (kept, readable with :meth:`get_run_config_entry`)."""
        self._add_entry("add_run_config_entry", key, value)

    def get_run_config_entry(self, key: str) -> str:
        """The entry's value; :class:`~onnxrt.ConfigEntryError` (a ``RuntimeError``) when never set."""
        return self._get_entry(key)


def _name(method: str, name: Any) -> str:
    if not isinstance(name, str):
        raise InvalidOptionError(f"SessionOptions.{method} expects str names, got {type(name).__name__} {name!r}.")
    return name


def _pairs(method: str, first: Any, second: Any) -> tuple[list[Any], list[Any]]:
    if isinstance(first, str) or not isinstance(first, list | tuple) or not isinstance(second, list | tuple):
        raise InvalidOptionError(
            f"SessionOptions.{method} expects lists, got {type(first).__name__} and {type(second).__name__}."
        )
    if len(first) != len(second):
        raise InvalidOptionError(f"SessionOptions.{method} got {len(first)} names and {len(second)} values.")
    return list(first), list(second)


def _array(method: str, name: Any, value: Any) -> Any:
    """The numpy array an OrtValue or array argument holds (never copied, never written)."""
    import numpy as np

    from .ortvalue import OrtValue

    if isinstance(value, OrtValue):
        if not value.is_tensor():
            raise InvalidOptionError(f"SessionOptions.{method}: the value of {name!r} is not a dense tensor.")
        return value.numpy()
    if isinstance(value, np.ndarray):
        return value
    raise InvalidOptionError(
        f"SessionOptions.{method}: the value of {name!r} must be an OrtValue or a numpy array, got {type(value).__name__}."
    )
