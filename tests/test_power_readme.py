"""The README's `onlineeval power` output blocks are what the command prints, and effects are printed to
3 significant figures keeping their zeros (+0.00500, +0.0200), never %g's +0.005 next to +0.00549."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.cli._common import effect_text

README = Path(__file__).resolve().parents[1] / "README.md"
_BLOCK = re.compile(r"```bash\n(onlineeval power [^\n]*)\n```\n```\n(.*?)\n```", re.DOTALL)
#: the README's one-line Python programs that write an input file of its examples (``users.csv``)
_WRITER = re.compile(r"```bash\n(python -c \"[^\n]*\.to_csv\('([\w.]+)'[^\n]*)\n```")


def _blocks() -> list[tuple[str, str]]:
    return _BLOCK.findall(README.read_text(encoding="utf-8"))


def _writers() -> dict[str, str]:
    """``{file name: the README's command that writes it}``."""
    return {name: command for command, name in _WRITER.findall(README.read_text(encoding="utf-8"))}


def test_the_readme_has_power_blocks() -> None:
    assert len(_blocks()) >= 3
    assert any("--csv" in command for command, _ in _blocks())


def test_every_csv_the_power_blocks_read_is_written_by_the_readme() -> None:
    read = {shlex.split(command)[shlex.split(command).index("--csv") + 1]
            for command, _ in _blocks() if "--csv" in command}
    assert read and read <= set(_writers())


@pytest.mark.parametrize(("command", "shown"), _blocks(), ids=lambda v: v if v.startswith("onlineeval") else "")
def test_readme_power_block_is_the_output(command: str, shown: str, tmp_path: Path,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    args = shlex.split(command)[1:]
    if "--csv" in args:  # the file the README's own command writes, in a fresh folder
        name = args[args.index("--csv") + 1]
        writer = shlex.split(_writers()[name])
        assert writer[0] == "python"
        subprocess.run([sys.executable, *writer[1:]], cwd=tmp_path, check=True)
        monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(app, args, prog_name="onlineeval")
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
