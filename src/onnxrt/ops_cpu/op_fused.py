"""onnxrt's fused operators (domain ``onnxrt``): Conv, Gemm or MatMul followed by an activation.

The graph optimiser (onnxrt.optim.fuse_activation) writes them; they run the original
operator's kernel, then the activation in place on its fresh output, saving one node, one
allocation and one pass of the engine.
"""

from __future__ import annotations

from onnx import NodeProto

from ..registry import lookup, register
from ._conv_common import apply_activation
from ._op import OpRun

FUSED_DOMAIN = "onnxrt"


class _Fused(OpRun):
    """Base: ``base_op`` is the fused operator; attributes ``activation``, ``activation_params``
    and ``since_version`` (the base operator's opset) come with the node."""

    base_op = ""
    attribute_defaults = {"activation": "Relu", "activation_params": [], "since_version": 13}

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        inner = NodeProto()
        inner.CopyFrom(onnx_node)
        inner.op_type = self.base_op
        inner.domain = ""
        del inner.attribute[:]
        inner.attribute.extend(a for a in onnx_node.attribute if a.name not in self.attribute_defaults)
        cls, since = lookup(self.base_op, "", int(self.atts_value["since_version"]))  # type: ignore[misc]
        self._inner = cls(inner, None, since_version=since, opsets=options.get("opsets"))
        self._act = self.atts_value["activation"]
        self._params = [float(p) for p in self.atts_value["activation_params"]]

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        (y,) = self._inner._run(*inputs)[:1]
        if not y.flags.writeable:  # products are fresh arrays; a read-only one is not ours to change
            y = y.copy()
        return (apply_activation(y, self._act, self._params),)


@register("FusedConv", versions=(1,), domain=FUSED_DOMAIN)
class FusedConv(_Fused):
    """Conv + activation: the conv kernel applies the activation itself, on its fresh output
    before the final rounding (float16 outputs are rounded once)."""

    base_op = "Conv"

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._inner._kw["activation"] = self._act
        self._inner._kw["activation_params"] = self._params
        self._run = self._inner._run  # type: ignore[method-assign]


@register("FusedGemm", versions=(1,), domain=FUSED_DOMAIN)
class FusedGemm(_Fused):
    """Gemm + activation."""

    base_op = "Gemm"


@register("FusedMatMul", versions=(1,), domain=FUSED_DOMAIN)
class FusedMatMul(_Fused):
    """MatMul + activation."""

    base_op = "MatMul"
