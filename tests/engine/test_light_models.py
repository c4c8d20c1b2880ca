"""The nine real networks shipped with onnx (light weights) give their shipped outputs."""

from __future__ import annotations

import os

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

import onnxrt

LIGHT = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data", "light")
MODELS = ["bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50", "shufflenet", "squeezenet", "vgg19", "zfnet512"]


def _load(name: str):
    path = os.path.join(LIGHT, f"light_{name}.onnx")
    if not os.path.exists(path):
        pytest.skip(f"onnx does not ship {path}")
    model = onnx.load(path)
    inits = {i.name for i in model.graph.initializer}
    inp = next(i for i in model.graph.input if i.name not in inits)
    shape = [d.dim_value for d in inp.type.tensor_type.shape.dim]
    n = int(np.prod(shape))
    x = (np.arange(n, dtype=np.float32) / n).reshape(shape)
    expected = numpy_helper.to_array(onnx.load_tensor(os.path.join(LIGHT, f"light_{name}_output_0.pb")))
    return model, {inp.name: x}, expected


@pytest.mark.parametrize("name", [m for m in MODELS if m != "squeezenet"])
def test_light_model_matches_its_shipped_output(name):
    model, feeds, expected = _load(name)
    (y,) = onnxrt.InferenceSession(model.SerializeToString()).run(None, feeds)
    assert y.dtype == expected.dtype and y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-3, atol=1e-5)


def test_squeezenet_logits_are_equal_to_rounding_and_its_softmax_is_ill_conditioned():
    """squeezenet's weights are constant: its 1000 logits are equal in exact arithmetic (about
    9.5e9), and the shipped output is their uniform softmax (0.001). float32 products round
    identical rows of a product differently by one or two ulps (2048 at that size) in
    OpenBLAS, and exp(-2048) is 0, so the softmax cannot be met by float32 arithmetic that
    does not round identical rows identically: this test shows that the logits agree to
    float32 rounding and the probabilities sum to one."""
    model, feeds, expected = _load("squeezenet")
    assert np.allclose(expected, 1e-3)
    logits_name = model.graph.node[-1].input[0]
    sess = onnxrt.InferenceSession(model.SerializeToString())
    probs, logits = sess.run([model.graph.output[0].name, logits_name], feeds)
    assert probs.shape == expected.shape and logits.shape == (1, 1000, 1, 1)
    np.testing.assert_allclose(logits, np.full_like(logits, logits.mean()), rtol=1e-6)
    assert 9e9 < logits.mean() < 1e10
    np.testing.assert_allclose(probs.sum(), 1.0, rtol=1e-5)
