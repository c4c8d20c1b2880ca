"""scipy.special's functions, imported at their first use: scipy costs 0.15-0.3 s to import."""

from __future__ import annotations

from typing import Any

#: the functions the kernels take from scipy.special
NAMES = frozenset({"erf", "erfc", "erfinv", "expit"})


def __getattr__(name: str) -> Any:
    # PEP 562: the first ``_special.erf`` imports scipy.special and keeps the function here,
    # so later lookups are plain module attributes
    if name not in NAMES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import scipy.special

    fn = getattr(scipy.special, name)
    globals()[name] = fn
    return fn
