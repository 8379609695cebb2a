"""A/B designs with ``metric: utility``: the offline metric's metric-user utility of the clicks (the clicks weighted by
its static C/W/L weights, as the counterfactual designs' ``utility``), carried as a fourth per-user sum through the
compiled batch step, the CUPED pre-period, ``test: welch`` and the exact truths.

Independent references: the rank weights against their closed forms; P@k's utility on k slots is exactly the clicks
per query / k (every sum, every replicate's estimate and the truth); the per-pattern table against the row-by-row
sum; the compiled step against the NumPy step, bit for bit; the estimates' mean within 4 SE of the exact truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onlineeval.errors import ConfigError
from simulations.config import config_from_mapping
from simulations.designs import ab


def _config(offline_metric: str = "nDCG@5", depth: int = 5, designs: list | None = None, replicates: int = 2,
            days: int = 2, seed: int = 3) -> object:
    return config_from_mapping({
        "seed": seed, "replicates": replicates, "workers": 1,
        "collection": {"type": "synthetic", "n_queries": 120, "candidates": max(12, depth + 2)},
        "rankers": {"depth": depth, "A": {"noise": 1.0}, "B": {"noise": 0.5}},
        "offline_metric": offline_metric,
        "users": {"population": 800, "types": [  # (the PBM preset has 10 ranks: an informational cascade beyond)
            {"name": "pbm", "share": 0.5, "click_model": {"name": "pbm", "preset": "ai2018"} if depth <= 10 else
             {"name": "cascade", "preset": "informational"}},
            {"name": "cascade", "share": 0.5, "click_model": {"name": "cascade", "preset": "navigational"}}]},
        "traffic": {"days": days, "queries_per_day": 1200, "batch_hours": 12},
        "designs": designs or [{"name": "ab_u", "type": "ab", "metric": "utility"}],
        "analysis": {"alpha": 0.05, "truth_impressions": 2000, "null": False, "aa": True},
    })


def _world(config):
    from simulations.runner import world_seed
    from simulations.world import build_world

    return build_world(config, world_seed(config.seed))


@pytest.mark.parametrize(("metric", "expected"), [
    ("nDCG@5", [1 / math.log2(r + 1) for r in range(1, 6)]),
    ("RBP(p=0.8)", [0.2 * 0.8 ** (r - 1) for r in range(1, 6)]),
    ("P@5", [1.0] * 5),
])
def test_rank_weights_are_the_metrics_closed_forms(metric, expected):
    """nDCG@5's discounts normalised to sum 1 (its C/W/L weights), RBP's (1 - p) p^(j-1), P@5's 1/5."""
    config = _config(metric)
    got = ab.utility_weights(_world(config), 5)
    want = np.asarray(expected) / (sum(expected) if metric != "RBP(p=0.8)" else 1.0)
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_the_pattern_table_equals_the_row_by_row_sum_bit_for_bit():
    rng = np.random.default_rng(4)
    for depth in (1, 5, 16):
        weights = rng.random(depth)
        table = ab.utility_patterns(weights)
        clicks = rng.random((3000, depth)) < 0.3
        pattern = (clicks.view(np.uint8) @ (2.0 ** np.arange(depth))).astype(np.intp)
        assert table[pattern].tobytes() == ab.utility_values(clicks, weights).tobytes()
        np.testing.assert_allclose(ab.utility_values(clicks, weights), clicks @ weights, rtol=1e-12, atol=1e-15)
    assert ab.utility_patterns(np.ones(17)) is None


def _reference_process(self, batch) -> None:
    """ABDesign._process's NumPy step (the compiled step switched off)."""
    self._kernel = (None,)
    type(self)._process(self, batch)


@pytest.mark.parametrize(("depth", "test"), [(5, "delta"), (17, "delta"), (5, "delta_t"), (17, "delta_t")])
def test_the_compiled_step_equals_the_numpy_step_with_the_utility(depth, test):
    """Per-user sums (the utility's among them), draws and checkpoint rows equal bit for bit (17 ranks: both the
    NumPy step, which adds the row-by-row utilities); with test: delta_t the three rows of squares too (clicks,
    reciprocal ranks, utilities)."""
    from tests.test_simulation_point_speed3 import ab_designs_both_ways

    design = {"name": "ab_u", "type": "ab", "metric": "utility", "test": test}
    if test == "delta":
        design["analysis"] = {"cuped": {"pre_days": 1}}  # (refused with delta_t)
    config = _config("RBP(p=0.8)", depth, [design])
    runs = ab_designs_both_ways(config, _reference_process)
    for new, ref in zip(*runs, strict=True):
        assert list(new.sums) == ["impressions", "clicks", "abandoned", "rr", "utility"]
        assert (new._kernel_inputs() is None) == (depth > 16) and ref._kernel_inputs() is None
        for key in ref.sums:
            assert new.sums[key].tobytes() == ref.sums[key].tobytes(), key
        assert new.rng.bit_generator.state == ref.rng.bit_generator.state
        assert [repr(r) for r in new.rows] == [repr(r) for r in ref.rows]
        assert new.sums["utility"].sum() > 0 and new.metric_names() == ["utility", "clicks_per_query",
                                                                        "abandonment", "reciprocal_rank"]
        assert any(r.metric == "cuped:utility" for r in new.rows) == (test == "delta")
        assert new._square_rows.tobytes() == ref._square_rows.tobytes()
        assert new._square_rows.shape == ((3, new.population) if test == "delta_t" else (0, 0))
        if test == "delta_t":
            assert list(new.squares) == ["clicks", "rr", "utility"] and new.squares["utility"].sum() > 0


