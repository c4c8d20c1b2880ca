"""Test-wide settings: compiled kernels from every session's first run (ONNXRT_JIT=1)."""

from __future__ import annotations

import os

import pytest

# By default a session's first run takes the kernels' numpy paths and the compiled ones start
# with its second (onnxrt.native.EAGER). Most tests run a session once: with the
# default they would only ever check the numpy paths. ONNXRT_JIT=1 keeps both covered:
# the compiled paths everywhere, the numpy ones through ONNXRT_JIT=0 runs and _jit.disabled();
# tests/engine/test_jit.py checks the default mode in a fresh process. Set before onnxrt is
# imported (the setting is read once); an ONNXRT_JIT given by the caller is kept.
os.environ.setdefault("ONNXRT_JIT", "1")


def pytest_collection_modifyitems(config, items):
    """Tests marked ``stress`` run only when asked for (``pytest -m stress``)."""
    if "stress" in (config.getoption("markexpr") or ""):
        return
    skip = pytest.mark.skip(reason="a long stress run: select it with -m stress")
    for item in items:
        if "stress" in item.keywords:
            item.add_marker(skip)


#: test modules of the native kernels: they always run with the argument-layout checks of
#: onnxrt.native.layout on (every team call's block checked against its declaration)
_NATIVE_DEBUG_MODULES = ("test_team.py", "test_concurrency_paths.py", "test_native_stress.py", "test_native_layout.py")


@pytest.fixture(autouse=True)
def _native_debug_for_kernel_tests(request, monkeypatch):
    name = request.node.path.name
    if name.startswith("test_fastpaths_") or name in _NATIVE_DEBUG_MODULES:
        from onnxrt.native import layout

        monkeypatch.setattr(layout, "DEBUG", True)
    yield
