"""QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear and QLinearMatMul: onnxruntime on random cases,
plain definitions written from the spec, every target type, rounding half to even, saturation, errors."""

from __future__ import annotations

import warnings

import ml_dtypes
import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

import onnxrt
from onnxrt.errors import GraphError, KernelError
from onnxrt.ops_cpu._quant import expand_param, saturate_cast
from onnxrt.ops_cpu.op_qlinear_matmul import qlinear_matmul
from onnxrt.ops_cpu.op_quantize_linear import dequantize_linear, dynamic_quantize_linear, quantize_linear

from .test_cast import MINIFLOATS, assert_codes, edge_values

F32 = np.float32
INT_TYPES = {
    "int8": (np.int8, TensorProto.INT8, -128, 127, 21),
    "uint8": (np.uint8, TensorProto.UINT8, 0, 255, 21),
    "int16": (np.int16, TensorProto.INT16, -32768, 32767, 21),
    "uint16": (np.uint16, TensorProto.UINT16, 0, 65535, 21),
    "int4": (ml_dtypes.int4, TensorProto.INT4, -8, 7, 21),
    "uint4": (ml_dtypes.uint4, TensorProto.UINT4, 0, 15, 21),
    "int2": (ml_dtypes.int2, TensorProto.INT2, -2, 1, 25),
    "uint2": (ml_dtypes.uint2, TensorProto.UINT2, 0, 3, 25),
}
FLOAT8 = {
    "e4m3fn": (ml_dtypes.float8_e4m3fn, TensorProto.FLOAT8E4M3FN, 448.0),
    "e4m3fnuz": (ml_dtypes.float8_e4m3fnuz, TensorProto.FLOAT8E4M3FNUZ, 240.0),
    "e5m2": (ml_dtypes.float8_e5m2, TensorProto.FLOAT8E5M2, 57344.0),
    "e5m2fnuz": (ml_dtypes.float8_e5m2fnuz, TensorProto.FLOAT8E5M2FNUZ, 57344.0),
}


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------


def _model(op, feeds, attrs=None, opset=21, inits=None, n_out=1):
    """One-node model; ``feeds`` become graph inputs, ``inits`` initializers (in node input order)."""
    inits = inits or {}
    names = list(feeds) + list(inits)
    order = [n for n in ("x", "a", "a_scale", "a_zero_point", "b", "b_scale", "b_zero_point", "scale", "zero_point", "y_scale", "y_zero_point") if n in names]
    order += [n for n in names if n not in order]
    outs = ["y", "y_scale_out", "y_zero_point_out"][:n_out]
    node = helper.make_node(op, order, outs, **(attrs or {}))
    gi = [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), np.shape(v)) for n, v in feeds.items()]
    go = [helper.make_value_info(o, onnx.TypeProto()) for o in outs]  # types left to inference
    gr = helper.make_graph([node], "g", gi, go, [numpy_helper.from_array(np.asarray(v), n) for n, v in inits.items()])
    model = helper.make_model(gr, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 10
    return model


def run_onnxrt(model, feeds):
    return onnxrt.InferenceSession(model).run(None, {k: np.asarray(v) for k, v in feeds.items()})


def run_ort(model, feeds):
    model = onnx.shape_inference.infer_shapes(model)  # onnxruntime wants typed graph outputs
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, {k: np.asarray(v) for k, v in feeds.items()})


def plain_quantize(x, scale, zp, lo, hi):
    """The spec formula on float32 values: saturate(round_half_even(x / scale) + zp)."""
    q = np.rint(x.astype(F32) / np.asarray(scale, F32)) + np.asarray(zp).astype(np.float64)
    return np.clip(q, lo, hi)


def readonly(a):
    a = np.array(a)
    a.flags.writeable = False
    return a


# --------------------------------------------------------------------------------------------
# QuantizeLinear: rounding, saturation, every target type
# --------------------------------------------------------------------------------------------


def test_rounds_half_to_even():
    x = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 3.5, 0.49999997, 1.5000001], F32)
    y = quantize_linear(x, F32(1), np.int8(0))
    np.testing.assert_array_equal(y, [-2, -2, 0, 0, 2, 2, 4, 0, 2])
    assert y.dtype == np.int8 and y.shape == (9,)
    # with a zero point the rounding happens before adding it: 0.5 + 1 -> 1, not 2
    np.testing.assert_array_equal(quantize_linear(np.array([0.5, 1.5], F32), F32(1), np.uint8(1)), [1, 3])


