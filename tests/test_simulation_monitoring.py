"""Daily monitoring in the simulate report: peeking inflates the A/A false-positive rate
above its band, the mSPRT's always-valid test keeps it at or below alpha, and every rule's
numbers are recomputed from the replicate rows."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.stats import binomial_band
from onlineeval.stats.sequential import msprt, peeking_fpr
from simulations.config import config_from_mapping
from simulations.job import simulate
from simulations.report import terminal_summary

CONFIG = {
    "seed": 11, "replicates": 300,
    "collection": {"n_queries": 60, "candidates": 8}, "rankers": {"depth": 3},
    "users": {"population": 2000, "activity": {"sigma": 0.5}},
    "traffic": {"days": 10, "queries_per_day": 600, "batch_hours": 24},
    "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query"}],
    "analysis": {"truth_impressions": 20000, "null": False},
}


@pytest.fixture(scope="module")
def result():
    return simulate(config_from_mapping(CONFIG), workers=1)


def test_peeking_inflates_and_msprt_holds_the_level(result) -> None:
    rules = result.summary["monitoring"]["ab"]["rules"]
    band = binomial_band(CONFIG["replicates"], 0.05, 0.99)
    # ten daily looks of a fixed-horizon test: the exact rate at the design's information
    # fractions (planned from the mean SEs by day) is about 0.19; the simulated A/A rate must be
    # within 4 binomial SEs of it, and above alpha's band
    mon = result.summary["monitoring"]["ab"]
    exact = float(peeking_fpr(np.asarray(mon["fractions"]))[-1])
    fpr = rules["peeking"]["aa_false_positive_rate"]
    se = np.sqrt(exact * (1 - exact) / CONFIG["replicates"])
    assert abs(fpr - exact) <= 4 * se
    assert fpr > band.hi_rate
    assert rules["msprt"]["aa_false_positive_rate"] <= band.hi_rate
    assert rules["msprt"]["aa_within_band_or_below"] is True
    assert rules["obrien_fleming"]["aa_within_band_or_below"] is True


def test_msprt_numbers_are_recomputed_from_the_rows(result) -> None:
    mon = result.summary["monitoring"]["ab"]
    rows = result.rows
    aa = rows[(rows["aa"]) & (rows["design"] == "ab") & (rows["metric"] == "clicks_per_query")]
    est = aa.pivot(index="replicate", columns="day", values="estimate").to_numpy()
    se = aa.pivot(index="replicate", columns="day", values="se").to_numpy()
    again = msprt(est, se, tau=mon["tau"], alpha=0.05)
    assert float(np.mean(again.reject)) == pytest.approx(mon["rules"]["msprt"]["aa_false_positive_rate"])


def test_report_prints_the_monitoring_block(result) -> None:
    text = terminal_summary(result)
    assert "Daily monitoring (10 looks" in text and "mSPRT (always valid)" in text
