"""The shrinkage study's statistics against independent references.

References: Kendall's tau-b against :func:`scipy.stats.kendalltau`; the relation with
exact truths against statsmodels' OLS (coefficients, standard errors, t intervals); the
Paule-Mandel scatter against statsmodels' random-effects meta-analysis
(``combine_effects(method_re="pm")``, an intercept-only model); the weighted fit against
statsmodels' WLS at that scatter; the intervals' coverage by Monte Carlo (fixed seeds,
tolerance 4 binomial SEs); the MDE against the power formula it inverts; the study's
sign and decision counts against hand counts on a small table.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import scipy.stats as sps

from simulations.shrinkage import (
    fit_relation,
    format_shrinkage,
    kendall_tau_b,
    mde_offline,
    paule_mandel_tau2,
    point_columns,
    shrinkage_study,
)

import statsmodels.api as sm


@pytest.mark.parametrize("seed", range(8))
def test_kendall_tau_b_matches_scipy(seed: int) -> None:
    rng = np.random.default_rng(seed)
    n = int(rng.integers(2, 40))
    x = rng.integers(0, 6, n).astype(float)  # many ties
    y = x + rng.integers(-3, 4, n)
    if seed % 2:
        x, y = rng.normal(size=n), rng.normal(size=n)
    ref = sps.kendalltau(x, y, variant="b").statistic
    got = kendall_tau_b(x, y)
    if np.isnan(ref):
        assert np.isnan(got)
    else:
        assert got == pytest.approx(ref, abs=1e-12)


def test_kendall_tau_b_edge_cases() -> None:
    assert kendall_tau_b([1.0, 2.0, 3.0], [3.0, 2.0, 1.0]) == -1.0
    assert np.isnan(kendall_tau_b([1.0], [2.0]))
    assert np.isnan(kendall_tau_b([1.0, 1.0, 1.0], [1.0, 2.0, 3.0]))  # scipy: nan as well
    with pytest.raises(ValueError, match="same length"):
        kendall_tau_b([1.0, 2.0], [1.0])


@pytest.mark.parametrize("intercept", [False, True])
def test_exact_truths_are_ordinary_least_squares(intercept: bool) -> None:
    rng = np.random.default_rng(3)
    x = rng.uniform(-0.04, 0.09, 12)
    y = 0.5 * x + 0.003 + rng.normal(0, 0.004, 12)
    fit = fit_relation(x, y, np.zeros(12), intercept=intercept, level=0.9)
    design = sm.add_constant(x) if intercept else x[:, None]
    ols = sm.OLS(y, design).fit()
    assert fit is not None
    assert np.allclose(fit.coef, ols.params, rtol=1e-10, atol=0)
    assert np.allclose(np.sqrt(np.diag(fit.cov)), ols.bse, rtol=1e-8)
    assert fit.tau2 == pytest.approx(ols.scale, rel=1e-10)  # residual variance = the scatter
    k = len(fit.coef) - 1
    assert np.allclose(fit.ci(k), ols.conf_int(alpha=0.1)[k], rtol=1e-8)
    d = fit.as_dict()
    assert d["df"] == 12 - (2 if intercept else 1) and d["q"] == pytest.approx(1.0)
    # prediction at x0: OLS's mean and observation intervals
    x0 = 0.03
    pred = fit.predict(x0)
    exog = np.array([[1.0, x0]]) if intercept else np.array([[x0]])
    frame = ols.get_prediction(exog).summary_frame(alpha=0.1)
    assert pred["online_effect"] == pytest.approx(frame["mean"].iloc[0], rel=1e-10)
    assert pred["ci"] == pytest.approx([frame["mean_ci_lower"].iloc[0], frame["mean_ci_upper"].iloc[0]], rel=1e-8)
    assert pred["prediction_interval"] == pytest.approx([frame["obs_ci_lower"].iloc[0],
                                                         frame["obs_ci_upper"].iloc[0]], rel=1e-8)


def test_paule_mandel_matches_statsmodels_meta_analysis() -> None:
    """Intercept-only (x = 1 through the origin) is the random-effects meta-analysis."""
    from statsmodels.stats.meta_analysis import combine_effects

    rng = np.random.default_rng(5)
    for _ in range(5):
        n = 9
        s = rng.uniform(0.002, 0.01, n)
        y = 0.02 + rng.normal(0, 0.006, n) + s * rng.standard_normal(n)
        ref = combine_effects(y, s**2, method_re="pm")
        got = paule_mandel_tau2(np.ones((n, 1)), y, s)
        assert got == pytest.approx(ref.tau2, rel=1e-6, abs=1e-12)


def test_weighted_fit_matches_statsmodels_wls() -> None:
    rng = np.random.default_rng(7)
    x = np.linspace(-0.04, 0.09, 10)
    s = rng.uniform(0.001, 0.004, 10)
    y = 0.6 * x + rng.normal(0, 0.005, 10) + s * rng.standard_normal(10)
    for intercept in (False, True):
        fit = fit_relation(x, y, s, intercept=intercept)
        assert fit is not None and fit.tau2 > 0
        design = sm.add_constant(x) if intercept else x[:, None]
        wls = sm.WLS(y, design, weights=1.0 / (fit.tau2 + s**2)).fit()
        # at the Paule-Mandel root the weighted residual variance is exactly 1, so statsmodels'
        # scale-estimated standard errors are the fit's
        assert wls.scale == pytest.approx(1.0, rel=1e-8)
        assert np.allclose(fit.coef, wls.params, rtol=1e-10)
        assert np.allclose(np.sqrt(np.diag(fit.cov)), wls.bse, rtol=1e-6)


def test_no_scatter_beyond_the_monte_carlo_error() -> None:
    """Points on the line up to their MC error: tau^2 = 0 and the known-variance covariance."""
    x = np.array([-0.02, 0.01, 0.03, 0.05, 0.08])
    s = np.full(5, 0.01)
    y = 0.5 * x + s * np.array([0.1, -0.2, 0.15, -0.05, 0.0])
    fit = fit_relation(x, y, s)
    assert fit is not None and fit.tau2 == 0.0 and fit.q < 1
    assert fit.cov[0][0] == pytest.approx(1.0 / np.sum(x**2 / s**2), rel=1e-12)  # max(1, q) = 1
    wls = sm.WLS(y, x[:, None], weights=1 / s**2).fit()
    assert fit.slope == pytest.approx(wls.params[0], rel=1e-12)


def test_too_few_systems_give_no_fit() -> None:
    assert fit_relation([0.02], [0.01]) is None
    assert fit_relation([0.02, 0.03], [0.01, 0.02], intercept=True) is None
    assert fit_relation([0.0, 0.0, 0.0], [0.01, 0.0, 0.02]) is None  # slope not identified
    with pytest.raises(ValueError, match="degree of freedom"):
        paule_mandel_tau2(np.ones((1, 1)), np.array([1.0]), np.array([0.1]))


@pytest.mark.parametrize(("mc", "scatter"), [(False, 0.004), (True, 0.004), (True, 0.0005)])
def test_slope_interval_coverage(mc: bool, scatter: float) -> None:
    """95% slope intervals over 1500 synthetic studies of 8 systems: exact truths (the t
    interval is exact) within 4 binomial SEs of 0.95; Monte Carlo truths at least that."""
    rng = np.random.default_rng(11 + int(mc))
    x = np.linspace(-0.03, 0.09, 8)
    beta, reps = 0.5, 1500
    hits = 0
    for _ in range(reps):
        s = rng.uniform(0.001, 0.004, 8) if mc else np.zeros(8)
        y = beta * x + rng.normal(0, scatter, 8) + s * rng.standard_normal(8)
        fit = fit_relation(x, y, s)
        lo, hi = fit.ci(0)
        hits += lo <= beta <= hi
    cover = hits / reps
    se = math.sqrt(0.95 * 0.05 / reps)
    assert cover >= 0.95 - 4 * se, cover
    if not mc:
        assert abs(cover - 0.95) <= 4 * se, cover


def test_mde_inverts_the_power_formula() -> None:
    se, slope, alpha, power = 0.004, 0.45, 0.05, 0.8
    x = float(mde_offline(se, slope, alpha, power))
    # the predicted online effect slope * x is detected with the target power (right sign)
    assert sps.norm.cdf(slope * x / se - sps.norm.ppf(1 - alpha / 2)) == pytest.approx(power, rel=1e-12)
    assert np.isnan(mde_offline(se, -0.1, alpha, power))


def _table() -> tuple[pd.DataFrame, pd.DataFrame, dict[int, dict[str, str]]]:
    """Two groups; in group g1 points 0/1 and 2/3 share a truth (two traffic levels)."""
    base = {"design": "ab", "metric": "abandonment", "primary": True, "improvement_sign": -1, "alpha": 0.05,
            "power": 0.8, "var_a": 2.0, "var_b": 0.0, "online_effect_se": 0.0}
    pts = [  # point, x, signed online effect, queries/day, days, impressions
        (0, 0.05, 0.02, 1000, 2, 2000), (1, 0.05, 0.02, 3000, 2, 6000),
        (2, -0.01, 0.004, 1000, 2, 2000), (3, -0.01, 0.004, 3000, 2, 6000),
        (4, 0.03, 0.015, 1000, 2, 2000), (5, 0.03, 0.015, 3000, 2, 6000),
        (6, 0.02, 0.01, 1000, 2, 2000), (7, 0.07, 0.03, 1000, 2, 2000), (8, 0.01, 0.006, 1000, 2, 2000),
    ]
    obs = pd.DataFrame([{**base, "point": p, "offline_delta": x, "online_effect": y, "queries_per_day": q,
                         "days": d, "impressions": n} for p, x, y, q, d, n in pts])
    rng = np.random.default_rng(0)
    est = []
    for p, _x, y, _q, _d, n in pts:
        for r in range(20):
            e = -(y + rng.normal(0, math.sqrt(2.0 / n)))  # simulated on the raw (lower is better) scale
            est.append({"point": p, "design": "ab", "metric": "abandonment", "replicate": r, "estimate": e,
                        "pvalue": float(2 * sps.norm.sf(abs(e) / math.sqrt(2.0 / n)))})
    groups = {p: {"users.click_model.preset": "g1" if p < 6 else "g2"} for p, *_ in pts}
    return obs, pd.DataFrame(est), groups


def test_study_counts_and_decisions_by_hand() -> None:
    obs, est, groups = _table()
    study = shrinkage_study(obs, est, groups, ["users.click_model.preset"], "nDCG@10")
    g1, g2 = study["groups"]
    assert g1["label"] == "users.click_model.preset=g1" and g1["points"] == [0, 1, 2, 3, 4, 5]
    rel = g1["relations"][0]
    assert rel["n_points"] == 6 and rel["n_systems"] == 3  # traffic levels share a truth
    assert rel["improvement_sign"] == -1 and rel["truth"] == "exact"
    assert rel["sign_agreement"]["truth"] == {"agree": 2, "disagree": 1, "undetermined": 0, "zero_offline": 0,
                                              "share_disagree": pytest.approx(1 / 3)}
    xs = np.array([0.05, -0.01, 0.03])
    ys = np.array([0.02, 0.004, 0.015])
    ols = sm.OLS(ys, xs[:, None]).fit()
    assert rel["through_origin"]["slope"] == pytest.approx(ols.params[0], rel=1e-10)
    assert rel["kendall_tau"]["truth"] == pytest.approx(sps.kendalltau(xs, ys).statistic)
    # decision shares, recounted from the estimates (signs flipped back to "improvement")
    for d in rel["sign_agreement"]["decision"]:
        e = est[est["point"] == d["point"]]
        signed = -e["estimate"].to_numpy()
        sx = np.sign(obs.loc[obs["point"] == d["point"], "offline_delta"].iloc[0])
        assert d["share_opposite_sign"] == pytest.approx(np.mean(np.sign(signed) == -sx))
        assert d["share_significant_opposite"] == pytest.approx(
            np.mean((np.sign(signed) == -sx) & (e["pvalue"].to_numpy() < 0.05)))
        o = obs[obs["point"] == d["point"]].iloc[0]
        se = math.sqrt(2.0 / o["impressions"])
        assert d["analytic_opposite_sign"] == pytest.approx(sps.norm.cdf(-sx * o["online_effect"] / se))
    # one experiment per system's tau per traffic level: recomputed with the j-th system's estimate from
    # replicate r + j (mod 20), so no set holds two estimates of one replicate index (shared draws)
    for e in rel["kendall_tau"]["experiment"]:
        pts = [0, 2, 4] if e["queries_per_day"] == 1000 else [1, 3, 5]
        table = est[est["point"].isin(pts)].pivot(index="replicate", columns="point", values="estimate")[pts]
        vals = table.to_numpy()
        taus = [sps.kendalltau(xs, -np.array([vals[(r + j) % 20, j] for j in range(3)])).statistic
                for r in range(20)]
        assert e["mean"] == pytest.approx(np.mean(taus)) and e["replicates"] == 20
    # MDE curve at each traffic level of the group: (z + z) se(D) / slope
    mde = {m["queries_per_day"]: m for m in g1["mde"]}
    assert set(mde) == {1000.0, 3000.0}
    z = sps.norm.ppf(0.975) + sps.norm.ppf(0.8)
    m = mde[3000.0]
    assert m["offline_mde"][6] == pytest.approx(z * math.sqrt(2.0 / (7 * 3000)) / ols.params[0], rel=1e-9)
    assert m["offline_mde_at_simulated_days"] == pytest.approx(m["offline_mde"][1])
    lo, hi = rel["through_origin"]["slope_ci"]
    assert m["offline_mde_low"][6] == pytest.approx(z * math.sqrt(2.0 / 21000) / hi)
    assert lo < 0 and m["offline_mde_high"] == [None] * len(m["days"])  # the slope's CI reaches 0: unbounded
    assert g2["relations"][0]["n_systems"] == 3 and len(g2["mde"]) == 1
    cols = point_columns(study, obs)
    assert list(cols["point"]) == list(range(9))
    assert cols.loc[cols["point"] == 2, "truth_sign"].iloc[0] == "disagree"
    text = format_shrinkage(study)
    assert "predicts an online effect of" in text and "disagrees with the offline delta for 1 of 3" in text
    assert "MDE" in text


def test_monte_carlo_truth_near_zero_is_undetermined() -> None:
    obs, est, groups = _table()
    obs["online_effect_se"] = 0.001
    obs.loc[obs["point"].isin([2, 3]), "online_effect"] = 0.0015  # within 2 SE of 0
    study = shrinkage_study(obs, est, groups, ["users.click_model.preset"], "nDCG@10")
    rel = study["groups"][0]["relations"][0]
    assert rel["truth"] == "monte_carlo"
    assert rel["sign_agreement"]["truth"]["undetermined"] == 1
    assert rel["kendall_tau"]["truth_mc_sd"] is not None
