"""Function expansion: model-local FunctionProtos and schema function bodies, inlined into the graph."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import onnx
from onnx import AttributeProto, FunctionProto, NodeProto

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


def _rename_graph(graph: onnx.GraphProto, mapping: dict[str, str]) -> onnx.GraphProto:
    """Copy of a subgraph whose references to renamed outer names follow ``mapping``."""
    g = onnx.GraphProto()
    g.CopyFrom(graph)
    local = {i.name for i in g.input} | {i.name for i in g.initializer}
    for node in g.node:
        local.update(node.output)
    outer = {k: v for k, v in mapping.items() if k not in local}
    if not outer:
        return g
    for node in g.node:
        for i, name in enumerate(node.input):
            if name in outer:
                node.input[i] = outer[name]
        for att in node.attribute:
            if att.type == AttributeProto.GRAPH:
                att.g.CopyFrom(_rename_graph(att.g, outer))
            elif att.type == AttributeProto.GRAPHS:
                for sub in att.graphs:
                    sub.CopyFrom(_rename_graph(sub, outer))
    for out in g.output:
        if out.name in outer:
            out.name = outer[out.name]
    return g


def _resolve_attributes(
    body_node: NodeProto,
    call_atts: dict[str, AttributeProto],
    defaults: dict[str, AttributeProto],
    fname: str,
) -> list[AttributeProto]:
    out = []
    for att in body_node.attribute:
        if att.ref_attr_name:
            src = call_atts.get(att.ref_attr_name) or defaults.get(att.ref_attr_name)
            if src is None:
                continue  # the attribute is left unset: the operator's default applies
            new = AttributeProto()
            new.CopyFrom(src)
            new.name = att.name
            out.append(new)
        else:
            out.append(att)
    return out


def inline_call(
    call: GraphNode,
    fn: FunctionProto,
    fn_opsets: dict[str, int],
) -> list[GraphNode]:
    """Nodes of ``fn`` with the call's inputs, outputs and attributes substituted."""
    if len(call.proto.input) > len(fn.input):
        raise GraphError(
            f"Node {call.name!r} calls function {fn.name!r} with {len(call.proto.input)} inputs; "
            f"it takes at most {len(fn.input)}."
        )
    prefix = f"_{fn.name}_{call.name or 'call'}_{next(_counter)}__"
    mapping: dict[str, str] = {}
    for i, formal in enumerate(fn.input):
        mapping[formal] = call.proto.input[i] if i < len(call.proto.input) else ""
    for i, formal in enumerate(fn.output):
        mapping[formal] = call.proto.output[i] if i < len(call.proto.output) else ""
    call_atts = {a.name: a for a in call.proto.attribute}
    defaults = {a.name: a for a in fn.attribute_proto}
    known = set(fn.attribute) | set(defaults)
    for name in call_atts:
        if name not in known:
            raise InvalidAttributeError(
                f"Node {call.name!r} gives attribute {name!r} to function {fn.name!r}, which takes {sorted(known)!r}."
            )
    nodes = []
    for bn in fn.node:
        new = NodeProto()
        new.CopyFrom(bn)
        for i, name in enumerate(bn.input):
            if name:
                new.input[i] = mapping.setdefault(name, prefix + name)
        for i, name in enumerate(bn.output):
            if name:
                new.output[i] = mapping.setdefault(name, prefix + name)
        del new.attribute[:]
        for att in _resolve_attributes(bn, call_atts, defaults, fn.name):
            if att.type == AttributeProto.GRAPH:
                a = AttributeProto()
                a.CopyFrom(att)
                a.g.CopyFrom(_rename_graph(att.g, mapping))
                att = a
            new.attribute.append(att)
        new.name = prefix + (bn.name or bn.op_type)
        origin = f"{call.origin} > {call.name}" if call.origin else call.name
        nodes.append(GraphNode(new, fn_opsets, origin=origin))
    return nodes


def function_opsets(fn: FunctionProto, model_opsets: dict[str, int]) -> dict[str, int]:
    """Opsets a function body resolves against: its own imports over the model's."""
    ops = dict(model_opsets)
    for imp in fn.opset_import:
        ops["" if imp.domain in ("", "ai.onnx") else imp.domain] = int(imp.version)
    return ops


def expand(
    nodes: list[GraphNode],
    functions: dict[FunctionKey, FunctionProto],
    model_opsets: dict[str, int],
    schema_body: Any = None,
    depth: int = 0,
) -> list[GraphNode]:
    """Replace every call of a model-local function (recursively) by the function's nodes.

    ``schema_body(node) -> (FunctionProto, opsets) | None`` supplies the body of an
    operator that has no kernel but whose schema defines a function.
    """
    if depth > _MAX_DEPTH:
        raise GraphError("Function calls nest deeper than 64 levels (a recursive function?).")
    out: list[GraphNode] = []
    for gn in nodes:
        key = function_key(gn.proto.domain, gn.proto.op_type, getattr(gn.proto, "overload", ""))
        fn = functions.get(key)
        if fn is not None:
            body = inline_call(gn, fn, function_opsets(fn, model_opsets))
            out.extend(expand(body, functions, model_opsets, schema_body, depth + 1))
            continue
        if schema_body is not None:
            found = schema_body(gn)
            if found is not None:
                fn, fn_ops = found
                body = inline_call(gn, fn, fn_ops)
                out.extend(expand(body, functions, model_opsets, schema_body, depth + 1))
                continue
        out.append(gn)
    return out
