"""Execution providers and build information: onnxruntime's module functions for onnxrt."""

from __future__ import annotations

import sys
import warnings
from typing import Any

from .errors import InvalidOptionError, NotApplicableError

CPU = "CPUExecutionProvider"

#: onnxruntime's provider names, highest priority first, CPU last (as get_all_providers lists them)
_ALL_PROVIDERS = (
    "TensorrtExecutionProvider",
    "CUDAExecutionProvider",
    "MIGraphXExecutionProvider",
    "ROCMExecutionProvider",
    "OpenVINOExecutionProvider",
    "DnnlExecutionProvider",
    "VitisAIExecutionProvider",
    "QNNExecutionProvider",
    "NnapiExecutionProvider",
    "VSINPUExecutionProvider",
    "JsExecutionProvider",
    "CoreMLExecutionProvider",
    "ArmNNExecutionProvider",
    "ACLExecutionProvider",
    "DmlExecutionProvider",
    "RknpuExecutionProvider",
    "WebNNExecutionProvider",
    "WebGpuExecutionProvider",
    "XnnpackExecutionProvider",
    "CANNExecutionProvider",
    "AzureExecutionProvider",
    CPU,
)


def get_all_providers() -> list[str]:
    """Every execution provider name onnxruntime defines, CPU last. onnxrt runs only
    ``CPUExecutionProvider``; the others are known so that they can be told from typos."""
    return list(_ALL_PROVIDERS)


def get_available_providers() -> list[str]:
    """``["CPUExecutionProvider"]``: onnxrt computes on the CPU with numpy."""
    return [CPU]


def get_device() -> str:
    """``"CPU"``, as onnxruntime's CPU packages answer."""
    return "CPU"


def get_version_string() -> str:
    """onnxrt's version (not an onnxruntime version)."""
    from . import __version__

    return __version__


def get_build_info() -> str:
    """A one-line description of this build: onnxrt's version, Python, numpy, the machine.
    Like onnxruntime's, it contains ``"Build Info"``."""
    import platform

    import numpy as np

    from . import __version__

    return (
        f"onnxrt Build Info: version={__version__}, python={platform.python_version()}, "
        f"numpy={np.__version__}, platform={sys.platform}-{platform.machine()}"
    )


def disable_telemetry_events() -> None:
    """Nothing to disable: onnxrt collects and sends no telemetry (onnxruntime's call is a
    no-op outside Windows too)."""


def enable_telemetry_events() -> None:
    """Nothing to enable: onnxrt collects and sends no telemetry (onnxruntime's call is a
    no-op outside Windows too)."""


def normalize_providers(providers: Any, provider_options: Any, strict: bool) -> list[str]:
    """The providers a session uses from onnxruntime-style arguments: always
    ``["CPUExecutionProvider"]``.

    ``providers`` is None or a list of names or ``(name, options dict)`` tuples;
    ``provider_options`` None or a list of dicts, one per provider. A known provider that
    onnxrt does not have (CUDA, TensorRT, ...) is dropped with a ``UserWarning``, as
    onnxruntime's CPU packages do; an unknown name is dropped with a warning when ``strict``
    is False (the session constructor) and raises :class:`~onnxrt.NotApplicableError`
    when True (``set_providers``), as in onnxruntime.
    """
    if providers is None:
        if provider_options is not None:
            raise InvalidOptionError("provider_options given without providers.")
        return [CPU]
    if isinstance(providers, str) or not isinstance(providers, list | tuple):
        raise InvalidOptionError(
            f"providers must be a list of provider names or (name, options) tuples, got {type(providers).__name__} {providers!r}."
        )
    if provider_options is not None:
        if not isinstance(provider_options, list | tuple) or len(provider_options) != len(providers):
            raise InvalidOptionError("provider_options must be a list of dicts, one per provider.")
        if any(not isinstance(o, dict) for o in provider_options):
            raise InvalidOptionError("provider_options must be a list of dicts, one per provider.")
    names: list[str] = []
    for p in providers:
        if isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
            if provider_options is not None:
                raise InvalidOptionError("Give provider options either in (name, options) tuples or in provider_options, not both.")
            p = p[0]
        if not isinstance(p, str):
            raise InvalidOptionError(f"A provider is a name or a (name, options dict) tuple, got {p!r}.")
        names.append(p)
    for name in names:
        if name == CPU:
            continue
        if name not in _ALL_PROVIDERS and strict:
            raise NotApplicableError(f"Unknown Provider Type: {name}; onnxrt knows {list(_ALL_PROVIDERS)}.")
        warnings.warn(
            f"Specified provider {name!r} is not in available provider names. Available providers: "
            f"'{CPU}' (onnxrt computes on the CPU with numpy).",
            UserWarning,
            stacklevel=3,
        )
    return [CPU]


# ------------------------------------------------------------------------------------------
# logging: onnxruntime's default logger (severity, verbosity, a Python callback)
# ------------------------------------------------------------------------------------------

#: 0 Verbose, 1 Info, 2 Warning, 3 Error, 4 Fatal (onnxruntime's severities)
SEVERITY_NAMES = ("VERBOSE", "INFO", "WARNING", "ERROR", "FATAL")


