"""Resize and Upsample: spec examples, a plain-loop definition, onnxruntime on random cases, versions, dtypes, errors."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper

from onnxrt.backend import run_node
from onnxrt.errors import GraphError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu.op_resize import axis_plan, resize

TP = TensorProto
ort.set_default_logger_severity(3)


def ort_node(node, feeds: dict[str, np.ndarray], opset: int, out_types: list[int] | None = None) -> list[np.ndarray]:
    """Run one node in onnxruntime (the oracle); ``feeds`` in the node's input order."""
    inputs = [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()]
    first = helper.np_dtype_to_tensor_dtype(next(iter(feeds.values())).dtype)
    outs = [helper.make_tensor_value_info(o, (out_types or [first] * len(node.output))[i], None) for i, o in enumerate(node.output)]
    graph = helper.make_graph([node], "oracle", inputs, outs)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 9
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def onnxrt_node(node, feeds: dict[str, np.ndarray], opset: int) -> list[np.ndarray]:
    return list(run_node(node, feeds, opset_version=opset))


def resize_node(inputs=("X", "", "S"), **attrs):
    return helper.make_node("Resize", list(inputs), ["Y"], **attrs)


# --------------------------------------------------------------------------------------
# a plain definition from the spec text: one output element at a time
# --------------------------------------------------------------------------------------


