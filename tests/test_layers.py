"""The layers of docs/architecture.md, checked on the sources: reference kernels import no native or fast-path code, and only onnxrt.native loads numba."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "onnxrt"


def _imports(path: Path) -> set[str]:
    """Absolute names of the modules ``path`` imports (relative imports resolved)."""
    package = ".".join(path.relative_to(SRC.parent).with_suffix("").parts[:-1])
    if path.name == "__init__.py":
        package = ".".join(path.relative_to(SRC.parent).parts[:-1])
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([base] if base else []))
            names.add(base)
            names.update(f"{base}.{a.name}" for a in node.names)
    return names


def _modules(*folders: str) -> list[Path]:
    return sorted(p for f in folders for p in (SRC / f).glob("*.py"))


@pytest.mark.parametrize("path", _modules("ops_cpu", "ops_ml"), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_reference_kernels_use_no_native_code(path):
    bad = {n for n in _imports(path) if n.startswith(("onnxrt.native", "onnxrt.fastpaths", "numba", "llvmlite"))}
    assert not bad, f"{path.name} is a reference kernel module but imports {sorted(bad)}"


@pytest.mark.parametrize("path", sorted(SRC.rglob("*.py")), ids=lambda p: str(p.relative_to(SRC)))
def test_only_native_imports_numba(path):
    if path.parent.name == "native":
        return
    bad = {n for n in _imports(path) if n.split(".")[0] in ("numba", "llvmlite")}
    assert not bad, f"{path.relative_to(SRC)} imports {sorted(bad)}: compiled code lives in onnxrt/native/"


def test_native_depends_only_on_constants_of_the_layers_above():
    allowed = {"onnxrt", "onnxrt.parallel", "onnxrt.fastpaths", "onnxrt.fastpaths._fastmath", "onnxrt.native"}
    for path in _modules("native"):
        above = {n for n in _imports(path) if n.startswith("onnxrt") and not n.startswith("onnxrt.native")}
        assert above <= allowed, f"native/{path.name} imports {sorted(above - allowed)}"
