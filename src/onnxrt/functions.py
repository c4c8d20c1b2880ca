"""Function expansion: model-local FunctionProtos and schema function bodies (context-dependent too), inlined into the graph."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import AttributeProto, FunctionProto, NodeProto, TypeProto, helper

from .errors import GraphError, InvalidAttributeError


@dataclass
class GraphNode:
    """A node ready to plan: the proto and the opsets its operator resolves against."""

    proto: NodeProto
    opsets: dict[str, int]
    #: the function call this node was inlined from, for error messages
    origin: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    # the attributes graph sorting reads
    @property
    def input(self) -> Any:
        return self.proto.input

    @property
    def output(self) -> Any:
        return self.proto.output

    @property
    def name(self) -> str:
        return self.proto.name

    @property
    def op_type(self) -> str:
        return self.proto.op_type

    @property
    def attribute(self) -> Any:
        return self.proto.attribute


FunctionKey = tuple[str, str, str]  # domain, name, overload


def function_key(domain: str, name: str, overload: str = "") -> FunctionKey:
    return ("" if domain in ("", "ai.onnx") else domain, name, overload)


_counter = itertools.count()
_MAX_DEPTH = 64
#: the default node budget of one graph's expansion (SessionOptions.max_expanded_nodes raises it)
MAX_EXPANDED_NODES = 1_000_000


def expansion_budget(options: Any = None) -> int:
    """How many nodes one graph may expand to, its subgraphs' nodes included:
    ``SessionOptions.max_expanded_nodes`` when set, else :data:`MAX_EXPANDED_NODES`."""
    cap = getattr(options, "max_expanded_nodes", None)
    return MAX_EXPANDED_NODES if cap is None else int(cap)


def _expanded_count(
    protos: Iterable[NodeProto], functions: dict[FunctionKey, FunctionProto], memo: dict[FunctionKey, int], visiting: set[FunctionKey]
) -> int:
    # nodes after inlining every local-function call, subgraphs (If, Loop, Scan bodies:
    # copied into every call) included; one pass per function thanks to ``memo``, so a
    # function calling its callee twice per level is counted in linear time, not 2**depth
    total = 0
    for p in protos:
        key = function_key(p.domain, p.op_type, getattr(p, "overload", ""))
        fn = functions.get(key)
        if fn is not None:
            if key not in memo:
                if key in visiting:  # a recursive function: the depth limit reports it
                    total += 1
                    continue
                visiting.add(key)
                memo[key] = _expanded_count(fn.node, functions, memo, visiting)
                visiting.discard(key)
            total += memo[key]
            continue
        total += 1
        for att in p.attribute:
            if att.type == AttributeProto.GRAPH:
                total += _expanded_count(att.g.node, functions, memo, visiting)
            elif att.type == AttributeProto.GRAPHS:
                for g in att.graphs:
                    total += _expanded_count(g.node, functions, memo, visiting)
    return total


def _label(key: FunctionKey) -> str:
    return repr((key[0] + ":" if key[0] else "") + key[1])


def check_expansion(nodes: Iterable[NodeProto], functions: dict[FunctionKey, FunctionProto], budget: int) -> None:
    """Raise GraphError before any inlining when the graph's nodes would expand to more than
    ``budget`` nodes, naming the first call that crosses it."""
    if not functions:
        return
    nodes = list(nodes)
    memo: dict[FunctionKey, int] = {}
    total = 0
    for p in nodes:
        total += _expanded_count([p], functions, memo, set())
        if total > budget:
            key = function_key(p.domain, p.op_type, getattr(p, "overload", ""))
            if key in functions:
                what = f"function {_label(key)} (node {p.name!r})"
            else:  # a node whose subgraphs call functions: name the largest
                big = max(memo, key=memo.__getitem__)
                what = f"node {p.name!r} ({p.op_type}), whose subgraphs call function {_label(big)} ({memo[big]} nodes),"
            raise GraphError(
                f"Expanding {what} brings the graph to more than {budget} nodes "
                f"({_expanded_count(nodes, functions, memo, set())} in all), above the "
                f"expansion budget of {budget} nodes; raise SessionOptions.max_expanded_nodes to allow it."
            )


def _domain(domain: str) -> str:
    return "" if domain in ("", "ai.onnx") else domain


# --- attribute references -------------------------------------------------------------------


def _resolved(att: AttributeProto, call_atts: dict[str, AttributeProto], defaults: dict[str, AttributeProto]) -> AttributeProto | None:
    """The attribute a body node gets: itself, or the call's (else the default) value of the
    attribute it refers to; None when neither gives one (the operator's own default applies)."""
    if not att.ref_attr_name:
        return att
    src = call_atts.get(att.ref_attr_name) or defaults.get(att.ref_attr_name)
    if src is None:
        return None
    new = AttributeProto()
    new.CopyFrom(src)
    new.name = att.name
    return new


def _local_names(graph: onnx.GraphProto) -> set[str]:
    local = {i.name for i in graph.input} | {i.name for i in graph.initializer}
    local.update(i.values.name for i in graph.sparse_initializer)
    for node in graph.node:
        local.update(node.output)
    return local


def _rewrite_graph(
    graph: onnx.GraphProto,
    mapping: dict[str, str],
    call_atts: dict[str, AttributeProto],
    defaults: dict[str, AttributeProto],
    prefix: str = "",
) -> onnx.GraphProto:
    """Copy of a subgraph of a function body: references to outer names follow ``mapping``,
    attribute references (``ref_attr_name``) take the call's values, and, with ``prefix``, the
    names the subgraph defines get the call's prefix too, at any depth, so that nothing inlined
    shadows a name of the calling graph (subgraph inputs and outputs bind by position)."""
    g = onnx.GraphProto()
    g.CopyFrom(graph)
    local = _local_names(g)
    names = {k: v for k, v in mapping.items() if k not in local}
    if prefix:
        names.update({n: prefix + n for n in local if n})

    def ren(name: str) -> str:
        return names.get(name, name) if name else name

    for value in itertools.chain(g.input, g.output, g.value_info):
        value.name = ren(value.name)
    for init in g.initializer:
        init.name = ren(init.name)
    for sp in g.sparse_initializer:
        sp.values.name = ren(sp.values.name)
    for node in g.node:
        for i, name in enumerate(node.input):
            node.input[i] = ren(name)
        for i, name in enumerate(node.output):
            node.output[i] = ren(name)
        atts = []
        for att in node.attribute:
            new = _resolved(att, call_atts, defaults)
            if new is None:
                continue
            if new is att:
                new = AttributeProto()
                new.CopyFrom(att)
            _rewrite_graph_attribute(new, bool(att.ref_attr_name), names, call_atts, defaults, prefix)
            atts.append(new)
        del node.attribute[:]
        node.attribute.extend(atts)
    return g


def _rewrite_graph_attribute(
    att: AttributeProto,
    from_call: bool,
    mapping: dict[str, str],
    call_atts: dict[str, AttributeProto],
    defaults: dict[str, AttributeProto],
    prefix: str,
) -> None:
    """Rewrite, in place, the graphs of a GRAPH or GRAPHS attribute of an inlined node. A graph
    the call itself gave (through a reference) reads names of the calling scope: only the
    names it defines get the prefix."""
    if from_call:
        mapping, call_atts, defaults = {}, {}, {}
    if att.type == AttributeProto.GRAPH:
        att.g.CopyFrom(_rewrite_graph(att.g, mapping, call_atts, defaults, prefix))
    elif att.type == AttributeProto.GRAPHS:
        for sub in att.graphs:
            sub.CopyFrom(_rewrite_graph(sub, mapping, call_atts, defaults, prefix))


def _rename_graph(graph: onnx.GraphProto, mapping: dict[str, str]) -> onnx.GraphProto:
    """Copy of a subgraph whose references to renamed outer names follow ``mapping``."""
    return _rewrite_graph(graph, mapping, {}, {})


# --- inlining --------------------------------------------------------------------------------


def inline_call(
    call: GraphNode,
    fn: FunctionProto,
    fn_opsets: dict[str, int],
) -> list[GraphNode]:
    """Nodes of ``fn`` with the call's inputs, outputs and attributes substituted.

    Formal inputs the call omits become ``""`` (absent optional inputs); formal outputs the
    call does not name keep a private name, so body nodes can still read them. Every other
    name of the body, those defined inside its subgraphs too, gets a prefix unique to the call. Attribute references resolve to the
    call's attribute, else the function's default (``attribute_proto``), else stay unset so
    that the operator's own default applies; this holds inside subgraphs too.
    """
    if len(call.proto.input) > len(fn.input):
        raise GraphError(
            f"Node {call.name!r} calls function {fn.name!r} with {len(call.proto.input)} inputs; "
            f"it takes at most {len(fn.input)}."
        )
    if len(call.proto.output) > len(fn.output):
        raise GraphError(
            f"Node {call.name!r} calls function {fn.name!r} with {len(call.proto.output)} outputs; "
            f"it has {len(fn.output)}."
        )
    prefix = f"_{fn.name}_{call.name or 'call'}_{next(_counter)}__"
    mapping: dict[str, str] = {}
    for i, formal in enumerate(fn.input):
        mapping[formal] = call.proto.input[i] if i < len(call.proto.input) else ""
    for i, formal in enumerate(fn.output):
        actual = call.proto.output[i] if i < len(call.proto.output) else ""
        mapping[formal] = actual or prefix + formal
    call_atts = {a.name: a for a in call.proto.attribute}
    defaults = {a.name: a for a in fn.attribute_proto}
    known = set(fn.attribute) | set(defaults)
    for name in call_atts:
        if name not in known:
            raise InvalidAttributeError(
                f"Node {call.name!r} gives attribute {name!r} to function {fn.name!r}, which takes {sorted(known)!r}."
            )
    # names the body defines; a body node may also read a name it does not define: a
    # context-dependent body splices in subgraph attributes (FlexAttention's score_mod) whose
    # outer references name values of the calling graph, and those keep their name
    produced = {o for bn in fn.node for o in bn.output if o}
    nodes = []
    origin = f"{call.origin} > {call.name}" if call.origin else call.name
    for bn in fn.node:
        new = NodeProto()
        new.CopyFrom(bn)
        for i, name in enumerate(bn.input):
            if name and (name in mapping or name in produced):
                new.input[i] = mapping.setdefault(name, prefix + name)
        for i, name in enumerate(bn.output):
            if name:
                new.output[i] = mapping.setdefault(name, prefix + name)
        del new.attribute[:]
        for att in bn.attribute:
            res = _resolved(att, call_atts, defaults)
            if res is None:
                continue
            if res.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS):
                a = AttributeProto()
                a.CopyFrom(res)
                _rewrite_graph_attribute(a, bool(att.ref_attr_name), mapping, call_atts, defaults, prefix)
                res = a
            new.attribute.append(res)
        new.name = prefix + (bn.name or bn.op_type)
        nodes.append(GraphNode(new, fn_opsets, origin=origin))
    return nodes


