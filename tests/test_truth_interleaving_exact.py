"""The exact truth of two-ranker team-draft and balanced interleaving designs
(:mod:`simulations.truth_interleaving_exact`).

References: every click pattern of every table row enumerated, each with its probability from the click model's
own likelihood (:meth:`clickmodels.base.ClickModel.log_likelihood`) and its outcome from the design's tested outcome
(:meth:`simulations.designs.interleaving.DrawTable.outcome`), for chain and independent-click models, on synthetic
lists and on TREC runs whose short lists leave slots empty; and the Monte Carlo truth (within 4 of its SEs)."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from simulations.config import config_from_mapping
from simulations.designs.interleaving import draw_table, shared_interleaver
from simulations.runner import compute_truth, monte_carlo_truths, world_seed
from simulations.truth_interleaving import interleaving_truth
from simulations.truth_interleaving_exact import (
    EXACT_METHOD,
    _row_parts,
    exact_interleaving_parts,
    exact_interleaving_per_query,
    exact_interleaving_truth,
)
from simulations.truth_null_exact import EXACT_NULL_METHOD
from simulations.user_tables import chain_tables
from simulations.users import UserModels
from simulations.world import build_world
from tests.test_truth_table_draw import TYPES, _mapping, _trec_mapping

MORE = {
    "dcm": {"name": "dcm", "click": [0.1, 0.3, 0.5, 0.7, 0.9],
            "continuation": [0.6, 0.65, 0.7, 0.75, 0.8, 0.8, 0.85, 0.85, 0.9, 0.9]},
    "ccm": {"name": "ccm", "click": [0.1, 0.3, 0.5, 0.7, 0.9], "tau1": 0.85, "tau2": 0.7, "tau3": 0.3},
    "sdbn": {"name": "sdbn", "click": [0.1, 0.3, 0.5, 0.7, 0.9], "satisfaction": [0.05, 0.2, 0.4, 0.6, 0.8]},
    "rctr": {"name": "rctr", "p": [0.4, 0.2, 0.12, 0.08, 0.06, 0.05, 0.04, 0.03, 0.03, 0.02]},
    "rbp": {"name": "rbp", "p": 0.8, "click": [0.05, 0.3, 0.5, 0.7, 0.95]},
    "metric_rbp": {"name": "metric", "metric": "RBP(p=0.7)", "click": [0.1, 0.3, 0.5, 0.7, 0.9]},
    "gctr": {"name": "gctr", "p": 0.12},
    "random": {"name": "random", "p": 0.5},
    "rbp6": {"name": "rbp", "p": 0.8, "click": [0.05, 0.2, 0.4, 0.6, 0.8, 0.95]},  # six grades beside five
    "metric_inst": {"name": "metric", "metric": "INST(T=2)", "click": [0.1, 0.3, 0.5, 0.7, 0.9]},
    "metric_rr": {"name": "metric", "metric": "RR", "click": [0.1, 0.3, 0.5, 0.7, 0.9]},
    "metric_err": {"name": "metric", "metric": "ERR", "click": [0.1, 0.3, 0.5, 0.7, 0.9]},
    "ubm": {"name": "ubm", "click": [0.1, 0.3, 0.5, 0.7, 0.9],
            "examination": [[0.95], [0.7, 0.9], [0.5, 0.6, 0.85], [0.4, 0.45, 0.6, 0.8], [0.3, 0.35, 0.4, 0.6, 0.8],
                            [0.25, 0.3, 0.35, 0.4, 0.55, 0.75]]},
}


def _world(mapping: dict):  # noqa: ANN202
    config = config_from_mapping(mapping)
    return config, build_world(config, world_seed(config.seed)), UserModels.from_config(config.users)


def typed_world(method: str, types: tuple[str, ...], depth: int, n_queries: int):  # noqa: ANN201
    """A synthetic world of ``n_queries`` at ``depth`` whose users are a mixture of the click models ``types`` (of
    TYPES and MORE), shares 1 : 2 : ... ."""
    mapping = _mapping(method, ("nav",), depth=depth)
    mapping["collection"]["n_queries"] = n_queries
    specs = {**TYPES, **MORE}
    mapping["users"]["types"] = [{"name": t, "share": (i + 1) / sum(range(1, len(types) + 1)),
                                  "click_model": specs[t]} for i, t in enumerate(types)]
    return _world(mapping)


def _enumerated(table, users: UserModels) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """Per table row, the share-weighted E[outcome] and P(a click), by enumerating the 2^k click patterns."""
    rows, k = table.grades.shape
    patterns = ((np.arange(2**k)[:, None] >> np.arange(k)) & 1).astype(bool)
    n_pat = patterns.shape[0]
    key = np.repeat(np.arange(rows), n_pat)
    clicks = np.tile(patterns, (rows, 1))
    labels = table.grades.astype(np.int64)[key]
    outcome = table.outcome(key, clicks).astype(np.float64)
    e = np.zeros(rows)
    p_click = np.zeros(rows)
    possible = ~(clicks & (labels < 0)).any(axis=1)  # no click in an empty slot (the models refuse such patterns)
    for share, model in zip(users.shares, users.models, strict=True):
        prob = np.zeros(rows * n_pat)
        prob[possible] = np.exp(model.log_likelihood(labels[possible], clicks[possible]))
        prob = prob.reshape(rows, n_pat)
        assert np.allclose(prob.sum(axis=1), 1.0, atol=1e-12)
        e += share * (prob * outcome.reshape(rows, n_pat)).sum(axis=1)
        p_click += share * (1.0 - prob[:, 0])  # pattern 0: no click
    return e, p_click


def _programmes(table, users: UserModels) -> tuple[np.ndarray, np.ndarray]:  # noqa: ANN001
    """Per table row, the programmes' share-weighted E[outcome] and P(a click) (the module's own row blocks)."""
    num, p_click = _row_parts(table, chain_tables(users, table.length), users.shares, 0, table.grades.shape[0])
    return 2.0 * num, p_click


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
@pytest.mark.parametrize("types", [("nav", "inf"), ("pbm", "dbn"), ("dcm", "ccm", "sdbn", "rctr"),
                                   ("rbp", "metric_rbp", "gctr", "random"), ("ubm",), ("ubm", "nav", "pbm"),
                                   ("metric_inst", "metric_rr", "metric_err"), ("metric_inst", "ubm"),
                                   ("rbp6", "nav", "ubm")])
def test_each_rows_outcome_and_click_probability_are_the_enumerations(method: str, types: tuple[str, ...]) -> None:
    config, world, users = typed_world(method, types, 6, 40)
    table = draw_table(shared_interleaver(method, {}), [world.rankings["A"], world.rankings["B"]], world.labels,
                       world.depth)
    want_e, want_p = _enumerated(table, users)
    got_e, got_p = _programmes(table, users)
    assert np.abs(want_e).max() > 0.05  # outcomes that are not all ties
    np.testing.assert_allclose(got_e, want_e, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got_p, want_p, rtol=0, atol=1e-13)


def trec_world(tmp_path: Path, method: str, second: str = "pbm"):  # noqa: ANN201
    """``(config, world, users, table)`` of TREC runs whose short lists leave some of the table's slots empty (the
    second user type ``second``: a PBM, or one of MORE's models on three grades)."""
    mapping = _trec_mapping(tmp_path, method)
    if second != "pbm":
        mapping["users"]["types"][1]["click_model"] = {**MORE[second], "click": [0.1, 0.5, 0.9]}
    config, world, users = _world(mapping)
    table = draw_table(shared_interleaver(method, {}), [world.rankings["A"], world.rankings["B"]], world.labels,
                       world.depth)
    assert table.valid is not None and not table.valid.all()
    return config, world, users, table


