"""The exception hierarchy of onnxrt: every error a user can trigger is one of these."""

from __future__ import annotations

from typing import Any


class OnnxRuntimeError(Exception):
    """Root of every error onnxrt raises on purpose.

    ``exit_code`` is what the command line returns when this error ends it.
    """

    exit_code = 1


class ModelLoadError(OnnxRuntimeError):
    """The model cannot be read: missing file, garbage bytes, unsupported IR or opset."""

    exit_code = 2


class ModelConfigError(ModelLoadError, RuntimeError):
    """The session options a model carries (metadata ``ort_config``, read when the
    environment variable ``ORT_LOAD_CONFIG_FROM_MODEL`` is ``1``) cannot be read or applied (a
    ``RuntimeError``, as in onnxruntime)."""


class AdapterFormatError(ModelLoadError, RuntimeError):
    """A LoRA adapter file that cannot be read: missing, truncated, not an onnxruntime adapter
    file (a ``RuntimeError``, as in onnxruntime)."""


class SecurityError(ModelLoadError):
    """The model asks for something onnxrt refuses to do (external data outside its folder)."""

    exit_code = 3


class GraphError(OnnxRuntimeError):
    """The graph is malformed: undefined names, duplicate outputs, cycles."""

    exit_code = 4


class UnsupportedOperatorError(GraphError):
    """A node uses an operator, domain or version onnxrt has no kernel for."""

    exit_code = 5


class RegistryError(OnnxRuntimeError):
    """A kernel registration is malformed, or takes a key another kernel holds (pass
    ``replace=True`` to :func:`onnxrt.register_function` or :func:`onnxrt.register` to
    swap it, as a re-run notebook cell does)."""


class InvalidAttributeError(GraphError):
    """A node attribute is missing, has the wrong type or an impossible value."""

    exit_code = 6


class InvalidFeedError(OnnxRuntimeError, ValueError):
    """The inputs given to ``run`` do not match the model's declared inputs.

    Also a ``ValueError``, as onnxruntime's error for a missing input is.
    """

    exit_code = 7


class OptionError(OnnxRuntimeError):
    """A session or run option is unknown, of the wrong type or impossible."""

    exit_code = 10


class UnknownOptionError(OptionError, AttributeError):
    """An attribute ``SessionOptions`` or ``RunOptions`` does not have (an ``AttributeError``, as in onnxruntime)."""


class InvalidOptionError(OptionError, TypeError, ValueError):
    """An option given a value of the wrong type (a ``TypeError``, as in onnxruntime) or an impossible value."""


class ConfigEntryError(OptionError, RuntimeError):
    """A configuration entry that was never set is read (a ``RuntimeError``, as in onnxruntime)."""


class InvalidArgumentError(OnnxRuntimeError, TypeError, ValueError):
    """An argument of OrtValue, SparseTensor, IOBinding or a session method has the wrong type or an impossible value."""

    exit_code = 11


class RunTerminatedError(OnnxRuntimeError, RuntimeError):
    """A run stopped because its ``RunOptions.terminate`` was set (a ``RuntimeError``, as in onnxruntime)."""

    exit_code = 12


class NotApplicableError(OnnxRuntimeError, RuntimeError):
    """The request needs what a CPU runtime on numpy does not have: a non-CPU provider or device,
    a native custom-operator library (a ``RuntimeError``, as onnxruntime raises for them)."""

    exit_code = 13


class LoggerError(OnnxRuntimeError, RuntimeError):
    """A logger call with a severity outside 0..4 or a callback that is not callable (a ``RuntimeError``, as in onnxruntime)."""

    exit_code = 14


class SessionStateError(OnnxRuntimeError, RuntimeError):
    """A session is asked for what it was not set up to give (graph assignment information
    without ``session.record_ep_graph_assignment_info``; a ``RuntimeError``)."""

    exit_code = 15


class KernelError(OnnxRuntimeError):
    """A kernel failed while running a node (impossible reshape, broadcast mismatch, ...).

    The engine re-raises kernel failures with the node name, the operator and the
    input shapes and dtypes, chaining the original exception.
    """

    exit_code = 8


class InvalidTypeError(KernelError):
    """A node input has an element type its operator's schema does not allow (no silent promotion)."""


class IndexOutOfRangeError(KernelError):
    """An index input holds a value outside the valid range of its axis."""


class AllocationError(KernelError):
    """A node would allocate a tensor above the configured or physical limit."""


class MissingDependencyError(OnnxRuntimeError):
    """An optional feature needs a package or a program that is not installed (the message
    names it and how to install it): graphviz and its ``dot`` program for drawings."""

    exit_code = 9


def describe_value(value: Any) -> str:
    """Short description of a runtime value for messages: ``float32[3,4]``, ``seq(2)``."""
    if value is None:
        return "None"
    shape = getattr(value, "shape", None)
    dtype = getattr(value, "dtype", None)
    if shape is not None and dtype is not None:
        return f"{dtype}[{','.join(str(d) for d in shape)}]"
    if isinstance(value, list):
        return f"seq({len(value)})"
    if isinstance(value, dict):
        return f"map({len(value)})"
    return type(value).__name__
