"""Identity (1 to 25): passes tensors, sequences and optionals through."""

from __future__ import annotations

from ..registry import register
from ._op import OpRun


@register("Identity", versions=(1, 13, 14, 16, 19, 21, 23, 24, 25))
class Identity(OpRun):
    """Identity: tensors (all versions), sequences (14), optionals (16)."""
    uses_blas = False

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (x,)
