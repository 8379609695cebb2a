"""CUPED for few users (onlineeval.stats.cuped_cr2): the closed forms against the dense impression-level computation
(the regression with user-level covariates, each cluster's (I - H_gg)^(-1/2), Bell and McCaffrey's degrees of
freedom from full matrices under the correlated working model), the estimate against statsmodels' OLS, the
reduction to ratio_diff_cr2 where no covariate is fitted, and the interval's coverage of simulated A/A experiments
with few users (within 4 binomial SEs of 0.95)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from onlineeval.errors import InputError
from onlineeval.stats import ratio_diff_cr2
from onlineeval.stats.cuped_cr2 import covariates, cuped_ratio_cr2, cuped_ratio_cr2_values, explained_share

import statsmodels.api as sm


def _users(rng, m, types=True):
    """``m`` users' impressions (1-7 each), their per-impression clicks (a user's own rate: one of two types) and
    pre-period sums (the same rate; some users without pre-period activity)."""
    y = rng.integers(1, 8, m).astype(float)
    rate = np.where(rng.random(m) < 0.5, 0.15, 0.6) if types else np.full(m, 0.3)
    values = [rng.binomial(1, rate[i], int(y[i])).astype(float) for i in range(m)]
    pre_den = np.where(rng.random(m) < 0.75, rng.integers(1, 9, m), 0).astype(float)
    pre_num = rng.binomial(pre_den.astype(int), rate).astype(float)
    return values, y, pre_num, pre_den


def _dense(values, in_b, z, icc):
    """The textbook computation on impression-level matrices: (estimate, CR2 variance, df)."""
    rows, cluster = [], []
    for i, v in enumerate(values):
        for _ in v:
            rows.append(np.r_[float(not in_b[i]), float(in_b[i]), z[i]])
            cluster.append(i)
    x = np.array(rows)
    cluster = np.array(cluster)
    v = np.concatenate(values)
    xtx_inv = np.linalg.pinv(x.T @ x)
    c = np.zeros(x.shape[1])
    c[0], c[1] = -1.0, 1.0
    est = c @ xtx_inv @ x.T @ v
    h = x @ xtx_inv @ x.T
    m_res = np.eye(len(v)) - h
    # B: the CR2 variance as v' M' B M v, B block-diagonal with the clusters' p_g p_g'
    b = np.zeros((len(v), len(v)))
    for g in range(len(values)):
        idx = np.flatnonzero(cluster == g)
        w, vec = np.linalg.eigh(np.eye(idx.size) - h[np.ix_(idx, idx)])
        a_g = (vec / np.sqrt(w)) @ vec.T
        p_g = a_g @ x[idx] @ xtx_inv @ c
        b[np.ix_(idx, idx)] = np.outer(p_g, p_g)
    quad = m_res.T @ b @ m_res
    var = v @ quad @ v
    omega = np.zeros_like(b)
    for g in range(len(values)):
        idx = np.flatnonzero(cluster == g)
        omega[np.ix_(idx, idx)] = (1 - icc) * np.eye(idx.size) + icc
    ao = quad @ omega
    return est, var, np.trace(ao) ** 2 / np.trace(ao @ ao)


@pytest.mark.parametrize("icc", [0.0, 0.35])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_closed_forms_equal_the_dense_computation(seed: int, icc: float) -> None:
    rng = np.random.default_rng(seed)
    values, y, pre_num, pre_den = _users(rng, 13)
    in_b = np.zeros(13, bool)
    in_b[rng.permutation(13)[:6]] = True
    x = np.array([v.sum() for v in values])
    z = covariates(pre_num, pre_den)
    (est, se, lo, hi, p), df, theta, _ = cuped_ratio_cr2_values(x, y, in_b, z, icc=icc)
    ref_est, ref_var, ref_df = _dense(values, in_b, z, icc)
    assert est == pytest.approx(ref_est, rel=1e-10, abs=1e-12)
    assert se**2 == pytest.approx(ref_var, rel=1e-9)
    assert df == pytest.approx(ref_df, rel=1e-9)
    q = stats.t.ppf(0.975, df)
    assert (lo, hi) == pytest.approx((est - q * se, est + q * se), rel=1e-10)
    assert p == pytest.approx(2 * stats.t.sf(abs(est / se), df), rel=1e-9)
    # the estimate: statsmodels' OLS of the impressions' clicks on the arm and the users' covariates
    arm = np.concatenate([np.full(v.size, float(in_b[i])) for i, v in enumerate(values)])
    cov = np.concatenate([np.repeat(z[i][None, :], v.size, axis=0) for i, v in enumerate(values)])
    fit = sm.OLS(np.concatenate(values), sm.add_constant(np.column_stack([arm, cov]))).fit()
    assert est == pytest.approx(fit.params[1], rel=1e-9, abs=1e-12)
    np.testing.assert_allclose(theta, fit.params[2:], rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("icc", [0.0, 0.4])
def test_without_a_fitted_covariate_it_is_ratio_diff_cr2(icc: float) -> None:
    rng = np.random.default_rng(7)
    values, y, _, _ = _users(rng, 20)
    x = np.array([v.sum() for v in values])
    ref = ratio_diff_cr2(x[:9], y[:9], x[9:], y[9:], icc=icc)
    for pre_num, pre_den in ((np.zeros(20), np.zeros(20)),  # nobody has a pre-period
                             (np.full(20, 3.0), np.full(20, 10.0))):  # everyone the same pre-period ratio
        e = cuped_ratio_cr2(x[:9], y[:9], x[9:], y[9:], pre_num[:9], pre_den[:9], pre_num[9:], pre_den[9:], icc=icc)
        assert (e.estimate, e.se, e.df) == pytest.approx((ref.estimate, ref.se, ref.df), rel=1e-12)
        assert e.method == "cuped-cr2-t"


def test_a_covariate_one_user_holds_drops_out() -> None:
    """One user of arm A without pre-period activity: the indicator is that user's own (leverage 1, the CR2 variance
    undefined), so it drops out and the estimate is the fit with the pre-period ratio alone; with the indicator too
    the dense computation's adjustment would divide by 0."""
    rng = np.random.default_rng(9)
    values, y, pre_num, pre_den = _users(rng, 12)
    pre_den = np.where(pre_den > 0, pre_den, 3.0)
    pre_num = np.minimum(pre_num, pre_den)
    pre_den[2], pre_num[2] = 0.0, 0.0  # the one user of arm A (users 0-5) without pre-period activity
    in_b = np.arange(12) >= 6
    x = np.array([v.sum() for v in values])
    z = covariates(pre_num, pre_den)
    (est, se, _, _, _), df, theta, explained = cuped_ratio_cr2_values(x, y, in_b, z, icc=0.2)
    assert math.isfinite(se) and theta[1] == 0.0
    (est1, se1, _, _, _), df1, theta1, explained1 = cuped_ratio_cr2_values(x, y, in_b, z[:, :1], icc=0.2)
    assert (est, se, df, theta[0], explained) == (est1, se1, df1, theta1[0], explained1)
    ref_est, ref_var, ref_df = _dense(values, in_b, z[:, :1], 0.2)
    assert (est, se**2, df) == pytest.approx((ref_est, ref_var, ref_df), rel=1e-9)
    assert 0.0 <= explained <= 1.0


