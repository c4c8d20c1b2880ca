"""Fold a channel shuffle (Reshape to 5-D, Transpose of the two channel axes, Reshape back) into the convolution before it."""

from __future__ import annotations

from onnx import AttributeProto

from .fuse_activation import FUSED_DOMAIN
from .graph import Graph, Node

_SWAP = [0, 2, 1, 3, 4]


def fold_channel_shuffles(g: Graph) -> bool:
    """Conv -> Reshape(N, G, C/G, H, W) -> Transpose(0, 2, 1, 3, 4) -> Reshape(N, C, H, W)
    (ShuffleNet's channel shuffle) becomes one FusedConv with attribute ``shuffle`` = the
    first target: its kernel writes output channel g C/G + j at j G + g (a grouped 1x1
    convolution with G groups writes each group's rows at that stride, saving the copy)
    and otherwise shuffles its result as the three nodes would. Both targets must be
    constants with positive dimensions; the convolution must have no residual input and
    every intermediate must have its next node as only reader."""
    consumers = g.consumers()
    producers = g.producers()
    changed = False
    for tr in list(g.nodes):
        if tr.domain != "" or tr.op_type != "Transpose" or list(tr.attr("perm", [])) != _SWAP:
            continue
        first = producers.get(tr.inputs[0])
        last = _only_reader(g, consumers, tr.outputs[0])
        if first is None or last is None or not _reshape_to(g, first, 5) or not _reshape_to(g, last, 4):
            continue
        t1 = [int(d) for d in g.const(first.inputs[1])]  # type: ignore[union-attr]
        t2 = [int(d) for d in g.const(last.inputs[1])]  # type: ignore[union-attr]
        if t2 != [t1[0], t1[1] * t1[2], t1[3], t1[4]] or _only_reader(g, consumers, first.outputs[0]) is not tr:
            continue
        conv = producers.get(first.inputs[0])
        if conv is None or _only_reader(g, consumers, first.inputs[0]) is not first or len(conv.outputs) != 1:
            continue
        plain = conv.domain == "" and conv.op_type == "Conv"
        fused = conv.domain == FUSED_DOMAIN and conv.op_type == "FusedConv"
        if not (plain or fused) or (len(conv.inputs) > 3 and conv.inputs[3]) or "shuffle" in conv.attrs:
            continue
        if plain:
            since = conv.opset
            conv.op_type, conv.domain = "FusedConv", FUSED_DOMAIN
            conv.opsets = {**conv.opsets, FUSED_DOMAIN: 1}
            conv.set_attr("activation", "", AttributeProto.STRING)
            conv.set_attr("since_version", since)
        conv.set_attr("shuffle", t1, AttributeProto.INTS)
        conv.outputs = list(last.outputs)
        for node in (first, tr, last):
            g.nodes.remove(node)
        consumers = g.consumers()
        producers = g.producers()
        changed = True
    return changed


def _only_reader(g: Graph, consumers: dict[str, list[Node]], name: str) -> Node | None:
    readers = consumers.get(name, [])
    return readers[0] if len(readers) == 1 and name not in g.outputs else None


def _reshape_to(g: Graph, node: Node, rank: int) -> bool:
    # a Reshape (any version) to a constant target of this rank with positive dimensions
    if node.domain != "" or node.op_type != "Reshape" or len(node.inputs) != 2 or len(node.outputs) != 1:
        return False
    target = g.const(node.inputs[1])
    return target is not None and target.ndim == 1 and target.size == rank and bool((target > 0).all())
