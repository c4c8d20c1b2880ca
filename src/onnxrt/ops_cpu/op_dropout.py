"""Dropout (1, 6, 7, 10, 12, 13, 22): identity at inference, a seeded random mask in training."""

from __future__ import annotations

import numpy as np

from ..errors import KernelError
from ..registry import register
from ._op import OpRun


def dropout_mask(shape: tuple[int, ...], ratio: float, seed: int | None = None) -> np.ndarray:
    """Boolean keep-mask: each element is kept with probability ``1 - ratio``.

    A uniform draw in [0, 1) per element is kept when it is ``>= ratio``. With a ``seed`` the
    draws come from numpy's ``RandomState(seed)`` (MT19937), so a seeded node gives the same
    mask on every run, the one onnx's conformance data was generated with; without a seed each
    call draws fresh entropy.
    """
    rng = np.random.RandomState(seed) if seed is not None else np.random.RandomState()
    return rng.uniform(0.0, 1.0, shape) >= ratio


def dropout(
    data: np.ndarray,
    ratio: float = 0.5,
    training_mode: bool = False,
    seed: int | None = None,
    return_mask: bool = True,
) -> tuple[np.ndarray, np.ndarray | None]:
    """``(output, mask)``: ``output = data * mask / (1 - ratio)`` in training, ``data`` otherwise.

    At inference (or with ``ratio == 0``) the mask is all true. ``ratio`` must lie in [0, 1);
    the scaling is computed in float32 for 16-bit and float 8 inputs and cast back. Without
    ``return_mask`` the inference path builds no mask (the mask is None).
    """
    data = np.asarray(data)
    ratio = float(ratio)
    if not training_mode or ratio == 0.0:
        return data, np.ones(data.shape, dtype=bool) if return_mask else None
    if not 0.0 <= ratio < 1.0:
        raise KernelError(f"ratio is {ratio}, expected a value in [0, 1).")
    mask = dropout_mask(data.shape, ratio, seed)
    cdt = np.dtype(np.float64) if data.dtype == np.float64 else np.dtype(np.float32)
    out = np.multiply(data, mask, dtype=cdt)
    out *= cdt.type(1.0 / (1.0 - ratio))
    return (out if out.dtype == data.dtype else out.astype(data.dtype)), mask


@register("Dropout", versions=(1, 6, 7, 10, 12, 13, 22))
class Dropout(OpRun):
    """Dropout: 1 and 6 (``is_test`` attribute: training unless it is set), 7 and 10 (always
    inference: these versions have no way to ask for training), 12 (ratio and training_mode inputs,
    seed), 13 (bfloat16), 22 (float 8).

    The mask output is bool from version 10; versions 1 to 7 declare it of the data type, so it
    holds 1.0 for kept elements and 0.0 for dropped ones.

    Versions 7 and 10 (inference only) leave the mask's value unspecified; onnxruntime fills it
    with zeros (False), every element marked dropped although none is, and onnxrt follows it
    (version 12 on, where the specification defines it, the inference mask is all true).
    """
    uses_blas = False

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        since = self.since_version or 22
        self._bool_mask = since >= 10
        self._inputs_drive = since >= 12
        self._legacy_training = since < 7 and not bool(getattr(self, "is_test", 0))
        seed = getattr(self, "seed", None) if since >= 12 else None
        self._seed = None if seed is None else int(seed) % (2**32)
        self._want_mask = len(onnx_node.output) > 1 and bool(onnx_node.output[1])
        #: versions 7 and 10: onnxruntime's all-zero mask (the specification says nothing)
        self._zero_mask = since in (7, 10)

    def _run(self, data, ratio=None, training_mode=None, attributes=None, verbose=0, fLOG=None):
        if self._inputs_drive:
            r = 0.5 if ratio is None else float(np.asarray(ratio).reshape(-1)[0]) if np.size(ratio) else 0.5
            train = False if training_mode is None else bool(np.asarray(training_mode).reshape(-1)[0])
        else:
            r = self.ratio
            train = self._legacy_training
        out, mask = dropout(data, r, train, self._seed, return_mask=self._want_mask)
        if not self._want_mask:
            return (out,)
        if self._zero_mask:
            return out, np.zeros(np.shape(data), dtype=bool if self._bool_mask else np.asarray(data).dtype)
        if not self._bool_mask:
            mask = mask.astype(np.asarray(data).dtype)
        return out, mask
