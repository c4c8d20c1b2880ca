"""What onnxrt tolerates from real exporters that the ONNX specification forbids: ModelWarning, strict mode and the graph repairs."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .errors import GraphError, OnnxRuntimeError

if TYPE_CHECKING:  # pragma: no cover
    import onnx

ML_DOMAIN = "ai.onnx.ml"


class ModelWarning(UserWarning):
    """The model breaks the ONNX specification in a way onnxrt tolerates, as onnxruntime does.

    Raised as an error instead when the session options set ``strict``.
    """


def is_strict(options: Any) -> bool:
    """Whether the session options ask for off-specification models to be refused."""
    return bool(getattr(options, "strict", False))


def off_spec(options: Any, message: str, error: type[OnnxRuntimeError] = GraphError, stacklevel: int = 3) -> None:
    """Report a model that breaks the specification: a :class:`ModelWarning`, or ``error``
    (one of onnxrt's own) when ``options.strict`` is set. ``message`` names the node or value,
    what the specification expects and what the model holds."""
    if is_strict(options):
        raise error(f"{message} (refused: strict mode)")
    warnings.warn(message, ModelWarning, stacklevel=stacklevel)


class OffSpecOnce:
    """A kernel's report of an input the specification forbids, found at run time: warned
    once per node (the first run that meets it), an error at every such run under strict."""

    __slots__ = ("options", "warned")

    def __init__(self, options: Any):
        self.options = options
        self.warned = False

    def __call__(self, message: str, error: type[OnnxRuntimeError]) -> None:
        if self.warned and not is_strict(self.options):
            return
        self.warned = True
        off_spec(self.options, message, error, stacklevel=4)


def default_opsets() -> dict[str, int]:
    """The opset given to a domain a model uses without importing it: onnxruntime takes the
    newest opset it knows for every such domain (ai.onnx.ml 5 in onnxruntime 1.32), onnxrt the
    newest its onnx package knows (ai.onnx.ml 5 and ai.onnx 25 in onnx 1.23). Read lazily."""
    from onnx import defs

    return {"": int(defs.onnx_opset_version()), ML_DOMAIN: int(defs.onnx_ml_opset_version())}


def _uses_domain(graph: onnx.GraphProto, domain: str) -> str | None:
    """``'name' (op_type)`` of the first node of ``domain`` in a graph or its subgraphs."""
    from onnx import AttributeProto

    for node in graph.node:
        if (node.domain if node.domain != "ai.onnx" else "") == domain:
            return f"{node.name!r} ({node.op_type})"
        for att in node.attribute:
            subs = [att.g] if att.type == AttributeProto.GRAPH else list(att.graphs) if att.type == AttributeProto.GRAPHS else []
            for sub in subs:
                found = _uses_domain(sub, domain)
                if found is not None:
                    return found
    return None


def complete_opsets(graph: onnx.GraphProto, opsets: dict[str, int], options: Any) -> dict[str, int]:
    """``opsets`` with ai.onnx.ml (or ai.onnx) added when the graph uses the domain without
    importing it.

    The specification requires every operator's domain to be imported; older converters
    (skl2onnx before 1.2, onnxmltools) left ai.onnx.ml out, and a model importing only
    ai.onnx.ml may use ai.onnx operators. onnxruntime then resolves the domain at the newest
    opset it knows; onnxrt does the same (:func:`default_opsets`) with a ModelWarning.
    """
    missing = [d for d in ("", ML_DOMAIN) if d not in opsets]
    if not missing:
        return opsets
    defaults = None
    for domain in missing:
        node = _uses_domain(graph, domain)
        if node is None:
            continue
        defaults = defaults or default_opsets()
        version = defaults[domain]
        off_spec(
            options,
            f"Node {node} uses domain {domain or 'ai.onnx'!r}, which the model does not import; "
            f"onnxrt resolves it at opset {version}, the newest it knows (as onnxruntime does).",
            stacklevel=4,
        )
        opsets = {**opsets, domain: version}
    return opsets


def check_input_dims(graph: onnx.GraphProto, options: Any) -> None:
    """Graph inputs declaring a negative dimension (exporters write -1 for "unknown", the
    specification wants a dim_param or no value): such a dimension is free, as in onnxruntime
    (onnxrt.dtypes.type_shape reads it so)."""
    for vi in graph.input:
        tp = vi.type
        if tp.WhichOneof("value") != "tensor_type" or not tp.tensor_type.HasField("shape"):
            continue
        dims = tp.tensor_type.shape.dim
        bad = [a for a, d in enumerate(dims) if d.WhichOneof("value") == "dim_value" and d.dim_value < 0]
        if bad:
            shown = [d.dim_value if d.WhichOneof("value") == "dim_value" else (d.dim_param or "?") for d in dims]
            off_spec(
                options,
                f"Input {vi.name!r} of graph {graph.name!r} declares dimension(s) {bad} as negative (shape {shown}); "
                f"the specification allows only values >= 0 or a symbolic name. onnxrt treats them as free "
                f"dimensions, as onnxruntime does.",
                stacklevel=4,
            )


def _untyped(tp: onnx.TypeProto) -> bool:
    """Whether a type leaves an element type undeclared (a tensor's elem_type 0, no type)."""
    kind = tp.WhichOneof("value")
    if kind in ("tensor_type", "sparse_tensor_type"):
        return getattr(tp, kind).elem_type == 0
    if kind in ("sequence_type", "optional_type"):
        inner = getattr(tp, kind)
        return not inner.HasField("elem_type") or _untyped(inner.elem_type)
    if kind == "map_type":
        return not tp.map_type.HasField("value_type") or _untyped(tp.map_type.value_type)
    return True


def check_input_types(graph: onnx.GraphProto, options: Any, constants: set[str] | frozenset[str] = frozenset()) -> None:
    """Inputs of the main graph declaring no element type (elem_type 0 or no type): onnxruntime
    refuses the model at load ("Invalid tensor data type 0"). onnxrt runs it, with a report:
    such an input's type is then whatever is fed, so the nodes reading it are type-checked on
    every run (onnxrt.plan). ``constants``: inputs that only name initializers (IR < 4),
    typed by their value."""
    for vi in graph.input:
        if vi.name in constants or (vi.HasField("type") and not _untyped(vi.type)):
            continue
        off_spec(
            options,
            f"Input {vi.name!r} of graph {graph.name!r} declares no element type; the specification "
            f"requires one (onnxruntime refuses the model). onnxrt takes the type of each feed and "
            f"checks the nodes reading it on every run.",
            stacklevel=5,  # the caller of OnnxInference(...)
        )


def repair_nodes(
    graph: onnx.GraphProto,
    outer_names: set[str] | frozenset[str],
    options: Any,
    outer_in_scope: Callable[[str], bool] | None = None,
) -> tuple[list[onnx.NodeProto], set[str], set[str]]:
    """The graph's nodes with what exporters get wrong repaired, the outer names the graph's
    own nodes shadow, and the initializers Constant nodes replace. Each repair is reported
    (:func:`off_spec`):

    * Constant nodes sharing an output name: onnxruntime turns Constant nodes into
      initializers and a later one replaces an earlier one of the same name, equal or not, so
      every reader sees the last one (stored order). onnxrt keeps the last one too. Any other
      duplicate stays an error (onnxruntime refuses it as well).
    * a Constant named like an initializer that is not a graph input: onnxruntime's
      conversion replaces the initializer by the Constant; so does onnxrt. (Named like a graph
      input it stays an error: onnxruntime makes it a default a feed overrides.)
    * a Constant whose ``value`` attribute holds a sparse tensor (the specification wants
      ``sparse_value``): onnxruntime densifies it; onnxrt moves it to ``sparse_value``.
    * a subgraph node output named like a value of an enclosing graph: inside the subgraph
      the inner value wins. onnx's checker and onnxruntime accept a name the enclosing graph
      defines at or after the node holding the subgraph (an If's branch outputs named like the
      If's outputs, as exporters write them): no report. A name already in scope there
      (``outer_in_scope``) breaks single assignment; onnxruntime refuses it, onnxrt runs it
      with a report.
    """
    from onnx import AttributeProto, NodeProto

    nodes = list(graph.node)
    replaced: set[str] = set()
    # --- duplicate Constant outputs: the last definition wins ---------------------------
    last: dict[str, int] = {}
    count: dict[str, int] = {}
    for i, node in enumerate(nodes):
        if node.op_type == "Constant" and node.domain in ("", "ai.onnx") and len(node.output) == 1 and node.output[0]:
            last[node.output[0]] = i
            count[node.output[0]] = count.get(node.output[0], 0) + 1
    dup = {name for name, k in count.items() if k > 1}
    if dup:
        for name in sorted(dup):
            defs = [n for n in nodes if n.op_type == "Constant" and list(n.output) == [name]]
            same = all(d.attribute == defs[0].attribute for d in defs[1:])
            off_spec(
                options,
                f"Value {name!r} of graph {graph.name!r} is produced by {len(defs)} Constant nodes "
                f"({', '.join(repr(d.name) for d in defs)}) with {'identical' if same else 'different'} values; "
                f"the specification wants one producer per name. onnxrt keeps the last one, "
                f"{defs[-1].name!r}, for every reader (as onnxruntime does).",
                stacklevel=4,
            )
        nodes = [n for i, n in enumerate(nodes) if not (n.op_type == "Constant" and n.output and n.output[0] in dup and last[n.output[0]] != i)]
    # --- a Constant named like an initializer (not an input): the Constant wins ------------
    constants = [n for n in nodes if n.op_type == "Constant" and n.domain in ("", "ai.onnx") and len(n.output) == 1]
    if constants and (graph.initializer or graph.sparse_initializer):
        held = {i.name for i in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
        held -= {i.name for i in graph.input}  # an input's name stays an error (onnxruntime lets a feed override it)
    else:
        held = set()
    for node in constants:
        name = node.output[0]
        if name in held:
            replaced.add(name)
            off_spec(
                options,
                f"Node {node.name!r} (Constant) produces {name!r}, which graph {graph.name!r} also holds as an "
                f"initializer; the specification wants one definition per name. onnxrt uses the Constant's value "
                f"(as onnxruntime does: it turns Constant nodes into initializers after the graph's own).",
                stacklevel=4,
            )
    # --- Constant value holding a sparse tensor ------------------------------------------
    for i, node in enumerate(nodes):
        if node.op_type != "Constant" or node.domain not in ("", "ai.onnx"):
            continue
        for att in node.attribute:
            if att.name == "value" and att.type == AttributeProto.SPARSE_TENSOR:
                off_spec(
                    options,
                    f"Node {node.name!r} (Constant) holds a sparse tensor in attribute 'value', which "
                    f"the specification types TENSOR; onnxrt reads it as 'sparse_value' (densified, "
                    f"as onnxruntime does).",
                    stacklevel=4,
                )
                fixed = NodeProto()
                fixed.CopyFrom(node)
                for a in fixed.attribute:
                    if a.name == "value":
                        a.name = "sparse_value"
                nodes[i] = fixed
                break
    # --- subgraph outputs shadowing outer names -------------------------------------------
    shadowed: set[str] = set()
    if outer_names:
        local = {i.name for i in graph.input} | {i.name for i in graph.initializer} | {s.values.name for s in graph.sparse_initializer}
        for node in nodes:
            for out in node.output:
                if out and out in outer_names and out not in local and out not in shadowed:
                    shadowed.add(out)
                    if outer_in_scope is not None and not outer_in_scope(out):
                        continue
                    off_spec(
                        options,
                        f"Node {node.name!r} ({node.op_type}) of subgraph {graph.name!r} produces {out!r}, a name "
                        f"an enclosing graph already defines there; the specification wants each name assigned once "
                        f"in a scope and its subgraphs (onnxruntime refuses it). Inside the subgraph the inner "
                        f"value wins.",
                        stacklevel=4,
                    )
    return nodes, shadowed, replaced
