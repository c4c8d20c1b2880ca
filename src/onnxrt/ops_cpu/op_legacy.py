"""Operators outside the current specification that published models still use and onnxruntime still runs: experimental ops of opsets 1-9, LayerNormalization before 17."""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun
from .family_activation import ThresholdedRelu as _ThresholdedRelu10
from .op_normalization import LayerNormalization as _LayerNormalization17
from .op_normalization import mean_variance_normalization
from .op_slice import slice_

_EXPERIMENTAL = (
    "was an experimental operator of opsets 1 to 9, removed from the specification in opset 10; "
    "onnxruntime still runs it below opset 10"
)


def _widened(x: np.ndarray) -> np.ndarray:
    """float16 and bfloat16 computed in float32 (rounded back once by the caller), others as they are."""
    if x.dtype.kind != "f" and x.dtype.name != "bfloat16":
        raise KernelError(f"expects a float tensor, got dtype {x.dtype}.")
    return x.astype(np.float32) if x.dtype.itemsize < 4 else x


def _back(y: np.ndarray, x: np.ndarray) -> np.ndarray:
    return y if y.dtype == x.dtype else y.astype(x.dtype)


class _Experimental(OpRun):
    """An experimental operator of opsets 1-9: no schema in today's onnx, so its attributes
    and inputs are declared here, from the last published schema (onnx 1.4's
    defs/experiments). ``removed_in``: the opset from which the registry no longer resolves it
    (onnxruntime's last registration is 9 for these)."""

    uses_blas = False
    removed_in: ClassVar[int] = 10
    off_spec_note: ClassVar[str] = _EXPERIMENTAL
    input_names: ClassVar[tuple[str, ...]] = ("input",)

    def _float(self, name: str) -> float:
        value = self._atts.get(name)
        if value is None:
            raise InvalidAttributeError(f"{self.node_label()} misses the required attribute {name!r}.")
        return float(value)


class _RequiredAlphaBeta(_Experimental):
    """An experimental operator whose ``alpha`` and ``beta`` have no default: onnxruntime requires both, so does onnxrt."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._alpha, self._beta = self._float("alpha"), self._float("beta")


@register("Affine", versions=(1,))
class Affine(_Experimental):
    """Affine (experimental, opsets 1-9): ``Y = alpha * X + beta`` (alpha 1, beta 0 by default)."""

    attribute_defaults: ClassVar[dict[str, Any]] = {"alpha": 1.0, "beta": 0.0}

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        xc = _widened(x)
        return (_back(xc * xc.dtype.type(self.alpha) + xc.dtype.type(self.beta), x),)


@register("Scale", versions=(1,))
class Scale(_Experimental):
    """Scale (experimental, opsets 1-9): ``Y = scale * X`` (scale 1 by default)."""

    attribute_defaults: ClassVar[dict[str, Any]] = {"scale": 1.0}

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        xc = _widened(x)
        return (_back(xc * xc.dtype.type(self.scale), x),)


@register("ScaledTanh", versions=(1,))
class ScaledTanh(_RequiredAlphaBeta):
    """ScaledTanh (experimental, opsets 1-9): ``Y = alpha * tanh(beta * X)``. alpha and beta
    have no default in the schema; onnxruntime requires both, so does onnxrt."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        xc = _widened(x)
        t = xc.dtype.type
        return (_back(np.tanh(xc * t(self._beta)) * t(self._alpha), x),)


@register("ParametricSoftplus", versions=(1,))
class ParametricSoftplus(_RequiredAlphaBeta):
    """ParametricSoftplus (experimental, opsets 1-9): ``Y = alpha * ln(exp(beta * X) + 1)``,
    computed as ``alpha * logaddexp(0, beta * X)`` (no overflow for large ``beta * X``).
    alpha and beta are required, as onnxruntime requires them."""

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        xc = _widened(x)
        t = xc.dtype.type
        return (_back(np.logaddexp(t(0), xc * t(self._beta)) * t(self._alpha), x),)


@register("ImageScaler", versions=(1,))
class ImageScaler(_Experimental):
    """ImageScaler (experimental, opsets 1-9): ``Y[n, c] = scale * X[n, c] + bias[c]`` on an
    [N, C, H, W] input (scale 1 by default). The schema makes ``bias`` optional (none: no
    bias); onnxruntime refuses a node without it, onnxrt follows the schema. A bias of
    another length than C is refused, as onnxruntime does."""

    attribute_defaults: ClassVar[dict[str, Any]] = {"scale": 1.0, "bias": None}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._bias = None if self.bias is None else np.asarray(self.bias, dtype=np.float64)

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if x.ndim != 4:
            raise KernelError(f"{self.node_label()} expects an [N, C, H, W] input, got shape {list(x.shape)}.")
        xc = _widened(x)
        y = xc * xc.dtype.type(self.scale)
        if self._bias is not None:
            if self._bias.size != x.shape[1]:
                raise KernelError(
                    f"{self.node_label()} has {self._bias.size} bias values, expected one per channel ({x.shape[1]})."
                )
            y += self._bias.astype(xc.dtype).reshape(1, -1, 1, 1)
        return (_back(y, x),)


