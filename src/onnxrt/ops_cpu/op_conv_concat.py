"""onnxrt's ConvConcat (domain ``onnxrt``): convolutions written straight into their blocks of the Concat along channels that reads them."""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from ..registry import lookup, register
from ._op import OpRun
from .op_concat import concat

FUSED_DOMAIN = "onnxrt"


@register("ConvConcat", versions=(1,), domain=FUSED_DOMAIN)
class ConvConcat(OpRun):
    """Concat(axis=1) of segments, each a Conv or FusedConv (attribute ``segments``: the
    node, serialized; ``since_versions``: its opset) or a plain tensor (an empty string):
    the inputs are four per segment (x, w, b, z of a convolution; the tensor and three
    omitted ones). Written by onnxrt.optim.concat_conv for convolutions whose only reader
    is the Concat.

    The reference runs each segment's own kernel and concatenates the results, with
    Concat's checks. Its fast paths (:mod:`onnxrt.fastpaths.conv`) run each segment
    through Conv's table: with one image and float32 throughout, the output is allocated
    first and each convolution writes its block (a contiguous slice of channels), the
    bias, residual and activation applied there: no copy by the Concat (squeezenet's fire
    modules, inception's branches)."""

    attribute_defaults = {"segments": [], "since_versions": []}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        #: per segment: its Conv or FusedConv kernel, or None for a plain tensor
        self._convs: list = []
        for data, since in zip(self.atts_value["segments"], self.atts_value["since_versions"]):
            if not data:
                self._convs.append(None)
                continue
            proto = NodeProto()
            # attribute strings that are valid UTF-8 come decoded (_op._decode): the same bytes back
            proto.ParseFromString(data.encode("utf-8") if isinstance(data, str) else data)
            cls, version = lookup(proto.op_type, proto.domain, int(since))  # type: ignore[misc]
            self._convs.append(cls(proto, None, **{**options, "since_version": version}))

    def set_const_inputs(self, positions) -> None:
        super().set_const_inputs(positions)
        for i, op in enumerate(self._convs):  # each segment's x, w, b, z are inputs 4i .. 4i + 3
            if op is not None:
                op.set_const_inputs(p - 4 * i for p in self.const_inputs if 4 * i <= p < 4 * i + 4)

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        parts = []
        for i, op in enumerate(self._convs):
            x, w, b, z = inputs[4 * i: 4 * i + 4]
            if op is None:
                parts.append(np.asarray(x))
            else:
                parts.append((op._run(x, w, b) if z is None else op._run(x, w, b, z))[0])
        return (concat(*parts, axis=1),)
