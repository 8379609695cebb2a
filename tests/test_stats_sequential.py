"""Sequential tests: published boundary values, an independent multivariate-normal integration,
and Monte Carlo type-I error / power at fixed seeds (tolerance 4 standard errors)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st

from onlineeval.errors import InputError
from onlineeval.stats import sequential as sq
from onlineeval.stats._roots import root_from_guess
from scipy_seed import mvn_cdf  # rng= from scipy 1.15, the distribution's seed= before

# ----------------------------------------------------------------------------- helpers


def mvn_reject_prob(b: sq.Boundaries, drift: float = 0.0) -> float:
    """1 - P(l_k < Z_k < u_k for all k) by scipy's multivariate normal CDF (Genz), independent of the recursion."""
    t = b.fractions
    cov = np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))
    mean = drift * np.sqrt(t)
    lo = np.where(np.isfinite(b.lower), b.lower, -40.0)
    hi = np.where(np.isfinite(b.upper), b.upper, 40.0)
    return 1.0 - mvn_cdf(mean, cov, hi, lo, 0)


def brownian_z(rng: np.random.Generator, fractions: np.ndarray, reps: int, drift: float = 0.0) -> np.ndarray:
    """Z_k = S(t_k)/sqrt(t_k) for a Brownian motion S with drift, shape (reps, K)."""
    dt = np.diff(np.concatenate([[0.0], fractions]))
    s = np.cumsum(rng.normal(drift * dt, np.sqrt(dt), size=(reps, fractions.size)), axis=1)
    return s / np.sqrt(fractions)


def within_4se(rate: float, truth: float, reps: int) -> bool:
    return abs(rate - truth) <= 4.0 * math.sqrt(truth * (1.0 - truth) / reps)


def at_most_4se(rate: float, level: float, reps: int) -> bool:
    return rate <= level + 4.0 * math.sqrt(level * (1.0 - level) / reps)


# ----------------------------------------------------------------------------- published values


def test_classic_obrien_fleming_five_looks_matches_jennison_turnbull() -> None:
    # Jennison & Turnbull (2000) Table 2.3: C_B(5, 0.05) = 2.040, boundaries C_B sqrt(5/k)
    b = sq.classic_boundaries(sq.equal_fractions(5), 0.05, "obrien_fleming")
    np.testing.assert_allclose(b.upper, [4.562, 3.226, 2.634, 2.281, 2.040], atol=1.5e-3)
    np.testing.assert_allclose(b.lower, -b.upper)


@pytest.mark.parametrize(("k", "c_p", "c_b"),
                         [(2, 2.178, 1.977), (3, 2.289, 2.004), (4, 2.361, 2.024), (5, 2.413, 2.040)])
def test_classic_constants_match_jennison_turnbull_tables(k: int, c_p: float, c_b: float) -> None:
    # Tables 2.1 (Pocock C_P) and 2.3 (O'Brien-Fleming C_B), two-sided alpha = 0.05, equal spacing
    p = sq.classic_boundaries(sq.equal_fractions(k), 0.05, "pocock")
    o = sq.classic_boundaries(sq.equal_fractions(k), 0.05, "obrien_fleming")
    np.testing.assert_allclose(p.upper, c_p, atol=1.5e-3)
    assert o.upper[-1] == pytest.approx(c_b, abs=1.5e-3)


def test_inflation_factors_match_jennison_turnbull() -> None:
    # Tables 2.2 / 2.4: R_P(5, 0.05, 0.2) = 1.229, R_B(5, 0.05, 0.2) = 1.028
    f5 = sq.equal_fractions(5)
    assert sq.inflation_factor(sq.classic_boundaries(f5, 0.05, "pocock"), 0.8) == pytest.approx(1.229, abs=1.5e-3)
    obf = sq.classic_boundaries(f5, 0.05, "obrien_fleming")
    assert sq.inflation_factor(obf, 0.8) == pytest.approx(1.028, abs=1.5e-3)


