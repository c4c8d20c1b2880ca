"""Graph optimisation passes (one module each) and the pipeline that runs them by level.

Levels follow onnxruntime's names: ``ORT_DISABLE_ALL`` runs nothing; ``ORT_ENABLE_BASIC``
folds constants and static shapes and removes Identity, inference Dropout and dead nodes;
``ORT_ENABLE_EXTENDED`` and ``ORT_ENABLE_ALL`` add Conv+BatchNormalization folding,
per-channel Mul/Add folding into a preceding BatchNormalization,
MatMul+Add into Gemm, Transpose folding into Gemm, activation fusion, chains of small
dense layers into one node, residual additions into the convolution before them and
convolutions read only by a Concat along channels into one node writing each into its block,
channel shuffles into the convolution before them, connected element-wise float32 nodes into
one program (FusedElementwise). Passes never
change results beyond float rounding (tests/optim checks every conformance model).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..functions import GraphNode
from .bn_affine import fold_bn_affine
from .channel_shuffle import fold_channel_shuffles
from .concat_conv import fuse_concat_convs
from .constant_folding import fold_constants, fold_shapes
from .conv_bn import fold_conv_bn
from .conv_residual import fuse_conv_residual
from .dense_chain import fuse_dense_chain
from .elimination import remove_dead_nodes, remove_identities
from .fuse_activation import fuse_activations
from .fuse_elementwise import fuse_chain_epilogue, fuse_elementwise
from .gemm import fuse_matmul_add, fuse_matmul_bias
from .graph import Graph, Node
from .transpose_fold import fold_transpose

BASIC = 1
EXTENDED = 2

#: (minimum level, name, pass); each pass returns whether it changed the graph
PASSES: list[tuple[int, str, Callable[..., bool]]] = [
    (BASIC, "remove_identities", remove_identities),
    (BASIC, "fold_shapes", fold_shapes),
    (BASIC, "fold_constants", fold_constants),
    (BASIC, "remove_dead_nodes", remove_dead_nodes),
    (EXTENDED, "fold_conv_bn", fold_conv_bn),
    (EXTENDED, "fold_bn_affine", fold_bn_affine),
    (EXTENDED, "fold_transpose", fold_transpose),
    (EXTENDED, "fuse_matmul_add", fuse_matmul_add),
    (EXTENDED, "fuse_matmul_bias", fuse_matmul_bias),
    (EXTENDED, "fuse_activations", fuse_activations),
    (EXTENDED, "fuse_dense_chain", fuse_dense_chain),
    (EXTENDED, "fuse_conv_residual", fuse_conv_residual),
    (EXTENDED, "fuse_concat_convs", fuse_concat_convs),
    (EXTENDED, "fold_channel_shuffles", fold_channel_shuffles),
    (EXTENDED, "fuse_elementwise", fuse_elementwise),
    (EXTENDED, "fuse_chain_epilogue", fuse_chain_epilogue),
]


def optimize(
    nodes: list[GraphNode],
    constants: dict[str, np.ndarray],
    inputs: list[str],
    outputs: list[str],
    level: int,
    info: dict[str, Any] | None = None,
    overridable: set[str] | None = None,
    options: Any = None,
    max_rounds: int = 4,
) -> tuple[list[GraphNode], dict[str, np.ndarray], list[str]]:
    """Run the passes of ``level`` until nothing changes; returns the new nodes, the
    constants (folded values included, unused ones dropped) and the names of the passes
    that changed something."""
    if level <= 0:
        return nodes, constants, []
    g = Graph([Node.from_graph_node(n) for n in nodes], dict(constants), list(inputs), list(outputs), info or {}, overridable or set())
    applied: list[str] = []
    for _ in range(max_rounds):
        changed = False
        for min_level, name, fn in PASSES:
            if level < min_level:
                continue
            if name == "fold_constants":
                did = fold_constants(g, options)
            else:
                did = fn(g)
            if did:
                changed = True
                if name not in applied:
                    applied.append(name)
        if not changed:
            break
    return [n.to_graph_node() for n in g.nodes], g.constants, applied


__all__ = ["BASIC", "EXTENDED", "PASSES", "optimize"]
