"""Argument blocks of the team's part functions (onnxrt.native.layout): declared once, packed by name, checked in debug mode."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

from onnxrt import native
from onnxrt.native import layout
from onnxrt.native.layout import LAYOUTS, NativeArgumentError


def _affine_args(rows=4, cols=8, **over):
    x = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
    values = dict(x=x, a=np.full(rows, 2, np.float32), b=np.ones(rows, np.float32), y=np.empty_like(x), rows=rows,
                  cols=cols, relu=0)
    values.update(over)
    return values


def _block(lay, values, parts=2):
    args = lay.pack(**values)
    block = np.array([a.ctypes.data if type(a) is np.ndarray else a for a in args] + [parts], np.int64)
    arrays = {i: a for i, a in enumerate(args) if type(a) is np.ndarray}
    return block, arrays


def test_every_part_function_has_a_layout_and_decodes_by_name():
    """Each ``*_part`` of native.loops reads its block through its layout's positions, with
    the layout's length: no positional ``a[19]`` is left to drift from the packer."""
    loops = pytest.importorskip("onnxrt.native.loops")
    parts = [n for n, f in vars(loops).items() if n.endswith("_part") and inspect.isfunction(f)]
    assert sorted(parts) == sorted(LAYOUTS)
    src = inspect.getsource(loops)
    assert not re.search(r"\ba\[\d+\]", src)
    for name, lay in LAYOUTS.items():
        assert lay.names[-1] == "parts" and len(lay.at) == lay.size
        assert list(lay.at) == list(range(lay.size))


def test_pack_takes_every_field_by_name_in_declared_order():
    lay = LAYOUTS["affine_part"]
    values = _affine_args()
    args = lay.pack(**values)
    assert len(args) == lay.size - 1
    assert args[lay.at.rows] == 4 and args[lay.at.cols] == 8 and args[lay.at.y] is values["y"]
    del values["relu"]
    with pytest.raises(NativeArgumentError, match=r"misses \['relu'\]"):
        lay.pack(**values)
    with pytest.raises(NativeArgumentError, match=r"unknown \['rows_'\]"):
        lay.pack(**_affine_args(), rows_=1)


def test_the_debug_check_accepts_a_good_block():
    block, arrays = _block(LAYOUTS["affine_part"], _affine_args())
    layout.check("affine_part", block, arrays)


@pytest.mark.parametrize("case, message", [
    ("dtype", "must be float32"),
    ("noncontiguous", "C-contiguous"),
    ("short", "the part reads 32"),
    ("foreign", "no array passed to the call owns"),
    ("moved", "not the address of the array"),
    ("length", "words, its layout"),
])
def test_the_debug_check_names_the_part_and_field(case, message):
    lay = LAYOUTS["affine_part"]
    values = _affine_args()
    if case == "dtype":
        values["y"] = np.empty((4, 8), np.float64)
    elif case == "noncontiguous":
        values["x"] = np.empty((4, 16), np.float32)[:, ::2]
    elif case == "short":
        values["y"] = np.empty(31, np.float32)
    block, arrays = _block(lay, values)
    if case == "foreign":
        del arrays[lay.at.b]  # an address whose array the caller no longer holds
    elif case == "moved":
        arrays[lay.at.b] = np.ones(4, np.float32)
    elif case == "length":
        block = block[:-1].copy()
    with pytest.raises(NativeArgumentError, match=message) as info:
        layout.check("affine_part", block, arrays)
    assert "affine_part" in str(info.value)


def test_gemm_fields_check_their_span_not_their_contiguity():
    lay = LAYOUTS["gemm_part"]
    a = np.ones((8, 16), np.float32)[:, :10]  # rows at a stride of 16: lda 16
    b = np.ones((10, 6), np.float32)
    c = np.empty((8, 6), np.float32)
    e = np.empty(0, np.float32)
    values = dict(a=a, b=b, c=c, m=8, k=10, n=6, lda=16, ldb=6, ldc=6, sgemm=1, by_rows=1, bias=e, bias_size=0, z=e,
                  z_size=0, relu=0, trans_b=0, cbias=e, cbias_size=0, act=0)
    block, arrays = _block(lay, values)
    layout.check("gemm_part", block, arrays)
    values["k"] = 17  # reads beyond a's last row
    block, arrays = _block(lay, values)
    with pytest.raises(NativeArgumentError, match="field 'a' spans"):
        layout.check("gemm_part", block, arrays)
    # with trans_b, B is stored (n, k): its span is (n - 1) * ldb + k
    values.update(k=10, b=np.ones((6, 10), np.float32), ldb=10, trans_b=1)
    block, arrays = _block(lay, values)
    layout.check("gemm_part", block, arrays)
    values["ldb"] = 11
    block, arrays = _block(lay, values)
    with pytest.raises(NativeArgumentError, match="field 'b' spans"):
        layout.check("gemm_part", block, arrays)


def test_a_miscounted_block_is_refused_before_the_team_reads_it():
    if native.kernels() is None:
        pytest.skip("numba is not available")
    with pytest.raises(NativeArgumentError, match="affine_part: 6 arguments"):
        native.team_split("affine_part", list(_affine_args().values())[:6], 1 << 20)
    with pytest.raises(NativeArgumentError, match="affine_part: 6 arguments"):
        native.TeamJob("affine_part", list(_affine_args().values())[:6], 1 << 20)


def test_debug_mode_checks_team_calls(monkeypatch):
    """With the debug mode on, a team call whose block lies is refused before any compiled
    code reads it, and a correct one runs and computes x * a + b per row."""
    if native.kernels() is None or not native.kernels(native.TEAM).available():
        pytest.skip("no team on this platform")
    from onnxrt import parallel

    monkeypatch.setattr(layout, "DEBUG", True)
    lay = LAYOUTS["affine_part"]
    rows, cols = 64, 4096
    values = _affine_args(rows, cols)
    with parallel.limit_threads(2):
        ran = native.team_split("affine_part", lay.pack(**values), rows * cols, max_parts=rows, part_size=1 << 12)
    assert ran or parallel.KERNEL_THREADS < 2
    if ran:
        x = values["x"]
        np.testing.assert_array_equal(values["y"], x * 2 + 1)
    bad = dict(values, y=np.empty((rows, cols), np.float64))
    with parallel.limit_threads(2), pytest.raises(NativeArgumentError, match="'y' must be float32"):
        native.team_split("affine_part", lay.pack(**bad), rows * cols, max_parts=rows, part_size=1 << 12)
