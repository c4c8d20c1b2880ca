"""Raw memory and the C library: an array over a caller's address, glibc's mallopt (the only ctypes in onnxrt)."""

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
