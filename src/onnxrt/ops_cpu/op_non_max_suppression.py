"""NonMaxSuppression (10, 11): greedy IoU suppression over every batch and class at once."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._dsp import scalar_float, scalar_int
from ._op import OpRun

#: candidate pairs examined per chunk of the sweep (bounds the temporaries)
_PAIR_CHUNK = 1 << 22
#: fixed-point rounds of the greedy resolution before the sequential fallback
_MAX_ROUNDS = 48


def _corners(boxes: np.ndarray, center_point_box: int) -> tuple[np.ndarray, ...]:
    """(ymin, xmin, ymax, xmax) float32 of boxes given as [y1, x1, y2, x2] (any two
    opposite corners) or, with center_point_box=1, as [x_center, y_center, width, height]."""
    b = boxes.astype(np.float32, copy=False)
    if center_point_box:
        xc, yc, w, h = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
        half_w, half_h = w / np.float32(2), h / np.float32(2)
        return yc - half_h, xc - half_w, yc + half_h, xc + half_w
    y1, x1, y2, x2 = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2), np.maximum(x1, x2)


def _suppresses(a: np.ndarray, b: np.ndarray, iou_threshold: float) -> np.ndarray:
    """Whether boxes ``a`` and ``b`` (float32 columns of rows ymin, xmin, ymax, xmax, area)
    overlap by an IoU strictly above the threshold, computed in float32 as onnxruntime.
    Boxes without intersection never suppress (nor, then, boxes without area)."""
    ih = np.minimum(a[2], b[2])
    ih -= np.maximum(a[0], b[0])
    iw = np.minimum(a[3], b[3])
    iw -= np.maximum(a[1], b[1])
    ok = ih > 0
    ok &= iw > 0
    inter = ih
    inter *= iw
    union = a[4] + b[4]
    union -= inter
    # where there is no intersection the quotient is meaningless (maybe 0/0): masked by ok
    with np.errstate(divide="ignore", invalid="ignore"):
        inter /= union
    ok &= inter > np.float32(iou_threshold)
    return ok


def _suppression_edges(group: np.ndarray | None, geo: np.ndarray, iou_threshold: float) -> tuple[np.ndarray, np.ndarray]:
    """Edges (u, v), u < v, between candidates (ranks: columns of ``geo``) of the same group
    (``None``: all in one) whose IoU exceeds the threshold.

    A sweep finds the pairs worth testing: sorted by (group, xmin), each box pairs with the
    followers that start before ``xmax - t * width`` (IoU > t needs an x overlap above t
    times the wider box: inter > t * union >= t * max(area) >= t * max(width) * height of
    the overlap). The followers of a box are a run of the sorted order, so the first
    ``band`` of them are tested for every box at once on a strided view (box i against
    box i + k, k = 1..band); the few boxes with longer runs test the rest as explicit pairs.
    """
    n = geo.shape[1]
    # a little slack on t: the float32 IoU may round above a threshold it does not reach
    slack = iou_threshold * (1.0 - 1e-3)
    if group is None:
        start_key = geo[1]
        end_key = geo[3] - np.float32(slack) * (geo[3] - geo[1])
    else:
        x0 = geo[1].astype(np.float64)
        x1 = geo[3].astype(np.float64)
        # NaN coordinates are ignored here (their keys stay NaN: they sort last, and pair
        # with nothing, as their IoU never passes); a NaN extent would shift every group
        lo = float(np.fmin.reduce(x0, initial=np.inf))
        hi = float(np.fmax.reduce(x1, initial=-np.inf))
        if not (np.isfinite(lo) and np.isfinite(hi)):
            lo = hi = 0.0
        # float64 keys keep groups apart without touching the float32 coordinates
        offset = group.astype(np.float64) * (2 * (hi - lo + 1.0) + 1.0) - lo
        start_key = x0 + offset
        end_key = x1 - slack * (x1 - x0) + offset
    order = np.argsort(start_key, kind="stable")
    stop = np.searchsorted(start_key[order], end_key[order], side="left")
    counts = np.maximum(stop - np.arange(1, n + 1), 0)
    by_x = geo.take(order, axis=1)  # columns in sweep order
    us, vs = [], []

    def add(i: np.ndarray, j: np.ndarray) -> None:
        a, b = order[i], order[j]
        us.append(np.minimum(a, b))
        vs.append(np.maximum(a, b))

    band = int(min(counts.max(initial=0), 2 * int(counts.sum()) // max(n, 1) + 8))
    if band:
        # by_x padded with NaN (never suppresses); window[:, i, k - 1] is box i + k
        padded = np.full((5, n + band), np.nan, dtype=by_x.dtype)
        padded[:, :n] = by_x
        row, col = padded.strides
        window = np.ndarray((5, n, band + 1), dtype=padded.dtype, buffer=padded, strides=(row, col, col))
        rows = max(1, _PAIR_CHUNK // band)
        ks = np.arange(band)
        # IoU > t <=> inter > t / (1 + t) * (area_a + area_b): a screen without division, a
        # hair looser than the test; the few pairs it passes take the exact float32 test
        screen = np.float32(iou_threshold / (1.0 + iou_threshold) * (1.0 - 1e-5))
        t32 = np.float32(iou_threshold)
        for r0 in range(0, n, rows):  # chunks of boxes, to bound the temporaries
            r1 = min(r0 + rows, n)
            a, b = by_x[:, r0:r1, None], window[:, r0:r1, 1:]
            inter = np.minimum(a[2], b[2])
            inter -= np.maximum(a[0], b[0])
            iw = np.minimum(a[3], b[3])
            iw -= np.maximum(a[1], b[1])
            inter *= iw  # the intersection where both overlaps are positive
            both = a[4] + b[4]
            hit = inter > both * screen
            if group is not None:
                # followers past a box's run may belong to the next group; within one
                # group, any pair that passes is a true edge (past the run none can be)
                hit &= ks[None, :] < counts[r0:r1, None]
            flat = np.flatnonzero(hit)
            sel_inter, sel_w = inter.ravel()[flat], iw.ravel()[flat]
            flat = flat[(sel_inter > 0) & (sel_w > 0)]
            sel_inter = inter.ravel()[flat]
            # onnxruntime's test: inter / (area_a + area_b - inter) > t, in float32
            flat = flat[sel_inter / (both.ravel()[flat] - sel_inter) > t32]
            i = flat // band
            add(i + r0, flat - i * band + i + r0 + 1)
    long_runs = np.flatnonzero(counts > band)
    if long_runs.size:  # followers beyond the band, as explicit pairs
        extra = counts[long_runs] - band
        owner = np.repeat(long_runs, extra)
        follower = owner + band + 1 + (np.arange(int(extra.sum())) - np.repeat(np.cumsum(extra) - extra, extra))
        hit = _suppresses(np.take(by_x, owner, axis=1), np.take(by_x, follower, axis=1), iou_threshold)
        add(owner[hit], follower[hit])
    if not us:
        return np.zeros(0, dtype=np.intp), np.zeros(0, dtype=np.intp)
    return np.concatenate(us), np.concatenate(vs)


def _runs(g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For sorted group ids: the mask of each run's first element, and every element's
    position in its run."""
    head = np.empty(g.size, dtype=bool)
    head[:1] = True
    np.not_equal(g[1:], g[:-1], out=head[1:])
    starts = np.flatnonzero(head)
    return head, np.arange(g.size) - starts[np.cumsum(head) - 1]


