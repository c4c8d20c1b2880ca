"""onnxrt's native door: compiled kernels (numba, loaded on first use; None without numba or with ONNXRT_JIT=0), the GIL-free team, BLAS by address."""

from __future__ import annotations

import contextlib
import importlib
import os
import threading
import warnings
from collections.abc import Callable, Iterator
from types import ModuleType

import numpy as np

from .. import parallel  # attributes read at call time: parallel imports .blas, hence this package, first
from . import blas, layout

_MODE = os.environ.get("ONNXRT_JIT", "auto").strip().lower()
#: False when the environment says ONNXRT_JIT=0 (or false/no/off): every kernel takes its numpy
#: path. Read once at import, never changed: :func:`disabled` switches a thread, not the process
ENABLED = _MODE not in ("0", "false", "no", "off")
#: ONNXRT_JIT=1 (or eager/on/true/yes): compiled kernels from a session's first run. By
#: default (``auto``) a session's first run takes the numpy paths (``no_jit_run``) and the
#: compiled kernels start with its second run: loading numba and LLVM costs 0.4-1.5 s and
#: ~100 MB of resident memory, which a process that runs a model once never pays back
EAGER = ENABLED and _MODE in ("1", "eager", "on", "true", "yes")

_LOCK = threading.Lock()
#: module name -> the loaded module, or None when it could not be loaded
_LOADED: dict[str, ModuleType | None] = {}
#: why the kernels could not be loaded (None when they were, or were never asked for)
LOAD_ERROR: str | None = None
#: the compiled float32 loops of the operators in ai.onnx
CORE = "onnxrt.native.loops"
#: the team of GIL-free worker threads and the part functions it runs
TEAM = "onnxrt.native.team"
#: work items (elements, or row elements) per part of a team job: ~30 us of a sigmoid
TEAM_PART = 1 << 16


def kernels(module: str = CORE) -> ModuleType | None:
    """A module of compiled kernels (``native.loops`` by default; an operator family may keep
    its own, such as ``onnxrt.native.ml_loops``), or None when numba is not installed, failed
    to load, or the kernels are disabled: callers then run their numpy code, which computes
    the same functions within the same stated accuracy.

    Importing numba costs about 0.3 s, so it happens at the first kernel that wants it,
    not at ``import onnxrt``; each kernel compiles on its first call for a given argument
    type (or loads from numba's on-disk cache).
    """
    global LOAD_ERROR
    if not ENABLED or parallel._TLS.no_jit:
        return None
    try:
        return _LOADED[module]
    except KeyError:
        pass
    with _LOCK:
        if module not in _LOADED:
            loaded = None
            try:
                loaded = importlib.import_module(module)
            except ImportError as exc:  # numba (or llvmlite) not installed
                LOAD_ERROR = f"numba is not available ({exc})"
            except Exception as exc:  # a broken numba install must not break the runtime
                LOAD_ERROR = f"numba kernels failed to load: {type(exc).__name__}: {exc}"
                warnings.warn(f"onnxrt: {LOAD_ERROR}; using the numpy kernels.", RuntimeWarning, stacklevel=2)
            _LOADED[module] = loaded
            if module == CORE and loaded is not None:
                _load_arena()
    return _LOADED[module]


def _load_arena() -> None:
    # the run arena (native.arena) comes with the compiled kernels: large runs then allocate
    # from it; without it they use numpy's own allocator, as before
    global ARENA_ERROR
    try:
        importlib.import_module(ARENA)
    except Exception as exc:  # a platform without the C library's symbols or numpy's handler API
        ARENA_ERROR = f"{type(exc).__name__}: {exc}"


#: the run arena's module (loaded with the compiled kernels) and why it failed to load, if it did
ARENA = "onnxrt.native.arena"
ARENA_ERROR: str | None = None


def compiled_loaded() -> bool:
    """Whether this process has loaded the compiled kernels (numba and LLVM) already."""
    return _LOADED.get(CORE) is not None


def active() -> bool:
    """Whether this thread's kernels may take compiled paths now (numba loaded or not yet):
    False with ONNXRT_JIT=0 and inside a session's first run (see :data:`EAGER`). Caches of
    decisions that depend on :func:`kernels` are only filled while this is True."""
    return ENABLED and not parallel._TLS.no_jit


class no_jit_run:
    """Inside the block this thread's kernels take their numpy paths (a session's first run,
    see :data:`EAGER`); the flag travels to the pool's workers with each parallel loop."""

    __slots__ = ("saved",)

    def __enter__(self) -> None:
        self.saved = parallel._TLS.no_jit
        parallel._TLS.no_jit = True

    def __exit__(self, *exc: object) -> None:
        parallel._TLS.no_jit = self.saved


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """This thread's kernels take their numpy paths inside the block (tests compare both
    paths). Thread-safe: a per-thread flag (the one :class:`no_jit_run` sets), which the
    pool's workers take with each chunk of this thread's loops; other threads are not affected."""
    saved = parallel._TLS.no_jit
    parallel._TLS.no_jit = True
    try:
        yield
    finally:
        parallel._TLS.no_jit = saved


