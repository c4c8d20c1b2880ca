"""Fast path of LSTM (reference kernel: onnxrt.ops_cpu.op_rnn.recurrent, one numpy product
with R and a few numpy passes per time step).

- ``compiled steps``: a float32 LSTM of the default configuration (sigmoid/tanh/tanh, no
  peepholes, clip, input_forget or partial sequence_lens; the reference decides per call
  and direction, the other configurations keep its loop) runs every time step of a
  direction in one compiled call: a product with R by cblas_sgemm (by address, BLAS on one
  thread) and one fused pass over the units (50 steps of 128 units: 800 -> ~400 us).
"""

from __future__ import annotations

import numpy as np

from .. import native
from ..dispatch import fast_path
from ..native.blas import blas_sgemm_address, blas_threads
from ..ops_cpu.op_rnn import recurrent

_F32 = np.dtype(np.float32)


def lstm_steps(xw: np.ndarray, R: np.ndarray, h: np.ndarray, c: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """Every time step of one direction of a default float32 LSTM in one compiled call
    (native.loops.lstm_default): ``xw`` the input projections with the biases (S, N, 4H, the
    gates in the spec's order), ``R`` (4H, H), ``h`` and ``c`` the initial states (N, H);
    each step's hidden state goes to ``Y`` (S, N, H); returns the final cell state."""
    k = native.kernels()
    c = np.ascontiguousarray(c)
    with blas_threads(1):
        k.lstm_default(np.ascontiguousarray(xw), np.ascontiguousarray(R), np.ascontiguousarray(h), c, Y,
                       blas_sgemm_address(), np.empty((h.shape[0], R.shape[0]), np.float32))
    return c


def _applies(op, X, *rest) -> bool:
    return type(X) is np.ndarray and X.dtype == _F32 and blas_sgemm_address() is not None


@fast_path("LSTM", "compiled steps", when=_applies)
def compiled_steps(op, X, W, R, B=None, sequence_lens=None, initial_h=None, initial_c=None, P=None):
    """float32 LSTM, default activations, no peepholes/clip/input_forget/partial lengths: every time step of a direction in one compiled call.

    Within a few float32 ulp of the reference per step (native.loops' sigmoid and tanh,
    the same float32 product with R by BLAS).
    """
    return recurrent("LSTM", X, W, R, B, sequence_lens, initial_h, initial_c, P, **op._kw, lstm_steps=lstm_steps)
