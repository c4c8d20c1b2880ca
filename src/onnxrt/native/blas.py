"""BLAS behind raw addresses: the libraries' thread-count functions and ``cblas_sgemm``'s address for compiled loops.

The BLAS library numpy loaded is one per process, so its thread count is process-wide
state by nature. This module is its one arbiter: each block that wants a count (a run's
hold at one thread, a session's ``intra_op_num_threads``, a pool loop's chunks, a large
product's boost) registers its wish with :func:`_blas_enter` / :func:`_blas_boost` and
withdraws it with :func:`_blas_exit`; the libraries run with the smallest wish in flight
(a session capped at one thread is never given BLAS threads by another session's boost),
the first wish saves the libraries' own counts and the last one gone restores them. The
sessions' wishes live in their runs (:class:`onnxrt.parallel.RunScope`); a forked child
starts with none (``_after_fork_in_child``).
"""

from __future__ import annotations

import ctypes
import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

_BLAS_LIBS: list[tuple[Callable[[], int], Callable[[int], Any]]] | None = None
_BLAS_LOCK = threading.Lock()
#: thread count -> blocks in flight that want it (the arbiter's state; empty: nobody holds BLAS)
_WANTS: dict[int, int] = {}
#: the libraries' own counts, saved by the first block in flight
_BLAS_SAVED: list[int] = []
#: the counts the libraries run with now, as the arbiter last set them
_CURRENT: list[int] = []


#: len(sys.modules) when the libraries were last looked for, and the files found
_SCANNED_AT = -1
_PATHS: list[str] = []
_SCAN_LOCK = threading.Lock()


def _blas_libs() -> list[tuple[Callable[[], int], Callable[[int], Any]]]:
    """(get, set) thread-count functions of the BLAS libraries loaded in the process: numpy's,
    and those loaded since (scipy's own OpenBLAS, loaded with the first kernel that uses
    scipy). Looked for again only when modules were imported since the last look; the list
    only grows (a library found keeps its place).

    threadpoolctl finds the libraries; for OpenBLAS on its own pthreads pool the C
    functions are called directly (0.3 us instead of 3 us a call through threadpoolctl,
    which counts for small graphs, set and restored on every run). onnxrt's own lock
    serialises the changes, so threadpoolctl's controlling-thread bookkeeping is not needed.
    """
    global _BLAS_LIBS, _SCANNED_AT
    if _BLAS_LIBS is not None and len(sys.modules) == _SCANNED_AT:
        return _BLAS_LIBS
    with _SCAN_LOCK:
        if _BLAS_LIBS is not None and len(sys.modules) == _SCANNED_AT:
            return _BLAS_LIBS
        from threadpoolctl import ThreadpoolController

        _SCANNED_AT = len(sys.modules)
        found: list[tuple[Callable[[], int], Callable[[int], Any]]] = list(_BLAS_LIBS or ())
        for lib in ThreadpoolController().lib_controllers:
            if lib.user_api != "blas" or lib.filepath in _PATHS:
                continue
            _PATHS.append(lib.filepath)
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


def _sync(libs) -> None:
    # under _BLAS_LOCK: libraries found while wishes are in flight get their own counts saved
    # and the wish applied by the next _apply
    for get, _ in libs[len(_CURRENT):]:
        n = get()
        _BLAS_SAVED.append(n)
        _CURRENT.append(n)


_SGEMM: list[int | None] = []


#: OpenBLAS cores with small-matrix sgemm kernels (products of up to 1M multiply-adds without
#: packing): SkylakeX's, which Cooperlake and SapphireRapids use too. Its other x86-64 cores
#: (Haswell, Zen: AVX2) run every product through the packed kernels (OpenBLAS 0.3.18's
#: SMALL_MATRIX_OPT falls through to them where a core has no kernel of its own)
SMALL_KERNEL_CORES = frozenset({"skylakex", "cooperlake", "sapphirerapids"})
_ARCH: list[str | None] = []


def blas_architecture() -> str | None:
    """The core the OpenBLAS numpy uses runs its kernels for (``openblas_get_corename``, as
    threadpoolctl reports it: "Haswell", "SkylakeX", "Zen"...), or None for another BLAS."""
    if not _ARCH:
        from threadpoolctl import ThreadpoolController

        arch = None
        for lib in ThreadpoolController().lib_controllers:
            if lib.internal_api == "openblas":
                arch = getattr(lib, "architecture", None)
                break
        _ARCH.append(arch)
    return _ARCH[0]


