"""The factory turning tables of trivially mapped operators into registered OpRun classes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._alloc import tensor_limit
from ._op import OpRun


@dataclass(frozen=True)
class Spec:
    """One row of a family table.

    ``fn`` computes the output from the inputs and the node's attributes
    (``fn(*inputs, **attributes)`` when ``with_attributes`` is set, ``fn(*inputs)`` otherwise).
    ``prepare(op, attributes)``, when given, runs once when the node is built: it validates
    the attributes (raising InvalidAttributeError) and returns the keyword arguments ``fn``
    receives, so that ``fn`` never re-parses them on the hot path.
    """

    name: str
    fn: Callable[..., Any]
    versions: tuple[int, ...]
    with_attributes: bool = False
    doc: str = ""
    domain: str = ""
    extra: dict[str, Any] = field(default_factory=dict)
    prepare: Callable[[OpRun, dict[str, Any]], dict[str, Any]] | None = None


def _legacy_broadcast(self: OpRun, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Opset < 7 binary ops: with ``broadcast=1``, B aligns with A starting at ``axis``.

    Without ``broadcast=1`` the spec of those versions requires equal shapes; with it,
    B must broadcast to A (the output always has A's shape).
    """
    if not getattr(self, "broadcast", 0):
        if a.shape != b.shape:
            raise KernelError(
                f"inputs must have the same shape when attribute 'broadcast' is 0 (opset < 7), "
                f"got {list(a.shape)} and {list(b.shape)}."
            )
        return b
    if b.ndim < a.ndim:
        axis = getattr(self, "axis", None)
        if axis is not None:  # else trailing alignment, numpy's rule
            if axis < 0:
                axis += a.ndim
            b = b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))
    try:
        ok = np.broadcast_shapes(a.shape, b.shape) == a.shape
    except ValueError:
        ok = False
    if not ok:
        raise KernelError(
            f"with 'broadcast'=1 (opset < 7), B of shape {list(b.shape)} must broadcast to A's "
            f"shape {list(a.shape)} (axis={getattr(self, 'axis', None)!r})."
        )
    return b


def _check_same_shapes(inputs: tuple[np.ndarray, ...]) -> None:
    """Variadic operators before opset 8 (Max, Min, Sum, Mean) require identical shapes."""
    first = inputs[0].shape
    for x in inputs[1:]:
        if x.shape != first:
            raise KernelError(
                f"every input must have the same shape before opset 8, got {list(first)} and {list(x.shape)}."
            )


