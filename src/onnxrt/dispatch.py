"""The dispatcher: an operator's declared fast paths, picked once per node and input signature, its reference kernel otherwise.

Every operator has one reference kernel, its ``OpRun._run`` in numpy: the semantics. A
*fast path* computes the same function faster for some inputs (a compiled loop, the
team of GIL-free threads, a BLAS call by address, a cheaper numpy formulation). Each is
declared next to the others of its operator, in ``onnxrt/fastpaths/<family>.py``, as a
:class:`FastPath`: a name, a condition and an implementation::

    @fast_path("Relu", "float32 loop", when=lambda op, x: x.dtype == np.float32 and x.size >= 4096)
    def relu_f32(op, x):
        ...
        return (y,)

The plan binds each node to :func:`bind`'s callable. For a node whose operator declares
no fast path that is the kernel's ``_run`` itself (no cost). Otherwise a
:class:`Dispatcher` computes the call's *signature* (each input's dtype, shape and strides;
the type of anything else; whether compiled kernels are active; the node's model
constants are left out: they are the same arrays on every call) and, the first time it
meets a signature, tries the operator's paths in declared order: the first whose
condition holds is kept for that signature (a ``prepare`` path builds its executor then,
once). Later calls with that signature run it directly. A path may still decline a call
by returning None; the reference kernel then runs.

Switches: ``ONNXRT_FASTPATHS=0`` in the environment, or ``SessionOptions.fast_paths =
False`` for one session, runs every node on its reference kernel (and no compiled code:
:func:`onnxrt.native.no_jit_run`); ``ONNXRT_JIT=0`` keeps the paths that do not need
compiled code (``native=False``). A session's first run skips native paths unless the
process loaded them already (see ``docs/architecture.md``). ``onnxrt ops --paths`` lists
the declared paths; :meth:`onnxrt.OnnxInference.fast_paths` the ones a session picked.
"""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import native
from .parallel import _TLS

#: False when the environment says ONNXRT_FASTPATHS=0: every node runs its reference kernel
ENABLED = os.environ.get("ONNXRT_FASTPATHS", "1").strip().lower() not in ("0", "false", "no", "off")

#: signatures a node remembers (a model with more input shapes than this starts over)
MAX_SIGNATURES = 64

#: the name a listing gives the reference kernel
REFERENCE = "reference"

#: compiled kernels allowed in this process (ONNXRT_JIT, read once); a thread's
#: ``_TLS.no_jit`` (a session's first run, ``native.disabled()``) turns them off for it
_NATIVE = native.ENABLED


@dataclass(frozen=True)
class FastPath:
    """One declared fast path of an operator.

    ``when(op, *inputs) -> bool`` decides from the node (its attributes, ``op.const_inputs``)
    and the inputs (dtypes, shapes, strides, and values of constant inputs only) whether the
    path applies; it must not depend on anything that changes between calls with the same
    signature. ``run(op, *inputs)`` returns the outputs as a tuple, or None to decline the
    call. A ``prepared`` path's function is ``prepare(op, *inputs)``: called once per
    signature, it returns the executor ``f(*inputs) -> tuple | None`` kept for it (or None:
    the path does not apply). An executor may hold data derived from the node's constant
    inputs (packed weights), never from other inputs. ``native``: the path runs code of
    :mod:`onnxrt.native` (compiled loops, the team, BLAS by address) and is skipped while
    those are off.
    """

    op_type: str
    name: str
    when: Callable[..., bool]
    fn: Callable[..., Any]
    domain: str = ""
    native: bool = True
    prepared: bool = False
    doc: str = ""
    module: str = field(default="", compare=False)
    #: the node's largest input has at least this many elements whenever ``when`` holds:
    #: below the smallest of an operator's paths, a call goes to the reference kernel
    #: without a signature (a small element-wise node pays little for paths meant for large ones)
    min_size: int = 0


