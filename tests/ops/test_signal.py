"""DFT, STFT, the window functions and MelWeightMatrix: numpy.fft and the spec formulas, onnxruntime, dtypes, errors."""

from __future__ import annotations

import itertools

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxrt.errors import GraphError, InvalidAttributeError, KernelError
from onnxrt.ops_cpu.family_window import cosine_window
from onnxrt.ops_cpu.op_dft import dft
from onnxrt.ops_cpu.op_mel_weight_matrix import mel_weight_matrix
from onnxrt.ops_cpu.op_stft import stft

from .test_resize import onnxrt_node, ort_node

TP = TensorProto
BF16 = np.dtype(ml_dtypes.bfloat16)


def pairs(c: np.ndarray) -> np.ndarray:
    return np.stack([c.real, c.imag], axis=-1)


def as_complex(x: np.ndarray) -> np.ndarray:
    return x[..., 0] + 1j * x[..., 1] if x.shape[-1] == 2 else x[..., 0].astype(np.complex128)


# --------------------------------------------------------------------------------------
# DFT
# --------------------------------------------------------------------------------------


@pytest.mark.parametrize("inverse,onesided", [(0, 0), (1, 0), (0, 1), (1, 1)])
@pytest.mark.parametrize("axis", [1, 2, -2, -3])
@pytest.mark.parametrize("length", [None, 5, 12])
def test_dft_matches_numpy_fft(inverse, onesided, axis, length):
    rng = np.random.default_rng(0)
    complex_input = inverse == 1 and onesided == 1 or (onesided == 0 and axis in (2, -3))
    x = rng.standard_normal((2, 8, 6, 2 if complex_input else 1))
    ax = axis if axis >= 0 else axis + 4
    c = as_complex(x)
    if onesided and not inverse:
        expected = pairs(np.fft.rfft(c.real, n=length, axis=ax))
    elif onesided and inverse:
        n = length if length is not None else 2 * (c.shape[ax] - 1)
        expected = np.fft.irfft(c, n=n, axis=ax)[..., None]
    else:
        expected = pairs((np.fft.ifft if inverse else np.fft.fft)(c, n=length, axis=ax))
    got = dft(x, length, axis, inverse, onesided)
    assert got.dtype == np.float64 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_dft_definition_on_a_small_signal():
    """y[k] = sum_n x[n] exp(-2 pi j k n / N), and the inverse scaled by 1/N."""
    x = np.array([1.0, 2.0, -1.0, 0.5])
    n = np.arange(4)
    w = np.exp(-2j * np.pi * np.outer(n, n) / 4)
    y = dft(x.reshape(1, 4, 1), axis=1)
    np.testing.assert_allclose(as_complex(y)[0], w @ x, atol=1e-12)
    back = dft(y, axis=1, inverse=1)
    np.testing.assert_allclose(as_complex(back)[0], x, atol=1e-12)


@pytest.mark.parametrize("opset", [17, 20])
@pytest.mark.parametrize("onesided", [0, 1])
def test_dft_versions_match_onnxruntime(opset, onesided):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 10, 1)).astype(np.float32)
    if opset == 17:
        node = helper.make_node("DFT", ["x", "n"], ["y"], axis=1, onesided=onesided)
        feeds = {"x": x, "n": np.array(8, np.int64)}
    else:
        node = helper.make_node("DFT", ["x", "n", "axis"], ["y"], onesided=onesided)
        feeds = {"x": x, "n": np.array(8, np.int64), "axis": np.array(-2, np.int64)}
    (expected,) = ort_node(node, feeds, opset=opset)
    (got,) = onnxrt_node(node, feeds, opset=opset)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_dft_20_default_axis_is_the_last_signal_axis():
    x = np.random.default_rng(2).standard_normal((2, 3, 4, 1)).astype(np.float32)
    node = helper.make_node("DFT", ["x"], ["y"])
    (got,) = onnxrt_node(node, {"x": x}, opset=20)
    np.testing.assert_allclose(as_complex(got), np.fft.fft(x[..., 0], axis=2), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", [np.float16, BF16, np.float32])
def test_dft_narrow_floats_keep_their_type(dtype):
    x = (np.arange(16).reshape(1, 8, 2) / 8).astype(dtype)
    got = dft(x, axis=1)
    assert got.dtype == np.dtype(dtype)
    expected = pairs(np.fft.fft(as_complex(x.astype(np.float64)), axis=1))
    np.testing.assert_allclose(got.astype(np.float64), expected, rtol=2e-2, atol=3e-2)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        (dict(axis=3), "axis must lie"),
        (dict(axis=-1), "axis must lie"),
        (dict(dft_length=0), "dft_length must be >= 1"),
        (dict(onesided=1), "needs a real input"),
    ],
)
def test_dft_errors(kwargs, message):
    with pytest.raises(KernelError, match=message):
        dft(np.ones((1, 4, 2)), **kwargs)


