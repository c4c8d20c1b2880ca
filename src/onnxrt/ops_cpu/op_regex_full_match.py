"""RegexFullMatch (20): whether each string fully matches an RE2 pattern, run with Python's re."""

from __future__ import annotations

import re

import numpy as np

from ..errors import InvalidAttributeError
from ..registry import register
from ._op import OpRun

# RE2's ASCII POSIX classes, usable inside a bracket expression: [[:alpha:]_]
_POSIX = {
    "alnum": "0-9A-Za-z",
    "alpha": "A-Za-z",
    "ascii": "\\x00-\\x7f",
    "blank": "\\t ",
    "cntrl": "\\x00-\\x1f\\x7f",
    "digit": "0-9",
    "graph": "!-~",
    "lower": "a-z",
    "print": " -~",
    "punct": "!-/:-@\\[-`{-~",
    "space": "\\t\\n\\v\\f\\r ",
    "upper": "A-Z",
    "word": "0-9A-Za-z_",
    "xdigit": "0-9A-Fa-f",
}
_POSIX_RE = re.compile(r"\[:(\^?)([a-z]+):\]")


def re2_to_python(pattern: str) -> str:
    """Translate an RE2 pattern to Python's ``re`` syntax, refusing what RE2 refuses.

    Differences handled: ``\\z`` (end of text) becomes ``\\Z``; ``\\Q...\\E`` quotes a
    literal; POSIX classes (``[[:digit:]]``, ``[[:^space:]]``) expand to their ASCII ranges.
    RE2 has no backreferences and no lookaround: ``\\1``, ``(?=``, ``(?!``, ``(?<=``, ``(?<!``
    raise ``ValueError`` as RE2 would. Not supported by Python's re, so refused too: Unicode
    classes ``\\pN``/``\\p{Greek}``, ``\\C`` and the ungreedy flag ``(?U)``. Elsewhere both
    engines agree (classes, repetition, ``(?i)``/``(?s)``/``(?m)``, named groups ``(?P<n>...)``).
    """
    out: list[str] = []
    i = 0
    n = len(pattern)
    while i < n:
        c = pattern[i]
        if c == "\\" and i + 1 < n:
            nxt = pattern[i + 1]
            if nxt == "Q":
                end = pattern.find("\\E", i + 2)
                literal = pattern[i + 2 :] if end < 0 else pattern[i + 2 : end]
                out.append(re.escape(literal))
                i = n if end < 0 else end + 2
                continue
            if nxt == "z":
                out.append("\\Z")
            elif nxt.isdigit() and nxt != "0":
                raise ValueError(f"backreference \\{nxt} is not RE2 syntax")
            elif nxt in "pP":
                raise ValueError(f"Unicode class \\{nxt} is not supported by Python's re")
            elif nxt == "C":
                raise ValueError("\\C (any byte) is not supported by Python's re")
            else:
                out.append(pattern[i : i + 2])
            i += 2
            continue
        if c == "[":
            # copy a bracket expression whole, expanding POSIX classes inside it
            j = i + 1
            if j < n and pattern[j] == "^":
                j += 1
            if j < n and pattern[j] == "]":
                j += 1
            while j < n and pattern[j] != "]":
                if pattern[j] == "\\":
                    j += 2
                    continue
                if pattern.startswith("[:", j):
                    close = pattern.find(":]", j + 2)
                    if close >= 0:
                        j = close + 2
                        continue
                j += 1
            body = pattern[i : j + 1]

            def expand(m: re.Match[str]) -> str:
                name = m.group(2)
                if name not in _POSIX:
                    raise ValueError(f"unknown POSIX class [:{name}:]")
                if m.group(1):
                    raise ValueError(f"negated POSIX class [:^{name}:] is not supported")
                return _POSIX[name]

            out.append(_POSIX_RE.sub(expand, body))
            i = j + 1
            continue
        if c == "(" and pattern.startswith("(?", i):
            head = pattern[i + 2 : i + 4]
            if head[:1] in ("=", "!") or head in ("<=", "<!"):
                raise ValueError("lookaround assertions are not RE2 syntax")
            flags = re.match(r"[a-zA-Z]*", pattern[i + 2 :]).group(0)  # type: ignore[union-attr]
            if "U" in flags:
                raise ValueError("the ungreedy flag (?U) is not supported by Python's re")
        out.append(c)
        i += 1
    return "".join(out)


def compile_re2(pattern: str) -> re.Pattern[str]:
    """The compiled Python regex of an RE2 pattern (ValueError or re.error when invalid)."""
    return re.compile(re2_to_python(pattern))


def regex_full_match(x: np.ndarray, pattern: str | re.Pattern[str]) -> np.ndarray:
    """Boolean tensor of the shape of ``x``: True where the whole string matches."""
    rx = compile_re2(pattern) if isinstance(pattern, str) else pattern
    x = np.asarray(x, dtype=object)
    out = np.zeros(x.shape, dtype=bool)
    if x.size:
        matches = np.frompyfunc(rx.fullmatch, 1, 1)(x.reshape(-1))
        out.reshape(-1)[:] = np.not_equal(matches, None)
    return out


@register("RegexFullMatch", versions=(20,))
class RegexFullMatch(OpRun):
    """RegexFullMatch-20: RE2 patterns translated for Python's re (see :func:`re2_to_python`).

    The pattern is checked and compiled once, when the model is loaded.
    """

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        if self.pattern is None:
            raise InvalidAttributeError(f"{self.node_label()} misses the attribute 'pattern'.")
        try:
            self._regex = compile_re2(self.pattern)
        except (ValueError, re.error) as e:
            raise InvalidAttributeError(f"{self.node_label()}: pattern {self.pattern!r} is not a valid RE2 pattern: {e}.") from None

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (regex_full_match(x, self._regex),)
