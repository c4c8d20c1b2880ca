"""Sphinx extension writing one page per operator module (onnxrt.ops_cpu.op_<snake>) from the registry."""

from __future__ import annotations

import importlib
import inspect
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

#: the generated pages' folder, relative to the documentation's source folder (.gitignore'd)
OUT = Path("_generated") / "ops"
#: domains whose operators onnxrt ships (custom ones registered at run time are left out)
BUILTIN_DOMAINS = ("", "ai.onnx.ml", "onnxrt", "ai.onnx.preview", "ai.onnx.preview.training")
#: where the ONNX documents a schema's doc links to (Broadcasting.md, IR.md...) live
ONNX_DOCS = "https://github.com/onnx/onnx/blob/main/docs/"


def _first_line(obj: Any) -> str:
    doc = inspect.getdoc(obj) or ""
    line = doc.strip().split("\n\n")[0].replace("\n", " ").strip()
    return line.replace("|", "\\|")


def _onnx_versions() -> dict[tuple[str, str], list[int]]:
    import onnx.defs

    out: dict[tuple[str, str], set[int]] = defaultdict(set)
    for s in onnx.defs.get_all_schemas_with_history():
        out[(s.domain, s.name)].add(s.since_version)
    return {k: sorted(v) for k, v in out.items()}


def _schema_doc(op_type: str, version: int, domain: str) -> str:
    import onnx.defs

    try:
        doc = onnx.defs.get_schema(op_type, version, domain).doc or ""
    except onnx.defs.SchemaError:
        return ""
    # the specification's relative links point into onnx's docs folder
    doc = re.sub(r"\]\((?!https?:|#)([^)\s]+\.md(?:#[^)\s]*)?)\)", lambda m: f"]({ONNX_DOCS}{m.group(1)})", doc)
    return doc.strip()


def _is_kernel_function(obj: Any) -> bool:
    return inspect.isfunction(obj)


def _page(name: str, ops: list[tuple[str, str]], onnx_versions: dict[tuple[str, str], list[int]]) -> str:
    from onnxrt.ops_cpu import _modules
    from onnxrt.registry import registered

    table = registered()
    full = f"onnxrt.ops_cpu.{name}"
    mod = importlib.import_module(full)
    generated = getattr(getattr(mod, "__spec__", None), "origin", None) == _modules.ORIGIN
    own = {cls for key in ops for cls in table[key].values()}

    # classes: the operators' classes as the module exposes them, newest first
    classes: list[tuple[str, type]] = []
    #: class attribute -> the module page that indexes it (its operator's own module)
    home_page: dict[str, str] = {}
    for domain, op_type in ops:
        served = set(table[(domain, op_type)].values())
        own_name = _modules.module_names(op_type)[0]
        for attr, value in vars(mod).items():
            if isinstance(value, type) and value in served and (attr, value) not in classes:
                if attr == op_type or not attr.startswith("_"):
                    classes.append((attr, value))
                    home_page[attr] = own_name

    # functions: the table kernels of a generated module, a real module's own public functions
    functions: list[tuple[str, Any]] = []
    for attr, value in vars(mod).items():
        if attr.startswith("_") or isinstance(value, type) or attr in dict(classes):
            continue
        if generated and attr in getattr(mod, "__all__", ()):
            functions.append((attr, value))
        elif not generated and _is_kernel_function(value) and value.__module__ == full:
            functions.append((attr, value))

    # the module's target without its docstring, which the summary shows
    lines = [f"# {full}", "", "```{eval-rst}", f".. py:module:: {full}", "```", ""]

    homes = sorted({cls.__module__ for cls in own})
    lines += ["## Short summary", ""]
    lines.append(_first_line(mod) if mod.__doc__ else f"Operators {', '.join(o for _, o in ops)}.")
    lines.append("")
    where = "generated from the registry on import" if generated else "a module of its own"
    lines.append(f"This path is {where}; the operators' code lives in " + ", ".join(f"`{h}`" for h in homes) + ".")
    for domain, op_type in ops:
        others = [n for n in _modules.module_names(op_type) if n != name]
        if others:
            lines.append(
                f"{op_type} is also importable from " + ", ".join(f"`onnxrt.ops_cpu.{n}`" for n in others) + "."
            )
    lines.append("")

    lines += ["## Classes", "", "| class | truncated documentation |", "|---|---|"]
    for attr, cls in classes:
        target = f"onnxrt.ops_cpu.{home_page[attr]}.{attr}"
        lines.append(f"| {{py:class}}`{attr} <{target}>` | {_first_line(cls)} |")
    lines.append("")

    if functions:
        lines += ["## Functions", "", "| function | truncated documentation |", "|---|---|"]
        for attr, fn in functions:
            lines.append(f"| {{py:func}}`{attr} <{full}.{attr}>` | {_first_line(fn) if inspect.isfunction(fn) else ''} |")
        lines.append("")

    base = classes[0][1] if classes else None
    if base is not None:
        props = sorted(n for n in dir(base) if isinstance(inspect.getattr_static(base, n, None), property))
        lines += ["## Properties", "", "| property | truncated documentation |", "|---|---|"]
        from onnxrt.ops_cpu import OpRun

        for p in props:
            shown = f"{{py:attr}}`{p} <onnxrt.ops_cpu.OpRun.{p}>`" if hasattr(OpRun, p) else f"`{p}`"
            lines.append(f"| {shown} | {_first_line(inspect.getattr_static(base, p))} |")
        lines.append("")
        lines += ["## Methods", "", "| method | truncated documentation |", "|---|---|"]
        seen: set[str] = set()
        for attr, cls in classes:
            for m, value in cls.__dict__.items():
                if inspect.isfunction(value) and m not in seen and (not m.startswith("_") or m in ("__init__", "_run")):
                    seen.add(m)
                    lines.append(f"| `{m}` | {_first_line(value)} |")
        lines.append("")

    for domain, op_type in ops:
        versions = table[(domain, op_type)]
        known = onnx_versions.get((domain, op_type), [])
        shown_domain = domain or "ai.onnx"
        lines += [f"## {op_type} ({shown_domain})", "", "### Versions", ""]
        lines += ["| since version | in ONNX | onnxrt's class |", "|---|---|---|"]
        for v in sorted(set(versions) | set(known)):
            cls = versions.get(v)
            kernel = f"`{cls.__module__}.{cls.__name__}`" if cls is not None else "not registered"
            lines.append(f"| {v} | {'yes' if v in known else 'no'} | {kernel} |")
        lines.append("")
        notes = [getattr(c, "off_spec_note", None) for c in set(versions.values())]
        for note in sorted({n for n in notes if n}):
            lines += [f"Outside the specification: {note}", ""]
        if not known:
            lines += ["ONNX defines no schema for this operator: it is onnxrt's own (or was removed).", ""]
        previous = None
        for v in sorted(known, reverse=True):
            doc = _schema_doc(op_type, v, domain)
            if not doc or doc == previous:
                continue
            title = f"### ONNX specification, version {v}" + (" (the newest)" if v == known[-1] else "")
            lines += [title, "", doc, ""]
            previous = doc

    lines += ["## Documentation", "", "The kernel classes, their docstrings (onnxrt's deviations and notes) and methods.", ""]
    lines += ["```{eval-rst}"]
    for attr, cls in classes:
        lines += [f".. autoclass:: {full}.{attr}", "   :members:", "   :exclude-members: kernel", "   :show-inheritance:"]
        if home_page[attr] != name:
            # documented again here, indexed on its own module's page
            lines.append("   :no-index:")
        lines.append("")
    for attr, fn in functions:
        if inspect.isfunction(fn):
            lines += [f".. autofunction:: {full}.{attr}", ""]
        else:
            lines += [f".. py:function:: {full}.{attr}(*args)", "", f"   numpy's ufunc ``numpy.{getattr(fn, '__name__', attr)}``.", ""]
    lines += ["```", ""]
    return "\n".join(lines)


