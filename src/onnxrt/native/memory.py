"""Raw memory and the C library: an array over a caller's address, glibc's mallopt, numpy's allocator handlers (the only ctypes in onnxrt)."""

from __future__ import annotations

import ctypes
import sys

import numpy as np

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3


def array_at(address: int, dtype: np.dtype, count: int) -> np.ndarray:
    """A flat numpy array of ``count`` items of ``dtype`` over ``address``, memory the caller
    owns and keeps alive (onnxruntime's ``IOBinding`` ``buffer_ptr``). Nothing here can check
    the address: the caller vouches for it, as with onnxruntime."""
    raw = (ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(address)
    return np.frombuffer(raw, dtype=dtype, count=count)


def mallopt_keep_freed() -> bool:
    """glibc's mmap threshold raised to its 64-bit maximum (32 MiB) and its trim threshold to
    1 GiB, for the whole process; False where the C library is not glibc."""
    if not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # the largest value glibc accepts on 64-bit
        ok &= libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    except (OSError, AttributeError):  # not glibc (musl, ...)
        return False
    return bool(ok)


def libc_functions() -> tuple[int, ...] | None:
    """The addresses of the C library's malloc, calloc, realloc, free, memset and memcpy (for
    native.arena's compiled allocator), or None where they cannot be found."""
    try:
        libc = ctypes.CDLL(None)
        return tuple(ctypes.cast(getattr(libc, name), ctypes.c_void_p).value
                     for name in ("malloc", "calloc", "realloc", "free", "memset", "memcpy"))
    except (OSError, AttributeError):  # pragma: no cover - no C library symbols in the process
        return None


def permanent(nbytes: int) -> int:
    """The address of ``nbytes`` zeroed bytes from the C library that are never freed: memory
    that C callers may read until the process ends, after this interpreter's objects are gone
    (numpy frees arrays during the interpreter's shutdown through their allocator's handler)."""
    calloc = ctypes.CDLL(None).calloc
    calloc.restype = ctypes.c_void_p
    calloc.argtypes = [ctypes.c_size_t, ctypes.c_size_t]
    address = calloc(1, nbytes)
    if not address:
        raise MemoryError(f"onnxrt: {nbytes} bytes for a permanent block")
    return address


class _Allocator(ctypes.Structure):
    _fields_ = [("ctx", ctypes.c_void_p), ("malloc", ctypes.c_void_p), ("calloc", ctypes.c_void_p),
                ("realloc", ctypes.c_void_p), ("free", ctypes.c_void_p)]


class _Handler(ctypes.Structure):
    # numpy's PyDataMem_Handler (numpy/ndarraytypes.h, version 1)
    _fields_ = [("name", ctypes.c_char * 127), ("version", ctypes.c_uint8), ("allocator", _Allocator)]


def numpy_handler(name: str, ctx: int, malloc: int, calloc: int, realloc: int, free: int) -> object:
    """numpy's allocator handler (its ``mem_handler`` capsule, for :func:`numpy_set_handler`)
    over the C functions at the given addresses, called with ``ctx``; in permanent memory."""
    handler = _Handler.from_address(permanent(ctypes.sizeof(_Handler)))
    handler.name = name.encode()[:126]
    handler.version = 1
    handler.allocator = _Allocator(ctx, malloc, calloc, realloc, free)
    return capsule(ctypes.addressof(handler), b"mem_handler")


def capsule(address: int, name: bytes) -> object:
    """A PyCapsule named ``name`` over ``address`` (its name in permanent memory: the capsule only points to it)."""
    text = permanent(len(name) + 1)
    ctypes.memmove(text, name, len(name))
    new = ctypes.pythonapi.PyCapsule_New
    new.restype = ctypes.py_object
    new.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return new(address, text, None)


def numpy_set_handler() -> object | None:
    """numpy's ``PyDataMem_SetHandler`` (NEP 49; slot 304 of its C API table since numpy
    1.22) as a callable ``set(handler capsule) -> previous handler``: the handler of the
    calling context (a context variable), as numpy's C API sets it. None without that API."""
    try:
        from numpy._core import _multiarray_umath as mu
    except ImportError:  # pragma: no cover - numpy < 2
        return None
    get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
    get_pointer.restype = ctypes.c_void_p
    get_pointer.argtypes = [ctypes.py_object, ctypes.c_char_p]
    api = getattr(mu, "_ARRAY_API", None)
    if api is None:
        return None
    table = get_pointer(api, None)
    if not table:
        return None
    address = ctypes.c_void_p.from_address(table + 304 * ctypes.sizeof(ctypes.c_void_p)).value
    if not address:
        return None
    # the previous handler comes back as a new reference, which ctypes' py_object result owns
    setter = ctypes.PYFUNCTYPE(ctypes.py_object, ctypes.py_object)(address)

    def set_handler(handler: object) -> object:
        return setter(handler)

    return set_handler