def test_lan_demets_obrien_fleming_unequal_looks_matches_ldbounds() -> None:
    # R ldbounds::bounds(c(0.10, 0.33, 1), iuse = c(1, 1), alpha = c(0.025, 0.025)), as printed in
    # r-help (March 2020, "output of bounds function ldbounds package"): 6.9913, 3.7308, 1.9605,
    # cumulative exit probabilities 2.7227e-12, 1.9097e-04, 0.05
    b = sq.spending_boundaries([0.10, 0.33, 1.0], 0.05, "obrien_fleming")
    np.testing.assert_allclose(b.upper, [6.9913, 3.7308, 1.9605], atol=2e-4)
    np.testing.assert_allclose(sq.crossing_probabilities(b).by_look, [2.7227e-12, 1.9097e-04, 0.05], rtol=2e-4)


def test_lan_demets_obrien_fleming_five_looks_one_sided() -> None:
    # Lan-DeMets O'Brien-Fleming spending, one-sided 0.025, 5 equally spaced looks (gsDesign sfLDOF /
    # ldbounds): 4.8769, 3.3569, 2.6803, 2.2898, 2.0310
    b = sq.spending_boundaries(sq.equal_fractions(5), 0.025, "obrien_fleming", "larger")
    np.testing.assert_allclose(b.upper, [4.8769, 3.3569, 2.6803, 2.2898, 2.0310], atol=2.5e-4)
    assert np.all(np.isneginf(b.lower))


@pytest.mark.parametrize("kind", ["obrien_fleming", "pocock"])
@pytest.mark.parametrize("alternative", ["two-sided", "larger", "smaller"])
def test_spending_is_spent_exactly(kind: str, alternative: str) -> None:
    t = np.array([0.15, 0.4, 0.55, 0.8, 1.0])
    b = sq.spending_boundaries(t, 0.05, kind, alternative)
    cross = sq.crossing_probabilities(b)
    want = 2 * sq.spending(kind, t, 0.025) if alternative == "two-sided" else sq.spending(kind, t, 0.05)
    np.testing.assert_allclose(cross.by_look, want, rtol=1e-8)
    if alternative == "smaller":
        assert np.all(np.isposinf(b.upper)) and cross.upper.sum() == 0
    # the spending functions themselves: alpha at t = 1, closed forms at t = 0.25
    assert sq.spending(kind, [1.0], 0.05)[0] == pytest.approx(0.05, rel=1e-12)
    # (2 sf, not 2 - 2 cdf: the cdf near 1 loses about 1e-11 of the 8.9e-5, which only the default abs=1e-12 hid)
    ref = (2 * st.norm.sf(st.norm.ppf(0.975) / 0.5) if kind == "obrien_fleming"
           else 0.05 * math.log(1 + (math.e - 1) * 0.25))
    assert sq.spending(kind, [0.25], 0.05)[0] == pytest.approx(ref, rel=1e-12, abs=0)


# ----------------------------------------------------------------------------- independent integration


@pytest.mark.parametrize(
    "design",
    [
        lambda: sq.spending_boundaries([0.2, 0.5, 0.7, 1.0], 0.05, "pocock"),
        lambda: sq.spending_boundaries([0.3, 0.6, 1.0], 0.05, "obrien_fleming", "larger"),
        lambda: sq.classic_boundaries(sq.equal_fractions(4), 0.05, "obrien_fleming"),
        lambda: sq.mixture_boundaries(sq.equal_fractions(4), 0.05),
        lambda: sq.peeking_boundaries(sq.equal_fractions(4), 0.05),
    ],
)
@pytest.mark.parametrize("drift", [0.0, 1.5, 2.8])
def test_recursion_agrees_with_scipy_multivariate_normal(design, drift: float) -> None:
    b = design()
    ours = sq.crossing_probabilities(b, drift).reject
    assert ours == pytest.approx(mvn_reject_prob(b, drift), abs=2e-5)


