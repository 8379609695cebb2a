"""The coverage flag of the estimation-error table: a day's interval coverage against the exact 99% binomial band
of a valid (1 - alpha) interval's over the replicates with a defined interval (scipy's binomial quantiles as the
reference), in summary.json and as '!' in the terminal table."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from simulations.analysis import _coverage_band
from simulations.report import _coverage_cell


@pytest.mark.parametrize(("replicates", "undefined", "alpha"), [(200, 0.0, 0.05), (200, 0.1, 0.05), (37, 0.0, 0.1),
                                                                 (1000, 0.25, 0.01)])
def test_coverage_band_is_the_binomial_band_over_defined_intervals(replicates, undefined, alpha):
    last = pd.Series({"replicates": replicates, "undefined": undefined, "coverage": 0.9})
    band = _coverage_band(last, alpha)
    n = round(replicates * (1 - undefined))
    lo, hi = binom.interval(0.99, n, 1 - alpha)
    assert (band.n, band.lo, band.hi) == (n, int(lo), int(hi))
    assert band.lo_rate == pytest.approx(lo / n) and band.hi_rate == pytest.approx(hi / n)


def test_coverage_band_of_a_monte_carlo_truth_widens_its_lower_end():
    """A truth with its own Monte Carlo error (interleaving's): the band's lower end is the binomial quantile at the
    coverage a valid interval of the replicates' SD has when the truth is off by z_0.995 of its SE (scipy's normal
    distribution of the estimates as the reference), the upper end the plain band's; truth SE 0 gives the plain
    band."""
    from scipy.stats import norm

    last = pd.Series({"replicates": 400, "undefined": 0.0, "coverage": 0.87, "sd_estimate": 0.003})
    plain = _coverage_band(last, 0.05)
    assert _coverage_band(last, 0.05, 0.0) == plain
    band = _coverage_band(last, 0.05, 0.0011)
    off = norm.ppf(0.995) * 0.0011
    half = norm.ppf(0.975) * 0.003
    low = norm(off, 0.003).cdf(half) - norm(off, 0.003).cdf(-half)  # P(|estimate - truth| <= z sd)
    assert band.lo == int(binom.interval(0.99, 400, low)[0]) < plain.lo
    assert band.hi == plain.hi
    assert band.lo_rate <= 0.87 < plain.lo_rate  # seed 11's team-draft coverage: in the widened band only


def test_monte_carlo_truth_band_flags_valid_intervals_rarely():
    """Valid 95% intervals (estimates N(theta, sd^2), SE exactly sd) judged against a Monte Carlo truth whose error
    is 37% of sd (configs/counterfactual.yaml's team-draft): over 4,000 simulated runs of 400 replicates the widened
    band flags at most its stated ~1.5% (+ 4 binomial SE), the plain band about 18% (a correct design called
    under-covering)."""
    rng = np.random.default_rng(20261203)
    runs, reps, sd, truth_se = 4000, 400, 1.0, 0.37
    z = 1.959963984540054
    est = rng.normal(0.0, sd, size=(runs, reps))
    truth = rng.normal(0.0, truth_se, size=(runs, 1))
    coverage = (np.abs(est - truth) <= z * sd).mean(axis=1)
    last = pd.Series({"replicates": reps, "undefined": 0.0, "coverage": 0.9, "sd_estimate": sd})
    widened, plain = _coverage_band(last, 0.05, truth_se), _coverage_band(last, 0.05)
    low_widened = float(np.mean(coverage < widened.lo_rate))
    low_plain = float(np.mean(coverage < plain.lo_rate))
    bound = 0.015
    assert low_widened <= bound + 4 * math.sqrt(bound * (1 - bound) / runs), low_widened
    assert low_plain > 0.10, low_plain


def test_coverage_band_without_defined_intervals_is_none():
    assert _coverage_band(pd.Series({"replicates": 50, "undefined": 1.0, "coverage": math.nan}), 0.05) is None
    assert _coverage_band(pd.Series({"replicates": 50, "undefined": 0.0, "coverage": math.nan}), 0.05) is None


def test_coverage_cell_flags_only_outside_the_band():
    assert _coverage_cell(0.84, False) == "0.840!"  # a rate over replicates: 3 decimals (report.rate_text)
    assert _coverage_cell(0.94, True) == "0.940"
    assert _coverage_cell(0.9449, None) == "0.945"
    assert _coverage_cell(math.nan, None) == _coverage_cell(math.nan, True)  # no flag without a band


def test_summary_flags_follow_the_band(tmp_path):
    """A small counterfactual run: every design's coverage flag agrees with its band, and the biased estimator
    (clipped IPS at cap 1: its replicates miss the truth) is flagged."""
    import yaml

    from simulations.config import config_from_mapping
    from simulations.job import simulate

    with open(Path(__file__).resolve().parents[1] / "configs" / "counterfactual.yaml", encoding="utf-8") as fh:
        mapping = yaml.safe_load(fh)
    mapping.update(replicates=30, workers=1)
    mapping["traffic"].update(days=2, queries_per_day=1500)
    mapping["users"]["population"] = 1500
    mapping["analysis"].update(aa=False, assumption_sweep=None, truth_impressions=20000)
    mapping["designs"] = [d for d in mapping["designs"] if d["type"] == "counterfactual"]
    mapping["designs"][0]["estimators"] = ["ips", {"name": "clipped_ips", "cap": 1}]
    result = simulate(config_from_mapping(mapping), workers=1)
    entries = result.summary["designs"]["counterfactual"]
    for metric, e in entries.items():
        lo, hi = e["coverage_band"]
        assert e["coverage_within_band"] == (lo <= e["final_day"]["coverage"] <= hi), metric
    assert entries["clipped_ips(cap=1)"]["coverage_within_band"] is False
    est = result.summary["counterfactual"]["counterfactual"]["estimators"]
    assert est["clipped_ips(cap=1)"]["coverage_within_band"] is False
    assert est["ips"]["coverage_band"] == entries["ips"]["coverage_band"]
    from simulations.report import terminal_summary

    table = terminal_summary(result).split("Estimation error on the last day")[1].split("\n\n")[0].splitlines()
    for metric, e in entries.items():  # the table's coverage cell carries the summary's flag
        line = next(row for row in table if f" {metric} " in row)
        cell = _coverage_cell(e["final_day"]["coverage"], e["coverage_within_band"])
        assert f" {cell} " in line and (cell.endswith("!") or f"{cell}!" not in line), (metric, line)
    assert any(row.split()[-3].endswith("!") for row in table if " clipped_ips(cap=1) " in row)
