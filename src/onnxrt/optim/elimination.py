"""Identity and inference-mode Dropout removal, and dead-node elimination."""

from __future__ import annotations

import numpy as np

from ..dtypes import value_type_string
from ..typecheck import accepts_types
from .graph import Graph


def _dropout_is_identity(g: Graph, node, consumers, outputs) -> bool:
    mask = node.outputs[1] if len(node.outputs) > 1 else ""
    if mask and (mask in outputs or consumers.get(mask)):
        return False  # the mask is read (a named mask nothing reads is dropped with the node)
    # Dropout accepts floating-point data only: bypassed, a tensor it refuses (an integer one,
    # or one of a type the graph does not fix) would no longer raise InvalidTypeError
    x_type = g.info.get(node.inputs[0], (None, None))[0] if node.inputs else None
    if x_type is None:
        return False
    types = [value_type_string(np.empty(0, x_type))]
    for name in node.inputs[1:3]:
        c = g.const(name) if name else None
        types.append(value_type_string(c) if c is not None else None)
    if not accepts_types("Dropout", node.opset, types):
        return False
    if node.opset >= 12:
        if len(node.inputs) >= 3 and node.inputs[2]:
            mode = g.const(node.inputs[2])
            return mode is not None and not bool(mode)
        return True
    # before opset 12 inference mode is the default (is_test is ignored by inference runtimes)
    return True


def remove_identities(g: Graph) -> bool:
    """Bypass Identity and inference Dropout: readers of the output read the input.

    When the output is a graph output and the input a value produced inside the graph,
    the producer is renamed instead, so graph outputs keep their names.
    """
    changed = False
    outputs = set(g.outputs)
    consumers = g.consumers()
    producers = g.producers()
    kept = []
    for node in g.nodes:
        is_identity = node.domain == "" and (
            (node.op_type == "Identity" and node.inputs and node.inputs[0])
            or (node.op_type == "Dropout" and _dropout_is_identity(g, node, consumers, outputs))
        )
        if not is_identity:
            kept.append(node)
            continue
        src, dst = node.inputs[0], node.outputs[0]
        if dst not in outputs:
            g.rename_uses(dst, src)
            if any(dst in c.implicit for c in consumers.get(dst, [])):
                kept.append(node)  # a subgraph reads the output by name: keep the node for it
            changed = True
            continue
        prod = producers.get(src)
        if prod is not None and src not in outputs and src not in g.inputs and len(consumers.get(src, [])) == 1 and not any(
            src in c.implicit for c in consumers.get(src, [])
        ):
            prod.outputs = [dst if o == src else o for o in prod.outputs]
            changed = True
            continue
        kept.append(node)
    g.nodes = kept
    return changed


#: operators with effects beyond their outputs are never removed (none in ai.onnx today)
SIDE_EFFECTS: frozenset[str] = frozenset()


def remove_dead_nodes(g: Graph) -> bool:
    """Drop nodes no graph output depends on, and constants nothing reads."""
    needed = set(g.outputs)
    alive = []
    for node in reversed(g.nodes):
        if node.op_type in SIDE_EFFECTS or any(o in needed for o in node.outputs if o):
            alive.append(node)
            needed.update(i for i in node.inputs if i)
            needed.update(node.implicit)
    alive.reverse()
    changed = len(alive) != len(g.nodes)
    g.nodes = alive
    for name in list(g.constants):
        if name not in needed and name not in g.inputs:
            del g.constants[name]
            changed = True
    return changed
