"""A small mutable graph the optimisation passes rewrite: nodes with name lists, constants as numpy arrays."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import onnx
from onnx import AttributeProto, NodeProto, helper

from ..functions import GraphNode
from ..model import node_free_names

_ids = itertools.count()


@dataclass(eq=False)  # nodes are compared by identity (list.remove, membership)
class Node:
    """A node being optimised; ``attrs`` keeps the AttributeProtos untouched unless a pass sets them."""

    op_type: str
    domain: str
    inputs: list[str]
    outputs: list[str]
    attrs: dict[str, AttributeProto]
    name: str
    opsets: dict[str, int]
    origin: str = ""
    #: outer-scope names read by the node's subgraphs (kept alive, never folded through)
    implicit: set[str] = field(default_factory=set)

    @classmethod
    def from_graph_node(cls, gn: GraphNode) -> Node:
        p = gn.proto
        return cls(
            p.op_type,
            "" if p.domain in ("", "ai.onnx") else p.domain,
            list(p.input),
            list(p.output),
            {a.name: a for a in p.attribute},
            p.name,
            gn.opsets,
            gn.origin,
            node_free_names(p),
        )

    def to_graph_node(self) -> GraphNode:
        proto = NodeProto()
        proto.op_type = self.op_type
        proto.domain = self.domain
        proto.name = self.name
        proto.input.extend(self.inputs)
        proto.output.extend(self.outputs)
        proto.attribute.extend(self.attrs.values())
        return GraphNode(proto, self.opsets, origin=self.origin)

    def attr(self, name: str, default: Any = None) -> Any:
        """The python value of an attribute (default when absent)."""
        a = self.attrs.get(name)
        if a is None:
            return default
        return helper.get_attribute_value(a) if a.type != AttributeProto.STRING else a.s.decode("utf-8")

    def set_attr(self, name: str, value: Any, attr_type: int | None = None) -> None:
        self.attrs[name] = helper.make_attribute(name, value, attr_type=attr_type)

    @property
    def opset(self) -> int:
        return self.opsets.get(self.domain, 0)

    @property
    def has_subgraph(self) -> bool:
        return any(a.type in (AttributeProto.GRAPH, AttributeProto.GRAPHS) for a in self.attrs.values())


@dataclass
class Graph:
    """Nodes in execution order, constants, the graph's inputs and outputs, static value info."""

    nodes: list[Node]
    constants: dict[str, np.ndarray]
    inputs: list[str]
    outputs: list[str]
    #: name -> (numpy dtype or None, shape with None for unknown dims or None for unknown rank)
    info: dict[str, tuple[Any, list[int | None] | None]] = field(default_factory=dict)
    #: names of constants that are also graph inputs (a feed may override them: never fold)
    overridable: set[str] = field(default_factory=set)

    def new_name(self, base: str) -> str:
        return f"{base}__opt{next(_ids)}"

    def consumers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for name in set(n.inputs) | n.implicit:
                if name:
                    out.setdefault(name, []).append(n)
        return out

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs if o}

    def is_constant(self, name: str) -> bool:
        return name in self.constants and name not in self.overridable

    def const(self, name: str) -> np.ndarray | None:
        return self.constants.get(name) if self.is_constant(name) else None

    def add_constant(self, base: str, value: np.ndarray) -> str:
        name = self.new_name(base)
        value = np.asarray(value)
        if value.flags.writeable:
            value.flags.writeable = False
        self.constants[name] = value
        return name

    def rename_uses(self, old: str, new: str) -> None:
        """Every reader of ``old`` reads ``new`` instead (graph outputs excepted)."""
        for n in self.nodes:
            if old in n.inputs:
                n.inputs = [new if i == old else i for i in n.inputs]

    def shape(self, name: str) -> list[int | None] | None:
        if name in self.constants:
            return list(self.constants[name].shape)
        return self.info.get(name, (None, None))[1]

    def static_shape(self, name: str) -> list[int] | None:
        s = self.shape(name)
        if s is None or any(d is None for d in s):
            return None
        return [int(d) for d in s]  # type: ignore[arg-type]


def value_info_map(model_graph: onnx.GraphProto) -> dict[str, tuple[Any, list[int | None] | None]]:
    """Static element types and shapes from a graph's inputs, outputs and value_info."""
    from ..dtypes import ONNX_TO_NP

    out: dict[str, tuple[Any, list[int | None] | None]] = {}
    for vi in list(model_graph.input) + list(model_graph.value_info) + list(model_graph.output):
        tp = vi.type
        if tp.WhichOneof("value") != "tensor_type":
            continue
        tt = tp.tensor_type
        dtype = ONNX_TO_NP.get(tt.elem_type)
        shape = None
        if tt.HasField("shape"):
            # a negative dim (exporters' -1 for "unknown") is free, not static
            shape = [int(d.dim_value) if d.HasField("dim_value") and d.dim_value >= 0 else None for d in tt.shape.dim]
        out[vi.name] = (dtype, shape)
    return out
