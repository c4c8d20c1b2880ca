"""Fast paths: the declared faster implementations of operators, next to their reference kernels (see onnxrt.dispatch).

One module per family. Each declares its paths with :func:`onnxrt.dispatch.fast_path`;
:data:`MODULES` tells the dispatcher which module to import for an operator, so that a
session imports only the families its model uses (tests/engine/test_dispatch.py checks the
table against the declarations).
"""

from __future__ import annotations

#: (domain, op_type) -> the module of onnxrt.fastpaths declaring its paths
MODULES: dict[tuple[str, str], str] = {
    ("", "Attention"): "attention",
    ("", "Gemm"): "gemm",
    ("onnxrt", "FusedGemm"): "gemm",
    ("onnxrt", "DenseChain"): "gemm",
    ("", "NonMaxSuppression"): "nms",
    ("", "Cast"): "cast",
    ("", "CastLike"): "cast",
    ("", "BatchNormalization"): "norm",
    ("onnxrt", "FusedBatchNormalization"): "norm",
    ("", "LayerNormalization"): "norm",
    ("", "Transpose"): "transpose",
    ("", "Softmax"): "softmax",
    ("", "LogSoftmax"): "softmax",
}
