"""onnxrt: a complete, fast and hackable ONNX runtime on numpy."""

from __future__ import annotations

from .errors import (
    AllocationError,
    GraphError,
    IndexOutOfRangeError,
    InvalidAttributeError,
    InvalidFeedError,
    InvalidTypeError,
    KernelError,
    ModelLoadError,
    OnnxRuntimeError,
    SecurityError,
    UnsupportedOperatorError,
)
from .inference import OnnxInference
from .registry import register, register_function
from .session import GraphOptimizationLevel, InferenceSession, NodeArg, RunOptions, SessionOptions

__version__ = "0.1.0"

__all__ = [
    "AllocationError",
    "GraphError",
    "GraphOptimizationLevel",
    "IndexOutOfRangeError",
    "InferenceSession",
    "InvalidAttributeError",
    "InvalidFeedError",
    "InvalidTypeError",
    "KernelError",
    "ModelLoadError",
    "NodeArg",
    "OnnxInference",
    "OnnxRuntimeError",
    "RunOptions",
    "SecurityError",
    "SessionOptions",
    "UnsupportedOperatorError",
    "register",
    "register_function",
    "__version__",
]