def small_matrix_kernels() -> bool:
    """Whether numpy's OpenBLAS runs small products with its small-matrix kernels (see
    SMALL_KERNEL_CORES): the team's small-matrix split (native.gemm_parts) pays only then."""
    arch = blas_architecture()
    return arch is not None and arch.lower() in SMALL_KERNEL_CORES


def blas_sgemm_address() -> int | None:
    """The address of ``cblas_sgemm`` in the OpenBLAS numpy uses, when it has 64-bit sizes
    (numpy's own wheels: scipy-openblas64), for compiled loops that call BLAS without the
    GIL (found once); None for any other BLAS, whose callers keep numpy's products."""
    if not _SGEMM:
        address = None
        from threadpoolctl import ThreadpoolController

        for lib in ThreadpoolController().lib_controllers:
            if lib.internal_api == "openblas" and str(getattr(lib, "_symbol_suffix", "")).startswith("64"):
                symbol = getattr(lib, "_get_symbol", lambda name: None)("cblas_sgemm")
                if symbol is not None:
                    address = ctypes.cast(symbol, ctypes.c_void_p).value
                    break
        _SGEMM.append(address)
    return _SGEMM[0]


def _blas_enter(n: int) -> None:
    """A block that wants BLAS at ``n`` threads starts: the first block in flight saves the
    libraries' own counts; the libraries run the smallest count any block in flight wants."""
    libs = _blas_libs()
    with _BLAS_LOCK:
        if not _WANTS:
            _BLAS_SAVED[:] = [get() for get, _ in libs]
            _CURRENT[:] = _BLAS_SAVED
        else:
            _sync(libs)
        _WANTS[n] = _WANTS.get(n, 0) + 1
        _apply(libs)


def _blas_exit(n: int) -> None:
    """The block ends; the last block in flight restores the saved counts."""
    with _BLAS_LOCK:
        left = _WANTS.get(n, 0) - 1
        if left > 0:
            _WANTS[n] = left
        else:
            _WANTS.pop(n, None)
        libs = _BLAS_LIBS or ()
        _sync(libs)
        _apply(libs)


def _apply(libs) -> int:
    # under _BLAS_LOCK: the libraries at the smallest wish in flight (their own counts when none)
    want = min(_WANTS) if _WANTS else 0
    for i, (_, set_) in enumerate(libs):
        target = want or _BLAS_SAVED[i]
        if _CURRENT[i] != target:
            set_(target)
            _CURRENT[i] = target
    return want


def _blas_boost(held: int, n: int) -> int:
    """A block in flight that wants ``held`` threads wants ``n`` for a while (a large product
    inside a run that holds BLAS at one thread); returns the count BLAS runs with now, which
    stays lower while another block in flight wants fewer. Undo with ``_blas_boost(n, held)``."""
    libs = _blas_libs()
    with _BLAS_LOCK:
        _sync(libs)
        left = _WANTS.get(held, 0) - 1
        if left > 0:
            _WANTS[held] = left
        else:
            _WANTS.pop(held, None)
        _WANTS[n] = _WANTS.get(n, 0) + 1
        return _apply(libs)


@contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """BLAS libraries use ``n`` threads inside the block (nested and concurrent blocks share
    one setting; the first to enter saves the library's own, the last to leave restores it)."""
    _blas_enter(n)
    try:
        yield
    finally:
        _blas_exit(n)


def _after_fork_in_child() -> None:
    # the blocks in flight belong to the parent's threads, absent here: a fresh lock, no
    # wishes, and the libraries back at the counts saved before them (a child forked in a
    # run that held BLAS at one thread would otherwise keep one thread for good)
    global _BLAS_LOCK, _SCAN_LOCK
    _BLAS_LOCK = threading.Lock()
    _SCAN_LOCK = threading.Lock()
    if _WANTS:
        _WANTS.clear()
        for i, (_, set_) in enumerate(_BLAS_LIBS or ()):
            if i < len(_CURRENT) and _CURRENT[i] != _BLAS_SAVED[i]:
                try:
                    set_(_BLAS_SAVED[i])
                except Exception:  # noqa: BLE001  (the child keeps the count it has)
                    pass
                _CURRENT[i] = _BLAS_SAVED[i]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)