def test_peeking_fpr_exact_values_and_monte_carlo() -> None:
    f5 = sq.equal_fractions(5)
    fpr = sq.peeking_fpr(f5)
    assert fpr[0] == pytest.approx(0.05, abs=1e-12)
    assert fpr[-1] == pytest.approx(mvn_reject_prob(sq.peeking_boundaries(f5)), abs=2e-5)
    assert fpr[-1] == pytest.approx(0.1417, abs=5e-4)  # Armitage, McPherson & Rowe (1969): 0.142 for 5 looks
    assert np.all(np.diff(fpr) > 0)
    # Monte Carlo of the peeking rule on i.i.d. user data, 5 daily looks, Welch z from cumulative sums
    rng = np.random.default_rng(11)
    reps, per_day = 10_000, 200
    a = rng.exponential(1.0, size=(reps, 5 * per_day))
    b = rng.exponential(1.0, size=(reps, 5 * per_day))
    n = per_day * np.arange(1, 6)
    idx = n - 1
    ma, mb = np.cumsum(a, 1)[:, idx] / n, np.cumsum(b, 1)[:, idx] / n
    va = (np.cumsum(a * a, 1)[:, idx] - n * ma**2) / (n - 1)
    vb = (np.cumsum(b * b, 1)[:, idx] - n * mb**2) / (n - 1)
    p = 2 * st.norm.sf(np.abs(mb - ma) / np.sqrt(va / n + vb / n))
    res = sq.peeking_test(p, 0.05)
    rate = res.rejected_by_look.mean(axis=0)
    for k in (0, 4):
        assert within_4se(float(rate[k]), float(fpr[k]), reps)
    assert res.reject.shape == (reps,) and res.rejected_by_look.shape == (reps, 5)
    first = res.stop_look[res.reject]
    assert np.all(p[res.reject, first] < 0.05)


def test_peeking_fourteen_daily_looks() -> None:
    fpr = sq.peeking_fpr(sq.equal_fractions(14))
    # the simulated A/A rates (0.13 by day 4, 0.22 over 14 days) are these exact values
    assert fpr[3] == pytest.approx(0.1262, abs=5e-4)
    assert fpr[13] == pytest.approx(0.2196, abs=5e-4)


# ----------------------------------------------------------------------------- Monte Carlo at the boundaries


@pytest.mark.parametrize(
    "make",
    [
        lambda f: sq.spending_boundaries(f, 0.05, "obrien_fleming"),
        lambda f: sq.spending_boundaries(f, 0.05, "pocock"),
        lambda f: sq.classic_boundaries(f, 0.05, "pocock"),
        lambda f: sq.spending_boundaries(f, 0.05, "obrien_fleming", "larger"),
    ],
)
def test_group_sequential_type_one_error_and_power_by_monte_carlo(make) -> None:
    f = np.array([0.2, 0.4, 0.6, 0.8, 1.0])
    b = make(f)
    rng = np.random.default_rng(5)
    reps = 100_000
    z0 = brownian_z(rng, f, reps)
    rate0 = sq.group_sequential_test(z0, b).reject.mean()
    assert within_4se(float(rate0), 0.05, reps)
    drift = sq.drift_for_power(b, 0.8)
    z1 = brownian_z(rng, f, reps, drift)
    res1 = sq.group_sequential_test(z1, b)
    assert within_4se(float(res1.reject.mean()), 0.8, reps)
    cross = sq.crossing_probabilities(b, drift)
    stop_share = np.bincount(res1.stop_look[res1.reject], minlength=5) / reps
    for k in range(5):
        assert within_4se(float(stop_share[k]), float(cross.upper[k] + cross.lower[k]), reps)


def _cumulative_estimates(rng: np.random.Generator, reps: int, looks: int, per_look: int, effect: float):
    """Difference of means and its SE at each look from per-user data (skewed), shape (reps, looks)."""
    a = rng.exponential(1.0, size=(reps, looks * per_look))
    b = rng.exponential(1.0, size=(reps, looks * per_look)) + effect
    n = per_look * np.arange(1, looks + 1)
    idx = n - 1
    ma, mb = np.cumsum(a, 1)[:, idx] / n, np.cumsum(b, 1)[:, idx] / n
    va = (np.cumsum(a * a, 1)[:, idx] - n * ma**2) / (n - 1)
    vb = (np.cumsum(b * b, 1)[:, idx] - n * mb**2) / (n - 1)
    return mb - ma, np.sqrt(va / n + vb / n)


