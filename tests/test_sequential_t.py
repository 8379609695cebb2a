"""``sequential_test`` on looks whose statistics are Student t's (the counterfactual design's, ``welch``'s and
``delta_t``'s rows): the fixed-horizon and peeking tests with the t's p-values, the mixture and spending rules with
each t as the normal deviate of the same tail probability (Jennison and Turnbull's significance level approach),
against scipy's t and normal distributions and by Monte Carlo of t-tests looked at repeatedly; without degrees of
freedom (or with inf) the z tests as before."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from onlineeval.stats.sequential import sequential_test


def test_fixed_and_peeking_take_the_looks_t() -> None:
    rng = np.random.default_rng(7)
    est = rng.normal(0.0, 1.0, (400, 5))
    se = np.ones((400, 5))
    df = rng.uniform(1.5, 40.0, (400, 5))
    df[::7] = np.inf  # z's looks
    alpha = 0.05
    crit = np.where(np.isfinite(df), stats.t.ppf(1 - alpha / 2, np.where(np.isfinite(df), df, 1.0)),
                    stats.norm.ppf(1 - alpha / 2))
    fixed = sequential_test(est, se, "none", alpha=alpha, df=df)
    np.testing.assert_array_equal(fixed.reject, np.abs(est[:, -1]) >= crit[:, -1])
    peek = sequential_test(est, se, "peeking", alpha=alpha, df=df)
    p = np.where(np.isfinite(df), 2 * stats.t.sf(np.abs(est), np.where(np.isfinite(df), df, 1.0)),
                 2 * stats.norm.sf(np.abs(est)))
    first = np.argmax(p < alpha, axis=1)
    np.testing.assert_array_equal(peek.reject, (p < alpha).any(axis=1))
    np.testing.assert_array_equal(peek.stop_look[peek.reject], first[peek.reject])
    assert fixed.reject.sum() < sequential_test(est, se, "none", alpha=alpha).reject.sum()  # t is wider than z
    # every look z's: the z tests exactly
    for kind in ("none", "peeking"):
        a, b = sequential_test(est, se, kind, alpha=alpha, df=np.inf), sequential_test(est, se, kind, alpha=alpha)
        np.testing.assert_array_equal(a.reject, b.reject)
        np.testing.assert_array_equal(a.stop_look, b.stop_look)


@pytest.mark.parametrize("kind", ["obrien_fleming", "pocock"])
def test_spending_rules_compare_the_looks_t_p_values_with_their_nominal_levels(kind: str) -> None:
    # Jennison and Turnbull's significance level approach, written the other way round: the z boundaries' nominal
    # two-sided levels 2 Phi(-c_k) against each look's t-test p-value from scipy (the code maps t to z instead)
    from onlineeval.stats.sequential import equal_fractions, spending_boundaries

    rng = np.random.default_rng(8)
    est, se = rng.normal(0.0, 1.3, (600, 5)), rng.uniform(0.5, 1.0, (600, 5))
    df = np.broadcast_to(np.array([2.5, 5.0, 9.0, 14.0, 20.0]), est.shape).copy()
    df[::5] = np.inf  # z's looks
    c = spending_boundaries(equal_fractions(5), 0.05, kind).upper
    fin = np.isfinite(df)
    t = est / se
    p = np.where(fin, 2 * stats.t.sf(np.abs(t), np.where(fin, df, 1.0)), 2 * stats.norm.sf(np.abs(t)))
    cross = p <= 2 * stats.norm.sf(c)
    got = sequential_test(est, se, kind, fractions=equal_fractions(5), df=df)
    np.testing.assert_array_equal(got.reject, cross.any(axis=1))
    np.testing.assert_array_equal(got.stop_look[got.reject], np.argmax(cross, axis=1)[got.reject])
    z = sequential_test(est, se, kind, fractions=equal_fractions(5))
    assert got.reject.sum() < z.reject.sum()  # the t's tails are heavier: fewer crossings than z on the same t
    plain = sequential_test(est, se, kind, df=np.inf)
    np.testing.assert_array_equal(plain.reject, z.reject)


@pytest.mark.parametrize("kind", ["msprt", "confidence_sequence"])
def test_the_mixture_rules_take_each_looks_t_at_the_normal_radius_tail(kind: str) -> None:
    # the mixture's normal radius h_k (in SEs) at each look, as its nominal level 2 Phi(-h_k) for the t-test's
    # p-value (scipy), and the confidence sequence's radius as the t quantile of that tail: t.isf(Phi(-h_k), df)
    rng = np.random.default_rng(9)
    est, se = rng.normal(0.2, 1.0, (500, 6)), rng.uniform(0.3, 1.0, (500, 6))
    df = rng.uniform(1.5, 30.0, (500, 6))
    df[::6] = np.inf
    tau, alpha = 0.8, 0.05
    v = se**2
    h = np.sqrt(2 * (v + tau**2) / tau**2 * (0.5 * np.log((v + tau**2) / v) - np.log(alpha)))  # in SEs
    fin = np.isfinite(df)
    t = est / se
    p = np.where(fin, 2 * stats.t.sf(np.abs(t), np.where(fin, df, 1.0)), 2 * stats.norm.sf(np.abs(t)))
    cross = p <= 2 * stats.norm.sf(h)
    got = sequential_test(est, se, kind, tau=tau, alpha=alpha, df=df)
    np.testing.assert_array_equal(got.reject, cross.any(axis=1))
    np.testing.assert_array_equal(got.stop_look[got.reject], np.argmax(cross, axis=1)[got.reject])
    radius = np.where(fin, stats.t.isf(stats.norm.sf(h), np.where(fin, df, 1.0)), h) * se
    np.testing.assert_allclose(got.ci_low, np.maximum.accumulate(est - radius, axis=1), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(got.ci_high, np.minimum.accumulate(est + radius, axis=1), rtol=1e-9, atol=1e-12)
    z = sequential_test(est, se, kind, tau=tau, alpha=alpha)
    assert got.reject.sum() < z.reject.sum()
    plain = sequential_test(est, se, kind, tau=tau, alpha=alpha, df=np.full(est.shape, np.nan))
    np.testing.assert_array_equal(plain.pvalue, z.pvalue)


def _t_looks(m: int, k: int, replicates: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(estimate, se, df) of a one-sample t-test of mean 0 looked at after every m normal observations, k looks."""
    n = np.arange(1, k + 1) * m
    x = np.random.default_rng(seed).standard_normal((replicates, n[-1]))
    mean = np.cumsum(x, axis=1)[:, n - 1] / n
    var = (np.cumsum(x * x, axis=1)[:, n - 1] - n * mean**2) / (n - 1)
    return mean, np.sqrt(var / n), np.broadcast_to(n - 1.0, mean.shape)


