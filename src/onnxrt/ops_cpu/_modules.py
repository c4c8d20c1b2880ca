"""mlprodict's module paths: ``onnxrt.ops_cpu.op_<snake>`` for every registered operator, generated when no file backs them."""

from __future__ import annotations

import re
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import Any

PACKAGE = "onnxrt.ops_cpu"
PREFIX = PACKAGE + ".op_"
#: the ``__spec__.origin`` of a generated module
ORIGIN = "generated from onnxrt.registry"

#: op_type -> the stem mlprodict (and onnx.reference after it) used where the regular
#: snake case (``snake_case``) gives another one
STEMS: dict[str, str] = {
    "ArgMax": "argmax",
    "ArgMin": "argmin",
    "BitCast": "bitcast",
    "BitShift": "bitshift",
    "Col2Im": "col2im",
    "EyeLike": "eyelike",
    "FusedMatMul": "fused_matmul",
    "GatherND": "gathernd",
    "IsInf": "isinf",
    "IsNaN": "isnan",
    "MatMul": "matmul",
    "MatMulInteger": "matmul_integer",
    "PRelu": "prelu",
    "QLinearConv": "qlinear_conv",
    "QLinearMatMul": "qlinear_matmul",
    "ScatterND": "scatternd",
    "SwiGLU": "swiglu",
    "TfIdfVectorizer": "tfidfvectorizer",
    "TopK": "topk",
    "ZipMap": "zipmap",
}

#: op_type -> further stems that also expose it: mlprodict's modules holding several
#: operators (op_greater held GreaterOrEqual, op_random the random generators...), and
#: spellings mlprodict or onnx.reference used at some point
EXTRA_STEMS: dict[str, tuple[str, ...]] = {
    "Bernoulli": ("random",),
    "CastLike": ("cast",),
    "DynamicQuantizeLinear": ("quantize_linear",),
    "GlobalMaxPool": ("global_average_pool",),
    "GreaterOrEqual": ("greater",),
    "LessOrEqual": ("less",),
    "MaxPool": ("maxpool",),
    "OptionalGetElement": ("optional",),
    "OptionalHasElement": ("optional",),
    "RandomNormal": ("random",),
    "RandomNormalLike": ("random",),
    "RandomUniform": ("random",),
    "RandomUniformLike": ("random",),
    "SpaceToDepth": ("depth_to_space",),
    "TfIdfVectorizer": ("tfidf_vectorizer",),
    "ThresholdedRelu": ("relu",),
}

#: domains in the order their classes take a name two domains share
_DOMAIN_ORDER = ("", "ai.onnx.ml", "onnxrt", "ai.onnx.preview", "ai.onnx.preview.training")


def snake_case(op_type: str) -> str:
    """``ReduceLogSumExp`` -> ``reduce_log_sum_exp``, ``SVMClassifier`` -> ``svm_classifier``."""
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", op_type)
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s).lower()


def stem(op_type: str) -> str:
    """The stem of an operator's own module: ``onnxrt.ops_cpu.op_<stem>`` (mlprodict's name)."""
    return STEMS.get(op_type) or snake_case(op_type)


def module_names(op_type: str) -> list[str]:
    """Every ``onnxrt.ops_cpu`` module exposing ``op_type``, its own (:func:`stem`) first."""
    names = ["op_" + stem(op_type)]
    for extra in EXTRA_STEMS.get(op_type, ()):
        if "op_" + extra not in names:
            names.append("op_" + extra)
    return names


def _domain_key(domain: str) -> tuple[int, str]:
    return (_DOMAIN_ORDER.index(domain) if domain in _DOMAIN_ORDER else len(_DOMAIN_ORDER), domain)


def operators_of(name: str) -> list[tuple[str, str]]:
    """The (domain, op_type) pairs module ``name`` (``op_relu``) exposes, in registry order."""
    from ..registry import registered

    found = [key for key in registered() if name in module_names(key[1])]
    return sorted(found, key=lambda k: (_domain_key(k[0]), k[1]))


def module_index() -> dict[str, list[tuple[str, str]]]:
    """Every module name of every registered operator -> the (domain, op_type) pairs it exposes."""
    from ..registry import registered

    index: dict[str, list[tuple[str, str]]] = {}
    for key in sorted(registered(), key=lambda k: (_domain_key(k[0]), k[1])):
        for name in module_names(key[1]):
            index.setdefault(name, []).append(key)
    return index


def _suffix(domain: str) -> str:
    return "_" + re.sub(r"\W", "_", domain) if domain else ""


def exports(name: str) -> dict[str, Any]:
    """What a generated module exposes: classes (the newest as ``OpType``, older ones by
    their own names, or ``OpType_<since_version>``) and the table kernels as ``<stem>``."""
    from ..registry import registered

    table = registered()
    out: dict[str, Any] = {}
    for domain, op_type in operators_of(name):
        versions = table[(domain, op_type)]
        newest = versions[max(versions)]
        main = op_type if op_type not in out else op_type + _suffix(domain)
        out[main] = newest
        seen = {newest}
        for since in sorted(versions, reverse=True):
            cls = versions[since]
            if cls in seen:
                continue
            seen.add(cls)
            alias = cls.__name__ if cls.__name__ != op_type else f"{op_type}_{since}"
            out.setdefault(alias, cls)
        kernel = getattr(newest, "kernel", None)
        if kernel is not None:
            out.setdefault(stem(op_type), kernel)
    return out


def describe(name: str) -> str:
    """The one-line docstring of a generated module: its operators and where their code lives."""
    from ..registry import registered

    table = registered()
    parts = []
    for domain, op_type in operators_of(name):
        homes = sorted({cls.__module__ for cls in table[(domain, op_type)].values()})
        parts.append(f"{op_type} ({domain or 'ai.onnx'}) from {', '.join(homes)}")
    return f"Operator module path {PACKAGE}.{name}, generated: {'; '.join(parts)}."


class _Loader:
    """Fills a generated module from the registry."""

    def create_module(self, spec: ModuleSpec) -> None:
        return None  # the default module object

    def exec_module(self, module: ModuleType) -> None:
        name = module.__name__.rsplit(".", 1)[1]
        values = exports(name)
        module.__doc__ = describe(name)
        module.__dict__.update(values)
        module.__all__ = list(values)  # type: ignore[attr-defined]


_LOADER = _Loader()


def find_spec(fullname: str) -> ModuleSpec | None:
    """The spec of a generated module, or None where no registered operator maps to the name.

    :class:`onnxrt.ops_cpu.OperatorModuleFinder` asks it; it stands after the path finders
    on ``sys.meta_path``, so every real ``op_<name>.py`` file wins.
    """
    if not fullname.startswith(PREFIX) or "." in fullname[len(PREFIX):]:
        return None
    name = fullname[len(PACKAGE) + 1:]
    if not operators_of(name):
        return None
    return ModuleSpec(fullname, _LOADER, origin=ORIGIN)
