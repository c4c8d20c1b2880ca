"""Numba-compiled tree walk behind the tree ensembles' canonical path (loaded by _jit.kernels)."""

from __future__ import annotations

import numpy as np
from numba import njit

# Why the walk is written as it is
# --------------------------------
# numpy walks a forest level by level for every (row, tree) at once: about six array calls
# per level, so a single row through 100 trees of depth 10 costs sixty calls (~60 us) for a
# thousand node visits. Compiled, one pass per level runs over a block of "lanes", (tree,
# row) pairs: a visit is a chain of dependent loads (node, feature value, child), so a
# walk of one lane after the other waits on every load (~6 ns a visit); a pass over
# independent lanes lets the CPU overlap them. Blocks hold a few trees times many rows (one
# tree's nodes stay in cache while the rows go down it) or, for a few rows, many trees.
# The next node is read at an index computed from the comparison rather than behind a
# branch on it (a mispredicted branch costs more than the loads). One node is one 16-byte
# row (feature, then the children for x > t, x <= t and NaN): a visit touches one cache
# line of it. A leaf points to itself on every side, so every walk takes exactly ``depth``
# steps.

_OPTS = {"nogil": True, "cache": True, "error_model": "numpy"}

#: columns of the node table handed to :func:`forest_walk` (uint32): the feature read, then
#: the next node when x > t, x <= t and x is NaN (in that order: index 1 + (x <= t) + 2 isnan(x))
FEATURE, GT_CHILD, LE_CHILD, NAN_CHILD = range(4)
#: (tree, row) pairs walked together
LANES = 256


@njit(**_OPTS)
def forest_walk(flat, nf, lo, hi, nodes, thr, leaf_row, roots, depth, weights, leaves, scores):  # pragma: no cover (compiled)
    """Rows ``lo``..``hi`` of the row-major input ``flat`` (``nf`` features per row) through
    every tree: at node k the row goes to ``nodes[k, LE_CHILD]`` when x[feature] <= thr[k]
    (every mode rewritten as "<=", Forest._canonical_threshold), to ``nodes[k, NAN_CHILD]``
    when x[feature] is NaN, else to ``nodes[k, GT_CHILD]``. With ``leaves`` non-empty,
    ``leaves[r, t]`` receives the leaf row (``leaf_row`` of the node reached) in tree t; with
    ``scores`` non-empty, ``scores[r, :] += weights[leaf row, :]`` tree after tree (float64,
    in tree order)."""
    ntrees = roots.shape[0]
    nk = weights.shape[1]
    want_leaves = leaves.shape[0] > 0
    want_sum = scores.shape[0] > 0
    unf = np.uintp(nf)
    one, two = np.uintp(1), np.uintp(2)
    block_rows = min(max(hi - lo, 1), LANES)
    group = max(1, LANES // block_rows)
    state = np.empty(LANES, dtype=np.uintp)
    for t0 in range(0, ntrees, group):
        t1 = min(ntrees, t0 + group)
        for r0 in range(lo, hi, block_rows):
            r1 = min(hi, r0 + block_rows)
            i = 0
            for t in range(t0, t1):
                root = np.uintp(roots[t])
                for r in range(r0, r1):
                    state[i] = root
                    i += 1
            for _ in range(depth):
                i = 0
                for t in range(t0, t1):
                    for r in range(r0, r1):
                        s = state[i]
                        v = flat[np.uintp(r) * unf + np.uintp(nodes[s, FEATURE])]
                        side = one + np.uintp(v <= thr[s]) + two * np.uintp(v != v)
                        state[i] = np.uintp(nodes[s, side])
                        i += 1
            i = 0
            for t in range(t0, t1):
                for r in range(r0, r1):
                    leaf = leaf_row[state[i]]
                    i += 1
                    if want_leaves:
                        leaves[r, t] = leaf
                    if want_sum:
                        for k in range(nk):
                            scores[r, k] += weights[leaf, k]
