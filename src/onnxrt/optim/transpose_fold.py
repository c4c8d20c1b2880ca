"""Fold a 2-D Transpose feeding a Gemm (or a 2-D MatMul) into the Gemm's transA/transB."""

from __future__ import annotations

from .graph import Graph


def fold_transpose(g: Graph) -> bool:
    changed = False
    consumers = g.consumers()
    producers = g.producers()
    dead = []
    for node in g.nodes:
        if node.domain != "" or node.op_type not in ("Gemm", "MatMul"):
            continue
        if node.op_type == "MatMul":
            shapes = [g.shape(i) for i in node.inputs[:2]]
            if any(s is None or len(s) != 2 for s in shapes):
                continue
        for k in (0, 1):
            name = node.inputs[k]
            tr = producers.get(name)
            if tr is None or tr.op_type != "Transpose" or tr.domain != "" or tr in dead:
                continue
            perm = tr.attr("perm", None)
            src_shape = g.shape(tr.inputs[0])
            if perm not in ([1, 0], None) or src_shape is None or len(src_shape) != 2:
                continue
            if len(consumers.get(name, [])) != 1 or name in g.outputs:
                continue
            if node.op_type == "MatMul":
                node.op_type = "Gemm"
                node.attrs = {}
                if node.opset < 11:
                    node.opsets = {**node.opsets, "": 11}
            att = "transA" if k == 0 else "transB"
            node.set_attr(att, 1 - int(node.attr(att, 0) or 0))
            node.inputs = list(node.inputs)
            node.inputs[k] = tr.inputs[0]
            dead.append(tr)
            changed = True
    for n in dead:
        g.nodes.remove(n)
    return changed