def test_explained_share_is_the_residual_reduction() -> None:
    rng = np.random.default_rng(10)
    values, y, pre_num, pre_den = _users(rng, 30)
    in_b = np.arange(30) % 2 == 1
    x = np.array([v.sum() for v in values])
    z = covariates(pre_num, pre_den)
    _, _, theta, explained = cuped_ratio_cr2_values(x, y, in_b, z)
    alone = explained_share(x, y, in_b, z)  # the fit without the variance: the same share and coefficients
    assert alone[0] == explained and np.array_equal(alone[1], theta)
    fit, resid = _impression_fit(values, in_b, z)
    raw = _impression_fit(values, in_b, z[:, :0])[1]
    starts = np.r_[0, np.cumsum(y)[:-1]].astype(int)
    per_user = [np.add.reduceat(r, starts) for r in (resid, raw)]
    assert explained == pytest.approx(1 - (per_user[0] ** 2).sum() / (per_user[1] ** 2).sum(), rel=1e-9)
    # the pre-period ratio alone (the design's rho row): the one-covariate regression's residuals and coefficient
    share, theta1 = explained_share(x, y, in_b, z[:, :1])
    fit1, resid1 = _impression_fit(values, in_b, z[:, :1])
    own = np.add.reduceat(resid1, starts)
    assert share == pytest.approx(1 - (own**2).sum() / (per_user[1] ** 2).sum(), rel=1e-9)
    assert theta1[0] == pytest.approx(fit1.params[2], rel=1e-9) and 0 < share < explained


