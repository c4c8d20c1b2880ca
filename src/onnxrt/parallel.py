"""Kernel resources the engine owns: per-thread scratch buffers and the intra-op thread pool.

numpy releases the GIL inside its loops, so kernels split large element-wise work over
a small pool of threads (``parallel_for``). The pool's size is the CPU count (at most 16),
``ONNXRT_NUM_THREADS`` overrides it, and a session's ``intra_op_num_threads`` caps it
for that session's kernels (``limit_threads``).
"""

from __future__ import annotations

import itertools
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from math import prod
from typing import Any

import numpy as np

# ---------------------------------------------------------------------------------------
# per-thread scratch buffers (a session may run from several threads at once)
# ---------------------------------------------------------------------------------------

_TLS = threading.local()
#: buffers above this many bytes are allocated per call instead of kept
_MAX_KEPT_BYTES = 256 << 20


def scratch(name: str, shape: Sequence[int], dtype: np.dtype) -> np.ndarray:
    """A per-thread reusable buffer of ``shape`` (uninitialised). Never return it to a caller."""
    dtype = np.dtype(dtype)
    size = prod(shape)
    nbytes = size * dtype.itemsize
    if nbytes > _MAX_KEPT_BYTES:
        return np.empty(shape, dtype)
    pool = getattr(_TLS, "buffers", None)
    if pool is None:
        pool = _TLS.buffers = {}
    key = (name, dtype)
    buf = pool.get(key)
    if buf is None or buf.size < size:
        buf = pool[key] = np.empty(max(size, 1024), dtype)
    return buf[:size].reshape(shape)


def release_scratch() -> None:
    """Drop this thread's scratch buffers (tests and memory-conscious callers)."""
    _TLS.buffers = {}


# ---------------------------------------------------------------------------------------
# intra-op parallelism for the element-wise kernels (numpy releases the GIL in its loops)
# ---------------------------------------------------------------------------------------

_EXECUTOR: ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()
#: below this many element operations per chunk, splitting costs more than it saves
MIN_PARALLEL_WORK = 1 << 17


def _default_threads() -> int:
    env = os.environ.get("ONNXRT_NUM_THREADS", "")
    if env.isdigit() and int(env) > 0:
        return int(env)
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):  # not Linux
        n = os.cpu_count() or 1
    return max(1, min(n, 16))


#: worker count of the kernels' thread pool (the calling thread works too); ONNXRT_NUM_THREADS overrides
KERNEL_THREADS = _default_threads()


def _executor() -> ThreadPoolExecutor:
    global _EXECUTOR
    if _EXECUTOR is None:
        with _EXECUTOR_LOCK:
            if _EXECUTOR is None:
                _EXECUTOR = ThreadPoolExecutor(max_workers=max(1, KERNEL_THREADS - 1), thread_name_prefix="onnxrt-kernel")
    return _EXECUTOR


class _Job:
    """Chunks of one parallel loop, taken in turn by whichever thread is free (the caller included).

    The caller never waits for a worker that has not started: it takes the remaining
    chunks itself and then waits only for chunks already running elsewhere. On a loaded
    machine a late worker therefore costs nothing; it finds no chunk left and returns.
    """

    __slots__ = ("bounds", "fn", "next", "done", "cond", "error")

    def __init__(self, bounds: list[int], fn: Callable[[int, int], None]):
        self.bounds = bounds
        self.fn = fn
        self.next = itertools.count()  # next() on a count is atomic under the GIL
        self.done = 0
        self.cond = threading.Condition()
        self.error: BaseException | None = None

    def run(self) -> None:
        n = len(self.bounds) - 1
        while True:
            i = next(self.next)
            if i >= n:
                return
            try:
                if self.error is None:
                    self.fn(self.bounds[i], self.bounds[i + 1])
            except BaseException as e:  # noqa: BLE001  (re-raised in the calling thread)
                self.error = e
            with self.cond:
                self.done += 1
                if self.done == n:
                    self.cond.notify_all()

    def wait(self) -> None:
        n = len(self.bounds) - 1
        with self.cond:
            while self.done < n:
                self.cond.wait()
        if self.error is not None:
            raise self.error


def session_threads(options: dict) -> int | None:
    """The session's ``intra_op_num_threads`` when set (> 0), else None (the kernel pool's default)."""
    n = getattr(options.get("session_options"), "intra_op_num_threads", 0) or 0
    return int(n) if n > 0 else None


@contextmanager
def limit_threads(threads: int | None) -> Iterator[None]:
    """Cap :func:`parallel_for` in this thread to ``threads`` (None: no cap) for the block."""
    if threads is None:
        yield
        return
    previous = getattr(_TLS, "threads", None)
    _TLS.threads = threads
    try:
        yield
    finally:
        _TLS.threads = previous