def test_saturate_cast_helper():
    v = np.array([-2.5, -0.5, 0.5, 1.5, 126.5, 127.5, 1e10, -1e10, np.nan], F32)
    y = saturate_cast(v, np.dtype(np.int8))
    assert y.dtype == np.int8
    np.testing.assert_array_equal(y, [-2, 0, 0, 2, 126, 127, 127, -128, -128])
    np.testing.assert_array_equal(v[:2], [-2.5, -0.5])  # not rounded in place
    big = saturate_cast(np.array([2.0**31, -(2.0**31) - 1e3, 2147483520.0], F32), np.dtype(np.int32))
    np.testing.assert_array_equal(big, [2**31 - 1, -(2**31), 2147483520])
    u4 = saturate_cast(np.array([7.5, 8.5, 15.5, -1.0], F32), np.dtype(ml_dtypes.uint4))
    np.testing.assert_array_equal(u4.astype(np.int64), [8, 8, 15, 0])
    f8 = saturate_cast(np.array([1e9, -1e9], F32), np.dtype(ml_dtypes.float8_e5m2), saturate=False)
    np.testing.assert_array_equal(f8.astype(F32), [np.inf, -np.inf])
    with pytest.raises(KernelError, match="Cannot quantize"):
        saturate_cast(v, np.dtype(np.int64))


def test_expand_param_blocks():
    p = np.array([[1, 2], [3, 4]], F32)
    np.testing.assert_array_equal(expand_param(p, (2, 5), axis=1, block_size=3, name="s"), [[1, 1, 1, 2, 2], [3, 3, 3, 4, 4]])
    np.testing.assert_array_equal(expand_param(np.array([5.0], F32), (2, 5), axis=1, block_size=0, name="s"), 5.0)
    assert expand_param(np.arange(5, dtype=F32), (2, 5), axis=-1, block_size=0, name="s").shape == (1, 5)


