"""The official ONNX conformance suite (onnx.backend.test) over onnxrt.backend.

Kinds run: node, simple, pytorch-converted, pytorch-operator. The 'real' kind is
excluded (its models are fetched from the network by the suite; the light versions
shipped with onnx are checked by the benchmarks and tests/engine/test_light_models.py).
Expected failures live in ``expected_failures.txt``: one regular expression per line,
each with the reason after ``#``. An unexpected success fails the run, so the list
can only shrink. A reason starting with ``nondeterministic:`` marks a test whose expected
values are random draws no implementation can reproduce: it is skipped rather than
expected to fail (it would pass by chance now and then), and a test of onnxrt's own
checks what can be checked (shape, dtype, value range).
"""

from __future__ import annotations

import os
import warnings
from pathlib import Path

import onnx
import onnx.backend.test

import onnxrt
import onnxrt.backend

HERE = Path(__file__).parent


def load_expected_failures(path: Path = HERE / "expected_failures.txt") -> list[tuple[str, str]]:
    """(pattern, reason) pairs; a line without a reason is an error."""
    out = []
    for lineno, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        pattern, sep, reason = line.partition("#")
        if not sep or not reason.strip():
            raise ValueError(f"{path.name}:{lineno}: expected failure {pattern.strip()!r} gives no reason.")
        out.append((pattern.strip(), reason.strip()))
    return out


EXPECTED_FAILURES = load_expected_failures()

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    backend_test = onnx.backend.test.BackendTest(onnxrt.backend.OnnxrtBackend, __name__)

_real_dir = Path(os.path.dirname(onnx.__file__)) / "backend" / "test" / "data" / "real"
for _name in sorted(os.listdir(_real_dir)) if _real_dir.exists() else []:
    backend_test.exclude(f"^{_name}_")

for _pattern, _reason in EXPECTED_FAILURES:
    if _reason.startswith("nondeterministic:"):
        backend_test.exclude(_pattern)
    else:
        backend_test.xfail(_pattern)

globals().update(backend_test.test_cases)


# -- the node cases again on the reference kernels, one thread ---------------------------------
# Above, every case runs as sessions do by default: fast paths on (compiled kernels: the suite
# sets ONNXRT_JIT=1) and the pool's threads. Here the node cases run with every fast path off
# (SessionOptions.fast_paths = False: each node's numpy reference kernel, no compiled code) on
# one thread, so both the semantics and the fast paths answer to the suite.


class ReferenceBackend(onnxrt.backend.OnnxrtBackend):
    """The backend with fast paths off and one intra-op thread."""

    session_options = onnxrt.SessionOptions()
    session_options.fast_paths = False
    session_options.intra_op_num_threads = 1


with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    reference_test = onnx.backend.test.BackendTest(ReferenceBackend, __name__ + "_reference")
for _pattern, _reason in EXPECTED_FAILURES:
    if _reason.startswith("nondeterministic:"):
        reference_test.exclude(_pattern)
    else:
        reference_test.xfail(_pattern)
OnnxBackendNodeModelReferenceTest = reference_test.test_cases["OnnxBackendNodeModelTest"]
OnnxBackendNodeModelReferenceTest.__name__ = "OnnxBackendNodeModelReferenceTest"
