"""STFT (17): short-time Fourier transform, frames as a strided view and one batched FFT."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._dsp import complex_to_pairs, compute_dtypes, pairs_to_complex, scalar_int
from ._op import OpRun


def stft(
    signal: np.ndarray,
    frame_step: int,
    window: np.ndarray | None = None,
    frame_length: int | None = None,
    onesided: int = 1,
    check=None,
) -> np.ndarray:
    """STFT of ``signal`` (``[batch, length, 1]`` real or ``[batch, length, 2]`` complex).

    ``frame_length`` defaults to the window's length, then to the signal's; the window
    (default rectangular) multiplies every frame before its DFT. The output is
    ``[batch, frames, bins, 2]`` with ``frames = (length - frame_length) // frame_step + 1``
    and ``bins = frame_length // 2 + 1`` when ``onesided`` (real signals only), else
    ``frame_length``. float16/bfloat16 compute in float32. ``check(shape, dtype, what="output")``
    (the node's ``check_alloc``) vets the output and the windowed frames before any work.
    """
    signal = np.asarray(signal)
    if signal.ndim != 3 or signal.shape[-1] not in (1, 2):
        raise KernelError(f"signal must have shape [batch, length, 1 or 2], got {list(signal.shape)}.")
    length = signal.shape[1]
    if window is not None:
        window = np.asarray(window)
        if window.ndim != 1:
            raise KernelError(f"window must be 1-D, got shape {list(window.shape)}.")
        if frame_length is None:
            frame_length = window.shape[0]
        elif window.shape[0] != frame_length:
            raise KernelError(f"window has length {window.shape[0]}, expected frame_length {frame_length}.")
    if frame_length is None:
        frame_length = length
    if frame_step < 1:
        raise KernelError(f"frame_step must be >= 1, got {frame_step}.")
    if not 1 <= frame_length <= length:
        raise KernelError(f"frame_length must lie in [1, {length}] (the signal length), got {frame_length}.")
    is_complex = signal.shape[-1] == 2
    if onesided and is_complex:
        raise KernelError("onesided=1 needs a real signal ([batch, length, 1]), got a complex one.")
    if check is not None:
        # frame_step and frame_length come from the data: the frames overlap, so the output can
        # be about length**2 / 4 values for a signal of length values
        real, cplx = compute_dtypes(signal.dtype)
        n_frames = (length - frame_length) // frame_step + 1
        bins = frame_length // 2 + 1 if onesided else frame_length
        check([signal.shape[0], n_frames, bins, 2], real)
        if window is not None:
            check([signal.shape[0], n_frames, frame_length], cplx if is_complex else real, "windowed frames")
    sig = pairs_to_complex(signal, "signal")
    # [batch, frames, frame_length], a strided view: no copy until the window multiplies it
    frames = np.lib.stride_tricks.sliding_window_view(sig, frame_length, axis=1)[:, ::frame_step]
    if window is not None:
        frames = frames * window.astype(compute_dtypes(signal.dtype)[0], copy=False)
    spectrum = np.fft.rfft(frames, axis=-1) if onesided else np.fft.fft(frames, axis=-1)
    return complex_to_pairs(spectrum, signal.dtype)


@register("STFT", versions=(17,))
class STFT(OpRun):
    """STFT 17: inputs signal, frame_step, optional window and frame_length; attribute onesided."""

    def _run(self, signal, frame_step, window=None, frame_length=None, attributes=None, verbose=0, fLOG=None):
        step = scalar_int(frame_step, "frame_step")
        fl = None if frame_length is None else scalar_int(frame_length, "frame_length")
        return (stft(signal, step, window, fl, self.onesided, self.check_alloc),)
