"""StringNormalizer (10): stop-word removal then lower/upper casing of a [C] or [1, C] string tensor."""

from __future__ import annotations

import numpy as np

from ..errors import InvalidAttributeError, KernelError
from ..registry import register
from ._op import OpRun

_LOWER = np.frompyfunc(str.lower, 1, 1)
_UPPER = np.frompyfunc(str.upper, 1, 1)
_CASEFOLD = np.frompyfunc(str.casefold, 1, 1)

# Turkish and Azerbaijani pair dotted/dotless i differently from every other language:
# I <-> ı and İ <-> i. Python's str.lower/upper follow the language-neutral Unicode rules,
# so these locales first map the four letters themselves.
_TURKIC_LOWER = str.maketrans({"I": "ı", "İ": "i"})
_TURKIC_UPPER = str.maketrans({"i": "İ", "ı": "I"})
_TURKIC = ("tr", "az")


def _case_functions(locale: str) -> tuple[np.ufunc, np.ufunc]:
    """(lower, upper) element-wise functions for a locale such as ``en_US`` or ``tr_TR.UTF-8``."""
    language = locale.replace("-", "_").split("_")[0].split(".")[0].lower()
    if language in _TURKIC:
        lower = np.frompyfunc(lambda s: s.translate(_TURKIC_LOWER).lower(), 1, 1)
        upper = np.frompyfunc(lambda s: s.translate(_TURKIC_UPPER).upper(), 1, 1)
        return lower, upper
    return _LOWER, _UPPER


def string_normalizer(
    x: np.ndarray,
    case_change_action: str = "NONE",
    is_case_sensitive: int = 0,
    stopwords: list[str] | None = None,
    locale: str = "",
) -> np.ndarray:
    """Drop the stop words of ``x`` ([C] or [1, C]), then change the case of what is left.

    Case-insensitive stop-word matching compares Unicode case folds (``Straße`` matches
    ``STRASSE``). Casing uses Unicode's default rules, which are those of ``en_US``; Turkish
    and Azerbaijani locales map the dotted and dotless i as their languages do; other locale
    names are accepted and use the default rules (onnxruntime asks the C++ runtime for the
    locale and fails where it is not installed). When every element is a stop word the output
    is one empty string, of shape [1] or [1, 1], as the spec says.
    """
    x = np.asarray(x, dtype=object)
    if x.ndim == 1:
        flat = x
    elif x.ndim == 2 and x.shape[0] == 1:
        flat = x[0]
    else:
        raise KernelError(f"StringNormalizer takes a [C] or [1, C] tensor, got shape {list(x.shape)}.")
    if stopwords:
        if is_case_sensitive:
            keys, words = flat, np.array(stopwords, dtype=object)
        else:
            keys, words = _CASEFOLD(flat), _CASEFOLD(np.array(stopwords, dtype=object))
        keep = ~np.isin(keys, words) if flat.size else np.zeros(0, dtype=bool)
        flat = flat[keep]
    if case_change_action != "NONE" and flat.size:
        lower, upper = _case_functions(locale or "")
        flat = (lower if case_change_action == "LOWER" else upper)(flat).astype(object)
    if flat.size == 0:
        flat = np.array([""], dtype=object)
    return flat.reshape(x.shape[:-1] + flat.shape)


@register("StringNormalizer", versions=(10,))
class StringNormalizer(OpRun):
    """StringNormalizer-10: stopwords, is_case_sensitive, case_change_action (LOWER, UPPER, NONE), locale."""

    def __init__(self, onnx_node, desc=None, **options):
        super().__init__(onnx_node, desc, **options)
        self.check_choice("case_change_action", ("LOWER", "UPPER", "NONE"))
        for word in self.stopwords or ():
            if not isinstance(word, str):
                raise InvalidAttributeError(f"{self.node_label()}: stop word {word!r} is not valid UTF-8.")

    def _run(self, x, attributes=None, verbose=0, fLOG=None):
        return (
            string_normalizer(x, self.case_change_action, self.is_case_sensitive, self.stopwords, self.locale or ""),
        )
