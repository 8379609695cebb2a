"""Interval coverage of the estimators under their assumptions.

Each case estimates the exact value of the ideal target (:mod:`onlineeval.estimators.checks`
worlds) on ``R`` independent logs of an epsilon-greedy logger (the ideal list with
probability 0.2, else one of the 60 ordered triples of 5 candidates uniformly, so the
target's list has propensity 0.213 and the others 0.0133) and counts how often the 95% interval covers the exact
value. With
nominal coverage 0.95 the count is Binomial(R, 0.95); the test accepts counts inside the
central 99% band of that distribution (:func:`scipy.stats.binom.interval`), so a correct
interval fails with probability below 1% and the seeds are fixed.

- CLT (delta-method, clustered by user) intervals of ``ips`` and ``snips`` (cascade world,
  reciprocal rank: unbiased for any click model), ``rips`` (DCM world, reciprocal rank)
  and ``snrips`` (DCM world, reciprocal rank) and ``iips`` (PBM world, clicks per query: its
  assumption); ``pseudoinverse`` and ``dr`` (PBM world, clicks per query), ``dr_list`` (cascade world,
  reciprocal rank) and ``cascade_dr`` (DCM world, reciprocal rank), whose click models are fitted on each log;

With uniform random logging (about 80 target lists per log of 5,000) the delta-method
interval of ``snips`` covered 459/500 (below the band: the Wald interval of a mean of ~80
skewed values); the logger here gives about 850 per log of 4,000, where the CLT applies.
- the cluster-bootstrap percentile interval of ``snips``;
- the paired difference's interval (the ideal list minus the shuffled one on the same log, as ``onlineeval
  estimate --baseline`` computes it) of each of those estimators and ``pbm_ips``.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binom

from onlineeval.estimators import get_estimator
from onlineeval.estimators.checks import check_world, epsilon_greedy_policy, sample_log

R = 500
N = 4000
EPSILON = 0.8
CASES = [
    ("ips", "cascade", "reciprocal_rank"),
    ("snips", "cascade", "reciprocal_rank"),
    ("rips", "dcm", "reciprocal_rank"),
    ("snrips", "dcm", "reciprocal_rank"),
    ("iips", "pbm", "clicks_per_query"),
    # the model-based and the pseudoinverse estimators' CLT intervals (a click model fitted on the log: dr, dr_list,
    # cascade_dr; the logger's pair marginals: pseudoinverse), each in a world of its assumption
    ("pseudoinverse", "pbm", "clicks_per_query"),
    ("dr", "pbm", "clicks_per_query"),
    ("dr_list", "cascade", "reciprocal_rank"),
    ("cascade_dr", "dcm", "reciprocal_rank"),
]


def _band(replicates: int, level: float = 0.95, band: float = 0.99) -> tuple[int, int]:
    lo, hi = binom.interval(band, replicates, level)
    return int(lo), int(hi)


def _logs(family: str, replicates: int, size: int, seed: int) -> list:
    world = check_world(family)
    logger = epsilon_greedy_policy(world.targets[0].lists, world.m, EPSILON)
    big = sample_log(world, replicates * size, np.random.default_rng(seed), logger=logger)
    return [big.take(np.arange(r * size, (r + 1) * size)) for r in range(replicates)]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "family", "reward"), CASES)
def test_clt_interval_coverage(name: str, family: str, reward: str) -> None:
    world = check_world(family)
    target = world.targets[0]
    truth = world.truth(target, reward)
    est = get_estimator(name)
    covered = 0
    for log in _logs(family, R, N, seed=100 + CASES.index((name, family, reward))):
        e = est.estimate(log, target, reward)
        covered += int(e.ci_low <= truth <= e.ci_high)
    lo, hi = _band(R)
    assert lo <= covered <= hi, f"{name}: {covered}/{R} intervals cover the exact value {truth:.4f}, band [{lo}, {hi}]"


@pytest.mark.slow
def test_cluster_bootstrap_coverage() -> None:
    replicates = 400
    world = check_world("cascade")
    target = world.targets[0]
    truth = world.truth(target, "reciprocal_rank")
    est = get_estimator("snips")
    rng = np.random.default_rng(77)
    covered = 0
    for log in _logs("cascade", replicates, 3000, seed=55):
        e = est.estimate(log, target, "reciprocal_rank", n_boot=200, rng=rng)
        covered += int(e.boot_low <= truth <= e.boot_high)
    lo, hi = _band(replicates)
    assert lo <= covered <= hi, f"bootstrap: {covered}/{replicates} cover {truth:.4f}, band [{lo}, {hi}]"


def test_band_is_the_binomial_99_percent_interval() -> None:
    lo, hi = _band(500)
    assert binom.cdf(hi, 500, 0.95) - binom.cdf(lo - 1, 500, 0.95) >= 0.99
    assert binom.cdf(lo - 1, 500, 0.95) <= 0.005 and binom.sf(hi, 500, 0.95) <= 0.005


DIFFERENCE_CASES = [*CASES, ("pbm_ips", "pbm", "clicks_per_query")]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "family", "reward"), DIFFERENCE_CASES)
def test_paired_difference_interval_coverage(name: str, family: str, reward: str) -> None:
    """The paired difference of two targets on the same log (``onlineeval estimate --baseline``: the ideal list
    minus the shuffled one, one influence value per user cluster for both estimates, t quantiles) covers the exact
    difference within the binomial band (measured at 1,000 logs: 944-956 of 1,000 for every case)."""
    from onlineeval.estimators import get_reward
    from onlineeval.estimators.log_estimates import paired_difference

    world = check_world(family)
    target, baseline = world.targets[0], world.targets[1]
    truth = world.truth(target, reward) - world.truth(baseline, reward)
    assert abs(truth) > 0.1  # a real difference: the two estimates are not the same numbers
    est = get_estimator(name)
    covered = 0
    for log in _logs(family, R, N, seed=300 + DIFFERENCE_CASES.index((name, family, reward))):
        d = paired_difference(est, log, target, baseline, get_reward(reward, log.k))
        covered += int(d["ci_low"] <= truth <= d["ci_high"])
    lo, hi = _band(R)
    assert lo <= covered <= hi, \
        f"{name}: {covered}/{R} intervals cover the exact difference {truth:.4f}, band [{lo}, {hi}]"
