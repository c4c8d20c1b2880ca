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

from .native.blas import _blas_enter, _blas_exit, _blas_libs, _blas_set, blas_sgemm_address, blas_threads  # noqa: F401

# ---------------------------------------------------------------------------------------
# per-thread scratch buffers (a session may run from several threads at once)
# ---------------------------------------------------------------------------------------

class _ThreadState(threading.local):
    """What a thread keeps: its scratch buffers, thread cap, run scope and whether it runs a
    pool loop's chunk. Class-level defaults: a missing attribute of a threading.local costs
    0.7 us to look up (an exception inside getattr), a default 0.07."""

    buffers: dict | None = None
    threads: int | None = None
    scope: Any = None
    in_loop: bool = False
    #: kernels take their numpy paths (a session's first run: onnxrt.native.no_jit_run)
    no_jit: bool = False


_TLS = _ThreadState()
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

    def run(self, no_jit: bool = False) -> None:
        n = len(self.bounds) - 1
        saved, _TLS.no_jit = _TLS.no_jit, no_jit  # a worker's chunks follow the caller's tier
        try:
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
        finally:
            _TLS.no_jit = saved

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


def current_threads() -> int:
    """The threads a kernel may use here: KERNEL_THREADS, capped by :func:`limit_threads`."""
    cap = getattr(_TLS, "threads", None)
    return KERNEL_THREADS if cap is None else min(KERNEL_THREADS, cap)


def parallel_for(
    n: int, fn: Callable[[int, int], None], work_per_item: int, threads: int | None = None, blas: bool = True
) -> None:
    """Run ``fn(lo, hi)`` over [0, n) in contiguous chunks, shared with the kernel thread pool.

    ``work_per_item`` (element operations per item) decides how many threads are worth
    it; the range is cut in a few chunks per thread, taken dynamically by the caller and
    the pool's workers (see :class:`_Job`), so a busy pool or a loaded machine delays
    nothing. ``threads`` (and :func:`limit_threads`) cap the thread count (1: serial).
    ``blas=False`` says that no chunk calls BLAS (compiled loops): the BLAS thread count is
    then left alone (setting and restoring it costs 20-30 us when the machine was idle).
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
    parts = min(n, workers * 4)
    job = _Job([n * i // parts for i in range(parts + 1)], fn)
    ex = _executor()
    # chunks that multiply matrices must not each start BLAS's own threads: one thread
    # per chunk while the loop runs (nested and concurrent loops share the setting)
    if blas:
        _blas_enter(1)
    outer_loop = getattr(_TLS, "in_loop", False)
    _TLS.in_loop = True  # products in this thread's chunks must not boost BLAS's threads
    scope = getattr(_TLS, "scope", None)
    cold = scope.cold() if scope is not None and not outer_loop else None
    if cold is not None:
        cold.__enter__()
    try:
        for _ in range(workers - 1):
            ex.submit(job.run, _TLS.no_jit)
        job.run(_TLS.no_jit)
        job.wait()
    finally:
        if cold is not None:
            cold.__exit__()
        _TLS.in_loop = outer_loop
        if blas:
            _blas_exit(1)


# ---------------------------------------------------------------------------------------
# BLAS threads and parallel matrix products
# ---------------------------------------------------------------------------------------

class _Cold:
    """The team's workers asleep while a pool loop or a threaded product runs in a hot run."""

    __slots__ = ()

    def __enter__(self) -> None:
        RUN_HEAT(-COLD)  # type: ignore[misc]

    def __exit__(self, *exc: object) -> None:
        RUN_HEAT(COLD)  # type: ignore[misc]


#: ``team_gemm(a, b, out)`` of onnxrt.native (set when it loads): a product inside a
#: large run split by blocks of columns over the team, or None when it does not take it
TEAM_GEMM: Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray | None] | None = None

#: jobs offered to the team of compiled workers in this process (onnxrt.native.team_split;
#: a short one runs on the caller when the workers sleep)
TEAM_JOBS = [0]
#: team jobs a session's last run must have offered for its next run to keep the workers awake
HOT_RUN_JOBS = 4

