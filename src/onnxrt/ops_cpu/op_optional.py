"""Optional (15, 28), OptionalHasElement and OptionalGetElement (15, 18, 28): an empty optional is None."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun

_TRUE = np.array(True)
_FALSE = np.array(False)
_TRUE.flags.writeable = False
_FALSE.flags.writeable = False


@register("Optional", versions=(15, 28))
class Optional(OpRun):
    """Optional: 15, 28 (more element types). A non-empty optional is its value itself; the
    ``type`` attribute only types the empty optional, which is ``None``."""

    def _run(self, x=None, attributes=None, verbose=0, fLOG=None):
        return (x,)


@register("OptionalHasElement", versions=(15, 18, 28))
class OptionalHasElement(OpRun):
    """OptionalHasElement: 15 (optional input), 18 (also a tensor or sequence, or no input: false), 28."""

    def _run(self, x=None, attributes=None, verbose=0, fLOG=None):
        return (_FALSE if x is None else _TRUE,)


@register("OptionalGetElement", versions=(15, 18, 28))
class OptionalGetElement(OpRun):
    """OptionalGetElement: 15, 18 (a tensor or sequence passes through), 28. An empty optional,
    undefined by the spec, raises KernelError as onnxruntime does."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if x is None:
            raise KernelError("OptionalGetElement got an empty optional, which holds no element.")
        return (x,)
