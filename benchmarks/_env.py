"""Imported first by the benchmarks that still run both runtimes in one process (bench_ops,
bench_elementwise, bench_ml, bench_control_flow, bench_dask): OpenBLAS's idle threads sleep
at once instead of spinning.

OpenBLAS's worker threads spin for about 2**28 cycles (~0.1 s) after each product before
they sleep, like onnxruntime's intra-op threads (whose spinning those benchmarks turn off,
see ``_common.ort_options``). On a 2-core machine a spinning thread steals the second
core from whichever runtime runs next in the alternation: onnxruntime's runs measured up
to 2x slower right after onnxrt's. ``OPENBLAS_THREAD_TIMEOUT=4`` (2**4 cycles) makes
them sleep at once, so neither runtime pays for the other's idle threads; it must be set
before numpy loads OpenBLAS, hence this module. ONNXRT_BENCH_BLAS_SPIN=1 in the
environment keeps OpenBLAS's default.

The benchmarks that run each runtime in its own worker process (bench_models, bench_nn,
bench_zoo: ``_workers.py``) do not import it: each runtime runs with the settings an
application gets (OpenBLAS's default timeout included: onnxrt no longer sets it), and a
chunk's first run is untimed, so the other process's idle threads cost nothing.
"""

import os

if os.environ.get("ONNXRT_BENCH_BLAS_SPIN") != "1":
    os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
