"""Models cut out of a model, each computing one intermediate value from the model's inputs."""

from __future__ import annotations

import difflib

import onnx
from onnx import helper

from ..errors import GraphError
from ..model import node_free_names
from .shapes import ValueInfo, run_order


def node_outputs(model: onnx.ModelProto) -> list[str]:
    """Every named node output of the main graph, in run order."""
    return [o for node in run_order(model.graph) for o in node.output if o]


def _value_info(name: str, info: ValueInfo | None) -> onnx.ValueInfoProto:
    if info is not None and info.known and info.type.startswith("tensor("):
        return helper.make_tensor_value_info(name, info.elem_type, None if info.shape is None else list(info.shape))
    vi = onnx.ValueInfoProto()
    vi.name = name
    return vi


def cut_model(model: onnx.ModelProto, output: str, infos: dict[str, ValueInfo]) -> onnx.ModelProto:
    """A model whose only output is ``output``: the nodes it depends on (subgraph reads
    included), in their stored order, the initializers they read, and every input of the
    original model (the same feeds run every cut model). Functions, opsets, IR version and
    metadata are kept."""
    graph = model.graph
    producer = {o: k for k, node in enumerate(graph.node) for o in node.output if o}
    if output not in producer:
        raise GraphError(f"{output!r} is not a node output of graph {graph.name!r}.")
    needed: set[int] = set()
    names: set[str] = set()
    stack = [output]
    while stack:
        name = stack.pop()
        if name in names:
            continue
        names.add(name)
        k = producer.get(name)
        if k is None or k in needed:
            continue
        needed.add(k)
        node = graph.node[k]
        stack.extend(n for n in node.input if n)
        stack.extend(node_free_names(node))
    input_names = {i.name for i in graph.input}
    new = onnx.ModelProto()
    new.CopyFrom(model)
    g = new.graph
    del g.node[:]
    g.node.extend(node for k, node in enumerate(graph.node) if k in needed)
    del g.initializer[:]
    g.initializer.extend(t for t in graph.initializer if t.name in names or t.name in input_names)
    del g.sparse_initializer[:]
    g.sparse_initializer.extend(t for t in graph.sparse_initializer if t.values.name in names or t.values.name in input_names)
    del g.output[:]
    g.output.append(_value_info(output, infos.get(output)))
    return new


def select_outputs(model: onnx.ModelProto, outputs: str | list[str] | None) -> list[str]:
    """The requested node outputs in run order (all when None); unknown names are refused."""
    available = node_outputs(model)
    if outputs is None:
        return available
    wanted = [outputs] if isinstance(outputs, str) else list(outputs)
    known = set(available)
    for name in wanted:
        if name not in known:
            close = difflib.get_close_matches(str(name), available, n=1)
            hint = f" Did you mean {close[0]!r}?" if close else ""
            raise GraphError(f"{name!r} is not a node output of the model, so no model computes it.{hint}")
    chosen = set(wanted)
    return [n for n in available if n in chosen]
