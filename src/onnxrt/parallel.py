"""Kernel resources the engine owns: scratch buffers, the intra-op thread pool, the run scope, fork safety.

numpy releases the GIL inside its loops, so kernels split large element-wise work over
a small pool of threads (``parallel_for``). The pool's size is the CPU count (at most 16),
``ONNXRT_NUM_THREADS`` overrides it, and a session's ``intra_op_num_threads`` caps it
for that session's kernels: the cap is a field of the session's
:class:`~onnxrt.context.ExecutionContext`, which every run enters through
:class:`RunScope` (``limit_threads`` overrides it for a block, in tests).

Per-thread state (``_TLS``) only says which run scope, hence which context, the thread
works for; a pool worker taking a chunk of a loop takes the caller's scope, cap and tier
for the chunk. Nothing here is per session: what a session owns lives in its context.

Fork safety: ``os.fork()`` while another thread is inside a multi-threaded BLAS call
deadlocks in OpenBLAS's own fork handler. The handlers registered here wait, before the
fork, until no onnxrt run that may call BLAS with several threads, and no threaded
product, is in flight (new ones wait until the fork is done), and give the child a fresh
pool; :mod:`onnxrt.native.blas` and :mod:`onnxrt.native.team` reset their own state in
the child. See docs/threads.md for what cannot be helped.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from math import prod
from typing import Any

import numpy as np

from .context import ExecutionContext, ProductPolicy
from .native.blas import _blas_boost, _blas_enter, _blas_exit, _blas_libs, blas_sgemm_address, blas_threads  # noqa: F401

# ---------------------------------------------------------------------------------------
# per-thread scratch buffers (a session may run from several threads at once)
# ---------------------------------------------------------------------------------------

class _ThreadState(threading.local):
    """What a thread keeps: the run scope it works for (whose ``context`` is the session's
    execution context), its thread cap, whether it runs a pool loop's chunk, and scratch
    buffers for kernels called outside any run. Class-level defaults: a missing attribute
    of a threading.local costs 0.7 us to look up (an exception inside getattr), a default 0.07."""

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
    """A reusable buffer of ``shape`` (uninitialised), this thread's for the session it runs
    (kept by the session's execution context, freed with it; per thread outside any run).
    Never return it to a caller."""
    dtype = np.dtype(dtype)
    size = prod(shape)
    nbytes = size * dtype.itemsize
    if nbytes > _MAX_KEPT_BYTES:
        return np.empty(shape, dtype)
    scope = _TLS.scope
    if scope is not None:
        pool = scope.context.buffers()
    else:
        pool = _TLS.buffers
        if pool is None:
            pool = _TLS.buffers = {}
    key = (name, dtype)
    buf = pool.get(key)
    if buf is None or buf.size < size:
        buf = pool[key] = np.empty(max(size, 1024), dtype)
    return buf[:size].reshape(shape)


def release_scratch() -> None:
    """Drop this thread's scratch buffers (those of the session it runs for, if any, and its own)."""
    _TLS.buffers = {}
    if _TLS.scope is not None:
        _TLS.scope.context.release_scratch()


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

    def run(self, no_jit: bool = False, scope: Any = None, threads: int | None = None) -> None:
        n = len(self.bounds) - 1
        # a worker's chunks follow the caller's tier, run scope (the session's context) and cap
        tls = _TLS
        saved = tls.no_jit, tls.scope, tls.threads, tls.in_loop
        tls.no_jit, tls.scope, tls.threads, tls.in_loop = no_jit, scope, threads, True
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
            tls.no_jit, tls.scope, tls.threads, tls.in_loop = saved

    def wait(self) -> None:
        n = len(self.bounds) - 1
        with self.cond:
            while self.done < n:
                self.cond.wait()
        if self.error is not None:
            raise self.error


def session_threads(options: dict) -> int | None:
    """The ``intra_op_num_threads`` (> 0, else None) of a kernel's options. The engine does not
    need it: a session's cap is its execution context's ``threads``, which every run enters
    (:class:`RunScope`); kept for callers of the kernels outside the engine."""
    return ExecutionContext.from_options(options.get("session_options")).threads


@contextmanager
def limit_threads(threads: int | None) -> Iterator[None]:
    """Cap this thread's kernels to ``threads`` (None: no cap) for the block, over the cap of
    the session it runs for (tests; the engine sets a session's cap once, in its context)."""
    if threads is None:
        yield
        return
    previous = _TLS.threads
    _TLS.threads = threads
    try:
        yield
    finally:
        _TLS.threads = previous


def current_threads() -> int:
    """The threads a kernel may use here: KERNEL_THREADS, capped by the session's context
    (the run's scope) or :func:`limit_threads`."""
    cap = _TLS.threads
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
    cap = _TLS.threads
    if cap is not None:
        limit = min(limit, cap)
    workers = min(limit, n, max(1, (n * work_per_item) // MIN_PARALLEL_WORK))
    if workers <= 1:
        fn(0, n)
        return
    scope = _TLS.scope
    if scope is not None:
        scope.context.note_threads(workers)
    parts = min(n, workers * 4)
    job = _Job([n * i // parts for i in range(parts + 1)], fn)
    ex = _executor()
    # chunks that multiply matrices must not each start BLAS's own threads: one thread
    # per chunk while the loop runs (nested and concurrent loops share the setting)
    if blas:
        _blas_enter(1)
    outer_loop = _TLS.in_loop
    _TLS.in_loop = True  # products in this thread's chunks must not boost BLAS's threads
    cold = scope.cold() if scope is not None and not outer_loop else None
    if cold is not None:
        cold.__enter__()
    try:
        no_jit, cap = _TLS.no_jit, _TLS.threads
        for _ in range(workers - 1):
            ex.submit(job.run, no_jit, scope, cap)
        job.run(no_jit, scope, cap)
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

class _NativeHooks:
    """What the compiled layer gives this module once it loads (register_native_hooks):
    code, not state; the team's own state is onnxrt.native.team's."""

    __slots__ = ("team_gemm", "heat", "arena")

    def __init__(self) -> None:
        #: ``team_gemm(a, b, out)`` of onnxrt.native: a product inside a large run split by
        #: blocks over the team, or None when it does not take it
        self.team_gemm: Callable[[np.ndarray, np.ndarray, np.ndarray | None], np.ndarray | None] | None = None
        #: ``heat(+1 / -1)`` of the team of compiled workers (onnxrt.native.team): large runs
        #: keep its workers awake (True: done, undo it with -1)
        self.heat: Callable[[int], bool] | None = None
        #: onnxrt.native.arena's ``Scope`` class: numpy's allocations inside a large run come
        #: from the arena (large blocks kept for the next run instead of faulted in again)
        self.arena: Callable[[], Any] | None = None


_HOOKS = _NativeHooks()


def register_native_hooks(team_gemm: Callable[..., np.ndarray | None] | None = None,
                          heat: Callable[[int], bool] | None = None, arena: Callable[[], Any] | None = None) -> None:
    """Called by onnxrt.native (``team_gemm``) and onnxrt.native.team (``heat``) when they
    load: the run scope and :func:`matmul` then use them (None leaves a hook as it is)."""
    if team_gemm is not None:
        _HOOKS.team_gemm = team_gemm
    if heat is not None:
        _HOOKS.heat = heat
    if arena is not None:
        _HOOKS.arena = arena


class _Cold:
    """The team's workers asleep while a pool loop or a threaded product runs in a hot run."""

    __slots__ = ()

    def __enter__(self) -> None:
        _HOOKS.heat(-COLD)  # type: ignore[misc]

    def __exit__(self, *exc: object) -> None:
        _HOOKS.heat(COLD)  # type: ignore[misc]


#: team jobs a session's last run must have offered for its next run to keep the workers awake
HOT_RUN_JOBS = 4

#: what a cold stretch subtracts from the team's HOT count (native.team.COLD)
COLD = 1 << 20


def note_team_job(threads: int) -> None:
    """A kernel offered a job to the team of compiled workers with ``threads`` threads
    (onnxrt.native.team_split): counted for this thread's run (a run that offered several
    keeps the workers awake next time, see :class:`RunScope`) and for its context's peak."""
    scope = _TLS.scope
    if scope is not None:
        scope.root.jobs += 1
        scope.context.note_threads(threads)


# ---------------------------------------------------------------------------------------
# fork safety
# ---------------------------------------------------------------------------------------

#: one entry per section in flight in which BLAS may run several threads: runs that leave
#: BLAS multi-threaded, threaded products (deque's append and pop are atomic)
_IN_FLIGHT: deque = deque()
#: a fork is being prepared: new sections wait for _FORK_DONE
_FORKING = False
_FORK_DONE = threading.Event()
_FORK_DONE.set()
#: seconds a fork waits for the sections in flight before it goes ahead anyway
#: (ONNXRT_FORK_WAIT; a run whose BLAS is multi-threaded is short: a Loop of many
#: iterations is what this bounds)
FORK_WAIT = float(os.environ.get("ONNXRT_FORK_WAIT", "30") or 30)


def gate_enter() -> None:
    """A section that may call BLAS with several threads starts (waits while a fork is prepared)."""
    _IN_FLIGHT.append(None)
    if _FORKING:
        _gate_wait()


def _gate_wait() -> None:
    # back out until the fork is done (the fork waits for sections in flight, not for this one)
    while _FORKING:
        _gate_exit()
        _FORK_DONE.wait()
        _IN_FLIGHT.append(None)


def _gate_exit() -> None:
    try:
        _IN_FLIGHT.pop()
    except IndexError:  # a child forked inside the section: the parent's entries are gone
        pass


gate_exit = _gate_exit


def _before_fork() -> None:
    """os.fork() is about to run: wait until no onnxrt section that may run BLAS's threads is
    in flight in another thread (new ones wait), so that OpenBLAS's own fork handler, which
    stops its threads, never finds a product running on them."""
    global _FORKING
    _FORK_DONE.clear()
    _FORKING = True
    scope = _TLS.scope
    own = 1 if scope is not None and scope.root.gated else 0  # a fork from inside a run (a trace callback)
    deadline = time.monotonic() + FORK_WAIT
    delay = 1e-4
    while len(_IN_FLIGHT) > own and time.monotonic() < deadline:
        time.sleep(delay)
        delay = min(delay * 2, 5e-3)


def _after_fork_in_parent() -> None:
    global _FORKING
    _FORKING = False
    _FORK_DONE.set()


def _after_fork_in_child() -> None:
    # the child has none of its parent's other threads: no sections in flight, a fresh pool
    # (the parent's workers are not copied) and fresh locks
    global _FORKING, _FORK_DONE, _EXECUTOR, _EXECUTOR_LOCK
    _IN_FLIGHT.clear()
    _FORKING = False
    _FORK_DONE = threading.Event()
    _FORK_DONE.set()
    _EXECUTOR = None
    _EXECUTOR_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_after_fork_in_child)


class RunScope:
    """What every run of the engine enters: the session's execution context (its thread cap
    applies to the thread and to the pool workers taking the run's chunks) and the run's
    BLAS threads. A run whose model or feeds hold large tensors (``eager``) sets BLAS to one
    thread from its start: kernels' own numpy products (an RNN's input projection, row
    sums as products with ones...) then never wake BLAS's threads for a medium product,
    which costs more than it saves; :func:`matmul` lets the large products it is given
    (8M multiply-adds and more) use BLAS's threads for their duration, OpenBLAS's own
    split packing each operand once (splitting them over onnxrt's pool instead repacked
    an operand per chunk: light_resnet50 ran 1.4x and light_squeezenet 1.5x slower).
    ``context.threads`` (a session's ``intra_op_num_threads``) caps both. Small graphs leave BLAS
    alone: their products stay below OpenBLAS's threading threshold. Kernels split over
    the pool run BLAS single-threaded inside their loops (:func:`parallel_for`). A class
    rather than a generator-based manager because its cost counts on small graphs. Nested
    scopes (a run inside a kernel) defer to the outer one. ``uses_blas`` False (a plan none
    of whose kernels calls BLAS) leaves BLAS's thread count alone: setting and restoring
    it cost 25-45 us a run behind a large kernel.

    ``context`` is the session's :class:`~onnxrt.context.ExecutionContext`; an int or None
    (a bare cap, for tests and callers outside a session) makes a context for the scope.
    A run that leaves BLAS multi-threaded is a section fork waits for (see ``_before_fork``)."""

    __slots__ = ("arena", "blas", "context", "eager", "gated", "heated", "jobs", "outer", "owner", "previous", "root",
                 "threads", "uses_blas", "option", "measured", "started", "work")

    def __init__(self, context: ExecutionContext | int | None, eager: bool = False, owner: Any = None,
                 uses_blas: bool = True):
        if type(context) is not ExecutionContext:
            context = ExecutionContext(context)  # type: ignore[arg-type]
        self.context = context
        self.threads = context.threads
        self.eager = eager
        self.uses_blas = uses_blas
        #: the session running (its ``team_jobs``, the team jobs of its last run, decides
        #: whether this run keeps the team's workers awake)
        self.owner = owner
        #: team jobs offered during this run (counted on the outermost scope)
        self.jobs = 0
        self.previous: int | None = None
        self.blas = 0
        self.heated = False
        self.gated = False
        self.arena: Any = None
        self.outer: RunScope | None = None
        self.root: RunScope = self
        #: the run's ProductPolicy option, whether it is measured, its start, its product work
        self.option = 0
        self.measured = False
        self.started = 0.0
        self.work = 0

    def __enter__(self) -> RunScope:
        outer = self.outer = _TLS.scope
        _TLS.scope = self
        threads = self.threads
        if threads is not None:
            self.previous = _TLS.threads
            _TLS.threads = threads
        if outer is None:
            self.root = self
            context = self.context
            self.option, self.measured = context.products.begin()
            self.work = 0
            self.started = time.perf_counter()
            if not context.peak_threads:
                context.peak_threads = 1  # the run's own thread
            n = 1 if self.eager else threads if threads is not None and threads < KERNEL_THREADS else 0
            if self.uses_blas:
                if n:
                    self.blas = n
                    _blas_enter(n)
                if n != 1:  # BLAS may run its threads in this run's kernels: fork waits for it
                    self.gated = True
                    gate_enter()
            self.jobs = 0
            # only a run whose previous one gave the team several jobs: a worker kept awake
            # for a run of one kernel that does not use it only costs (a pool loop in it
            # then wakes it twice: Cast and ReduceSum of 1M elements ran 1.5x slower)
            if (self.eager and self.owner is not None and _HOOKS.heat is not None
                    and getattr(self.owner, "team_jobs", 0) >= HOT_RUN_JOBS and (threads is None or threads > 1)):
                self.heated = _HOOKS.heat(1)
            if self.eager and _HOOKS.arena is not None and context.arena:
                self.arena = _HOOKS.arena(self.owner)
                self.arena.__enter__()
        else:
            self.root = outer.root
        return self

    def cold(self) -> _Cold | None:
        """For a pool loop or a threaded BLAS product of this run: the team's workers sleep
        for its duration (they would compete for the cores), when the run keeps them hot."""
        return _Cold() if self.root.heated else None

    def __exit__(self, *exc: object) -> None:
        if self.threads is not None:
            _TLS.threads = self.previous
        _TLS.scope = self.outer
        if self.heated:
            self.heated = False
            _HOOKS.heat(-1)  # type: ignore[misc]
        if self.outer is None:
            self.context.products.end(self.option, self.measured, time.perf_counter() - self.started, self.work)
            if self.owner is not None:
                self.owner.team_jobs = self.jobs
            if self.gated:
                self.gated = False
                _gate_exit()
            if self.blas:
                n, self.blas = self.blas, 0
                _blas_exit(n)
            if self.arena is not None:
                arena, self.arena = self.arena, None
                arena.__exit__(None, None, None)


#: rows up to which a product is memory-bound on B (each of B's elements read by every row)
FEW_ROWS = 8
#: elements of B from which such a product runs on BLAS's threads (1 MiB of float32)
FEW_ROWS_MIN_ELEMENTS = 1 << 18
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


#: rows of the weights per chunk of :func:`_few_rows_transposed`
FEW_ROWS_BLOCK = 64


def _few_rows_transposed(a: np.ndarray, w: np.ndarray, out: np.ndarray | None) -> np.ndarray:
    """``a @ w.T`` for a few rows ``a`` (m, K) and C-contiguous weights ``w`` (N, K), a Gemm's
    transB as linear layers are exported: blocks of w's rows over the pool, each row of the
    result's block one matrix-vector product that reads its block of w once. (The team's
    split of the result's columns, one single-threaded sgemm per block, packed its block of
    w first: vgg19's (1, 25088) @ W.T took 34 ms against 10 on BLAS's two threads; this
    split takes 10.)"""
    m, n = a.shape[0], w.shape[0]
    c = np.empty((m, n), a.dtype) if out is None or not out.flags.c_contiguous else out

    def chunk(lo: int, hi: int) -> None:
        r0, r1 = lo * FEW_ROWS_BLOCK, min(n, hi * FEW_ROWS_BLOCK)
        for r in range(m):
            np.dot(w[r0:r1], a[r], out=c[r, r0:r1])

    parallel_for((n + FEW_ROWS_BLOCK - 1) // FEW_ROWS_BLOCK, chunk, FEW_ROWS_BLOCK * w.shape[1] * m)
    if out is not None and c is not out:
        out[...] = c
        return out
    return c


def _product(a: np.ndarray, b: np.ndarray, out: np.ndarray | None, work: int,
             bias: np.ndarray | None = None) -> np.ndarray:
    """``a @ b`` (+ ``bias``, one value per column, added in place: a linear layer's, see
    :func:`matmul`), by :func:`_product_on`."""
    y, added = _product_on(a, b, out, work, bias)
    if bias is not None and not added:
        np.add(y, bias, out=y)
    return y


def _product_on(a: np.ndarray, b: np.ndarray, out: np.ndarray | None, work: int,
                bias: np.ndarray | None) -> tuple[np.ndarray, bool]:
    """One np.matmul/np.dot call with ``work`` multiply-adds per BLAS call: on BLAS's
    threads from BLAS_THREADS_FROM on (for its duration inside a run that holds BLAS at one
    thread, unless called from a pool loop), on one thread below, where OpenBLAS would wake
    its threads for too little. Returns the result and whether ``bias`` was added (by the
    team's parts, each to its block while in cache)."""
    if work < BLAS_THREADED_WORK or KERNEL_THREADS < 2:
        return _plain(a, b, out), False
    scope = _TLS.scope
    single = scope is not None and scope.root.blas == 1
    in_loop = _TLS.in_loop
    # a product of a few rows reads each element of B once or a few times: memory-bound, it
    # gains from a second core's share of the bandwidth long before its multiply-adds would
    # pay for BLAS's threads (gpt2's decoding step: (1, 768) @ (768, 3072), 7 MB of weights
    # each, 1.65x faster on BLAS's two threads; the team's column split, each part an sgemm
    # that packs its block of B, was 1.8x slower than one thread). Only in runs whose
    # ProductPolicy option is BLAS's threads: their spinning after ConvNeXt's classifier,
    # (1, 768) @ (768, 1000), slowed the start of every next run by 40 ms
    few_shape = single and not in_loop and a.ndim == 2 and a.shape[0] <= FEW_ROWS and b.size >= FEW_ROWS_MIN_ELEMENTS
    if few_shape:  # (its work counts for ProductPolicy whichever way it runs)
        scope.root.work += work
    few_rows = few_shape and scope.root.option == ProductPolicy.BLAS
    if work < BLAS_THREADS_FROM and not few_rows:
        if single or in_loop:
            return _plain(a, b, out), False
        _blas_enter(1)
        try:
            return _plain(a, b, out), False
        finally:
            _blas_exit(1)
    if single and not in_loop:
        n = min(KERNEL_THREADS, _TLS.threads or KERNEL_THREADS)
        root = scope.root
        if not few_shape:
            root.work += work
        if n > 1 and root.option == ProductPolicy.TEAM and _HOOKS.team_gemm is not None:
            if few_shape and b.T.flags.c_contiguous and a.dtype == b.dtype and (out is None or out.dtype == a.dtype):
                # a few rows times transposed weights (a Gemm's transB, a classifier as
                # exported): on the pool, not on BLAS's threads, which spin for ~0.1 s after
                # a product (OpenBLAS's default timeout, 2**28 cycles) on the core the team's
                # next job needs: vgg19's (1, 25088) @ W.T on BLAS's threads made the
                # convolutions of the next run 1.5x slower
                return _few_rows_transposed(a, b.T, out), False
            if (c := _HOOKS.team_gemm(a, b, out, col_bias=bias)) is not None:
                return c, bias is not None
        if n > 1:
            cold = scope.cold()
            if cold is not None:
                cold.__enter__()
            gate_enter()  # BLAS's threads run: a fork waits for the product
            try:
                scope.context.note_threads(_blas_boost(1, n))
                return _plain(a, b, out), False
            finally:
                _blas_boost(n, 1)
                _gate_exit()
                if cold is not None:
                    cold.__exit__()
    return _plain(a, b, out), False


def matmul(a: np.ndarray, b: np.ndarray, out: np.ndarray | None = None, bias: np.ndarray | None = None) -> np.ndarray:
    """``np.matmul(a, b)``: large 2-D products on BLAS's own threads, medium ones on one
    thread; batched products of many small items (attention heads, grouped convolutions)
    split by items over the kernel pool, each item one single-threaded BLAS call (numpy
    releases the GIL).

    Same broadcasting and result as ``np.matmul``; ``out`` (optional, C-contiguous)
    receives it. ``bias`` (a 1-D array of b's column count, of the result's dtype) is
    then added, rounded once as Add after MatMul rounds it: by the team's parts to their
    blocks while in cache when the team runs the product, else in place after it.
    """
    if bias is not None:
        if a.ndim < 2 or b.ndim != 2 or a.shape[-1] == 0:
            y = np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
            np.add(y, bias, out=y)
            return y
        k, n = a.shape[-1], b.shape[-1]
        a2 = a.reshape(-1, k)  # a copy only when A's rows are not evenly strided
        if out is not None and not out.flags.c_contiguous:
            np.matmul(a, b, out=out)
            np.add(out, bias, out=out)
            return out
        o2 = None if out is None else out.reshape(-1, n)
        y = _product(a2, b, o2, a2.shape[0] * k * n, bias)
        return y.reshape(a.shape[:-1] + (n,)) if out is None else out
    if a.ndim < 2 or b.ndim < 2:
        return np.matmul(a, b) if out is None else np.matmul(a, b, out=out)
    rows, k, n = a.shape[-2], a.shape[-1], b.shape[-1]
    item = rows * k * n
    if a.ndim == 2 and b.ndim == 2:
        return _product(a, b, out, item)
    batch_shape = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    batch = prod(batch_shape)
    if batch > 1 and k > 0 and all(d == 1 for d in b.shape[:-2]) and (out is None or out.flags.c_contiguous):
        # A stack of matrices times one matrix (a linear layer on (N, H, W, C) or (B, S, C)):
        # one product of all A's rows, not one BLAS call per batch item (numpy's matmul loops
        # over items; ConvNeXt's (1, 7, 7, 768) @ (768, 3072) ran as seven 7-row products, 3.5x
        # slower). Each output element is still one row times one column.
        a2 = a.reshape(-1, k)  # a copy only when A's rows are not evenly strided (a transposed view)
        o2 = None if out is None else out.reshape(-1, n)
        y = _product(a2, b.reshape(b.shape[-2:]), o2, a2.shape[0] * k * n)
        return y.reshape(batch_shape + (rows, n)) if out is None else out
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
