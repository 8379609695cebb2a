"""The README's `onlineeval power` output blocks are what the command prints, and effects are printed to
3 significant figures keeping their zeros (+0.00500, +0.0200), never %g's +0.005 next to +0.00549."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.cli._common import effect_text

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```bash\n(onlineeval power [^\n]*)\n```\n```\n(.*?)\n```", re.DOTALL)


def _blocks() -> list[tuple[str, str]]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


def test_the_readme_has_power_blocks() -> None:
    assert len(_blocks()) >= 3


@pytest.mark.parametrize(("command", "shown"), _blocks(), ids=lambda v: v if v.startswith("onlineeval") else "")
def test_readme_power_block_is_the_output(command: str, shown: str) -> None:
    if "--csv" in command:
        pytest.skip("the README's users.csv is not in the repository")
    res = CliRunner().invoke(app, shlex.split(command)[1:], prog_name="onlineeval")
    assert res.exit_code == 0, res.output
    assert res.stdout.rstrip("\n") == shown


@pytest.mark.parametrize(
    ("x", "text"),
    [(0.1, "+0.100"), (0.02, "+0.0200"), (0.0228, "+0.0228"), (-0.005, "-0.00500"), (0.0236463, "+0.0236"),
     (5.0, "+5.00"), (99.96, "+100"), (1234.4, "+1,234"), (1.2e-5, "+1.20e-05"), (0.0, "0"),
     (float("inf"), "inf")],
)  # fmt: skip
def test_effect_text(x: float, text: str) -> None:
    assert effect_text(x) == text
