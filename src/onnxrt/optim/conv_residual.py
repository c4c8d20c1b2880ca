"""Fuse a Conv into the Sum or Add (and its fused activation) that adds a residual to it: one FusedConv with the residual as a fourth input."""

from __future__ import annotations

from onnx import AttributeProto

from .fuse_activation import FUSED_DOMAIN
from .graph import Graph, Node

#: (domain, op) -> the opset from which its broadcasting is numpy's (Sum 6 and Add 7 on)
_ADDERS = {("", "Sum"): 6, ("", "Add"): 7, (FUSED_DOMAIN, "FusedSum"): 0, (FUSED_DOMAIN, "FusedAdd"): 0}


def fuse_conv_residual(g: Graph) -> bool:
    """Conv -> Sum/Add(conv, z) [-> activation fused into it] becomes FusedConv(x, w, b, z):
    the convolution's kernel adds the residual z after its bias and applies the activation
    while each piece of output is in cache (residual networks), saving a node, an output
    and a pass. The Conv's output must have the Sum as its only reader; the fused node
    takes the Sum's place in the order, where z exists."""
    consumers = g.consumers()
    producers = g.producers()
    changed = False
    for add in list(g.nodes):
        since = _ADDERS.get((add.domain, add.op_type))
        if since is None or len(add.inputs) != 2 or not all(add.inputs) or add.inputs[0] == add.inputs[1]:
            continue
        if add.domain == "" and add.opset < since:
            continue
        if add.domain == FUSED_DOMAIN and int(add.attr("since_version", 13)) < (6 if add.op_type == "FusedSum" else 7):
            continue
        # the later of two convolutions takes the residual: the other one then exists
        for pos in sorted((0, 1), key=lambda i: -g.nodes.index(producers[add.inputs[i]]) if add.inputs[i] in producers else 1):
            conv = producers.get(add.inputs[pos])
            if conv is None or not _plain_conv(g, conv, consumers, add):
                continue
            act = add.attr("activation", "") if add.domain == FUSED_DOMAIN else ""
            params = list(add.attr("activation_params", [])) if add.domain == FUSED_DOMAIN else []
            since_conv = conv.opset
            conv.op_type = "FusedConv"
            conv.domain = FUSED_DOMAIN
            conv.opsets = {**conv.opsets, FUSED_DOMAIN: 1}
            conv.set_attr("activation", act, AttributeProto.STRING)
            conv.set_attr("activation_params", [float(p) for p in params], AttributeProto.FLOATS)
            conv.set_attr("since_version", since_conv)
            conv.inputs = (conv.inputs + ["", ""])[:3] + [add.inputs[1 - pos]]
            conv.outputs = list(add.outputs)
            g.nodes.remove(conv)
            g.nodes[g.nodes.index(add)] = conv
            # the maps follow the rewrite: the Sum's outputs come from the conv, which reads z
            for name in conv.outputs:
                producers[name] = conv
            z = conv.inputs[3]
            consumers[z] = [conv if n is add else n for n in consumers.get(z, [])]
            changed = True
            break
    return changed


def _plain_conv(g: Graph, conv: Node, consumers: dict[str, list[Node]], add: Node) -> bool:
    out = conv.outputs[0] if len(conv.outputs) == 1 else None
    return (
        conv.domain == "" and conv.op_type == "Conv" and out is not None and out not in g.outputs
        and consumers.get(out) == [add] and len(conv.inputs) <= 3
    )
