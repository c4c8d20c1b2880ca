"""Fast paths of Cast and CastLike (reference kernel: onnxrt.ops_cpu.op_cast.cast).

numpy's float32 <-> float16 casts are scalar loops; integer arithmetic on the bits
(onnxrt.fastpaths._fastmath's f32_to_f16 / f16_to_f32) gives the same bits (round to nearest
even, overflow to inf, subnormals, NaN payloads), 1.5-3x faster in numpy passes, 4-5x as
one compiled loop:

- ``compiled f16 bits``: from 1024 elements, while compiled kernels are active;
- ``f16 bits``: from 64K elements, numpy passes (compiled kernels off).
"""

from __future__ import annotations

import numpy as np

from ..dispatch import fast_path
from . import _fastmath as fm

_F32 = np.dtype(np.float32)
_F16 = np.dtype(np.float16)


def _pair(op, x, *target) -> tuple[np.dtype, np.dtype] | None:
    """(source, target) dtypes of a float32 <-> float16 cast of an array, else None."""
    if type(x) is not np.ndarray:
        return None
    dst = target[0].dtype if target else op._dtype
    if (x.dtype, dst) in ((_F32, _F16), (_F16, _F32)):
        return x.dtype, dst
    return None


def _bits(op, x, *target):
    return (fm.f32_to_f16(x) if x.dtype == _F32 else fm.f16_to_f32(x),)


@fast_path(("Cast", "CastLike"), "compiled f16 bits",
           when=lambda op, x, *t: _pair(op, x, *t) is not None and x.size >= fm.JIT_MIN_SIZE)
def compiled_f16_bits(op, x, *target):
    """float32 <-> float16 of 1024+ elements: one compiled loop on the bits (_fastmath). Bit-exact with numpy's cast."""
    return _bits(op, x, *target)


@fast_path(("Cast", "CastLike"), "f16 bits", native=False,
           when=lambda op, x, *t: _pair(op, x, *t) is not None and x.size >= fm.CAST_MIN_SIZE)
def f16_bits(op, x, *target):
    """float32 <-> float16 of 64K+ elements: numpy passes of integer arithmetic on the bits (_fastmath). Bit-exact."""
    return _bits(op, x, *target)
