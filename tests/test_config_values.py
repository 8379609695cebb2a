"""Config values that used to be silently coerced or exhaust the machine: each is one
ConfigError naming the key path (and, for memory, the estimate)."""

from __future__ import annotations

from pathlib import Path

import pytest

from onlineeval.errors import ConfigError, InputError
from simulations.config import config_from_mapping, load_config
from simulations.resources import check_memory, estimate_memory


@pytest.mark.parametrize(
    ("data", "key", "fragment"),
    [
        ({"replicates": True}, "replicates", "must be an integer, got True"),
        ({"replicates": 2.5}, "replicates", "must be an integer, got 2.5"),
        ({"traffic": {"diurnal": [float("inf")] + [1.0] * 23}}, "traffic.diurnal[0]", "finite"),
        ({"traffic": {"weekly": [1e308] * 7}}, "traffic.weekly[0]", "must be at most"),
        ({"traffic": {"queries_per_day": 1e308}}, "traffic.queries_per_day", "must be an integer"),
        ({"rankers": {"A": {"noise": float("inf")}}}, "rankers.A.noise", "finite"),
        ({"rankers": {"B": {"noise": float("nan")}}}, "rankers.B.noise", "finite"),
        ({"designs": [{"name": "x", "type": "ab"}, {"name": "x", "type": "ab"}]}, "designs[1].name",
         r"already the name of designs\[0\]"),
    ],
)
def test_values_are_refused_with_their_key_path(data: dict, key: str, fragment: str) -> None:
    with pytest.raises(ConfigError, match=fragment) as info:
        config_from_mapping(data)
    assert str(info.value).startswith(key + ":")


@pytest.mark.parametrize(
    ("data", "key"),
    [({"users": {"population": 10**13}}, "users.population"), ({"collection": {"n_queries": 10**10}},
                                                                "collection.n_queries")],
)
def test_configs_that_cannot_fit_are_refused_before_allocating(data: dict, key: str) -> None:
    with pytest.raises(ConfigError, match="this config needs about .* of memory") as info:
        config_from_mapping(data)
    assert str(info.value).startswith(key + ":")


def test_memory_estimate_is_the_right_order_for_the_bundled_config() -> None:
    """The estimate is meant to be within a small factor: on configs/ab.yaml the world,
    users and batches take tens of MiB, not GiB or KiB."""
    est = estimate_memory(load_config(Path(__file__).parents[1] / "configs" / "ab.yaml"), workers=2)
    assert 10 * 2**20 < est.total < 2**30
    # scaling: ten times the queries is ten times the collection part
    cfg = load_config(Path(__file__).parents[1] / "configs" / "ab.yaml")
    big = config_from_mapping({**cfg.effective(), "collection": {**cfg.effective()["collection"], "n_queries": 30000}})
    ratio = estimate_memory(big, 2).parts["collection.n_queries"] / est.parts["collection.n_queries"]
    assert ratio == pytest.approx(10.0)
    with pytest.raises(ConfigError, match="more than the 1 MiB available"):
        check_memory(cfg, available=2**20)


def test_trec_grade_above_int8_is_refused(tmp_path: Path) -> None:
    (tmp_path / "q").write_text("1 0 d1 300\n1 0 d2 0\n")
    (tmp_path / "a").write_text("1 Q0 d1 1 2.0 a\n1 Q0 d2 2 1.0 a\n")
    (tmp_path / "b").write_text("1 Q0 d2 1 2.0 b\n1 Q0 d1 2 1.0 b\n")
    cfg = config_from_mapping({"collection": {"type": "trec", "qrels": str(tmp_path / "q"),
                                              "runs": {"A": str(tmp_path / "a"), "B": str(tmp_path / "b")}},
                               "rankers": {"depth": 2}})
    from simulations.runner import world_seed
    from simulations.world import build_world

    with pytest.raises(InputError, match="grade 300 .* above 127"):
        build_world(cfg, world_seed(0))


def test_output_under_a_plain_file_is_a_clear_error(tmp_path: Path) -> None:
    from simulations.job import simulate

    (tmp_path / "plain").write_text("x")
    cfg = config_from_mapping({"replicates": 1, "collection": {"n_queries": 20, "candidates": 12},
                               "users": {"population": 50}, "traffic": {"days": 1, "queries_per_day": 100}})
    from onlineeval.errors import OnlineEvalError

    with pytest.raises(OnlineEvalError, match="plain") as info:
        simulate(cfg, tmp_path / "plain" / "sub", workers=1)
    assert "Traceback" not in str(info.value)
