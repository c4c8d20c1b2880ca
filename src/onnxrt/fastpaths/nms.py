"""Fast path of NonMaxSuppression (reference kernel: onnxrt.ops_cpu.op_non_max_suppression,
a vectorised sweep and fixed-point resolution of the greedy order, exact).

- ``compiled greedy``: every batch and class through native.loops' greedy loop.
"""

from __future__ import annotations

import numpy as np

from .. import native
from ..dispatch import fast_path
from ..ops_cpu._dsp import scalar_float, scalar_int


def nms_compiled(boxes: np.ndarray, scores: np.ndarray, max_out: int, iou_threshold: float,
                 score_threshold: float | None, center: int) -> np.ndarray:
    """Every batch and class through native.loops' greedy loop (``nms``): candidates ranked
    as the reference ranks them (decreasing float32 score, ties by lower index), each tested
    against its group's kept boxes only (O(candidates x kept)), the same float32 IoU; the
    same selected triplets as the reference."""
    k = native.kernels()
    n_batch, n_class, n_box = scores.shape
    s2 = scores.astype(np.float32, copy=False).reshape(n_batch * n_class, n_box)
    if score_threshold is None:
        ranked = np.argsort(-s2, axis=1, kind="stable")
        n_cand = np.full(s2.shape[0], n_box)
    else:
        valid = s2 > np.float32(score_threshold)
        ranked = np.argsort(np.where(valid, -s2, np.inf), axis=1, kind="stable")
        n_cand = valid.sum(axis=1)
    out = np.empty((int(min(n_cand.sum(), s2.shape[0] * min(max_out, n_box))), 3), dtype=np.int64)
    count = k.nms(np.ascontiguousarray(boxes, dtype=np.float32), ranked, n_cand, n_class, bool(center),
                  min(int(max_out), n_box), np.float32(iou_threshold), out)
    return out[:count]


def _applies(op, boxes, scores, *rest) -> bool:
    """Boxes [B, N, 4] and scores [B, C, N] arrays with something to select (else the reference reports or returns)."""
    return (type(boxes) is np.ndarray and type(scores) is np.ndarray and boxes.ndim == 3 and boxes.shape[2] == 4
            and scores.ndim == 3 and scores.shape[0] == boxes.shape[0] and scores.shape[2] == boxes.shape[1]
            and scores.size > 0)


@fast_path("NonMaxSuppression", "compiled greedy", when=_applies)
def compiled_greedy(op, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None):
    """Every batch and class through native.loops' greedy loop, each candidate against its group's kept boxes.

    Exactly the reference's selection. Declines (the reference runs) when nothing is to be
    selected or a threshold is out of range.
    """
    max_out = 0 if max_output_boxes_per_class is None or np.size(max_output_boxes_per_class) == 0 else scalar_int(
        max_output_boxes_per_class, "max_output_boxes_per_class")
    iou = 0.0 if iou_threshold is None or np.size(iou_threshold) == 0 else scalar_float(iou_threshold, "iou_threshold")
    score = None if score_threshold is None or np.size(score_threshold) == 0 else scalar_float(score_threshold, "score_threshold")
    if max_out <= 0 or not 0.0 <= iou <= 1.0:
        return None
    return (nms_compiled(boxes, scores, max_out, iou, score, op.center_point_box),)
