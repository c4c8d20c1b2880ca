"""``import onnxrt`` never imports dask: the dask extra is optional."""

from __future__ import annotations

import subprocess
import sys


def test_import_onnxrt_does_not_import_dask():
    code = "import onnxrt, onnxrt.blocks, sys; assert 'dask' not in sys.modules, sorted(m for m in sys.modules if 'dask' in m)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
