"""Fast paths of Gemm, onnxrt's FusedGemm (+ Relu) and DenseChain (reference kernels:
onnxrt.ops_cpu.op_gemm, op_fused).

A float32 product of at most DENSE_MAX_ROWS rows and DENSE_MAX_WORK multiply-adds runs
faster in native.loops' dense loop (product, bias and Relu in one call) than through BLAS,
whose blocked kernels win beyond:

- ``compiled dense`` (Gemm) / ``compiled dense relu`` (FusedGemm + Relu): alpha = beta = 1,
  no transA, C absent or one value per column, contiguous operands;
- ``compiled chain`` (DenseChain): every layer of the chain in one compiled call, its
  weights and biases (model constants) packed once.
"""

from __future__ import annotations

import operator

import numpy as np

from .. import native, parallel
from ..dispatch import fast_path
from ..ops_cpu.op_gemm import DENSE_MAX_ROWS, DENSE_MAX_WORK

_F32 = np.dtype(np.float32)
_NO_BIAS = np.zeros(0, dtype=np.float32)


def _dense_executor(gemm, a, b, c, relu: bool):
    """The executor of the compiled dense loop for these operands' signature, or None where
    it does not apply (other types, transA or alpha/beta != 1, a C that is not one value per
    column, non-contiguous operands, too many rows or multiply-adds)."""
    trans_b = gemm._dense_trans_b
    if trans_b is None or type(a) is not np.ndarray or type(b) is not np.ndarray:
        return None
    if a.dtype != _F32 or b.dtype != _F32 or a.ndim != 2 or b.ndim != 2:
        return None
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        return None
    n, kk = b.shape if trans_b else b.shape[::-1]
    if kk == 0 or n == 0 or a.shape[1] != kk or a.shape[0] > min(DENSE_MAX_ROWS, DENSE_MAX_WORK // (kk * n)):
        return None
    if c is not None and (type(c) is not np.ndarray or c.dtype != _F32 or c.size != n
                          or not (c.ndim == 1 or (c.ndim == 2 and c.shape[0] == 1)) or not c.flags.c_contiguous):
        return None
    kernel = native.kernels().dense_small

    def run(a, b, c=None):
        y = np.empty((a.shape[0], n), dtype=_F32)
        kernel(a, b, _NO_BIAS if c is None else c.reshape(-1), relu, trans_b, y)
        return (y,)

    return run


def _few_rows(op, a, *rest) -> bool:
    return type(a) is np.ndarray and a.ndim == 2 and a.shape[0] <= DENSE_MAX_ROWS


@fast_path("Gemm", "compiled dense", when=_few_rows, prepared=True)
def gemm_compiled_dense(op, a, b, c=None):
    """A few float32 rows (16 at most, 128K multiply-adds) by a plain Gemm: native.loops' dense loop, product and bias in one call.

    Sums of K products in another order than BLAS's: within K * eps * sum|a*b| of the reference.
    """
    return _dense_executor(op, a, b, c, False)


@fast_path("FusedGemm", "compiled dense relu", domain="onnxrt",
           when=lambda op, a, *rest: op._act == "Relu" and _few_rows(op, a), prepared=True)
def fused_gemm_compiled_dense(op, a, b, c=None):
    """A few float32 rows by Gemm + Relu: native.loops' dense loop, product, bias and Relu in one call.

    Within K * eps * sum|a*b| of the reference (another summation order than BLAS's).
    """
    return _dense_executor(op._inner, a, b, c, True)


def _pack_chain(chain, params: tuple) -> tuple | None:
    """(packed weights, packed biases, layer table, K of the first layer, N of the last, most
    rows) of a chain whose every weight is a float32 matrix and bias one float32 value per
    column, or None (at most DENSE_MAX_WORK values per layer)."""
    ws, cs = params[0::2], params[1::2]
    width, rows, table, w_parts, c_parts = None, chain._max_rows, [], [], []
    w_off = c_off = 0
    for w, c, tb, relu in zip(ws, cs, chain._trans_b, chain._relus):
        if not (type(w) is np.ndarray and w.dtype == _F32 and w.ndim == 2):
            return None
        kk, n = w.shape[::-1] if tb else w.shape
        if width is not None and kk != width:
            return None
        if c is not None and not (type(c) is np.ndarray and c.dtype == _F32 and c.size == n):
            return None
        rows = min(rows, chain._max_work // max(kk * n, 1))
        table.append((kk, n, tb, relu, w_off, -1 if c is None else c_off))
        w_parts.append(w.reshape(-1))
        w_off += w.size
        if c is not None:
            c_parts.append(c.reshape(-1))
            c_off += n
        width = n
    weights = np.concatenate(w_parts)
    biases = np.concatenate(c_parts) if c_parts else np.zeros(0, _F32)
    return weights, biases, np.array(table, np.int64), table[0][0], width, rows


def _chain_applies(chain, x, *params) -> bool:
    return (chain._packable and type(x) is np.ndarray and x.dtype == _F32 and x.ndim == 2 and x.shape[0] > 0
            and x.flags.c_contiguous)


@fast_path("DenseChain", "compiled chain", domain="onnxrt", when=_chain_applies, prepared=True)
def dense_chain_compiled(chain, x, *params):
    """A few float32 rows through a chain of dense layers with constant weights: every layer in one compiled call.

    Each layer as the compiled dense loop of Gemm: the same results as the nodes one by one
    on their ``compiled dense`` paths. The weights are packed once (model constants; packed
    again should the node be given other arrays).
    """
    packed = _pack_chain(chain, params)
    if packed is None or x.shape[1] != packed[3] or x.shape[0] > packed[5]:
        return None
    kernel = native.kernels().dense_chain
    state = [params, packed]

    def run(x, *params):
        held, (weights, biases, table, _, width, _) = state
        if not all(map(operator.is_, held, params)):  # other arrays than the packed ones
            repacked = _pack_chain(chain, params)
            if repacked is None or repacked[3:] != state[1][3:]:
                return None
            state[:] = [params, repacked]
            weights, biases, table = repacked[:3]
        y = np.empty((x.shape[0], width), _F32)
        kernel(x, weights, biases, table, y)
        return (y,)

    return run



def _bias_product(op, a, b, c) -> bool:
    return (type(a) is np.ndarray and type(b) is np.ndarray and type(c) is np.ndarray
            and a.dtype == b.dtype == c.dtype == np.float32 and a.ndim >= 2 and b.ndim == 2 and c.ndim == 1
            and c.shape[0] == b.shape[1] and a.shape[-1] == b.shape[0])


@fast_path("MatMulAdd", "product with the bias in its blocks", domain="onnxrt", when=_bias_product)
def matmul_add_blocks(op, a, b, c):
    """A stack of float32 rows times a matrix plus a column bias: one product of all the rows
    (parallel.matmul), the team's parts adding the bias to their blocks while in cache
    (in place after the product otherwise)."""
    return (parallel.matmul(a, b, bias=c),)
