"""Fold a BatchNormalization (or a per-channel Mul/Add) that follows a Conv into the Conv's weights."""

from __future__ import annotations

import numpy as np

from ..dtypes import value_type_string
from ..typecheck import accepts_types
from .graph import Graph, Node


def _single_reader(g: Graph, consumers: dict, name: str) -> Node | None:
    readers = consumers.get(name, [])
    if len(readers) != 1 or name in g.outputs or name in readers[0].implicit:
        return None
    return readers[0]


def _channel_vector(value: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """A per-output-channel vector when ``value`` broadcasts over [N, C, ...] along C only."""
    v = np.asarray(value)
    if v.ndim > rank:
        return None
    full = (1,) * (rank - v.ndim) + v.shape
    if any(d != 1 for i, d in enumerate(full) if i != 1):
        return None
    if full[1] not in (1, channels):
        return None
    return np.broadcast_to(v.reshape(-1) if v.size > 1 else v.reshape(1), (channels,)).astype(np.float64)


def inference_batch_norm(node: Node) -> bool:
    """Whether a BatchNormalization node normalises with its constant running statistics:
    no training outputs used, no training_mode, spatial, and is_test set before opset 7
    (BatchNormalization-1/6 compute batch statistics otherwise)."""
    if node.op_type != "BatchNormalization" or node.domain != "" or len(node.inputs) < 5:
        return False
    if (len(node.outputs) > 1 and any(node.outputs[1:])) or node.attr("training_mode", 0):
        return False
    if node.opset < 7 and not node.attr("is_test", 0):
        return False
    return node.attr("spatial", 1) == 1


def _conv_params(g: Graph, conv: Node) -> tuple[np.ndarray, np.ndarray] | None:
    if conv.op_type != "Conv" or conv.domain != "" or len(conv.inputs) < 2:
        return None
    w = g.const(conv.inputs[1])
    if w is None or w.dtype.kind != "f":
        return None
    b = g.const(conv.inputs[2]) if len(conv.inputs) > 2 and conv.inputs[2] else np.zeros(w.shape[0], dtype=w.dtype)
    if b is None or b.dtype != w.dtype:  # (a Conv of mixed types raises; folded it would not)
        return None
    return w, b


def _set_conv_params(g: Graph, conv: Node, w: np.ndarray, b: np.ndarray, dtype: np.dtype) -> None:
    wname = g.add_constant(conv.inputs[1], w.astype(dtype))
    bname = g.add_constant(conv.inputs[2] if len(conv.inputs) > 2 and conv.inputs[2] else conv.name + "_bias", b.astype(dtype))
    conv.inputs = [conv.inputs[0], wname, bname]


def _folded(g: Graph, conv: Node, nxt: Node, w: np.ndarray, b: np.ndarray, dtype: np.dtype) -> tuple[np.ndarray, np.ndarray] | None:
    """The Conv's weight and bias (float64) with ``nxt`` folded in, or None when it cannot be
    (``dtype``: the type of the Conv's weights and output)."""
    cout, rank = w.shape[0], w.ndim
    if nxt.op_type == "BatchNormalization":
        if not inference_batch_norm(nxt):
            return None
        vals = [g.const(n) for n in nxt.inputs[1:5]]
        if any(v is None for v in vals):
            return None
        # the folded node's type rules must hold (its X is the Conv's output, of W's type)
        if not accepts_types("BatchNormalization", nxt.opset, [value_type_string(np.empty(0, dtype))] + [value_type_string(v) for v in vals]):
            return None
        scale, bias, mean, var = (v.astype(np.float64).reshape(-1) for v in vals)  # type: ignore[union-attr]
        eps = float(nxt.attr("epsilon", 1e-5))
        k = scale / np.sqrt(var + eps)
        return np.asarray(w, np.float64) * k.reshape((-1,) + (1,) * (rank - 1)), (np.asarray(b, np.float64) - mean) * k + bias
    if nxt.op_type in ("Mul", "Add") and nxt.opset >= 7:
        other = nxt.inputs[1] if nxt.inputs[0] == conv.outputs[0] else nxt.inputs[0]
        c = g.const(other)
        if c is None or c.dtype != dtype:  # Mul/Add of the Conv's output (W's type) by c: one type
            return None
        vec = _channel_vector(c, cout, rank)
        if vec is None:
            return None
        if nxt.op_type == "Mul":
            return np.asarray(w, np.float64) * vec.reshape((-1,) + (1,) * (rank - 1)), np.asarray(b, np.float64) * vec
        return np.asarray(w, np.float64), np.asarray(b, np.float64) + vec
    return None


def fold_conv_bn(g: Graph) -> bool:
    """Conv -> BatchNormalization (inference) becomes one Conv; so do Conv -> Mul/Add by
    per-channel constants (the decomposed batch norm some exporters write).

    One pass over the nodes: a Conv absorbs its chain of foldable readers (Conv -> BN ->
    Mul -> Add) in float64, rounded once. The readers map stays valid: a fold only renames the Conv's
    output to the folded node's, whose readers do not change.
    """
    changed = False
    consumers = g.consumers()
    removed: set[int] = set()
    for conv in list(g.nodes):
        if id(conv) in removed:
            continue
        params = _conv_params(g, conv)
        if params is None:
            continue
        w, b = params
        dtype, folded = w.dtype, False
        while True:
            nxt = _single_reader(g, consumers, conv.outputs[0])
            if nxt is None or nxt.domain != "":
                break
            # the chain accumulates in float64 and is rounded to the weights' type once
            new = _folded(g, conv, nxt, w, b, dtype)
            if new is None:
                break
            w, b = new
            conv.outputs = [nxt.outputs[0]]
            g.nodes.remove(nxt)
            removed.add(id(nxt))
            changed = folded = True
        if folded:
            _set_conv_params(g, conv, w, b, dtype)
    return changed
