"""Adaptive IPS's data-driven choice under the cluster bootstrap: every resample runs the choice again.

The plain cluster bootstrap (and the CLT interval) of adaptive IPS resample the terms of the behaviours chosen on
the whole log, so they leave out how the choice itself varies from log to log. The references here:

- the resampled estimate against :meth:`AdaptiveIPS.choose` (the two-pass choice of the point estimate) run on the
  resampled log written out row by row (each cluster's rows repeated as often as it is drawn): the same choice
  and the same estimate;
- with every cluster drawn once, the point estimate itself;
- the counts against ``rng.integers`` draws of the same generator, counted by hand;
- coverage: the percentile interval over independent logs of the check world whose users mix PBM and cascade
  clicks, inside the 99% binomial band of the nominal 95% (the CLT interval there covers below it).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy.stats import binom

from onlineeval.errors import ConfigError
from onlineeval.estimators import LoggedData, get_estimator
from onlineeval.estimators.adaptive_ips import (
    _WEIGHTS,
    BEHAVIOURS,
    choice_features,
    resampled_values,
)
from onlineeval.estimators.checks import check_world, epsilon_greedy_policy, sample_log
from onlineeval.estimators.log_estimates import paired_difference
from onlineeval.stats import cluster_bootstrap_ratio, cluster_resample_counts

REWARD = "clicks_per_query"


def _log(seed: int, n: int = 3000, users: bool = True) -> tuple[LoggedData, object, object]:
    world = check_world("mixture")
    logger = epsilon_greedy_policy(world.targets[0].lists, world.m, 0.8)
    return sample_log(world, n, np.random.default_rng(seed), logger=logger, users=users), world.targets[0], world


def _terms(est, log, target):
    rw = est._reward(REWARD, log.k)
    return {b: np.asarray(log.slot_weighted_rewards(target, _WEIGHTS[b], rw)) for b in BEHAVIOURS}, rw


def _expanded(log: LoggedData, counts: np.ndarray) -> np.ndarray:
    """The rows of the resampled log: each cluster's rows, as often as the cluster is drawn."""
    inv, g = log.user_groups
    order = np.argsort(inv, kind="stable")
    starts = np.searchsorted(inv[order], np.arange(g + 1))
    return np.concatenate([np.tile(order[starts[c]:starts[c + 1]], int(k)) for c, k in enumerate(counts) if k])


@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize("reference", ["standard", "cascade"])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_resample_chooses_and_estimates_as_choose_on_the_resampled_log(reference, seed, dense):
    """Both layouts of the features: the types' sums side by side (one product) and per type (a gather)."""
    log, target, _ = _log(seed)
    est = get_estimator("adaptive_ips", reference=reference)
    terms, _ = _terms(est, log, target)
    inv, g = log.user_groups
    features = choice_features(log.user_type, terms, inv, g, reference)
    assert features.dense is not None
    if not dense:
        features = dataclasses.replace(features, dense=None)
    rng = np.random.default_rng(seed + 10)
    counts = np.stack([np.bincount(rng.integers(0, g, g), minlength=g) for _ in range(12)]).astype(np.float64)
    num, den = resampled_values(features, counts)
    chosen = set()
    for i in range(counts.shape[0]):
        rows = _expanded(log, counts[i])
        types = log.user_type[rows]
        sub = {b: v[rows] for b, v in terms.items()}
        mapping, _ = est.choose(types, sub)
        chosen.add(tuple(sorted(mapping.items())))
        picked = est.pick(np.array([BEHAVIOURS.index(mapping[int(t)]) for t in types]), sub)
        assert den[i] == rows.size
        np.testing.assert_allclose(num[i], picked.sum(), rtol=1e-11, atol=1e-9)
    assert len(chosen) >= 2, "the resamples should not all make the same choice (the test would not tell them)"


@pytest.mark.parametrize("reference", ["standard", "cascade"])
def test_every_cluster_once_gives_the_point_estimate(reference):
    log, target, _ = _log(3)
    est = get_estimator("adaptive_ips", reference=reference)
    terms, rw = _terms(est, log, target)
    inv, g = log.user_groups
    num, den = resampled_values(choice_features(log.user_type, terms, inv, g, reference), np.ones((1, g)))
    point = est.estimate(log, target, REWARD)
    np.testing.assert_allclose(num[0] / den[0] + rw.offset, point.value, rtol=1e-12)