def test_the_rules_keep_their_level_on_t_looks_where_z_does_not() -> None:
    # five looks at 8, 16, ..., 40 observations (df 7 to 39), 40,000 replicates under H0: with each look's t the
    # spending rules' rates within 4 SE of alpha and the mSPRT's at most alpha + 4 SE (always valid, conservative at
    # discrete looks); z on the same t exceeds alpha + 4 SE (measured: O'Brien-Fleming 0.0625 / 0.0495, Pocock
    # 0.091 / 0.051, mSPRT 0.029 / 0.008 at 8; the mSPRT checked at 4 observations a look: 0.078 / 0.008)
    from onlineeval.stats.sequential import equal_fractions, mixture_tau

    r, alpha = 40_000, 0.05
    band = 4 * np.sqrt(alpha * (1 - alpha) / r)
    est, se, df = _t_looks(8, 5, r, 20261207)
    for kind in ("obrien_fleming", "pocock"):
        with_t = sequential_test(est, se, kind, fractions=equal_fractions(5), df=df).reject.mean()
        with_z = sequential_test(est, se, kind, fractions=equal_fractions(5)).reject.mean()
        assert abs(with_t - alpha) <= band, (kind, with_t)
        assert with_z > alpha + band, (kind, with_z)
    est, se, df = _t_looks(4, 5, r, 20261208)
    tau = float(mixture_tau(1 / np.sqrt(20), alpha))
    with_t = sequential_test(est, se, "msprt", tau=tau, df=df).reject.mean()
    with_z = sequential_test(est, se, "msprt", tau=tau).reject.mean()
    assert with_t <= alpha + band and with_z > alpha + band, (with_t, with_z)


def test_degrees_of_freedom_must_be_positive_and_fit_the_looks() -> None:
    from onlineeval.errors import InputError

    est, se = np.zeros((3, 4)), np.ones((3, 4))
    with pytest.raises(InputError, match="df: degrees of freedom must be > 0"):
        sequential_test(est, se, "obrien_fleming", df=np.full((3, 4), -1.0))
    with pytest.raises(InputError, match=r"df: shape \(5,\) does not broadcast to the looks' \(3, 4\)"):
        sequential_test(est, se, "msprt", tau=1.0, df=np.ones(5))
    from onlineeval.stats import z_equivalent

    with pytest.raises(InputError, match="df: degrees of freedom must be > 0"):
        z_equivalent([1.0, 2.0], [3.0, 0.0])
    np.testing.assert_array_equal(z_equivalent([1.0, -2.0], np.inf), [1.0, -2.0])
    np.testing.assert_allclose(z_equivalent([1.0, -2.0], [4.0, 9.0]),
                               [stats.norm.isf(stats.t.sf(1.0, 4.0)), -stats.norm.isf(stats.t.sf(2.0, 9.0))],
                               rtol=1e-12)
