"""The README's "## Python" section's code blocks run, in order, in one namespace (docs that run)."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def python_section() -> tuple[str, str] | None:
    """(source name, text of the README's ``## Python`` section up to the next ``## `` heading)."""
    readme = REPO / "README.md"
    text = readme.read_text(encoding="utf-8")
    match = re.search(r"^## Python[^\n]*\n(.*?)(?=^## |\Z)", text, flags=re.MULTILINE | re.DOTALL)
    return (str(readme), match.group(1)) if match else None


def code_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)


def test_python_section_examples_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found = python_section()
    assert found is not None, "README.md lost its '## Python' section"
    source, text = found
    blocks = code_blocks(text)
    assert len(blocks) >= 5, f"{source}: the Python section lost its examples"
    monkeypatch.chdir(tmp_path)  # examples that write files write here
    # the blocks run as the body of a module, as a user's script runs: classes they define pickle by reference
    module = types.ModuleType("readme_python")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    namespace = module.__dict__
    for i, block in enumerate(blocks, start=1):
        code = compile(block, f"{source} python block {i}", "exec")
        exec(code, namespace)  # noqa: S102 - running the documentation is the point