def _greedy(n: int, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Keep mask of the greedy pass over ranks 0..n-1 where rank u suppresses rank v > u.

    ``keep[v]`` is true when no kept ``u`` suppresses it. The fixed point of
    ``keep = not any(keep[u] for edges u -> v)`` is that greedy answer, reached in as many
    rounds as the longest suppression chain; long chains fall back to a loop over the
    kept boxes.
    """
    keep = np.ones(n, dtype=bool)
    if u.size == 0:
        return keep
    for _ in range(_MAX_ROUNDS):
        hit = np.zeros(n, dtype=bool)
        hit[v[keep[u]]] = True
        new = ~hit
        if not np.not_equal(new, keep).any():
            return keep
        keep = new
    order = np.argsort(u, kind="stable")  # CSR of the edges by suppressor
    u_sorted, v_sorted = u[order], v[order]
    starts = np.searchsorted(u_sorted, np.arange(n + 1))
    alive = np.ones(n, dtype=bool)
    i = 0
    while i < n:  # one step per kept box
        alive[v_sorted[starts[i] : starts[i + 1]]] = False
        nxt = np.flatnonzero(alive[i + 1 :])
        if nxt.size == 0:
            break
        i = i + 1 + int(nxt[0])
    return alive


def _single_group(boxes, scores, max_out: int, iou_threshold: float, score_threshold: float | None, center: int) -> np.ndarray:
    """One batch and one class (the common case), with as few array operations as possible:
    candidates by decreasing score, then the greedy pass over as many of the best of them
    as should keep ``max_out`` boxes (more while they do not)."""
    s = scores.astype(np.float32, copy=False).reshape(-1)
    if score_threshold is None:
        cand = np.arange(s.size)
    else:
        cand = np.flatnonzero(s > np.float32(score_threshold))
    ranked = cand[np.argsort(-s[cand], kind="stable")]  # ties: lower index first
    if ranked.size == 0:
        return np.zeros((0, 3), dtype=np.int64)
    flat_boxes = boxes.reshape(-1, 4)
    limit = max(64, max_out + max_out // 2)
    while True:  # usually once; each retry quadruples the prefix
        order = ranked[:limit]
        geo = np.empty((5, order.size), dtype=np.float32)
        geo[0], geo[1], geo[2], geo[3] = _corners(flat_boxes[order], center)
        np.multiply(geo[2] - geo[0], geo[3] - geo[1], out=geo[4])
        u, v = _suppression_edges(None, geo, iou_threshold)
        kept = np.flatnonzero(_greedy(order.size, u, v))
        if kept.size >= max_out or order.size == ranked.size:
            break
        limit *= 4
    out = np.zeros((min(kept.size, max_out), 3), dtype=np.int64)
    out[:, 2] = order[kept[:max_out]]
    return out


def non_max_suppression(
    boxes: np.ndarray,
    scores: np.ndarray,
    max_output_boxes_per_class: int = 0,
    iou_threshold: float = 0.0,
    score_threshold: float | None = None,
    center_point_box: int = 0,
) -> np.ndarray:
    """Selected ``[batch, class, box]`` triplets (int64, shape [K, 3]).

    Per batch and class, boxes scoring strictly above ``score_threshold`` are visited by
    decreasing score (ties: lower index first); a box is kept unless a kept box overlaps it
    with IoU strictly greater than ``iou_threshold``; at most ``max_output_boxes_per_class``
    are kept. Output rows are ordered by batch, class, then score. Every batch and class
    are processed together, on the best candidates of each first (a longer prefix only
    for those that keep too few): candidate pairs from one sweep over x extents, their
    IoU in one vectorized pass, and the greedy order from a fixed-point resolution. The
    reference kernel (exact: the greedy answer); the compiled greedy loop is a fast path
    (onnxrt.fastpaths.nms).
    """
    boxes = np.asarray(boxes)
    scores = np.asarray(scores)
    if boxes.ndim != 3 or boxes.shape[2] != 4:
        raise KernelError(f"boxes must have shape [num_batches, spatial_dimension, 4], got {list(boxes.shape)}.")
    if scores.ndim != 3 or scores.shape[0] != boxes.shape[0] or scores.shape[2] != boxes.shape[1]:
        raise KernelError(
            f"scores must have shape [{boxes.shape[0]}, num_classes, {boxes.shape[1]}] for boxes of shape "
            f"{list(boxes.shape)}, got {list(scores.shape)}."
        )
    if not 0.0 <= iou_threshold <= 1.0:
        raise KernelError(f"iou_threshold must lie in [0, 1], got {iou_threshold}.")
    n_batch, n_class, n_box = scores.shape
    empty = np.zeros((0, 3), dtype=np.int64)
    if max_output_boxes_per_class <= 0 or scores.size == 0:
        return empty

    if n_batch * n_class == 1:
        return _single_group(boxes, scores, max_output_boxes_per_class, iou_threshold, score_threshold, center_point_box)
    n_groups = n_batch * n_class
    s2 = scores.astype(np.float32, copy=False).reshape(n_groups, n_box)
    # each group's boxes by decreasing score (stable: ties by lower index), the boxes at
    # or below the score threshold last, then dropped
    if score_threshold is None:
        ranked = np.argsort(-s2, axis=1, kind="stable")
        n_cand = np.full(n_groups, n_box)
    else:
        valid = s2 > np.float32(score_threshold)
        ranked = np.argsort(np.where(valid, -s2, np.inf), axis=1, kind="stable")
        n_cand = valid.sum(axis=1)
    flat_boxes = boxes.reshape(-1, 4)
    batch_of = np.arange(n_groups) // n_class

    # A greedy pass over a prefix of each group's ranks is exact for that prefix: the
    # groups are resolved together on their best candidates, and only those that keep too
    # few boxes see a longer prefix
    active = n_cand > 0
    chosen_g, chosen_r = [], []
    limit = max(64, max_output_boxes_per_class + max_output_boxes_per_class // 2)
    while active.any():  # usually once; each retry quadruples the prefix
        width = min(limit, n_box)
        g, r = np.nonzero(active[:, None] & (np.arange(width)[None, :] < n_cand[:, None]))  # (group, rank)
        geo = np.empty((5, g.size), dtype=np.float32)
        geo[0], geo[1], geo[2], geo[3] = _corners(flat_boxes[batch_of[g] * n_box + ranked[g, r]], center_point_box)
        np.multiply(geo[2] - geo[0], geo[3] - geo[1], out=geo[4])
        u, v = _suppression_edges(g, geo, iou_threshold)
        keep = _greedy(g.size, u, v)
        totals = np.bincount(g[keep], minlength=n_groups)
        # a group is done when it keeps enough boxes or all its candidates were in the prefix
        done = active & ((totals >= max_output_boxes_per_class) | (n_cand <= width))
        take = keep & done[g]
        chosen_g.append(g[take])
        chosen_r.append(r[take])
        active &= ~done
        limit *= 4
    if not chosen_g:
        return empty
    kg, kr = np.concatenate(chosen_g), np.concatenate(chosen_r)
    order = np.lexsort((kr, kg))  # by group, then rank
    kg, kr = kg[order], kr[order]
    # the first max_output_boxes_per_class kept boxes of each group
    _, position = _runs(kg)
    first = position < max_output_boxes_per_class
    kg, kr = kg[first], kr[first]
    out = np.empty((kg.size, 3), dtype=np.int64)
    out[:, 0] = kg // n_class
    out[:, 1] = kg % n_class
    out[:, 2] = ranked[kg, kr]
    return out


@register("NonMaxSuppression", versions=(10, 11))
class NonMaxSuppression(OpRun):
    """NonMaxSuppression 10, 11 (11 states that an IoU equal to the threshold is kept,
    which version 10 implementations did too). See :func:`non_max_suppression`."""

    def _run(self, boxes, scores, max_output_boxes_per_class=None, iou_threshold=None, score_threshold=None,
             attributes=None, verbose=0, fLOG=None):
        max_out = 0 if max_output_boxes_per_class is None or np.size(max_output_boxes_per_class) == 0 else scalar_int(
            max_output_boxes_per_class, "max_output_boxes_per_class")
        iou = 0.0 if iou_threshold is None or np.size(iou_threshold) == 0 else scalar_float(iou_threshold, "iou_threshold")
        score = None if score_threshold is None or np.size(score_threshold) == 0 else scalar_float(score_threshold, "score_threshold")
        return (non_max_suppression(boxes, scores, max_out, iou, score, self.center_point_box),)
