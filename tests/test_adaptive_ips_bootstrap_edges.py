"""Edge cases of adaptive IPS's reselecting bootstrap (AdaptiveIPS.bootstrap_estimates through Estimator.estimate),
against what the plain cluster bootstrap of the other estimators does on the same log."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.errors import InputError
from onlineeval.estimators import LoggedData, get_estimator
from onlineeval.estimators.checks import check_world, epsilon_greedy_policy, sample_log

REWARD = "clicks_per_query"


def _one_user_log() -> tuple[LoggedData, object]:
    world = check_world("mixture")
    logger = epsilon_greedy_policy(world.targets[0].lists, world.m, 0.8)
    log = sample_log(world, 500, np.random.default_rng(3), logger=logger, users=True)
    one = LoggedData(log.query, log.shown, log.clicks, p_list=log.p_list, p_prefix=log.p_prefix, p_item=log.p_item,
                     user=np.zeros(log.n, dtype=np.int64), user_type=log.user_type)
    return one, world.targets[0]


@pytest.mark.parametrize("name", ["ips", "adaptive_ips"])
def test_one_cluster_has_no_bootstrap_interval(name):
    """One user: every resample is the log itself, so a percentile interval would have zero width (a claim of
    certainty from one cluster); the CLT interval is undefined there, and the bootstrap is refused as for IPS."""
    log, target = _one_user_log()
    est = get_estimator(name)
    point = est.estimate(log, target, REWARD)
    assert point.clusters == 1 and np.isnan(point.se)
    with pytest.raises(InputError):
        est.estimate(log, target, REWARD, n_boot=200, rng=np.random.default_rng(0))


@pytest.mark.parametrize("n", [60, 2_000_000 // 13 + 7])
def test_one_type_in_every_cluster_keeps_one_copy_of_its_sums(n, monkeypatch):
    """A log without user types (one context) or of one type, every cluster holding rows (a log without user ids:
    its rows): the dense layout is the type's sums themselves (the same memory, not a second (n, 13) copy: 104 MB
    per target at 10^6 rows), at any size, and gives the gather layout's numbers."""
    from onlineeval.estimators.adaptive_ips import BEHAVIOURS, choice_features, resampled_values
    import onlineeval.estimators.adaptive_resampling as resampling

    monkeypatch.setattr(resampling, "DENSE_CELLS", 13 * 100)  # the 60 clusters' layout would be a copy within it
    rng = np.random.default_rng(1)
    terms = {b: rng.random(n) * (i + 1) for i, b in enumerate(BEHAVIOURS)}
    f = choice_features(np.zeros(n, dtype=np.int64), terms, np.arange(n), n)
    assert f.dense is not None and np.shares_memory(f.dense, f.sums[0])
    counts = np.stack([np.bincount(rng.integers(0, n, n), minlength=n) for _ in range(3)]).astype(np.float64)
    import dataclasses

    num, den = resampled_values(f, counts)
    num_g, den_g = resampled_values(dataclasses.replace(f, dense=None), counts)
    np.testing.assert_array_equal(den, den_g)
    np.testing.assert_allclose(num, num_g, rtol=1e-13)
    # several types: the side-by-side copy within DENSE_CELLS, none beyond
    two = choice_features(np.arange(60) % 2, {b: v[:60] for b, v in terms.items()}, np.arange(60), 60)
    assert two.dense is None or not np.shares_memory(two.dense, two.sums[0])


@pytest.mark.parametrize("name", ["ips", "adaptive_ips"])
def test_one_cluster_has_no_paired_bootstrap_interval(name):
    """The same for the difference of two targets (the estimate command's --baseline): refused, where every
    resample gave the log itself and a zero-width interval."""
    from onlineeval.estimators import get_reward
    from onlineeval.estimators.log_estimates import paired_difference

    log, target = _one_user_log()
    baseline = check_world("mixture").targets[1]
    est = get_estimator(name)
    reward = get_reward(REWARD, log.k)
    plain = paired_difference(est, log, target, baseline, reward)
    assert plain["clusters"] == 1 and np.isnan(plain["se"])
    with pytest.raises(InputError, match="one cluster"):
        paired_difference(est, log, target, baseline, reward, 0.05, 200, np.random.default_rng(0))
