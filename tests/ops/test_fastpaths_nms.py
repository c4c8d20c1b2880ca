"""NonMaxSuppression's declared fast path (onnxrt.fastpaths.nms) against the reference kernel."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper

import onnxrt
from tests.ops.fastpath_check import check_path, picked


def _model(center: int, with_score: bool):
    ins = ["boxes", "scores", "max_out", "iou"] + (["score"] if with_score else [])
    node = helper.make_node("NonMaxSuppression", ins, ["sel"], center_point_box=center)
    vi = [helper.make_tensor_value_info("boxes", TensorProto.FLOAT, None),
          helper.make_tensor_value_info("scores", TensorProto.FLOAT, None),
          helper.make_tensor_value_info("max_out", TensorProto.INT64, [1]),
          helper.make_tensor_value_info("iou", TensorProto.FLOAT, [1])]
    if with_score:
        vi.append(helper.make_tensor_value_info("score", TensorProto.FLOAT, [1]))
    g = helper.make_graph([node], "nms", vi, [helper.make_tensor_value_info("sel", TensorProto.INT64, None)])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 11)])


@pytest.mark.parametrize("seed", range(4))
def test_compiled_greedy(seed):
    rng = np.random.default_rng(seed)
    center = seed % 2
    b, c, n = 2, 3, 300
    xy = rng.uniform(0, 100, (b, n, 2))
    wh = rng.uniform(2, 20, (b, n, 2))
    boxes = (np.concatenate([xy + wh / 2, wh], 2) if center else np.concatenate([xy, xy + wh], 2)).astype(np.float32)
    scores = (np.round(rng.random((b, c, n)) * 8) / 8).astype(np.float32)  # ties
    feeds = {"boxes": boxes, "scores": scores, "max_out": np.array([[5, 40, 1000, 1][seed]], np.int64),
             "iou": np.array([0.4], np.float32)}
    if seed % 2:
        feeds["score"] = np.array([0.3], np.float32)
    fast, _ = check_path(_model(center, seed % 2 == 1), feeds, "NonMaxSuppression", "compiled greedy")
    sel = fast[0]
    assert sel.dtype == np.int64 and sel.ndim == 2 and sel.shape[1] == 3 and sel.shape[0] > 0
    assert set(sel[:, 0]) <= {0, 1} and set(sel[:, 1]) <= {0, 1, 2}


def test_nothing_to_select_declines_to_the_reference():
    boxes = np.zeros((1, 4, 4), np.float32)
    scores = np.ones((1, 1, 4), np.float32)
    feeds = {"boxes": boxes, "scores": scores, "max_out": np.array([0], np.int64), "iou": np.array([0.5], np.float32)}
    sess = onnxrt.OnnxInference(_model(0, False))
    sess.run(feeds)
    sel = sess.run(feeds)["sel"]
    # the path is picked for this signature, then declines the call (max_output_boxes_per_class 0)
    assert picked(sess, "NonMaxSuppression") == ({"compiled greedy"} if onnxrt.native.kernels() else {"reference"})
    assert sel.dtype == np.int64 and sel.shape == (0, 3)
