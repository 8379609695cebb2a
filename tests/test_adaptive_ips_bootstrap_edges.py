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
