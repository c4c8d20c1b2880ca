"""Constant folding: nodes whose inputs are all constants run once at load and become constants."""

from __future__ import annotations

import numpy as np

from .. import registry
from ..errors import OnnxRuntimeError
from ..typecheck import check_input_types
from .graph import Graph, Node

#: operators whose result must not be computed once for all runs
NONDETERMINISTIC = frozenset(
    {"RandomNormal", "RandomUniform", "RandomNormalLike", "RandomUniformLike", "Bernoulli", "Multinomial", "Dropout"}
)


def _kernel_key(node: Node) -> tuple:
    """What a kernel instance depends on: the operator, its opset, its attributes and which
    inputs and outputs are present (not the value names)."""
    return (
        node.op_type, node.domain, node.opset,
        tuple(i != "" for i in node.inputs), tuple(o != "" for o in node.outputs),
        tuple(sorted((k, a.SerializeToString()) for k, a in node.attrs.items())),
    )


def evaluate(node: Node, inputs: list[object], options: object = None, kernels: dict | None = None) -> tuple[object, ...] | None:
    """Run one node with onnxrt's kernel; None when it cannot run (the engine reports it later).

    ``kernels`` caches kernel instances by :func:`_kernel_key` across calls: models exported
    from some frameworks hold hundreds of identical constant nodes (light_shufflenet: 243
    ConstantOfShape), and building a kernel costs more than running it."""
    found = registry.lookup(node.op_type, node.domain, node.opset)
    if found is None:
        return None
    cls, since = found
    try:
        key = _kernel_key(node) if kernels is not None else None
        op = kernels.get(key) if kernels is not None else None
        if op is None:
            op = cls(node.to_graph_node().proto, None, since_version=since, opsets=node.opsets, session_options=options)
            if kernels is not None:
                kernels[key] = op
        # a node breaking its type rules is not folded: the engine raises InvalidTypeError at
        # the first run, as for the graph unoptimised
        check_input_types(op, inputs)
        with np.errstate(all="ignore"):
            return op._run(*inputs)
    except (OnnxRuntimeError, ValueError, TypeError, IndexError, ArithmeticError, MemoryError):
        return None


def fold_constants(g: Graph, options: object = None) -> bool:
    """Replace foldable nodes by constants; returns whether anything changed."""
    changed = False
    kept: list[Node] = []
    kernels: dict = {}
    for node in g.nodes:
        if (
            node.op_type in NONDETERMINISTIC
            or node.has_subgraph
            or node.implicit
            or not all(i == "" or g.is_constant(i) for i in node.inputs)
            or node.domain not in ("", "ai.onnx.ml")
        ):
            kept.append(node)
            continue
        args = [g.constants[i] if i else None for i in node.inputs]
        while args and args[-1] is None and node.inputs and node.inputs[len(args) - 1] == "":
            args.pop()
        res = evaluate(node, args, options, kernels)
        if res is None or not all(isinstance(r, np.ndarray | np.generic) for r in res[: len(node.outputs)]):
            kept.append(node)
            continue
        for name, value in zip(node.outputs, res):
            if name:
                value = np.asarray(value)
                if value.flags.writeable:
                    value.flags.writeable = False
                g.constants[name] = value
        changed = True
    g.nodes = kept
    return changed


def fold_shapes(g: Graph) -> bool:
    """Shape and Size of values whose shape is static become constants (shape-arithmetic folding);
    constant folding then evaluates the Gather/Concat/Reshape chains built on them."""
    changed = False
    kept: list[Node] = []
    for node in g.nodes:
        if node.domain == "" and node.op_type in ("Shape", "Size") and node.inputs and not g.is_constant(node.inputs[0]):
            shape = g.static_shape(node.inputs[0])
            if shape is not None:
                if node.op_type == "Size":
                    value = np.array(int(np.prod(shape, dtype=np.int64)), dtype=np.int64)
                else:
                    start = node.attr("start", 0) or 0
                    end = node.attr("end", None)
                    value = np.array(shape[start:end], dtype=np.int64)
                value.flags.writeable = False
                g.constants[node.outputs[0]] = value
                changed = True
                continue
        kept.append(node)
    g.nodes = kept
    return changed