def parallel_for(n: int, fn: Callable[[int, int], None], work_per_item: int, threads: int | None = None) -> None:
    """Run ``fn(lo, hi)`` over [0, n) in contiguous chunks, shared with the kernel thread pool.

    ``work_per_item`` (element operations per item) decides how many threads are worth
    it; the range is cut in a few chunks per thread, taken dynamically by the caller and
    the pool's workers (see :class:`_Job`), so a busy pool or a loaded machine delays
    nothing. ``threads`` (and :func:`limit_threads`) cap the thread count (1: serial).
    Exceptions propagate.
    """
    limit = KERNEL_THREADS if threads is None or threads <= 0 else threads
    cap = getattr(_TLS, "threads", None)
    if cap is not None:
        limit = min(limit, cap)
    workers = min(limit, n, max(1, (n * work_per_item) // MIN_PARALLEL_WORK))
    if workers <= 1:
        fn(0, n)
        return
    # the workers' products run outside the run's scope: switch BLAS here, in the caller
    blas_single(n * work_per_item)
    parts = min(n, workers * 4)
    job = _Job([n * i // parts for i in range(parts + 1)], fn)
    ex = _executor()
    for _ in range(workers - 1):
        ex.submit(job.run)
    job.run()
    job.wait()


# ---------------------------------------------------------------------------------------
# BLAS threads and parallel matrix products
# ---------------------------------------------------------------------------------------

_BLAS_LIBS: list[tuple[Callable[[], int], Callable[[int], Any]]] | None = None
_BLAS_LOCK = threading.Lock()
_BLAS_DEPTH = 0
_BLAS_SAVED: list[int] = []


def _blas_libs() -> list[tuple[Callable[[], int], Callable[[int], Any]]]:
    """(get, set) thread-count functions of the BLAS libraries numpy loaded (found once).

    threadpoolctl finds the libraries; for OpenBLAS on its own pthreads pool the C
    functions are called directly (0.3 us instead of 3 us a call through threadpoolctl,
    which counts for small graphs, set and restored on every run). onnxrt's own lock
    serialises the changes, so threadpoolctl's controlling-thread bookkeeping is not needed.
    """
    global _BLAS_LIBS
    if _BLAS_LIBS is None:
        from threadpoolctl import ThreadpoolController

        found: list[tuple[Callable[[], int], Callable[[int], Any]]] = []
        for lib in ThreadpoolController().lib_controllers:
            if lib.user_api != "blas":
                continue
            get = set_ = None
            if lib.internal_api == "openblas" and getattr(lib, "threading_layer", "") == "pthreads":
                symbol = getattr(lib, "_get_symbol", None)
                if symbol is not None:
                    get, set_ = symbol("openblas_get_num_threads"), symbol("openblas_set_num_threads")
            if get is None or set_ is None:
                get, set_ = lib.get_num_threads, lib.set_num_threads
            found.append((get, set_))
        _BLAS_LIBS = found
    return _BLAS_LIBS


def _blas_enter(n: int) -> None:
    """The first of nested or concurrent blocks saves the libraries' thread counts and sets ``n``."""
    global _BLAS_DEPTH
    libs = _BLAS_LIBS if _BLAS_LIBS is not None else _blas_libs()
    with _BLAS_LOCK:
        if _BLAS_DEPTH == 0:
            _BLAS_SAVED[:] = [get() for get, _ in libs]
            for (_, set_), saved in zip(libs, _BLAS_SAVED):
                if saved != n:
                    set_(n)
        _BLAS_DEPTH += 1


def _blas_exit(n: int) -> None:
    """The last block to leave restores the saved thread counts."""
    global _BLAS_DEPTH
    with _BLAS_LOCK:
        _BLAS_DEPTH -= 1
        if _BLAS_DEPTH == 0:
            for (_, set_), saved in zip(_BLAS_LIBS or (), _BLAS_SAVED):
                if saved != n:
                    set_(saved)


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """BLAS libraries use ``n`` threads inside the block (nested and concurrent blocks share
    one setting; the first to enter saves the library's own, the last to leave restores it).

    The engine runs BLAS single-threaded and splits large products over its own pool
    (:func:`matmul`): OpenBLAS's static split stalls whenever one core is busy (a 512x512
    product measured 3.4 ms on one thread, 23 ms on two, on a shared 2-core machine),
    while the pool's chunks go to whichever thread is free.
    """
    _blas_enter(n)
    try:
        yield
    finally:
        _blas_exit(n)


#: multiply-adds from which OpenBLAS may split a product over its own threads (its
#: SMP threshold is 65536 x GEMM_MULTITHREAD_THRESHOLD=4; smaller ones always run on one)
BLAS_THREADED_WORK = 1 << 16

#: a run whose feeds or constants hold a tensor this large switches BLAS to one thread as
#: it starts (:class:`RunScope`): its products may be large, and not every kernel's direct
#: numpy product calls :func:`blas_single` (OpenBLAS's own two threads stalled a 64x576 @
#: 576x3136 product from 3.7 to 25 ms with the other core busy)
EAGER_BLAS_SIZE = 1 << 15


def blas_single(work: int) -> None:
    """Inside a run (:class:`RunScope`), switch BLAS to one thread before the first product
    of ``work`` multiply-adds or more; the run's end restores the library's own setting.

    Lazy because switching OpenBLAS's thread count costs ~5 us a run, more than a whole
    small graph's products, which never reach BLAS's threaded path anyway. Kernels call it
    before large BLAS products (:func:`matmul` and :func:`parallel_for` do it for theirs);
    outside a run it does nothing.
    """
    if work >= BLAS_THREADED_WORK:
        scope = getattr(_TLS, "scope", None)
        if scope is not None and not scope.blas:
            _blas_enter(1)
            scope.blas = True


class RunScope:
    """What every run of the engine enters: ``limit_threads(threads)`` and BLAS
    single-threaded, from the start when ``eager`` (a model or feeds with large tensors),
    else from the first large product on (:func:`blas_single`): switching costs ~5 us, more
    than a small graph's products, which never reach BLAS's threads. A class rather than
    generator-based managers because its cost counts on small graphs (a one-node model
    runs in ~20 us). Nested scopes (a run inside a kernel) defer to the outer one."""

    __slots__ = ("blas", "eager", "outer", "previous", "threads")

    def __init__(self, threads: int | None, eager: bool = True):
        self.threads = threads
        self.eager = eager
        self.previous: int | None = None
        self.blas = False
        self.outer: RunScope | None = None

    def __enter__(self) -> RunScope:
        self.outer = getattr(_TLS, "scope", None)
        _TLS.scope = self
        if self.eager:
            _blas_enter(1)
            self.blas = True
        if self.threads is not None:
            self.previous = getattr(_TLS, "threads", None)
            _TLS.threads = self.threads
        return self

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            _TLS.threads = self.previous
        _TLS.scope = self.outer
        if self.blas:
            self.blas = False
            _blas_exit(1)


#: multiply-adds below which a product runs in one call
MIN_PARALLEL_MATMUL = 1 << 20


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b)`` with large products split over the kernel thread pool by column
    blocks of ``b``, or by row blocks of a 2-D ``a`` when ``b`` has few columns (each block
    a single-threaded BLAS call; numpy releases the GIL).

    Same broadcasting and result as ``np.matmul``; ``out`` (optional) receives it.
    """
    if out is None and a.ndim == 2 and b.ndim == 2:
        # small 2-D products (the hot case of small graphs): np.dot, faster to dispatch than np.matmul
        small = a.shape[0] * a.shape[1] * b.shape[1]
        if small < MIN_PARALLEL_MATMUL:
            if small >= BLAS_THREADED_WORK:
                blas_single(small)
            return np.dot(a, b)
    n = b.shape[-1] if b.ndim >= 2 else 1
    k = a.shape[-1]
    rows = a.shape[-2] if a.ndim >= 2 else 1
    batch = max(1, a.size // max(1, rows * k)) if a.ndim > 2 else 1
    if b.ndim > 2:
        batch = max(batch, b.size // max(1, k * n))
    work = batch * rows * k
    blas_single(work * n)
    if b.ndim < 2 or work * n < MIN_PARALLEL_MATMUL or KERNEL_THREADS < 2:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    by_rows = n < 64 and a.ndim == 2 and rows >= 64
    if n < 64 and not by_rows:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    if out is None:
        out = np.empty(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]) + (rows, n), np.result_type(a, b))
    if by_rows:
        # few columns (a late convolution layer: 7x7 = 49 pixels): split the rows of ``a``
        # (output channels) instead, in whole 16-row panels
        row_work = k * n * 16

        def row_block(lo: int, hi: int) -> None:
            np.matmul(a[lo * 16:hi * 16], b, out=out[..., lo * 16:hi * 16, :])

        parallel_for((rows + 15) // 16, row_block, work_per_item=row_work)
        return out

    def block(lo: int, hi: int) -> None:
        np.matmul(a, b[..., lo:hi], out=out[..., lo:hi])

    # chunks of whole 16-column panels keep BLAS's inner loops full
    panels = (n + 15) // 16

    def panel_block(lo: int, hi: int) -> None:
        block(lo * 16, min(n, hi * 16))

    parallel_for(panels, panel_block, work_per_item=work * 16)
    return out