def loop_coordinate(x, in_len, out_len, scale, mode, start=0.0, end=1.0):
    resized = in_len * scale
    if mode == "half_pixel":
        return (x + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        adjustment = out_len / resized
        return in_len / 2 * (1 - adjustment) + (x + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (x + 0.5) / scale - 0.5 if out_len > 1 else 0.0
    if mode == "align_corners":
        return 0.0 if resized == 1 else x * (in_len - 1) / (resized - 1)
    if mode == "asymmetric":
        return x / scale
    if mode == "tf_crop_and_resize":
        if resized > 1:
            return start * (in_len - 1) + x * (end - start) * (in_len - 1) / (resized - 1)
        return 0.5 * (start + end) * (in_len - 1)
    raise AssertionError(mode)


def loop_cubic(d, a):
    d = abs(d)
    if d <= 1:
        return (a + 2) * d**3 - (a + 3) * d**2 + 1
    if d < 2:
        return a * d**3 - 5 * a * d**2 + 8 * a * d - 4 * a
    return 0.0


def loop_resize_1d(v, out_len, scale, mode, ctm, a=-0.75, exclude_outside=0, start=0.0, end=1.0, extrapolation=0.0):
    """1-D linear/cubic resize of a list, straight from the spec (no antialias)."""
    n = len(v)
    out = []
    for x in range(out_len):
        xo = loop_coordinate(x, n, out_len, scale, ctm, start, end)
        if ctm == "tf_crop_and_resize" and (xo < 0 or xo > n - 1):
            out.append(extrapolation)
            continue
        base = int(np.floor(xo))
        taps = [base, base + 1] if mode == "linear" else [base - 1, base, base + 1, base + 2]
        weights = []
        for t in taps:
            d = t - xo
            w = max(0.0, 1 - abs(d)) if mode == "linear" else loop_cubic(d, a)
            if exclude_outside and not 0 <= t < n:
                w = 0.0
            weights.append(w)
        total = sum(weights)
        acc = sum(w * v[min(max(t, 0), n - 1)] for t, w in zip(taps, weights))
        out.append(acc / total if exclude_outside else acc)
    return out


def loop_resize_2d(img, out_h, out_w, sh, sw, mode, ctm, **kw):
    rows = [loop_resize_1d(list(r), out_w, sw, mode, ctm, **kw) for r in img]
    cols = np.array(rows).T
    return np.array([loop_resize_1d(list(c), out_h, sh, mode, ctm, **kw) for c in cols]).T


# --------------------------------------------------------------------------------------
# spec examples and the plain definition
# --------------------------------------------------------------------------------------


def test_upsample_spec_example_nearest():
    x = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
    node = helper.make_node("Upsample", ["X"], ["Y"], mode="nearest", height_scale=2.0, width_scale=2.0)
    (y,) = onnxrt_node(node, {"X": x}, opset=1)
    expected = np.array([[[[1, 1, 2, 2], [1, 1, 2, 2], [3, 3, 4, 4], [3, 3, 4, 4]]]], dtype=np.float32)
    np.testing.assert_array_equal(y, expected)
    assert y.dtype == np.float32


def test_linear_align_corners_known_values():
    x = np.array([[[[1, 2], [3, 4]]]], dtype=np.float32)
    y = resize(x, sizes=np.array([1, 1, 3, 3]), mode="linear", coordinate_transformation_mode="align_corners")
    np.testing.assert_allclose(y[0, 0], [[1, 1.5, 2], [2, 2.5, 3], [3, 3.5, 4]], rtol=1e-6)


@pytest.mark.parametrize(
    "mode,ctm,a,exclude",
    [
        ("linear", "half_pixel", -0.75, 0),
        ("linear", "asymmetric", -0.75, 0),
        ("linear", "align_corners", -0.75, 0),
        ("linear", "pytorch_half_pixel", -0.75, 0),
        ("linear", "half_pixel_symmetric", -0.75, 0),
        ("cubic", "half_pixel", -0.75, 0),
        ("cubic", "half_pixel", -0.5, 1),
        ("cubic", "align_corners", -0.5, 0),
        ("cubic", "asymmetric", -0.75, 1),
        ("cubic", "half_pixel_symmetric", -0.75, 0),
    ],
)
@pytest.mark.parametrize("scales", [(0.6, 0.8), (1.7, 2.5), (3.0, 0.5)])
def test_matches_plain_definition(mode, ctm, a, exclude, scales):
    rng = np.random.default_rng(7)
    img = rng.standard_normal((5, 7))
    sh, sw = scales
    out_h, out_w = int(np.floor(5 * np.float32(sh))), int(np.floor(7 * np.float32(sw)))
    y = resize(img[None, None], scales=np.array([1, 1, sh, sw], np.float32), mode=mode,
               coordinate_transformation_mode=ctm, cubic_coeff_a=a, exclude_outside=exclude)
    expected = loop_resize_2d(img, out_h, out_w, float(np.float32(sh)), float(np.float32(sw)), mode, ctm,
                              a=a, exclude_outside=exclude)
    assert y.shape == (1, 1, out_h, out_w) and y.dtype == np.float64
    np.testing.assert_allclose(y[0, 0], expected, rtol=1e-5, atol=1e-5)


def test_tf_crop_and_resize_matches_plain_definition_and_extrapolates():
    rng = np.random.default_rng(3)
    img = rng.standard_normal((6, 5)).astype(np.float32)
    roi = np.array([0.2, -0.3, 1.1, 0.9], np.float32)  # starts (h, w), ends (h, w)
    y = resize(img[None, None], roi=np.r_[[0, 0], roi[:2], [1, 1], roi[2:]], sizes=np.array([1, 1, 4, 6]),
               mode="linear", coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=-7.0)
    rows = [loop_resize_1d(list(r), 6, 6 / 5, "linear", "tf_crop_and_resize", start=float(roi[1]), end=float(roi[3]),
                           extrapolation=np.nan) for r in img]
    cols = np.array(rows).T
    expected = np.array([loop_resize_1d(list(c), 4, 4 / 6, "linear", "tf_crop_and_resize", start=float(roi[0]),
                                        end=float(roi[2]), extrapolation=np.nan) for c in cols]).T
    expected = np.where(np.isnan(expected), -7.0, expected)
    np.testing.assert_allclose(y[0, 0], expected, rtol=1e-5, atol=1e-5)
    assert (y == -7.0).any()


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("out_w", [1, 3, 9])
def test_tf_crop_and_resize_to_sizes_matches_onnxruntime_and_loop(mode, out_w):
    rng = np.random.default_rng(out_w)
    x = rng.standard_normal((1, 1, 4, 7)).astype(np.float32)
    roi = np.array([0, 0, 0.4, 0.24, 1, 1, 1.17, 0.66], np.float32)
    sizes = np.array([1, 1, 6, out_w], np.int64)
    node = resize_node(("X", "R", "", "Z"), mode=mode, coordinate_transformation_mode="tf_crop_and_resize")
    feeds = {"X": x, "R": roi, "Z": sizes}
    (expected,) = ort_node(node, feeds, opset=13)
    (got,) = onnxrt_node(node, feeds, opset=13)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)
    rows = [loop_resize_1d(list(r), out_w, out_w / 7, mode, "tf_crop_and_resize", start=float(roi[3]), end=float(roi[7]))
            for r in x[0, 0].astype(np.float64)]
    cols = np.array(rows).T
    ref = np.array([loop_resize_1d(list(c), 6, 6 / 4, mode, "tf_crop_and_resize", start=float(roi[2]), end=float(roi[6]))
                    for c in cols]).T
    np.testing.assert_allclose(got[0, 0], ref, rtol=1e-5, atol=1e-5)


def test_nearest_modes_known_indices():
    x = np.arange(4, dtype=np.float32)[None, None]
    # asymmetric x2: x_original = 0, .5, 1, 1.5, ...
    got = {m: resize(x, scales=np.array([1, 1, 2], np.float32), nearest_mode=m,
                     coordinate_transformation_mode="asymmetric")[0, 0].tolist()
           for m in ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")}
    assert got["round_prefer_floor"] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert got["round_prefer_ceil"] == [0, 1, 1, 2, 2, 3, 3, 3]
    assert got["floor"] == [0, 0, 1, 1, 2, 2, 3, 3]
    assert got["ceil"] == [0, 1, 1, 2, 2, 3, 3, 3]


# --------------------------------------------------------------------------------------
# onnxruntime on random cases
# --------------------------------------------------------------------------------------

CTMS = ["half_pixel", "half_pixel_symmetric", "pytorch_half_pixel", "align_corners", "asymmetric"]
NEAREST = ["round_prefer_floor", "round_prefer_ceil", "floor", "ceil"]


def _random_cases():
    rng = np.random.default_rng(11)
    cases = []
    for mode, ctm in itertools.product(["nearest", "linear", "cubic"], CTMS):
        for k in range(3):
            cases.append((mode, ctm, NEAREST[k % 4 if mode == "nearest" else 0], int(rng.integers(0, 10**6)), k % 2))
    return cases


@pytest.mark.parametrize("mode,ctm,nearest_mode,seed,use_sizes", _random_cases())
def test_matches_onnxruntime(mode, ctm, nearest_mode, seed, use_sizes):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, int(rng.integers(3, 9)), int(rng.integers(3, 9)))).astype(np.float32)
    attrs = dict(mode=mode, coordinate_transformation_mode=ctm, nearest_mode=nearest_mode)
    if use_sizes:
        feeds = {"X": x, "Z": np.array([2, 3, rng.integers(2, 13), rng.integers(2, 13)], np.int64)}
        node = resize_node(("X", "", "", "Z"), **attrs)
    else:
        if ctm == "align_corners":
            # onnxruntime divides by the floored output length, the spec by in * scale:
            # they agree when the product is whole
            sc = rng.choice([0.5, 2.0, 3.0], size=2)
        else:
            sc = rng.choice([0.5, 0.65, 1.5, 2.0, 2.25, 3.0], size=2)
        feeds = {"X": x, "S": np.array([1, 1, *sc], np.float32)}
        node = resize_node(("X", "", "S"), **attrs)
    (expected,) = ort_node(node, feeds, opset=19)
    (got,) = onnxrt_node(node, feeds, opset=19)
    assert got.shape == expected.shape and got.dtype == np.float32
    if mode == "nearest":
        # a coordinate landing exactly on a rounding boundary may round differently after
        # float32 arithmetic done in another order; nearly every element must agree
        assert np.mean(got == expected) > 0.9
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
@pytest.mark.parametrize("scale", [0.3, 0.5, 0.7])
@pytest.mark.parametrize("exclude_outside", [0, 1])
def test_antialias_downscale_matches_onnxruntime(mode, scale, exclude_outside):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((1, 2, 19, 23)).astype(np.float32)
    feeds = {"X": x, "S": np.array([1, 1, scale, scale], np.float32)}
    node = resize_node(mode=mode, antialias=1, exclude_outside=exclude_outside)
    (expected,) = ort_node(node, feeds, opset=18)
    (got,) = onnxrt_node(node, feeds, opset=18)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("policy", ["not_larger", "not_smaller"])