def _impression_fit(values, in_b, z):
    arm = np.concatenate([np.full(v.size, float(in_b[i])) for i, v in enumerate(values)])
    cov = np.concatenate([np.repeat(z[i][None, :], v.size, axis=0) for i, v in enumerate(values)])
    fit = sm.OLS(np.concatenate(values), sm.add_constant(np.column_stack([arm, cov]))).fit()
    return fit, fit.resid


def test_bad_input_is_refused() -> None:
    ok = np.ones(4)
    with pytest.raises(InputError, match="pre_den_b: 3 values for 4 users"):
        cuped_ratio_cr2(ok, ok, ok, ok, ok, ok, ok, np.ones(3))
    with pytest.raises(InputError, match="pre_num_a"):
        cuped_ratio_cr2(ok, ok, ok, ok, -ok, ok, ok, ok)
    with pytest.raises(InputError, match="icc"):
        cuped_ratio_cr2(ok, ok, ok, ok, ok, ok, ok, ok, icc=1.5)


def _aa_coverage(m: int, reps: int, seed: int) -> tuple[float, float]:
    """A/A experiments of ``m`` users per arm (two user types, activity 1-7 impressions, pre-period on the same
    rates): the coverage of 0 by the CR2 CUPED interval at the estimated intra-user correlation, and by the delta
    method's CUPED z interval (onlineeval.stats.cuped_ratio) on the same data."""
    from onlineeval.stats import intra_user_correlation
    from onlineeval.stats.cuped import cuped_ratio

    rng = np.random.default_rng(seed)
    hits = [0, 0]
    for _ in range(reps):
        values, y, pre_num, pre_den = _users(rng, 2 * m)
        x = np.array([v.sum() for v in values])
        sq = np.array([(v * v).sum() for v in values])
        in_b = np.r_[np.zeros(m, bool), np.ones(m, bool)]
        rho = intra_user_correlation(x, y, sq, in_b)
        (_, _, lo, hi, _), _, _, _ = cuped_ratio_cr2_values(x, y, in_b, covariates(pre_num, pre_den), icc=rho)
        hits[0] += lo <= 0.0 <= hi
        old = cuped_ratio(x[:m], y[:m], x[m:], y[m:], pre_num[:m], pre_den[:m], pre_num[m:], pre_den[m:]).adjusted
        hits[1] += float(old.ci_low) <= 0.0 <= float(old.ci_high)
    return hits[0] / reps, hits[1] / reps


@pytest.mark.slow
@pytest.mark.parametrize("m, seed", [(10, 41), (20, 42)])
def test_coverage_with_few_users(m: int, seed: int) -> None:
    reps = 4000
    band = 4 * math.sqrt(0.05 * 0.95 / reps)
    new, old = _aa_coverage(m, reps, seed)
    assert abs(new - 0.95) <= band, new
    assert old < 0.95 - band, old  # the delta method's z interval of CUPED undercovers there
