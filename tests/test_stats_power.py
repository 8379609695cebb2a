"""Analytic power / sample size against statsmodels.stats.power and exact values."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st

from onlineeval.stats import (
    binomial_band,
    mde_two_sample,
    power_one_sample,
    power_two_sample,
    required_n_one_sample,
    required_n_two_sample,
)

import statsmodels.stats.power as smp

ALTS = ["two-sided", "larger", "smaller"]


@pytest.mark.parametrize("alternative", ALTS)
def test_power_two_sample_matches_normalindpower(alternative: str) -> None:
    n_a = np.array([10.0, 50.0, 200.0, 1000.0, 5000.0])
    n_b = 1.5 * n_a
    ours = power_two_sample(0.12, 1.3, 1.3, n_a, n_b, alpha=0.05, alternative=alternative)
    ref = [
        smp.NormalIndPower().power(effect_size=0.12 / 1.3, nobs1=a, alpha=0.05, ratio=1.5, alternative=alternative)
        for a in n_a
    ]
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    assert ours.shape == (5,)


def test_power_two_sample_unequal_sd_is_normal_power_of_standardised_effect() -> None:
    effect, sa, sb, na, nb = -0.05, 0.4, 0.9, 800.0, 1200.0
    se = math.sqrt(sa**2 / na + sb**2 / nb)
    for alt, sm_alt in [("two-sided", "two-sided"), ("larger", "larger"), ("smaller", "smaller")]:
        ref = smp.normal_power(effect / se, 1, 0.01, alternative=sm_alt)
        assert float(power_two_sample(effect, sa, sb, na, nb, alpha=0.01, alternative=alt)) == pytest.approx(
            ref, rel=1e-12
        )


def test_power_at_zero_effect_is_alpha() -> None:
    assert float(power_two_sample(0.0, 1.0, 2.0, 10, 20, alpha=0.05)) == pytest.approx(0.05, rel=1e-12)
    assert float(power_one_sample(0.0, 1.0, 10, alpha=0.1, alternative="larger")) == pytest.approx(0.1)


@pytest.mark.parametrize("share_b", [0.5, 0.2, 0.7])
@pytest.mark.parametrize("power", [0.5, 0.8, 0.95])
def test_required_n_two_sample_matches_zt_ind_solve_power(share_b: float, power: float) -> None:
    effect, sd = 0.03, 0.6
    total = float(required_n_two_sample(effect, sd, alpha=0.05, power=power, share_b=share_b))
    nobs1 = smp.zt_ind_solve_power(
        effect_size=effect / sd, nobs1=None, alpha=0.05, power=power, ratio=share_b / (1 - share_b)
    )
    assert total * (1 - share_b) == pytest.approx(nobs1, rel=1e-6)  # statsmodels' solver tolerance
    # round trip: the power at that size is the target, to machine precision
    back = power_two_sample(effect, sd, sd, total * (1 - share_b), total * share_b)
    assert float(back) == pytest.approx(power, rel=1e-10)


def test_required_n_textbook_value() -> None:
    """Lehr's rule: 2 (z_.975 + z_.8)^2 = 15.70 per arm for a standardised effect of 1."""
    per_arm = 2 * (st.norm.ppf(0.975) + st.norm.ppf(0.8)) ** 2
    assert per_arm == pytest.approx(15.70, abs=0.005)
    total = float(required_n_two_sample(1.0, 1.0))
    # the opposite tail adds Phi(-4.76) ~ 1e-6 of power, so the exact size is a hair smaller
    assert total == pytest.approx(2 * per_arm, rel=1e-5) and total < 2 * per_arm
    one_sided = float(required_n_two_sample(1.0, 1.0, alternative="larger"))
    assert one_sided == pytest.approx(4 * (st.norm.ppf(0.95) + st.norm.ppf(0.8)) ** 2, rel=1e-12)


@pytest.mark.parametrize("alternative", ALTS)
def test_one_sample_matches_statsmodels(alternative: str) -> None:
    effect = -0.02 if alternative == "smaller" else 0.02
    n = np.array([100.0, 1000.0, 10_000.0])
    ours = power_one_sample(effect, 0.5, n, alpha=0.05, alternative=alternative)
    ref = [smp.normal_power(effect / 0.5, k, 0.05, alternative=alternative) for k in n]
    np.testing.assert_allclose(ours, ref, rtol=1e-12)
    need = float(required_n_one_sample(effect, 0.5, alpha=0.05, power=0.9, alternative=alternative))
    sm_need = smp.NormalIndPower().solve_power(
        effect_size=effect / 0.5, nobs1=None, alpha=0.05, power=0.9, ratio=0, alternative=alternative
    )
    assert need == pytest.approx(sm_need, rel=1e-6)


def test_wrong_direction_and_zero_effect_need_infinite_n() -> None:
    assert float(required_n_one_sample(-0.1, 1.0, alternative="larger")) == math.inf
    assert float(required_n_two_sample(0.0, 1.0)) == math.inf
    np.testing.assert_array_equal(
        np.isinf(required_n_two_sample(np.array([0.0, 0.1, -0.1]), 1.0)), [True, False, False]
    )


def test_mde_inverts_required_n() -> None:
    n = np.array([1_000.0, 10_000.0, 100_000.0])
    mde = mde_two_sample(0.7, n, power=0.8, share_b=0.3)
    np.testing.assert_allclose(required_n_two_sample(mde, 0.7, power=0.8, share_b=0.3), n, rtol=1e-12)


def test_power_validation() -> None:
    with pytest.raises(ValueError, match="n_a"):
        power_two_sample(0.1, 1.0, 1.0, 0, 10)
    with pytest.raises(ValueError, match="alternative"):
        power_one_sample(0.1, 1.0, 10, alternative="two_sided")
    with pytest.raises(ValueError, match="power"):
        required_n_one_sample(0.1, 1.0, power=1.0)
    with pytest.raises(ValueError, match="sd"):
        required_n_two_sample(0.1, -1.0)


def _exact_cdf(n: int, p: float) -> list[float]:
    """Binomial CDF from exact integer binomial coefficients (independent of scipy)."""
    cdf, acc = [], 0.0
    for k in range(n + 1):
        acc += math.comb(n, k) * p**k * (1 - p) ** (n - k)
        cdf.append(acc)
    return cdf


@pytest.mark.parametrize(("n", "p", "level"),
                         [(500, 0.05, 0.99), (1000, 0.05, 0.99), (200, 0.3, 0.95), (50, 0.0, 0.99)])
def test_binomial_band_is_the_exact_equal_tailed_band(n: int, p: float, level: float) -> None:
    band = binomial_band(n, p, level)
    cdf = _exact_cdf(n, p)
    tail = (1 - level) / 2
    below = cdf[band.lo - 1] if band.lo > 0 else 0.0
    assert below <= tail + 1e-12  # P(X < lo) within the tail
    assert cdf[band.lo] >= tail - 1e-12  # lo is the largest such: P(X <= lo) exceeds the tail
    assert 1 - cdf[band.hi] <= tail + 1e-12  # P(X > hi) within the tail
    if band.hi > 0:
        assert 1 - cdf[band.hi - 1] > tail - 1e-12  # hi is the smallest such
    assert band.contains(band.lo) and band.contains(band.hi) and not band.contains(band.hi + 1)
    assert band.lo_rate == band.lo / n


def test_binomial_band_validation() -> None:
    with pytest.raises(ValueError, match="n must"):
        binomial_band(0, 0.05)
    with pytest.raises(ValueError, match="p must"):
        binomial_band(100, 1.5)