class _LoggerState:
    """The default logger: its severity, verbosity and callback (module-wide, as onnxruntime's)."""

    __slots__ = ("severity", "verbosity", "callback", "local")

    def __init__(self) -> None:
        self.severity = 2
        self.verbosity = 0
        self.callback: Any = None
        import threading

        self.local = threading.local()


LOGGER = _LoggerState()


def _severity(what: str, value: Any) -> int:
    import operator

    from .errors import LoggerError

    try:
        number = operator.index(value)
    except TypeError:
        raise LoggerError(
            f"{what}: the severity is an int in 0..4 (0:Verbose, 1:Info, 2:Warning, 3:Error, 4:Fatal), "
            f"got {type(value).__name__} {value!r}."
        ) from None
    if not 0 <= number <= 4:
        raise LoggerError(
            f"{what}: Invalid logging severity {number}; expected 0:Verbose, 1:Info, 2:Warning, 3:Error, 4:Fatal."
        )
    return int(number)


def set_default_logger_severity(severity: int) -> None:
    """Set the default logger's minimum severity (0 Verbose, 1 Info, 2 Warning (the default),
    3 Error, 4 Fatal). Sessions whose ``log_severity_level`` is -1 (the default) and runs
    whose ``RunOptions.log_severity_level`` is -1 follow it. Another value raises
    :class:`~onnxrt.LoggerError` (a ``RuntimeError``, as in onnxruntime)."""
    LOGGER.severity = _severity("set_default_logger_severity", severity)


def set_default_logger_verbosity(verbosity: int) -> None:
    """Set the default logger's verbosity: at Verbose severity, records of verbosity level up
    to this one are emitted too (onnxrt's per-node records of a run are level 1)."""
    import operator

    try:
        LOGGER.verbosity = int(operator.index(verbosity))
    except TypeError:
        raise InvalidOptionError(
            f"set_default_logger_verbosity expects an int, got {type(verbosity).__name__} {verbosity!r}."
        ) from None


def set_default_logger_callback(callback: Any, severity: int = 2) -> None:
    """Send onnxrt's log records to ``callback(severity, category, logid, code_location,
    message)`` (ints and strings: category ``"onnxrt"``, ``logid`` the session's or run's
    ``logid``, ``code_location`` ``"file.py:line function"``) and set the default severity to
    ``severity``; ``None`` restores the default sink (Python's ``logging`` logger ``"onnxrt"``).

    The callback runs on the thread that logs. An exception it raises is reported through
    ``sys.unraisablehook`` and the record goes to the default sink (the run goes on). A
    severity outside 0..4 or a callback that is not callable raises
    :class:`~onnxrt.LoggerError` / :class:`~onnxrt.InvalidArgumentError`, both
    ``RuntimeError`` as in onnxruntime."""
    level = _severity("set_default_logger_callback", severity)
    if callback is None:
        LOGGER.callback = None
        return
    if not callable(callback):
        from .errors import LoggerError

        raise LoggerError(
            f"set_default_logger_callback: callback must be a callable taking (severity, category, logid, "
            f"code_location, message), or None; got {type(callback).__name__} {callback!r}."
        )
    LOGGER.callback = callback
    LOGGER.severity = level


def log_enabled(severity: int, level: int = -1) -> bool:
    """Whether a record of ``severity`` passes the logger's filter (``level`` a session's or
    run's ``log_severity_level``; -1 follows the default logger)."""
    return severity >= (level if level >= 0 else LOGGER.severity)


def log(severity: int, logid: str, location: str, message: str) -> None:
    """Emit one record (the caller checked :func:`log_enabled`): to the callback if one is
    set, else to Python's ``logging`` logger ``"onnxrt"``."""
    callback = LOGGER.callback
    local = LOGGER.local
    if callback is not None and not getattr(local, "busy", False):
        local.busy = True  # a record logged from inside the callback goes to the default sink
        try:
            callback(severity, "onnxrt", logid, location, message)
            return
        except Exception as e:  # noqa: BLE001  (a failing callback must not stop a run)
            _report_unraisable(e, callback)
        finally:
            local.busy = False
    import logging

    logging.getLogger("onnxrt").log(
        (logging.DEBUG, logging.INFO, logging.WARNING, logging.ERROR, logging.CRITICAL)[severity],
        "[%s:onnxrt:%s, %s] %s", SEVERITY_NAMES[severity][0], logid or "Default", location, message,
    )


def _report_unraisable(exc: BaseException, callback: Any) -> None:
    """Report a callback's exception as Python reports exceptions it cannot raise: through
    ``sys.unraisablehook`` when one is installed, else on stderr as the default hook does (its
    argument type cannot be built from Python)."""
    hook = sys.unraisablehook
    if hook is not sys.__unraisablehook__:
        hook(_Unraisable(exc, callback))
        return
    import traceback

    print(f"Exception ignored in the onnxrt logger callback {callback!r}:", file=sys.stderr)
    traceback.print_exception(type(exc), exc, exc.__traceback__, file=sys.stderr)


