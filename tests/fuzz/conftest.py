"""Prints what the differential fuzzer compared (per operator with -v, else in total)."""

from __future__ import annotations

from collections import Counter

_STATS: dict[str, Counter] = {}


def pytest_runtest_logreport(report):
    if report.when != "call":
        return
    for name, value in report.user_properties:
        if name == "fuzz":
            _STATS[report.nodeid.split("[")[-1].rstrip("]")] = Counter(value)


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    if not _STATS:
        return
    total: Counter = Counter()
    for c in _STATS.values():
        for key, n in c.items():
            # one line in total: known deviations counted per oracle (-v lists them per test)
            total[key.split(" (")[0]] += n
    tr = terminalreporter
    tr.section("differential fuzzing")
    if config.getoption("verbose") > 0:
        for op in sorted(_STATS):
            tr.write_line(f"{op:28s} " + ", ".join(f"{k}: {v}" for k, v in sorted(_STATS[op].items())))
    tr.write_line(f"{len(_STATS)} operators; " + ", ".join(f"{k}: {v}" for k, v in sorted(total.items())))