def test_keep_aspect_ratio_policy_matches_onnxruntime(policy):
    x = np.arange(2 * 5 * 8, dtype=np.float32).reshape(1, 2, 5, 8)
    feeds = {"X": x, "Z": np.array([7, 9], np.int64)}
    node = resize_node(("X", "", "", "Z"), mode="linear", axes=[2, 3], keep_aspect_ratio_policy=policy)
    (expected,) = ort_node(node, feeds, opset=18)
    (got,) = onnxrt_node(node, feeds, opset=18)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize(
    "scale,strategy",
    [
        (2.0, "blocks"),  # growing: banded matrix blocks
        (300 / 130, "blocks"),
        (1.37, "blocks"),
        (0.5, "phases"),  # shrinking by a short rational (1 output per 2 inputs): strided slices
        (0.75, "phases"),  # 3 outputs per 4 inputs
        (0.4375, "taps"),  # 7 per 16: a period too long for phases, a strong shrink
        (0.77, "blocks"),  # 77/100: a period too long, banded matrix blocks
        (0.123, "taps"),  # no short period, a strong shrink: one gather per tap
    ],
)
@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_axis_strategies_match_onnxruntime(scale, strategy, mode):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, 2, 40, 130)).astype(np.float32)
    feeds = {"X": x, "S": np.array([1, 1, 1, scale], np.float32)}
    node = resize_node(mode=mode)
    (expected,) = ort_node(node, feeds, opset=13)
    (got,) = onnxrt_node(node, feeds, opset=13)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)
    sc = float(np.float32(scale))
    out_len = int(np.floor(np.float32(130) * np.float32(scale)))
    plan = axis_plan(130, out_len, sc, mode, "half_pixel", "round_prefer_floor", -0.75, 0, 0, 0.0, 1.0, 130 * sc)
    used = "phases" if plan.phases else "taps" if plan.taps is not None else "blocks"
    assert used == strategy
    if strategy == "blocks":
        assert len(plan.blocks) > 1


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int32])
def test_integer_linear_truncates_like_onnxruntime(dtype):
    x = np.array([[[[0, 3, 10, 100], [7, 9, 50, 1]]]], dtype=dtype)
    feeds = {"X": x, "S": np.array([1, 1, 1.5, 1.5], np.float32)}
    node = resize_node(mode="linear")
    (expected,) = ort_node(node, feeds, opset=13)
    (got,) = onnxrt_node(node, feeds, opset=13)
    exact = resize(x.astype(np.float64), scales=np.array([1, 1, 1.5, 1.5], np.float32), mode="linear")
    assert got.dtype == dtype
    # the interpolated value, truncated (3.5 gives 3, not 4)
    np.testing.assert_array_equal(got, np.trunc(np.round(exact, 9)).astype(dtype))
    # onnxruntime truncates too; its float32 sums may fall just below an exact integer
    diff = got.astype(int) - expected.astype(int)
    assert set(np.unique(diff)) <= {0, 1} and (diff == 0).mean() > 0.8