#: (domain, op_type) -> its fast paths in the order they are tried
_TABLE: dict[tuple[str, str], list[FastPath]] = {}
_LOCK = threading.RLock()
_LOADED: set[str] = set()


def fast_path(op_type: str | tuple[str, ...], name: str, *, when: Callable[..., bool], domain: str = "",
              native: bool = True, prepared: bool = False, min_size: int = 0) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Declare the decorated function as the fast path ``name`` of ``op_type`` (or of each
    operator of a tuple), tried after the paths declared before it. See :class:`FastPath`."""
    op_types = (op_type,) if isinstance(op_type, str) else tuple(op_type)

    def decorate(fn: Callable[..., Any]) -> Callable[..., Any]:
        doc = (fn.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        for op in op_types:
            path = FastPath(op, name, when, fn, domain, native, prepared, " ".join(doc.split()), fn.__module__, min_size)
            with _LOCK:
                paths = _TABLE.setdefault((domain, op), [])
                if any(p.name == name for p in paths):
                    raise ValueError(f"{domain or 'ai.onnx'}::{op} already declares a fast path named {name!r}")
                paths.append(path)
        return fn

    return decorate


def remove_fast_path(op_type: str, name: str, domain: str = "") -> None:
    """Remove a declared path (nodes bound before keep theirs)."""
    with _LOCK:
        paths = _TABLE.get((domain, op_type), [])
        paths[:] = [p for p in paths if p.name != name]


@contextmanager
def declared(op_type: str | tuple[str, ...], name: str, when: Callable[..., bool], fn: Callable[..., Any],
             **kwargs: Any) -> Iterator[None]:
    """Declare a fast path for the block only (tests, experiments)."""
    fast_path(op_type, name, when=when, **kwargs)(fn)
    try:
        yield
    finally:
        for op in (op_type,) if isinstance(op_type, str) else op_type:
            remove_fast_path(op, name, kwargs.get("domain", ""))


def _load(domain: str, op_type: str) -> None:
    """Import the module declaring ``op_type``'s paths (onnxrt.fastpaths.MODULES), once."""
    from .fastpaths import MODULES

    module = MODULES.get((domain, op_type))
    if module is None or module in _LOADED:
        return
    with _LOCK:
        if module not in _LOADED:
            importlib.import_module(f"onnxrt.fastpaths.{module}")
            _LOADED.add(module)


def load_all() -> None:
    """Import every module of declared paths (listings, tests)."""
    from .fastpaths import MODULES

    for domain, op_type in MODULES:
        _load(domain, op_type)


def paths_for(op_type: str, domain: str = "") -> list[FastPath]:
    """The fast paths declared for ``op_type``, in the order they are tried."""
    domain = "" if domain == "ai.onnx" else domain
    _load(domain, op_type)
    return list(_TABLE.get((domain, op_type), ()))


def all_paths() -> list[FastPath]:
    """Every declared path, by operator."""
    load_all()
    with _LOCK:
        return [p for key in sorted(_TABLE) for p in _TABLE[key]]


def signature(inputs: tuple[Any, ...] | list[Any]) -> tuple[Any, ...]:
    """What a choice is kept for: each array's dtype, shape and strides, anything else's type."""
    nd = np.ndarray
    return tuple([(a.dtype, a.shape, a.strides) if type(a) is nd else type(a) for a in inputs])


