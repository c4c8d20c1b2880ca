"""A custom operator that kills its worker process once, and the worker plugin registering it (light imports: workers load this)."""

from __future__ import annotations

import os

import numpy as np

DOMAIN = "test.die"


def die_once(x: np.ndarray, marker: str = "", row: float = -1.0) -> np.ndarray:
    """Identity, except that the first block holding ``row`` in column 0 ends the process.

    The marker file is created exclusively before dying, so whichever worker retries the
    block (or a later one) finds it and goes on: exactly one death per marker.
    """
    if np.any(x[:, 0] == row):
        try:
            fd = os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
        except FileExistsError:
            return x
        os.close(fd)
        os._exit(17)
    return x


def register() -> None:
    """Register DieOnce in this process (once: the registry refuses duplicates)."""
    import onnxrt
    from onnxrt.registry import registered

    if (DOMAIN, "DieOnce") not in registered():
        onnxrt.register_function(
            "DieOnce", die_once, domain=DOMAIN, marker="", row=-1.0
        )


try:
    from distributed.diagnostics.plugin import WorkerPlugin
except ImportError:  # pragma: no cover - dask missing: the tests using this are skipped
    WorkerPlugin = object  # type: ignore[assignment,misc]


class RegisterDieOnce(WorkerPlugin):
    """Registers DieOnce on every worker, restarted ones included."""

    name = "onnxrt-test-register-die-once"

    def setup(self, worker) -> None:
        register()