@pytest.mark.slow
def test_msprt_and_confidence_sequence_valid_under_daily_monitoring() -> None:
    rng = np.random.default_rng(2024)
    reps, looks, per_look = 10_000, 14, 30
    est, se = _cumulative_estimates(rng, reps, looks, per_look, 0.0)
    tau = sq.mixture_tau(se[:, -1].mean(), 0.05)
    m = sq.msprt(est, se, tau=tau, alpha=0.05)
    cs = sq.confidence_sequence(est, se, tau=tau, alpha=0.05)
    assert at_most_4se(float(m.reject.mean()), 0.05, reps)
    np.testing.assert_array_equal(m.reject, cs.reject)
    # the K-look design's exact rate (normal theory) is below alpha; data agree with it
    exact = sq.crossing_probabilities(sq.mixture_boundaries(sq.equal_fractions(looks), 0.05)).reject
    assert exact < 0.05
    assert within_4se(float(m.reject.mean()), exact, reps)
    # coverage of the confidence sequence at a true effect of 0.1, simultaneously over all looks
    est1, se1 = _cumulative_estimates(rng, reps, looks, per_look, 0.1)
    cs1 = sq.confidence_sequence(est1, se1, tau=tau, alpha=0.05)
    missed = ((cs1.ci_low > 0.1) | (cs1.ci_high < 0.1)).any(axis=1)
    assert at_most_4se(float(missed.mean()), 0.05, reps)


def test_msprt_formula_and_running_min() -> None:
    est = np.array([0.3, -0.1, 0.5, np.nan, 0.8])
    se = np.array([0.4, 0.3, 0.2, 0.2, 0.1])
    tau = 0.25
    res = sq.msprt(est, se, tau=tau, alpha=0.05, null=0.1)
    p_now = []
    for d, s in zip(est - 0.1, se):
        if math.isnan(d):
            p_now.append(math.nan)
            continue
        lam = math.sqrt(s * s / (s * s + tau * tau)) * math.exp(tau * tau * d * d / (2 * s * s * (s * s + tau * tau)))
        p_now.append(min(1.0, 1.0 / lam))
    run, cur = [], math.inf
    for p in p_now:
        cur = cur if math.isnan(p) else min(cur, p)
        run.append(cur)
    np.testing.assert_allclose(res.pvalue, run, rtol=1e-12)
    # the confidence sequence excludes the null exactly at the looks where p <= alpha
    half = np.sqrt(2 * se**2 * (1 + se**2 / tau**2) * np.log(np.sqrt(1 + tau**2 / se**2) / 0.05))
    lam_bound = np.abs(est - 0.1) >= half
    np.testing.assert_array_equal(lam_bound[~np.isnan(est)], (np.array(p_now) <= 0.05)[~np.isnan(est)])
    assert res.reject == bool(np.nanmin(p_now) <= 0.05)
    assert np.all(np.diff(res.ci_low[~np.isnan(res.ci_low)]) >= 0)
    assert np.all(np.diff(res.ci_high[~np.isnan(res.ci_high)]) <= 0)


def test_msprt_batch_shapes_tau_per_row_and_zero_se() -> None:
    rng = np.random.default_rng(3)
    est = rng.normal(size=(4, 3, 6))
    se = np.full((4, 3, 6), 0.5)
    tau = np.linspace(0.1, 1.0, 12).reshape(4, 3)
    res = sq.msprt(est, se, tau=tau)
    assert res.pvalue.shape == (4, 3, 6) and res.reject.shape == (4, 3) and res.stop_look.shape == (4, 3)
    one = sq.msprt(est[2, 1], se[2, 1], tau=tau[2, 1])
    np.testing.assert_allclose(res.pvalue[2, 1], one.pvalue)
    z = sq.msprt([0.0, 0.0, 1.0], [0.0, 0.0, 0.0], tau=1.0)
    np.testing.assert_array_equal(z.pvalue, [1.0, 1.0, 0.0])
    assert z.stop_look == 2


def test_mixture_tau_minimises_the_boundary_at_the_horizon() -> None:
    alpha, s = 0.05, 0.3
    tau = float(sq.mixture_tau(s, alpha))
    x = (tau / s) ** 2
    assert x == pytest.approx(-2 * math.log(alpha) + math.log1p(x), rel=1e-12)

    def width(t: float) -> float:
        return math.sqrt(2 * s * s * (1 + s * s / t**2) * math.log(math.sqrt(1 + t**2 / s**2) / alpha))

    grid = np.linspace(0.2 * tau, 5 * tau, 20001)
    best = grid[np.argmin([width(t) for t in grid])]
    assert best == pytest.approx(tau, rel=1e-3)


