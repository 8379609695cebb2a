"""README's `onlineeval sweep --config configs/sweep.yaml` block (the shrinkage study and the MDE table's head) is
what the command prints: each of its lines, but the '...' placeholders, is a line of the output, in order.
The block had gone stale once (the prediction sentences had gained "the median |offline delta| ...", printed
since, but the README still quoted the older sentence). About 20 s on 2 cores."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parents[1]


def _block() -> list[str]:
    lines = (ROOT / "README.md").read_text(encoding="utf-8").split("\n")
    start = next(i for i, line in enumerate(lines)
                 if line.startswith("shrinkage: offline nDCG@10 delta -> true online effect"))
    end = lines.index("```", start)
    return lines[start:end]


def test_the_readme_sweep_block_is_the_command_s_output(tmp_path: Path) -> None:
    from onlineeval.cli import app

    res = CliRunner().invoke(app, ["sweep", "--config", str(ROOT / "configs" / "sweep.yaml"),
                                   "--output", str(tmp_path / "sweep"), "--quiet"])
    assert res.exit_code == 0, res.output
    out = res.stdout.split("\n")
    block = _block()
    assert len(block) > 15
    at = 0
    for line in block:
        if line.strip() == "..." or line.endswith("..."):
            continue
        assert line in out[at:], f"README line not in the output (after line {at}): {line}"
        at = out.index(line, at) + 1