def function_opsets(fn: FunctionProto, model_opsets: dict[str, int]) -> dict[str, int]:
    """Opsets a function body resolves against: its own imports over the model's."""
    ops = dict(model_opsets)
    for imp in fn.opset_import:
        ops[_domain(imp.domain)] = int(imp.version)
    return ops


# --- value types, for context-dependent bodies --------------------------------------------------


def _tensor_type(tensor: onnx.TensorProto) -> TypeProto:
    return helper.make_tensor_type_proto(tensor.data_type, list(tensor.dims))


class ValueTypes:
    """Types of a graph's values, which context-dependent function bodies are built from.

    Declared types come first (inputs, outputs, value_info, initializers, and ``outer`` for
    a subgraph's enclosing scopes). A missing one is looked for, once, by propagating types
    through the nodes inlined so far (``infer_node_outputs`` per node, in body order), then,
    once, by onnx shape inference over the whole graph. Nothing is inferred for graphs that
    inline no context-dependent body.
    """

    def __init__(
        self,
        graph: onnx.GraphProto,
        opsets: dict[str, int],
        functions: dict[FunctionKey, FunctionProto] | None = None,
        outer: dict[str, TypeProto] | None = None,
    ):
        self.graph = graph
        self.opsets = opsets
        self.functions = functions or {}
        self.types: dict[str, TypeProto] = dict(outer or {})
        for init in graph.initializer:
            self.types[init.name] = _tensor_type(init)
        for vi in itertools.chain(graph.input, graph.value_info, graph.output):
            if vi.HasField("type") and vi.type.WhichOneof("value") is not None:
                self.types[vi.name] = vi.type
        self._pending: list[GraphNode] = []
        self._inferred = False

    def add_inlined(self, nodes: Iterable[GraphNode]) -> None:
        """Nodes a call was replaced by; their output types are inferred when first needed."""
        self._pending.extend(nodes)

    def get(self, name: str) -> TypeProto | None:
        t = self.types.get(name)
        if t is None and not self._inferred:
            self._infer_graph()
            t = self.types.get(name)
        if t is None and self._pending:
            self._propagate()
            t = self.types.get(name)
        return t

    def _infer_graph(self) -> None:
        self._inferred = True
        opset_imports = [helper.make_opsetid(d, v) for d, v in self.opsets.items()]
        model = helper.make_model(self.graph, opset_imports=opset_imports, functions=list(self.functions.values()))
        try:
            inferred = onnx.shape_inference.infer_shapes(model, strict_mode=False)
        except Exception:  # noqa: BLE001  (inference is a best effort; declared types remain)
            return
        for vi in itertools.chain(inferred.graph.value_info, inferred.graph.output):
            if vi.HasField("type") and vi.type.WhichOneof("value") is not None:
                self.types.setdefault(vi.name, vi.type)

    def _propagate(self) -> None:
        from .ops_cpu._op import get_schema

        pending, self._pending = self._pending, []
        for gn in pending:
            node = gn.proto
            ins = {n: self.types.get(n) for n in node.input if n}
            if any(t is None for t in ins.values()):
                continue
            domain = _domain(node.domain)
            try:
                fn = self.functions.get(function_key(domain, node.op_type, getattr(node, "overload", "")))
                if fn is not None:
                    outs = onnx.shape_inference.infer_function_output_types(
                        fn, [ins[n] for n in node.input if n], list(node.attribute)
                    )
                    found = dict(zip(node.output, outs))
                else:
                    schema = get_schema(node.op_type, gn.opsets.get(domain), domain)
                    if schema is None:
                        continue
                    found = onnx.shape_inference.infer_node_outputs(
                        schema, node, ins, opset_imports=[helper.make_opsetid(d, v) for d, v in gn.opsets.items()]
                    )
            except Exception:  # noqa: BLE001  (a node whose types cannot be inferred stays unknown)
                continue
            for name, t in found.items():
                if name and t.WhichOneof("value") is not None:
                    self.types.setdefault(name, t)