def test_dft_irfft_needs_complex_input_and_last_axis_of_one_or_two():
    with pytest.raises(KernelError, match="needs a complex input"):
        dft(np.ones((1, 4, 1)), axis=1, inverse=1, onesided=1)
    with pytest.raises(KernelError, match="1 \\(real\\) or 2"):
        dft(np.ones((1, 4, 3)), axis=1)


# --------------------------------------------------------------------------------------
# STFT
# --------------------------------------------------------------------------------------


def loop_stft(signal, step, window, length, onesided):
    c = as_complex(signal)
    frames = (c.shape[1] - length) // step + 1
    out = []
    for b in range(c.shape[0]):
        row = []
        for f in range(frames):
            seg = c[b, f * step : f * step + length] * (window if window is not None else 1)
            spec = np.fft.fft(seg)
            row.append(spec[: length // 2 + 1] if onesided else spec)
        out.append(row)
    return pairs(np.array(out))


@pytest.mark.parametrize("with_window,onesided,complex_signal", [(0, 1, 0), (1, 1, 0), (1, 0, 0), (0, 0, 1), (1, 0, 1)])
@pytest.mark.parametrize("step,length", [(4, 16), (3, 7), (16, 16)])
def test_stft_matches_frame_loop(with_window, onesided, complex_signal, step, length):
    rng = np.random.default_rng(4)
    signal = rng.standard_normal((2, 40, 2 if complex_signal else 1))
    window = np.hanning(length) if with_window else None
    got = stft(signal, step, window, None if with_window else length, onesided)
    expected = loop_stft(signal, step, window, length, onesided)
    assert got.shape == expected.shape and got.dtype == np.float64
    np.testing.assert_allclose(got, expected, rtol=1e-10, atol=1e-10)


def test_stft_matches_onnxruntime():
    rng = np.random.default_rng(5)
    signal = rng.standard_normal((1, 64, 1)).astype(np.float32)
    window = np.hamming(16).astype(np.float32)
    node = helper.make_node("STFT", ["s", "step", "w", "n"], ["y"])
    feeds = {"s": signal, "step": np.array(8, np.int64), "w": window, "n": np.array(16, np.int64)}
    (expected,) = ort_node(node, feeds, opset=17)
    (got,) = onnxrt_node(node, feeds, opset=17)
    assert got.shape == expected.shape == (1, 7, 9, 2)
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4)


def test_stft_frame_length_defaults_to_the_signal():
    signal = np.arange(10, dtype=np.float32).reshape(1, 10, 1)
    got = stft(signal, 3)
    assert got.shape == (1, 1, 6, 2) and got.dtype == np.float32
    np.testing.assert_allclose(got[0, 0, 0], [45, 0], atol=1e-5)


@pytest.mark.parametrize(
    "args,message",
    [
        ((np.ones((1, 8, 2)), 2, None, 4, 1), "onesided=1 needs a real signal"),
        ((np.ones((1, 8, 1)), 0, None, 4, 1), "frame_step must be >= 1"),
        ((np.ones((1, 8, 1)), 2, None, 9, 1), "frame_length must lie"),
        ((np.ones((1, 8, 1)), 2, np.ones(3), 4, 1), "window has length 3"),
        ((np.ones((8, 1)), 2, None, 4, 1), "signal must have shape"),
    ],
)
def test_stft_errors(args, message):
    with pytest.raises(KernelError, match=message):
        stft(*args)


# --------------------------------------------------------------------------------------
# windows
# --------------------------------------------------------------------------------------

WINDOWS = {
    "HannWindow": (0.5, 0.5, 0.0),
    "HammingWindow": (25 / 46, 21 / 46, 0.0),
    "BlackmanWindow": (0.42, 0.5, 0.08),
}


@pytest.mark.parametrize("op,periodic,size", list(itertools.product(WINDOWS, [0, 1], [2, 5, 10, 33])))
def test_windows_match_the_formula_and_onnxruntime(op, periodic, size):
    a0, a1, a2 = WINDOWS[op]
    n = np.arange(size)
    denom = size if periodic else size - 1
    expected = a0 - a1 * np.cos(2 * np.pi * n / denom) + a2 * np.cos(4 * np.pi * n / denom)
    node = helper.make_node(op, ["n"], ["y"], periodic=periodic)
    (got,) = onnxrt_node(node, {"n": np.array(size, np.int64)}, opset=17)
    assert got.dtype == np.float32 and got.shape == (size,)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)
    (oracle,) = ort_node(node, {"n": np.array(size, np.int64)}, opset=17, out_types=[TP.FLOAT])
    np.testing.assert_allclose(got, oracle, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("code,dtype", [(TP.DOUBLE, np.float64), (TP.FLOAT16, np.float16), (TP.BFLOAT16, BF16), (TP.INT32, np.int32), (TP.UINT8, np.uint8)])
def test_window_output_datatype(code, dtype):
    node = helper.make_node("HannWindow", ["n"], ["y"], output_datatype=code)
    (got,) = onnxrt_node(node, {"n": np.array(8, np.int32)}, opset=17)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), cosine_window(8, (0.5, 0.5), 1, np.float64).astype(dtype).astype(np.float64))