@pytest.mark.parametrize("second", ["pbm", "ubm", "metric_inst", "metric_err"])
@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_rows_with_empty_slots_are_the_enumerations(method: str, second: str, tmp_path: Path) -> None:
    config, world, users, table = trec_world(tmp_path, method, second)
    want_e, want_p = _enumerated(table, users)
    got_e, got_p = _programmes(table, users)
    np.testing.assert_allclose(got_e, want_e, rtol=0, atol=1e-13)
    np.testing.assert_allclose(got_p, want_p, rtol=0, atol=1e-13)
    # and the design's truth from them: query frequencies, coin patterns, identical lists at 0
    num_q, den_q = exact_interleaving_parts(config, config.designs[0], world, users)
    e_q = want_e.reshape(-1, table.combos).mean(axis=1) / 2
    same = (world.rankings["A"] == world.rankings["B"]).all(axis=1)
    np.testing.assert_allclose(num_q, np.where(same, 0.0, e_q), rtol=0, atol=1e-13)
    np.testing.assert_allclose(den_q, want_p.reshape(-1, table.combos).mean(axis=1), rtol=0, atol=1e-13)


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_the_exact_truth_is_within_4_monte_carlo_ses(method: str) -> None:
    mapping = _mapping(method, ("nav", "pbm", "dbn"))
    mapping["analysis"]["truth_impressions"] = 2_000_000
    config, world, users = _world(mapping)
    (exact,) = exact_interleaving_truth(config, config.designs[0], world, users)
    (mc,) = interleaving_truth(config, config.designs[0], world, users, False)
    assert exact.se == 0.0 and exact.method == EXACT_METHOD and exact.metric == mc.metric
    assert abs(exact.value) > 10 * mc.se  # a preference, not a tie
    assert abs(mc.value - exact.value) < 4 * mc.se, (mc.value, exact.value, mc.se)
    # a planted error the Monte Carlo sees: the outcome's expectation 5% off
    assert abs(mc.value - 1.05 * exact.value) > 4 * mc.se