# --- schema function bodies ---------------------------------------------------------------------


def _body_version(versions: Iterable[int], opset: int) -> int | None:
    return max((v for v in versions if v <= opset), default=None)


def schema_body(
    gn: GraphNode,
    has_kernel: Callable[[str, str, int], bool],
    types: ValueTypes | None = None,
) -> tuple[FunctionProto, dict[str, int]] | None:
    """The schema function body of an operator onnxrt has no kernel for, or None.

    A context-free body is taken for the newest body version not above the model's opset.
    Otherwise a context-dependent body is built from the node and its input types (from
    ``types``); an absent optional input has an empty type. None when the operator has a
    kernel, no schema, no body, or input types that cannot be found.
    """
    node = gn.proto
    domain = _domain(node.domain)
    opset = gn.opsets.get(domain)
    if opset is None or has_kernel(node.op_type, domain, opset):
        return None
    from .ops_cpu._op import get_schema

    schema = get_schema(node.op_type, opset, domain)
    if schema is None:
        return None
    fn: FunctionProto | None = None
    if schema.has_function:
        raw = schema.get_function_with_opset_version(opset)  # serialized FunctionProto, b"" if none
        if isinstance(raw, bytes) and raw:
            fn = FunctionProto()
            fn.ParseFromString(raw)
        elif not isinstance(raw, bytes):
            fn = schema.function_body
    if (fn is None or not fn.node) and schema.has_context_dependent_function and types is not None:
        version = _body_version(schema.context_dependent_function_opset_versions, opset)
        input_types = []
        for name in node.input:
            t = types.get(name) if name else TypeProto()
            if t is None:
                return None
            input_types.append(t.SerializeToString())
        if version is not None:
            try:
                raw = schema.get_context_dependent_function_with_opset_version(
                    version, node.SerializeToString(), input_types
                )
            except Exception:  # noqa: BLE001  (the builder rejects these inputs: no fallback)
                raw = b""
            if raw:
                fn = FunctionProto()
                fn.ParseFromString(raw)
    if fn is None or not fn.node:
        return None
    fn_proto = FunctionProto()
    fn_proto.CopyFrom(fn)
    fn_proto.name = node.op_type
    # a reference to an attribute the node omits takes the schema's default (LeakyRelu's @alpha)
    given = {a.name for a in fn_proto.attribute_proto}
    for name, att in schema.attributes.items():
        default = att.default_value
        if name not in given and default is not None and default.type != AttributeProto.UNDEFINED:
            proto = AttributeProto()
            proto.CopyFrom(default)
            proto.name = name
            fn_proto.attribute_proto.append(proto)
            if name in fn_proto.attribute:
                fn_proto.attribute.remove(name)
        elif name not in given and name not in fn_proto.attribute:
            fn_proto.attribute.append(name)  # every schema attribute may be given to the call
    return fn_proto, function_opsets(fn_proto, gn.opsets)


