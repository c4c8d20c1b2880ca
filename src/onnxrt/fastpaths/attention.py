"""Fast paths of Attention (reference kernel: onnxrt.ops_cpu.op_attention.attention, batched
numpy products around a whole-tensor softmax).

- ``compiled items``: float32 Q, K, V without softcap or qk output and a float32 softmax:
  native.loops' ``attention_items`` over items (batch, query head, block of query rows)
  shared by the pool's threads without the GIL, each two single-threaded BLAS products
  (cblas_sgemm by address) around a softmax whose scores stay in cache;
- ``compiled softmax rows``: other float32 cases (softcap, a qk output): the reference's
  steps with exp(x - max) and the row sums in one compiled pass per row.
"""

from __future__ import annotations

import numpy as np

from .. import native
from ..dispatch import fast_path
from ..native.blas import blas_sgemm_address
from ..ops_cpu.op_attention import _SOFTMAX_PRECISION, attention
from ..parallel import KERNEL_THREADS, MIN_PARALLEL_WORK, parallel_for, scratch

_F32 = np.dtype(np.float32)

#: score-matrix elements per item of the compiled path (256 KiB of float32: half an L2)
ITEM_SCORES = 1 << 16


def _flat(a: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A 1-D view of the memory of ``a`` (4-D, C-contiguous or, as 3-D inputs split into
    heads are, with axes 1 and 2 swapped) from its first element, and its element strides
    (batch, head, row) by which compiled loops address it; a copy for any other layout."""
    if not a.flags.c_contiguous and not a.transpose(0, 2, 1, 3).flags.c_contiguous:
        a = np.ascontiguousarray(a)
    flat = a.reshape(-1) if a.flags.c_contiguous else a.transpose(0, 2, 1, 3).reshape(-1)
    return flat, np.array(a.strides[:3], np.int64) // a.itemsize


def _attention_compiled(k, sgemm: int, Q, K, V, bias, scale: float, group: int, three_d: bool) -> np.ndarray:
    """Y of a float32 Attention through the compiled loop ``attention_items``: items (batch,
    query head, block of query rows) shared by the pool's threads without the GIL, each
    two single-threaded BLAS products around a softmax whose scores stay in cache
    (``ITEM_SCORES`` per block). 8 heads of 128 x 64 ran 2.2x onnxruntime's time as
    batched numpy products around a whole-tensor softmax."""
    batch, hq, sq, head = Q.shape
    total, dv = K.shape[2], V.shape[3]
    if three_d:  # Y is (batch, seq, heads * size): write it in that layout through a transposed view
        out = np.empty((batch, sq, hq, dv), np.float32)
        Y4 = out.transpose(0, 2, 1, 3)
    else:
        out = Y4 = np.empty((batch, hq, sq, dv), np.float32)
    qf, qs = _flat(Q)
    kf, ks = _flat(K)
    vf, vs = _flat(V)
    yf, ys = _flat(Y4)
    if bias is None:
        bf, bs = np.empty(0, np.float32), np.zeros(3, np.int64)
    else:
        # the mask's own elements, with stride 0 along the axes it broadcasts
        bc = np.ascontiguousarray(bias, np.float32)
        if bc.shape[-1] != total:
            bc = np.ascontiguousarray(np.broadcast_to(bc, bc.shape[:-1] + (total,)))
        bf = bc.reshape(-1)
        bs = np.array([st // 4 if n > 1 else 0 for n, st in zip(bc.shape[:3], bc.strides[:3])], np.int64)
    block = max(1, min(sq, ITEM_SCORES // total))
    items = batch * hq * -(-sq // block)
    shape = np.array([batch, hq, sq, total, head, dv, group], np.int64)
    counter = np.zeros(1, np.int64)

    def work(lo: int, hi: int) -> None:
        scores = scratch("attention_scores", (block * total,), np.float32)
        sums = scratch("attention_sums", (block,), np.float32)
        k.attention_items(qf, kf, vf, yf, bf, qs, ks, vs, ys, bs, shape, block, scale, counter, sgemm, scores, sums)

    macs = batch * hq * sq * total * (head + dv)
    threads = min(KERNEL_THREADS, items) if macs >= 8 * MIN_PARALLEL_WORK else 1
    # one part per thread: each takes items until the counter runs out; BLAS single-threaded inside
    parallel_for(threads, work, work_per_item=MIN_PARALLEL_WORK)
    return out.reshape(batch, sq, hq * dv) if three_d else out


def _items(Q, K, V, bias, scale: float, group: int, three_d: bool) -> np.ndarray:
    return _attention_compiled(native.kernels(), blas_sgemm_address(), Q, K, V, bias, scale, group, three_d)


def _float32_softmax(op, Q, K, V, *rest) -> bool:
    """float32 Q, K and V and a float32 softmax (softmax_precision absent or FLOAT)."""
    return (type(Q) is np.ndarray and type(K) is np.ndarray and type(V) is np.ndarray
            and Q.dtype == K.dtype == V.dtype == _F32
            and _SOFTMAX_PRECISION.get(op._kw["softmax_precision"] or 1) == _F32)


def _items_apply(op, Q, K, V, *rest) -> bool:
    kw = op._kw
    return (_float32_softmax(op, Q, K, V) and not (kw["softcap"] and kw["softcap"] > 0) and not kw["want_qk"]
            and blas_sgemm_address() is not None)


@fast_path("Attention", "compiled items", when=_items_apply)
def compiled_items(op, Q, K, V, *rest):
    """float32 Q/K/V, no softcap, no qk output: items (batch, head, row block) over the pool without the GIL, BLAS products around an in-cache softmax.

    Y within 2e-5 (relative) of the reference: the same float32 products by blocks, the
    softmax by native.loops' exp (about 1 ulp) and the normalisation deferred to Y as the
    reference does.
    """
    return attention(Q, K, V, *rest, **op._kw, items=_items)


@fast_path("Attention", "compiled softmax rows", when=_float32_softmax)
def compiled_softmax_rows(op, Q, K, V, *rest):
    """Other float32 Attention (softcap, a qk output): the reference's steps with exp(x - max) and the row sums in one compiled pass per row.

    Within a float32 ulp or two of the reference per probability (native.loops' exp).
    """
    return attention(Q, K, V, *rest, **op._kw, exp_rows=native.kernels().exp_shift_rows)
