"""onnxrt's ConvConcat (domain ``onnxrt``): convolutions written straight into their blocks of the Concat along channels that reads them."""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from ..parallel import limit_threads
from ..registry import lookup, register
from ._op import OpRun
from .op_concat import concat
from .op_conv import conv_geometry, conv_node

FUSED_DOMAIN = "onnxrt"
_F32 = np.dtype(np.float32)


@register("ConvConcat", versions=(1,), domain=FUSED_DOMAIN)
class ConvConcat(OpRun):
    """Concat(axis=1) of segments, each a Conv or FusedConv (attribute ``segments``: the
    node, serialized; ``since_versions``: its opset) or a plain tensor (an empty string):
    the inputs are four per segment (x, w, b, z of a convolution; the tensor and three
    omitted ones). Written by onnxrt.optim.concat_conv for convolutions whose only reader
    is the Concat. With one image and float32 throughout, the output is allocated first
    and each convolution's product writes its block (a contiguous slice of channels), the
    bias, residual and activation applied there: no copy by the Concat (squeezenet's fire
    modules, inception's branches). Otherwise each convolution runs on its own and the
    results are concatenated, with Concat's checks."""

    attribute_defaults = {"segments": [], "since_versions": []}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._convs: list = []
        self._layout: tuple = (None, None)
        for data, since in zip(self.atts_value["segments"], self.atts_value["since_versions"]):
            if not data:
                self._convs.append(None)
                continue
            proto = NodeProto()
            # attribute strings that are valid UTF-8 come decoded (_op._decode): the same bytes back
            proto.ParseFromString(data.encode("utf-8") if isinstance(data, str) else data)
            cls, version = lookup(proto.op_type, proto.domain, int(since))  # type: ignore[misc]
            op = cls(proto, None, **{**options, "since_version": version})
            inner = getattr(op, "_inner", op)  # FusedConv's Conv holds the keywords, activation included
            self._convs.append((inner._kw, inner._threads, op))

    def set_const_inputs(self, positions) -> None:
        super().set_const_inputs(positions)
        for i, spec in enumerate(self._convs):  # each segment's x, w, b, z are inputs 4i .. 4i + 3
            if spec is not None:
                spec[2].set_const_inputs(p - 4 * i for p in self.const_inputs if 4 * i <= p < 4 * i + 4)

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        segs = [inputs[4 * i: 4 * i + 4] for i in range(len(self._convs))]
        # the layout of the last one-image float32 call, kept for inputs and weights of the
        # same shapes and types (the segments' geometry costs more than their products on
        # small maps)
        key = tuple((x.shape, x.dtype, w.shape if type(w) is np.ndarray else w) if type(x) is np.ndarray else None
                    for x, w in zip(inputs[::4], inputs[1::4]))
        if key == self._layout[0]:
            return (self._into(self._layout[1], segs),)
        shapes = []
        direct = True
        for spec, (x, w, b, z) in zip(self._convs, segs):
            if spec is None:
                a = np.asarray(x)
                shapes.append(a.shape)
                direct = direct and a.dtype == _F32
                continue
            kw = spec[0]
            x, w = np.asarray(x), np.asarray(w)
            inner = getattr(spec[2], "_inner", spec[2])  # Conv's pads check, as the segment's own node would run it
            if inner._checked is None or x.shape != inner._checked[0] or w.shape != inner._checked[1]:
                inner._check_sizes(x, w)
            _, _, _, _, out_shape = conv_geometry(x, w, kw["group"], kw["kernel_shape"], kw["strides"], kw["dilations"],
                                                  kw["pads"], kw["auto_pad"])
            shapes.append((x.shape[0], w.shape[0]) + tuple(out_shape))
            direct = direct and x.dtype == _F32
        first = shapes[0]
        direct = direct and len(first) >= 3 and first[0] == 1 and all(
            len(s) == len(first) and s[0] == 1 and s[2:] == first[2:] for s in shapes)
        if not direct:
            parts = [np.asarray(x) if spec is None else self._conv(spec, x, w, b, z, None)
                     for spec, (x, w, b, z) in zip(self._convs, segs)]
            return (concat(*parts, axis=1),)
        layout = ((1, sum(s[1] for s in shapes)) + tuple(first[2:]), [s[1] for s in shapes])
        self.check_alloc(layout[0], _F32)
        if None not in key:
            self._layout = (key, layout)
        return (self._into(layout, segs),)

    def _into(self, layout, segs) -> np.ndarray:
        # one image: each segment written into its block of the output (contiguous)
        y = np.empty(layout[0], _F32)
        c0 = 0
        for spec, channels, (x, w, b, z) in zip(self._convs, layout[1], segs):
            block = y[:, c0:c0 + channels]
            if spec is None:
                np.copyto(block, x)
            else:
                self._conv(spec, x, w, b, z, block)
            c0 += channels
        return y

    @staticmethod
    def _conv(spec, x, w, b, z, out):
        kw, threads, _ = spec
        if threads is None:
            return conv_node(kw, x, w, b, z, out)
        with limit_threads(threads):
            return conv_node(kw, x, w, b, z, out)
