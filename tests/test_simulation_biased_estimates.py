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
    # no analytic power, days, impressions or users computed as if IIPS were unbiased (review 1.7): '-' and
    # 'biased' in the main table and the estimation-error table, null in summary.json with the values kept
    # apart under analytic_if_unbiased
    analytic, days, impr, users = rows["iips"].split()[-6:-2]  # then A/A FPR and null Delta
    assert (analytic, days, impr, users) == ("-", "-", "biased", "-")
    assert "biased" not in rows["rips"] and f"{rips['analytic_required_impressions']:,.0f}" in rows["rips"]
    assert iips["analytic_required_impressions"] is None and iips["final_day"]["analytic_power"] is None
    assert iips["analytic_if_unbiased"]["analytic_required_impressions"] > 0
    assert iips["analytic_if_unbiased"]["analytic_power"] > 0 and "biased" in iips["analytic_withheld"]
    assert rips["analytic_required_impressions"] > 0 and "analytic_if_unbiased" not in rips
    errors = terminal_summary(result).split("Estimation error")[1].split("\n\n")[0]
    err = {name: next(line for line in errors.splitlines() if f" {name} " in line) for name in ("iips", "rips")}
    assert err["iips"].split()[-1] == "biased" and err["rips"].split()[-1][0].isdigit()