def test_integer_cubic_saturates():
    x = np.array([[0, 0, 255, 255, 0, 0]], dtype=np.uint8)
    y = resize(x, scales=np.array([1, 2.0], np.float32), mode="cubic")
    assert y.dtype == np.uint8
    reference = resize(x.astype(np.float64), scales=np.array([1, 2.0], np.float32), mode="cubic")
    assert reference.max() > 255 and reference.min() < 0  # the kernel overshoots
    np.testing.assert_array_equal(y, np.trunc(np.clip(reference, 0, 255)).astype(np.uint8))


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16, np.float64, np.complex64])
def test_float_types_keep_their_dtype(dtype):
    x = (np.arange(12).reshape(1, 1, 3, 4) / 7).astype(dtype)
    y = resize(x, scales=np.array([1, 1, 2, 1.5], np.float32), mode="linear")
    ref = resize(x.astype(np.complex128 if np.dtype(dtype).kind == "c" else np.float64),
                 scales=np.array([1, 1, 2, 1.5], np.float32), mode="linear")
    assert y.dtype == np.dtype(dtype) and y.shape == (1, 1, 6, 6)
    np.testing.assert_allclose(y.astype(ref.dtype), ref, rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("dtype", [object, np.bool_, np.int64, np.uint16])
def test_nearest_gathers_any_element_type(dtype):
    base = np.array([["a", "b"], ["c", "d"]], dtype=object) if dtype is object else np.array([[1, 0], [0, 1]]).astype(dtype)
    y = resize(base, scales=np.array([2, 2], np.float32), mode="nearest", coordinate_transformation_mode="asymmetric")
    assert y.dtype == base.dtype and y.shape == (4, 4)
    np.testing.assert_array_equal(y, base.repeat(2, axis=0).repeat(2, axis=1))


def test_linear_on_strings_is_an_error():
    with pytest.raises(KernelError, match="cannot resample"):
        resize(np.array([["a", "b"]], dtype=object), scales=np.array([1, 2], np.float32), mode="linear")


# --------------------------------------------------------------------------------------
# versions
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["nearest", "linear"])
@pytest.mark.parametrize("scale", [0.35, 0.6, 1.5, 2.5])
def test_resize_10_matches_onnxruntime(mode, scale):
    x = np.arange(1, 21, dtype=np.float32).reshape(1, 1, 2, 10)
    feeds = {"X": x, "S": np.array([1, 1, 1, scale], np.float32)}
    node = helper.make_node("Resize", ["X", "S"], ["Y"], mode=mode)
    (expected,) = ort_node(node, feeds, opset=10)
    (got,) = onnxrt_node(node, feeds, opset=10)
    np.testing.assert_allclose(got, expected, rtol=1e-6)