def test_first_crossing_and_group_sequential_shapes() -> None:
    b = sq.spending_boundaries([0.5, 1.0], 0.05, "pocock")
    z = np.array([[0.0, 0.0], [3.0, 0.0], [0.0, -3.0], [np.nan, 2.5]])
    res = sq.group_sequential_test(z, b)
    np.testing.assert_array_equal(res.reject, [False, True, True, True])
    np.testing.assert_array_equal(res.stop_look, [-1, 0, 1, 1])
    np.testing.assert_array_equal(res.rejected_by_look, [[0, 0], [1, 1], [0, 1], [0, 1]])


def test_bad_input_is_refused_clearly() -> None:
    with pytest.raises(InputError, match="strictly increasing"):
        sq.spending_boundaries([0.5, 0.5, 1.0])
    with pytest.raises(InputError, match=r"\(0, 1\]"):
        sq.spending_boundaries([0.5, 1.2])
    with pytest.raises(InputError, match="alpha"):
        sq.peeking_fpr([1.0], alpha=1.5)
    with pytest.raises(InputError, match="kind"):
        sq.spending_boundaries([1.0], kind="haybittle")
    with pytest.raises(InputError, match="looks"):
        sq.group_sequential_test(np.zeros((3, 4)), sq.peeking_boundaries([0.5, 1.0]))
    with pytest.raises(InputError, match="tau"):
        sq.msprt([0.1], [0.1], tau=0.0)
    with pytest.raises(InputError, match="p-values"):
        sq.peeking_test([0.5, 1.5])
    with pytest.raises(InputError, match="power"):
        sq.drift_for_power(sq.peeking_boundaries([1.0]), 0.01)
    with pytest.raises(InputError, match="se_horizon"):
        sq.mixture_tau(0.0)


def test_many_looks_with_tiny_early_spending() -> None:
    # 100 looks: the first O'Brien-Fleming increment is ~1e-110; its boundary has the closed form
    # Phi^{-1}(1 - alpha(t_1)/2) per side, and every increment is spent exactly
    f = sq.equal_fractions(100)
    b = sq.spending_boundaries(f, 0.05, "obrien_fleming")
    first = 2 * sq.spending("obrien_fleming", f[:1], 0.025)[0]
    assert b.upper[0] == pytest.approx(-st.norm.ppf(first / 2), rel=1e-10)
    np.testing.assert_allclose(sq.crossing_probabilities(b).by_look, 2 * sq.spending("obrien_fleming", f, 0.025),
                               rtol=1e-8)


def test_msprt_valid_under_per_batch_monitoring() -> None:
    # 500 looks (e.g. hourly batches): the estimate of a mean with known unit variance after t units
    rng = np.random.default_rng(99)
    reps, looks = 20_000, 500
    n = np.arange(1, looks + 1) * 20.0
    sums = np.cumsum(rng.normal(0.0, math.sqrt(20.0), size=(reps, looks)), axis=1)
    est, se = sums / n, 1.0 / np.sqrt(n)
    res = sq.msprt(est, se, tau=float(sq.mixture_tau(se[-1])), alpha=0.05)
    assert at_most_4se(float(res.reject.mean()), 0.05, reps)
    # while peeking at the same 500 looks rejects far more often than alpha
    p = 2 * st.norm.sf(np.abs(est / se))
    assert sq.peeking_test(p, 0.05).reject.mean() > 0.3


