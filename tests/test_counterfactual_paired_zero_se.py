"""A counterfactual checkpoint's paired difference with a standard error of 0: a tie (difference 0) keeps its
zero-width interval and p 1; any other difference measured no spread, so its SE, interval and p-value are
undefined, not certain (before: p 0, a rejection counted in power and in the truth rates), as ``onlineeval
estimate`` leaves them; the replicate counts as not rejecting and stays in the bias and RMSE."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from simulations.analysis_curves import curves
from simulations.designs.counterfactual.paired import PairedEstimate, paired_difference, paired_differences
from simulations.runner import Truth


def test_a_zero_se_is_a_tie_only_for_a_zero_difference() -> None:
    tie = PairedEstimate(0.0, 0.0, 0.05)
    assert (tie.estimate, tie.se, tie.ci_low, tie.ci_high, tie.pvalue) == (0.0, 0.0, 0.0, 0.0, 1.0)
    off = PairedEstimate(0.3, 0.0, 0.05)
    assert off.estimate == 0.3
    assert all(math.isnan(v) for v in (off.se, off.ci_low, off.ci_high, off.pvalue))
    # the logger's own metrics keep onlineeval.stats.ratio_mean's rule (tests/test_counterfactual_fastpaths.py)
    kept = PairedEstimate(0.3, 0.0, 0.05, zero_se_certain=True)
    assert (kept.se, kept.ci_low, kept.ci_high, kept.pvalue) == (0.0, 0.3, 0.3, 0.0)
    usual = PairedEstimate(0.3, 0.1, 0.05)
    assert usual.pvalue == pytest.approx(2 * stats.norm.sf(3.0), rel=1e-9)


def test_one_user_holding_each_sides_weight_gives_an_undefined_se() -> None:
    """Three users; A's whole weight on user 0 (ratio 1), B's on user 1 (ratio 2): every user's linearised term
    is 0 on both sides, so the paired SE is 0 while the difference is 1."""
    num_a, den_a = np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.0, 0.0])
    num_b, den_b = np.array([0.0, 2.0, 0.0]), np.array([0.0, 1.0, 0.0])
    one = paired_difference(num_a, den_a, num_b, den_b, 0.05)
    assert one.estimate == 1.0 and math.isnan(one.se) and math.isnan(one.pvalue)
    # the batch path row by row: the same, next to a row with spread
    rows = paired_differences(np.stack([num_a, [1.0, 2.0, 0.5]]), np.stack([den_a, [1.0, 1.0, 1.0]]),
                              np.stack([num_b, [2.0, 1.0, 3.0]]), np.stack([den_b, [1.0, 1.0, 1.0]]), 0.05)
    assert rows[0].estimate == 1.0 and math.isnan(rows[0].se) and math.isnan(rows[0].pvalue)
    assert rows[1].se > 0 and 0 < rows[1].pvalue < 1


def test_such_a_replicate_counts_as_not_rejecting_and_stays_in_the_bias() -> None:
    """Four replicates of one day: three rejecting with the truth inside their intervals, the fourth the
    undefined one (estimate 1.0, its SE and p NaN): power 3/4, undefined 1/4, coverage over the three defined,
    the mean estimate over all four."""
    est = [0.5, 0.6, 0.7, 1.0]
    records = []
    for r, e in enumerate(est):
        p = PairedEstimate(e, 0.1, 0.05) if r < 3 else PairedEstimate(e, 0.0, 0.05)
        records.append({"replicate": r, "design": "cf", "aa": False, "day": 1, "metric": "ips", "primary": True,
                        "estimate": p.estimate, "se": p.se, "ci_low": p.ci_low, "ci_high": p.ci_high,
                        "pvalue": p.pvalue, "n_users": 10, "n_impressions": 100})
    table = curves(pd.DataFrame(records), {("cf", "ips"): Truth("cf", "ips", 0.6, 0.0, "exact")}, 0.05)
    (row,) = table.to_dict("records")
    assert row["power"] == 0.75 and row["undefined"] == 0.25
    assert row["mean_estimate"] == pytest.approx(np.mean(est), rel=1e-12)
    assert row["mean_se"] == pytest.approx(0.1, rel=1e-12)  # over the replicates whose SE is defined
    assert row["coverage"] == 1.0  # the three defined intervals hold 0.6