@pytest.mark.parametrize("opset,attrs", [(9, {}), (7, {"scales": [1.0, 1.0, 2.0, 3.0]}), (1, {"height_scale": 2.0, "width_scale": 3.0})])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_upsample_versions_match_onnxruntime(opset, attrs, mode):
    x = np.arange(12, dtype=np.float32).reshape(1, 1, 3, 4)
    if opset == 1 and mode == "linear":
        mode = "bilinear"
    inputs = ["X", "S"] if opset >= 9 else ["X"]
    feeds = {"X": x, "S": np.array([1, 1, 2, 3], np.float32)} if opset >= 9 else {"X": x}
    node = helper.make_node("Upsample", inputs, ["Y"], mode=mode, **attrs)
    (got,) = onnxrt_node(node, feeds, opset=opset)
    assert got.shape == (1, 1, 6, 12)
    if opset >= 7:
        (expected,) = ort_node(node, feeds, opset=opset)
        np.testing.assert_allclose(got, expected, rtol=1e-6)
    else:  # onnxruntime has no Upsample-1: the asymmetric definition
        up = resize(x, scales=np.array([1, 1, 2, 3], np.float32), mode="linear" if mode == "bilinear" else "nearest",
                    coordinate_transformation_mode="asymmetric", nearest_mode="floor")
        np.testing.assert_allclose(got, up, rtol=1e-6)


def test_upsample_rejects_downscaling():
    node = helper.make_node("Upsample", ["X", "S"], ["Y"])
    with pytest.raises(KernelError, match=">= 1"):
        onnxrt_node(node, {"X": np.ones((2, 4), np.float32), "S": np.array([1, 0.5], np.float32)}, opset=9)


