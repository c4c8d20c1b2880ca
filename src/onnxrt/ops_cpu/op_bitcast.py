"""BitCast (26): reinterpret the bits of every element as another type of the same width."""

from __future__ import annotations

import ml_dtypes
import numpy as np

from ..dtypes import elem_name, np_dtype
from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

#: element types narrower than their one-byte numpy storage -> bit width
_NARROW_BITS = {
    np.dtype(ml_dtypes.int4): 4,
    np.dtype(ml_dtypes.uint4): 4,
    np.dtype(ml_dtypes.float4_e2m1fn): 4,
    np.dtype(ml_dtypes.int2): 2,
    np.dtype(ml_dtypes.uint2): 2,
}


def bit_width(dt: np.dtype) -> int:
    """Bits of one element of ``dt`` (bool counts 8, as the spec's storage does)."""
    return _NARROW_BITS.get(dt, dt.itemsize * 8)


def bitcast(x: np.ndarray, dtype: np.dtype | type) -> np.ndarray:
    """The same bit patterns read as ``dtype`` (little endian), shape unchanged.

    Types of 8 bits or more are a zero-copy view. ml_dtypes keeps each 4-bit or 2-bit
    element in the low bits of one byte (int4 -1 is 0x0F): those are masked and re-read.
    Raises KernelError when the widths differ or an operand is a string.
    """
    dst = np.dtype(dtype)
    src = x.dtype
    if src.kind in "OUS" or dst.kind in "OUS":
        raise KernelError(f"BitCast does not apply to strings, got {src} to {dst}.")
    wsrc, wdst = bit_width(src), bit_width(dst)
    if wsrc != wdst:
        raise KernelError(f"BitCast needs types of the same bit width, got {src} ({wsrc} bits) and {dst} ({wdst} bits).")
    if src == dst:
        return x
    if wsrc < 8:
        bits = x.view(np.uint8) & np.uint8((1 << wsrc) - 1)
        return bits.view(dst)
    if src.byteorder == ">" or dst.byteorder == ">":  # the spec reads the bytes as little endian
        x = x.astype(src.newbyteorder("<"))
        dst = dst.newbyteorder("<")
    return x.view(dst)


@register("BitCast", versions=(26,))
class BitCast(OpRun):
    """BitCast (26): every type but string; the input and ``to`` types must have the same width."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        try:
            self._dtype = np_dtype(self.to)
        except KeyError:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'to' is {self.to!r}, an unknown element type.") from None
        if self._dtype.kind in "OUS":
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'to' is {elem_name(self.to)!r}; BitCast cannot produce strings.")

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (bitcast(x, self._dtype),)
