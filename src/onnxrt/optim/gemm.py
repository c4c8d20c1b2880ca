"""MatMul + Add into Gemm (a 2-D product plus a bias), a bias-less Gemm + Add likewise, and a stack of rows times a matrix plus a column bias into onnxrt's MatMulAdd."""

from __future__ import annotations

from typing import Any

from .graph import Graph, Node


def _product_dims(g: Graph, node: Node) -> tuple[int | None, int | None] | None:
    """[M, N] of a 2-D MatMul or a Gemm (None for unknown sizes); None when not 2-D."""
    sa, sb = g.shape(node.inputs[0]), g.shape(node.inputs[1])
    if sa is None or sb is None or len(sa) != 2 or len(sb) != 2:
        return None
    if node.op_type == "Gemm":
        m = sa[1] if node.attr("transA", 0) else sa[0]
        n = sb[0] if node.attr("transB", 0) else sb[1]
        return m, n
    return sa[0], sb[1]


def _bias_add(g: Graph, consumers: dict[str, list[Node]], mm: Node) -> tuple[Node, str, Any, Any] | None:
    """(the Add, its other input's name, that input's constant value or None, A's static
    element type or None) when the
    product's only reader is an Add (opset 7 and up: broadcasting) and the product is not a
    graph output; else None."""
    readers = consumers.get(mm.outputs[0], [])
    if len(readers) != 1 or mm.outputs[0] in g.outputs:
        return None
    add = readers[0]
    if add.op_type != "Add" or add.domain != "" or add.opset < 7 or mm.outputs[0] in add.implicit:
        return None
    other = add.inputs[1] if add.inputs[0] == mm.outputs[0] else add.inputs[0]
    return add, other, g.const(other), g.info.get(mm.inputs[0], (None, None))[0]


def fuse_matmul_add(g: Graph) -> bool:
    """``Add(MatMul(A, B), C)`` with A and B of rank 2 (statically known) and C a constant
    that broadcasts to the product's [M, N] without growing it becomes ``Gemm(A, B, C)``."""
    changed = False
    consumers = g.consumers()
    remove = []
    for mm in g.nodes:
        if mm.domain != "" or not (mm.op_type == "MatMul" or (mm.op_type == "Gemm" and (len(mm.inputs) < 3 or not mm.inputs[2]))):
            continue
        dims = _product_dims(g, mm)
        if dims is None:
            continue
        if (found := _bias_add(g, consumers, mm)) is None:
            continue
        add, other, c, a_dtype = found
        if c is None or c.ndim > 2 or (a_dtype is not None and c.dtype != a_dtype):
            continue
        full = (1,) * (2 - c.ndim) + c.shape
        if any(d != 1 and d != want for d, want in zip(full, dims)):
            continue  # C would grow the product (or its size is unknown): Add and Gemm differ
        if mm.op_type == "MatMul":
            mm.op_type = "Gemm"
            mm.attrs = {}
        else:
            mm.attrs.pop("beta", None)
        mm.inputs = [mm.inputs[0], mm.inputs[1], other]
        mm.outputs = [add.outputs[0]]
        if mm.opset < 11:
            mm.opsets = {**mm.opsets, "": 11}
        remove.append(add)
        changed = True
    for n in remove:
        g.nodes.remove(n)
    return changed


def fuse_matmul_bias(g: Graph) -> bool:
    """``Add(MatMul(A, B), C)`` with B a constant matrix, C a constant vector of B's column
    count and A's element type, and the product read by the Add alone, becomes onnxrt's
    ``MatMulAdd(A, B, C)``: a linear layer on (B, S, K) or (N, H, W, K) rows, which
    :func:`fuse_matmul_add` leaves (Gemm takes rank 2 only). Same values: the product,
    then one rounding of the addition."""
    from ..ops_cpu.op_fused import FUSED_DOMAIN

    changed = False
    consumers = g.consumers()
    remove = []
    for mm in g.nodes:
        if mm.domain != "" or mm.op_type != "MatMul" or len(mm.inputs) != 2:
            continue
        b = g.const(mm.inputs[1])
        if b is None or b.ndim != 2 or b.dtype.kind != "f":
            continue
        if (found := _bias_add(g, consumers, mm)) is None:
            continue
        add, other, c, a_dtype = found
        if c is None or c.ndim != 1 or c.shape[0] != b.shape[1] or c.dtype != b.dtype or a_dtype is None or c.dtype != a_dtype:
            continue
        since = mm.opset
        mm.op_type, mm.domain = "MatMulAdd", FUSED_DOMAIN
        mm.opsets = {**mm.opsets, FUSED_DOMAIN: 1}
        mm.attrs = {}
        mm.set_attr("since_version", since)
        mm.inputs = [mm.inputs[0], mm.inputs[1], other]
        mm.outputs = [add.outputs[0]]
        remove.append(add)
        changed = True
    for n in remove:
        g.nodes.remove(n)
    return changed
