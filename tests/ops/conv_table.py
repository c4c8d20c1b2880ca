"""Convolutions through Conv's table of fast paths (onnxrt.fastpaths.conv) outside a session:
a Conv (or FusedConv) node built from its attributes, its W and B model constants or not,
run by a dispatcher as a session runs it, or by one named entry of the table."""

from __future__ import annotations

from typing import Any

import numpy as np
from onnx import helper

from onnxrt import dispatch
from onnxrt.fastpaths import conv as fp


def conv_op(*, z: bool = False, const: bool = True, activation: str | None = None,
            activation_params: Any = (), shuffle: Any = None, fused: bool = False, **attrs: Any) -> Any:
    """A Conv kernel, or a FusedConv one when there is a residual, an activation or a
    shuffle; W and B are model constants when ``const``."""
    from onnxrt.ops_cpu.op_conv import Conv
    from onnxrt.ops_cpu.op_fused import FusedConv

    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items() if v is not None}
    inputs = ["x", "w", "b"] + (["z"] if z else [])
    if fused or z or activation is not None or shuffle is not None:
        extra: dict[str, Any] = {"activation": activation or "", "since_version": 11}
        if len(activation_params):
            extra["activation_params"] = [float(p) for p in activation_params]
        if shuffle is not None:
            extra["shuffle"] = [int(d) for d in shuffle]
        op = FusedConv(helper.make_node("FusedConv", inputs, ["y"], domain="onnxrt", **attrs, **extra), None,
                       since_version=1)
    else:
        op = Conv(helper.make_node("Conv", inputs, ["y"], **attrs), None, since_version=11)
    op.set_const_inputs((1, 2) if const else ())
    return op


def dispatcher(op: Any, out: bool = False) -> dispatch.Dispatcher:
    """The node's dispatcher over Conv's table (``out``: one that takes (x, w, b, z, out),
    as a ConvConcat segment's)."""
    node = op.onnx_node
    target = fp._Segment(op) if out else op
    return dispatch.Dispatcher(target, dispatch.paths_for(node.op_type, node.domain))


def run(x: np.ndarray, w: np.ndarray, b: Any = None, z: Any = None, *, out: Any = None, op: Any = None,
        const: bool = True, **kw: Any) -> tuple[np.ndarray, str]:
    """(Y, the name of the path the table picked) for one call (``op``: a node kept between calls)."""
    if op is None:
        op = conv_op(z=z is not None, const=const, **kw)
    d = dispatcher(op, out is not None)
    inputs = (x, w, b, z, out) if out is not None else (x, w, b) + ((z,) if z is not None else ())
    name = d.choice(inputs)
    return d(*inputs)[0], name


def fast_conv(x: np.ndarray, w: np.ndarray, b: Any = None, z: Any = None, **kw: Any) -> np.ndarray:
    """Y of the table's path for this call."""
    return run(x, w, b, z, **kw)[0]


def run_path(name: str, x: np.ndarray, w: np.ndarray, b: Any = None, z: Any = None, *, out: Any = None,
             op: Any = None, const: bool = True, **kw: Any) -> np.ndarray:
    """Y of the table's entry ``name``, asserting that its condition holds for the call."""
    if op is None:
        op = conv_op(z=z is not None, const=const, **kw)
    target = fp._Segment(op) if out is not None else op
    inputs = (x, w, b, z, out) if out is not None else (x, w, b) + ((z,) if z is not None else ())
    node = op.onnx_node
    (path,) = [p for p in dispatch.paths_for(node.op_type, node.domain) if p.name == name]
    assert path.when(target, *inputs), f"{name} does not apply"
    if path.prepared:
        executor = path.fn(target, *inputs)
        assert executor is not None, f"{name} was not prepared"
        return executor(*inputs)[0]
    return path.fn(target, *inputs)[0]


def fast_conv_transpose(x: np.ndarray, w: np.ndarray, b: Any = None, **attrs: Any) -> np.ndarray:
    """Y of ConvTranspose's table (its reference when no entry applies) for one call."""
    from onnxrt.ops_cpu.op_conv_transpose import ConvTranspose

    attrs = {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items() if v is not None}
    op = ConvTranspose(helper.make_node("ConvTranspose", ["x", "w", "b"], ["y"], **attrs), None, since_version=11)
    d = dispatch.Dispatcher(op, dispatch.paths_for("ConvTranspose"))
    return d(x, w, b)[0]
