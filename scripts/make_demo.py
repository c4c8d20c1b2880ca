"""Build the demo model shipped in the package (src/onnxrt/data/demo.onnx).

A bag-of-words text featuriser: token ids -> embeddings (Gather), an affine map and
ReLU/Sigmoid gates, and a histogram of the ids (ScatterElements with reduction add).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OUT = Path(__file__).resolve().parents[1] / "src" / "onnxrt" / "data" / "demo.onnx"


def build() -> onnx.ModelProto:
    rng = np.random.default_rng(0)
    vocab, dim, seq = 32, 8, 6
    inits = [
        numpy_helper.from_array(rng.standard_normal((vocab, dim)).astype(np.float32), "embedding"),
        numpy_helper.from_array(rng.standard_normal(dim).astype(np.float32), "scale"),
        numpy_helper.from_array(rng.standard_normal(dim).astype(np.float32) * 0.1, "bias"),
        numpy_helper.from_array(np.zeros((1, vocab), dtype=np.float32), "empty_hist"),
    ]
    nodes = [
        helper.make_node("Gather", ["embedding", "ids"], ["emb"], axis=0, name="lookup"),
        helper.make_node("Mul", ["emb", "scale"], ["scaled"], name="scale"),
        helper.make_node("Add", ["scaled", "bias"], ["shifted"], name="shift"),
        helper.make_node("Relu", ["shifted"], ["features"], name="relu"),
        helper.make_node("Sigmoid", ["shifted"], ["gates"], name="gate"),
        helper.make_node("Shape", ["ids"], ["ids_shape"], name="shape"),
        helper.make_node("Constant", [], ["one_vec"], value_floats=[1.0], name="one"),
        helper.make_node("Mul", ["ids", "zero_i"], ["zero_ids"], name="zeros_like"),
        helper.make_node("Gather", ["one_vec", "zero_ids"], ["ones"], axis=0, name="ones_like"),
        helper.make_node(
            "ScatterElements", ["empty_hist", "ids", "ones"], ["histogram"], axis=1, reduction="add", name="histogram"
        ),
    ]
    inits.append(numpy_helper.from_array(np.array(0, dtype=np.int64), "zero_i"))
    graph = helper.make_graph(
        nodes,
        "onnxrt_demo",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, seq])],
        [
            helper.make_tensor_value_info("features", TensorProto.FLOAT, [1, seq, dim]),
            helper.make_tensor_value_info("gates", TensorProto.FLOAT, [1, seq, dim]),
            helper.make_tensor_value_info("histogram", TensorProto.FLOAT, [1, vocab]),
            helper.make_tensor_value_info("ids_shape", TensorProto.INT64, [2]),
        ],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], producer_name="onnxrt")
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


if __name__ == "__main__":
    OUT.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(build(), OUT)
    print(f"wrote {OUT}")