def test_precision_at_k_utility_is_exactly_clicks_per_query_over_k():
    """P@5 on 5 slots weighs every rank 1/5: every replicate's utility estimate (delta, welch, with CUPED) is its
    clicks-per-query estimate / 5, and so is the exact truth."""
    from simulations.job import simulate

    designs = [{"name": "d", "type": "ab", "metric": "utility"},
               {"name": "w", "type": "ab", "metric": "utility", "test": "welch"},
               {"name": "c", "type": "ab", "metric": "utility", "analysis": {"cuped": {"pre_days": 2}}}]
    result = simulate(_config("P@5", 5, designs, replicates=3))
    truth = {(t.design, t.metric): t for t in result.truths}
    rows = result.rows
    for name in ("d", "w", "c"):
        assert truth[(name, "utility")].value == pytest.approx(truth[(name, "clicks_per_query")].value / 5, rel=1e-12)
        for prefix in ("", "cuped:") if name == "c" else ("",):
            order = ["replicate", "aa", "day"]
            u = rows[(rows.design == name) & (rows.metric == prefix + "utility")].sort_values(order)
            c = rows[(rows.design == name) & (rows.metric == prefix + "clicks_per_query")].sort_values(order)
            assert len(u) == len(c) > 0
            np.testing.assert_allclose(u.estimate.to_numpy(), c.estimate.to_numpy() / 5, rtol=1e-9, atol=1e-15)
            np.testing.assert_allclose(u.se.to_numpy(), c.se.to_numpy() / 5, rtol=1e-9)
    assert (truth[("d", "clicks_per_query")].value != 0) and "utility" not in {
        t.metric for t in result.truths if t.design not in ("d", "w", "c")}


def test_the_estimates_mean_is_within_4_se_of_the_exact_truth():
    """nDCG@5's utility on a PBM + cascade population: 60 replicates' last-day estimates (delta and welch) against
    the exact truths (click probabilities times the rank weights; welch: per-user means), and the A/A variant's
    (B replaced by A) against 0: unbiased under the null too, not only calibrated."""
    from simulations.job import simulate

    designs = [{"name": "d", "type": "ab", "metric": "utility"},
               {"name": "w", "type": "ab", "metric": "utility", "test": "welch"}]
    result = simulate(_config("nDCG@5", 5, designs, replicates=60, days=1, seed=11))
    truth = {(t.design, t.metric): t.value for t in result.truths}
    rows = result.rows
    for name in ("d", "w"):
        est = rows[(rows.design == name) & (rows.metric == "utility") & ~rows.aa].estimate.to_numpy()
        assert est.size == 60
        se = est.std(ddof=1) / math.sqrt(est.size)
        assert abs(est.mean() - truth[(name, "utility")]) < 4 * se, (name, est.mean(), truth[(name, "utility")], se)
        assert truth[(name, "utility")] > 4 * se  # a true effect the test can tell from 0
        null = rows[(rows.design == name) & (rows.metric == "utility") & rows.aa].estimate.to_numpy()
        assert null.size == 60 and abs(null.mean()) < 4 * null.std(ddof=1) / math.sqrt(null.size)  # A/A: no bias
    summary = result.summary
    assert summary["utility"]["designs"] == ["d", "w"] and summary["utility"]["offline_metric"] == "nDCG@5"
    np.testing.assert_allclose(summary["utility"]["rank_weights"], ab.utility_weights(result.world, 5), rtol=1e-15)
    assert summary["designs"]["d"]["utility"]["primary"]
    assert set(summary["truth_by_segment"]["head"]) == {"clicks_per_query", "abandonment", "reciprocal_rank",
                                                       "utility"}
    from simulations.report import conventions, terminal_summary

    text = " ".join(terminal_summary(result).split())
    assert "utility (d, w): per query sum_j w_j c_j: the clicks c_j weighted by nDCG@5's static C/W/L weights" in text
    assert "online utility" in text  # the segments' exact online effect
    assert "nDCG@5's static C/W/L weights" in conventions(result)["ab_effect"]["w"]


def test_the_pre_period_keeps_its_draws_and_sums_with_the_utility():
    """The CUPED pre-period with the utility row: the other rows and the generator as without it; the row itself
    the row-by-row utilities' per-user sums (P@5: the clicks / 5)."""
    from simulations.cuped import pre_block, simulate_pre_period
    from simulations.runner import build_replicate, replicate_seeds
    from simulations.users import UserModels

    config = _config("P@5", 5)
    world = _world(config)
    users = UserModels.from_config(config.users)
    traffic, _ = build_replicate(config, world, users, replicate_seeds(config.seed, 1)[0])
    plain, rng_plain = simulate_pre_period(traffic, world, users, 2, rng := np.random.default_rng(8)), rng
    with_u, rng_u = simulate_pre_period(traffic, world, users, 2, rng2 := np.random.default_rng(8), True), rng2
    assert rng_plain.bit_generator.state == rng_u.bit_generator.state
    for key in plain.sums:
        assert plain.sums[key].tobytes() == with_u.sums[key].tobytes()
    np.testing.assert_allclose(with_u.sums["utility"], with_u.sums["clicks"] / 5, rtol=1e-12)
    assert pre_block(with_u).shape[0] == 4
    assert pre_block(with_u, (*ab.ABDesign.accumulators, "utility")) is with_u.block


def test_utility_is_refused_where_it_does_not_apply():
    with pytest.raises(ConfigError, match="applies to A/B and counterfactual designs"):
        _config(designs=[{"name": "td", "type": "interleaving", "method": "team_draft", "metric": "utility"}])
    with pytest.raises(ConfigError) as exc:
        _config("RR", designs=[{"name": "ab", "type": "ab", "metric": "utility"}])
    assert exc.value.key_path == ("designs", 0, "metric") and "utility (of offline_metric RR)" in exc.value.message
