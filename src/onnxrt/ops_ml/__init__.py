"""Kernels of the ai.onnx.ml domain (classical machine learning); one module per operator or family."""

from __future__ import annotations

import importlib
import pkgutil



def load_all() -> None:
    """Import every kernel module of the package (each registers its kernels); the registry
    calls it, or imports only the modules of the operators a model uses."""
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{__name__}.{info.name}")
