"""Fold convolutions read only by a Concat along channels into one ConvConcat that writes each into its block of the output."""

from __future__ import annotations

from onnx import AttributeProto

from .fuse_activation import FUSED_DOMAIN
from .graph import Graph, Node


def fuse_concat_convs(g: Graph) -> bool:
    """Concat(axis=1) whose inputs include Conv or FusedConv outputs that nothing else reads
    becomes ConvConcat (onnxrt.ops_cpu.op_conv_concat): the convolutions run inside it and,
    with one image, write their products straight into their blocks of the concatenation,
    saving its copy (squeezenet's fire modules, inception's branches). The node takes the Concat's place in
    the order (every convolution's inputs exist there: they existed before the convolution)."""
    consumers = g.consumers()
    producers = g.producers()
    changed = False
    for cat in list(g.nodes):
        if cat.domain != "" or cat.op_type != "Concat" or len(cat.outputs) != 1 or not cat.inputs:
            continue
        if int(cat.attr("axis", 1)) != 1 or len(set(cat.inputs)) != len(cat.inputs) or not all(cat.inputs):
            continue
        segments: list[Node | None] = []
        for name in cat.inputs:
            p = producers.get(name)
            plain = (
                p is not None and len(p.outputs) == 1 and name not in g.outputs and consumers.get(name) == [cat]
                and ((p.domain == "" and p.op_type == "Conv") or (p.domain == FUSED_DOMAIN and p.op_type == "FusedConv"
                                                                  and not p.attr("chain")))
            )
            segments.append(p if plain else None)
        # every input a convolution: with a plain tensor among them (densenet's growing
        # concatenations: the previous one and one new convolution), writing in place
        # measured 5% slower than convolving and then concatenating
        if not all(segments):
            continue
        inputs: list[str] = []
        blobs: list[bytes] = []
        versions: list[int] = []
        for name, conv in zip(cat.inputs, segments):
            if conv is None:
                inputs += [name, "", "", ""]
                blobs.append(b"")
                versions.append(0)
            else:
                inputs += (list(conv.inputs) + ["", "", ""])[:4]
                blobs.append(conv.to_graph_node().proto.SerializeToString())
                versions.append(conv.opset)
        node = Node("ConvConcat", FUSED_DOMAIN, inputs, list(cat.outputs), {}, cat.name, {**cat.opsets, FUSED_DOMAIN: 1},
                    cat.origin)
        node.set_attr("segments", blobs, AttributeProto.STRINGS)
        node.set_attr("since_versions", versions, AttributeProto.INTS)
        for conv in segments:
            if conv is not None:
                g.nodes.remove(conv)
        g.nodes[g.nodes.index(cat)] = node
        consumers = g.consumers()
        producers = g.producers()
        changed = True
    return changed