def test_a_type_with_one_row_or_none_in_a_resample():
    """One row of type 1: its variances are infinite, so it takes the finest behaviour (as ``choose``); a
    resample without it adds nothing for it."""
    rng = np.random.default_rng(4)
    n = 50
    types = np.zeros(n, dtype=np.int64)
    types[7] = 1
    terms = {b: rng.random(n) * (i + 1) for i, b in enumerate(BEHAVIOURS)}
    features = choice_features(types, terms, np.arange(n), n, "standard")
    est = get_estimator("adaptive_ips")
    mapping, _ = est.choose(types, terms)
    assert mapping[1] == "independent"
    counts = np.ones((2, n))
    counts[1, 7] = 0
    counts[1, 8] = 2
    num, den = resampled_values(features, counts)
    chosen0 = BEHAVIOURS.index(mapping[0])
    expect = terms[BEHAVIOURS[chosen0]][types == 0].sum() + terms["independent"][7]
    np.testing.assert_allclose(num[0], expect, rtol=1e-12)
    assert den.tolist() == [n, n]
    rows = np.r_[np.arange(n)[np.arange(n) != 7], 8]
    m1, _ = est.choose(types[rows], {b: v[rows] for b, v in terms.items()})
    np.testing.assert_allclose(num[1], terms[m1[0]][rows].sum(), rtol=1e-12)


