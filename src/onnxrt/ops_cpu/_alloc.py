"""Allocation guard: refuse an output whose byte size exceeds the session's cap or the machine's memory."""

from __future__ import annotations

import math
import os
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..errors import AllocationError


def _physical_memory() -> int:
    """Bytes of physical memory (RAM), or 2**63 - 1 where the platform does not tell."""
    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):  # not POSIX
        return 2**63 - 1


#: no single tensor can be larger than the machine's physical memory
PHYSICAL_LIMIT = _physical_memory()


def tensor_limit(options: dict[str, Any] | None = None) -> int:
    """The byte cap of one tensor: ``session_options.max_tensor_bytes`` when set, else physical memory."""
    sess = (options or {}).get("session_options")
    cap = getattr(sess, "max_tensor_bytes", None)
    if cap is None:
        return PHYSICAL_LIMIT
    return min(int(cap), PHYSICAL_LIMIT)


def check_alloc(shape: Iterable[int], dtype: Any, options: dict[str, Any] | None = None, what: str = "output") -> None:
    """Raise AllocationError when a tensor of ``shape`` and ``dtype`` would exceed :func:`tensor_limit`.

    The size is computed with Python integers, so absurd shapes (2**60 elements) are
    refused before numpy tries, and fails slowly, to allocate them. ``options`` is the
    kernel's ``self.options`` (the engine passes ``session_options`` there).
    """
    dims = [int(d) for d in shape]
    if any(d < 0 for d in dims):
        raise AllocationError(f"{what} shape {dims} has a negative dimension.")
    n = math.prod(dims)
    dt = np.dtype(dtype)
    # strings and objects: count a pointer per element (their payload is not known yet)
    nbytes = n * (dt.itemsize or 1)
    limit = tensor_limit(options)
    if nbytes > limit:
        source = "SessionOptions.max_tensor_bytes" if limit < PHYSICAL_LIMIT else "the machine's physical memory"
        raise AllocationError(
            f"{what} of shape {dims} and dtype {dt} needs {nbytes} bytes, "
            f"above the limit of {limit} bytes ({source})."
        )
