"""The operator registry: (domain, op_type, since_version) -> kernel class, resolved once per model."""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, TypeVar

from .errors import RegistryError, UnsupportedOperatorError

if TYPE_CHECKING:  # pragma: no cover
    from .ops_cpu._op import OpRun

T = TypeVar("T", bound=type)

#: (domain, op_type) -> {since_version: class}
_REGISTRY: dict[tuple[str, str], dict[int, type]] = {}
_LOADED = False
_LOADING = False
_LOAD_LOCK = threading.RLock()


def normalize_domain(domain: str | None) -> str:
    """``""`` and ``"ai.onnx"`` name the same domain."""
    if not domain or domain == "ai.onnx":
        return ""
    return domain


def register(
    op_type: str | None = None,
    versions: Iterable[int] = (1,),
    domain: str = "",
    replace: bool = False,
) -> Callable[[T], T]:
    """Class decorator registering a kernel for every listed ``since_version``.

    A version bump that only widens types reuses the class: list every version the
    class implements. A duplicate key raises :class:`RegistryError` at import, unless
    ``replace`` is True: the new class then takes the key (sessions built before keep the
    kernels they resolved)::

        @register("Relu", versions=(1, 6, 13, 14))
        class Relu(OpRun): ...
    """
    vers = tuple(sorted(set(int(v) for v in versions)))
    if not vers:
        raise RegistryError("register() needs at least one version.")

    def deco(cls: T) -> T:
        name = op_type or cls.__name__
        dom = normalize_domain(domain)
        table = _REGISTRY.setdefault((dom, name), {})
        for v in vers:
            if v in table and table[v] is not cls and not replace:
                raise RegistryError(
                    f"Operator {name!r} of domain {dom!r} version {v} is registered twice "
                    f"({table[v].__module__}.{table[v].__name__} and {cls.__module__}.{cls.__name__})."
                )
            table[v] = cls
        # The class keeps every key it serves; one class can serve several op types.
        keys = dict(getattr(cls, "_registered", {}))
        keys[(dom, name)] = tuple(sorted(set(keys.get((dom, name), ())) | set(vers)))
        cls._registered = keys  # type: ignore[attr-defined]
        if "op_type" not in cls.__dict__:
            cls.op_type = name  # type: ignore[attr-defined]
        if "op_domain" not in cls.__dict__:
            cls.op_domain = dom  # type: ignore[attr-defined]
        return cls

    return deco


def register_function(
    op_type: str,
    fn: Callable[..., object],
    domain: str,
    versions: Iterable[int] = (1,),
    n_outputs: int = 1,
    replace: bool = False,
    **attribute_defaults: object,
) -> type:
    """Register a Python function as a custom operator in about one line.

    ``fn(*inputs, **attributes)`` returns one array (``n_outputs == 1``) or a tuple.
    Attributes default to ``attribute_defaults``; the node's attributes override them.
    Registering the same (domain, op_type, version) twice raises :class:`RegistryError`
    unless ``replace=True`` (a notebook cell run again): the new function then serves the
    sessions built from now on.
    """
    from .ops_cpu._op import OpRun

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):  # noqa: ARG001
        res = fn(*inputs, **self.atts_value)
        return (res,) if n_outputs == 1 else tuple(res)

    cls = type(op_type, (OpRun,), {"_run": _run, "attribute_defaults": dict(attribute_defaults)})
    return register(op_type, versions=versions, domain=domain, replace=replace)(cls)


def _ensure_loaded() -> None:
    """Import every kernel module once (``import onnxrt`` does not: the modules cost 50-70 ms;
    a lookup imports only its operator's, :func:`_load_for`). Other threads wait until the
    table is whole; a lookup made while the modules import, in the importing thread, sees
    the table as it is."""
    global _LOADED, _LOADING
    if _LOADED:
        return
    with _LOAD_LOCK:
        if _LOADED or _LOADING:
            return
        _LOADING = True
        try:
            from . import ops_cpu, ops_ml

            ops_cpu.load_all()
            ops_ml.load_all()
            _LOADED = True
        finally:
            _LOADING = False