#: what a cold stretch subtracts from the team's HOT count (native.team.COLD)
COLD = 1 << 20

#: ``heat(+1 / -1)`` of the team of compiled workers (onnxrt.native.team), set when
#: the team starts: large runs keep its workers awake (True: done, undo it with -1)
RUN_HEAT: Callable[[int], bool] | None = None


class RunScope:
    """What every run of the engine enters: ``limit_threads(threads)`` and the run's BLAS
    threads. A run whose model or feeds hold large tensors (``eager``) sets BLAS to one
    thread from its start: kernels' own numpy products (an RNN's input projection, row
    sums as products with ones...) then never wake BLAS's threads for a medium product,
    which costs more than it saves; :func:`matmul` lets the large products it is given
    (8M multiply-adds and more) use BLAS's threads for their duration, OpenBLAS's own
    split packing each operand once (splitting them over onnxrt's pool instead repacked
    an operand per chunk: light_resnet50 ran 1.4x and light_squeezenet 1.5x slower).
    ``threads`` (a session's ``intra_op_num_threads``) caps both. Small graphs leave BLAS
    alone: their products stay below OpenBLAS's threading threshold. Kernels split over
    the pool run BLAS single-threaded inside their loops (:func:`parallel_for`). A class
    rather than a generator-based manager because its cost counts on small graphs. Nested
    scopes (a run inside a kernel) defer to the outer one. ``uses_blas`` False (a plan none
    of whose kernels calls BLAS) leaves BLAS's thread count alone: setting and restoring
    it cost 25-45 us a run behind a large kernel."""

    __slots__ = ("blas", "eager", "heated", "jobs", "outer", "owner", "previous", "threads", "uses_blas")

    def __init__(self, threads: int | None, eager: bool = False, owner: Any = None, uses_blas: bool = True):
        self.threads = threads
        self.eager = eager
        self.uses_blas = uses_blas
        #: the session running (its ``team_jobs``, the team jobs of its last run, decides
        #: whether this run keeps the team's workers awake)
        self.owner = owner
        self.jobs = 0
        self.previous: int | None = None
        self.blas = 0
        self.heated = False
        self.outer: RunScope | None = None

    def __enter__(self) -> RunScope:
        self.outer = getattr(_TLS, "scope", None)
        _TLS.scope = self
        if self.threads is not None:
            self.previous = getattr(_TLS, "threads", None)
            _TLS.threads = self.threads
        if self.outer is None:
            n = 1 if self.eager else self.threads if self.threads is not None and self.threads < KERNEL_THREADS else 0
            if n and self.uses_blas:
                self.blas = n
                _blas_enter(n)
            if self.owner is not None:
                self.jobs = TEAM_JOBS[0]
                # only a run whose previous one gave the team several jobs: a worker kept awake
                # for a run of one kernel that does not use it only costs (a pool loop in it
                # then wakes it twice: Cast and ReduceSum of 1M elements ran 1.5x slower)
                if (self.eager and RUN_HEAT is not None and getattr(self.owner, "team_jobs", 0) >= HOT_RUN_JOBS
                        and (self.threads is None or self.threads > 1)):
                    self.heated = RUN_HEAT(1)
        return self

    def cold(self) -> _Cold | None:
        """For a pool loop or a threaded BLAS product of this run: the team's workers sleep
        for its duration (they would compete for the cores), when the run keeps them hot."""
        top = self
        while top.outer is not None:
            top = top.outer
        return _Cold() if top.heated else None

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            _TLS.threads = self.previous
        _TLS.scope = self.outer
        if self.heated:
            self.heated = False
            RUN_HEAT(-1)  # type: ignore[misc]
        if self.owner is not None and self.outer is None:
            self.owner.team_jobs = TEAM_JOBS[0] - self.jobs
        if self.blas:
            n, self.blas = self.blas, 0
            _blas_exit(n)