def make_class(spec: Spec, kind: str) -> type[OpRun]:
    """Build and register the class of one table row.

    ``kind`` is ``unary`` (one input), ``binary`` (two inputs, the legacy broadcast
    attributes honoured before opset 7), ``variadic`` (one or more inputs, numpy
    broadcasting from opset 8, identical shapes required before) or ``any`` (inputs
    passed through as they come).
    """
    fn = spec.fn
    if kind == "binary":

        def _run(self, a, b, attributes=None, verbose=0, fLOG=None):
            if self._legacy:
                b = _legacy_broadcast(self, a, b)
            try:  # broadcasting can ask for far more than its inputs: at most a.size * b.size
                wide = a.size * b.size > self._max_items
            except AttributeError:  # a Python number (a direct call)
                wide = False
            if wide:
                _check_broadcast(self, (a, b))
            r = fn(a, b, **self._kw) if self._kw else fn(a, b)
            return (r if type(r) is np.ndarray else np.asarray(r),)

    elif kind == "unary":
        if spec.with_attributes:

            def _run(self, x, attributes=None, verbose=0, fLOG=None):
                r = fn(x, **self._kw)
                return (r if type(r) is np.ndarray else np.asarray(r),)

        else:

            def _run(self, x, attributes=None, verbose=0, fLOG=None):
                r = fn(x)  # ufuncs return numpy scalars for 0-d inputs: outputs are always arrays
                return (r if type(r) is np.ndarray else np.asarray(r),)

    elif kind == "variadic":

        def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
            if not inputs:
                raise KernelError(f"{self.op_type} needs at least one input.")
            if self._legacy:
                _check_same_shapes(inputs)
            elif len(inputs) > 1:
                n = 1
                for x in inputs:
                    n *= getattr(x, "size", 1)
                if n > self._max_items:
                    _check_broadcast(self, inputs)
            r = fn(*inputs, **self._kw) if self._kw else fn(*inputs)
            return (r if type(r) is np.ndarray else np.asarray(r),)

    else:

        def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
            r = fn(*inputs, **self._kw) if self._kw else fn(*inputs)
            return (r if type(r) is np.ndarray else np.asarray(r),)

    def __init__(self, onnx_node, desc=None, **options):
        OpRun.__init__(self, onnx_node, desc, **options)
        since = self.since_version or 99
        self._legacy = (kind == "binary" and since < 7) or (kind == "variadic" and since < 8)
        # outputs of fewer elements fit the session's max_tensor_bytes whatever their type
        self._max_items = tensor_limit(self.options) // 16
        skip = {"broadcast", "axis", "consumed_inputs"} if kind == "binary" and self._legacy else {"consumed_inputs"}
        kw = {k: v for k, v in self.atts_value.items() if k not in skip} if spec.with_attributes else {}
        if spec.prepare is not None:
            kw = spec.prepare(self, kw)
        self._kw = kw

    cls = type(
        spec.name,
        (OpRun,),
        {
            "__init__": __init__,
            "_run": _run,
            "__doc__": spec.doc or f"{spec.name} (versions {list(spec.versions)}): table-generated kernel.",
            "__module__": fn.__module__ if hasattr(fn, "__module__") and fn.__module__ else __name__,
            "kernel": staticmethod(fn),
            "uses_blas": False,  # element-wise tables and window functions
            **spec.extra,
        },
    )
    return register(spec.name, versions=spec.versions, domain=spec.domain)(cls)


def _check_broadcast(op: OpRun, inputs: tuple[Any, ...]) -> None:
    """``op.check_alloc`` on the broadcast shape of ``inputs`` (numpy reports shapes that do not broadcast)."""
    try:
        shape = np.broadcast_shapes(*(np.shape(x) for x in inputs))
        dtype = np.result_type(*inputs)
    except (ValueError, TypeError):
        return
    op.check_alloc(shape, dtype)


def build_family(specs: Iterable[Spec], kind: str, namespace: dict[str, Any]) -> None:
    """Create every class of a table and expose it in the table module's namespace."""
    for spec in specs:
        cls = make_class(spec, kind)
        cls.__module__ = namespace["__name__"]
        namespace[spec.name] = cls


# -- helpers shared by the family tables -------------------------------------------------

#: the float types numpy or ml_dtypes compute in directly (float16 math runs in float32
#: internally in numpy; bfloat16 and the float8 types through ml_dtypes' float32 loops)
_NATIVE_FLOATS = frozenset(np.dtype(t) for t in (np.float32, np.float64))


def compute_in_float(fn: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
    """Wrap a kernel written for float32/float64 (scipy.special, activations) so every type works.

    float16, bfloat16 and the float8 types are computed in float32 and rounded back once;
    integer inputs (Erf 9 and Shrink allow them) are computed in float64 and cast back
    with C truncation toward zero. The output always has the input's dtype. Keyword
    arguments (the node's attributes) pass through.
    """

    def wrapped(x: np.ndarray, **kw: Any) -> np.ndarray:
        if x.ndim == 0:
            # numpy turns 0-D results into scalars, which the kernels' out= arguments refuse
            return wrapped(x.reshape(1), **kw).reshape(())
        dt = x.dtype
        if dt in _NATIVE_FLOATS:
            y = fn(x, **kw)
            return y if y.dtype == dt else y.astype(dt)
        if dt.kind in "iub":
            y = fn(x.astype(np.float64), **kw)
            with np.errstate(invalid="ignore"):
                return y.astype(dt)
        return fn(x.astype(np.float32), **kw).astype(dt)

    wrapped.__name__ = getattr(fn, "__name__", "wrapped")
    wrapped.__doc__ = fn.__doc__
    return wrapped
