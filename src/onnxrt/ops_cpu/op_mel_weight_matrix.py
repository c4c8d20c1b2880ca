"""MelWeightMatrix (17): triangular mel filterbank mapping linear DFT bins to mel bands."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._dsp import allowed_types, attribute_dtype, scalar_float, scalar_int
from ._op import OpRun


def _hz_to_mel(hz: float) -> float:
    return 2595.0 * np.log10(1.0 + hz / 700.0)


def _mel_to_hz(mel: np.ndarray) -> np.ndarray:
    return 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


def mel_weight_matrix(
    num_mel_bins: int,
    dft_length: int,
    sample_rate: int,
    lower_edge_hertz: float,
    upper_edge_hertz: float,
    dtype: np.dtype = np.float32,
    check: Callable[[list[int], Any], None] | None = None,
) -> np.ndarray:
    """``[dft_length // 2 + 1, num_mel_bins]`` matrix of triangular filters peaking at 1.

    The band edges are ``num_mel_bins + 2`` points evenly spaced on the mel scale
    ``mel(f) = 2595 log10(1 + f/700)`` between the two edges (the step is
    (high - low) / (num_mel_bins + 2), as onnxruntime and the spec's test), mapped to the
    DFT bin ``floor((dft_length + 1) * f / sample_rate)``. Filter i rises linearly from
    edge i to 1 at edge i+1, then falls to 0 at edge i+2; a band whose rising edges
    coincide is a single 1 at its centre. Computed in float64, cast to ``dtype``;
    ``check(shape, dtype)`` sees that float64 matrix before any work.
    """
    if num_mel_bins < 1:
        raise KernelError(f"num_mel_bins must be >= 1, got {num_mel_bins}.")
    if dft_length < 1:
        raise KernelError(f"dft_length must be >= 1, got {dft_length}.")
    if sample_rate < 1:
        raise KernelError(f"sample_rate must be >= 1, got {sample_rate}.")
    if not 0 <= lower_edge_hertz < upper_edge_hertz:
        raise KernelError(
            f"lower_edge_hertz and upper_edge_hertz must satisfy 0 <= lower < upper, got {lower_edge_hertz} and {upper_edge_hertz}."
        )
    n_bins = dft_length // 2 + 1
    if check is not None:
        check([n_bins, num_mel_bins], np.float64)
    low, high = _hz_to_mel(lower_edge_hertz), _hz_to_mel(upper_edge_hertz)
    step = (high - low) / (num_mel_bins + 2)
    hz = _mel_to_hz(np.arange(num_mel_bins + 2, dtype=np.float64) * step + low)
    edges = np.floor((dft_length + 1) * hz / sample_rate).astype(np.int64)
    lo, center, hi = edges[:-2], edges[1:-1], edges[2:]  # one triangle per column
    j = np.arange(n_bins, dtype=np.int64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        rising = (j - lo) / (center - lo)
        falling = (hi - j) / (hi - center)
    out = np.where((j >= lo) & (j < center), rising, 0.0)
    out = np.where((j > center) & (j < hi), falling, out)
    out = np.where(j == center, 1.0, out)
    return out.astype(dtype)


@register("MelWeightMatrix", versions=(17,))
class MelWeightMatrix(OpRun):
    """MelWeightMatrix 17: five scalar inputs, the output type from ``output_datatype``."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._dtype = attribute_dtype(self, "output_datatype", allowed_types(self, "T3"))

    def _run(self, num_mel_bins, dft_length, sample_rate, lower_edge_hertz, upper_edge_hertz, attributes=None, verbose=0, fLOG=None):
        return (
            mel_weight_matrix(
                scalar_int(num_mel_bins, "num_mel_bins"),
                scalar_int(dft_length, "dft_length"),
                scalar_int(sample_rate, "sample_rate"),
                scalar_float(lower_edge_hertz, "lower_edge_hertz"),
                scalar_float(upper_edge_hertz, "upper_edge_hertz"),
                self._dtype,
                self.check_alloc,
            ),
        )
