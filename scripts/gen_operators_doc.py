"""Write docs/operators.md: the operators and versions onnxrt supports, per domain."""

from __future__ import annotations

from pathlib import Path

from onnxrt.tools.ops_table import markdown

OUT = Path(__file__).resolve().parents[1] / "docs" / "operators.md"

if __name__ == "__main__":
    OUT.write_text(markdown() + "\n", encoding="utf-8")
    print(f"wrote {OUT}")