@register("Crop", versions=(1,))
class Crop(_Experimental):
    """Crop (experimental, opsets 1-9) of an [N, C, H, W] input: ``border`` is [left, top,
    right, bottom]; with ``scale`` [h, w] the output is the h x w window from (top, left),
    else what the four borders leave. Borders or windows beyond the image are refused, as
    onnxruntime refuses them."""

    attribute_defaults: ClassVar[dict[str, Any]] = {"border": None, "scale": None}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        border = list(self.border or [])
        if len(border) != 4:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'border' needs 4 values [left, top, right, bottom], got {border}.")
        scale = list(self.scale or [])
        if scale and len(scale) != 2:
            raise InvalidAttributeError(f"{self.node_label()}: attribute 'scale' needs 2 values [height, width], got {scale}.")
        if min(border + scale, default=0) < 0:
            raise InvalidAttributeError(f"{self.node_label()}: 'border' {border} and 'scale' {scale} must not be negative.")
        self._border, self._scale = border, scale

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if x.ndim != 4:
            raise KernelError(f"{self.node_label()} expects an [N, C, H, W] input, got shape {list(x.shape)}.")
        left, top, right, bottom = self._border
        h, w = x.shape[2], x.shape[3]
        if self._scale:
            oh, ow = self._scale
            if top + oh > h or left + ow > w:
                raise KernelError(
                    f"{self.node_label()}: the {oh}x{ow} window at (top {top}, left {left}) exceeds the {h}x{w} input."
                )
            return (x[:, :, top : top + oh, left : left + ow],)
        if left + right > w or top + bottom > h:
            raise KernelError(
                f"{self.node_label()}: borders {self._border} (left, top, right, bottom) exceed the {h}x{w} input."
            )
        return (x[:, :, top : h - bottom, left : w - right],)


@register("DynamicSlice", versions=(1,))
class DynamicSlice(_Experimental):
    """DynamicSlice (experimental, opsets 1-9): Slice-10 without steps; starts, ends and the
    optional axes are inputs (int32 or int64)."""

    input_names: ClassVar[tuple[str, ...]] = ("data", "starts", "ends", "axes")

    def _run(self, data, starts, ends, axes=None, attributes=None, verbose=0, fLOG=None):
        return (slice_(data, starts, ends, axes),)


@register("ThresholdedRelu", versions=(1,))
class ThresholdedRelu(_ThresholdedRelu10):
    """ThresholdedRelu (experimental, opsets 1-9; in the specification from 10 with the same
    semantics): ``Y = X if X > alpha else 0``, alpha 1 by default."""

    off_spec_note: ClassVar[str] = _EXPERIMENTAL

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **{**options, "since_version": 10})


@register("LayerNormalization", versions=(1,))
class LayerNormalization(_LayerNormalization17):
    """LayerNormalization at opsets 1-16, where the ai.onnx domain has no such operator
    (it entered the specification in opset 17): onnxruntime registers its own kernel under
    the ai.onnx domain from version 1, with opset 17's semantics (exporters wrote it before
    17). onnxrt runs it with LayerNormalization-17's semantics and attributes."""

    off_spec_note: ClassVar[str] = (
        "is in the ai.onnx domain only from opset 17; onnxruntime runs it at earlier opsets with opset 17's semantics"
    )

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **{**options, "since_version": 17})


@register("MeanVarianceNormalization", versions=(1,))
class MeanVarianceNormalization(_Experimental):
    """MeanVarianceNormalization (experimental, opsets 1-8; the specification's version 9 has
    an ``axes`` attribute instead): on an [N, C, H, W] input, ``across_channels`` 0 (default)
    normalises each channel, 1 the whole tensor; ``normalize_variance`` 0 only subtracts the
    mean. The schema does not say whether the batch axis is reduced; onnxruntime reduces it
    (axes [0, 2, 3], or [0, 1, 2, 3] across channels, the same as version 9's default) and
    onnxrt follows it, with version 9's arithmetic."""

    removed_in: ClassVar[int] = 9
    off_spec_note: ClassVar[str] = (
        "was an experimental operator before opset 9, which replaced it by a version with an 'axes' "
        "attribute; onnxruntime still runs the experimental one below opset 9"
    )
    attribute_defaults: ClassVar[dict[str, Any]] = {"across_channels": 0, "normalize_variance": 1}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._axes = (0, 1, 2, 3) if int(self.across_channels) else (0, 2, 3)
        self._scale = bool(int(self.normalize_variance))

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        if x.ndim != 4:
            raise KernelError(f"{self.node_label()} expects an [N, C, H, W] input, got shape {list(x.shape)}.")
        if self._scale:
            return (mean_variance_normalization(x, axes=self._axes),)
        xc = _widened(x)
        return (_back(xc - xc.mean(axis=self._axes, keepdims=True), x),)
