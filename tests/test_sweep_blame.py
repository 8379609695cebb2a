"""Which sweep axis a point's invalid config is blamed on (``simulations.sweep._blame_axis``).

An error at a key path under (or above) an axis's key path is that axis's; otherwise the axis
sharing the longest prefix with the error's key path, e.g. ``users.click_model.preset`` for an
error at ``users.click_model.name`` (a sibling); no shared prefix: the first axis.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from onlineeval.errors import ConfigError
from simulations.sweep import _blame_axis, sweep_from_mapping

#: a base config relying on the default click model (no users.click_model)
BASE: dict[str, Any] = {
    "seed": 3,
    "replicates": 2,
    "collection": {"type": "synthetic", "n_queries": 40, "candidates": 10},
    "rankers": {"depth": 5},
    "users": {"population": 200},
    "traffic": {"days": 2, "queries_per_day": 200, "batch_hours": 24},
    "analysis": {"truth_impressions": 2000},
}


def test_sibling_of_an_axis_is_blamed_on_that_axis(tmp_path: Path) -> None:
    """The audit's repro: users.click_model.preset creates users.click_model without a name; the error at
    users.click_model.name was blamed on the first axis, rankers.depth."""
    grid = {"rankers.depth": [5, 10], "users.click_model.preset": ["navigational", "informational"]}
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": BASE, "grid": grid, "output": str(tmp_path / "out")})
    assert info.value.key_path == ("grid", "users.click_model.preset")
    message = info.value.message
    assert message.startswith("users.click_model.preset = 'navigational' makes users.click_model.name invalid")
    assert "(point 0; with rankers.depth = 5" in message, message
    assert str(info.value).startswith("grid.users.click_model.preset: "), str(info.value)


def test_points_name_the_sibling_axis_too(tmp_path: Path) -> None:
    points = [{"traffic.days": 3, "users.click_model.preset": "navigational"}]
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": BASE, "points": points, "output": str(tmp_path / "out")})
    assert info.value.key_path == ("points", 0, "users.click_model.preset")
    assert "with traffic.days = 3" in info.value.message


def _blamed(axes: list[str], error_path: tuple[Any, ...]) -> str:
    return _blame_axis({axis: 0 for axis in axes}, ConfigError(error_path, "bad"))


@pytest.mark.parametrize(
    ("axes", "error_path", "blamed"),
    [
        # at, under or above an axis's key path: that axis (today's rule)
        (["rankers.depth", "traffic.days"], ("traffic", "days"), "traffic.days"),
        (["rankers.depth", "users.click_model"], ("users", "click_model", "stop", 2), "users.click_model"),
        (["rankers.depth", "users.click_model.preset"], ("users", "click_model"), "users.click_model.preset"),
        # nested axes, both above the error: the more specific one
        (["users", "users.click_model"], ("users", "click_model", "name"), "users.click_model"),
        # a prefix relation wins over a longer shared prefix of a sibling
        (["users.click_model.preset", "users"], ("users", "click_model", "name"), "users"),
        # siblings: the longest shared prefix, in path components
        (["rankers.depth", "users.click_model.preset"], ("users", "click_model", "name"), "users.click_model.preset"),
        (["users.population", "users.click_model.preset", "rankers.depth"], ("users", "click_model", "name"),
         "users.click_model.preset"),
        (["designs[0].share_b", "designs[1].metric"], ("designs", 1, "analysis"), "designs[1].metric"),
        # a shared first component is enough
        (["traffic.days", "rankers.B.noise"], ("rankers", "A", "noise"), "rankers.B.noise"),
        # ties: the earlier axis; no shared prefix: the first axis (today's fallback)
        (["users.population", "users.activity.sigma"], ("users", "click_model", "name"), "users.population"),
        (["rankers.depth", "traffic.days"], ("seed",), "rankers.depth"),
        (["rankers.depth", "traffic.days"], (), "rankers.depth"),
    ],
)
def test_blame_rule(axes: list[str], error_path: tuple[Any, ...], blamed: str) -> None:
    assert _blamed(axes, error_path) == blamed
