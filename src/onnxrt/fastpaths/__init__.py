"""Fast paths: the declared faster implementations of operators, next to their reference kernels (see onnxrt.dispatch).

One module per family. Each declares its paths with :func:`onnxrt.dispatch.fast_path`;
:data:`MODULES` tells the dispatcher which module to import for an operator, so that a
session imports only the families its model uses (tests/engine/test_dispatch.py checks the
table against the declarations).
"""

from __future__ import annotations

#: (domain, op_type) -> the module of onnxrt.fastpaths declaring its paths
MODULES: dict[tuple[str, str], str] = {
    ("", "MaxPool"): "pool",
    ("", "AveragePool"): "pool",
    ("", "LSTM"): "rnn",
    ("", "Attention"): "attention",
    ("", "Gemm"): "gemm",
    ("onnxrt", "FusedGemm"): "gemm",
    ("onnxrt", "MatMulAdd"): "gemm",
    ("onnxrt", "DenseChain"): "gemm",
    ("onnxrt", "FusedElementwise"): "elementwise",
    ("", "NonMaxSuppression"): "nms",
    ("", "Cast"): "cast",
    ("", "CastLike"): "cast",
    ("", "BatchNormalization"): "norm",
    ("onnxrt", "FusedBatchNormalization"): "norm",
    ("", "LayerNormalization"): "norm",
    ("", "Transpose"): "transpose",
    ("", "Softmax"): "softmax",
    ("", "LogSoftmax"): "softmax",
    ("", "Erf"): "elementwise",
    ("", "Sigmoid"): "elementwise",
    ("", "Elu"): "elementwise",
    ("", "Selu"): "elementwise",
    ("", "Celu"): "elementwise",
    ("", "Softplus"): "elementwise",
    ("", "Gelu"): "elementwise",
    ("", "Mish"): "elementwise",
    ("", "Swish"): "elementwise",
    ("", "Relu"): "elementwise",
    ("", "Add"): "elementwise",
    ("", "Sub"): "elementwise",
    ("", "Mul"): "elementwise",
    ("", "Div"): "elementwise",
    ("", "Pow"): "elementwise",
    ("", "ReduceSum"): "reduce",
    ("", "ReduceMean"): "reduce",
    ("", "Conv"): "conv",
    ("onnxrt", "FusedConv"): "conv",
    ("onnxrt", "ConvConcat"): "conv",
    ("", "ConvTranspose"): "conv",
    ("ai.onnx.ml", "LinearClassifier"): "ml",
    ("ai.onnx.ml", "LinearRegressor"): "ml",
    ("ai.onnx.ml", "SVMClassifier"): "ml",
    ("ai.onnx.ml", "SVMRegressor"): "ml",
    ("ai.onnx.ml", "Normalizer"): "ml",
    ("ai.onnx.ml", "TreeEnsemble"): "ml",
    ("ai.onnx.ml", "TreeEnsembleRegressor"): "ml",
    ("ai.onnx.ml", "TreeEnsembleClassifier"): "ml",
}
