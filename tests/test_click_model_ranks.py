"""A click model whose parameters are given per rank for fewer ranks than the lists shown (review leftover): the
error names the key that gives them (the list itself, or the preset it comes from), the config file, the number
of ranks given, the slots shown and rankers.depth, and how to fix it (simulations.users.ranks_error).

The expected messages are written out here; the ranks are those of the specs (5 examination values, 3
continuation values, ai2018's 10 examination values, 4 rows of a UBM matrix)."""

from __future__ import annotations

import subprocess
import sys
from typing import Any

import clickmodels
import pytest
import yaml

from onlineeval.errors import ConfigError
from simulations.config import config_from_mapping
from simulations.users import UserModels, check_click_model_ranks, per_rank_parameter, ranks_error

CLICK = [0.05, 0.1, 0.3, 0.6, 0.9]  # by grade: the synthetic collection's grades 0..4
PBM5 = {"name": "pbm", "examination": [0.9, 0.7, 0.5, 0.3, 0.2], "click": CLICK}
DCM3 = {"name": "dcm", "click": CLICK, "continuation": [0.9, 0.8, 0.7]}
UBM4 = {"name": "ubm", "click": CLICK, "examination": [[0.9], [0.7, 0.8], [0.5, 0.6, 0.7], [0.4, 0.5, 0.6, 0.7]]}


def _config(users: dict[str, Any], depth: int = 10, candidates: int = 12) -> dict[str, Any]:
    return {"seed": 1, "replicates": 2, "workers": 1,
            "collection": {"type": "synthetic", "n_queries": 50, "candidates": candidates},
            "rankers": {"depth": depth}, "users": {"population": 200, **users},
            "traffic": {"days": 2, "queries_per_day": 200},
            "designs": [{"name": "ab", "type": "ab", "metric": "reciprocal_rank"}]}


def _error(spec: dict[str, Any], key: tuple[str | int, ...], **config: Any) -> str:
    """The error of loading the config (simulations.config.checks calls check_click_model_ranks, where the file is
    known), which must be the one check_click_model_ranks itself raises."""
    mapping = _config({"click_model": spec} if key == ("users", "click_model") else
                      {"types": [{"name": "t", "share": 1.0, "click_model": spec}]}, **config)
    with pytest.raises(ConfigError) as loading:
        config_from_mapping(mapping, source="t.yaml")
    short = config_from_mapping({**mapping, "rankers": {"depth": 1}})  # loads: 1 slot is covered
    ok = short.model_copy(update={"rankers": short.rankers.model_copy(update={"depth": mapping["rankers"]["depth"]})})
    with pytest.raises(ConfigError) as err:
        check_click_model_ranks(clickmodels.build(spec), spec, key, ok, "t.yaml")
    assert str(loading.value) == str(err.value)
    return str(err.value)


def test_per_rank_parameters_of_the_models() -> None:
    assert per_rank_parameter(clickmodels.build(PBM5)) == ("examination", 5)
    assert per_rank_parameter(clickmodels.build(DCM3)) == ("continuation", 3)
    assert per_rank_parameter(clickmodels.build(UBM4)) == ("examination", 4)
    assert per_rank_parameter(clickmodels.build({"name": "pbm", "preset": "ai2018"})) == ("examination", 10)
    assert per_rank_parameter(clickmodels.build({"name": "cascade", "preset": "navigational"})) is None
    dbn = {"name": "dbn", "click": CLICK, "satisfaction": CLICK, "gamma": 0.9}
    assert per_rank_parameter(clickmodels.build(dbn)) is None


def test_message_names_the_key_file_ranks_and_depth() -> None:
    assert _error(PBM5, ("users", "click_model")) == (
        "t.yaml: users.click_model.examination: gives 5 ranks, but rankers.depth is 10: give examination for 10 "
        "ranks, or set rankers.depth to at most 5")
    assert _error(DCM3, ("users", "types", 0, "click_model")) == (
        "t.yaml: users.types[0].click_model.continuation: gives 3 ranks, but rankers.depth is 10: give continuation "
        "for 10 ranks, or set rankers.depth to at most 3")
    assert _error(UBM4, ("users", "click_model"), depth=6) == (
        "t.yaml: users.click_model.examination: gives 4 ranks, but rankers.depth is 6: give examination for 6 "
        "ranks, or set rankers.depth to at most 4")
    # from a preset: the preset is the key to change
    assert _error({"name": "pbm", "preset": "ai2018", "click": CLICK}, ("users", "click_model"), depth=12,
                  candidates=20) == (
        "t.yaml: users.click_model.preset: preset 'ai2018' gives examination for 10 ranks, but rankers.depth is 12: "
        "give examination for 12 ranks instead of the preset, or set rankers.depth to at most 10")


def test_enough_ranks_is_no_error() -> None:
    model = clickmodels.build(PBM5)
    assert ranks_error(model, PBM5, ("users", "click_model"), 5, 10) is None
    assert ranks_error(model, PBM5, ("users", "click_model"), 4, 4) is None
    cfg = config_from_mapping(_config({"click_model": PBM5}, depth=5))
    check_click_model_ranks(model, PBM5, ("users", "click_model"), cfg, "t.yaml")  # 5 slots: covered


def test_world_check_gives_the_same_message_and_the_models_own_error_otherwise() -> None:
    """UserModels.check_world (the run's check of the built world) says the same, with rankers.depth when given."""
    import numpy as np

    users = UserModels.from_config(config_from_mapping(_config(
        {"types": [{"name": "nav", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}},
                   {"name": "d", "share": 0.5, "click_model": DCM3}]}, depth=3)).users)
    example = np.zeros((2, 10), dtype=np.int8)
    with pytest.raises(ConfigError) as err:
        users.check_world(5, example, depth=10, source="t.yaml")
    assert str(err.value) == ("t.yaml: users.types[1].click_model.continuation: gives 3 ranks, but rankers.depth "
                              "is 10: give continuation for 10 ranks, or set rankers.depth to at most 3")
    with pytest.raises(ConfigError) as err:
        users.check_world(5, example)
    assert str(err.value) == ("users.types[1].click_model.continuation: gives 3 ranks, but the lists shown have 10 "
                              "slots (rankers.depth): give continuation for 10 ranks, or set rankers.depth to at "
                              "most 3")
    users.check_world(5, example[:, :3])  # 3 slots: covered
    clicks = users.sample(example[:, :3], np.array([0, 1], dtype=np.int8), np.random.default_rng(0))
    assert clicks.shape == (2, 3) and users.first_click_distribution(example[:, :3]).shape == (2, 4)


def test_cli_error(tmp_path) -> None:
    """The CLI's error of a real config (exit code 2, no traceback)."""
    cfg = tmp_path / "short.yaml"
    cfg.write_text(yaml.safe_dump(_config({"click_model": PBM5})))
    proc = subprocess.run([sys.executable, "-m", "onlineeval.cli", "simulate", "--config", str(cfg), "--output",
                           str(tmp_path / "out"), "-q"], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    # refused at loading, where the file is known (simulations.config.checks calls check_click_model_ranks)
    assert proc.stderr.strip() == (
        f"error: {cfg}: users.click_model.examination: gives 5 ranks, but rankers.depth is 10: give examination "
        "for 10 ranks, or set rankers.depth to at most 5"), proc.stderr