def test_compute_truth_takes_the_exact_preference_and_null_delta() -> None:
    mapping = _mapping("team_draft", ("nav", "inf"), depth=6)
    mapping["designs"].append({"name": "pi", "type": "interleaving", "method": "probabilistic"})
    mapping["analysis"]["truth_impressions"] = 20_000
    config, world, users = _world(mapping)
    truths = {(t.design, t.metric): t for t in compute_truth(config, world, users)}
    assert truths[("il", "delta_ab")].method == EXACT_METHOD and truths[("il", "delta_ab")].se == 0.0
    assert truths[("il", "null:delta_ab")].method == EXACT_NULL_METHOD and truths[("il", "null:delta_ab")].se == 0.0
    assert truths[("pi", "null:delta_ab")].method.startswith("monte_carlo")
    assert truths[("pi", "delta_ab")].method.startswith("monte_carlo")  # probabilistic: no draw table
    assert len(monte_carlo_truths(config)) == 4  # the runs the config could need; the exact one is not run
    per_query = exact_interleaving_per_query(config, config.designs[0], world, users)
    f = world.frequency / world.frequency.sum()
    assert float(f @ per_query) == pytest.approx(truths[("il", "delta_ab")].value, rel=1e-12)


@pytest.mark.parametrize("case", ["no_grades", "three_rankers", "no_prefix_credit"])
def test_designs_the_programme_does_not_cover_keep_the_monte_carlo(case: str) -> None:
    """(UBM users and metric users of adaptive metrics, not covered before, are: tests/test_truth_ubm_metric_exact.py
    and the enumerations above.)"""
    mapping = _mapping("team_draft", ("nav", "inf"), depth=6)
    if case == "no_grades":  # only models without grade tables (no grade width to lay a table out on)
        mapping["users"]["types"] = [{"name": "g", "share": 1.0, "click_model": MORE["gctr"]}]
    elif case == "three_rankers":
        mapping["rankers"]["others"] = {"C": {"noise": 0.5}}
        mapping["designs"][0]["rankers"] = ["A", "B", "C"]
    else:
        mapping["designs"][0]["options"] = {"prefix_credit": False}
    config, world, users = _world(mapping)
    assert exact_interleaving_truth(config, config.designs[0], world, users) is None


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_identical_lists_give_exactly_zero(method: str) -> None:
    """B's lists are A's: the programme's coin patterns cancel to exactly 0 (mirrored sums) and the truth sets 0 on
    such queries as the Monte Carlo does."""
    mapping = _mapping(method, ("nav", "pbm"), depth=6)
    mapping["rankers"]["B"] = {"noise": 1.0}
    mapping["rankers"]["noise_correlation"] = 1.0  # B's noise is A's: the same lists
    config, world, users = _world(mapping)
    assert (world.rankings["A"] == world.rankings["B"]).all()
    (t,) = exact_interleaving_truth(config, config.designs[0], world, users)
    assert t.value == 0.0 and t.se == 0.0 and not math.isnan(t.value)


