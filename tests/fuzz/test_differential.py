"""Differential fuzzing: hypothesis draws single-node models for each operator of the table and
compares onnxrt with onnx.reference and onnxruntime (values, shapes, dtypes).

ONNXRT_FUZZ_EXAMPLES sets the examples per operator (default 8, derandomized for CI);
ONNXRT_FUZZ_SEED fixes a seed for a random run. A larger count or a seed draws fresh examples:

    ONNXRT_FUZZ_EXAMPLES=200 python -m pytest tests/fuzz -n 2 -v

(-v lists, per operator, how many examples each oracle agreed on, refused, failed to run or
matched only through a proven deviation of tests/fuzz/_known.py.)
"""

from __future__ import annotations

import os
from collections import Counter

import pytest

import onnxrt
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st

from ._gen import Gen
from ._harness import Case, check_case
from ._known import DEVIATIONS
from ._specs import SPECS, OpSpec

DEFAULT_EXAMPLES = 8
EXAMPLES = int(os.environ.get("ONNXRT_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
SEED = os.environ.get("ONNXRT_FUZZ_SEED")
# CI runs the same examples every time; asking for more (or a seed) explores new ones
DERANDOMIZE = SEED is None and EXAMPLES <= DEFAULT_EXAMPLES

pytestmark = pytest.mark.filterwarnings("ignore")


@st.composite
def cases(draw, spec: OpSpec) -> Case:
    opset = draw(st.sampled_from(spec.opsets), label="opset")
    g = Gen(draw, spec.op, opset, spec.domain)
    node = spec.gen(g)
    declare = draw(st.sampled_from(["static", "symbolic", "rank"]), label="declare")
    const = draw(st.booleans(), label="const_params")
    return Case(spec.op, opset, node, declare=declare, const_params=const, domain=spec.domain)


def _options(fast_paths: bool, threads: int) -> onnxrt.SessionOptions:
    so = onnxrt.SessionOptions()
    so.fast_paths = fast_paths
    so.intra_op_num_threads = threads
    return so


#: how onnxrt's sessions run the cases: fast paths on with the pool's threads (all the
#: examples), and on a subset of the same examples (hypothesis draws them in the same order)
#: the reference kernels on one thread and the fast paths on one thread
MODES = {
    "fast": (lambda: None, 1.0),
    "reference-1thread": (lambda: _options(False, 1), 0.5),
    "fast-1thread": (lambda: _options(True, 1), 0.5),
}


def fuzz(spec: OpSpec, stats: Counter, mode: str = "fast") -> None:
    """Run hypothesis over the spec's cases; ``stats`` counts what happened to each example."""
    make_options, share = MODES[mode]
    options = make_options()

    @settings(
        max_examples=max(1, int(EXAMPLES * share)),
        deadline=None,
        derandomize=DERANDOMIZE,
        database=None if DERANDOMIZE else settings.default.database,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
        print_blob=True,
    )
    @given(case=cases(spec))
    def check(case: Case) -> None:
        check_case(case, spec, stats, DEVIATIONS, options)

    if SEED is not None:
        check = seed(int(SEED))(check)
    check()


@pytest.mark.parametrize("mode", sorted(MODES))
@pytest.mark.parametrize("spec", SPECS, ids=[s.id for s in SPECS])
def test_differential(spec: OpSpec, mode: str, record_property) -> None:
    stats: Counter = Counter()
    fuzz(spec, stats, mode)
    record_property("fuzz", dict(stats))
    compared = sum(v for k, v in stats.items() if k.endswith(" agreed"))
    # a table entry whose examples no oracle ever checks would test nothing
    assert compared > 0, f"no example of {spec.id} was compared with an oracle: {dict(stats)}"


def test_table_covers_sixty_operators() -> None:
    assert len({s.op for s in SPECS}) >= 60
