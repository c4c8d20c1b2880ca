"""Kernels of the ai.onnx domain: OpRun, family tables and one ``op_<name>`` module per real kernel.

:func:`load_all` imports every submodule (the registry imports those of the operators a
model uses, or all of them when asked for the whole table; ``import onnxrt`` none); each
registers its kernels with :func:`onnxrt.registry.register`.
Every registered operator is also importable by
mlprodict's module path, ``onnxrt.ops_cpu.op_<snake_name>``: the paths no file backs are
generated from the registry on import (``onnxrt.ops_cpu._modules``).
"""

from __future__ import annotations

import importlib
import pkgutil
import sys

from ._op import OpRun

__all__ = ["OpRun"]


class OperatorModuleFinder:
    """``sys.meta_path`` finder of the ``op_<snake>`` paths no file backs; the work is in ``_modules``, imported on first use."""

    @staticmethod
    def find_spec(fullname, path=None, target=None):  # noqa: ANN001, ANN205
        if not fullname.startswith("onnxrt.ops_cpu.op_"):
            return None
        from ._modules import find_spec

        return find_spec(fullname)

    @staticmethod
    def invalidate_caches() -> None:
        pass


def load_all() -> None:
    """Import every kernel module of the package (each registers its kernels)."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")


# last, after the path finders: a real op_<name>.py file always wins
if not any(type(f).__qualname__ == "OperatorModuleFinder" and type(f).__module__ == __name__ for f in sys.meta_path):
    sys.meta_path.append(OperatorModuleFinder())