def test_the_summary_gives_an_exact_truth_its_se_over_worlds_and_a_monte_carlo_one_the_note(tmp_path: Path) -> None:
    from simulations.analysis import MONTE_CARLO_WORLD_NOTE
    from simulations.job import simulate
    from simulations.world import world_sampling

    mapping = _mapping("team_draft", ("nav", "pbm"), depth=6)
    mapping["designs"].append({"name": "pi", "type": "interleaving", "method": "probabilistic"})
    mapping.update(replicates=2, workers=1)
    mapping["analysis"].update(truth_impressions=20_000, aa=False, null=False)
    config = config_from_mapping(mapping)
    result = simulate(config, output=tmp_path / "out", workers=1)
    td, pi = result.summary["designs"]["il"]["delta_ab"], result.summary["designs"]["pi"]["delta_ab"]
    assert td["truth_method"] == EXACT_METHOD and td["true_effect_se"] == 0.0 and "true_effect_world_note" not in td
    values = exact_interleaving_per_query(config, config.designs[0], result.world, UserModels.from_config(
        config.users))
    assert td["true_effect_world_se"] == pytest.approx(world_sampling(result.world.frequency, values)[1], rel=1e-12)
    assert pi["true_effect_se"] > 0 and pi["true_effect_world_se"] is None
    assert pi["true_effect_world_note"] == MONTE_CARLO_WORLD_NOTE
    assert "truth_precision" in pi and "truth_precision" not in td


@pytest.mark.parametrize("method", ["team_draft", "balanced"])
def test_the_parts_do_not_depend_on_the_row_blocks(method: str, tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    import simulations.truth_interleaving_exact as tie

    config, world, users = _world(_trec_mapping(tmp_path, method))  # empty slots: the valid masks' blocks too
    whole = tie.exact_interleaving_parts(config, config.designs[0], world, users)
    monkeypatch.setattr(tie, "CHUNK_ROWS", 7)  # blocks that split queries and end short
    monkeypatch.setattr(tie, "_PARTS", {})  # computed again, not the first call's parts
    split = tie.exact_interleaving_parts(config, config.designs[0], world, users)
    # the same to rounding (the programmes' last sums are matrix products, whose blocking follows the rows)
    np.testing.assert_allclose(split[0], whole[0], rtol=0, atol=1e-15)
    np.testing.assert_allclose(split[1], whole[1], rtol=0, atol=1e-15)
    assert np.abs(whole[0]).max() > 0.01


def test_the_parts_are_computed_once_per_table_and_click_tables(monkeypatch: pytest.MonkeyPatch) -> None:
    """The truth and the analysis's SE over worlds (a new UserModels of the same config) share one computation;
    other shares or other models compute again."""
    import simulations.truth_interleaving_exact as tie

    mapping = _mapping("team_draft", ("nav", "pbm"), depth=6)
    config, world, users = _world(mapping)
    calls: list[int] = []
    row_parts = tie._row_parts
    monkeypatch.setattr(tie, "_row_parts", lambda *a: calls.append(1) or row_parts(*a))
    first = tie.exact_interleaving_parts(config, config.designs[0], world, users)
    n = len(calls)
    assert n > 0
    again = tie.exact_interleaving_parts(config, config.designs[0], world, UserModels.from_config(config.users))
    assert len(calls) == n and again[0] is first[0]
    with pytest.raises(ValueError):
        first[0][0] = 1.0  # shared: read-only
    mapping["users"]["types"][0]["share"] = 0.3
    mapping["users"]["types"][1]["share"] = 0.7
    other = config_from_mapping(mapping)
    moved = tie.exact_interleaving_parts(other, other.designs[0], world, UserModels.from_config(other.users))
    assert len(calls) == 2 * n and not np.array_equal(moved[0], first[0])
