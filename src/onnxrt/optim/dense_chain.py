"""Fuse consecutive dense layers (Gemm, Gemm + Relu) on constant float32 weights into one onnxrt DenseChain node."""

from __future__ import annotations

import numpy as np

from .fuse_activation import FUSED_DOMAIN
from .graph import Graph, Node

#: weights per layer up to which a layer joins a chain: the compiled dense loop's limit on
#: one row (onnxrt.ops_cpu.op_gemm.DENSE_MAX_WORK); larger layers go to BLAS anyway
MAX_LAYER_WEIGHTS = 1 << 17
_F32 = np.dtype(np.float32)


def _dense_layer(g: Graph, node: Node) -> tuple[int, int] | None:
    """(trans_b, relu) when ``node`` is a dense layer a chain may take: Gemm (opset 7 and
    up) or FusedGemm with Relu, alpha = beta = 1, A not transposed, B a constant float32
    matrix of at most MAX_LAYER_WEIGHTS values, C absent or a constant float32 row of N."""
    if node.domain == "" and node.op_type == "Gemm" and node.opset >= 7:
        relu = 0
    elif node.domain == FUSED_DOMAIN and node.op_type == "FusedGemm" and node.attr("activation") == "Relu":
        relu = 1
        if int(node.attr("since_version", 13)) < 7:
            return None
    else:
        return None
    if node.attr("alpha", 1.0) != 1.0 or node.attr("beta", 1.0) != 1.0 or node.attr("transA", 0):
        return None
    if len(node.outputs) != 1 or len(node.inputs) < 2:
        return None
    b = g.const(node.inputs[1])
    if b is None or b.dtype != _F32 or b.ndim != 2 or b.size > MAX_LAYER_WEIGHTS:
        return None
    trans_b = int(bool(node.attr("transB", 0)))
    n = b.shape[0] if trans_b else b.shape[1]
    if len(node.inputs) > 2 and node.inputs[2]:
        c = g.const(node.inputs[2])
        if c is None or c.dtype != _F32 or c.size != n or not (c.ndim == 1 or (c.ndim == 2 and c.shape[0] == 1)):
            return None
    return trans_b, relu


def fuse_dense_chain(g: Graph) -> bool:
    """Replace each run of two or more dense layers, each layer's output read only by the
    next layer as its A, by one DenseChain node: inputs (X, B1, C1, B2, C2, ...), attributes
    ``trans_b`` and ``relus``. Its kernel runs every layer of a few float32 rows in one
    compiled call; other inputs run the layers one by one, as the nodes would."""
    consumers = g.consumers()
    layers = {id(n): d for n in g.nodes if (d := _dense_layer(g, n)) is not None}
    if len(layers) < 2:
        return False

    def successor(node: Node) -> Node | None:
        out = node.outputs[0]
        readers = consumers.get(out, [])
        if len(readers) != 1 or out in g.outputs or id(readers[0]) not in layers:
            return None
        nxt = readers[0]
        if nxt.inputs[0] != out or out in nxt.inputs[1:] or out in nxt.implicit:
            return None
        return nxt

    followed = {id(s) for n in g.nodes if id(n) in layers and (s := successor(n)) is not None}
    changed = False
    for start in [n for n in g.nodes if id(n) in layers and id(n) not in followed]:
        chain = [start]
        while (nxt := successor(chain[-1])) is not None:
            chain.append(nxt)
        if len(chain) < 2:
            continue
        a_type = g.info.get(start.inputs[0], (None, None))[0]
        if a_type is None or np.dtype(a_type) != _F32:
            continue
        inputs = [start.inputs[0]]
        for node in chain:
            inputs += [node.inputs[1], node.inputs[2] if len(node.inputs) > 2 else ""]
        fused = Node(
            "DenseChain", FUSED_DOMAIN, inputs, [chain[-1].outputs[0]], {}, g.new_name("DenseChain"),
            {**start.opsets, FUSED_DOMAIN: 1}, start.origin,
        )
        fused.set_attr("trans_b", [layers[id(n)][0] for n in chain])
        fused.set_attr("relus", [layers[id(n)][1] for n in chain])
        at = g.nodes.index(chain[-1])
        g.nodes[at] = fused
        for node in chain[:-1]:
            g.nodes.remove(node)
        changed = True
    return changed
