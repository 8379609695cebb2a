"""CUPED against statsmodels OLS (the arm coefficient of y ~ 1 + arm + centred covariates), the
theoretical variance reduction 1 - rho^2, and Monte Carlo unbiasedness (4 SE, fixed seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onlineeval.errors import InputError
from onlineeval.stats.cuped import cuped_mean, cuped_ratio
from onlineeval.stats.online import ratio_diff_batch, welch_diff_batch

import statsmodels.api as sm


def _ols_arm(ya, xa, yb, xb, ma=None, mb=None):
    """statsmodels OLS of y on 1, arm, centred pre value (0 for inactive users) and centred indicator."""
    n_a, n_b = ya.size, yb.size
    t = np.r_[np.zeros(n_a), np.ones(n_b)]
    cols = [t]
    ma = np.ones(n_a, bool) if ma is None else ma
    mb = np.ones(n_b, bool) if mb is None else mb
    x = np.r_[np.where(ma, xa, 0.0), np.where(mb, xb, 0.0)]
    cols.append(x - x.mean())
    m = np.r_[ma, mb].astype(float)
    if 0 < m.sum() < m.size:
        cols.append(m - m.mean())
    fit = sm.OLS(np.r_[ya, yb], sm.add_constant(np.column_stack(cols))).fit()
    return fit


def test_mean_matches_statsmodels_ols_with_centred_covariate() -> None:
    rng = np.random.default_rng(7)
    n_a, n_b = 2500, 3100
    xa, xb = rng.gamma(2.0, 1.0, n_a), rng.gamma(2.0, 1.0, n_b)
    ya = 0.7 * xa + rng.normal(0, 1, n_a)
    yb = 0.7 * xb + rng.normal(0, 1.3, n_b) + 0.05
    res = cuped_mean(ya, xa, yb, xb)
    fit = _ols_arm(ya, xa, yb, xb)
    assert float(res.adjusted.estimate) == pytest.approx(fit.params[1], rel=1e-10, abs=1e-12)
    assert float(res.theta[0]) == pytest.approx(fit.params[2], rel=1e-10)
    assert float(res.theta[1]) == 0.0  # everyone active: the indicator drops out
    # SE: Welch on the adjusted values vs OLS heteroscedasticity-robust HC2 (equal up to O(1/n))
    assert float(res.adjusted.se) == pytest.approx(fit.HC2_se[1], rel=2e-3)
    # unadjusted half is exactly the Welch difference (normal reference)
    w = welch_diff_batch(ya, yb)
    assert float(res.unadjusted.estimate) == pytest.approx(float(w.estimate), rel=1e-12)
    assert float(res.unadjusted.se) == pytest.approx(float(w.se), rel=1e-12)
    assert float(res.variance_reduction) == pytest.approx(1 - float(res.adjusted.se) ** 2 / float(w.se) ** 2, rel=1e-12)


def test_mean_with_users_without_pre_period_matches_ols_with_indicator() -> None:
    rng = np.random.default_rng(8)
    n = 3000
    x = rng.normal(size=(2, n))
    active = rng.random((2, n)) < 0.7
    y = 0.6 * x + 0.8 * rng.normal(size=(2, n)) + np.where(active, 0.0, 0.5)  # new users differ
    y[1] += 0.1
    x_given = np.where(active, x, 123.0)  # whatever is stored for inactive users is ignored
    res = cuped_mean(y[0], x_given[0], y[1], x_given[1], pre_active_a=active[0], pre_active_b=active[1])
    fit = _ols_arm(y[0], x[0], y[1], x[1], active[0], active[1])
    assert float(res.adjusted.estimate) == pytest.approx(fit.params[1], rel=1e-10)
    np.testing.assert_allclose(res.theta, fit.params[2:], rtol=1e-9)
    assert float(res.adjusted.se) == pytest.approx(fit.HC2_se[1], rel=2e-3)
    assert int(res.n_without_pre) == int((~active).sum())


@pytest.mark.slow
def test_mean_variance_reduction_is_one_minus_rho_squared_and_unbiased() -> None:
    rng = np.random.default_rng(2013)
    reps, n, rho, effect = 1500, 1500, 0.6, 0.03
    shape = (reps, n)

    def arm(shift: float) -> tuple[np.ndarray, np.ndarray]:
        x = rng.normal(size=shape)
        y = rho * x + math.sqrt(1 - rho**2) * rng.normal(size=shape) + shift
        return y, x

    ya, xa = arm(0.0)
    yb, xb = arm(effect)
    res = cuped_mean(ya, xa, yb, xb)
    assert res.adjusted.shape == (reps,)
    vr = res.variance_reduction
    # reported reduction: mean over replicates vs the theoretical rho^2 (with Monte Carlo error)
    # plus the in-sample optimism of a fitted R^2 (k = 1 covariate over 2n users): at most 1 / (2n)
    assert abs(vr.mean() - rho**2) <= 4 * vr.std(ddof=1) / math.sqrt(reps) + 0.5 / n
    # realised variance of the estimates across replicates: ratio matches 1 - rho^2
    adj, raw = res.adjusted.estimate, res.unadjusted.estimate
    ratio = adj.var(ddof=1) / raw.var(ddof=1)
    # delta-method SE of a ratio of variances of two correlated estimators, by the bootstrap over replicates
    boot = np.random.default_rng(1)
    idx = boot.integers(0, reps, size=(400, reps))
    ratios = adj[idx].var(axis=1, ddof=1) / raw[idx].var(axis=1, ddof=1)
    assert abs(ratio - (1 - rho**2)) <= 4 * ratios.std(ddof=1)
    # no bias: the adjusted estimates are centred on the true effect
    assert abs(adj.mean() - effect) <= 4 * adj.std(ddof=1) / math.sqrt(reps)
    # the reported SE is the realised spread
    assert abs(np.mean(res.adjusted.se**2) / adj.var(ddof=1) - 1) <= 4 * math.sqrt(2 / (reps - 1))


def _ratio_users(rng: np.random.Generator, shape: tuple[int, ...], uplift: float):
    """Users with persistent activity and click propensity: queries Poisson(lam), clicks Binomial(q, p)."""
    lam = rng.gamma(2.0, 3.0, size=shape)
    p = rng.beta(1.0, 3.0, size=shape)
    q_pre = rng.poisson(lam)
    c_pre = rng.binomial(q_pre, p)
    q = rng.poisson(lam)
    c = rng.binomial(q, np.minimum(p + uplift, 1.0))
    return c.astype(float), q.astype(float), c_pre.astype(float), q_pre.astype(float)


@pytest.mark.slow
def test_ratio_variance_reduction_matches_population_correlation_and_is_unbiased() -> None:
    rng = np.random.default_rng(42)
    reps, n, uplift = 600, 2000, 0.02
    # the theoretical reduction 1 - Var(e - theta f - theta2 a) / Var(e), pooled over both arms as in
    # the design (arm B's uplift changes its variances), from one very large sample per arm
    big = 400_000
    stats = []
    for up in (0.0, uplift):
        c, q, cp, qp = _ratio_users(rng, (big,), up)
        e = (c - c.sum() / q.sum() * q) / q.mean()
        f = (cp - cp.sum() / qp.sum() * qp) / qp.mean()
        a = (qp > 0).astype(float)
        stats.append(np.cov(np.vstack([e, f, a])))
    cov = stats[0] + stats[1]
    theta = np.linalg.solve(cov[1:, 1:], cov[1:, 0])
    r2 = theta @ cov[1:, 0] / cov[0, 0]
    se_r2 = 2 * math.sqrt(r2) * (1 - r2) / math.sqrt(2 * big)  # Olkin-Finn SE of a squared multiple correlation
    assert 0.2 < r2 < 0.9  # the covariate is informative (sanity of the simulation)
    ca, qa, cpa, qpa = _ratio_users(rng, (reps, n), 0.0)
    cb, qb, cpb, qpb = _ratio_users(rng, (reps, n), uplift)
    res = cuped_ratio(ca, qa, cb, qb, cpa, qpa, cpb, qpb)
    assert np.all(res.n_without_pre > 0)  # Poisson activity leaves some users without a pre-period
    vr = res.variance_reduction
    # tolerance: 4 SE of both Monte Carlo means, plus the in-sample optimism of a fitted R^2
    # with k = 2 covariates over N = 2n users, E[R^2_hat] - R^2 ~ k (1 - R^2) / N <= 2 / (2n)
    assert abs(vr.mean() - r2) <= 4 * math.hypot(vr.std(ddof=1) / math.sqrt(reps), se_r2) + 1.0 / n
    adj = res.adjusted.estimate
    assert abs(adj.mean() - uplift) <= 4 * adj.std(ddof=1) / math.sqrt(reps)
    raw = ratio_diff_batch(ca, qa, cb, qb)
    np.testing.assert_allclose(res.unadjusted.estimate, raw.estimate, rtol=1e-12)
    np.testing.assert_allclose(res.unadjusted.se, raw.se, rtol=1e-10)
    assert adj.var(ddof=1) < 0.9 * raw.estimate.var(ddof=1)


def test_ratio_adjustment_formula_on_small_example() -> None:
    rng = np.random.default_rng(3)
    ca, qa, cpa, qpa = _ratio_users(rng, (300,), 0.0)
    cb, qb, cpb, qpb = _ratio_users(rng, (280,), 0.0)
    res = cuped_ratio(ca, qa, cb, qb, cpa, qpa, cpb, qpb)
    # independent recomputation: OLS of the stacked influence values on arm + (f, indicator)
    def infl(c, q):
        return (c - c.sum() / q.sum() * q) / q.mean()

    ea, eb, fa, fb = infl(ca, qa), infl(cb, qb), infl(cpa, qpa), infl(cpb, qpb)
    fit = _ols_arm(ea, np.r_[fa], eb, np.r_[fb], qpa > 0, qpb > 0)
    theta = fit.params[2:]
    want = (cb.sum() / qb.sum() - ca.sum() / qa.sum()) - theta[0] * (cpb.sum() / qpb.sum() - cpa.sum() / qpa.sum())
    want -= theta[1] * ((qpb > 0).mean() - (qpa > 0).mean())
    np.testing.assert_allclose(res.theta, theta, rtol=1e-9)
    assert float(res.adjusted.estimate) == pytest.approx(want, rel=1e-10)


def test_no_pre_data_at_all_gives_the_unadjusted_estimate_and_batches_agree() -> None:
    rng = np.random.default_rng(4)
    y = rng.normal(size=(3, 2, 50))
    x = np.zeros_like(y)
    none = np.zeros(y.shape, bool)
    res = cuped_mean(y[:, 0], x[:, 0], y[:, 1], x[:, 1], pre_active_a=none[:, 0], pre_active_b=none[:, 1])
    np.testing.assert_allclose(res.adjusted.estimate, res.unadjusted.estimate)
    np.testing.assert_allclose(res.adjusted.se, res.unadjusted.se)
    np.testing.assert_array_equal(res.theta, 0.0)
    xs = rng.normal(size=(3, 2, 50))
    batch = cuped_mean(y[:, 0], xs[:, 0], y[:, 1], xs[:, 1])
    one = cuped_mean(y[1, 0], xs[1, 0], y[1, 1], xs[1, 1])
    assert float(batch.adjusted.estimate[1]) == pytest.approx(float(one.adjusted.estimate), rel=1e-12)
    assert float(batch.adjusted.se[1]) == pytest.approx(float(one.adjusted.se), rel=1e-12)
    assert batch.adjusted[1].method == "cuped-welch"


def test_bad_input_is_refused() -> None:
    with pytest.raises(InputError, match="one value per user"):
        cuped_mean(np.zeros(5), np.zeros(4), np.zeros(5), np.zeros(5))
    with pytest.raises(InputError, match="do not broadcast"):
        cuped_mean(np.zeros((3, 5)), np.zeros((2, 5)), np.zeros(5), np.zeros(5))
    with pytest.raises(InputError, match="boolean"):
        cuped_mean(np.zeros(5), np.zeros(5), np.zeros(5), np.zeros(5), pre_active_a=np.ones(5))
    with pytest.raises(InputError, match="only finite"):
        cuped_mean(np.zeros(5), np.r_[np.zeros(4), np.nan], np.zeros(5), np.zeros(5))
    with pytest.raises(InputError, match=">= 0"):
        z = np.ones(5)
        cuped_ratio(z, z, z, z, z, -z, z, z)


def test_collinear_covariates_fall_back_to_one() -> None:
    # pre value = the activity indicator: the two covariates coincide; the estimate is OLS on one of them
    rng = np.random.default_rng(6)
    active = rng.random((2, 400)) < 0.6
    y = rng.normal(size=(2, 400)) + active
    x = active.astype(float)
    res = cuped_mean(y[0], x[0], y[1], x[1], pre_active_a=active[0], pre_active_b=active[1])
    fit = _ols_arm(y[0], x[0], y[1], x[1])  # the same regression with the single covariate
    assert float(res.adjusted.estimate) == pytest.approx(fit.params[1], rel=1e-10)
    assert float(res.theta[1]) == 0.0


def test_covariate_constant_up_to_rounding_drops_out() -> None:
    """A pre-period value equal for every user in exact arithmetic (0.3: its mean is not 0.3 exactly, so centring
    leaves ~1e-17 residuals) and pre-period ratios equal for every user (0.3 clicks a query, not dyadic): the
    covariate drops out as an exactly constant one would (theta 0, the unadjusted or the indicator-only estimate,
    bit for bit), instead of a coefficient of ~1e13 fitted on rounding noise. A covariate with a real variation
    of 1e-6 of its level is still used (statsmodels' slope)."""
    rng = np.random.default_rng(31)
    n = 3001
    y = rng.normal(size=(2, n))
    noisy = np.full((2, n), 0.1) + 0.2  # 0.30000000000000004 everywhere: centring leaves rounding residuals
    res = cuped_mean(y[0], noisy[0] * np.linspace(1, 1 + 1e-15, n), y[1], noisy[1])
    assert float(res.theta[0]) == 0.0
    assert float(res.adjusted.estimate) == float(res.unadjusted.estimate)
    assert float(res.adjusted.se) == float(res.unadjusted.se)
    # pre-period ratios all 0.3 (3 clicks per 10 queries, times an activity): f is rounding noise
    q = rng.integers(1, 20, size=(2, n)) * 10.0
    q[:, :500] = 0.0  # users without pre-period activity: the indicator stays a covariate
    p = q * 0.3
    den = rng.poisson(3.0, size=(2, n)).astype(float) + 1.0
    num = rng.binomial(den.astype(int), 0.3).astype(float) + 0.5 * (q > 0)
    got = cuped_ratio(num[0], den[0], num[1], den[1], pre_num_a=p[0], pre_den_a=q[0], pre_num_b=p[1], pre_den_b=q[1])
    free = cuped_ratio(num[0], den[0], num[1], den[1], pre_num_a=0 * p[0], pre_den_a=q[0], pre_num_b=0 * p[1],
                       pre_den_b=q[1])  # f exactly 0, the same indicator
    assert float(got.theta[0]) == 0.0 and float(got.theta[1]) != 0.0
    assert float(got.adjusted.estimate) == float(free.adjusted.estimate)
    assert float(got.adjusted.se) == float(free.adjusted.se)
    # a real (if small) variation is kept
    x = 1.0 + 1e-6 * rng.normal(size=(2, n))
    yx = y + 2e5 * (x - 1.0)
    kept = cuped_mean(yx[0], x[0], yx[1], x[1])
    fit = _ols_arm(yx[0], x[0], yx[1], x[1])
    assert float(kept.theta[0]) == pytest.approx(fit.params[2], rel=1e-6)
    assert float(kept.adjusted.estimate) == pytest.approx(fit.params[1], rel=1e-6, abs=1e-9)


def test_aa_false_positive_rate_of_the_adjusted_tests() -> None:
    rng = np.random.default_rng(12)
    reps, n = 3000, 800
    x = rng.gamma(2.0, 1.0, size=(2, reps, n))
    y = 0.8 * x + rng.normal(size=(2, reps, n))
    active = rng.random((2, reps, n)) < 0.8
    res = cuped_mean(y[0], x[0], y[1], x[1], pre_active_a=active[0], pre_active_b=active[1])
    band = 4 * math.sqrt(0.05 * 0.95 / reps)
    assert abs(res.adjusted.significant.mean() - 0.05) <= band
    ca, qa, cpa, qpa = _ratio_users(rng, (reps, n), 0.0)
    cb, qb, cpb, qpb = _ratio_users(rng, (reps, n), 0.0)
    rr = cuped_ratio(ca, qa, cb, qb, cpa, qpa, cpb, qpb)
    assert abs(rr.adjusted.significant.mean() - 0.05) <= band


def test_pre_period_broadcasts_over_daily_checkpoints() -> None:
    rng = np.random.default_rng(13)
    reps, days, n = 3, 4, 60
    x = rng.normal(size=(2, reps, n))
    y = rng.normal(size=(2, reps, days, n)) + x[:, :, None, :]
    res = cuped_mean(y[0], x[0][:, None, :], y[1], x[1][:, None, :])
    assert res.adjusted.shape == (reps, days)
    one = cuped_mean(y[0, 2, 1], x[0, 2], y[1, 2, 1], x[1, 2])
    assert float(res.adjusted.estimate[2, 1]) == pytest.approx(float(one.adjusted.estimate), rel=1e-12)
    assert float(res.adjusted.se[2, 1]) == pytest.approx(float(one.adjusted.se), rel=1e-12)
