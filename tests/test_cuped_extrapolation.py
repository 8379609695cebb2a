"""CUPED's days needed carry the main table's extrapolation marks (review 6, F6).

CUPED's days needed are analytic (se^2 = a/N + b fitted to the simulated days), so beyond the simulated days
they are extrapolated exactly as the main table's '*' sizes: the cell gives the factor (days / simulated days)
with '*', and '!' (and the unstable '?') beyond simulations.analysis.EXTRAPOLATION_FLAG. The factor and the days
are recomputed here from the replicate rows with numpy's least squares and scipy's normal quantiles.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats as sps

from simulations.analysis import EXTRAPOLATION_FLAG
from simulations.config import config_from_mapping
from simulations.cuped import CUPED_PREFIX, cuped_lines
from simulations.job import simulate

TYPES = [{"name": "navigational", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
         {"name": "informational", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]
DAYS, QPD, ALPHA, POWER = 3, 1500, 0.05, 0.8
CFG = {
    "seed": 11, "replicates": 40,
    "collection": {"n_queries": 60, "candidates": 8}, "rankers": {"depth": 3, "B": {"noise": 0.6}},
    "users": {"population": 20000, "activity": {"sigma": 1.0}, "types": TYPES},
    "traffic": {"days": DAYS, "queries_per_day": QPD, "batch_hours": 24},
    "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query", "analysis": {"cuped": {"pre_days": 6}}}],
    "analysis": {"alpha": ALPHA, "power": POWER, "truth_impressions": 20000, "null": False, "aa": False},
}


@pytest.fixture(scope="module")
def run():
    return simulate(config_from_mapping(CFG), workers=1)


def _days_needed(rows, metric: str, effect: float) -> float:
    """se^2 = a/N + b by least squares over the days' mean SE and impressions of the CUPED rows, solved for the
    SE of the target power: days = a / (T - b) / queries_per_day."""
    sub = rows[(rows["design"] == "ab") & (rows["metric"] == CUPED_PREFIX + metric) & (~rows["aa"])]
    by_day = sub.groupby("day").agg(se=("se", "mean"), n=("n_impressions", "mean")).sort_index()
    slope, intercept = np.polyfit(1.0 / by_day["n"].to_numpy(), by_day["se"].to_numpy() ** 2, 1)
    assert slope > 0 and intercept >= 0
    target = (effect / (sps.norm.ppf(1 - ALPHA / 2) + sps.norm.ppf(POWER))) ** 2
    assert target > intercept
    return slope / (target - intercept) / QPD


def test_cuped_days_needed_give_the_extrapolation_factor_and_flag(run) -> None:
    cup = run.summary["cuped"]["ab"]
    assert cup["simulated_days"] == DAYS
    lines = cuped_lines(run.summary)
    seen = {"flagged": 0, "within_flag": 0}
    for metric, m in cup["metrics"].items():
        req = m["required"]
        if req.get("days") is None:
            continue
        days = _days_needed(run.rows, metric, run.summary["designs"]["ab"][metric]["true_effect"])
        assert req["days"] == pytest.approx(days, rel=1e-6)
        factor = days / DAYS
        assert req["days_extrapolation"] == pytest.approx(factor, rel=1e-6)
        assert req["extrapolated"] is bool(factor > EXTRAPOLATION_FLAG)
        if factor > EXTRAPOLATION_FLAG:
            assert req["unstable"] is True  # as the main table's '?' (review 4, F2)
        line = next(ln for ln in lines if ln.split()[:2] == ["ab", metric])
        cell = line.split("  ")[-1].strip()
        shown = cell.split(" (")[0]
        mark = "!" if factor > EXTRAPOLATION_FLAG else ""
        q = "?" if req["unstable"] else ""
        assert shown == f"{days:.1f}*{q} {factor:.1f}x{mark}", (metric, cell)
        # the unadjusted days next to it carry the main table's factor the same way
        base = run.summary["designs"]["ab"][metric]
        if base.get("analytic_required_days") is not None:
            f0 = base["analytic_required_days"] / DAYS
            assert base["analytic_required_days_extrapolation"] == pytest.approx(f0, rel=1e-9)
            assert f"{f0:.1f}x{'!' if f0 > EXTRAPOLATION_FLAG else ''})" in cell
        seen["flagged" if mark else "within_flag"] += 1
    # this world has one size beyond the flag and one extrapolated within it
    assert seen["flagged"] >= 1 and seen["within_flag"] >= 1
    assert any("'*' beyond the simulated days" in ln and f"the {DAYS} simulated days" in ln for ln in lines)
