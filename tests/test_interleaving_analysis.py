"""Aggregation of interleaving outcomes against statsmodels / exact binomial references."""

from __future__ import annotations

from math import comb

import numpy as np
import pytest
import statsmodels.api as sm

from onlineeval.errors import ConfigError, InputError
from onlineeval.interleaving import get_interleaver
from onlineeval.interleaving.analysis import (
    cluster_bootstrap_delta,
    delta_ab,
    delta_ab_test,
    outcome_counts,
    preference_matrix,
    sign_test,
)


def test_delta_ab_definition() -> None:
    o = np.array([1, 1, 1, -1, 0, 0])
    c = outcome_counts(o)
    assert (c.wins, c.losses, c.ties) == (3, 1, 2)
    assert delta_ab(o) == pytest.approx((3 + 2 / 2) / 6 - 0.5)


def test_sign_test_exact_binomial() -> None:
    o = np.array([1] * 9 + [-1] * 2 + [0] * 5)
    # two-sided exact: 2 * P(X <= 2), X ~ Bin(11, 1/2)
    expected = 2 * sum(comb(11, x) for x in range(3)) / 2**11
    assert sign_test(o) == pytest.approx(expected)
    assert sign_test(np.zeros(4)) == 1.0


def test_clustered_se_matches_statsmodels_cluster_robust() -> None:
    rng = np.random.default_rng(0)
    users = rng.integers(0, 300, size=5000)
    bias = rng.normal(0, 0.5, size=300)[users]
    o = np.sign(rng.normal(bias + 0.1, 1.0))
    o[rng.random(o.size) < 0.3] = 0
    est = delta_ab_test(o, users)
    fit = sm.OLS(o, np.ones_like(o)).fit(cov_type="cluster", cov_kwds={"groups": users})
    assert est.delta == pytest.approx(fit.params[0] / 2)
    assert est.se == pytest.approx(fit.bse[0] / 2, rel=1e-10)
    assert est.p_value == pytest.approx(fit.pvalues[0], rel=1e-6)
    assert est.n_clusters == 300
    # unclustered SE is the plain standard error of the mean / 2 (with G/(G-1) = n/(n-1))
    plain = delta_ab_test(o)
    assert plain.se == pytest.approx(o.std(ddof=1) / np.sqrt(o.size) / 2)


def test_cluster_bootstrap_agrees_with_delta_method() -> None:
    rng = np.random.default_rng(1)
    users = rng.integers(0, 200, size=4000)
    o = np.sign(rng.normal(rng.normal(0, 0.7, 200)[users], 1.0))
    ref = delta_ab_test(o, users)
    n_boot = 4000
    boot = cluster_bootstrap_delta(o, users, np.random.default_rng(2), n_boot)
    # SE of a bootstrap SE estimate is about se / sqrt(2 B); allow 4 of those plus the O(1/G) bias
    assert abs(boot.std(ddof=1) - ref.se) < 4 * ref.se / np.sqrt(2 * n_boot) + ref.se / 200
    b = delta_ab_test(o, users, method="bootstrap", rng=np.random.default_rng(3))
    assert b.ci_low < b.delta < b.ci_high


def test_bad_inputs() -> None:
    with pytest.raises(InputError):
        delta_ab_test(np.array([2, 0]))
    with pytest.raises(InputError):
        delta_ab_test(np.array([1, 0]), clusters=np.array([1]))
    with pytest.raises(ConfigError):
        delta_ab_test(np.array([1, 0]), alpha=1.5)
    with pytest.raises(ConfigError):
        delta_ab_test(np.array([1, 0]), method="bootstrap")


def test_preference_matrix_from_multileaving() -> None:
    rng = np.random.default_rng(4)
    n, k = 20_000, 6
    rel = np.linspace(0.8, 0.0, 12)
    good = np.tile(np.arange(k), (n, 1))
    mid = np.tile(np.array([1, 0, 3, 2, 5, 4]), (n, 1))
    bad = np.tile(np.arange(11, 11 - k, -1), (n, 1))
    il = get_interleaver("team_draft")
    res = il.interleave([good, mid, bad], rng)
    clicks = rng.random(res.ranking.shape) < rel[res.ranking] * 0.6 ** np.arange(k)
    prefs = il.preferences(res, clicks)
    users = rng.integers(0, 1000, size=n)
    pm = preference_matrix(prefs, users)
    np.testing.assert_allclose(pm.delta, -pm.delta.T)
    assert pm.delta[0, 2] > 0 and pm.delta[1, 2] > 0 and pm.ci_low[0, 2] > 0
    # each pair equals the two-ranker analysis of that pair's outcomes
    single = delta_ab_test(prefs[:, 0, 2].astype(float), users)
    assert pm.delta[0, 2] == pytest.approx(single.delta)
    assert pm.se[0, 2] == pytest.approx(single.se)
    assert pm.wins[0, 2] == pm.losses[2, 0]
