"""Fuse an activation that follows a Conv, Gemm, MatMul, BatchNormalization, Add or Sum into one onnxrt fused node."""

from __future__ import annotations

from typing import Any

import ml_dtypes
import numpy as np
from onnx import AttributeProto

from .conv_bn import inference_batch_norm
from .graph import Graph, Node

#: the domain of onnxrt's own fused operators (see onnxrt.ops_cpu.op_fused)
FUSED_DOMAIN = "onnxrt"

#: operators whose output is a fresh array the activation can overwrite in place
FUSABLE = {
    "Conv": "FusedConv",
    "Gemm": "FusedGemm",
    "MatMul": "FusedMatMul",
    "BatchNormalization": "FusedBatchNormalization",
    "Add": "FusedAdd",
    "Sum": "FusedSum",
}


def _limits(dtype: Any) -> tuple[float, float] | None:
    """(lowest, max) of a float type of at most 32 bits, None otherwise."""
    if dtype is None:
        return None
    dt = np.dtype(dtype)
    # the fused node keeps its parameters as float32: DBL_MAX or INT32_MAX would not survive
    if dt.itemsize > 4 or dt.kind not in "fV":
        return None
    try:
        info = ml_dtypes.finfo(dt)
    except (TypeError, ValueError):
        return None
    return float(info.min), float(info.max)


def activation_of(g: Graph, node: Node) -> tuple[str, list[float]] | None:
    """(name, parameters) when ``node`` is an activation onnxrt's fused kernels apply in place."""
    if node.domain != "":
        return None
    op = node.op_type
    if op in ("Relu", "Sigmoid", "Tanh"):
        return op, []
    if op == "LeakyRelu":
        return op, [float(node.attr("alpha", 0.01))]
    if op == "HardSigmoid":
        return op, [float(node.attr("alpha", 0.2)), float(node.attr("beta", 0.5))]
    if op == "Clip":
        if node.opset < 11:
            return op, [float(node.attr("min", -3.4028234663852886e38)), float(node.attr("max", 3.4028234663852886e38))]
        lo = g.const(node.inputs[1]) if len(node.inputs) > 1 and node.inputs[1] else None
        hi = g.const(node.inputs[2]) if len(node.inputs) > 2 and node.inputs[2] else None
        if (len(node.inputs) > 1 and node.inputs[1] and lo is None) or (len(node.inputs) > 2 and node.inputs[2] and hi is None):
            return None
        if lo is None or hi is None:
            # an omitted bound is numeric_limits::lowest()/max() of the type (infinities clamp
            # to the largest finite value): fuse only when that type is known
            limits = _limits(g.info.get(node.inputs[0], (None, None))[0])
            if limits is None:
                return None
            lo = limits[0] if lo is None else lo
            hi = limits[1] if hi is None else hi
        return op, [float(lo), float(hi)]
    return None


def fuse_activations(g: Graph) -> bool:
    changed = False
    consumers = g.consumers()
    remove = []
    for node in g.nodes:
        fused = FUSABLE.get(node.op_type)
        if fused is None or node.domain != "" or len(node.outputs) != 1:
            continue
        if node.op_type == "MatMul" and any(g.shape(i) is None for i in node.inputs[:2]):
            continue
        if node.op_type == "BatchNormalization" and not inference_batch_norm(node):
            continue
        if node.op_type in ("Add", "Sum") and any((c := g.const(i)) is not None and c.size == 1 for i in node.inputs):
            continue  # (a residual joins two tensors; x + 3 before a Clip is HardSwish's: fuse_elementwise's)
        out = node.outputs[0]
        readers = consumers.get(out, [])
        if len(readers) != 1 or out in g.outputs or out in readers[0].implicit:
            continue
        act = activation_of(g, readers[0])
        if act is None or readers[0].inputs[0] != out:
            continue
        name, params = act
        since = node.opset
        node.op_type = fused
        node.domain = FUSED_DOMAIN
        node.opsets = {**node.opsets, FUSED_DOMAIN: 1}
        node.set_attr("activation", name)
        node.set_attr("activation_params", params, AttributeProto.FLOATS)
        node.set_attr("since_version", since)
        node.outputs = [readers[0].outputs[0]]
        remove.append(readers[0])
        changed = True
    for n in remove:
        g.nodes.remove(n)
    return changed
