"""The pieces of simulations.sequential without a simulation: look schedules, planned
information fractions, the rule records, and the planned days checked against closed forms
(no SE floor) and a Monte Carlo of the z-process (stopping fraction within 4 SE)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from onlineeval.errors import ConfigError
from onlineeval.stats.sequential import spending_boundaries
from simulations.config import config_from_mapping
from simulations.sequential import _planned, _planned_fractions, _rule_record, _schedule

ALPHA, POWER = 0.05, 0.8


def test_look_schedules() -> None:
    assert _schedule(None, 14, 1).tolist() == list(range(14))
    assert _schedule(2, 14, 1).tolist() == [6, 13]  # days 7 and 14
    assert _schedule(14, 14, 1).tolist() == list(range(14))
    assert _schedule([7, 14], 56, 4).tolist() == [27, 55]  # per 6-hour batch: the end of days 7 and 14
    assert _schedule(3, 20, 4).tolist() == [6, 12, 19]


def test_planned_fractions_increase_strictly_and_end_at_one() -> None:
    se = np.array([2.0, 1.0, 1.0, 0.9, 0.95, 0.5])  # a flat and a rising mean SE
    t = _planned_fractions(se)
    assert t[-1] == 1.0 and np.all(np.diff(t) > 0)
    # raw se_K^2 / se_k^2: 0.0625, 0.25, 0.25, 0.5^2/0.9^2, 0.5^2/0.95^2, 1; the running maximum lifts look 5 to
    # look 4's value, then (from the end) a look not below the next gets FLAT_SE_STEP (1%) less: looks 4 and 2
    r = 0.5 ** 2 / 0.9 ** 2
    np.testing.assert_allclose(t, [0.0625, 0.25 * 0.99, 0.25, r * 0.99, r, 1.0], rtol=1e-12)


def test_msprt_and_confidence_sequence_decide_the_same() -> None:
    rng = np.random.default_rng(1)
    se = np.tile(1.0 / np.sqrt(np.arange(1, 11)), (400, 1))
    est = np.cumsum(rng.normal(0.8, 1.0, (400, 10)), axis=1) / np.arange(1, 11)
    days = np.arange(1.0, 11.0)
    fr = _planned_fractions(se[0])
    a = _rule_record(est, se, est[:0], se[:0], "msprt", ALPHA, 0.3, fr, days, 0.8)
    b = _rule_record(est, se, est[:0], se[:0], "confidence_sequence", ALPHA, 0.3, fr, days, 0.8)
    assert a == b and 0 < a["power"] < 1
    assert a["decided_right_sign"] + a["decided_wrong_sign"] + a["no_decision"] == pytest.approx(1.0)


def test_planned_days_without_a_floor_are_linear_in_information() -> None:
    fractions = np.arange(1, 6) / 5
    a, effect, qpd = 2.0, 0.01, 1000.0
    plan = _planned("obrien_fleming", fractions, ALPHA, POWER, 0.0, {"a": a, "b": 0.0}, effect, qpd)
    z = sps.norm.ppf(1 - ALPHA / 2) + sps.norm.ppf(POWER)
    assert plan["fixed_days"] == pytest.approx(a * (z / effect) ** 2 / qpd, rel=1e-12)
    assert plan["max_days"] == pytest.approx(plan["inflation_factor"] * plan["fixed_days"], rel=1e-12)
    # with se^2 = a/N, days are proportional to information: E[days] = E[t] * max days
    assert plan["expected_days_effect"] == pytest.approx(plan["expected_fraction_effect"] * plan["max_days"], rel=1e-9)
    assert plan["expected_days_null"] == pytest.approx(plan["expected_fraction_null"] * plan["max_days"], rel=1e-9)
    # Lan-DeMets O'Brien-Fleming at 5 equal looks needs a few per cent more than the fixed horizon
    assert 1.0 < plan["inflation_factor"] < 1.05


def test_planned_stopping_fraction_against_a_monte_carlo_of_the_z_process() -> None:
    fractions = np.arange(1, 6) / 5
    plan = _planned("pocock", fractions, ALPHA, POWER, 0.0, {"a": 1.0, "b": 0.0}, 0.01, 1.0)
    b = spending_boundaries(fractions, ALPHA, "pocock").upper
    z = sps.norm.ppf(1 - ALPHA / 2) + sps.norm.ppf(POWER)
    drift = z * math.sqrt(plan["inflation_factor"])  # the design's drift at the target power
    rng = np.random.default_rng(4)
    n = 200_000
    steps = rng.normal(drift * np.diff(fractions, prepend=0.0), np.sqrt(np.diff(fractions, prepend=0.0)), (n, 5))
    zk = np.cumsum(steps, axis=1) / np.sqrt(fractions)
    cross = np.abs(zk) >= b
    stop = np.where(cross.any(axis=1), fractions[np.argmax(cross, axis=1)], 1.0)
    assert abs(cross.any(axis=1).mean() - POWER) <= 4 * math.sqrt(POWER * (1 - POWER) / n)
    assert abs(stop.mean() - plan["expected_fraction_effect"]) <= 4 * stop.std() / math.sqrt(n)


def test_planned_days_beyond_the_floor_are_none() -> None:
    # T = (0.01 / 2.8016)^2 = 1.274e-5: a floor of 1.26e-5 leaves the fixed horizon reachable, but not the
    # 1.026 times its information the O'Brien-Fleming design needs at most (1/I_max = 1.242e-5 < b)
    plan = _planned("obrien_fleming", np.arange(1, 6) / 5, ALPHA, POWER, 0.0, {"a": 1.0, "b": 1.26e-5}, 0.01, 1.0)
    assert plan["fixed_days"] is not None and plan["max_days"] is None and plan["expected_days_effect"] is None


def test_counterfactual_designs_refuse_batch_monitoring_and_multiple() -> None:
    cf = {"name": "cf", "type": "counterfactual", "logger": {"policy": "epsilon_greedy"}, "estimators": ["ips"]}
    for key, value in (("monitoring", "batch"), ("multiple", "holm")):
        with pytest.raises(ConfigError, match=rf"designs\[0\].analysis.{key}: '{value}' applies to designs of type "
                                              "ab and interleaving"):
            config_from_mapping({"designs": [{**cf, "analysis": {key: value}}]})
    cfg = config_from_mapping({"designs": [{**cf, "analysis": {"sequential": "pocock", "looks": 3}}]})
    assert cfg.designs[0].analysis.looks == 3


def _bh_step_up(p: np.ndarray, alpha: float) -> np.ndarray:
    """Benjamini-Hochberg by its definition: reject the k smallest, k the largest i with p_(i) <= i alpha / m."""
    out = np.zeros(p.shape, dtype=bool)
    for r, row in enumerate(p):
        ok = np.flatnonzero(np.isfinite(row))
        order = ok[np.argsort(row[ok], kind="stable")]
        passing = [i for i in range(order.size) if row[order[i]] <= (i + 1) * alpha / order.size]
        if passing:
            out[r, order[: passing[-1] + 1]] = True
    return out


def test_multiple_summary_bh_against_the_step_up_definition() -> None:
    from types import SimpleNamespace

    import pandas as pd

    from simulations.multiple import multiple_summary

    rng = np.random.default_rng(8)
    reps, metrics = 200, ["m1", "m2", "m3", "m4"]
    records = []
    for aa in (False, True):
        p = rng.beta(0.3 if not aa else 1.0, 1.0, (reps, len(metrics)))
        p[rng.random(p.shape) < 0.05] = np.nan  # undefined tests leave the family
        for r in range(reps):
            for j, m in enumerate(metrics):
                for day in (1, 2):
                    records.append({"replicate": r, "design": "x", "aa": aa, "metric": m, "day": day,
                                    "pvalue": p[r, j] if day == 2 else 0.5, "estimate": 1.0})
    rows = pd.DataFrame(records)
    designs = {"x": {m: {"true_effect": 1.0, "detectable": True, "primary": m == "m1"} for m in metrics}}
    config = SimpleNamespace(analysis=SimpleNamespace(alpha=ALPHA),
                             designs=[SimpleNamespace(name="x", analysis=SimpleNamespace(multiple="bh"))])
    out = multiple_summary(rows, designs, config)["x"]
    for aa in (False, True):
        last = rows[(rows["aa"] == aa) & (rows["day"] == 2)].pivot(index="replicate", columns="metric", values="pvalue")
        p = last[metrics].to_numpy()
        ref = _bh_step_up(p, ALPHA)
        if aa:
            assert out["aa"]["family_wise_rate_adjusted"] == pytest.approx(ref.any(axis=1).mean())
            assert out["aa"]["family_wise_rate_raw"] == pytest.approx((p < ALPHA).any(axis=1).mean())
        else:
            for j, m in enumerate(metrics):
                assert out["per_test"][m]["rejection_rate_adjusted"] == pytest.approx(ref[:, j].mean())
    assert out["method"] == "bh" and out["horizon_day"] == 2 and out["tests"] == 4


def test_monitoring_summary_takes_a_mean_se_that_does_not_fall() -> None:
    """An estimator whose mean SE rises over the days (an IPS-family SE underestimated early, before rare
    large weights are seen) gave the monitoring summary fractions [1, 1, ..., 1], which O'Brien-Fleming's
    boundaries refused ("information fractions must be strictly increasing"): the summary now uses the planned
    fractions (flat or rising stretches made slightly increasing), as the sequential summary does."""
    import pandas as pd

    from simulations.sequential import monitoring_summary

    rng = np.random.default_rng(3)
    days, reps = 5, 40
    se_by_day = np.array([0.5, 0.6, 0.6, 0.7, 0.8])  # rises: the first day has the smallest SE
    rows = []
    for aa in (False, True):
        for r in range(reps):
            for d in range(days):
                est = rng.normal(0.0 if aa else 0.3, se_by_day[d])
                rows.append({"design": "cf", "metric": "m", "aa": aa, "replicate": r, "day": d + 1,
                             "estimate": est, "se": se_by_day[d]})
    out = monitoring_summary(pd.DataFrame(rows), {"cf": {"m": {"primary": True, "true_effect": 0.3}}}, ALPHA)
    t = np.array(out["cf"]["fractions"])
    assert t[-1] == 1.0 and np.all(np.diff(t) > 0)
    np.testing.assert_array_equal(t, _planned_fractions(se_by_day))
    assert set(out["cf"]["rules"]) == {"fixed", "peeking", "msprt", "obrien_fleming"}
    # a falling SE keeps the fractions it had (the ratio of squared SEs)
    falling = 1.0 / np.sqrt(np.arange(1.0, 6.0))
    np.testing.assert_allclose(_planned_fractions(falling), np.arange(1.0, 6.0) / 5.0, rtol=1e-12)
