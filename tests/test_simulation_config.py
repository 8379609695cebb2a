"""Config loading: defaults, and one clear error (key path, what is allowed) per problem."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from typer.testing import CliRunner

from onlineeval.cli import app
from onlineeval.errors import ConfigError
from simulations.config import Config, config_from_mapping, load_config

REPO = Path(__file__).resolve().parents[1]


def write(tmp_path: Path, data, name="c.yaml") -> Path:
    path = tmp_path / name
    path.write_text(data if isinstance(data, str) else yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("name", ["ab.yaml", "interleaving.yaml"])
def test_bundled_configs_load(name):
    cfg = load_config(REPO / "configs" / name)
    assert isinstance(cfg, Config)
    assert cfg.effective()["designs"]  # defaults filled in, JSON-serialisable


def test_defaults_are_complete():
    cfg = config_from_mapping({})
    eff = cfg.effective()
    assert eff["users"]["click_model"] == {"name": "cascade", "preset": "informational"}
    assert [d["name"] for d in eff["designs"]] == ["ab", "team_draft", "balanced"]
    assert eff["analysis"]["alpha"] == 0.05


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        ({"users": {"populaton": 5}}, "users.populaton", "allowed keys: activity, click_model, population, types"),
        ({"traffic": {"days": "two"}}, "traffic.days", "must be an integer, got 'two'"),
        ({"analysis": {"alpha": 1.5}}, "analysis.alpha", "less than 1"),
        ({"replicates": 0}, "replicates", "must be at least 1, got 0"),
        ({"collection": {"type": "synthetic", "label_distribution": [0.5, 0.6]}}, "collection",
         "must sum to 1"),
        ({"collection": {"type": "synthetic", "label_distribution": [0.5, 1.5]}},
         "collection.label_distribution[1]", "must be at most 1, got 1.5"),
        ({"collection": {"type": "elsewhere"}}, "collection.type",
         "must be one of 'synthetic', 'trec', got 'elsewhere'"),
        ({"designs": [{"name": "x", "type": "interleaving"}]}, "designs[0]", "needs 'method'"),
        ({"designs": [{"name": "x", "type": "ab", "share_b": 1.0}]}, "designs[0]", "strictly between 0 and 1"),
        ({"designs": [{"name": "x", "type": "ab"}, {"name": "x", "type": "ab"}]}, "", "unique"),
        ({"designs": [{"name": "x", "type": "interleaving", "method": "coin_toss"}]}, "designs[0].method",
         "team_draft"),
        ({"offline_metric": "nDCG@ten"}, "offline_metric", "cut-off must be an integer"),
        ({"users": {"click_model": {"name": "cascade", "click": [0.1, 0.2, 0.3, 0.4, 0.5],
                                     "stop": [0.1, 0.2, 1.5, 0.2, 0.2]}}},
         "users.click_model.stop[2]", "1.5"),
        ({"users": {"click_model": {"name": "teleport"}}}, "users.click_model.name", "cascade"),
        ({"users": {"types": [{"name": "a", "share": 0.5, "click_model": {"name": "cascade", "preset": "perfect"}}]}},
         "users", "sum to 1"),
        ({"users": {"types": [{"name": "a", "share": 1.0, "click_model": {"name": "cascade", "preset": "nope"}}]}},
         "users.types[0].click_model.preset", "informational"),
        ({"users": {"types": []}}, "users", "types: an empty list; give at least one user type"),  # ran the default
        ({"traffic": {"diurnal": [1.0] * 23}}, "traffic", "24 hourly weights"),
        ({"designs": [{"name": "m", "type": "interleaving", "method": "team_draft_multileave",
                       "rankers": ["A", "B", "Z"]}]}, "", "unknown ranker(s) Z; defined: A, B"),
        ({"rankers": {"others": {"C": {}}}, "designs": [{"name": "m", "type": "interleaving", "method": "balanced",
                                                          "rankers": ["A", "B", "C"]}]},
         "designs[0].rankers", "balanced interleaves 2 rankers, got 3; use a multileaving method"),
        ({"designs": [{"name": "x", "type": "ab", "rankers": ["B", "A"]}]}, "designs[0]", "compares rankers A and B"),
        ({"rankers": {"others": {"B": {}}}}, "rankers", "must not redefine B"),
        ({"collection": {"candidates": 5}, "rankers": {"depth": 10}}, "",
         "rankers.depth (10) exceeds collection.candidates (5)"),
    ],
)
def test_bad_configs_name_the_key(data, key, fragment):
    with pytest.raises(ConfigError) as info:
        config_from_mapping(data, source="t.yaml")
    err = info.value
    text = str(err)
    assert text.startswith("t.yaml: ")
    if key:
        assert text.startswith(f"t.yaml: {key}:"), text
    assert fragment in text, text


def test_missing_files_and_bad_yaml(tmp_path):
    cfg = write(tmp_path, {"collection": {"type": "trec", "qrels": "nope.qrels", "runs": {"A": "a", "B": "b"}}})
    with pytest.raises(ConfigError, match=r"collection\.qrels: file not found: .*nope\.qrels"):
        load_config(cfg)
    (tmp_path / "q").write_text("1 0 d1 1\n")
    (tmp_path / "a").write_text("1 Q0 d1 1 1.0 x\n")
    cfg = write(tmp_path, {"collection": {"type": "trec", "qrels": "q", "runs": {"A": "a"}}})
    with pytest.raises(ConfigError, match="needs a run for rankers A and B; missing \\['B'\\]"):
        load_config(cfg)
    bad = write(tmp_path, "seed: 1\nusers: [unclosed\n", "bad.yaml")
    with pytest.raises(ConfigError, match=r"bad\.yaml:\d+: not valid YAML"):
        load_config(bad)
    with pytest.raises(ConfigError, match="config file not found"):
        load_config(tmp_path / "absent.yaml")
    with pytest.raises(ConfigError, match="empty"):
        load_config(write(tmp_path, "", "empty.yaml"))


def test_overrides_and_relative_paths(tmp_path):
    (tmp_path / "q").write_text("1 0 d1 1\n")
    for r in "ab":
        (tmp_path / r).write_text("1 Q0 d1 1 1.0 x\n")
    cfg = load_config(
        write(tmp_path, {"collection": {"type": "trec", "qrels": "q", "runs": {"A": "a", "B": "b"}}}),
        {"replicates": 7, "traffic.days": 3},
    )
    assert cfg.replicates == 7 and cfg.traffic.days == 3
    assert cfg.collection.qrels == tmp_path / "q"


def test_cli_reports_config_errors_with_exit_code_2(tmp_path):
    cfg = write(tmp_path, {"users": {"click_model": {"name": "cascade", "click": [0.1, 0.2, 0.3, 0.4, 0.5],
                                                     "stop": [0.1, 0.2, 1.5, 0.2, 0.2]}}})
    result = CliRunner().invoke(app, ["simulate", "--config", str(cfg)])
    assert result.exit_code == 2
    assert "users.click_model.stop[2]" in result.output
    assert "Traceback" not in result.output


def test_effective_config_round_trips():
    for data in ({}, {"users": MIXTURE_USERS}):
        cfg = config_from_mapping(data)
        again = config_from_mapping(cfg.effective())
        assert again == cfg


MIXTURE_USERS = {
    "types": [
        {"name": "a", "share": 0.3, "click_model": {"name": "cascade", "preset": "perfect"}},
        {"name": "b", "share": 0.7, "click_model": {"name": "pbm", "preset": "ai2018"}},
    ]
}


def test_click_model_and_types_are_exclusive():
    with pytest.raises(ConfigError, match="either 'click_model' or 'types'"):
        config_from_mapping({"users": {**MIXTURE_USERS, "click_model": {"name": "cascade", "preset": "perfect"}}})
