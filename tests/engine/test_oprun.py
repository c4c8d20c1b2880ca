"""OpRun: attribute parsing, defaults, required attributes and the signature properties."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper

from onnxrt.errors import InvalidAttributeError
from onnxrt.ops_cpu import OpRun
from onnxrt.ops_cpu.op_constant import Constant
from onnxrt.ops_cpu.op_scatter_elements import ScatterElements
from onnxrt.ops_cpu.op_shape import Shape


def test_signature_properties_scatter_elements():
    node = helper.make_node("ScatterElements", ["data", "indices", "updates"], ["y"], axis=1)
    op = ScatterElements(node, since_version=18)
    assert op.args_mandatory == ["data", "indices", "updates"]
    assert op.args_optional == []
    assert op.args_default == ["data", "indices", "updates", "axis=0", "reduction='none'"]
    assert op.args_default_modified == ["axis=1"]
    assert op.atts_value == {"axis": 1, "reduction": "none"}
    assert op.axis == 1 and op.reduction == "none"


def test_defaults_follow_the_resolved_version():
    node = helper.make_node("ScatterElements", ["data", "indices", "updates"], ["y"])
    op = ScatterElements(node, since_version=11)
    assert op.atts_value == {"axis": 0}
    assert op.args_default == ["data", "indices", "updates", "axis=0"]


def test_optional_inputs_and_parameters_without_default():
    node = helper.make_node("Shape", ["data"], ["y"], start=1)
    op = Shape(node, since_version=15)
    assert op.args_mandatory == ["data"]
    assert op.args_default == ["data", "end", "start=0"]
    assert op.args_default_modified == ["start=1"]
    (out,) = op.run(np.zeros((2, 3, 4)))
    np.testing.assert_array_equal(out, [3, 4])
    assert out.dtype == np.int64


def test_missing_required_attribute():
    class NeedsTo(OpRun):
        op_type = "Cast"

    node = helper.make_node("Cast", ["x"], ["y"], name="caster")
    with pytest.raises(InvalidAttributeError, match=r"Node 'caster' \(Cast\) misses the required attribute 'to'"):
        NeedsTo(node, since_version=13)


def test_wrong_attribute_type():
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], name="s", axis="one")
    with pytest.raises(InvalidAttributeError, match=r"attribute 'axis' must be of type INT, got STRING"):
        ScatterElements(node, since_version=18)


def test_desc_overrides_node_attributes():
    node = helper.make_node("ScatterElements", ["d", "i", "u"], ["y"], axis=0)
    op = ScatterElements(node, {"axis": 1}, since_version=18)
    assert op.axis == 1 and op.args_default_modified == ["axis=1"]


def test_constant_needs_exactly_one_value():
    node = helper.make_node("Constant", [], ["y"], name="c", value_float=1.0, value_int=2)
    with pytest.raises(InvalidAttributeError, match=r"Node 'c' \(Constant\): Constant needs exactly one of"):
        Constant(node, since_version=13)
    (out,) = Constant(helper.make_node("Constant", [], ["y"], value_strings=["a", "b"]), since_version=13).run()
    assert out.dtype == object and out.tolist() == ["a", "b"]
    (out,) = Constant(helper.make_node("Constant", [], ["y"], value_ints=[1, 2]), since_version=13).run()
    assert out.dtype == np.int64 and out.shape == (2,)
