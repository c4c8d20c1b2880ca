"""The project set-up: README commands and CI stay in step, the package ships its demo model."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    return [b.strip() for b in blocks]


def test_ci_runs_exactly_the_readme_test_command():
    install_and_run, test_command = _readme_commands()[:2]
    assert "onnxrt run" in install_and_run
    assert "pytest" in test_command
    ci_lines = [line.strip() for line in (ROOT / ".ci" / "run").read_text().splitlines()]
    assert test_command in ci_lines


def test_demo_model_is_packaged():
    from onnxrt.cli import demo_model_path

    assert Path(demo_model_path()).is_file()
    assert (ROOT / "src" / "onnxrt" / "py.typed").is_file()