class _Unraisable:
    """The argument ``sys.unraisablehook`` takes."""

    def __init__(self, exc: BaseException, callback: Any):
        self.exc_type = type(exc)
        self.exc_value = exc
        self.exc_traceback = exc.__traceback__
        self.err_msg = "Exception ignored in the onnxrt logger callback"
        self.object = callback


# ------------------------------------------------------------------------------------------
# onnxruntime's helper normalising provider arguments, and shared allocators
# ------------------------------------------------------------------------------------------


def check_and_normalize_provider_args(
    providers: Any, provider_options: Any, available_provider_names: Any
) -> tuple[list[str], list[dict[str, str]]]:
    """``(names, options)`` from ``providers`` (None, or a sequence of names and
    ``(name, options dict)`` tuples) and ``provider_options`` (None, or one dict per
    provider), as onnxruntime's helper of the same name: option keys and values become
    strings, a provider named twice is kept once (the first) with a ``UserWarning``; a
    malformed argument raises :class:`~onnxrt.InvalidOptionError` (a ``ValueError``). A name
    missing from ``available_provider_names`` is kept with a ``UserWarning``."""
    from collections.abc import Sequence

    if providers is None:
        return [], []
    if isinstance(providers, str) or not isinstance(providers, Sequence):
        raise InvalidOptionError(f"providers should be a sequence, got {type(providers).__name__} {providers!r}.")
    if provider_options is not None:
        if isinstance(provider_options, str) or not isinstance(provider_options, Sequence):
            raise InvalidOptionError(
                f"provider_options should be a sequence of dicts, got {type(provider_options).__name__} {provider_options!r}."
            )
        if len(provider_options) != len(providers):
            raise InvalidOptionError(
                f"providers and provider_options should have the same length, got {len(providers)} and {len(provider_options)}."
            )
    names: list[str] = []
    options: list[dict[str, str]] = []
    available = set(available_provider_names or ())

    def add(name: str, opts: Any) -> None:
        if not isinstance(opts, dict):
            raise InvalidOptionError(f"The options of provider {name!r} should be a dict, got {type(opts).__name__} {opts!r}.")
        if name not in available:
            warnings.warn(f"Specified provider {name!r} is not in available provider names.", UserWarning, stacklevel=3)
        if name in names:
            warnings.warn(f"Duplicate provider {name!r} encountered, ignoring.", UserWarning, stacklevel=3)
            return
        names.append(name)
        options.append({str(k): str(v) for k, v in opts.items()})

    for i, p in enumerate(providers):
        if isinstance(p, str):
            add(p, provider_options[i] if provider_options is not None else {})
        elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
            if provider_options is not None:
                raise InvalidOptionError(
                    "Give provider options either in (name, options) tuples or in provider_options, not both."
                )
            add(p[0], p[1])
        else:
            raise InvalidOptionError(f"A provider is a name or a (name, options dict) tuple, got {p!r}.")
    return names, options


#: allocators registered with create_and_register_allocator(_v2): (provider, name, device id) -> arena config
SHARED_ALLOCATORS: dict[tuple[str, str, int], Any] = {}


def create_and_register_allocator(mem_info: Any, arena_cfg: Any) -> None:
    """Register a shared CPU allocator described by ``mem_info`` (an
    :class:`~onnxrt.OrtMemoryInfo`) and ``arena_cfg`` (an :class:`~onnxrt.OrtArenaCfg` or
    None); sessions with the entry ``session.use_env_allocators`` = ``"1"`` report it as
    theirs. numpy allocates every array, so the arena's sizes change nothing. A non-CPU
    memory info raises :class:`~onnxrt.NotApplicableError`."""
    create_and_register_allocator_v2(CPU, mem_info, {}, arena_cfg)


def create_and_register_allocator_v2(provider_type: str, mem_info: Any, provider_options: Any, arena_cfg: Any) -> None:
    """:func:`create_and_register_allocator` for a provider: only ``CPUExecutionProvider``
    (another raises :class:`~onnxrt.NotApplicableError`)."""
    from .ortvalue import OrtArenaCfg, OrtMemoryInfo

    if not isinstance(mem_info, OrtMemoryInfo):
        from .errors import InvalidArgumentError

        raise InvalidArgumentError(f"create_and_register_allocator expects an OrtMemoryInfo, got {type(mem_info).__name__}.")
    if arena_cfg is not None and not isinstance(arena_cfg, OrtArenaCfg):
        from .errors import InvalidArgumentError

        raise InvalidArgumentError(f"create_and_register_allocator expects an OrtArenaCfg or None, got {type(arena_cfg).__name__}.")
    if provider_options is not None and not isinstance(provider_options, dict):
        raise InvalidOptionError(f"provider_options must be a dict, got {type(provider_options).__name__}.")
    if provider_type != CPU or mem_info._device_type != 0:
        raise NotApplicableError(
            f"onnxrt registers CPU allocators only (numpy allocates every array); got provider {provider_type!r} "
            f"and memory info {mem_info!r}."
        )
    SHARED_ALLOCATORS[(provider_type, mem_info.name, mem_info.device_id)] = arena_cfg
