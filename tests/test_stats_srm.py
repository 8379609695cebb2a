"""SRM checks against scipy.stats.chisquare, and their A/A rates by Monte Carlo (4 SE, fixed seeds)."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.stats as st

from onlineeval.errors import InputError
from onlineeval.stats.srm import srm_chisquare, srm_impressions


@pytest.mark.parametrize("shares", [None, [0.5, 0.5], [0.3, 0.7], [1, 1, 2]])
def test_chisquare_matches_scipy_row_by_row(shares) -> None:
    rng = np.random.default_rng(0)
    k = 3 if shares is not None and len(shares) == 3 else 2
    counts = rng.integers(50, 5000, size=(4, 5, k))
    res = srm_chisquare(counts, shares)
    assert res.statistic.shape == (4, 5) and res.df == k - 1
    pi = np.full(k, 1 / k) if shares is None else np.asarray(shares, float) / np.sum(shares)
    for idx in np.ndindex(4, 5):
        ref = st.chisquare(counts[idx], f_exp=counts[idx].sum() * pi)
        assert res.statistic[idx] == pytest.approx(ref.statistic, rel=1e-12)
        assert res.pvalue[idx] == pytest.approx(ref.pvalue, rel=1e-10, abs=1e-300)
    np.testing.assert_allclose(res.observed_share.sum(axis=-1), 1.0)


def test_chisquare_aa_rate_and_power_on_a_broken_split() -> None:
    rng = np.random.default_rng(1)
    reps, users = 50_000, 20_000
    n_b = rng.binomial(users, 0.5, size=reps)
    res = srm_chisquare(np.stack([users - n_b, n_b], axis=-1), alpha=0.05)
    rate = res.flagged.mean()
    assert abs(rate - 0.05) <= 4 * math.sqrt(0.05 * 0.95 / reps)
    # a broken split: 5% of users (bot-like) always assigned to B, a shift of 7 standard deviations
    bots = users // 20
    n_b2 = rng.binomial(users - bots, 0.5, size=reps) + bots
    broken = srm_chisquare(np.stack([users - n_b2, n_b2], axis=-1))  # default threshold 0.001
    assert broken.flagged.mean() > 0.99
    assert srm_chisquare([0, 0]).pvalue == 1.0


def test_impressions_clustered_test_holds_its_level_where_the_naive_one_does_not() -> None:
    rng = np.random.default_rng(2)
    reps, users = 3000, 2000
    imp = rng.negative_binomial(0.5, 0.05, size=(reps, users)).astype(float)  # heavy users
    in_b = rng.random((reps, users)) < 0.5
    imp_a, imp_b = np.where(in_b, 0.0, imp), np.where(in_b, imp, 0.0)  # zero-impression users change nothing
    clustered = srm_impressions(imp_a, imp_b, 0.5, alpha=0.05)
    se = 4 * math.sqrt(0.05 * 0.95 / reps)
    assert abs(clustered.flagged.mean() - 0.05) <= se
    naive = srm_chisquare(clustered.observed, alpha=0.05)
    assert naive.flagged.mean() > 0.5  # impressions are not independent units
    # the statistic, recomputed by hand for one replicate
    m, t = imp[0], imp_b[0].sum()
    z = (t - 0.5 * m.sum()) / math.sqrt(0.25 * (m * m).sum())
    assert clustered.statistic[0] == pytest.approx(z * z, rel=1e-10)
    assert clustered.pvalue[0] == pytest.approx(2 * st.norm.sf(abs(z)), rel=1e-9)


def test_bad_input() -> None:
    with pytest.raises(InputError, match="2 arms"):
        srm_chisquare([5])
    with pytest.raises(InputError, match=">= 0"):
        srm_chisquare([5, -1])
    with pytest.raises(InputError, match="one share per arm"):
        srm_chisquare([5, 6], [0.2, 0.3, 0.5])
    with pytest.raises(InputError, match="share_b"):
        srm_impressions([1, 2], [3, 4], share_b=1.0)