def expand(
    nodes: list[GraphNode],
    functions: dict[FunctionKey, FunctionProto],
    model_opsets: dict[str, int],
    schema_body: Any = None,
    depth: int = 0,
    types: ValueTypes | None = None,
    budget: int | None = None,
) -> list[GraphNode]:
    """Replace every call of a model-local function (recursively) by the function's nodes.

    ``schema_body(node) -> (FunctionProto, opsets) | None`` supplies the body of an
    operator that has no kernel but whose schema defines a function; when ``types`` is
    given it is called as ``schema_body(node, types)`` so that context-dependent bodies can
    be built, and the nodes of every inlined body are recorded in ``types``.
    The size of the result is counted first (:func:`check_expansion`): more than ``budget``
    nodes (default :func:`expansion_budget`) raise GraphError before any inlining.
    """
    if depth == 0:
        check_expansion([gn.proto for gn in nodes], functions, MAX_EXPANDED_NODES if budget is None else budget)
    if depth > _MAX_DEPTH:
        raise GraphError("Function calls nest deeper than 64 levels (a recursive function?).")
    out: list[GraphNode] = []
    for gn in nodes:
        key = function_key(gn.proto.domain, gn.proto.op_type, getattr(gn.proto, "overload", ""))
        fn = functions.get(key)
        if fn is not None:
            body = inline_call(gn, fn, function_opsets(fn, model_opsets))
            if types is not None:
                types.add_inlined(body)
            out.extend(expand(body, functions, model_opsets, schema_body, depth + 1, types))
            continue
        if schema_body is not None:
            found = schema_body(gn) if types is None else schema_body(gn, types)
            if found is not None:
                fn, fn_ops = found
                body = inline_call(gn, fn, fn_ops)
                if types is not None:
                    types.add_inlined(body)
                out.extend(expand(body, functions, model_opsets, schema_body, depth + 1, types))
                continue
        out.append(gn)
    return out