def pages() -> dict[str, tuple[str, list[tuple[str, str]]]]:
    """module name -> (its domain group, the operators it is the own module of)."""
    from onnxrt.ops_cpu import _modules
    from onnxrt.registry import registered

    out: dict[str, tuple[str, list[tuple[str, str]]]] = {}
    for domain, op_type in sorted(registered()):
        if domain not in BUILTIN_DOMAINS:
            continue
        name = _modules.module_names(op_type)[0]
        out.setdefault(name, (domain, []))[1].append((domain, op_type))
    # a module also documents the operators it exposes under one of their other names
    index = _modules.module_index()
    for name, (domain, ops) in out.items():
        for key in index.get(name, []):
            if key not in ops and key[0] in BUILTIN_DOMAINS:
                ops.append(key)
    return out


def _write(path: Path, text: str) -> None:
    if not path.exists() or path.read_text(encoding="utf-8") != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")


def generate(srcdir: Path) -> list[str]:
    """Write every operator page and their index under ``srcdir/_generated/ops``; return the page names."""
    out = Path(srcdir) / OUT
    onnx_versions = _onnx_versions()
    entries = pages()
    for name, (_, ops) in entries.items():
        _write(out / f"{name}.md", _page(name, ops, onnx_versions))
    for stale in out.glob("op_*.md"):
        if stale.stem not in entries:
            stale.unlink()

    by_domain: dict[str, list[str]] = defaultdict(list)
    for name, (domain, _) in entries.items():
        by_domain[domain].append(name)
    lines = [
        "# Operator modules",
        "",
        "One page per module path `onnxrt.ops_cpu.op_<snake_name>` (mlprodict's), generated from the",
        "registry by `docs/_ext/onnxrt_ops.py`: the classes, functions, properties and methods,",
        "the operator's ONNX documentation per version next to what onnxrt registers, and the",
        "kernels' docstrings.",
        "",
    ]
    for domain in BUILTIN_DOMAINS:
        names = sorted(by_domain.get(domain, []))
        if not names:
            continue
        lines += [f"## {domain or 'ai.onnx'}", "", "| module | operators |", "|---|---|"]
        for name in names:
            ops = ", ".join(o for _, o in entries[name][1])
            lines.append(f"| [onnxrt.ops_cpu.{name}]({name}.md) | {ops} |")
        lines.append("")
    lines += ["```{toctree}", ":hidden:", ":maxdepth: 1", ""]
    lines += sorted(entries)
    lines += ["```", ""]
    _write(out / "index.md", "\n".join(lines))
    return sorted(entries)


def _on_builder_inited(app: Any) -> None:
    generate(Path(app.srcdir))


def _on_doctree_read(app: Any, doctree: Any) -> None:
    """Point the nodes of nested parses (MyST's eval-rst blocks) at the page's own document.

    Their nodes keep the nested document, whose settings hold the whole build environment:
    each page's pickled doctree then carried the environment (1.4 MB a page, growing with
    every page read; a third of the build's time went to pickling).
    """
    for node in doctree.findall():
        own = node.__dict__.get("_document")
        if own is not None and own is not doctree:
            node._document = doctree


def setup(app: Any) -> dict[str, Any]:
    app.connect("builder-inited", _on_builder_inited)
    app.connect("doctree-read", _on_doctree_read)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
