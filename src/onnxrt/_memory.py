"""Process tuning, opt-in only: ``onnxrt.tune_process()`` (or ``ONNXRT_MALLOPT=1``).

``import onnxrt`` and creating sessions change nothing of the host process: no
environment variable, no allocator setting. A program that owns its process (onnxrt's
command line does) may ask for either tuning below.

- ``malloc``: keep freed tensor memory for the next run instead of giving it back. Each
  run allocates the same large activations again. glibc serves blocks above its mmap
  threshold (128 KiB by default, adapted upwards slowly) with fresh mappings and trims
  the heap after frees, so every run pays page faults again. Raising both thresholds, as
  onnxruntime's arena does in effect, makes a run reuse the memory of the previous one
  (glibc only; a process-wide setting of the allocator, for every library in it).
  ``ONNXRT_MALLOPT=1`` in the environment applies it when the first session is built.
- ``blas_thread_timeout``: ``OPENBLAS_THREAD_TIMEOUT=4`` in the environment, so that
  OpenBLAS's idle threads sleep at once after a product instead of spinning ~0.1 s on
  the cores onnxrt's own threads need (a convolution by bands measured 2x slower right
  after a large product). OpenBLAS reads it once, when numpy loads it: from Python this
  only works before numpy is imported, which ``import onnxrt`` does; set it in the
  environment of the process instead (the benchmarks' ``_env.py`` does). A value the
  environment holds is kept.
"""

from __future__ import annotations

import os
import sys
import threading

_LOCK = threading.Lock()
#: what :func:`tune_process` has applied in this process (name -> whether it is in effect)
APPLIED: dict[str, bool] = {}


def _mallopt() -> bool:
    from .native.memory import mallopt_keep_freed

    return mallopt_keep_freed()


def tune_process(blas_thread_timeout: bool = False, malloc: bool = False) -> dict[str, bool]:
    """Opt-in process tuning for programs that own their process (onnxrt does none by itself).

    ``malloc=True``: glibc's mmap and trim thresholds raised once, so that each run reuses
    the memory the previous one freed instead of paying page faults again (Linux with glibc;
    process-wide: every library's allocations follow it). ``blas_thread_timeout=True``:
    ``OPENBLAS_THREAD_TIMEOUT=4`` set in the environment unless it holds a value, so that
    OpenBLAS's idle threads do not spin on the cores onnxrt's threads need; OpenBLAS reads
    it when numpy loads it, so it only takes effect in a process that has not imported
    numpy yet (which ``import onnxrt`` does): set it in the environment to be sure.

    Returns what is in effect for each tuning asked (``{"malloc": True, ...}``); each one is
    applied at most once per process. ``onnxrt._memory.APPLIED`` holds every result so far.
    """
    result: dict[str, bool] = {}
    with _LOCK:
        if malloc:
            if "malloc" not in APPLIED:
                APPLIED["malloc"] = _mallopt()
            result["malloc"] = APPLIED["malloc"]
        if blas_thread_timeout:
            if "blas_thread_timeout" not in APPLIED:
                if "OPENBLAS_THREAD_TIMEOUT" in os.environ:
                    APPLIED["blas_thread_timeout"] = True
                elif "numpy" not in sys.modules:
                    os.environ["OPENBLAS_THREAD_TIMEOUT"] = "4"
                    APPLIED["blas_thread_timeout"] = True
                else:  # OpenBLAS was loaded with its default already
                    APPLIED["blas_thread_timeout"] = False
            result["blas_thread_timeout"] = APPLIED["blas_thread_timeout"]
    return result


_ENV_CHECKED = False


def tune_from_environment() -> None:
    """``ONNXRT_MALLOPT=1`` in the environment: :func:`tune_process` ``(malloc=True)`` (called
    when a session is built; checked once per process)."""
    global _ENV_CHECKED
    if _ENV_CHECKED:
        return
    _ENV_CHECKED = True
    if os.environ.get("ONNXRT_MALLOPT", "").strip().lower() in ("1", "true", "yes", "on"):
        tune_process(malloc=True)
