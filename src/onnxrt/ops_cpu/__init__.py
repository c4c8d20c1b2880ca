"""Kernels of the ai.onnx domain: OpRun, family tables and one ``op_<name>`` module per real kernel.

Importing this package imports every submodule; each registers its kernels with
:func:`onnxrt.registry.register`.
"""

from __future__ import annotations

import importlib
import pkgutil

from ._op import OpRun

__all__ = ["OpRun"]

for _info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
    if not _info.name.startswith("_"):
        importlib.import_module(f"{__name__}.{_info.name}")
