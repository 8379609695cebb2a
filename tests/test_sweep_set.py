"""``onlineeval sweep --set KEY=VALUE``: the sweep file's keys, the base config's keys (inline or a
file), a grid axis's values and one listed point's value, with errors that name the key."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import ConfigError
from simulations.sweep import load_sweep

ROOT = Path(__file__).resolve().parents[1]
SWEEP = ROOT / "configs" / "sweep.yaml"


def test_sweep_keys_base_keys_and_grid_axes() -> None:
    sweep = load_sweep(SWEEP, overrides={
        "replicates": 4, "chunk": 2, "base.traffic.days": 3, "grid.rankers.B.noise": [0.8, 0.9],
    })  # fmt: skip
    assert len(sweep.points) == 2 * 2  # the noise axis replaced, the preset axis kept
    assert sweep.chunk == 2
    assert {p.overrides["rankers.B.noise"] for p in sweep.points} == {0.8, 0.9}
    for point in sweep.points:
        assert point.config.replicates == 4
        assert point.config.traffic.days == 3
    plain = load_sweep(SWEEP)
    assert len(plain.points) == 20 and plain.points[0].config.traffic.days == 7


def _points_sweep(tmp_path: Path) -> Path:
    """A sweep of listed points whose base is a file in another folder (relative paths there)."""
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    base = (SWEEP.read_text(encoding="utf-8").split("base:\n", 1)[1]).split("\ngrid:", 1)[0]
    lines = [line[2:] for line in base.splitlines()]
    (base_dir / "simulate.yaml").write_text("\n".join(lines) + "\n", encoding="utf-8")
    path = tmp_path / "sweep.yaml"
    path.write_text(
        "output: out\nreplicates: 2\nbase: base/simulate.yaml\n"
        "points:\n  - {rankers.B.noise: 0.8}\n  - {rankers.B.noise: 0.9}\n",
        encoding="utf-8",
    )
    return path


def test_a_listed_point_and_a_base_given_as_a_file(tmp_path: Path) -> None:
    path = _points_sweep(tmp_path)
    sweep = load_sweep(path, overrides={"points[1].rankers.B.noise": 1.1, "base.traffic.queries_per_day": 500})
    assert [p.overrides["rankers.B.noise"] for p in sweep.points] == [0.8, 1.1]
    assert all(p.config.traffic.queries_per_day == 500 for p in sweep.points)
    assert all(p.config.traffic.days == 7 for p in sweep.points)  # the rest of the base file as it was


def test_errors_name_the_key(tmp_path: Path) -> None:
    path = _points_sweep(tmp_path)
    with pytest.raises(ConfigError, match="no point 5"):
        load_sweep(path, overrides={"points[5].rankers.B.noise": 0.9})
    with pytest.raises(ConfigError, match="not a key path"):
        load_sweep(path, overrides={"base..traffic": 3})
    with pytest.raises(ConfigError) as info:
        load_sweep(path, overrides={"base.traffic.days": -2})
    assert "days" in str(info.value)


def test_the_command_takes_set_and_reports_bad_values_in_one_line(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(app, ["sweep", "--config", str(SWEEP), "--output", str(tmp_path / "o"),
                              "--set", "grid.rankers.B.noise=[]"])  # fmt: skip
    assert res.exit_code == 2
    assert "grid" in res.output and "rankers.B.noise" in res.output and "Traceback" not in res.output
    res = runner.invoke(app, ["sweep", "--config", str(SWEEP), "--set", "replicates"])
    assert res.exit_code == 2 and "expected KEY=VALUE" in res.output
