"""Fast path of MaxPool and AveragePool (reference kernel: onnxrt.ops_cpu.op_pool.pool,
shifted strided views of numpy passes over the planes).

- ``compiled 2-D`` (prepared per input signature): 2-D max and average pooling computed in
  float32 (float32, float16 and bfloat16 inputs) through native.loops' window loops over
  blocks of whole planes: ``pool2d_same`` (unit strides and dilations, an output of the
  input's size: flat passes), ``pool2d_s2`` (3x3 windows at strides 2: rows joined, no pass
  over the columns the stride skips) or ``pool2d``. The geometry, the average's inverse
  counts and the team job are settled once per input shape; the planes go to the team
  (``POOL``/``POOL_S2``/``POOL_SAME`` blocks) or are split over the kernel pool.

Lp pooling, MaxPool's Indices output, one window per plane (the global pool: one
reduction) and empty outputs keep the reference.
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod

import numpy as np

from .. import native, parallel
from ..dispatch import fast_path
from ..errors import KernelError
from ..native.layout import POOL, POOL_S2, POOL_SAME
from ..ops_cpu.op_pool import _inverse_counts, _pool_dtype, _pool_geometry

_F32 = np.dtype(np.float32)
#: window taps (outputs x kernel size) from which the compiled pooling loop splits its planes
#: over the pool
JIT_SPLIT_WORK = 1 << 22
#: window taps per part when the compiled loop's planes go to the team (~10 us each)
POOL_TEAM_PART = 1 << 16
#: the compiled max pool's unused scale argument (one array type: one compilation)
_NO_SCALE = np.ones((1, 1), _F32)


def compiled_pool(x_shape: tuple[int, ...], mode: str, kernel_shape, *, strides=None, pads=None, dilations=None,
                  auto_pad: str = "NOTSET", ceil_mode: int = 0,
                  count_include_pad: int = 0) -> Callable[[np.ndarray], np.ndarray] | None:
    """``run(x) -> y``, the compiled pooling of a C-contiguous float32 input of shape
    ``x_shape`` (attributes as :func:`onnxrt.ops_cpu.op_pool.pool`'s), or None where the
    reference keeps it: Lp, other ranks than 2-D, one window per plane, empty outputs,
    invalid geometry (the reference reports it). Results: max exactly the reference's;
    average the same float32 sum of the window times the same inverse count."""
    if mode not in ("max", "avg"):
        return None
    try:
        kernel, s, d, pb, pe, out_shape = _pool_geometry(x_shape, kernel_shape, strides, pads, dilations, auto_pad,
                                                         ceil_mode)
    except KernelError:
        return None
    in_shape = tuple(x_shape[2:])
    full = tuple(x_shape[:2]) + tuple(out_shape)
    lengths = [(o - 1) * st + (kk - 1) * dl + 1 for o, st, kk, dl in zip(out_shape, s, kernel, d)]
    one_window = not any(pb) and tuple(lengths) == in_shape and all(o == 1 for o in out_shape) and all(dl == 1 for dl in d)
    if len(kernel) != 2 or 0 in full or one_window:
        return None
    scale = _inverse_counts(in_shape, kernel, s, d, pb, pe, out_shape, bool(count_include_pad), _F32) if mode == "avg" else None
    k = native.kernels()
    planes = full[0] * full[1]
    inv = np.ascontiguousarray(np.broadcast_to(scale, full[:2] + tuple(out_shape))[0, 0], dtype=_F32) if mode == "avg" else _NO_SCALE
    (kh, kw), (sh, sw), (dh, dw) = kernel, s, d
    is_max = mode == "max"
    # unit strides and dilations with an output of the input's size: pool2d_same's flat passes
    same = (sh, sw, dh, dw) == (1, 1, 1, 1) and tuple(out_shape) == in_shape and pb[0] < kh and pb[1] < kw
    # 3x3 windows at strides 2: pool2d_s2's rows (no pass over the columns the stride skips)
    s2 = (kh, kw, sh, sw, dh, dw) == (3, 3, 2, 2, 1, 1)
    layout = POOL_SAME if same else POOL_S2 if s2 else POOL
    args = layout.pack(x=None, y=None, scale=inv, planes=planes, height=in_shape[0], width=in_shape[1],
                       out_h=out_shape[0], out_w=out_shape[1], scale_rows=inv.shape[0], scale_cols=inv.shape[1],
                       kh=kh, kw=kw, sh=sh, sw=sw, dh=dh, dw=dw, pt=pb[0], pl=pb[1], is_max=int(is_max))
    taps = planes * prod(out_shape) * prod(kernel)
    jobs: dict[int, native.TeamJob] = {}  # by the thread count the job was built for (a session's cap)
    min_part = max(1, JIT_SPLIT_WORK // (prod(out_shape) * prod(kernel)))

    def block(x3: np.ndarray, y3: np.ndarray) -> None:
        if same:
            k.pool2d_same(x3, y3, kh, kw, pb[0], pb[1], is_max, inv)
        elif s2:
            k.pool2d_s2(x3, y3, pb[0], pb[1], is_max, inv)
        else:
            k.pool2d(x3, y3, kh, kw, sh, sw, dh, dw, pb[0], pb[1], is_max, inv)

    def run(x: np.ndarray) -> np.ndarray:
        threads = parallel.current_threads()
        job = jobs.get(threads)
        if job is None:
            job = jobs[threads] = native.TeamJob(layout.part, args, taps, max_parts=planes, part_size=POOL_TEAM_PART,
                                                 cold_total=2 * JIT_SPLIT_WORK)
        y = np.empty(full, _F32)
        if not job(x, y):
            planes3 = x.reshape((planes,) + in_shape)
            y3 = y.reshape((planes,) + tuple(out_shape))
            native.split(planes, lambda lo, hi: block(planes3[lo:hi], y3[lo:hi]), min_part)
        return y

    return run


def _applies(op, x) -> bool:
    """A 4-D array pooled in float32 (MaxPool without its Indices output)."""
    return (type(x) is np.ndarray and x.ndim == 4 and _pool_dtype(x.dtype) == _F32 and x.dtype.kind == "f"
            and not getattr(op, "_with_indices", False))


@fast_path(("MaxPool", "AveragePool"), "compiled 2-D", when=_applies, prepared=True)
def compiled_2d(op, x):
    """2-D max/average pooling in float32 through native.loops' window loops over whole planes, prepared per input shape.

    MaxPool: exactly the reference's values (NaN-only windows NaN, padding ignored);
    AveragePool: the window's float32 sum in another order than the reference's shifted
    passes, times the same inverse count: within kh * kw * eps * sum|x| of it.
    """
    op._check_sizes(x)  # the node's sizes (check_alloc) before any work, as the reference does
    mode = "max" if op.onnx_node.op_type == "MaxPool" else "avg"
    count_include_pad = getattr(op, "count_include_pad", 0) or 0 if mode == "avg" else 0
    run = compiled_pool(x.shape, mode, op.kernel_shape, **op._kw, count_include_pad=count_include_pad)
    if run is None:
        return None
    if x.dtype == _F32 and x.flags.c_contiguous:
        return lambda x: (run(x),)
    dt = x.dtype
    return lambda x: (run(np.ascontiguousarray(x, dtype=_F32)).astype(dt, copy=False),)
