"""The coverage flag of the estimation-error table: a day's interval coverage against the exact 99% binomial band
of a valid (1 - alpha) interval's over the replicates with a defined interval (scipy's binomial quantiles as the
reference), in summary.json and as '!' in the terminal table."""

from __future__ import annotations

import math
from pathlib import Path

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