def test_resize_11_tf_half_pixel_for_nn_and_empty_scales():
    x = np.arange(16, dtype=np.float32).reshape(1, 1, 4, 4)
    node = helper.make_node("Resize", ["X", "R", "S", "Z"], ["Y"], coordinate_transformation_mode="tf_half_pixel_for_nn")
    feeds = {"X": x, "R": np.zeros(0, np.float32), "S": np.zeros(0, np.float32), "Z": np.array([1, 1, 3, 5], np.int64)}
    (expected,) = ort_node(node, feeds, opset=11)
    (got,) = onnxrt_node(node, feeds, opset=11)
    np.testing.assert_array_equal(got, expected)


def test_version_specific_coordinate_modes():
    with pytest.raises((InvalidAttributeError, GraphError), match="half_pixel_symmetric"):
        onnxrt_node(resize_node(coordinate_transformation_mode="half_pixel_symmetric"),
                    {"X": np.ones((2, 2), np.float32), "S": np.array([1, 2], np.float32)}, opset=18)
    with pytest.raises((InvalidAttributeError, GraphError), match="tf_half_pixel_for_nn"):
        onnxrt_node(resize_node(coordinate_transformation_mode="tf_half_pixel_for_nn"),
                    {"X": np.ones((2, 2), np.float32), "S": np.array([1, 2], np.float32)}, opset=13)
    with pytest.raises((InvalidAttributeError, GraphError), match="'mode'"):
        onnxrt_node(resize_node(mode="area"), {"X": np.ones((2, 2), np.float32), "S": np.array([1, 2], np.float32)}, opset=19)


def test_axes_with_negative_values():
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    a = resize(x, sizes=np.array([6, 2]), axes=[-2, -1], mode="linear")
    b = resize(x, sizes=np.array([2, 6, 2]), mode="linear")
    np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------
# edge cases and errors
# --------------------------------------------------------------------------------------


def test_identity_is_a_copy_and_input_untouched():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    x.flags.writeable = False
    y = resize(x, scales=np.array([1, 1], np.float32), mode="linear")
    assert y is not x and np.shares_memory(x, y) is False
    np.testing.assert_array_equal(y, x)
    z = resize(x, scales=np.array([2, 2], np.float32), mode="cubic")
    assert z.shape == (4, 6)


def test_empty_output():
    y = resize(np.ones((2, 3), np.float32), sizes=np.array([0, 3]), mode="linear")
    assert y.shape == (0, 3) and y.dtype == np.float32


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(scales=np.array([1, 2], np.float32), sizes=np.array([2, 4])), "exactly one"),
        (dict(), "exactly one"),
        (dict(scales=np.array([2], np.float32)), "scales holds 1 values"),
        (dict(sizes=np.array([2, 3, 4])), "sizes holds 3 values"),
        (dict(scales=np.array([1, -2], np.float32)), "> 0"),
        (dict(sizes=np.array([2, 4]), coordinate_transformation_mode="tf_crop_and_resize"), "roi"),
        (dict(sizes=np.array([2, 4]), axes=[0, 0]), "repeat"),
    ],
)
def test_errors(kwargs, message):
    with pytest.raises(KernelError, match=message):
        resize(np.ones((2, 2), np.float32), **kwargs)


def test_extrapolation_value_outside_an_integer_type_saturates():
    # found by tests/fuzz: tf_crop_and_resize wrote extrapolation_value -1 into a uint8 tensor
    # and failed; the value is converted like an interpolated one (saturated, truncated)
    x = np.array([[[[4, 3]]]], np.uint8)
    roi = np.array([0, 0, 0, 0, 1, 1, 1, 1.25], np.float32)
    for value, want in ((-1.0, 0), (300.0, 255), (7.0, 7)):
        y = resize(x, roi=roi, scales=np.array([1, 1, 1, 1], np.float32), mode="linear",
                   coordinate_transformation_mode="tf_crop_and_resize", extrapolation_value=value)
        assert y.dtype == np.uint8
        np.testing.assert_array_equal(y, [[[[4, want]]]])
