"""Tools around the engine: input generation, comparison with onnxruntime, profiling, export."""
