"""Imported first by every benchmark: OpenBLAS's idle threads sleep at once instead of spinning.

OpenBLAS's worker threads spin for about 2**28 cycles (~0.1 s) after each product before
they sleep, like onnxruntime's intra-op threads (whose spinning the benchmarks turn off,
see ``_common.ort_options``). On a 2-core machine a spinning thread steals the second
core from whichever runtime runs next in the alternation: onnxruntime's runs measured up
to 2x slower right after onnxrt's. ``OPENBLAS_THREAD_TIMEOUT=4`` (2**4 cycles) makes
them sleep at once, so neither runtime pays for the other's idle threads; it must be set
before numpy loads OpenBLAS, hence this module. ONNXRT_BENCH_BLAS_SPIN=1 in the
environment keeps OpenBLAS's default.
"""

import os

if os.environ.get("ONNXRT_BENCH_BLAS_SPIN") != "1":
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
