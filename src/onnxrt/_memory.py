"""Process allocator tuning: keep freed tensor memory for the next run instead of giving it back.

Each run allocates the same large activations again. glibc serves blocks above its mmap
threshold (128 KiB by default, adapted upwards slowly) with fresh mappings and trims the
heap after frees, so every run pays page faults again. Raising both thresholds once, as
onnxruntime's arena does in effect, makes a run reuse the memory of the previous one.
Set ``ONNXRT_MALLOPT=0`` to leave the allocator alone.
"""

from __future__ import annotations

import ctypes
import os
import sys

_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3
_done = False


def tune_malloc() -> bool:
    """Apply the tuning once per process (glibc only); returns whether it is in effect."""
    global _done
    if _done:
        return True
    _done = True
    if os.environ.get("ONNXRT_MALLOPT", "1") == "0" or not sys.platform.startswith("linux"):
        return False
    try:
        libc = ctypes.CDLL("libc.so.6")
        ok = libc.mallopt(_M_MMAP_THRESHOLD, 32 << 20)  # the largest value glibc accepts on 64-bit
        ok &= libc.mallopt(_M_TRIM_THRESHOLD, 1 << 30)
    except (OSError, AttributeError):  # not glibc (musl, ...)
        return False
    return bool(ok)