def test_window_edge_sizes():
    assert cosine_window(0, (0.5, 0.5)).shape == (0,)
    assert np.isnan(cosine_window(1, (0.5, 0.5), periodic=0))[0]  # 0 / 0, as onnxruntime
    np.testing.assert_array_equal(cosine_window(1, (0.5, 0.5), periodic=1), [0.0])
    with pytest.raises(KernelError, match="size must be >= 0"):
        cosine_window(-1, (0.5, 0.5))


def test_window_rejects_a_string_output_datatype():
    node = helper.make_node("HannWindow", ["n"], ["y"], output_datatype=TP.STRING)
    with pytest.raises((InvalidAttributeError, GraphError), match="output_datatype"):
        onnxrt_node(node, {"n": np.array(8, np.int64)}, opset=17)


# --------------------------------------------------------------------------------------
# MelWeightMatrix
# --------------------------------------------------------------------------------------


def loop_mel(num_mel_bins, dft_length, sample_rate, low, high):
    def mel(f):
        return 2595 * np.log10(1 + f / 700)

    step = (mel(high) - mel(low)) / (num_mel_bins + 2)
    edges = [int(np.floor((dft_length + 1) * 700 * (10 ** ((mel(low) + i * step) / 2595) - 1) / sample_rate))
             for i in range(num_mel_bins + 2)]
    out = np.zeros((dft_length // 2 + 1, num_mel_bins))
    for i in range(num_mel_bins):
        lo, c, hi = edges[i], edges[i + 1], edges[i + 2]
        if c == lo:
            out[c, i] = 1
        else:
            for j in range(lo, c + 1):
                out[j, i] = (j - lo) / (c - lo)
        for j in range(c, hi):
            out[j, i] = (hi - j) / (hi - c)
    return out


@pytest.mark.parametrize("bins,n,rate,low,high", [(8, 16, 8192, 0, 4096), (10, 64, 16000, 20, 8000), (4, 512, 22050, 300, 5000), (40, 1024, 16000, 0, 8000)])
def test_mel_weight_matrix_matches_loop_and_onnxruntime(bins, n, rate, low, high):
    got = mel_weight_matrix(bins, n, rate, low, high)
    assert got.shape == (n // 2 + 1, bins) and got.dtype == np.float32
    np.testing.assert_allclose(got, loop_mel(bins, n, rate, low, high), rtol=1e-6, atol=1e-7)
    node = helper.make_node("MelWeightMatrix", ["b", "n", "r", "lo", "hi"], ["y"])
    feeds = {"b": np.array(bins, np.int64), "n": np.array(n, np.int64), "r": np.array(rate, np.int64),
             "lo": np.array(low, np.float32), "hi": np.array(high, np.float32)}
    (oracle,) = ort_node(node, feeds, opset=17, out_types=[TP.FLOAT])
    np.testing.assert_allclose(got, oracle, rtol=1e-5, atol=1e-6)


def test_mel_weight_matrix_output_datatype_and_errors():
    node = helper.make_node("MelWeightMatrix", ["b", "n", "r", "lo", "hi"], ["y"], output_datatype=TP.DOUBLE)
    feeds = {"b": np.array(4, np.int32), "n": np.array(32, np.int32), "r": np.array(8000, np.int32),
             "lo": np.array(0, np.float32), "hi": np.array(4000, np.float32)}
    (got,) = onnxrt_node(node, feeds, opset=17)
    assert got.dtype == np.float64 and got.shape == (17, 4)
    with pytest.raises(KernelError, match="lower < upper"):
        mel_weight_matrix(4, 32, 8000, 100.0, 50.0)
    with pytest.raises(KernelError, match="num_mel_bins"):
        mel_weight_matrix(0, 32, 8000, 0.0, 50.0)