@pytest.mark.parametrize("name", list(INT_TYPES))
def test_saturates_every_integer_type(name):
    dt, elem, lo, hi, opset = INT_TYPES[name]
    x = np.array([lo - 1000.0, lo - 0.6, lo, lo + 0.4, hi - 0.4, hi, hi + 0.4, hi + 0.6, hi + 1e6, -np.inf, np.inf], F32)
    expected = [lo, lo, lo, lo, hi, hi, hi, hi, hi, lo, hi]
    # through the engine, the target type given by the zero point (0)
    zp = np.zeros((), dtype=dt)
    (y,) = run_onnxrt(_model("QuantizeLinear", {"x": x}, opset=opset, inits={"y_scale": F32(1), "y_zero_point": zp}), {"x": x})
    assert y.dtype == np.dtype(dt) and y.shape == x.shape
    np.testing.assert_array_equal(y.astype(np.int64), expected)
    # and given by output_dtype alone
    (y2,) = run_onnxrt(_model("QuantizeLinear", {"x": x}, {"output_dtype": elem}, opset=opset, inits={"y_scale": F32(1)}), {"x": x})
    assert y2.dtype == np.dtype(dt)
    np.testing.assert_array_equal(y2.astype(np.int64), expected)


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "uint16"])
def test_random_per_tensor_against_onnxruntime(name):
    dt, _, lo, hi, _ = INT_TYPES[name]
    rng = np.random.default_rng(1)
    x = (rng.standard_normal((3, 4, 5)) * (hi - lo) / 6).astype(F32)
    x.flat[:6] = [0.5, 1.5, -0.5, np.nan, 1e9, -1e9]  # ties, NaN (the lowest value, as onnxruntime) and saturation
    zp = np.asarray((lo + hi) // 2 + 3, dtype=dt)
    model = _model("QuantizeLinear", {"x": x}, opset=21, inits={"y_scale": F32(0.37), "y_zero_point": zp})
    (got,) = run_onnxrt(model, {"x": x})
    (exp,) = run_ort(model, {"x": x})
    assert got.dtype == exp.dtype == np.dtype(dt)
    np.testing.assert_array_equal(got, exp)
    finite = np.isfinite(x)
    np.testing.assert_array_equal(got[finite], plain_quantize(x, 0.37, zp, lo, hi)[finite])


@pytest.mark.parametrize("axis", [0, 1, 2, -1])
@pytest.mark.parametrize("name", ["uint8", "int8", "int16"])
def test_per_axis_against_onnxruntime(axis, name):
    dt, _, lo, hi, _ = INT_TYPES[name]
    rng = np.random.default_rng(2)
    x = (rng.standard_normal((2, 3, 4)) * 50).astype(F32)
    d = x.shape[axis]
    scale = (rng.random(d) + 0.2).astype(F32)
    zp = rng.integers(max(lo, -20), min(hi, 20), d).astype(dt)
    model = _model("QuantizeLinear", {"x": x}, {"axis": axis}, opset=13 if name != "int16" else 21, inits={"y_scale": scale, "y_zero_point": zp})
    (got,) = run_onnxrt(model, {"x": x})
    (exp,) = run_ort(model, {"x": x})
    np.testing.assert_array_equal(got, exp)
    shape = [1, 1, 1]
    shape[axis] = d
    np.testing.assert_array_equal(got, plain_quantize(x, scale.reshape(shape), zp.reshape(shape), lo, hi))


def plain_blocked(x, scale, zp, axis, block, lo, hi):
    """Blocked quantization with an explicit loop over blocks (the test's own definition)."""
    out = np.empty(x.shape, np.float64)
    xm = np.moveaxis(x, axis, 0)
    om = np.moveaxis(out, axis, 0)
    sm = np.moveaxis(scale, axis, 0)
    zm = np.moveaxis(zp, axis, 0)
    for i in range(xm.shape[0]):
        om[i] = plain_quantize(xm[i], sm[i // block], zm[i // block], lo, hi)
    return out


@pytest.mark.parametrize("axis,block", [(0, 2), (1, 3), (2, 2), (-1, 5), (1, 4)])
def test_blocked_against_onnxruntime_and_loop(axis, block):
    rng = np.random.default_rng(3)
    x = (rng.standard_normal((4, 6, 5)) * 40).astype(F32)
    ax = axis % 3
    sshape = list(x.shape)
    sshape[ax] = -(-x.shape[ax] // block)
    scale = (rng.random(sshape) + 0.3).astype(F32)
    zp = rng.integers(-10, 10, sshape).astype(np.int8)
    model = _model("QuantizeLinear", {"x": x}, {"axis": axis, "block_size": block}, opset=21, inits={"y_scale": scale, "y_zero_point": zp})
    (got,) = run_onnxrt(model, {"x": x})
    np.testing.assert_array_equal(got, plain_blocked(x, scale, zp, ax, block, -128, 127))
    (exp,) = run_ort(model, {"x": x})
    np.testing.assert_array_equal(got, exp)
    # the round trip: DequantizeLinear with the same blocks
    back = dequantize_linear(got, scale, zp, axis=axis, block_size=block)
    err = np.abs(back - x) <= np.repeat(scale, block, axis=ax)[tuple(slice(0, n) for n in x.shape)] / 2 + 1e-4
    assert err[(got > -128) & (got < 127)].all()


@pytest.mark.parametrize("opset", [19, 21, 23, 25])
def test_float16_input_and_scale_against_onnxruntime(opset):
    rng = np.random.default_rng(4)
    x = (rng.standard_normal(200) * 30).astype(np.float16)
    x[0] = 29.5625  # / float16(0.3) is 98.5256 in float32 but 98.5 in float16: the two precisions round apart
    model = _model("QuantizeLinear", {"x": x}, opset=opset, inits={"y_scale": np.float16(0.3), "y_zero_point": np.int8(-3)})
    (got,) = run_onnxrt(model, {"x": x})
    (exp,) = run_ort(model, {"x": x})
    assert got.dtype == np.int8
    np.testing.assert_array_equal(got, exp)
    # before 23 the division runs in float32, from 23 in the scale's type (float16)
    assert got[0] == (96 if opset < 23 else 95)


def test_bfloat16_input_divides_in_bfloat16():
    x = np.array([1.0, 2.0, 3.0, 255.0, 1000.0], dtype=ml_dtypes.bfloat16)
    y = quantize_linear(x, np.array(0.1, dtype=ml_dtypes.bfloat16), np.uint8(0))
    # 0.1 is 0.10009765625 in bfloat16; the quotients round to bfloat16 (8 significant bits) before rint
    s = float(np.array(0.1, dtype=ml_dtypes.bfloat16))
    q = (np.array([1.0, 2.0, 3.0, 255.0, 1000.0]) / s).astype(ml_dtypes.bfloat16).astype(np.float64)
    np.testing.assert_array_equal(y, np.clip(np.rint(q), 0, 255))
    assert y.dtype == np.uint8


def test_precision_attribute_sets_the_division_precision():
    x = np.array([2049.0, 3.0], F32)
    inits = {"y_scale": F32(1), "y_zero_point": np.int16(0)}
    (default,) = run_onnxrt(_model("QuantizeLinear", {"x": x}, opset=23, inits=inits), {"x": x})
    (half,) = run_onnxrt(_model("QuantizeLinear", {"x": x}, {"precision": TensorProto.FLOAT16}, opset=23, inits=inits), {"x": x})
    np.testing.assert_array_equal(default, [2049, 3])
    # 2049 is not a float16: it rounds to 2048 (tie to even) before the division
    np.testing.assert_array_equal(half, [2048, 3])


def test_int32_input():
    x = np.array([-300, -7, 0, 7, 300, 2**30], np.int32)
    y = quantize_linear(x, F32(2), np.int8(1))
    np.testing.assert_array_equal(y, [-128, -3, 1, 5, 127, 127])  # -7/2 = -3.5 -> -4 (even) + 1


@pytest.mark.parametrize("name", list(FLOAT8))
def test_float8_saturate_tables(name):
    dt, elem, fmax = FLOAT8[name]
    fnuz = "fnuz" in name
    x = np.array([0.0, -0.0, 1.3, -1.3, np.inf, -np.inf, 1e6, -1e6, np.nan], F32)
    sat = quantize_linear(x, F32(1), np.zeros((), dt), saturate=True)
    assert sat.dtype == np.dtype(dt) and sat.shape == x.shape
    s = sat.astype(np.float64)
    np.testing.assert_array_equal(s[:8], [0, 0, 1.25, -1.25, fmax, -fmax, fmax, -fmax])
    assert np.isnan(s[8])
    # -0: kept on the types that have it, +0 on the FNUZ types (whose "negative zero" is NaN)
    assert bool(np.signbit(s[1])) is (not fnuz)
    raw = quantize_linear(x, F32(1), np.zeros((), dt), saturate=False).astype(np.float64)
    np.testing.assert_array_equal(raw[:4], [0, 0, 1.25, -1.25])
    if name == "e5m2":
        np.testing.assert_array_equal(raw[4:8], [np.inf, -np.inf, np.inf, -np.inf])
    else:
        assert np.isnan(raw[4:8]).all()
    # through the engine with the attribute, onnx's conformance value: 100000 / 2 saturates
    model = _model("QuantizeLinear", {"x": x}, {"saturate": 0}, opset=21, inits={"y_scale": F32(1), "y_zero_point": np.zeros((), dt)})
    (y,) = run_onnxrt(model, {"x": x})
    np.testing.assert_array_equal(np.isnan(y.astype(np.float64)), np.isnan(raw))


@pytest.mark.parametrize("dt,values", [
    (ml_dtypes.float4_e2m1fn, [0.0, 0.5, 1.0, 1.5, 3.0, 6.0, -6.0, 6.0]),
    (ml_dtypes.float6_e2m3fn, [0.0, 0.5, 1.25, 1.25, 2.5, 7.0, -7.5, 7.5]),
    (ml_dtypes.float6_e3m2fn, [0.0, 0.5, 1.25, 1.25, 2.5, 7.0, -28.0, 28.0]),
])
def test_small_floats_always_clamp(dt, values):
    x = np.array([0.0, 0.5, 1.2, 1.26, 2.6, 7.0, -100.0, np.inf], F32)
    for saturate in (True, False):
        y = quantize_linear(x, F32(1), np.zeros((), dt), saturate=saturate)
        assert y.dtype == np.dtype(dt)
        np.testing.assert_array_equal(y.astype(np.float64), values)


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("name", list(MINIFLOATS))
def test_float_targets_at_the_edges(name, saturate):
    """x / 1 is exact: QuantizeLinear's result is the Cast encoding of x at every edge of the type
    (ties to even, the largest value and the boundary above it, subnormals, -0, +-inf, NaN)."""
    dt, elem, _ = MINIFLOATS[name]
    x = edge_values(name, np.dtype(F32))
    for inits in ({"y_scale": F32(1)}, {"y_scale": F32(1), "y_zero_point": np.zeros((), dt)}):
        attrs = {"saturate": saturate} if len(inits) == 2 else {"saturate": saturate, "output_dtype": elem}
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            (y,) = run_onnxrt(_model("QuantizeLinear", {"x": x}, attrs, opset=28, inits=inits), {"x": x})
        assert_codes(name, x, y, bool(saturate))


@pytest.mark.parametrize("name", ["int4", "uint4", "int2", "uint2"])
def test_sub_byte_targets_round_half_to_even_then_saturate(name):
    dt, elem, lo, hi, opset = INT_TYPES[name]
    ties = [k + 0.5 for k in range(lo - 3, hi + 3)]
    near = [np.nextafter(F32(t), F32(np.inf)) for t in ties] + [np.nextafter(F32(t), F32(-np.inf)) for t in ties]
    x = np.array(ties + near + [np.inf, -np.inf, np.nan, 1e30, -1e30, -0.0], F32).reshape(1, -1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (y,) = run_onnxrt(_model("QuantizeLinear", {"x": x}, {"output_dtype": elem}, opset=opset, inits={"y_scale": F32(1)}), {"x": x})
    assert y.dtype == np.dtype(dt) and y.shape == x.shape
    # Python's round() of a float is half to even and exact; NaN (undefined) gives the lowest value
    expected = [lo if np.isnan(v) else min(max(round(v) if np.isfinite(v) else int(np.sign(v)) * 10**9, lo), hi) for v in x.reshape(-1).tolist()]
    assert y.astype(np.int64).reshape(-1).tolist() == expected


def _chain(target_elem, zp, scale, opset, axis=1):
    """x -> QuantizeLinear -> DequantizeLinear -> float: both engines run it, whatever the exotic type."""
    nodes = [
        helper.make_node("QuantizeLinear", ["x", "s", "z"], ["q"], axis=axis),
        helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=axis),
    ]
    zt = helper.make_tensor("z", target_elem, list(np.shape(zp)), np.asarray(zp, F32).reshape(-1).tolist())
    gr = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], [numpy_helper.from_array(np.asarray(scale, F32), "s"), zt],
    )
    m = helper.make_model(gr, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 10
    return m


@pytest.mark.parametrize("elem,zp", [
    (TensorProto.INT4, [1, -2, 0]), (TensorProto.UINT4, [1, 8, 3]),
    (TensorProto.FLOAT8E4M3FN, [0, 0, 0]), (TensorProto.FLOAT8E5M2, [0, 0, 0]),
    (TensorProto.FLOAT8E4M3FNUZ, [0, 0, 0]), (TensorProto.FLOAT8E5M2FNUZ, [0, 0, 0]),
])
def test_exotic_targets_round_trip_like_onnxruntime(elem, zp):
    rng = np.random.default_rng(5)
    x = (rng.standard_normal((2, 3, 7)) * 20).astype(F32)
    scale = np.array([0.5, 2.0, 3.0], F32)
    model = _chain(elem, zp, scale, 21)
    (got,) = run_onnxrt(model, {"x": x})
    (exp,) = run_ort(model, {"x": x})
    assert got.dtype == np.float32 and got.shape == x.shape
    np.testing.assert_array_equal(got, exp)


def test_int2_and_float4_conformance_values():
    x = np.array([[0.0, 2.5, 4.8, 8.6], [-4.0, -3.0, 1.0, 2.0], [-0.0, -2.5, -4.8, -8.6]], F32)
    scale = np.array([2.0, 3.0, 4.0], F32)
    y = quantize_linear(x, scale, np.zeros(3, ml_dtypes.int2), axis=0)
    assert y.dtype == np.dtype(ml_dtypes.int2)
    np.testing.assert_array_equal(y.astype(np.int64), [[0, 1, 1, 1], [-1, -1, 0, 1], [0, -1, -1, -2]])
    y4 = quantize_linear(x, scale, np.zeros(3, ml_dtypes.float4_e2m1fn), axis=0)
    # x / scale then round to the nearest of 0, 0.5, 1, 1.5, 2, 3, 4, 6 (ties to even mantissa)
    np.testing.assert_array_equal(y4.astype(F32), [[0, 1, 2, 4], [-1.5, -1, 0.5, 0.5], [0, -0.5, -1, -2]])


def test_output_dtype_rules():
    x = np.array([1.0, -1.0], F32)
    (y,) = run_onnxrt(_model("QuantizeLinear", {"x": x}, opset=21, inits={"y_scale": F32(1)}), {"x": x})
    assert y.dtype == np.uint8  # neither output_dtype nor zero point: uint8
    np.testing.assert_array_equal(y, [1, 0])
    with pytest.raises(KernelError, match="output_dtype"):
        quantize_linear(x, F32(1), np.uint8(0), output_dtype=np.dtype(np.int8))
    with pytest.raises(GraphError, match="output_dtype"):
        run_onnxrt(_model("QuantizeLinear", {"x": x}, {"output_dtype": TensorProto.FLOAT}, opset=21, inits={"y_scale": F32(1)}), {"x": x})


def test_quantize_errors():
    x = np.zeros((2, 3), F32)
    with pytest.raises(KernelError, match=r"y_scale has shape \[4\], expected a scalar or a 1-D tensor of length 3"):
        quantize_linear(x, np.ones(4, F32), None, axis=1)
    with pytest.raises(KernelError, match="y_zero_point has shape"):
        quantize_linear(x, np.ones(3, F32), np.zeros(2, np.uint8), axis=1)
    with pytest.raises(KernelError, match="blocked quantization"):
        quantize_linear(x, np.ones(3, F32), None, axis=1, block_size=2)
    with pytest.raises(KernelError, match=r"expected dimension 1 to be 2"):
        quantize_linear(x, np.ones((2, 3), F32), None, axis=1, block_size=2)
    with pytest.raises(KernelError, match="axis 2 is out of range"):
        quantize_linear(x, np.ones(3, F32), None, axis=2)


def test_inputs_are_not_modified():
    x = readonly(np.linspace(-3, 3, 12, dtype=F32).reshape(3, 4))
    s = readonly(np.array([0.5, 1.0, 2.0], F32))
    z = readonly(np.array([1, 2, 3], np.int8))
    before = x.copy()
    q = quantize_linear(x, s, z, axis=0)
    dequantize_linear(q, s, z, axis=0)
    dynamic_quantize_linear(x)
    np.testing.assert_array_equal(x, before)


@pytest.mark.parametrize("opset", [10, 13, 19, 21, 23, 24, 25, 28])
def test_every_version_runs(opset):
    x = np.array([[-1.0, 0.25, 3.0], [100.0, -100.0, 0.74]], F32)
    inits = {"y_scale": F32(0.5), "y_zero_point": np.uint8(10)}
    (q,) = run_onnxrt(_model("QuantizeLinear", {"x": x}, opset=opset, inits=inits), {"x": x})
    np.testing.assert_array_equal(q, [[8, 10, 16], [210, 0, 11]])
    m = _model("DequantizeLinear", {"x": q}, opset=opset, inits={"x_scale": F32(0.5), "x_zero_point": np.uint8(10)})
    (d,) = run_onnxrt(m, {"x": q})
    assert d.dtype == np.float32
    np.testing.assert_array_equal(d, [[-1.0, 0.0, 3.0], [100.0, -5.0, 0.5]])


# --------------------------------------------------------------------------------------------
# DequantizeLinear
# --------------------------------------------------------------------------------------------

DEQ_TYPES = [
    (np.int8, [-128, -1, 0, 5, 127], 21),
    (np.uint8, [0, 1, 128, 255], 21),
    (np.int16, [-32768, -3, 0, 32767], 21),
    (np.uint16, [0, 7, 65535], 21),
    (np.int32, [-(2**31), -5, 0, 2**31 - 1], 21),
    (ml_dtypes.int4, [-8, -1, 0, 7], 21),
    (ml_dtypes.uint4, [0, 3, 15], 21),
    (ml_dtypes.int2, [-2, -1, 0, 1], 25),
    (ml_dtypes.uint2, [0, 1, 2, 3], 25),
    (ml_dtypes.float8_e4m3fn, [-448.0, -1.5, 0.0, 0.3125, 448.0], 21),
    (ml_dtypes.float8_e4m3fnuz, [-240.0, 0.0, 1.125], 21),
    (ml_dtypes.float8_e5m2, [-57344.0, 0.0, 1.5, 96.0], 21),
    (ml_dtypes.float8_e5m2fnuz, [-57344.0, 0.0, 0.75], 21),
    (ml_dtypes.float4_e2m1fn, [-6.0, -0.5, 0.0, 1.5, 4.0], 23),
    (ml_dtypes.float6_e2m3fn, [-7.5, 0.0, 0.875], 28),
    (ml_dtypes.float6_e3m2fn, [-28.0, 0.0, 0.3125], 28),
]


@pytest.mark.parametrize("dt,values,opset", DEQ_TYPES, ids=lambda v: str(np.dtype(v)) if isinstance(v, type) else None)
def test_dequantize_every_input_type(dt, values, opset):
    x = np.array(values, dtype=np.float64).astype(dt)
    zp = None if dt is np.int32 else np.asarray(values[1], dtype=np.float64).astype(dt)
    inits = {"x_scale": F32(0.5)}
    if zp is not None:
        inits["x_zero_point"] = zp
    (y,) = run_onnxrt(_model("DequantizeLinear", {"x": x}, opset=opset, inits=inits), {"x": x})
    assert y.dtype == np.float32 and y.shape == x.shape
    expected = (np.array(values, np.float64) - (values[1] if zp is not None else 0)) * 0.5
    np.testing.assert_array_equal(y, expected.astype(F32))


@pytest.mark.parametrize("name", ["int8", "uint8", "int16", "uint16"])
def test_dequantize_random_against_onnxruntime(name):
    dt, _, lo, hi, _ = INT_TYPES[name]
    rng = np.random.default_rng(6)
    x = rng.integers(lo, hi, (3, 4, 5), endpoint=True).astype(dt)
    for inits, attrs in [
        ({"x_scale": F32(0.0371), "x_zero_point": np.asarray(lo + 7, dt)}, {}),
        ({"x_scale": (rng.random(4) + 0.01).astype(F32), "x_zero_point": rng.integers(lo, hi, 4).astype(dt)}, {"axis": 1}),
        ({"x_scale": (rng.random((3, 4, 2)) + 0.01).astype(F32), "x_zero_point": rng.integers(lo, hi, (3, 4, 2)).astype(dt)}, {"axis": -1, "block_size": 3}),
    ]:
        model = _model("DequantizeLinear", {"x": x}, attrs, opset=21, inits=inits)
        (got,) = run_onnxrt(model, {"x": x})
        (exp,) = run_ort(model, {"x": x})
        np.testing.assert_allclose(got, exp, rtol=1e-6, atol=0)


def test_dequantize_int32_without_zero_point_against_onnxruntime():
    x = np.array([-(2**31), -1, 0, 12345, 2**31 - 1], np.int32)
    model = _model("DequantizeLinear", {"x": x}, opset=21, inits={"x_scale": F32(0.25)})
    np.testing.assert_array_equal(run_onnxrt(model, {"x": x})[0], run_ort(model, {"x": x})[0])


def test_dequantize_float16_multiplies_like_onnxruntime():
    # 2051 is no float16; the product is computed in float32 and rounded once (onnxruntime's reading)
    x = np.array([2051, -7, 30000], np.int16)
    for opset in (21, 23, 25):
        model = _model("DequantizeLinear", {"x": x}, opset=opset, inits={"x_scale": np.float16(0.75), "x_zero_point": np.int16(0)})
        (got,) = run_onnxrt(model, {"x": x})
        assert got.dtype == np.float16
        np.testing.assert_array_equal(got, run_ort(model, {"x": x})[0])
        assert got[0] == 1538


def test_dequantize_output_types():
    x = np.array([0, 100, 255], np.uint8)
    y = dequantize_linear(x, np.float16(0.1), np.uint8(0))
    assert y.dtype == np.float16
    # in float16: 100 * float16(0.1) = 100 * 0.0999755859375 rounded to float16
    np.testing.assert_array_equal(y, (np.array([0, 100, 255], np.float16) * np.float16(0.1)).astype(np.float16))
    yb = dequantize_linear(x, np.array(0.5, ml_dtypes.bfloat16), np.uint8(1))
    assert yb.dtype == np.dtype(ml_dtypes.bfloat16)
    np.testing.assert_array_equal(yb.astype(F32), [-0.5, 49.5, 127.0])
    (yo,) = run_onnxrt(_model("DequantizeLinear", {"x": x}, {"output_dtype": TensorProto.FLOAT16}, opset=23, inits={"x_scale": F32(0.5)}), {"x": x})
    assert yo.dtype == np.float16
    np.testing.assert_array_equal(yo, [0.0, 50.0, 127.5])


def test_dequantize_float8e8m0_scale():
    x = np.array([1, -2, 3], np.int8)
    scale = np.array(0.25, dtype=ml_dtypes.float8_e8m0fnu)
    (y,) = run_onnxrt(_model("DequantizeLinear", {"x": x}, {"output_dtype": TensorProto.FLOAT}, opset=24, inits={"x_scale": scale}), {"x": x})
    np.testing.assert_array_equal(y, [0.25, -0.5, 0.75])
    with pytest.raises(KernelError, match="output_dtype"):
        dequantize_linear(x, scale)


def test_dequantize_errors():
    with pytest.raises(KernelError, match=r"x_scale has shape \[2\]"):
        dequantize_linear(np.zeros((3, 4), np.int8), np.ones(2, F32), axis=0)
    with pytest.raises(KernelError, match="x_zero_point has shape"):
        dequantize_linear(np.zeros((3, 4), np.int8), np.ones(3, F32), np.zeros(4, np.int8), axis=0)


# --------------------------------------------------------------------------------------------
# DynamicQuantizeLinear
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("case", ["mixed", "positive", "negative", "zeros", "empty", "ties"])
def test_dynamic_quantize_against_onnxruntime(case):
    rng = np.random.default_rng(7)
    x = {
        "mixed": (rng.standard_normal((4, 5)) * 3).astype(F32),
        "positive": (rng.random((3, 3)) * 10 + 1).astype(F32),
        "negative": -(rng.random(7) * 10 + 1).astype(F32),
        "zeros": np.zeros((2, 3), F32),
        "empty": np.zeros((0, 3), F32),
        "ties": np.array([0.0, 2.55, 5.1, 1.275], F32),
    }[case]
    model = _model("DynamicQuantizeLinear", {"x": x}, opset=11, n_out=3)
    got = run_onnxrt(model, {"x": x})
    exp = run_ort(model, {"x": x})
    for g, e in zip(got, exp):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, e)


def test_dynamic_quantize_formula():
    x = np.array([-1.0, 0.0, 2.0, 3.0], F32)
    y, scale, zp = dynamic_quantize_linear(x)
    assert scale.dtype == np.float32 and zp.dtype == np.uint8 and y.dtype == np.uint8
    assert scale.shape == () and zp.shape == ()
    s = F32(4.0) / F32(255)
    assert scale == s
    assert zp == np.rint(1.0 / s)  # -min / scale = 63.75 -> 64
    np.testing.assert_array_equal(y, np.clip(np.rint(x / s) + 64, 0, 255))


# --------------------------------------------------------------------------------------------
# QLinearMatMul
# --------------------------------------------------------------------------------------------


def exact_qlinear_matmul(a, sa, za, b, sb, zb, sy, zy, lo, hi):
    """Integer accumulation in int64, requantization in float32 as the spec's formula."""
    acc = np.matmul(a.astype(np.int64) - np.asarray(za, np.int64), b.astype(np.int64) - np.asarray(zb, np.int64))
    mult = (np.asarray(sa, F32) * np.asarray(sb, F32)) / np.asarray(sy, F32)
    return np.clip(np.rint(acc.astype(F32) * mult) + np.asarray(zy, np.int64), lo, hi)


@pytest.mark.parametrize("ta,tb,ty", [(np.uint8, np.uint8, np.uint8), (np.int8, np.int8, np.int8), (np.uint8, np.int8, np.uint8), (np.int8, np.uint8, np.int8)])
@pytest.mark.parametrize("shapes", [((5, 7), (7, 3)), ((2, 5, 7), (7, 4)), ((2, 3, 4), (2, 4, 6)), ((4, 300), (300, 2)), ((2, 3, 700), (700,)), ((600,), (600, 3))])
def test_qlinear_matmul_exact(ta, tb, ty, shapes):
    rng = np.random.default_rng(8)
    ia, ib, iy = np.iinfo(ta), np.iinfo(tb), np.iinfo(ty)
    a = rng.integers(ia.min, ia.max, shapes[0], endpoint=True).astype(ta)
    b = rng.integers(ib.min, ib.max, shapes[1], endpoint=True).astype(tb)
    k = shapes[0][-1]
    args = (a, F32(0.02), ta(3), b, F32(0.03), tb(-2 if tb is np.int8 else 7), F32(0.0006 * k), ty(5))
    y = qlinear_matmul(*args)
    assert y.dtype == np.dtype(ty) and y.shape == np.matmul(a, b).shape
    np.testing.assert_array_equal(y, exact_qlinear_matmul(*args, iy.min, iy.max))


@pytest.mark.parametrize("opset", [10, 21])
def test_qlinear_matmul_against_onnxruntime(opset):
    rng = np.random.default_rng(9)
    # b stays within [-64, 63]: onnxruntime's AVX2 u8s8 kernel saturates 16-bit pair sums beyond that
    a = rng.integers(0, 255, (3, 6, 16), endpoint=True).astype(np.uint8)
    b = rng.integers(-64, 63, (16, 5), endpoint=True).astype(np.int8)
    feeds = {"a": a}
    inits = {
        "a_scale": F32(0.01), "a_zero_point": np.uint8(128), "b": b, "b_scale": (rng.random(5) * 0.02 + 0.01).astype(F32),
        "b_zero_point": np.zeros(5, np.int8), "y_scale": F32(0.05), "y_zero_point": np.uint8(100),
    }
    model = _model("QLinearMatMul", feeds, opset=opset, inits=inits)
    (got,) = run_onnxrt(model, feeds)
    (exp,) = run_ort(model, feeds)
    assert got.dtype == np.uint8 and got.shape == (3, 6, 5)
    np.testing.assert_array_equal(got, exp)


def test_qlinear_matmul_per_row_and_per_column():
    rng = np.random.default_rng(10)
    a = rng.integers(0, 255, (4, 6)).astype(np.uint8)
    b = rng.integers(0, 255, (6, 3)).astype(np.uint8)
    sa, za = (rng.random(4) * 0.1 + 0.01).astype(F32), rng.integers(0, 255, 4).astype(np.uint8)
    sb, zb = (rng.random(3) * 0.1 + 0.01).astype(F32), rng.integers(0, 255, 3).astype(np.uint8)
    y = qlinear_matmul(a, sa, za, b, sb, zb, F32(2.0), np.uint8(128))
    expected = exact_qlinear_matmul(a, sa[:, None], za[:, None], b, sb[None, :], zb[None, :], F32(2.0), 128, 0, 255)
    np.testing.assert_array_equal(y, expected)


def test_qlinear_matmul_float8():
    rng = np.random.default_rng(11)
    a = (rng.standard_normal((3, 4)) * 4).astype(ml_dtypes.float8_e4m3fn)
    b = (rng.standard_normal((4, 2)) * 4).astype(ml_dtypes.float8_e4m3fn)
    zero = np.zeros((), ml_dtypes.float8_e4m3fn)
    y = qlinear_matmul(a, F32(1.5), zero, b, F32(0.5), zero, F32(0.25), zero)
    assert y.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    real = (a.astype(np.float64) @ b.astype(np.float64)) * 1.5 * 0.5 / 0.25
    np.testing.assert_array_equal(y.astype(F32), np.clip(real.astype(F32), -448, 448).astype(ml_dtypes.float8_e4m3fn).astype(F32))


def test_qlinear_matmul_errors():
    a = np.zeros((2, 3), np.uint8)
    with pytest.raises(KernelError, match="cannot be multiplied"):
        qlinear_matmul(a, F32(1), np.uint8(0), np.zeros((4, 2), np.uint8), F32(1), np.uint8(0), F32(1), np.uint8(0))
    with pytest.raises(KernelError, match="a_scale has 3 values, expected one or 2"):
        qlinear_matmul(a, np.ones(3, F32), np.uint8(0), np.zeros((3, 2), np.uint8), F32(1), np.uint8(0), F32(1), np.uint8(0))
