"""The CUPED-adjusted difference of means as a Welch-type t (onlineeval.stats.cuped_welch): Welch's test itself where
no covariate is fitted (scipy's ttest_ind), the slope's error against statsmodels' heteroscedasticity-robust (HC0)
covariance of the regression's slope, the leverage shares against the hat matrix, and the interval's coverage over
40,000 simulated small experiments per cell (within 4 binomial SEs of 0.95, where the old z interval was not)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from onlineeval.stats.cuped import cuped_mean

import statsmodels.api as sm


def _scipy_welch(a: np.ndarray, b: np.ndarray, alpha: float = 0.05):
    res = stats.ttest_ind(b, a, equal_var=False)
    return res, res.confidence_interval(1 - alpha)


@pytest.mark.parametrize("alpha", [0.05, 0.1])
def test_without_a_fitted_covariate_it_is_welchs_test(alpha: float) -> None:
    rng = np.random.default_rng(21)
    ya, yb = rng.normal(0, 1, 9), rng.normal(0.4, 2.5, 14)
    for xa, xb, ma, mb in ((np.full(9, 0.3), np.full(14, 0.3), None, None),  # a constant covariate drops out
                           (rng.normal(size=9), rng.normal(size=14), np.zeros(9, bool), np.zeros(14, bool))):
        res = cuped_mean(ya, xa, yb, xb, pre_active_a=ma, pre_active_b=mb, alpha=alpha)
        ref, ci = _scipy_welch(ya, yb, alpha)
        for part in (res.adjusted, res.unadjusted):
            assert float(part.df) == pytest.approx(ref.df, rel=1e-12)
            assert float(part.statistic) == pytest.approx(ref.statistic, rel=1e-12)
            assert float(part.pvalue) == pytest.approx(ref.pvalue, rel=1e-10)
            assert (float(part.ci_low), float(part.ci_high)) == pytest.approx((ci.low, ci.high), rel=1e-10)
        assert res.unadjusted.method == "welch" and res.adjusted.method == "cuped-welch"


def _ols(ya, xs_a, yb, xs_b):
    """statsmodels OLS of y on 1, arm and the covariates (columns of xs_*), and the within-arm centred
    covariates."""
    n_a, n_b = ya.size, yb.size
    arm = np.r_[np.zeros(n_a), np.ones(n_b)]
    cov = np.vstack([np.c_[xs_a], np.c_[xs_b]])
    fit = sm.OLS(np.r_[ya, yb], sm.add_constant(np.column_stack([arm, cov]))).fit()
    z = np.vstack([np.c_[xs_a] - np.c_[xs_a].mean(0), np.c_[xs_b] - np.c_[xs_b].mean(0)])
    return fit, z


@pytest.mark.parametrize("indicator", [False, True])
def test_variance_and_df_against_statsmodels_and_the_hat_matrix(indicator: bool) -> None:
    rng = np.random.default_rng(22)
    n_a, n_b = 11, 17
    xa, xb = rng.gamma(2.0, 1.0, n_a), rng.gamma(2.0, 1.0, n_b) + 0.4
    ma = mb = None
    if indicator:
        ma, mb = rng.random(n_a) < 0.7, rng.random(n_b) < 0.6
        xa, xb = np.where(ma, xa, 0.0), np.where(mb, xb, 0.0)
    ya = 0.7 * xa + rng.normal(0, 1, n_a)
    yb = 0.7 * xb + rng.normal(0, 2, n_b) + (0.5 * (~mb) if indicator else 0.0)
    res = cuped_mean(ya, xa, yb, xb, pre_active_a=ma, pre_active_b=mb)
    cols_a = np.c_[xa, ma.astype(float)] if indicator else xa[:, None]
    cols_b = np.c_[xb, mb.astype(float)] if indicator else xb[:, None]
    fit, z = _ols(ya, cols_a, yb, cols_b)
    p = z.shape[1]
    assert float(res.adjusted.estimate) == pytest.approx(fit.params[1], rel=1e-10)
    r = fit.resid
    lev = np.einsum("ij,jk,ik->i", z, np.linalg.inv(z.T @ z), z)  # the slope's hat matrix, diagonal
    h_a, h_b = lev[:n_a].sum(), lev[n_a:].sum()
    assert h_a + h_b == pytest.approx(p, rel=1e-12)
    f_a, f_b = n_a - 1 - h_a, n_b - 1 - h_b
    v_a, v_b = (r[:n_a] ** 2).sum() / (f_a * n_a), (r[n_a:] ** 2).sum() / (f_b * n_b)
    g = cols_b.mean(0) - cols_a.mean(0)
    slope = g @ fit.cov_HC0[2:, 2:] @ g  # statsmodels' sandwich of the slope
    assert float(res.adjusted.se) ** 2 == pytest.approx(v_a + v_b + slope, rel=1e-10)
    assert float(res.adjusted.df) == pytest.approx((v_a + v_b) ** 2 / (v_a**2 / f_a + v_b**2 / f_b), rel=1e-10)
    t = float(res.adjusted.estimate) / math.sqrt(v_a + v_b + slope)
    assert float(res.adjusted.pvalue) == pytest.approx(2 * stats.t.sf(abs(t), float(res.adjusted.df)), rel=1e-9)
    # large samples: the heteroscedasticity-robust (HC2) SE of the regression's arm coefficient
    big = np.random.default_rng(23)
    xa, xb = big.gamma(2.0, 1.0, 4000), big.gamma(2.0, 1.0, 5000)
    ya, yb = 0.7 * xa + big.normal(0, 1, 4000), 0.7 * xb + big.normal(0, 1.5, 5000)
    fit, _ = _ols(ya, xa[:, None], yb, xb[:, None])
    assert float(cuped_mean(ya, xa, yb, xb).adjusted.se) == pytest.approx(fit.HC2_se[1], rel=1e-3)


def test_an_arm_without_residual_degrees_of_freedom_is_undefined() -> None:
    # two users in arm A with the covariate's whole spread: its residual variance has nothing left to stand on
    ya, xa = np.array([0.0, 1.0]), np.array([-5.0, 5.0])
    yb, xb = np.array([0.2, 0.1, 0.3, 0.4]), np.zeros(4)
    e = cuped_mean(ya, xa, yb, xb).adjusted
    assert math.isnan(float(e.se)) and math.isnan(float(e.df)) and math.isnan(float(e.pvalue))


def _coverage(n_a: int, n_b: int, sd_b: float, seed: int, reps: int = 40_000) -> tuple[float, float]:
    """Coverage of the true difference 0 by the adjusted 95% interval, and by a z interval on the old large-sample
    variance (residual sums of squares over n_j - 1, the slope held known)."""
    rng = np.random.default_rng(seed)
    xa, xb = rng.normal(size=(reps, n_a)), rng.normal(size=(reps, n_b))
    ya = 0.8 * xa + 0.6 * rng.normal(size=(reps, n_a))
    yb = 0.8 * xb + 0.6 * sd_b * rng.normal(size=(reps, n_b))
    res = cuped_mean(ya, xa, yb, xb)
    e = res.adjusted
    new = float(np.mean((e.ci_low <= 0) & (0 <= e.ci_high)))
    theta = res.theta[..., 0]
    ra = ya - ya.mean(1, keepdims=True) - theta[:, None] * (xa - xa.mean(1, keepdims=True))
    rb = yb - yb.mean(1, keepdims=True) - theta[:, None] * (xb - xb.mean(1, keepdims=True))
    old_se = np.sqrt((ra**2).sum(1) / ((n_a - 1) * n_a) + (rb**2).sum(1) / ((n_b - 1) * n_b))
    old = float(np.mean(np.abs(e.estimate) <= stats.norm.ppf(0.975) * old_se))
    return new, old


@pytest.mark.parametrize("n_a, n_b, sd_b, seed", [(10, 10, 1.0, 31), (10, 10, 3.0, 32), (6, 20, 1.0, 33),
                                                  (30, 30, 3.0, 34)])
def test_coverage_of_small_experiments(n_a: int, n_b: int, sd_b: float, seed: int) -> None:
    reps = 40_000
    band = 4 * math.sqrt(0.05 * 0.95 / reps)
    new, old = _coverage(n_a, n_b, sd_b, seed, reps)
    assert abs(new - 0.95) <= band, new
    if n_a + n_b <= 26:  # the old z interval missed by far more than the band
        assert old < 0.95 - band, old


def test_a_welch_designs_cuped_rows_and_days_are_the_t_tests() -> None:
    """In the simulator: a ``test: welch`` A/B design's ``cuped:`` rows record the Welch-type t's df (finite, below
    the users') and CUPED's impressions needed are the t-test's at those df (the main table's own size function),
    more than z's at the same variance fit."""
    from simulations.analysis import df_model, required_impressions, variance_model
    from simulations.config import config_from_mapping
    from simulations.cuped import CUPED_PREFIX
    from simulations.job import simulate

    types = [{"name": "nav", "share": 0.6, "click_model": {"name": "cascade", "preset": "navigational"}},
             {"name": "info", "share": 0.4, "click_model": {"name": "cascade", "preset": "informational"}}]
    cfg = config_from_mapping({
        "seed": 5, "replicates": 12,
        "collection": {"n_queries": 20, "candidates": 8},
        "rankers": {"depth": 3, "B": {"noise": 0.1}, "noise_correlation": 0.0},  # an effect the days can reach
        "users": {"population": 3000, "activity": {"sigma": 1.0}, "types": types},
        "traffic": {"days": 3, "queries_per_day": 120, "batch_hours": 24},
        "designs": [{"name": "ab", "type": "ab", "metric": "clicks_per_query", "test": "welch",
                     "analysis": {"cuped": {"pre_days": 4}}}],
        "analysis": {"alpha": 0.05, "truth_impressions": 20000, "null": False, "aa": False},
    })
    result = simulate(cfg, workers=1)
    side = result.rows
    rows = side[(side["metric"] == CUPED_PREFIX + "clicks_per_query") & ~side["aa"]]
    ok = np.isfinite(rows["estimate"].to_numpy())
    df = rows["df"].to_numpy()[ok]
    assert ok.sum() > 0 and np.isfinite(df).all() and (df < rows["n_users"].to_numpy()[ok]).all()
    by_day = rows.groupby("day").agg(se=("se", "mean"), imp=("n_impressions", "mean"),
                                     df=("df", "median")).sort_index()
    fit = variance_model(by_day["imp"].to_numpy(), by_day["se"].to_numpy())
    m = result.summary["cuped"]["ab"]["metrics"]["clicks_per_query"]
    req = m["required"] if "impressions" in m["required"] else m["required_if_unbiased"]
    truth = m["true_effect"]
    t_size = required_impressions(fit, truth, 0.05, cfg.analysis.power,
                                  df_model(by_day["imp"].to_numpy(), by_day["df"].to_numpy()))
    assert req["impressions"] == pytest.approx(t_size, rel=1e-12)
    assert t_size > required_impressions(fit, truth, 0.05, cfg.analysis.power)
