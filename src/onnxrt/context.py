"""The execution context a session owns: its thread cap, its wish for BLAS's threads, its
scratch buffers, and what its runs used.

Each :class:`~onnxrt.OnnxInference` (hence each ``InferenceSession``) creates one
:class:`ExecutionContext` from its ``SessionOptions`` when it is built, and every run
enters it through :class:`onnxrt.parallel.RunScope`: the run's thread (and the pool
workers that take chunks of its loops) then read the cap, the scratch buffers and the
counters from the context, never from module-level variables, so two sessions with
different ``intra_op_num_threads`` can run from many threads at once and each keep its
own setting.

What stays process-wide, and why (documented in docs/architecture.md):

- the BLAS library numpy loaded has one thread count per process: sessions say what they
  want (``ExecutionContext.blas_threads``, a run's eager hold at one thread) and one
  refcounted arbiter (:mod:`onnxrt.native.blas`) applies the smallest wish of the runs in
  flight, restoring the library's own count when the last leaves;
- the kernel pool (:mod:`onnxrt.parallel`) and the team of GIL-free workers
  (:mod:`onnxrt.native.team`) are threads, a machine resource: one of each per process,
  each job taking at most as many of them as the caller's context allows;
- numba's compiled modules, loaded once per process (:mod:`onnxrt.native`), and the
  hooks the compiled layer registers with :func:`onnxrt.parallel.register_native_hooks`;
- scratch buffers used outside any run (a kernel called directly) are per thread.
"""

from __future__ import annotations

import threading
from typing import Any


class ProductPolicy:
    """How the large matrix products of one session's runs use the cores: split by the team
    of GIL-free workers into single-threaded BLAS calls (``TEAM``), or on BLAS's own threads
    (``BLAS``). Neither wins everywhere, and the product's own time does not decide it:
    inside ConvNeXt's runs BLAS's threads computed each product faster (0.98 against 1.81 ms)
    yet the run took 1.2x longer, as BLAS's threads keep spinning after a product and take
    the cores from the depthwise convolutions and normalisations that follow; inside gpt2's
    runs BLAS's threads made the whole run 1.4x faster. So whole runs decide: from the
    session's third run (the first runs without compiled kernels, the second loads them and
    wakes the team), runs alternate the two in pairs, the second of each pair measured, and
    once one amount of product work (the runs' inputs decide it) has SAMPLES measured runs of
    each, the faster (the lower minimum, which other work on the machine only raises) is kept
    for the session; BLAS's threads only when their minimum is below BLAS_MARGIN times the
    team's (the team is the default: a noisy measurement must not pick the other way
    for a model where it is much slower: mobilenetv3 ran 6.5 ms on the team and 9.3 ms on
    BLAS's threads, and 2 samples each picked BLAS's in some benchmark processes; gpt2's
    BLAS runs are 1.5x faster). Runs of a session from several threads at once are not
    measured."""

    TEAM, BLAS = 0, 1
    SAMPLES = 3
    BLAS_MARGIN = 0.9
    WARMUP_RUNS = 2
    __slots__ = ("pick", "runs", "times", "_lock", "_active")

    def __init__(self) -> None:
        #: the option kept (-1: not decided yet)
        self.pick = -1
        #: runs begun
        self.runs = 0
        #: product work of a run -> (team run times, BLAS run times)
        self.times: dict[int, tuple[list[float], list[float]]] = {}
        self._lock = threading.Lock()
        self._active = 0

    @classmethod
    def settling_runs(cls) -> int:
        """Runs before the choice, when every run's product work is the same."""
        return cls.WARMUP_RUNS + 4 * cls.SAMPLES

    def begin(self) -> tuple[int, bool]:
        """(the option of a run starting now, whether it is measured)."""
        with self._lock:
            self.runs += 1
            self._active += 1
            if self.pick >= 0:
                return self.pick, False
            if self.runs <= self.WARMUP_RUNS or self._active > 1:
                return self.TEAM, False
            # in pairs, the second measured: whether the team's workers stay awake through a
            # run depends on the run before (RunScope), which must have been of the same kind
            k = self.runs - self.WARMUP_RUNS - 1
            return (k // 2) % 2, k % 2 == 1

    def end(self, option: int, measured: bool, seconds: float, work: int) -> None:
        """A run ends: ``work`` multiply-adds of large products, in ``seconds``."""
        with self._lock:
            self._active -= 1
            if not measured or self.pick >= 0 or not work:
                return
            times = self.times.setdefault(work, ([], []))
            times[option].append(seconds)
            if min(len(t) for t in times) >= self.SAMPLES:
                self.pick = self.BLAS if min(times[1]) < self.BLAS_MARGIN * min(times[0]) else self.TEAM
                self.times.clear()
            elif len(self.times) > 16:  # inputs of ever new sizes: keep the team
                self.pick = self.TEAM
                self.times.clear()


class ExecutionContext:
    """What one session's runs share: set once when the session is built.

    ``threads``: ``SessionOptions.intra_op_num_threads`` when > 0 (a cap on the threads
    the session's kernels use: the pool's loops, the team's jobs and BLAS), else None
    (the process's default, ``onnxrt.parallel.KERNEL_THREADS``).
    ``peak_threads``: the most threads one kernel of this session's runs has used since
    the context was made (or :meth:`reset_peak`): pool loops, team jobs and threaded
    BLAS products record it, so the cap can be checked from outside.
    Scratch buffers (:func:`onnxrt.parallel.scratch`) are kept per thread *and* per
    context: they are freed with the session.
    """

    __slots__ = ("threads", "peak_threads", "products", "arena", "_local", "__weakref__")

    def __init__(self, threads: int | None = None, arena: bool = True) -> None:
        if threads is not None:
            threads = int(threads)
            if threads <= 0:
                threads = None
        #: the session's thread cap (None: no cap)
        self.threads: int | None = threads
        #: the most threads one kernel of the session's runs used (0: no run yet, 1: each kernel
        #: ran on its run's own thread)
        self.peak_threads: int = 0
        #: how the runs' large matrix products use the cores (onnxrt.parallel.ProductPolicy)
        self.products = ProductPolicy()
        #: whether large runs allocate from the run arena (onnxrt.native.arena;
        #: ``SessionOptions.enable_cpu_mem_arena``)
        self.arena = bool(arena)
        self._local = threading.local()

    @classmethod
    def from_options(cls, options: Any) -> ExecutionContext:
        """The context of a session built with ``options`` (SessionOptions or None)."""
        from ._memory import tune_from_environment

        tune_from_environment()  # ONNXRT_MALLOPT=1: the allocator tuning the user asked for
        return cls(int(getattr(options, "intra_op_num_threads", 0) or 0) or None,
                   bool(getattr(options, "enable_cpu_mem_arena", True)))

    def note_threads(self, n: int) -> None:
        """A kernel of this session's runs used ``n`` threads (keeps the maximum)."""
        if n > self.peak_threads:
            self.peak_threads = n

    def reset_peak(self) -> None:
        self.peak_threads = 0

    def buffers(self) -> dict:
        """This thread's scratch buffers of this context (created empty)."""
        local = self._local
        try:
            return local.buffers
        except AttributeError:
            local.buffers = {}
            return local.buffers

    def release_scratch(self) -> None:
        """Drop this thread's scratch buffers of this context."""
        self._local.buffers = {}

    def __repr__(self) -> str:
        return f"ExecutionContext(threads={self.threads!r}, peak_threads={self.peak_threads})"
