"""``onlineeval.sweep(..., writers=N)``: the Python API takes ``writers`` as ``onlineeval sweep --writers``
and :func:`simulations.sweep.run_sweep` do (default ``None``: run_sweep's default, 2 or none on one core)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

import onlineeval
import simulations.sweep as sweep_module
from onlineeval.errors import ConfigError

BASE: dict[str, Any] = {
    "seed": 7, "replicates": 2, "workers": 1,
    "collection": {"type": "synthetic", "n_queries": 40, "candidates": 10},
    "rankers": {"depth": 5, "A": {"noise": 1.0}, "B": {"noise": 0.8}},
    "users": {"population": 200, "click_model": {"name": "cascade", "preset": "navigational"}},
    "traffic": {"days": 2, "queries_per_day": 200, "batch_hours": 24},
    "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"}],
    "analysis": {"aa": False, "truth_impressions": 2000},
}
SPEC = {"base": BASE, "grid": {"rankers.B.noise": [0.7, 0.9]}}


class _Stop(Exception):
    pass


def test_writers_reach_run_sweep(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    # the same default as run_sweep's (and the CLI's: --writers not given hands None to run_sweep)
    assert inspect.signature(onlineeval.sweep).parameters["writers"].default is None
    assert inspect.signature(sweep_module.run_sweep).parameters["writers"].default is None
    seen: list[Any] = []

    def fake_run_sweep(sweep: Any, **kw: Any) -> Any:
        seen.append(kw.get("writers", "missing"))
        raise _Stop

    monkeypatch.setattr(sweep_module, "run_sweep", fake_run_sweep)
    for kw, want in (({}, None), ({"writers": 0}, 0), ({"writers": 3}, 3)):
        with pytest.raises(_Stop):
            onlineeval.sweep(SPEC, output=tmp_path / "out", **kw)
        assert seen[-1] == want


@pytest.mark.parametrize("bad", [-1, 1.5, "2", True])
def test_a_bad_writers_value_is_a_clear_error(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, bad: Any) -> None:
    def fake_run_sweep(sweep: Any, **kw: Any) -> Any:
        raise AssertionError("run_sweep reached with a bad writers value")

    monkeypatch.setattr(sweep_module, "run_sweep", fake_run_sweep)
    with pytest.raises(ConfigError) as info:
        onlineeval.sweep(SPEC, output=tmp_path / "out", writers=bad)
    assert info.value.key_path == ("writers",)
    assert str(info.value) == (f"writers: must be a whole number >= 0 of writer processes (0: write the points' "
                               f"folders in this process) or None (the default: 2, or 0 on one core), got {bad!r}")
    assert not (tmp_path / "out").exists()  # refused before anything is read or written


def test_writers_do_not_change_the_sweep(tmp_path: Path) -> None:
    """A real sweep through the API with a writer process and without: the same points.csv, byte for byte."""
    a = onlineeval.sweep(SPEC, output=tmp_path / "w0", writers=0)
    b = onlineeval.sweep(SPEC, output=tmp_path / "w1", writers=1)
    assert (tmp_path / "w0" / "points.csv").read_bytes() == (tmp_path / "w1" / "points.csv").read_bytes()
    pd.testing.assert_frame_equal(a.points, b.points)
    assert len(a.points) == 2
