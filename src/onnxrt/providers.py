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
