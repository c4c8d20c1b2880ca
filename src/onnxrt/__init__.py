"""onnxrt: a complete, fast and hackable ONNX runtime on numpy."""

from __future__ import annotations

import os as _os
import sys as _sys

# OpenBLAS's idle threads spin for about 0.1 s after each multi-threaded product (its
# default THREAD_TIMEOUT of 2**28 cycles), which takes the second core from onnxrt's own
# kernel threads for that long: a convolution by bands measured 2x slower right after a
# large product. OpenBLAS reads the setting once, when numpy first loads it, so it only
# applies when onnxrt is imported first (the command line does); a value the environment
# already holds is kept.
if "numpy" not in _sys.modules:
    _os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")

from .errors import (  # noqa: E402
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
from .compat import ModelWarning  # noqa: E402
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
    "ModelWarning",
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
