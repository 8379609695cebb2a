"""A ``users.click_model`` given without ``name`` (e.g. by ``--set users.click_model.preset=...`` or a
sweep axis on a config relying on the default click model) is refused with a message that says the
default applies only when ``users.click_model`` is absent, and what to add."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import clickmodels
import pytest
import yaml
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import ConfigError
from simulations.config import config_from_mapping, load_config
from simulations.sweep import sweep_from_mapping

BASE: dict[str, Any] = {
    "seed": 3,
    "replicates": 2,
    "collection": {"type": "synthetic", "n_queries": 40, "candidates": 10},
    "users": {"population": 200},
    "traffic": {"days": 2, "queries_per_day": 200, "batch_hours": 24},
    "analysis": {"truth_impressions": 2000},
}
AVAILABLE = "available: " + ", ".join(clickmodels.available())
REQUIRED = ("is required when users.click_model is given (the default click model, {name: cascade, preset: "
            "informational}, applies only when users.click_model is absent entirely); available: cascade, ")


def _with_users(**users: Any) -> dict[str, Any]:
    return {**BASE, "users": {**BASE["users"], **users}}


def _write(tmp_path: Path, data: dict[str, Any]) -> Path:
    path = tmp_path / "c.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_default_click_model_applies_only_when_absent() -> None:
    from simulations.config import DEFAULT_CLICK_MODEL

    assert DEFAULT_CLICK_MODEL == {"name": "cascade", "preset": "informational"}
    assert config_from_mapping(BASE).users.click_model == DEFAULT_CLICK_MODEL
    assert config_from_mapping(_with_users(click_model={"name": "cascade", "preset": "navigational"})) \
        .users.click_model == {"name": "cascade", "preset": "navigational"}
    with pytest.raises(ConfigError) as info:
        config_from_mapping(_with_users(click_model={"preset": "navigational"}))
    assert info.value.key_path == ("users", "click_model", "name")
    assert info.value.message.startswith(REQUIRED), info.value.message


def test_a_user_type_has_no_default_click_model() -> None:
    types = [{"name": "a", "share": 1.0, "click_model": {"preset": "navigational"}}]
    with pytest.raises(ConfigError) as info:
        config_from_mapping(_with_users(types=types))
    assert info.value.key_path == ("users", "types", 0, "click_model", "name")
    assert info.value.message.startswith("is required; available: cascade, "), info.value.message


def test_simulate_set_says_the_mapping_came_from_set_and_what_to_add(tmp_path: Path) -> None:
    cfg = _write(tmp_path, BASE)
    r = CliRunner().invoke(app, ["simulate", "-c", str(cfg), "-q", "-o", str(tmp_path / "out"),
                                 "--set", "users.click_model.preset=navigational"])
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())  # the error box may wrap lines
    assert "users.click_model.name: " + REQUIRED in text, text
    assert ("(users.click_model given by --set users.click_model.preset, not the file; add --set "
            "users.click_model.name=...)") in text, text
    assert not (tmp_path / "out").exists()


def test_the_advice_works(tmp_path: Path) -> None:
    """Adding --set users.click_model.name gives the config of the edited file."""
    cfg = _write(tmp_path, BASE)
    got = load_config(cfg, {"users.click_model.preset": "navigational", "users.click_model.name": "cascade"})
    edited = _write(tmp_path, _with_users(click_model={"name": "cascade", "preset": "navigational"}))
    assert got == load_config(edited)


def test_no_set_note_when_the_file_gives_the_mapping(tmp_path: Path) -> None:
    """The file's own users.click_model lacks the name: not --set's doing."""
    cfg = _write(tmp_path, _with_users(click_model={"preset": "informational"}))
    r = CliRunner().invoke(app, ["simulate", "-c", str(cfg), "-q", "-o", str(tmp_path / "out"),
                                 "--set", "users.click_model.preset=navigational"])
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "users.click_model.name: " + REQUIRED in text, text
    assert "--set users.click_model" not in text, text


def test_sweep_axis_says_what_to_add(tmp_path: Path) -> None:
    grid = {"traffic.days": [2, 3], "users.click_model.preset": ["navigational", "informational"]}
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": BASE, "grid": grid, "output": str(tmp_path / "out")})
    assert info.value.key_path == ("grid", "users.click_model.preset")
    assert info.value.message == (
        "users.click_model.preset = 'navigational' makes users.click_model.name invalid: "
        + REQUIRED.removesuffix("available: cascade, ") + AVAILABLE
        + " (point 0; with traffic.days = 2; the base config has no users.click_model (this axis creates it): add "
        "users.click_model.name to the base config)")
    # with the name in the base, the same axis is fine
    ok = sweep_from_mapping({"base": _with_users(click_model={"name": "cascade"}), "grid": grid,
                             "output": str(tmp_path / "out")})
    assert [p.config.users.click_model for p in ok.points][:2] == [
        {"name": "cascade", "preset": "navigational"}, {"name": "cascade", "preset": "informational"}]


def test_sweep_no_base_note_when_the_base_gives_the_mapping(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        sweep_from_mapping({"base": _with_users(click_model={"stop": "first_click"}),
                            "grid": {"users.click_model.preset": ["navigational"]}, "output": str(tmp_path / "o")})
    assert info.value.key_path == ("grid", "users.click_model.preset")
    assert REQUIRED in info.value.message and info.value.message.endswith("(point 0)"), info.value.message


def test_sweep_cli_set_axis(tmp_path: Path) -> None:
    cfg = tmp_path / "sweep.yaml"
    cfg.write_text(yaml.safe_dump({"base": BASE, "output": str(tmp_path / "out"), "grid": {"traffic.days": [2]}}))
    r = CliRunner().invoke(app, ["sweep", "-c", str(cfg), "-q",
                                 "--set", "grid.users.click_model.preset=[navigational]"])
    assert r.exit_code == 2, r.output
    text = " ".join(r.output.split())
    assert "grid.users.click_model.preset: users.click_model.preset = 'navigational' makes users.click_model.name " \
        "invalid: " + REQUIRED in text, text
    assert "add users.click_model.name to the base config" in text, text
    assert not (tmp_path / "out").exists()


def test_has_key_path() -> None:
    from simulations.config import has_key_path

    data = {"users": {"click_model": {"preset": "x"}}, "designs": [{"name": "ab"}], "seed": 1}
    assert has_key_path(data, ("users", "click_model"))
    assert has_key_path(data, ("designs", 0, "name")) and has_key_path(data, ())
    assert not has_key_path(data, ("users", "click_model", "name"))
    assert not has_key_path(data, ("designs", 1)) and not has_key_path(data, ("designs", "0"))
    assert not has_key_path(data, ("seed", "x")) and not has_key_path(data, ("users", 0))
