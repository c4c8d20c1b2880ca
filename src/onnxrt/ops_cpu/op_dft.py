"""DFT (17: axis attribute, 20: axis input): discrete Fourier transform through numpy.fft."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._dsp import complex_to_pairs, pairs_to_complex, scalar_int
from ._op import OpRun


def _signal_axis(axis: int, rank: int) -> int:
    """The axis of the signal: [-r, -2] or [0, r-2], r counting the trailing real/imaginary axis."""
    if not (-rank <= axis <= -2 or 0 <= axis <= rank - 2):
        raise KernelError(
            f"axis must lie in [{-rank}, -2] or [0, {rank - 2}] for an input of rank {rank}, got {axis}."
        )
    return axis + rank if axis < 0 else axis


def dft(
    x: np.ndarray,
    dft_length: int | None = None,
    axis: int = -2,
    inverse: int = 0,
    onesided: int = 0,
    check: Any = None,
) -> np.ndarray:
    """DFT of ``x`` (``[..., 1]`` real or ``[..., 2]`` complex) along ``axis``.

    ``dft_length`` zero-pads or truncates the signal (numpy's ``n``); the inverse is scaled
    by 1/n. ``onesided=1`` with ``inverse=0`` is the RFFT of a real signal (floor(n/2)+1 bins);
    with ``inverse=1`` it is the IRFFT of a one-sided spectrum, a real ``[..., 1]`` signal of
    length ``dft_length`` (default 2*(bins-1)). float16/bfloat16 compute in float32; the
    output has the input's element type. ``check(shape, dtype)`` sees the output's shape
    before numpy pads the signal to ``dft_length``.
    """
    x = np.asarray(x)
    rank = x.ndim
    if rank < 2:
        raise KernelError(f"input must have rank >= 2 (signal axes then 1 or 2), got shape {list(x.shape)}.")
    ax = _signal_axis(int(axis), rank)
    sig = pairs_to_complex(x)
    is_complex = x.shape[-1] == 2
    if dft_length is not None and dft_length < 1:
        raise KernelError(f"dft_length must be >= 1, got {dft_length}.")
    if dft_length is None and sig.shape[ax] == 0:
        raise KernelError(f"the signal axis {ax} is empty; a DFT needs at least one point.")
    if check is not None:
        # the signal padded to n (complex) is the largest array: as large as the output or larger
        n = dft_length if dft_length is not None else sig.shape[ax]
        if onesided and inverse and dft_length is None:
            n = 2 * (n - 1)
        planned = list(x.shape)
        planned[ax], planned[-1] = max(n, 1), 2
        check(planned, x.dtype)
    if onesided and not inverse:
        if is_complex:
            raise KernelError("onesided=1 with inverse=0 (RFFT) needs a real input ([..., 1]), got a complex one.")
        return complex_to_pairs(np.fft.rfft(sig, n=dft_length, axis=ax), x.dtype)
    if onesided and inverse:
        if not is_complex:
            raise KernelError("onesided=1 with inverse=1 (IRFFT) needs a complex input ([..., 2]), got a real one.")
        n = dft_length if dft_length is not None else 2 * (sig.shape[ax] - 1)
        if n < 1:
            raise KernelError(f"IRFFT of {sig.shape[ax]} bins gives an empty signal; pass dft_length.")
        real = np.fft.irfft(sig, n=n, axis=ax)
        return real[..., None].astype(x.dtype, copy=False)
    fn = np.fft.ifft if inverse else np.fft.fft
    return complex_to_pairs(fn(sig, n=dft_length, axis=ax), x.dtype)


@register("DFT", versions=(17,))
class DFT_17(OpRun):
    """DFT 17: ``axis`` is an attribute (default 1)."""

    def _run(self, x, dft_length=None, attributes=None, verbose=0, fLOG=None):
        n = None if dft_length is None else scalar_int(dft_length, "dft_length")
        return (dft(x, n, self.axis, self.inverse, self.onesided, self.check_alloc),)


@register("DFT", versions=(20,))
class DFT_20(OpRun):
    """DFT 20: ``axis`` is an optional scalar input (default -2, the last signal axis)."""

    def _run(self, x, dft_length=None, axis=None, attributes=None, verbose=0, fLOG=None):
        n = None if dft_length is None else scalar_int(dft_length, "dft_length")
        ax = -2 if axis is None else scalar_int(axis, "axis")
        return (dft(x, n, ax, self.inverse, self.onesided, self.check_alloc),)


#: the newest version under the operator's name (mlprodict's ``op_dft.DFT``)
DFT = DFT_20