def split(total: int, fn: Callable[[int, int], object], min_part: int) -> None:
    """``fn(lo, hi)`` over [0, total) in as few parts as the pool's threads can share, each
    of at least ``min_part`` items (one call below 2 * min_part; three such parts become
    four, which two threads share evenly). ``fn`` runs compiled loops only: BLAS keeps its
    thread count (see :func:`onnxrt.parallel.parallel_for`'s ``blas``).

    A compiled loop's dispatch holds the GIL (a few microseconds) and waking the pool's
    worker costs 30-70 us on this kind of virtual machine, so compiled kernels split in
    parts of at least ~100 us of work each: a float32 sigmoid (~0.7 ns an element) gains
    from parts of 128K elements (1.1x at 262K elements, 1.4x at 1e6).
    """
    parts = min(4, total // min_part)
    if parts == 3:  # on two threads three parts leave one thread two of them: 2/3 of the time, not 1/2
        parts = 4
    if parts <= 1:
        fn(0, total)
        return
    bounds = [total * i // parts for i in range(parts + 1)]
    parallel.parallel_for(parts, lambda lo, hi: fn(bounds[lo], bounds[hi]), work_per_item=parallel.MIN_PARALLEL_WORK, blas=False)


def team_split(part: str, args: list, total: int, max_parts: int = 64, part_size: int = TEAM_PART,
               cold_total: int = 0) -> bool:
    """Run native.loops' part function ``part`` on the team of GIL-free threads
    (:mod:`onnxrt.native.team`) with the int64 argument block ``args`` (arrays in it
    stand for their data's address) over ``total`` work items, in parts of about
    ``part_size`` items (at most ``max_parts``) shared by the caller and the team (the part
    count is appended to ``args``). False when nothing ran: one thread allowed, fewer than
    two parts, no team on this platform, or the team busy with another caller's job; the
    caller then uses :func:`split`. The arrays must outlive the call (the caller holds them).
    Below ``cold_total`` items the job goes to the team only when a worker is awake: one
    woken from its sleep joins 30-70 us late, after the caller has done most of a short
    job, and the caller may then wait for the part it took (BatchNormalization of 64x56x56,
    60 us on one thread, measured 1.4x slower split with sleeping workers)."""
    threads = parallel.current_threads()
    parts = min(max_parts, total // part_size)
    if threads < 2 or parts < 2:
        return False
    team = kernels(TEAM)
    if team is None or not team.available():
        return False
    # counted whether or not it runs on the team: a run that offered several jobs keeps the
    # workers awake next time (RunScope), and short jobs then find them awake
    parallel.note_team_job(threads)
    if total < cold_total and not team.awake():
        return False
    k = kernels()
    if len(args) + 1 != layout.LAYOUTS[part].size:  # (always: a miscounted block would be read out of bounds)
        raise layout.NativeArgumentError(f"{part}: {len(args)} arguments, its layout declares {layout.LAYOUTS[part].size - 1}")
    # the arrays' addresses go into their slots in the team's compiled call (run_kept)
    values, slots, arrays = [], [], []
    for i, a in enumerate(args):
        if type(a) is np.ndarray:
            slots.append(i)
            arrays.append(a)
            values.append(0)
        else:
            values.append(a)
    values.append(parts)
    block = np.array(values, np.int64)
    if layout.DEBUG:
        filled = block.copy()
        for s, a in zip(slots, arrays):
            filled[s] = a.ctypes.data
        layout.check(part, filled, dict(zip(slots, arrays)))
    return team.run_kept(block, 0, slots, arrays, k.address, k.part_function(part), parts, threads - 1)


class TeamJob:
    """A :func:`team_split` prepared once for calls that differ only in some arrays: the
    part count, the cold rule and the argument block are computed at construction, with
    ``None`` standing for the arrays each call passes (in order) to :meth:`__call__`. A
    kernel called with the same shapes on every run (a model's convolutions) then pays
    about 3 us per call instead of team_split's ~10 (measured on two cores, 20-40 once
    the interpreter's caches are cold behind a large kernel). Holds the fixed arrays."""

    __slots__ = ("parts", "cold", "fn", "name", "block", "block_address", "slots", "keep", "kept", "workers", "team", "address")

    def __init__(self, part: str, args: list, total: int, max_parts: int = 64, part_size: int = TEAM_PART,
                 cold_total: int = 0) -> None:
        threads = parallel.current_threads()
        team = kernels(TEAM)
        self.parts = min(max_parts, total // part_size)
        if threads < 2 or self.parts < 2 or team is None or not team.available():
            self.parts = 0
        self.cold = total < cold_total
        self.workers = threads - 1
        k = kernels()
        if k is None:
            self.parts = 0
        if len(args) + 1 != layout.LAYOUTS[part].size:
            raise layout.NativeArgumentError(f"{part}: {len(args)} arguments, its layout declares {layout.LAYOUTS[part].size - 1}")
        self.slots = tuple(i for i, a in enumerate(args) if a is None)
        self.keep = [a for a in args if type(a) is np.ndarray]
        #: position -> array of the fixed arrays (the debug mode checks the block against them)
        self.kept = {i: a for i, a in enumerate(args) if type(a) is np.ndarray} if layout.DEBUG else None
        self.team, self.address = team, k.address if k is not None else None
        self.block = np.array([0 if a is None else k.address(a) if type(a) is np.ndarray else a
                               for a in args] + [self.parts], np.int64) if k is not None else None
        self.block_address = k.address(self.block) if k is not None else 0
        # the part function is loaded at the job's first run on the team (each one loaded
        # from numba's cache adds resident memory: jobs a cold first run declines never pay it)
        self.fn, self.name = None, part

    def __call__(self, *arrays: np.ndarray) -> bool:
        """Run the job with these arrays in the ``None`` slots; False when nothing ran (as
        :func:`team_split`: too little work, the workers asleep under ``cold_total``, the
        team busy). The arrays must be C-contiguous and outlive the call."""
        if not self.parts:
            return False
        parallel.note_team_job(self.workers + 1)
        team = self.team
        if self.cold and not team.awake():  # type: ignore[union-attr]
            return False
        if self.fn is None:
            self.fn = _LOADED[CORE].part_function(self.name)  # type: ignore[union-attr]
        if self.kept is not None:
            filled = self.block.copy()  # type: ignore[union-attr]
            by_slot = dict(self.kept)
            for s, a in zip(self.slots, arrays):
                filled[s] = a.ctypes.data
                by_slot[s] = a
            layout.check(self.name, filled, by_slot)
        return team.run_kept(self.block, self.block_address, self.slots, arrays, self.address,  # type: ignore[union-attr]
                             self.fn, self.parts, self.workers)


#: multiply-adds per part of a product on the team (at least ~50 us of one core) and
#: parts per thread at most (each part packs its operands anew)
GEMM_TEAM_PART = 1 << 21
GEMM_TEAM_PARTS = 1
#: multiply-adds up to which OpenBLAS (its SkylakeX and later kernels) runs a product by its
#: small-matrix kernels: no packing, no shared buffer. Larger calls made by two threads at
#: once lost ~30 us each to each other on an AVX-512 machine, which halves a team job of a few
#: million multiply-adds: (120x40) @ (40x784) ran 50 us in two parts, 35 us in four parts
#: below this size, 62 us on one thread; (64x16) @ (16x12544) 162 -> 135 us. Only where
#: OpenBLAS has those kernels (blas.small_matrix_kernels): on an AVX2 AMD EPYC (OpenBLAS's
#: Haswell kernels, no small-matrix ones) the split's parts all went through the packed
#: kernels, and runs were 1-4% slower with it than in one part per thread (in-process A/B,
#: alternating runs: mobilenetv3 0.98 / 1.005, efficientnet_b0 0.96 / 0.98, dynamo /
#: torchscript; a chain of (64x16) @ (16x12544) 1x1 convolutions 0.67-0.86)
SMALL_GEMM_WORK = 1_000_000
#: at most so many parts of a team product for the small-matrix kernels
SMALL_GEMM_PARTS = 16
#: depth up to which the small-matrix kernels beat the packed ones on their share (measured on
#: 1x1 convolutions: (1152x192) @ (192x49) 108 -> 90 us in 12 parts; with depth 672-1152 the
#: packed kernels win by 1.2-1.6x)
SMALL_GEMM_DEPTH = 256


def gemm_split(m: int, k: int, n: int, threads: int) -> tuple[bool, int]:
    """(by rows, parts) of a team product (m, k) @ (k, n): the small-matrix split by rows
    when it exists, else by columns, else the longer side in one part per thread. Rows
    first: a part's rows are whole rows of the result, so its epilogue (a bias per row, a
    Relu, a chain) runs on contiguous memory; by columns it runs on short strided pieces
    of every row (a 120x900 1x1 convolution with bias and Relu: 66 us in six column parts,
    41 us in eight row parts)."""
    for by_rows in (True, False):
        parts = gemm_parts(m, k, n, by_rows, threads)
        if parts > GEMM_TEAM_PARTS * threads:
            return by_rows, parts
    by_rows = m > n
    return by_rows, gemm_parts(m, k, n, by_rows, threads)


def gemm_parts(m: int, k: int, n: int, by_rows: bool, threads: int) -> int:
    """Parts of a team product (m, k) @ (k, n) split by blocks of 16 rows (``by_rows``) or
    columns: one per thread, or, for a depth k of at most SMALL_GEMM_DEPTH, as many as keep
    every part within SMALL_GEMM_WORK (a multiple of ``threads``, at most SMALL_GEMM_PARTS),
    where OpenBLAS's small-matrix kernels take them (when it has them: blas.small_matrix_kernels)."""
    blocks = ((m if by_rows else n) + 15) // 16
    base = min(blocks, GEMM_TEAM_PARTS * threads)
    if threads < 2 or k > SMALL_GEMM_DEPTH or not blas.small_matrix_kernels():
        return base
    per_block = 16 * k * (n if by_rows else m)
    if per_block > SMALL_GEMM_WORK:
        return base
    parts = -(-blocks // (SMALL_GEMM_WORK // per_block))
    parts += (-parts) % threads
    if parts > SMALL_GEMM_PARTS or parts > blocks:
        return base
    return max(parts, base)


def team_gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray | None, epilogue: list | None = None,
              part_size: int = GEMM_TEAM_PART, cold_total: int = 0,
              col_bias: np.ndarray | None = None, act: int = 0) -> np.ndarray | None:
    """``a @ b`` for 2-D float32 operands with unit column strides (or ``b`` the transpose of
    such a matrix), by blocks of rows (more
    rows than columns) or columns of the result, each one single-threaded BLAS call, shared
    by the caller and the team (None when the team does not take it). Inside a run the
    team's workers join in microseconds, where OpenBLAS's own second thread, asleep between
    products, joined late: its threaded products of 7M-115M multiply-adds ran 1.15-1.3x
    faster than one thread. ``epilogue``, a convolution's ``[bias (rows,), relu, residual
    (flat, the result's layout)]`` (empty arrays for none), is applied to each block while
    it is in cache, and cleared when it was; ``col_bias`` (float32, one per column of the
    result: a linear layer's bias) is added to each block after it; ``act`` (0 or a compiled
    in-place chain's address, native.chain_loops.compile_inplace, kept alive by the caller)
    then runs on each block while it is in cache. ``part_size`` and ``cold_total`` are
    :func:`team_split`'s."""
    if a.dtype != np.float32 or b.dtype != np.float32 or a.ndim != 2 or b.ndim != 2 or 0 in a.shape or 0 in b.shape:
        return None
    if a.strides[1] != 4 or a.strides[0] % 4:
        return None
    # B with unit column stride, or the transpose of such a matrix (a Gemm's transB)
    trans_b = b.strides[1] != 4
    if (b.strides[0] if trans_b else b.strides[1]) != 4 or (b.strides[1] if trans_b else b.strides[0]) % 4:
        return None
    if out is not None and (out.dtype != np.float32 or not out.flags.c_contiguous):
        return None
    if col_bias is not None:
        if col_bias.dtype != np.float32 or col_bias.shape != (b.shape[1],):
            return None
        col_bias = np.ascontiguousarray(col_bias)
    sgemm = blas.blas_sgemm_address()
    if sgemm is None:
        return None
    m, k = a.shape
    n = b.shape[1]
    c = np.empty((m, n), np.float32) if out is None else out
    bias, relu, z = epilogue if epilogue else (_EMPTY, False, _EMPTY)
    # the small-matrix split when there is one (gemm_split); otherwise the longer side, the
    # operand a part repacks in full being the smaller one
    by_rows, parts = gemm_split(m, k, n, parallel.current_threads())
    args = layout.GEMM.pack(a=a, b=b, c=c, m=m, k=k, n=n, lda=a.strides[0] // 4, ldb=b.strides[1 if trans_b else 0] // 4,
                            ldc=n, sgemm=sgemm, by_rows=int(by_rows), bias=bias, bias_size=bias.size, z=z, z_size=z.size,
                            relu=int(relu), trans_b=int(trans_b), cbias=_EMPTY if col_bias is None else col_bias,
                            cbias_size=0 if col_bias is None else col_bias.size, act=act)
    blas._blas_enter(1)  # one thread per block (already so inside a large run)
    try:
        if parts > GEMM_TEAM_PARTS * parallel.current_threads():  # the small-matrix split
            part_size = min(part_size, m * k * n // parts)
        if not team_split("gemm_part", args, m * k * n, max_parts=parts, part_size=part_size, cold_total=cold_total):
            return None
    finally:
        blas._blas_exit(1)
    if epilogue:
        epilogue.clear()
    return c


_EMPTY = np.empty(0, np.float32)


parallel.register_native_hooks(team_gemm=team_gemm)