def test_sequential_test_dispatches_to_each_design() -> None:
    rng = np.random.default_rng(21)
    reps, looks = 2000, 6
    f = sq.equal_fractions(looks)
    z = brownian_z(rng, f, reps, drift=1.5)
    se = np.broadcast_to(1.0 / np.sqrt(f * 400.0), z.shape)
    est = z * se
    fixed = sq.sequential_test(est, se, "none")
    np.testing.assert_array_equal(fixed.reject, np.abs(z[:, -1]) >= st.norm.ppf(0.975))
    assert np.all(fixed.stop_look[fixed.reject] == looks - 1)
    peek = sq.sequential_test(est, se, "peeking")
    np.testing.assert_array_equal(peek.reject, (np.abs(z) >= st.norm.ppf(0.975)).any(axis=1))
    for kind in ("obrien_fleming", "pocock"):
        got = sq.sequential_test(est, se, kind)
        want = sq.group_sequential_test(z, sq.spending_boundaries(f, 0.05, kind))
        np.testing.assert_array_equal(got.stop_look, want.stop_look)
    tau = float(sq.mixture_tau(se[0, -1]))
    np.testing.assert_array_equal(sq.sequential_test(est, se, "msprt", tau=tau).pvalue,
                                  sq.msprt(est, se, tau=tau).pvalue)
    with pytest.raises(InputError, match="needs tau"):
        sq.sequential_test(est, se, "confidence_sequence")
    with pytest.raises(InputError, match="design"):
        sq.sequential_test(est, se, "bayes")


