"""CUPED's days needed and the sequential plan's days come from the same se^2 = a/N + b fit as the main table's
impressions needed, so they are ill-conditioned the same way near the floor b (review 2026-12-02, 1.6): each is
recomputed from the fit's refits on bootstrap resamples of the replicates and flagged '?' by the main table's rule
(simulations.analysis.refit_spread), with the 90% range printed.

References: the vectorised refits of the plan against :func:`simulations.sequential._planned` called refit by refit
(its scalar path); the fixed horizon's spread against the main table's
(:func:`simulations.analysis.required_impressions_uncertainty`) on the same refits; the floor ratio of the
sequential maximum (R b / T) and the expected days' sensitivity to b against a finite difference; CUPED's spread
against required_impressions_uncertainty on its own rows with its seed.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import pandas as pd
import pytest

from simulations.analysis import (
    EXTRAPOLATION_FLAG,
    SIZE_BOOTSTRAP,
    UNSTABLE_FLOOR_RATIO,
    refit_sizes,
    refit_spread,
    required_impressions,
    required_impressions_uncertainty,
    size_refits,
    size_seed,
    target_variance,
    variance_model,
)
from simulations.config import config_from_mapping
from simulations.cuped import CUPED_PREFIX, R_PREFIX, RHO_PREFIX, cuped_lines, cuped_summary
from simulations.sequential import _planned, _planned_fractions, sequential_lines

ALPHA, POWER, QPD = 0.05, 0.8, 1000.0
DAYS = np.arange(1, 8)
IMPRESSIONS = QPD * DAYS
EFFECT = 0.01


def _replicates(seed: int, a: float, b: float, r: int = 40, noise: float = 0.05) -> np.ndarray:
    """(r, days) SEs around se^2 = a/N + b, each replicate off by a persistent and a daily factor."""
    rng = np.random.default_rng(seed)
    level = 1 + noise * rng.standard_normal((r, 1))
    return np.sqrt(a / IMPRESSIONS + b) * level * (1 + noise / 2 * rng.standard_normal((r, DAYS.size)))


def _world(floor_share: float, seed: int = 1) -> tuple[dict[str, float], object, np.ndarray, np.ndarray]:
    """A variance model whose floor b is ``floor_share`` of the target se^2 T, with about 4e4 impressions needed."""
    t = target_variance(EFFECT, ALPHA, POWER)
    b = floor_share * t
    a = (t - b) * 4e4
    se = _replicates(seed, a, b)
    n = np.tile(IMPRESSIONS, (se.shape[0], 1))
    fit = variance_model(IMPRESSIONS, se.mean(axis=0))
    return {"a": fit.a, "b": fit.b}, fit, se, n


FRACTIONS = _planned_fractions(np.sqrt(2.0 / IMPRESSIONS))


def _plan(fit: dict[str, float], refits=None, rule: str = "obrien_fleming") -> dict:
    out = _planned(rule, FRACTIONS, ALPHA, POWER, 1.0, fit, EFFECT, QPD, refits)
    assert out is not None
    return out


def test_plan_refits_equal_the_scalar_plan_refit_by_refit() -> None:
    fit, _, se, n = _world(0.4)
    refits = size_refits(se, n, EFFECT, 0.0, (5,), resamples=60)
    plan = _plan(fit, refits)
    by_hand = {k: [] for k in ("fixed_days", "max_days", "expected_days_effect", "expected_days_null")}
    for a, b in zip(refits.a, refits.b):
        one = _planned("obrien_fleming", FRACTIONS, ALPHA, POWER, 1.0, {"a": a, "b": b}, EFFECT, QPD)
        for k in by_hand:
            by_hand[k].append(math.inf if one[k] is None else one[k])
    for k, values in by_hand.items():
        q05, q95 = np.quantile(values, [0.05, 0.95], method="inverted_cdf")
        assert plan["uncertainty"][k]["range"] == pytest.approx([q05, q95], rel=1e-9), k


@pytest.mark.parametrize("floor_share", [0.1, 0.5, 0.95])
def test_fixed_horizon_is_flagged_as_the_main_tables_size(floor_share: float) -> None:
    fit, vm, se, n = _world(floor_share)
    seed = size_seed(20261201, "ab", "reciprocal_rank")
    plan = _plan(fit, size_refits(se, n, EFFECT, 0.0, seed))
    main = required_impressions_uncertainty(vm, se, n, EFFECT, 0.0, ALPHA, POWER, seed)
    fixed = plan["uncertainty"]["fixed_days"]
    n_req = required_impressions(vm, EFFECT, ALPHA, POWER)
    assert plan["fixed_days"] == pytest.approx(n_req / QPD, rel=1e-9)
    assert fixed["unstable"] == main["unstable"]
    assert fixed["floor_ratio"] == pytest.approx(main["floor_ratio"], rel=1e-9)
    assert fixed["range"] == pytest.approx([v / QPD for v in main["range"]], rel=1e-9)
    if floor_share == 0.1:
        assert not fixed["unstable"]
    # days = impressions / traffic: the same relative spread as the main table's size
    assert fixed["rel_se"] == pytest.approx(main["rel_se"], rel=1e-9)
    if floor_share == 0.95:
        assert fixed["unstable"] and main["unstable"]


def test_sequential_maximum_is_more_ill_conditioned_than_the_fixed_horizon() -> None:
    """At b = 0.7 T the fixed horizon is not flagged (amplification b / (T - b) = 2.3); Pocock's maximum needs
    R = 1.23 times the information at these 7 looks, its floor ratio R b / T = 0.86 is above 0.8, so it is
    flagged although the fixed horizon is not."""
    fit, vm, se, n = _world(0.7)
    refits = size_refits(se, n, EFFECT, 0.0, (9,))
    plan = _plan(fit, refits, rule="pocock")
    assert plan["inflation_factor"] == pytest.approx(1.2318, abs=1e-3)
    u = plan["uncertainty"]
    t = target_variance(EFFECT, ALPHA, POWER)
    assert u["fixed_days"]["floor_ratio"] == pytest.approx(vm.b / t, rel=1e-9)
    assert u["max_days"]["floor_ratio"] == pytest.approx(plan["inflation_factor"] * vm.b / t, rel=1e-9)
    assert u["fixed_days"]["floor_ratio"] < UNSTABLE_FLOOR_RATIO < u["max_days"]["floor_ratio"]
    assert not u["fixed_days"]["unstable"] and u["max_days"]["unstable"]
    # the flag is refit_spread's rule on the plan's own refits
    ref = refit_spread(plan["max_days"], _max_days(refits, plan["inflation_factor"]), u["max_days"]["floor_ratio"])
    assert u["max_days"]["unstable"] == ref["unstable"] and u["max_days"]["range"] == pytest.approx(ref["range"])
    assert u["max_days"]["rel_se"] == pytest.approx(ref["rel_se"], rel=1e-9)


def _max_days(refits, inflation: float) -> np.ndarray:
    """The sequential maximum of each refit: the main size at se^2 = T / R, in days."""
    t = target_variance(refits.effect, ALPHA, POWER) / inflation
    with np.errstate(divide="ignore"):
        return np.where(t > refits.b, refits.a / (t - refits.b), np.inf) / QPD


@pytest.mark.parametrize("key", ["expected_days_effect", "expected_days_null"])
def test_expected_days_floor_ratio_is_their_sensitivity_to_b(key: str) -> None:
    """f / (1 - f) = d ln E / d ln b, checked by a central difference of the plan itself."""
    fit, _, se, n = _world(0.6)
    plan = _plan(fit, size_refits(se, n, EFFECT, 0.0, (2,)))
    f = plan["uncertainty"][key]["floor_ratio"]
    h = 1e-5
    up = _plan({"a": fit["a"], "b": fit["b"] * (1 + h)})[key]
    down = _plan({"a": fit["a"], "b": fit["b"] * (1 - h)})[key]
    assert f / (1 - f) == pytest.approx((math.log(up) - math.log(down)) / (2 * h), rel=1e-5)


def _seq_summary(plan: dict) -> dict:
    rec = {"power": 0.5, "mean_decision_day": 6.0, "aa_false_positive_rate": 0.04, "aa_within_band_or_below": True}
    decision = {**rec, "rule": "obrien_fleming", "days_saved_vs_fixed": 1.0, "power_vs_fixed": -0.05,
                "planned": plan}
    return {"sequential": {"ab": {"metric": "reciprocal_rank", "rule": "obrien_fleming", "monitoring": "daily",
                                  "looks": 7, "tau": None, "rules": {"fixed": {**rec, "mean_decision_day": 7.0}},
                                  "decision": decision}}}


def test_sequential_lines_mark_unstable_planned_days_with_their_range() -> None:
    fit, _, se, n = _world(0.95)
    plan = _plan(fit, size_refits(se, n, EFFECT, 0.0, (3,)))
    assert plan["uncertainty"]["fixed_days"]["unstable"]
    text = "\n".join(sequential_lines(_seq_summary(plan), 24))
    assert f"vs {plan['fixed_days']:.1f}? fixed" in text and f"{plan['expected_days_effect']:.1f}? days" in text
    assert "'?' unstable planned days (90% range" in text and f"{SIZE_BOOTSTRAP} bootstrap" in text
    lo, hi = plan["uncertainty"]["fixed_days"]["range"]
    assert f"ab fixed {lo:.1f} to " in text

    fit, _, se, n = _world(0.05)
    plan = _plan(fit, size_refits(se, n, EFFECT, 0.0, (3,)))
    assert not any(u["unstable"] for u in plan["uncertainty"].values())
    text = "\n".join(sequential_lines(_seq_summary(plan), 24))
    assert "?" not in text and "unstable" not in text
    assert f"{plan['expected_days_effect']:.1f} days expected" in text


def test_biased_primary_gets_no_plan() -> None:
    plan_text = "\n".join(sequential_lines(
        {"sequential": {"ab": {**_seq_summary({})["sequential"]["ab"],
                               "decision": {**_seq_summary({})["sequential"]["ab"]["decision"], "planned": None,
                                            "planned_withheld": "biased: ..."}}}}, 24))
    assert "planned for the target power: not given (biased" in plan_text


# ---------------------------------------------------------------------------------------------- CUPED
CFG = {
    "seed": 11, "replicates": 40,
    "collection": {"n_queries": 60, "candidates": 8}, "rankers": {"depth": 3},
    "users": {"population": 600, "activity": {"sigma": 1.0}},
    "traffic": {"days": 7, "queries_per_day": int(QPD), "batch_hours": 24},
    "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query", "analysis": {"cuped": {"pre_days": 6}}}],
    "analysis": {"alpha": ALPHA, "power": POWER, "truth_impressions": 20000, "null": False, "aa": False},
}


def _cuped_inputs(floor_share: float, bias: float = 0.0):
    """Rows of one A/B design with CUPED: the adjusted SEs follow se^2 = a/N + b with b = floor_share T."""
    t = target_variance(EFFECT, ALPHA, POWER)
    se_adj = _replicates(4, (t - floor_share * t) * 4e4, floor_share * t)
    se_plain = se_adj * 1.2
    rng = np.random.default_rng(8)
    plain, side = [], []
    for r in range(se_adj.shape[0]):
        for j, day in enumerate(DAYS):
            common = {"design": "ab", "aa": False, "day": int(day), "replicate": r, "n_users": 100.0 * day,
                      "n_impressions": float(IMPRESSIONS[j]), "pvalue": 0.5, "df": np.inf}
            plain.append({**common, "metric": "clicks_per_query", "estimate": EFFECT + rng.normal(0, se_plain[r, j]),
                          "se": se_plain[r, j]})
            side.append({**common, "metric": CUPED_PREFIX + "clicks_per_query",
                         "estimate": EFFECT + bias + rng.normal(0, se_adj[r, j]), "se": se_adj[r, j]})
            side.append({**common, "metric": R_PREFIX + "clicks_per_query", "estimate": 0.55, "se": np.nan})
            side.append({**common, "metric": RHO_PREFIX + "clicks_per_query", "estimate": 0.5, "se": np.nan})
    main = {"detectable": True, "analytic_required_impressions": 5e4, "analytic_required_days": 50.0,
            "analytic_required_users": 500.0, "analytic_required_impressions_unstable": False}
    truths = {("ab", "clicks_per_query"): SimpleNamespace(value=EFFECT, se=0.0)}
    return pd.DataFrame(plain), pd.DataFrame(side), {"ab": {"clicks_per_query": main}}, truths, se_adj


@pytest.mark.parametrize("floor_share", [0.1, 0.95])
def test_cuped_days_needed_flagged_by_the_main_tables_rule(floor_share: float) -> None:
    cfg = config_from_mapping(CFG)
    rows, side, designs, truths, se_adj = _cuped_inputs(floor_share)
    out = cuped_summary(rows, side, designs, truths, cfg)
    req = out["ab"]["metrics"]["clicks_per_query"]["required"]
    # the reference: the main table's function on CUPED's own rows and its seed ('cuped:<metric>')
    n = np.tile(IMPRESSIONS, (se_adj.shape[0], 1))
    fit = variance_model(IMPRESSIONS, np.nanmean(se_adj, axis=0))
    ref = required_impressions_uncertainty(fit, se_adj, n, EFFECT, 0.0, ALPHA, POWER,
                                           size_seed(cfg.seed, "ab", CUPED_PREFIX + "clicks_per_query"))
    assert req["impressions"] == pytest.approx(required_impressions(fit, EFFECT, ALPHA, POWER), rel=1e-9)
    # review 6, F6: or, as the main table's '?', the days extrapolated beyond EXTRAPOLATION_FLAG x the simulated days
    factor = None if req["days"] is None else req["days"] / CFG["traffic"]["days"]
    assert req["unstable"] == (ref["unstable"] or (factor is not None and factor > EXTRAPOLATION_FLAG))
    assert req["days_range"] == pytest.approx([v / QPD for v in ref["range"]], rel=1e-9)
    assert req["variance_floor_to_target"] == pytest.approx(ref["floor_ratio"], rel=1e-9)
    refits = size_refits(se_adj, n, EFFECT, 0.0, size_seed(cfg.seed, "ab", CUPED_PREFIX + "clicks_per_query"))
    assert req["unreachable_share"] == pytest.approx(float(np.mean(np.isinf(refit_sizes(refits, ALPHA, POWER)))))
    line = next(s for s in cuped_lines({"cuped": out}) if s.lstrip().startswith("ab "))
    # the days' cell: '*' beyond the simulated days with the factor, '!' beyond EXTRAPOLATION_FLAG (review 6, F6)
    mark = "" if factor is None or factor <= 1 else f" {factor:.1f}x" + ("!" if factor > EXTRAPOLATION_FLAG else "")
    star = "*" if mark else ""
    if floor_share > 0.9:
        assert req["unstable"] and req["variance_floor_to_target"] > UNSTABLE_FLOOR_RATIO
        cell = "not reachable?" if req["days"] is None else f"{req['days']:.1f}{star}?{mark}"
        assert line.endswith(cell + " (50.0)")
        assert any(s.startswith("  '?' unstable days needed") for s in cuped_lines({"cuped": out}))
    else:
        assert not ref["unstable"] and factor is not None and factor > EXTRAPOLATION_FLAG
        assert req["unstable"] and line.endswith(f"{req['days']:.1f}*? {factor:.1f}x! (50.0)")
        assert any("[extrapolated" in s for s in cuped_lines({"cuped": out}))


def test_cuped_days_of_a_biased_adjustment_are_withheld() -> None:
    cfg = config_from_mapping(CFG)
    rows, side, designs, truths, _ = _cuped_inputs(0.1, bias=0.05)  # far beyond 4 SE of 40 replicates
    m = cuped_summary(rows, side, designs, truths, cfg)["ab"]["metrics"]["clicks_per_query"]
    assert not m["unbiased"] and "withheld" in m["required"] and m["required_if_unbiased"]["days"] > 0
    lines = cuped_lines({"cuped": {"ab": {"pre_days": 6, "metrics": {"clicks_per_query": m}}}})
    assert next(s for s in lines if s.lstrip().startswith("ab ")).endswith("biased (-)")


def test_simulated_biased_primary_gets_no_plan() -> None:
    """Balanced interleaving on these rankers: the null check finds it biased (its null replicates reject above the
    band), so its analytic days are withheld and the sequential block makes no plan from the same fit (which
    exists: the plan it would have printed is computed here)."""
    from simulations.job import simulate
    from simulations.report import terminal_summary

    cfg = config_from_mapping({
        "seed": 7, "replicates": 20,
        "collection": {"n_queries": 200, "candidates": 20}, "rankers": {"depth": 10, "B": {"noise": 0.9}},
        "users": {"population": 2000, "activity": {"sigma": 0.5}},
        "traffic": {"days": 3, "queries_per_day": 2000, "batch_hours": 24},
        "designs": [{"name": "bal", "type": "interleaving", "method": "balanced",
                     "analysis": {"sequential": "msprt"}}],
        "analysis": {"truth_impressions": 100000},
    })
    result = simulate(cfg, workers=1)
    entry = result.summary["designs"]["bal"]["delta_ab"]
    decision = result.summary["sequential"]["bal"]["decision"]
    assert entry["null"]["biased"] and entry["analytic_withheld"]
    assert decision["planned"] is None and decision["planned_withheld"] == entry["analytic_withheld"]
    would = _planned("msprt", np.array([1 / 3, 2 / 3, 1.0]), ALPHA, POWER, 1.0, entry["variance_model"],
                     entry["true_effect"], 2000.0)
    assert would is not None and would["fixed_days"] is not None  # what was printed before
    line = next(ln for ln in terminal_summary(result).splitlines() if ln.lstrip().startswith("bal ") and "msprt" in ln)
    assert line.endswith("planned for the target power: not given (biased: see the main table)")


def test_sequential_plan_reads_the_main_tables_refits(monkeypatch: pytest.MonkeyPatch) -> None:
    """analyse draws each entry's bootstrap refits once (size_refits) and the sequential plan reads them: no second
    draw, and the plan equals the one made from refits drawn again here from the replicate rows as the plan drew
    them before (replicate_arrays of the design's rows, the truth and its Monte Carlo SE, size_seed)."""
    import simulations.analysis as analysis
    import simulations.analysis_sizes as analysis_sizes
    from simulations.analysis import replicate_arrays, side_row_mask
    from simulations.job import simulate
    from simulations.sequential import sequential_summary

    calls: list[tuple[object, ...]] = []
    real = analysis_sizes.size_refits

    def counted(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        calls.append(args[4])
        return real(*args, **kwargs)

    # size_refits lives in simulations.analysis_sizes; analyse calls it by the name simulations.analysis imports, so
    # the patch goes there (patching analysis_sizes.size_refits would leave analyse's calls uncounted)
    monkeypatch.setattr(analysis, "size_refits", counted)
    cfg = config_from_mapping({
        "seed": 3, "replicates": 6,
        "collection": {"n_queries": 100, "candidates": 12}, "rankers": {"depth": 8},
        "users": {"population": 400},
        "traffic": {"days": 3, "queries_per_day": 400, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query",
                     "analysis": {"sequential": "obrien_fleming"}},
                    {"name": "td", "type": "interleaving", "method": "team_draft",
                     "analysis": {"sequential": "msprt"}}],
        "analysis": {"truth_impressions": 20000, "null": False},
    })
    result = simulate(cfg, workers=1)
    entries = [(d, m) for d, ms in result.summary["designs"].items() for m in ms]
    assert sorted(calls) == sorted(size_seed(cfg.seed, d, m) for d, m in entries)  # one draw per entry
    plans = {d: result.summary["sequential"][d]["decision"]["planned"] for d in ("ab", "td")}
    assert all(p is not None and p["uncertainty"]["fixed_days"]["range"] is not None for p in plans.values())

    side = side_row_mask(result.rows)
    rows = result.rows[~side]
    again = {}
    for d, m in entries:
        e = result.summary["designs"][d][m]
        g = rows[(rows["design"] == d) & (rows["metric"] == m) & (~rows["aa"].astype(bool))]
        wide_se, wide_n = replicate_arrays(g)
        again[(d, m)] = real(wide_se, wide_n, e["true_effect"], float(e["true_effect_se"] or 0.0),
                             size_seed(cfg.seed, d, m))
    redone = sequential_summary(rows, result.rows[side], result.summary["designs"], cfg, again)
    assert {d: redone[d]["decision"]["planned"] for d in plans} == plans
