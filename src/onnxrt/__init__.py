"""onnxrt: a complete, fast and hackable ONNX runtime on numpy.

Importing onnxrt changes nothing of the host process (no environment variable, no
allocator setting); :func:`tune_process` is the opt-in for programs that own theirs.
"""

from __future__ import annotations

from .errors import (
    AdapterFormatError,
    AllocationError,
    ConfigEntryError,
    GraphError,
    IndexOutOfRangeError,
    InvalidArgumentError,
    InvalidAttributeError,
    InvalidFeedError,
    InvalidOptionError,
    InvalidTypeError,
    KernelError,
    LoggerError,
    ModelConfigError,
    ModelLoadError,
    NotApplicableError,
    OnnxRuntimeError,
    OptionError,
    RegistryError,
    RunTerminatedError,
    SecurityError,
    SessionStateError,
    UnknownOptionError,
    UnsupportedOperatorError,
)
from .adapters import AdapterFormat, LoraAdapter
from .compat import ModelWarning
from ._memory import tune_process
from .inference import OnnxInference
from .registry import register, register_function
from .iobinding import IOBinding
from .options import ExecutionMode, ExecutionOrder, GraphOptimizationLevel, RunOptions, SessionOptions
from .ortvalue import (
    OrtAllocatorType,
    OrtArenaCfg,
    OrtDevice,
    OrtDeviceMemoryType,
    OrtDeviceVendorId,
    OrtMemType,
    OrtMemoryInfo,
    OrtMemoryInfoDeviceType,
    OrtSparseFormat,
    OrtValue,
    SparseTensor,
)
from .providers import (
    create_and_register_allocator,
    create_and_register_allocator_v2,
    disable_telemetry_events,
    enable_telemetry_events,
    get_all_providers,
    get_available_providers,
    get_build_info,
    get_device,
    get_version_string,
    set_default_logger_callback,
    set_default_logger_severity,
    set_default_logger_verbosity,
)
from .session import InferenceSession, ModelMetadata, NodeArg, OrtEpAssignedNode, OrtEpAssignedSubgraph

__version__ = "0.1.0"

__all__ = [
    "AdapterFormat",
    "AdapterFormatError",
    "AllocationError",
    "ConfigEntryError",
    "ExecutionMode",
    "ExecutionOrder",
    "GraphError",
    "GraphOptimizationLevel",
    "IOBinding",
    "IndexOutOfRangeError",
    "InferenceSession",
    "InvalidArgumentError",
    "InvalidAttributeError",
    "InvalidFeedError",
    "InvalidOptionError",
    "InvalidTypeError",
    "KernelError",
    "LoraAdapter",
    "LoggerError",
    "ModelConfigError",
    "ModelLoadError",
    "ModelMetadata",
    "ModelWarning",
    "NodeArg",
    "NotApplicableError",
    "OnnxInference",
    "OnnxRuntimeError",
    "OptionError",
    "OrtAllocatorType",
    "OrtArenaCfg",
    "OrtDevice",
    "OrtDeviceMemoryType",
    "OrtDeviceVendorId",
    "OrtEpAssignedNode",
    "OrtEpAssignedSubgraph",
    "OrtMemType",
    "OrtMemoryInfo",
    "OrtMemoryInfoDeviceType",
    "OrtSparseFormat",
    "OrtValue",
    "RegistryError",
    "RunOptions",
    "RunTerminatedError",
    "SecurityError",
    "SessionOptions",
    "SessionStateError",
    "SparseTensor",
    "UnknownOptionError",
    "UnsupportedOperatorError",
    "create_and_register_allocator",
    "create_and_register_allocator_v2",
    "disable_telemetry_events",
    "enable_telemetry_events",
    "get_all_providers",
    "get_available_providers",
    "get_build_info",
    "get_device",
    "get_version_string",
    "register",
    "register_function",
    "set_default_logger_callback",
    "set_default_logger_severity",
    "set_default_logger_verbosity",
    "tune_process",
    "__version__",
]
