"""An off-policy estimator that is biased on the simulated world is marked in the report,
never shown with a bare power and sample size (issue 9's rule applied to every estimate)."""

from __future__ import annotations

from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.report import terminal_summary

CONFIG = {
    "seed": 5,
    "replicates": 40,
    "collection": {"n_queries": 60, "candidates": 8},
    "rankers": {"depth": 3, "A": {"noise": 1.0}, "B": {"noise": 0.6}},
    "users": {"population": 400, "click_model": {"name": "cascade", "preset": "navigational"}},
    "traffic": {"days": 2, "queries_per_day": 3000, "batch_hours": 24},
    "designs": [
        {"name": "ab", "type": "ab", "metric": "clicks_per_query"},
        {"name": "cf", "type": "counterfactual", "metric": "clicks_per_query",
         "logger": {"policy": "randtop", "ranker": "A", "n": 8}, "targets": ["A", "B"],
         "estimators": ["rips", "iips"]},
    ],
    "analysis": {"aa": False, "null": False, "truth_impressions": 20000},
}


def test_biased_estimator_is_marked_and_unbiased_one_is_not() -> None:
    result = simulate(config_from_mapping(CONFIG), workers=1)
    cf = result.summary["designs"]["cf"]
    iips, rips = cf["iips"], cf["rips"]
    # IIPS assumes independent clicks: cascade users break it, far beyond 4 SE
    assert abs(iips["estimator_bias"]) > 4 * iips["estimator_bias_se"]
    assert iips["biased_estimate"] is True
    # RIPS holds under the cascade: its replicates are within 4 SE of the exact truth
    assert abs(rips["estimator_bias"]) <= 4 * rips["estimator_bias_se"]
    assert rips["biased_estimate"] is False
    online = terminal_summary(result).split("Estimation error")[0]  # the main table
    rows = {name: next(line for line in online.splitlines() if f" {name} " in line) for name in ("iips", "rips")}
    assert "biased" in rows["iips"] and "biased" not in rows["rips"]
