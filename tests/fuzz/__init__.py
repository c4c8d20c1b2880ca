"""Differential fuzzing of the operators against onnx.reference and onnxruntime."""
