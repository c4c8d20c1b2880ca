"""Fold per-channel Mul/Add that follow an inference BatchNormalization into its scale and bias."""

from __future__ import annotations

import numpy as np

from .conv_bn import _channel_vector, _single_reader, inference_batch_norm
from .graph import Graph


def fold_bn_affine(g: Graph) -> bool:
    """``Add(Mul(BatchNormalization(x), k), a)`` with per-channel constants k and a becomes one
    BatchNormalization with scale*k and bias*k + a (some exporters write the affine part of
    a batch norm as separate Mul and Add)."""
    changed = False
    consumers = g.consumers()
    removed: set[int] = set()
    # one pass: a BatchNormalization absorbs its chain of Mul/Add in place; the readers map
    # stays valid (a fold only renames the node's output to the absorbed node's)
    for bn in list(g.nodes):
        if id(bn) in removed or not inference_batch_norm(bn):
            continue
        shape = g.shape(bn.inputs[0])
        if shape is None or len(shape) < 2:
            continue
        while True:
            params = [g.const(n) for n in bn.inputs[1:5]]
            if any(p is None for p in params):
                break
            nxt = _single_reader(g, consumers, bn.outputs[0])
            if nxt is None or nxt.domain != "" or nxt.op_type not in ("Mul", "Add") or nxt.opset < 7:
                break
            other = nxt.inputs[1] if nxt.inputs[0] == bn.outputs[0] else nxt.inputs[0]
            c = g.const(other)
            scale, bias = params[0], params[1]
            if c is None or c.dtype != scale.dtype:
                break
            # the folded Mul/Add reads the BatchNormalization's output, of X's type: one type
            # with c. Before opset 15 X and scale share T; from 15 on X's type must be known
            x_type = g.info.get(bn.inputs[0], (None, None))[0]
            if (x_type is None and bn.opset >= 15) or (x_type is not None and np.dtype(x_type) != c.dtype):
                break
            vec = _channel_vector(c, scale.shape[0], len(shape))
            if vec is None:
                break
            s64, b64 = scale.astype(np.float64), bias.astype(np.float64)
            if nxt.op_type == "Mul":
                s64, b64 = s64 * vec, b64 * vec
            else:
                b64 = b64 + vec
            bn.inputs = list(bn.inputs)
            bn.inputs[1] = g.add_constant(bn.inputs[1], s64.astype(scale.dtype))
            bn.inputs[2] = g.add_constant(bn.inputs[2], b64.astype(bias.dtype))
            bn.outputs = [nxt.outputs[0]] + list(bn.outputs[1:])
            g.nodes.remove(nxt)
            removed.add(id(nxt))
            changed = True
    return changed