def test_resample_counts_count_the_integer_draws():
    g, n_boot = 37, 23
    blocks = list(cluster_resample_counts(np.random.default_rng(5), g, n_boot, cells=200))
    assert [b[0] for b in blocks] == list(range(0, n_boot, 200 // g))
    counts = np.concatenate([b[2] for b in blocks])
    rng = np.random.default_rng(5)
    expect = []
    for start, stop, _ in blocks:
        idx = rng.integers(0, g, size=(stop - start, g))
        expect += [np.bincount(row, minlength=g) for row in idx]
    np.testing.assert_array_equal(counts, np.array(expect, dtype=np.float64))
    assert (counts.sum(axis=1) == g).all()


def test_estimate_and_paired_difference_use_the_reselecting_bootstrap():
    log, target, world = _log(6)
    baseline = world.targets[1]
    est = get_estimator("adaptive_ips")
    reps = est.bootstrap_estimates(log, [target, baseline], REWARD, 200, np.random.default_rng(8))
    assert reps.shape == (200, 2)
    one = est.estimate(log, target, REWARD, n_boot=200, rng=np.random.default_rng(8))
    rw = est._reward(REWARD, log.k)
    lo, hi = np.quantile(reps[:, 0], [0.025, 0.975]) + rw.offset
    assert (one.boot_low, one.boot_high) == (lo, hi)
    pair = paired_difference(est, log, target, baseline, rw, 0.05, 200, np.random.default_rng(8))
    assert (pair["boot_low"], pair["boot_high"]) == tuple(np.quantile(reps[:, 0] - reps[:, 1], [0.025, 0.975]))
    # fixed behaviours: their terms' plain cluster bootstrap, as before
    fixed = get_estimator("adaptive_ips", behaviours="cascade")
    assert fixed.bootstrap_estimates(log, [target], REWARD, 200, np.random.default_rng(8)) is None
    rips = get_estimator("rips").estimate(log, target, REWARD, n_boot=200, rng=np.random.default_rng(8))
    same = fixed.estimate(log, target, REWARD, n_boot=200, rng=np.random.default_rng(8))
    assert (same.boot_low, same.boot_high) == (rips.boot_low, rips.boot_high)


def test_n_boot_below_100_is_refused():
    log, target, _ = _log(7, n=300)
    with pytest.raises(ValueError, match="n_boot must be >= 100"):
        get_estimator("adaptive_ips").estimate(log, target, REWARD, n_boot=50, rng=np.random.default_rng(0))


@pytest.mark.slow
def test_the_reselecting_bootstrap_covers_where_the_fixed_choice_does_not():
    """300 logs of 4,000 impressions, no user ids (rows are the clusters): the percentile interval of 300
    reselecting resamples covers the exact value inside the 99% binomial band of 0.95 (285 of 300). The plain
    cluster bootstrap of the chosen behaviours' terms (what the estimator did before) covers 268, below the
    band, and the CLT interval, which also holds the choice fixed, 274 (over 2,000 such logs: 1,831, below the
    band 1,874-1,924)."""
    from onlineeval.stats import cluster_bootstrap_ratio

    world = check_world("mixture")
    target = world.targets[0]
    truth = world.truth(target, REWARD)
    logger = epsilon_greedy_policy(target.lists, world.m, 0.8)
    big = sample_log(world, 300 * 4000, np.random.default_rng(8), logger=logger, users=False)
    est = get_estimator("adaptive_ips")
    rng, rng_fixed = np.random.default_rng(9), np.random.default_rng(9)
    boot = clt = fixed = 0
    for r in range(300):
        log = big.take(np.arange(r * 4000, (r + 1) * 4000))
        e = est.estimate(log, target, REWARD, n_boot=300, rng=rng)
        boot += int(e.boot_low <= truth <= e.boot_high)
        clt += int(e.ci_low <= truth <= e.ci_high)
        offset = est._reward(REWARD, log.k).offset
        b = cluster_bootstrap_ratio(est.terms(log, target, REWARD).num, np.ones(log.n), 300, rng_fixed)
        fixed += int(b.ci_low + offset <= truth <= b.ci_high + offset)
    lo, hi = (int(v) for v in binom.interval(0.99, 300, 0.95))
    assert lo <= boot <= hi, f"reselecting bootstrap: {boot}/300 cover {truth:.4f}, band [{lo}, {hi}] (CLT {clt})"
    assert fixed < lo, f"the fixed choice's bootstrap covered {fixed}/300 (band [{lo}, {hi}]): the test shows nothing"


def test_resample_counts_are_cluster_bootstrap_ratios_draws():
    rng = np.random.default_rng(12)
    x, y = rng.random(40), rng.integers(1, 4, 40).astype(np.float64)
    ref = cluster_bootstrap_ratio(x, y, 300, np.random.default_rng(3))
    reps = np.concatenate([c @ x / (c @ y) for _, _, c in cluster_resample_counts(np.random.default_rng(3), 40, 300)])
    lo, hi = np.quantile(reps, [0.025, 0.975])
    np.testing.assert_allclose((lo, hi), (ref.ci_low, ref.ci_high), rtol=1e-12)


def test_only_the_data_driven_choice_resamples_its_choice():
    """Estimator.chooses_from_log (what the simulator's and the estimate command's warnings and reselecting bootstrap
    read) holds for adaptive IPS's data-driven choice alone; the estimators that give their own bootstrap estimates
    are exactly those it holds for and the direct method, whose click model is fitted again on every resample
    (refits_in_bootstrap)."""
    from onlineeval.estimators import available_estimators

    log, target, _ = _log(9, n=400)
    choosing = []
    for name in available_estimators():
        try:
            est = get_estimator(name)
        except ConfigError:  # an estimator with a required option (clipped IPS's cap)
            est = get_estimator(name, cap=5.0) if name == "clipped_ips" else None
        assert est is not None, f"{name}: give the test its required options"
        reps = est.bootstrap_estimates(log, [target], REWARD, 100, np.random.default_rng(0))
        assert (reps is not None) == (est.chooses_from_log or getattr(est, "refits_in_bootstrap", False)), name
        assert not getattr(est, "refits_in_bootstrap", False) or name == "dm", name
        if est.chooses_from_log:
            choosing.append(name)
    assert choosing == ["adaptive_ips"]
    fixed = get_estimator("adaptive_ips", behaviours="cascade")
    assert not fixed.chooses_from_log
    assert fixed.bootstrap_estimates(log, [target], REWARD, 100, np.random.default_rng(0)) is None


def test_the_library_estimate_warns_of_the_held_choice_without_a_bootstrap():
    """Estimator.estimate from Python: the data-driven choice's CLT interval alone carries the warning (as the estimate
    command and simulate say it), in the library's spelling (n_boot=N) and in the CLI's when asked; with n_boot the
    bootstrap-SD note instead; with fixed behaviours neither."""
    from onlineeval.estimators.intervals import BOOTSTRAP_SE, held_fixed_text

    log, target, _ = _log(9, n=400)
    held = held_fixed_text("the data-driven choice of behaviours")
    plain = get_estimator("adaptive_ips").estimate(log, target, REWARD)
    assert plain.held_fixed == "the data-driven choice of behaviours" and "n_boot=N (e.g. 1000)" in held
    assert plain.warnings().count(held) == 1 and held not in plain.diagnostics.warnings()
    assert plain.warnings("--bootstrap N", clusters=False)[0] == held.replace("n_boot=N", "--bootstrap N")
    booted = get_estimator("adaptive_ips").estimate(log, target, REWARD, n_boot=100, rng=np.random.default_rng(1))
    assert booted.se_source == BOOTSTRAP_SE and held not in booted.warnings()
    assert sum(w.startswith("se, interval and p-values are its bootstrap's") for w in booted.warnings()) == 1
    fixed = get_estimator("adaptive_ips", behaviours="cascade").estimate(log, target, REWARD)
    assert fixed.held_fixed is None and not any("fixed" in w for w in fixed.warnings())
