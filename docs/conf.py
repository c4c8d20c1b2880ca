"""Sphinx configuration of onnxrt's documentation: ``sphinx-build -W -b html docs docs/_build/html``."""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))

import onnxrt  # noqa: E402

project = "onnxrt"
author = "onnxrt's authors"
copyright = "onnxrt's authors"  # noqa: A001
release = version = onnxrt.__version__

extensions = [
    "sphinx.ext.autodoc",
    # ONNX's operator docs write formulas between $$ (rendered by MathJax in the browser)
    "sphinx.ext.mathjax",
    "myst_parser",
    # one page per operator module, written from the registry when the build starts
    "onnxrt_ops",
]
source_suffix = {".rst": "restructuredtext", ".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_ext", "Thumbs.db", ".DS_Store"]

# no network: no intersphinx, nothing fetched
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_default_options = {"show-inheritance": True}
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence", "dollarmath"]

html_theme = "alabaster"
html_title = f"onnxrt {release}"
html_static_path: list[str] = []
# alabaster's navigation sidebar renders the whole toctree (300 pages) into every page:
# the build took twice as long with it; the pages link to their index instead
html_sidebars = {"**": ["about.html", "relations.html", "searchbox.html"]}
