"""The factory turning tables of trivially mapped operators into registered OpRun classes."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..registry import register
from ._op import OpRun


@dataclass(frozen=True)
class Spec:
    """One row of a family table.

    ``fn`` computes the output from the inputs and the node's attributes
    (``fn(*inputs, **attributes)`` when ``with_attributes`` is set, ``fn(*inputs)`` otherwise).
    """

    name: str
    fn: Callable[..., Any]
    versions: tuple[int, ...]
    with_attributes: bool = False
    doc: str = ""
    domain: str = ""
    extra: dict[str, Any] = field(default_factory=dict)


def _legacy_broadcast(self: OpRun, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Opset < 7 binary ops: with ``broadcast=1``, B aligns with A starting at ``axis``."""
    if not getattr(self, "broadcast", 0) or b.ndim == a.ndim:
        return b
    axis = getattr(self, "axis", None)
    if axis is None:
        return b  # trailing alignment, numpy's rule
    if axis < 0:
        axis += a.ndim
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


def make_class(spec: Spec, kind: str) -> type[OpRun]:
    """Build and register the class of one table row.

    ``kind`` is ``unary`` (one input), ``binary`` (two inputs, the legacy broadcast
    attributes honoured before opset 7) or ``any`` (inputs passed through as they come).
    """
    fn = spec.fn
    if kind == "binary":

        def _run(self, a, b, attributes=None, verbose=0, fLOG=None):
            if self._legacy:
                b = _legacy_broadcast(self, a, b)
            return (fn(a, b, **self._kw) if self._kw else fn(a, b),)

    elif kind == "unary":
        if spec.with_attributes:

            def _run(self, x, attributes=None, verbose=0, fLOG=None):
                return (fn(x, **self._kw),)

        else:

            def _run(self, x, attributes=None, verbose=0, fLOG=None):
                return (fn(x),)

    else:

        def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
            return (fn(*inputs, **self._kw) if self._kw else fn(*inputs),)

    def __init__(self, onnx_node, desc=None, **options):
        OpRun.__init__(self, onnx_node, desc, **options)
        self._legacy = kind == "binary" and (self.since_version or 99) < 7
        skip = {"broadcast", "axis", "consumed_inputs"} if self._legacy else {"consumed_inputs"}
        self._kw = {k: v for k, v in self.atts_value.items() if k not in skip} if spec.with_attributes else {}

    cls = type(
        spec.name,
        (OpRun,),
        {
            "__init__": __init__,
            "_run": _run,
            "__doc__": spec.doc or f"{spec.name} (versions {list(spec.versions)}): table-generated kernel.",
            "__module__": fn.__module__ if hasattr(fn, "__module__") and fn.__module__ else __name__,
            "kernel": staticmethod(fn),
            **spec.extra,
        },
    )
    return register(spec.name, versions=spec.versions, domain=spec.domain)(cls)


def build_family(specs: Iterable[Spec], kind: str, namespace: dict[str, Any]) -> None:
    """Create every class of a table and expose it in the table module's namespace."""
    for spec in specs:
        cls = make_class(spec, kind)
        cls.__module__ = namespace["__name__"]
        namespace[spec.name] = cls
