"""BLAS behind raw addresses: the libraries' thread-count functions and ``cblas_sgemm``'s address for compiled loops.

The BLAS library numpy loaded is one per process, so its thread count is process-wide
state by nature: nested and concurrent callers share one setting through a depth count
(the first to enter saves the library's own count, the last to leave restores it).
"""

from __future__ import annotations

import ctypes
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

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


_SGEMM: list[int | None] = []


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
    one setting; the first to enter saves the library's own, the last to leave restores it)."""
    _blas_enter(n)
    try:
        yield
    finally:
        _blas_exit(n)


def _blas_set(n: int) -> None:
    for _, set_ in _BLAS_LIBS or _blas_libs():
        set_(n)
