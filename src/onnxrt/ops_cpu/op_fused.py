"""onnxrt's fused operators (domain ``onnxrt``): Conv, Gemm, MatMul, BatchNormalization, Add or Sum followed by an activation.

The graph optimiser (onnxrt.optim.fuse_activation) writes them; they run the original
operator's kernel, then the activation in place on its fresh output, saving one node, one
allocation and one pass of the engine.
"""

from __future__ import annotations

import numpy as np
from onnx import NodeProto

from ..registry import lookup, register
from ._conv_common import apply_activation
from ._op import OpRun

FUSED_DOMAIN = "onnxrt"


#: elements from which apply_activation's np.clip beats np.maximum's lower call overhead
_CLIP_FROM = 4096
_F32 = np.dtype(np.float32)
_F32_ZERO = np.float32(0)


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

    #: whether the base kernel may return (a view of) one of its inputs (Sum of one input...)
    may_alias = False

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        (y,) = self._inner._run(*inputs)[:1]
        # products are fresh arrays; a read-only result or one sharing an input's memory is
        # not ours to overwrite
        if not y.flags.writeable or (
            self.may_alias and any(isinstance(i, np.ndarray) and np.may_share_memory(y, i) for i in inputs)
        ):
            y = y.copy()
        if self._act == "Relu" and y.size < _CLIP_FROM:  # the common small case without the dispatch
            np.maximum(y, _F32_ZERO if y.dtype == _F32 else y.dtype.type(0), out=y)
            return (y,)
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
    """Gemm + activation; Gemm + Relu on a few float32 rows runs the compiled dense loop
    (product, bias and Relu in one call)."""

    base_op = "Gemm"

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self._dense = self._inner.dense if self._act == "Relu" else None

    def _run(self, a, b, c=None, attributes=None, verbose=0, fLOG=None):
        if self._dense is not None and (y := self._dense(a, b, c, True)) is not None:
            return (y,)
        return super()._run(a, b) if c is None else super()._run(a, b, c)


@register("FusedMatMul", versions=(1,), domain=FUSED_DOMAIN)
class FusedMatMul(_Fused):
    """MatMul + activation."""

    base_op = "MatMul"


@register("FusedBatchNormalization", versions=(1,), domain=FUSED_DOMAIN)
class FusedBatchNormalization(_Fused):
    """BatchNormalization (inference) + activation; with Relu, one pass computes both."""

    base_op = "BatchNormalization"
    may_alias = True

    def _run(self, *inputs, attributes=None, verbose=0, fLOG=None):
        if self._act == "Relu" and len(inputs) == 5 and not self._inner._training:
            return (self._inner.infer(*inputs, relu=True),)
        return super()._run(*inputs)


@register("FusedAdd", versions=(1,), domain=FUSED_DOMAIN)
class FusedAdd(_Fused):
    """Add + activation (residual connections followed by Relu)."""

    base_op = "Add"
    may_alias = True


@register("FusedSum", versions=(1,), domain=FUSED_DOMAIN)
class FusedSum(_Fused):
    """Sum + activation."""

    base_op = "Sum"
    may_alias = True