#: (domain, op_type) whose kernel modules are imported (see :func:`_load_for`)
_READY: set[tuple[str, str]] = set()


def _load_for(key: tuple[str, str]) -> None:
    """Import the modules that register kernels for ``key`` (domain, op_type), as the
    generated index ``onnxrt._kernel_index`` lists them: a model's session imports the kernel
    modules of the operators it uses, not all of them. A key the index lacks (an operator
    onnxrt has no kernel for, or a custom one registered at run time) imports them all.
    ``import_module`` waits for a module another thread is importing, so a lookup never sees
    a module's registrations half done."""
    if _LOADED or key in _READY:
        return
    from ._kernel_index import MODULES

    modules = MODULES.get(key)
    if modules is None:
        _ensure_loaded()
        return
    for name in modules:
        importlib.import_module(name)
    _READY.add(key)


def kernel_modules() -> dict[tuple[str, str], tuple[str, ...]]:
    """(domain, op_type) -> the onnxrt modules registering its kernels, from the whole table
    (``scripts/gen_kernel_index.py`` writes it to ``onnxrt/_kernel_index.py``)."""
    out = {}
    for key, table in sorted(registered().items()):
        modules = sorted({cls.__module__ for cls in table.values()})
        if all(m.startswith(("onnxrt.ops_cpu.", "onnxrt.ops_ml.")) for m in modules):
            out[key] = tuple(modules)
    return out


def registered() -> dict[tuple[str, str], dict[int, type]]:
    """A copy of the table: ``{(domain, op_type): {since_version: class}}``."""
    _ensure_loaded()
    return {k: dict(v) for k, v in _REGISTRY.items()}


def versions_of(op_type: str, domain: str = "") -> list[int]:
    """The since_versions onnxrt has for an operator (empty when it has none)."""
    _ensure_loaded()
    return sorted(_REGISTRY.get((normalize_domain(domain), op_type), {}))


def lookup(op_type: str, domain: str, opset: int) -> tuple[type[OpRun], int] | None:
    """The class and since_version for a model whose opset of ``domain`` is ``opset``."""
    key = (normalize_domain(domain), op_type)
    _load_for(key)
    table = _REGISTRY.get(key)
    if not table:
        return None
    best = max((v for v in table if v <= opset), default=None)
    if best is None:
        return None
    cls = table[best]
    # an operator removed from the specification (the experimental ones of onnxrt.ops_cpu.op_legacy)
    if opset >= getattr(cls, "removed_in", opset + 1):
        return None
    return cls, best


def resolve(op_type: str, domain: str, opset: int | None, node_name: str = "") -> tuple[type[OpRun], int]:
    """Like :func:`lookup` but raises :class:`UnsupportedOperatorError` naming everything."""
    dom = normalize_domain(domain)
    shown = dom or "ai.onnx"
    if opset is None:
        raise UnsupportedOperatorError(
            f"Node {node_name!r} uses operator {op_type!r} of domain {shown!r}, "
            f"but the model imports no opset for that domain."
        )
    found = lookup(op_type, dom, opset)
    if found is None:
        have = versions_of(op_type, dom)
        removed = getattr(_REGISTRY[(dom, op_type)][max(have)], "removed_in", None) if have else None
        if removed is not None and opset >= removed:
            detail = f"the operator was removed from the specification in opset {removed}; onnxrt runs it below that"
        elif have:
            detail = f"onnxrt implements versions {have}"
        else:
            detail = "onnxrt has no kernel for this operator"
        raise UnsupportedOperatorError(
            f"Node {node_name!r} uses operator {op_type!r} of domain {shown!r} at opset {opset}; {detail}."
        )
    return found