#: multiply-adds from which OpenBLAS splits a product over its threads (its SMP threshold,
#: 65536 x GEMM_MULTITHREAD_THRESHOLD=4); smaller products always run on the calling thread
BLAS_THREADED_WORK = 1 << 18
#: multiply-adds from which a product is worth BLAS's threads: below, waking them (tens of
#: microseconds on a virtual machine) costs more than the second core saves, and :func:`matmul`
#: runs the product single-threaded (measured on two cores: 3.6M multiply-adds 2x faster
#: on one thread, 25M 1.4x faster on two)
BLAS_THREADS_FROM = 1 << 23
#: multiply-adds per batch item below which a batched product splits its items over the
#: pool (larger items run one by one on BLAS's own threads)
SMALL_BATCH_ITEM = BLAS_THREADS_FROM
#: multiply-adds of a batched product from which its items split over the pool (waking the
#: pool's worker and handing out chunks costs ~100 us here: Attention's 8 heads of 1M
#: multiply-adds ran 340 us split, 250 us on one thread)
MIN_PARALLEL_MATMUL = 1 << 25
#: a run whose feeds or constants hold a tensor this large holds BLAS at one thread (RunScope)
EAGER_BLAS_SIZE = 1 << 15


def _plain(a: np.ndarray, b: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    if out is None:
        return np.dot(a, b) if a.ndim == 2 and b.ndim == 2 else np.matmul(a, b)
    return np.matmul(a, b, out=out)


def _product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None, work: int) -> np.ndarray:
    """One np.matmul/np.dot call with ``work`` multiply-adds per BLAS call: on BLAS's
    threads from BLAS_THREADS_FROM on (for its duration inside a run that holds BLAS at one
    thread, unless called from a pool loop), on one thread below, where OpenBLAS would wake
    its threads for too little."""
    if work < BLAS_THREADED_WORK or KERNEL_THREADS < 2:
        return _plain(a, b, out)
    scope = getattr(_TLS, "scope", None)
    single = scope is not None and scope.blas == 1
    if work < BLAS_THREADS_FROM:
        if single or getattr(_TLS, "in_loop", False):
            return _plain(a, b, out)
        _blas_enter(1)
        try:
            return _plain(a, b, out)
        finally:
            _blas_exit(1)
    if single and not getattr(_TLS, "in_loop", False):
        n = min(KERNEL_THREADS, scope.threads or KERNEL_THREADS)
        if n > 1 and TEAM_GEMM is not None and (c := TEAM_GEMM(a, b, out)) is not None:
            return c
        if n > 1:
            cold = scope.cold()
            if cold is not None:
                cold.__enter__()
            _blas_set(n)
            try:
                return _plain(a, b, out)
            finally:
                _blas_set(1)
                if cold is not None:
                    cold.__exit__()
    return _plain(a, b, out)


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b)``: large 2-D products on BLAS's own threads, medium ones on one
    thread; batched products of many small items (attention heads, grouped convolutions)
    split by items over the kernel pool, each item one single-threaded BLAS call (numpy
    releases the GIL).

    Same broadcasting and result as ``np.matmul``; ``out`` (optional, C-contiguous)
    receives it.
    """
    if a.ndim < 2 or b.ndim < 2:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    rows, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    item = rows * k * n
    if a.ndim == 2 and b.ndim == 2:
        return _product(a, b, out, item)
    batch_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    batch = prod(batch_shape)
    if batch < 2 or item >= SMALL_BATCH_ITEM or batch * item < MIN_PARALLEL_MATMUL or KERNEL_THREADS < 2:
        return _product(a, b, out, item)
    if out is None:
        out = np.empty(batch_shape + (rows, n), np.result_type(a, b))
    elif not out.flags.c_contiguous:
        return np.matmul(a, b, out=out)
    a3 = np.broadcast_to(a, batch_shape + a.shape[-2:]).reshape((batch,) + a.shape[-2:])
    b3 = np.broadcast_to(b, batch_shape + b.shape[-2:]).reshape((batch,) + b.shape[-2:])
    o3 = out.reshape((batch, rows, n))

    def items(lo: int, hi: int) -> None:
        np.matmul(a3[lo:hi], b3[lo:hi], out=o3[lo:hi])

    parallel_for(batch, items, work_per_item=item)
    return out
