"""The window functions (HannWindow, HammingWindow, BlackmanWindow, 17) as one table of cosine-sum coefficients."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..dtypes import ONNX_TO_NP, elem_name
from ..errors import InvalidAttributeError, KernelError
from ._dsp import scalar_int
from ._family import Spec, build_family

#: the element types output_datatype may name (T2 of the three schemas)
_OUTPUT_TYPES = frozenset(
    ONNX_TO_NP[c]
    for c in (1, 2, 3, 4, 5, 6, 7, 10, 11, 12, 13, 16)  # float..uint64, float16, double, bfloat16
)


def cosine_window(
    size: int, coefficients: tuple[float, ...], periodic: int = 1, dtype: np.dtype = np.float32,
    check: Callable[[list[int], Any], None] | None = None,
) -> np.ndarray:
    """``w[n] = sum_k (-1)^k a_k cos(2 pi k n / N)`` for n in [0, size), N = size (periodic) or size - 1.

    Computed in float64, then cast to ``dtype`` as Cast would (integer types truncate).
    A symmetric window of size 1 divides zero by zero: NaN, as the schemas' function
    bodies and onnxruntime give. ``check(shape, dtype)`` sees the float64 work array first.
    """
    if size < 0:
        raise KernelError(f"size must be >= 0, got {size}.")
    if check is not None:
        check([size], np.float64)
    denom = size if periodic else size - 1
    if size == 1 and denom == 0:
        # NaN has no integer value: integer windows get 0 there
        return np.zeros(1, dtype) if np.dtype(dtype).kind in "iu" else np.full(1, np.nan).astype(dtype)
    phase = (2.0 * np.pi / max(denom, 1)) * np.arange(size, dtype=np.float64)
    w = np.full(size, coefficients[0], dtype=np.float64)
    for k, a in enumerate(coefficients[1:], 1):  # two or three terms
        w += (-a if k % 2 else a) * np.cos(k * phase)
    return w.astype(dtype)


def _make(coefficients: tuple[float, ...], name: str) -> Callable[..., np.ndarray]:
    def window(size: np.ndarray, periodic: int = 1, output_datatype: int = 1, check: Any = None) -> np.ndarray:
        dtype = ONNX_TO_NP.get(output_datatype)
        if dtype is None or dtype not in _OUTPUT_TYPES:
            label = elem_name(output_datatype) if dtype is not None else str(output_datatype)
            raise InvalidAttributeError(
                f"{name}: attribute 'output_datatype' is {output_datatype} ({label}), expected an integer or float type code."
            )
        return cosine_window(scalar_int(size, "size"), coefficients, periodic, dtype, check)

    window.__name__ = name.lower()
    window.__doc__ = f"{name}: cosine-sum window with coefficients {coefficients}."
    return window


def _with_check(op: Any, kw: dict[str, Any]) -> dict[str, Any]:
    """The window's size comes from the data: the kernel checks it against the allocation limit."""
    return {**kw, "check": op.check_alloc}


# the coefficients a_k of the paper the schemas cite (Hamming: 25/46 and 21/46)
WINDOWS = [
    Spec("HannWindow", _make((0.5, 0.5), "HannWindow"), (17,), with_attributes=True, prepare=_with_check),
    Spec("HammingWindow", _make((25 / 46, 21 / 46), "HammingWindow"), (17,), with_attributes=True, prepare=_with_check),
    Spec("BlackmanWindow", _make((0.42, 0.5, 0.08), "BlackmanWindow"), (17,), with_attributes=True, prepare=_with_check),
]

build_family(WINDOWS, "any", globals())
