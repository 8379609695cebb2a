"""Review 11, F2: a counterfactual design's entries are named by estimator, so the online metric's improvement sign
(abandonment: lower is better) must come from the design's metric, not from the entry's name.

One small run of an A/B test and a counterfactual design of the same pair on abandonment: the two estimate the same
B - A, so their online improvement, the shrinkage against the offline gain and the sweep study's sign agree; before
the fix the counterfactual design's shrinkage had the opposite sign (-0.953 against the A/B test's +0.953).
"""

from __future__ import annotations

import math

import pytest

from test_simulation_counterfactual import CASCADE, LOGGER, PBM



@pytest.fixture(scope="module")
def result():
    from simulations import simulate
    from simulations.config import config_from_mapping

    config = config_from_mapping({
        "seed": 5, "replicates": 3, "workers": 1,
        "collection": {"n_queries": 120, "candidates": 12},
        "rankers": {"depth": 5, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.3}},
        "offline_metric": "nDCG@5",
        "users": {"population": 1000, "types": [{"name": "pbm", "share": 0.5, "click_model": PBM},
                                                 {"name": "nav", "share": 0.5, "click_model": CASCADE}]},
        "traffic": {"days": 2, "queries_per_day": 2000, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "abandonment"},
                    {"name": "cf", "type": "counterfactual", "metric": "abandonment", "logger": LOGGER,
                     "estimators": ["snips", "rips"]}],
        "analysis": {"aa": False, "truth_impressions": 10_000},
    })
    return simulate(config)


def test_the_counterfactual_entries_take_their_designs_metric_sign(result):
    from simulations.analysis import improvement_sign

    s = result.summary
    ab = s["designs"]["ab"]["abandonment"]
    assert ab["improvement_sign"] == -1 and improvement_sign(s, "ab", "abandonment") == -1
    for est in ("snips", "rips"):
        e = s["designs"]["cf"][est]
        assert e["improvement_sign"] == -1 and improvement_sign(s, "cf", est) == -1
        # the same exact B - A as the A/B test's, so the same shrinkage (sign and value)
        assert e["true_effect"] == pytest.approx(ab["true_effect"], rel=1e-9)
        assert e["shrinkage_vs_offline"] == pytest.approx(ab["shrinkage_vs_offline"], rel=1e-9)
        assert math.copysign(1, e["shrinkage_vs_offline"]) == math.copysign(1, ab["shrinkage_vs_offline"])


def test_a_summary_without_the_key_takes_the_designs_metric():
    """A summary written before the key: the counterfactual section's metric decides."""
    from simulations.analysis import improvement_sign

    old = {"designs": {"cf": {"snips": {"metric": "snips"}}, "ab": {"abandonment": {"metric": "abandonment"}}},
           "counterfactual": {"cf": {"metric": "abandonment"}}}
    assert improvement_sign(old, "cf", "snips") == -1 and improvement_sign(old, "ab", "abandonment") == -1
    old["counterfactual"]["cf"]["metric"] = "clicks_per_query"
    assert improvement_sign(old, "cf", "snips") == 1
