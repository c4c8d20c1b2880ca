"""OpRun, the base class of every kernel: attribute parsing, schema defaults, signature properties."""

from __future__ import annotations

from functools import lru_cache
from typing import Any, ClassVar

import numpy as np
import onnx
from onnx import AttributeProto, NodeProto, defs

from ..dtypes import sparse_to_dense, to_array
from ..errors import InvalidAttributeError
from ._alloc import check_alloc as _check_alloc
from ._alloc import tensor_limit

_NO_DEFAULT = object()

# AttributeProto.type -> how to read its value
_READERS = {
    AttributeProto.FLOAT: lambda a: float(a.f),
    AttributeProto.INT: lambda a: int(a.i),
    AttributeProto.STRING: lambda a: _decode(a.s),
    AttributeProto.TENSOR: lambda a: to_array(a.t),
    AttributeProto.GRAPH: lambda a: a.g,
    AttributeProto.SPARSE_TENSOR: lambda a: _sparse_to_dense(a.sparse_tensor),
    AttributeProto.TYPE_PROTO: lambda a: a.tp,
    AttributeProto.FLOATS: lambda a: [float(f) for f in a.floats],
    AttributeProto.INTS: lambda a: [int(i) for i in a.ints],
    AttributeProto.STRINGS: lambda a: [_decode(s) for s in a.strings],
    AttributeProto.TENSORS: lambda a: [to_array(t) for t in a.tensors],
    AttributeProto.GRAPHS: lambda a: list(a.graphs),
    AttributeProto.SPARSE_TENSORS: lambda a: [_sparse_to_dense(t) for t in a.sparse_tensors],
    AttributeProto.TYPE_PROTOS: lambda a: list(a.type_protos),
}


def _decode(s: bytes) -> str | bytes:
    try:
        return s.decode("utf-8")
    except UnicodeDecodeError:
        return s


def _sparse_to_dense(sp: onnx.SparseTensorProto, what: str | None = None, limit: int | None = None) -> np.ndarray:
    """Dense array of a SparseTensorProto (indices either flat [NNZ] or coordinates [NNZ, rank]),
    checked by :func:`onnxrt.dtypes.sparse_to_dense` (indices in range and ascending, one value
    each, dense size at most ``limit`` bytes) before it is allocated."""
    return sparse_to_dense(sp, what, limit)


def _tensor_value(t: onnx.TensorProto, what: str, limit: int | None, base_dir: str | None) -> np.ndarray:
    if t.data_location == onnx.TensorProto.EXTERNAL:
        # read as an initializer is: only a regular file inside the model's folder
        from ..model import initializer_array

        return initializer_array(t, base_dir, limit, what)
    return to_array(t, what, limit)


def attribute_value(att: AttributeProto, owner: str = "", limit: int | None = None, base_dir: str | None = None) -> Any:
    """Python value of an attribute (int, float, str, list, numpy array, GraphProto...).

    Tensors are checked as initializers are (``ModelLoadError`` naming ``owner``, the node,
    and the attribute), their external data read only inside ``base_dir``; a tensor (a
    sparse tensor's dense form) is refused above ``limit`` bytes.
    """
    what = f"{owner}: attribute {att.name!r}" if owner else f"Attribute {att.name!r}"
    if att.type == AttributeProto.TENSOR:
        return _tensor_value(att.t, what, limit, base_dir)
    if att.type == AttributeProto.TENSORS:
        return [_tensor_value(t, f"{what} tensor {i}", limit, base_dir) for i, t in enumerate(att.tensors)]
    if att.type == AttributeProto.SPARSE_TENSOR:
        return sparse_to_dense(att.sparse_tensor, what, limit)
    if att.type == AttributeProto.SPARSE_TENSORS:
        return [sparse_to_dense(t, f"{what} tensor {i}", limit) for i, t in enumerate(att.sparse_tensors)]
    reader = _READERS.get(att.type)
    if reader is None:
        raise InvalidAttributeError(f"Attribute {att.name!r} has an undefined type ({att.type}).")
    return reader(att)


@lru_cache(maxsize=None)
def get_schema(op_type: str, version: int | None, domain: str) -> defs.OpSchema | None:
    """The ONNX schema of an operator at a version, or None for custom operators."""
    try:
        if version is None:
            return defs.get_schema(op_type, domain)
        return defs.get_schema(op_type, version, domain)
    except defs.SchemaError:
        return None