class Dispatcher:
    """A node's kernel as the plan calls it: the path chosen for each input signature
    (:mod:`onnxrt.dispatch`). ``choices()`` tells what was picked.

    The hot path costs about a microsecond a call: one tuple of the varying inputs'
    dtype, shape and strides (the node's model constants are left out: the same arrays
    on every call) and one dict lookup; a node whose inputs are all smaller than every
    path's ``min_size`` skips even that."""

    __slots__ = ("op", "paths", "chosen", "reference", "varying", "arity", "min_size", "__weakref__")

    def __init__(self, op: Any, paths: list[FastPath], reference: bool = False):
        self.op = op
        self.paths = paths
        #: key -> (path name, callable, signature)
        self.chosen: dict[tuple[Any, ...], tuple[str, Callable[..., Any], tuple[Any, ...]]] = {}
        #: True: every call runs the reference kernel (the session turned fast paths off)
        self.reference = reference
        #: positions of the inputs the signature describes (settled at the first call, for
        #: ``arity`` inputs): all but the node's model constants (``op.const_inputs``)
        self.varying: tuple[int, ...] = ()
        self.arity = -1
        self.min_size = min(p.min_size for p in paths)

    def _small(self, inputs: tuple[Any, ...]) -> bool:
        """No input has ``min_size`` elements: no path can apply."""
        nd, least = np.ndarray, self.min_size
        for a in inputs:
            if type(a) is nd and a.size >= least:
                return False
        return True

    def _key(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        if len(inputs) != self.arity:
            consts = self.op.const_inputs
            self.varying = tuple(i for i in range(len(inputs)) if i not in consts)
            self.arity = len(inputs)
        nd = np.ndarray
        active = _NATIVE and not _TLS.no_jit
        var = self.varying
        if len(var) == 1:
            a = inputs[var[0]]
            return (active, a.dtype, a.shape, a.strides) if type(a) is nd else (active, type(a))
        return (active, *[(a.dtype, a.shape, a.strides) if type(a) is nd else type(a) for a in map(inputs.__getitem__, var)])

    def __call__(self, *inputs: Any, **kwargs: Any) -> Any:
        if self.reference or kwargs:
            return self.op._run(*inputs, **kwargs)
        if self.min_size and self._small(inputs):
            return self.op._run(*inputs)
        key = self._key(inputs)
        hit = self.chosen.get(key)
        if hit is None:
            hit = self._pick(key, inputs)
        res = hit[1](*inputs)
        if res is None:  # the path declined this call
            return self.op._run(*inputs)
        return res

    def _pick(self, key: tuple[Any, ...], inputs: tuple[Any, ...]) -> tuple[str, Callable[..., Any], tuple[Any, ...]]:
        op = self.op
        active = key[0]
        name, run = REFERENCE, op._run
        for path in self.paths:
            if path.native and not active:
                continue
            if not path.when(op, *inputs):
                continue
            if path.prepared:
                executor = path.fn(op, *inputs)
                if executor is None:
                    continue
                name, run = path.name, executor
            else:
                name, run = path.name, partial(path.fn, op)
            break
        if len(self.chosen) >= MAX_SIGNATURES:
            self.chosen.clear()
        hit = (name, run, signature([inputs[i] for i in self.varying]))
        self.chosen[key] = hit
        return hit

    def choice(self, inputs: tuple[Any, ...]) -> str:
        """The name of the path calls with these inputs take (picking it if never met)."""
        if self.reference:
            return REFERENCE
        if self.min_size and self._small(inputs):
            return REFERENCE
        key = self._key(inputs)
        hit = self.chosen.get(key)
        return (hit or self._pick(key, inputs))[0]

    def choices(self) -> list[tuple[tuple[Any, ...], str]]:
        """((compiled kernels active, signature), path name) of every signature met so far;
        the signature describes the inputs that are not model constants, in order."""
        return [((key[0], *sig), name) for key, (name, _, sig) in list(self.chosen.items())]


def bind(op: Any, reference: bool = False) -> Callable[..., Any]:
    """The callable the plan runs for kernel ``op``: its ``_run`` when its operator declares
    no fast path (or fast paths are off process-wide), else a :class:`Dispatcher`
    (``reference``: one that always runs ``_run``, for a session with fast paths off)."""
    node = op.onnx_node
    domain = "" if node.domain in ("", "ai.onnx") else node.domain
    paths = paths_for(node.op_type or type(op).op_type, domain) if ENABLED else []
    if not paths:
        return op._run
    return Dispatcher(op, paths, reference)