def _bisect(f, target: float, lo: float, hi: float) -> float:
    """Plain bisection for increasing ``f`` (the reference for the root-finders)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if f(mid) < target else (lo, mid)
    return 0.5 * (lo + hi)


@pytest.mark.parametrize("guess", [0.01, 0.9, 2.0, 2.5, 7.0, 39.0])
def test_root_from_guess_brackets_from_any_guess(guess: float) -> None:
    f = math.atan  # increasing, root of atan(x) = 1.2 at tan(1.2)
    x = root_from_guess(f, 1.2, guess, 0.0, 40.0, tol=1e-14)
    assert x == pytest.approx(math.tan(1.2), rel=1e-12)
    # targets outside the range end at the nearer end, as root_increasing does
    assert root_from_guess(f, 1.6, guess, 0.0, 40.0) == 40.0
    assert root_from_guess(f, -0.1, guess, 0.0, 40.0) == 0.0


@pytest.mark.parametrize(
    "make",
    [
        lambda: sq.peeking_boundaries([1.0]),
        lambda: sq.peeking_boundaries([1.0], 0.05, "larger"),
        lambda: sq.peeking_boundaries([1.0], 0.05, "smaller"),
        lambda: sq.peeking_boundaries(sq.equal_fractions(10)),
        lambda: sq.spending_boundaries(sq.equal_fractions(14), 0.05, "obrien_fleming"),
        lambda: sq.spending_boundaries(sq.equal_fractions(14), 0.05, "pocock"),
        lambda: sq.mixture_boundaries(sq.equal_fractions(14), 0.05),
        lambda: sq.mixture_boundaries(sq.equal_fractions(3), 0.001),
    ],
)
def test_drift_for_power_is_the_root_of_the_crossing_probability(make) -> None:
    # drift_for_power starts from the one-look drift and brackets from there: the same root as
    # bisection of the rejection probability on the whole range [0, 40] (peeking needs less drift
    # than the fixed test, the other designs more)
    b = make()
    sign = -1.0 if b.alternative == "smaller" else 1.0
    for power in (0.5, 0.8, 0.95):
        d = sq.drift_for_power(b, power)
        ref = _bisect(lambda x: sq.crossing_probabilities(b, sign * x).reject, power, 0.0, 40.0)
        assert d == pytest.approx(sign * ref, rel=1e-9)
        assert sq.crossing_probabilities(b, d).reject == pytest.approx(power, abs=1e-9)


def test_looks_closer_than_the_minimum_step_are_refused_and_fine_grids_are_blocked() -> None:
    """Two looks at almost the same information would make the recursion's grid (a sixth of the next
    increment's SD) and its transition kernel explode (4 TiB at a 1e-9 step): a step below MIN_FRACTION_STEP
    of the earlier fraction is a clear InputError; a step just above it runs with the kernel built by blocks of
    rows (bounded memory) and gives the same boundaries as the one-piece kernel."""
    from onlineeval.errors import InputError
    from onlineeval.stats import sequential as sq

    with pytest.raises(InputError, match="looks 2 and 3 .* merge the two looks"):
        sq.spending_boundaries([0.3, 0.6, 0.6 * (1 + 1e-6), 1.0], 0.05, "obrien_fleming")
    # looks just above the minimum step: fine grids (~10k points), kernels by blocks of rows; alpha is spent
    fine = sq.spending_boundaries([0.5, 0.5 * (1 + 2e-4), 0.5 * (1 + 4e-4), 1.0], 0.05, "obrien_fleming")
    cross = sq.crossing_probabilities(fine, 0.0)
    assert float(cross.upper.sum() + cross.lower.sum()) == pytest.approx(0.05, abs=1e-6)
    # the blocked kernel gives the one-piece kernel's boundaries (blocks forced on an ordinary design)
    looks = [0.2, 0.4, 0.6, 0.8, 1.0]
    whole = sq.spending_boundaries(looks, 0.05, "obrien_fleming")
    from onlineeval.stats import _recursion

    old = _recursion.KERNEL_CELLS
    try:
        _recursion.KERNEL_CELLS = 1000
        blocked = sq.spending_boundaries(looks, 0.05, "obrien_fleming")
        blocked_cross = sq.crossing_probabilities(blocked, 1.5)
    finally:
        _recursion.KERNEL_CELLS = old
    np.testing.assert_allclose(blocked.upper, whole.upper, rtol=1e-12)
    np.testing.assert_allclose(blocked_cross.upper, sq.crossing_probabilities(whole, 1.5).upper, rtol=1e-12)


@pytest.mark.parametrize(("looks", "alternative", "kind"), [(150, "larger", "obrien_fleming"),
                                                              (500, "two-sided", "pocock")])
def test_the_banded_kernel_of_many_looks_equals_the_dense_one(monkeypatch, looks, alternative, kind):
    """Many looks close in information: the recursion integrates the band of the previous grid within 12 sd of the
    increment (onlineeval.stats._recursion.BANDED); the boundaries and the crossing probabilities at a drift are the
    dense kernel's to 1e-11 relative, and the band is used. (The mass the band leaves out is below 1e-30 of a look's;
    what differs is rounding over 500 looks' quadratures, whose last bits depend on the CPU's BLAS kernel: 1.01e-12
    at look 386 of the Pocock case, a probability of 8.4e-9, on an AMD EPYC where 1e-12 had passed elsewhere.)"""
    from onlineeval.stats import _recursion

    fractions = sq.equal_fractions(looks)
    out = {}
    calls = []
    real = _recursion._banded_density
    monkeypatch.setattr(_recursion, "_banded_density", lambda *a: calls.append(1) or real(*a))
    for banded in (True, False):
        monkeypatch.setattr(_recursion, "BANDED", banded)
        calls.clear()
        b = sq.spending_boundaries(fractions, 0.05, kind, alternative)
        c = sq.crossing_probabilities(b, drift=2.5)
        out[banded] = (np.asarray(b.upper, dtype=float), np.asarray(c.upper, dtype=float),
                       np.asarray(c.lower, dtype=float))
        assert bool(calls) == banded  # the band is used where it applies
    for got, want in zip(out[True], out[False], strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-11, atol=1e-300)


@pytest.mark.parametrize("design", ["obrien_fleming", "pocock"])
def test_group_sequential_rules_take_a_zero_standard_error(design: str) -> None:
    """A look with se 0 and an estimate off the null has an infinite z (p = 0, as the fixed and peeking rules read
    it); the group-sequential rules passed it to group_sequential_test, which refuses infinities, so a simulation
    with a look of two users (traffic.queries_per_day=1) failed in its analysis after every replicate had run.
    The look now rejects, as it does under the other rules; an estimate equal to the null (z = 0) does not."""
    est = np.array([[0.1, -0.5, 0.3], [0.1, 0.0, 0.0], [0.0, 0.0, 0.0]])
    se = np.array([[0.1, 0.0, 0.1], [0.1, 0.0, 0.1], [0.1, 0.1, 0.1]])
    r = sq.sequential_test(est, se, design, alpha=0.05)
    assert r.reject.tolist() == [True, False, False] and r.stop_look.tolist() == [1, -1, -1]
    for rule in ("none", "peeking"):  # the same convention: se 0 and an estimate off the null is a rejection
        assert sq.sequential_test(est[:, :2], se[:, :2], rule, alpha=0.05).reject.tolist() == [True, False, False]