class OpRun:
    """Base class of all kernels.

    ``OpRun(onnx_node, desc=None, **options)`` parses the node's attributes once. Every
    attribute of the operator's schema becomes an instance attribute (``self.axis``),
    filled with the schema default when the node omits it. ``desc`` may give attribute
    values directly (name -> python value), overriding the node's. Recognised options:
    ``since_version`` (the registered version the engine resolved), ``opsets`` (the
    model's domain -> version map), ``compile_graph`` (a callable the engine passes to
    turn GRAPH attributes into nested plans) and ``base_dir`` (the model's folder, where
    tensor attributes with external data are read).

    Subclasses implement ``_run(*inputs, attributes=None, verbose=0, fLOG=None)`` and
    return a tuple with one value per output. Kernels never modify their inputs.
    ``attributes``, ``verbose`` and ``fLOG`` are mlprodict's seed API, kept so that kernels
    written for it run unchanged: the engine never passes them and no kernel reads them
    (``fLOG`` was mlprodict's logging function). Kernels that run subgraphs also take the
    keyword ``context`` (the outer scope's values), passed when ``needs_context`` is set.

    Helpers every kernel shares, so that policies live here and not in each kernel:

    - :meth:`check_alloc` ``(shape, dtype, what)``: refuses, before any work, an output or
      large temporary whose size the model or the data decide and which would pass
      ``SessionOptions.max_tensor_bytes`` (or the machine's memory), with
      ``AllocationError``. Every kernel that takes a size from an attribute or an input
      calls it before allocating (``tests/ops/test_alloc_policy.py``).
    - :meth:`node_label` ``()``: ``"Node 'name' (OpType)"``, the prefix of load-time errors.
    - :meth:`check_choice` ``(name, choices)``: ``InvalidAttributeError`` when attribute
      ``name`` is not one of ``choices``.
    """

    op_type: ClassVar[str] = ""
    op_domain: ClassVar[str] = ""
    #: attribute defaults for operators without an ONNX schema (custom operators)
    attribute_defaults: ClassVar[dict[str, Any]] = {}
    #: input names for operators without an ONNX schema
    input_names: ClassVar[tuple[str, ...]] = ()
    #: set True when the kernel needs the engine's context (outer-scope values for subgraphs)
    needs_context: ClassVar[bool] = False
    #: False when the kernel never calls a BLAS product (numpy's matmul, dot, ...): a run
    #: whose kernels all say so leaves BLAS's thread count alone (setting and restoring it
    #: cost 25-45 us a run behind a large kernel). True, the safe value, by default.
    uses_blas: ClassVar[bool] = True
    #: positions of the inputs that are the model's own constants (initializers the plan
    #: holds, never fed: the same immutable array on every run of the session), told by the
    #: plan through :meth:`set_const_inputs`; only data derived from these may be cached
    #: across runs (a feed's memory may change between runs even when it is read-only)
    const_inputs: frozenset[int] = frozenset()

    def __init__(self, onnx_node: NodeProto, desc: dict[str, Any] | None = None, **options: Any):
        self.onnx_node = onnx_node
        self.options = options
        op_type = onnx_node.op_type or type(self).op_type
        domain = onnx_node.domain if onnx_node.domain != "ai.onnx" else ""
        since = options.get("since_version")
        if since is None:
            regs = getattr(type(self), "_registered", {}).get((domain, op_type), ())
            since = max(regs) if regs else None
        self.since_version: int | None = since
        self._schema = get_schema(op_type, since, domain) if since is not None else get_schema(op_type, None, domain)
        self._defaults: dict[str, Any] = {}
        self._required: set[str] = set()
        self._atts: dict[str, Any] = {}
        self._implicit: list[str] = []
        self._parse_attributes(desc or {})

    # -- attributes -------------------------------------------------------------------

    def set_const_inputs(self, positions: Any) -> None:
        """Called by the plan once the node is built: ``positions`` of its model constants."""
        self.const_inputs = frozenset(positions)

    def node_label(self) -> str:
        """``"Node 'name' (OpType)"``: how errors name the node."""
        return f"Node {self.onnx_node.name!r} ({self.onnx_node.op_type or type(self).op_type})"

    def _parse_attributes(self, desc: dict[str, Any]) -> None:
        schema = self._schema
        given: dict[str, Any] = {}
        label, limit = self.node_label(), tensor_limit(self.options)
        base_dir = self.options.get("base_dir")  # the model's folder, for external tensors
        for att in self.onnx_node.attribute:
            if att.ref_attr_name:
                raise InvalidAttributeError(
                    f"{self.node_label()}: attribute {att.name!r} refers to {att.ref_attr_name!r}, "
                    f"which only a function body can resolve."
                )
            if schema is not None and att.name in schema.attributes:
                expected = schema.attributes[att.name].type
                if att.type != expected:
                    raise InvalidAttributeError(
                        f"{self.node_label()}: attribute {att.name!r} must be of type "
                        f"{AttributeProto.AttributeType.Name(expected)}, got "
                        f"{AttributeProto.AttributeType.Name(att.type)}."
                    )
            given[att.name] = attribute_value(att, label, limit, base_dir)
        given.update(desc)

        if schema is not None:
            for name, sch in schema.attributes.items():
                default = (
                    attribute_value(sch.default_value)
                    if sch.default_value is not None and sch.default_value.type != AttributeProto.UNDEFINED
                    else _NO_DEFAULT
                )
                self._defaults[name] = default
                if sch.required:
                    self._required.add(name)
        for name, value in type(self).attribute_defaults.items():
            self._defaults.setdefault(name, value)

        for name in self._required:
            if name not in given:
                raise InvalidAttributeError(
                    f"{self.node_label()} misses the required attribute {name!r}."
                )
        for name, default in self._defaults.items():
            value = given.get(name, None if default is _NO_DEFAULT else default)
            self._atts[name] = value
        for name, value in given.items():  # attributes outside the schema are kept too
            self._atts.setdefault(name, value)

        compile_graph = self.options.get("compile_graph")
        for name, value in self._atts.items():
            if compile_graph is not None and isinstance(value, onnx.GraphProto):
                value = compile_graph(value, name)
                self._implicit.extend(
                    n for n in getattr(value, "outer_inputs", ()) if n not in self._implicit
                )
                self._atts[name] = value
            setattr(self, name, value)

    # -- running ----------------------------------------------------------------------

    def _run(self, *inputs: Any, attributes: dict[str, Any] | None = None, verbose: int = 0, fLOG: Any = None) -> tuple[Any, ...]:
        raise NotImplementedError(f"{type(self).__name__} does not implement _run.")

    def run(self, *inputs: Any, **kwargs: Any) -> tuple[Any, ...]:
        """Run the kernel outside a graph; returns a tuple of outputs."""
        res = self._run(*inputs, **kwargs)
        if not isinstance(res, tuple):
            raise TypeError(f"{type(self).__name__}._run must return a tuple, got {type(res).__name__}.")
        return res

    def check_alloc(self, shape: Any, dtype: Any, what: str = "output") -> None:
        """Raise AllocationError before any work when a tensor of ``shape`` and ``dtype``
        (an output or a large temporary whose size the model or the data decide) would
        exceed the session's ``max_tensor_bytes`` or the machine's memory."""
        _check_alloc(shape, dtype, self.options, f"{self.onnx_node.op_type or type(self).op_type} {what}")

    def check_choice(self, name: str, choices: tuple[Any, ...]) -> None:
        """Raise InvalidAttributeError when attribute ``name`` is not one of ``choices``."""
        value = self._atts.get(name)
        if value not in choices:
            raise InvalidAttributeError(
                f"{self.node_label()}: attribute {name!r} is {value!r}, expected one of {list(choices)!r}."
            )

    @property
    def implicit_inputs(self) -> list[str]:
        """Outer-scope names the node's subgraphs read (the engine keeps them alive)."""
        return self._implicit

    # -- signature properties (DESIGN.md) --------------------------------------------

    def _formal_inputs(self) -> list[tuple[str, int]]:
        if self._schema is not None:
            return [(p.name, int(p.option)) for p in self._schema.inputs]
        return [(n, 0) for n in type(self).input_names]

    @property
    def args_mandatory(self) -> list[str]:
        """Names of the mandatory inputs (variadic inputs count as mandatory)."""
        optional = int(defs.OpSchema.FormalParameterOption.Optional)
        return [n for n, opt in self._formal_inputs() if opt != optional]

    @property
    def args_optional(self) -> list[str]:
        """Names of the optional inputs."""
        optional = int(defs.OpSchema.FormalParameterOption.Optional)
        return [n for n, opt in self._formal_inputs() if opt == optional]

    @property
    def args_default(self) -> list[str]:
        """Inputs, then ``name=default`` per parameter (``name`` alone when it has no default)."""
        out = [n for n, _ in self._formal_inputs()]
        for name in sorted(self._defaults):
            default = self._defaults[name]
            out.append(name if default is _NO_DEFAULT else f"{name}={_short_repr(default)}")
        return out

    @property
    def args_default_modified(self) -> list[str]:
        """``name=value`` for each parameter whose value differs from its default."""
        out = []
        for name in sorted(self._atts):
            value = self._atts[name]
            default = self._defaults.get(name, _NO_DEFAULT)
            if default is _NO_DEFAULT:
                if value is None:
                    continue
            elif _same(value, default):
                continue
            out.append(f"{name}={_short_repr(value)}")
        return out

    @property
    def atts_value(self) -> dict[str, Any]:
        """Every parameter and its value (defaults included)."""
        return dict(self._atts)

    def __repr__(self) -> str:
        mod = ", ".join(self.args_default_modified)
        return f"{type(self).__name__}({mod})"


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, np.ndarray) or isinstance(b, np.ndarray):
        return isinstance(a, np.ndarray) and isinstance(b, np.ndarray) and a.shape == b.shape and bool(np.all(a == b))
    try:
        return bool(a == b)
    except Exception:  # noqa: BLE001  (incomparable values are different)
        return False


def _short_repr(value: Any) -> str:
    if isinstance(value, np.ndarray):
        if value.size <= 8:
            return f"array({value.tolist()!r}, dtype={value.dtype})"
        return f"array(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, onnx.GraphProto):
        return f"<graph {value.name!r}>"
    return repr(value)
