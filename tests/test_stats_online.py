"""Online-experiment statistics checked against scipy, statsmodels and exact values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st

from onlineeval.errors import InputError
from onlineeval.stats import (
    Estimate,
    binomial_band,
    cluster_bootstrap_ratio,
    ratio_diff,
    ratio_diff_batch,
    ratio_mean_batch,
    welch_diff_batch,
    ratio_linearization,
    ratio_mean,
    welch_diff,
)

import statsmodels.api as sm
from statsmodels.stats.weightstats import CompareMeans, DescrStatsW  # noqa: E402
from scipy_seed import seeded  # noqa: E402  (rng= from scipy 1.15, random_state= before)


def _query_level(rng: np.random.Generator, n_users: int, p_shift: float = 0.0):
    """Query-level clicks of users with heavy-tailed activity; returns per-user sums too."""
    queries = 1 + rng.geometric(0.2, size=n_users)  # >= 2 queries per user, mean 6
    p_user = np.clip(rng.beta(2, 5, size=n_users) + p_shift, 0, 1)
    user = np.repeat(np.arange(n_users), queries)
    clicks = (rng.random(user.size) < p_user[user]).astype(float)
    num = np.bincount(user, weights=clicks, minlength=n_users)
    return user, clicks, num, queries.astype(float)


# ----------------------------------------------------------------------------- Welch


@pytest.mark.parametrize(("na", "nb", "seed"), [(5, 7, 0), (50, 70, 1), (400, 300, 2)])
def test_welch_matches_scipy_and_statsmodels(na: int, nb: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = rng.normal(0.0, 1.0, na)
    b = rng.lognormal(0.2, 0.8, nb)
    est = welch_diff(a, b, alpha=0.1)
    ref = st.ttest_ind(b, a, equal_var=False)
    ci = ref.confidence_interval(confidence_level=0.9)
    assert est.estimate == pytest.approx(b.mean() - a.mean(), rel=1e-12)
    assert est.statistic == pytest.approx(ref.statistic, rel=1e-10)
    assert est.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    assert est.df == pytest.approx(ref.df, rel=1e-10)
    assert (est.ci_low, est.ci_high) == pytest.approx((ci.low, ci.high), rel=1e-10)
    cm = CompareMeans(DescrStatsW(b), DescrStatsW(a))
    lo, hi = cm.tconfint_diff(alpha=0.1, usevar="unequal")
    tstat, pval, df = cm.ttest_ind(usevar="unequal")
    assert (est.ci_low, est.ci_high) == pytest.approx((lo, hi), rel=1e-10)
    assert est.pvalue == pytest.approx(pval, rel=1e-9)
    assert est.df == pytest.approx(df, rel=1e-10)
    assert est.se == pytest.approx(cm.std_meandiff_separatevar, rel=1e-12)
    assert est.n == na + nb and est.method == "welch" and est.reference == pytest.approx(a.mean())


def test_welch_null_shift_equals_shifted_data() -> None:
    rng = np.random.default_rng(3)
    a, b = rng.normal(size=30), rng.normal(0.5, 2.0, size=40)
    est = welch_diff(a, b, null=0.4)
    ref = st.ttest_ind(b - 0.4, a, equal_var=False)
    assert est.pvalue == pytest.approx(ref.pvalue, rel=1e-9)
    assert est.estimate == pytest.approx(b.mean() - a.mean())


def test_welch_zero_variance_convention() -> None:
    same = welch_diff(np.zeros(10), np.zeros(12))
    assert (same.pvalue, same.se, same.ci_low, same.ci_high, same.statistic) == (1.0, 0.0, 0.0, 0.0, 0.0)
    diff = welch_diff(np.zeros(10), np.ones(12))
    assert diff.pvalue == 0.0 and diff.statistic == math.inf


# ----------------------------------------------------------------------------- delta method


def test_ratio_with_unit_denominators_is_the_mean_and_its_se() -> None:
    rng = np.random.default_rng(4)
    x = rng.poisson(3.0, 200).astype(float)
    est = ratio_mean(x, np.ones_like(x), alpha=0.05)
    assert est.estimate == pytest.approx(x.mean(), rel=1e-14)
    assert est.se == pytest.approx(st.sem(x), rel=1e-12)
    assert est.pvalue == pytest.approx(2 * st.norm.sf(x.mean() / st.sem(x)), rel=1e-9)
    z = st.norm.ppf(0.975)
    assert (est.ci_low, est.ci_high) == pytest.approx((x.mean() - z * st.sem(x), x.mean() + z * st.sem(x)))
    # and the two-arm version reduces to a z-test with Welch's standard error
    y = rng.poisson(3.5, 150).astype(float)
    d = ratio_diff(x, np.ones_like(x), y, np.ones_like(y))
    w = welch_diff(x, y)
    assert d.estimate == pytest.approx(w.estimate) and d.se == pytest.approx(w.se, rel=1e-12)
    assert d.df == math.inf and d.method == "delta"


def test_ratio_mean_equals_statsmodels_cluster_robust_mean() -> None:
    """The delta-method SE is the user-clustered SE of the mean query-level value."""
    rng = np.random.default_rng(5)
    user, clicks, num, den = _query_level(rng, 300)
    est = ratio_mean(num, den)
    fit = sm.OLS(clicks, np.ones((clicks.size, 1))).fit(cov_type="cluster", cov_kwds={"groups": user})
    assert est.estimate == pytest.approx(fit.params[0], rel=1e-12)
    assert est.se == pytest.approx(fit.bse[0], rel=1e-10)
    assert est.n == 300


def test_ratio_diff_equals_statsmodels_clustered_regression() -> None:
    rng = np.random.default_rng(6)
    ua, ca, na_, da = _query_level(rng, 250)
    ub, cb, nb_, db = _query_level(rng, 250, p_shift=0.02)
    y = np.concatenate([ca, cb])
    treat = np.concatenate([np.zeros(ca.size), np.ones(cb.size)])
    groups = np.concatenate([ua, ub + 250])
    X = np.column_stack([np.ones_like(y), treat])
    fit = sm.OLS(y, X).fit(cov_type="cluster", cov_kwds={"groups": groups, "use_correction": False})
    est = ratio_diff(na_, da, nb_, db)
    assert est.estimate == pytest.approx(fit.params[1], rel=1e-10)
    # ours uses ddof-1 moments per arm: factor n/(n-1) on the uncorrected (CR0) sandwich
    assert est.se**2 == pytest.approx(fit.bse[1] ** 2 * 250 / 249, rel=1e-10)
    assert est.reference == pytest.approx(fit.params[0], rel=1e-12)
    sa, sb = ratio_mean(na_, da), ratio_mean(nb_, db)
    assert est.se**2 == pytest.approx(sa.se**2 + sb.se**2, rel=1e-12)
    assert est.pvalue == pytest.approx(2 * st.norm.sf(abs(est.estimate) / est.se), rel=1e-9)


def test_ratio_linearization_matches_delta_variance() -> None:
    rng = np.random.default_rng(7)
    _, _, num, den = _query_level(rng, 100)
    r, e = ratio_linearization(num, den)
    assert r == pytest.approx(num.sum() / den.sum())
    assert e.mean() == pytest.approx(0.0, abs=1e-12)
    assert math.sqrt(e.var(ddof=1) / e.size) == pytest.approx(ratio_mean(num, den).se, rel=1e-10)


def test_interleaving_preference_identity() -> None:
    """num = (wins - losses)/2, den = clicked impressions gives (w + t/2)/(w+l+t) - 1/2."""
    rng = np.random.default_rng(8)
    wins, losses, ties = (rng.poisson(lam, 80) for lam in (3.0, 2.0, 1.0))
    den = wins + losses + ties
    est = ratio_mean((wins - losses) / 2.0, den)
    w, l_, t = wins.sum(), losses.sum(), ties.sum()
    assert est.estimate == pytest.approx((w + t / 2) / (w + l_ + t) - 0.5, rel=1e-12)


def test_delta_method_coverage_under_aa() -> None:
    """A/A false-positive rate of ratio_diff over 600 data sets lies in the 99% binomial band."""
    rng = np.random.default_rng(9)
    n_rep, rejections = 600, 0
    for _ in range(n_rep):
        _, _, xa, ya = _query_level(rng, 300)
        _, _, xb, yb = _query_level(rng, 300)
        rejections += ratio_diff(xa, ya, xb, yb).pvalue < 0.05
    assert binomial_band(n_rep, 0.05).contains(rejections)


# ----------------------------------------------------------------------------- bootstrap


def test_bootstrap_se_agrees_with_delta_method() -> None:
    rng = np.random.default_rng(10)
    _, _, num, den = _query_level(rng, 800)
    B = 20_000
    boot = cluster_bootstrap_ratio(num, den, B, np.random.default_rng(11))
    delta = ratio_mean(num, den)
    assert boot.estimate == delta.estimate
    # MC relative SE of a bootstrap SD ~ 1/sqrt(2B); bootstrap uses ddof-0 moments
    # (factor sqrt((n-1)/n)) and the delta method is first-order: allow 4 MC SE + 1/n.
    tol = 4.0 / math.sqrt(2 * B) + 1.0 / num.size
    assert boot.se / delta.se == pytest.approx(1.0, abs=tol)


def test_bootstrap_ci_agrees_with_scipy_percentile_bootstrap() -> None:
    rng = np.random.default_rng(12)
    _, _, num, den = _query_level(rng, 400)
    B = 20_000
    ours = cluster_bootstrap_ratio(num, den, B, np.random.default_rng(13), alpha=0.05)
    ref = st.bootstrap(
        (num, den),
        lambda x, y, axis: x.sum(axis=axis) / y.sum(axis=axis),
        paired=True,
        vectorized=True,
        n_resamples=B,
        method="percentile",
        confidence_level=0.95,
        **seeded(14),
    )
    # MC SE of a 2.5% quantile ~ se * sqrt(q(1-q)/B) / phi(z_q); two independent runs
    q_se = ours.se * math.sqrt(0.025 * 0.975 / B) / st.norm.pdf(st.norm.ppf(0.025))
    tol = 4 * math.sqrt(2) * q_se
    assert ours.ci_low == pytest.approx(ref.confidence_interval.low, abs=tol)
    assert ours.ci_high == pytest.approx(ref.confidence_interval.high, abs=tol)
    assert ours.se == pytest.approx(ref.standard_error, rel=4 * math.sqrt(2) / math.sqrt(2 * B))


def test_bootstrap_seeded_and_does_not_touch_inputs() -> None:
    rng = np.random.default_rng(15)
    _, _, num, den = _query_level(rng, 50)
    num0, den0 = num.copy(), den.copy()
    r1 = cluster_bootstrap_ratio(num, den, 500, np.random.default_rng(1))
    r2 = cluster_bootstrap_ratio(num, den, 500, np.random.default_rng(1))
    r3 = cluster_bootstrap_ratio(num, den, 500, np.random.default_rng(2))
    assert r1 == r2 and r1 != r3
    np.testing.assert_array_equal(num, num0)
    np.testing.assert_array_equal(den, den0)


def test_bootstrap_blocks_do_not_change_the_stream_contract(monkeypatch: pytest.MonkeyPatch) -> None:
    """Replicates drawn in several blocks are the same as one big draw of the same stream."""
    import onlineeval.stats.online as online

    rng = np.random.default_rng(16)
    _, _, num, den = _query_level(rng, 63)
    big = cluster_bootstrap_ratio(num, den, 300, np.random.default_rng(3))
    monkeypatch.setattr(online, "_BOOT_BLOCK_CELLS", 63 * 7)  # blocks of 7 replicates
    small = cluster_bootstrap_ratio(num, den, 300, np.random.default_rng(3))
    assert small == big


def test_bootstrap_pvalue_extremes() -> None:
    x = np.arange(1.0, 41.0)
    far = cluster_bootstrap_ratio(x, np.ones_like(x), 999, np.random.default_rng(0))
    assert far.pvalue == pytest.approx(2 / 1000)  # every replicate is above 0
    centred = cluster_bootstrap_ratio(x - x.mean(), np.ones_like(x), 999, np.random.default_rng(0))
    assert centred.pvalue > 0.5 and centred.ci_low < 0 < centred.ci_high


# ----------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("num", "den", "fragment"),
    [
        ([1.0, 2.0, 3.0], [1.0, 1.0], "one value per user"),
        ([1.0, np.nan], [1.0, 1.0], "finite"),
        ([1.0, 2.0], [1.0, -1.0], ">= 0"),
        ([0.0, 0.0], [0.0, 0.0], "sum to 0"),
        ([1.0], [1.0], "at least 2"),
        ([[1.0, 2.0]], [[1.0, 1.0]], "1-d"),
        (["a", "b"], [1.0, 1.0], "numbers"),
    ],
)
def test_ratio_bad_input(num: list, den: list, fragment: str) -> None:
    with pytest.raises(InputError, match=fragment):
        ratio_mean(num, den)


def test_bad_parameters() -> None:
    with pytest.raises(ValueError, match="alpha"):
        welch_diff([1.0, 2.0], [1.0, 3.0], alpha=1.5)
    with pytest.raises(InputError, match="x_b"):
        welch_diff([1.0, 2.0], [1.0])
    with pytest.raises(TypeError, match="Generator"):
        cluster_bootstrap_ratio([1.0, 2.0], [1.0, 1.0], 100, 42)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="positive denominator"):
        cluster_bootstrap_ratio([0.0, 0.0, 1.0], [0.0, 0.0, 1.0], 2000, np.random.default_rng(0))


def test_estimate_record() -> None:
    est = welch_diff([0.0, 1.0, 2.0], [1.0, 2.0, 4.0])
    assert isinstance(est, Estimate)
    d = est.to_dict()
    assert set(d) >= {"estimate", "se", "ci_low", "ci_high", "pvalue", "n", "df", "method"}
    with pytest.raises(AttributeError):
        est.estimate = 0.0  # type: ignore[misc]
    assert est.significant == (est.pvalue < est.alpha)


# ----------------------------------------------------------------------------- batches


def test_batches_equal_row_by_row_results() -> None:
    rng = np.random.default_rng(20)
    num_a = rng.poisson(2.0, (4, 3, 120)).astype(float)
    den_a = num_a + rng.poisson(3.0, num_a.shape)
    num_b = rng.poisson(2.2, (3, 90)).astype(float)  # broadcasts against (4, 3)
    den_b = num_b + rng.poisson(3.0, num_b.shape)
    batch = ratio_diff_batch(num_a, den_a, num_b, den_b, alpha=0.1)
    welch = welch_diff_batch(num_a, num_b, alpha=0.1)
    ratio = ratio_mean_batch(num_a, den_a)
    assert batch.shape == welch.shape == ratio.shape[:2] == (4, 3)
    for i in range(4):
        for j in range(3):
            one = ratio_diff(num_a[i, j], den_a[i, j], num_b[j], den_b[j], alpha=0.1)
            for name in ("estimate", "se", "ci_low", "ci_high", "pvalue", "statistic", "reference"):
                assert getattr(batch[i, j], name) == pytest.approx(getattr(one, name), rel=1e-12)
            ref = st.ttest_ind(num_b[j], num_a[i, j], equal_var=False)
            assert welch[i, j].pvalue == pytest.approx(ref.pvalue, rel=1e-9)
            assert welch[i, j].df == pytest.approx(ref.df, rel=1e-10)
            assert ratio[i, j] == ratio_mean(num_a[i, j], den_a[i, j])
    frame = batch.to_frame()
    assert len(frame) == 12 and frame["pvalue"].iloc[5] == pytest.approx(batch[1, 2].pvalue)
    with pytest.raises(IndexError):
        batch[0]


def test_batch_rows_without_denominator_are_nan() -> None:
    """A checkpoint at which no user has a query yet gives NaN, not a number or an error."""
    num = np.array([[0.0, 0.0, 0.0], [1.0, 0.0, 2.0]])
    den = np.array([[0.0, 0.0, 0.0], [2.0, 1.0, 3.0]])
    est = ratio_mean_batch(num, den)
    assert np.isnan(est.estimate[0]) and np.isnan(est.pvalue[0]) and np.isnan(est.ci_low[0])
    assert not est.significant[0]
    assert est[1] == ratio_mean(num[1], den[1])
    with pytest.raises(InputError, match="same shape"):
        ratio_mean_batch(num, den[:, :2])


def test_batched_aa_false_positive_rate_in_binomial_band() -> None:
    """2,000 A/A data sets analysed in one batched call: rejections within the 99% band."""
    rng = np.random.default_rng(21)
    reps, users = 2000, 400
    queries = 1 + rng.geometric(0.25, size=(reps, 2, users))
    p_user = rng.beta(2, 5, size=(reps, 2, users))
    clicks = rng.binomial(queries, p_user).astype(float)
    est = ratio_diff_batch(clicks[:, 0], queries[:, 0], clicks[:, 1], queries[:, 1])
    assert binomial_band(reps, 0.05).contains(int(est.significant.sum()))
    welch = welch_diff_batch(clicks[:, 0] / queries[:, 0], clicks[:, 1] / queries[:, 1])
    assert binomial_band(reps, 0.05).contains(int(welch.significant.sum()))
