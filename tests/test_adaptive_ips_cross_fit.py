"""Adaptive IPS's cross-fitted choice (``folds > 1``): the rows of each fold of the users take the behaviours
:meth:`AdaptiveIPS.choose` picks on the other folds' rows.

References: the choice made by hand with ``choose`` on each fold's complement (a type the complement lacks takes
the reference behaviour), and for the reselecting bootstrap the same on the resampled log written out row by row;
with every cluster drawn once the resample is the point estimate. (Its bias against the exact value:
tests/test_adaptive_ips_selection_bias.py.)"""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators import LoggedData, get_estimator
from onlineeval.estimators.adaptive_ips import _WEIGHTS, BEHAVIOURS, CrossFitFeatures, resampled_values
from onlineeval.estimators.checks import check_world, epsilon_greedy_policy, sample_log
from onlineeval.estimators.model_based import fold_ids

REWARD = "clicks_per_query"


def _log(seed: int, n: int = 3000) -> tuple[LoggedData, object]:
    world = check_world("mixture")
    logger = epsilon_greedy_policy(world.targets[0].lists, world.m, 0.8)
    return sample_log(world, n, np.random.default_rng(seed), logger=logger, users=True), world.targets[0]


def _terms(est, log, target):
    rw = est._reward(REWARD, log.k)
    return {b: np.asarray(log.slot_weighted_rewards(target, _WEIGHTS[b], rw)) for b in BEHAVIOURS}, rw


def _by_hand(types, terms, fold, folds, reference="standard"):
    """Each row's value: its fold's behaviours chosen by the whole-log estimator's ``choose`` on the other rows."""
    base = get_estimator("adaptive_ips", reference=reference)
    out = np.empty(types.size)
    for f in range(folds):
        own, other = fold == f, fold != f
        mapping, _ = base.choose(types[other], {b: v[other] for b, v in terms.items()})
        out[own] = [terms[mapping.get(int(t), reference)][i] for i, t in zip(np.flatnonzero(own), types[own])]
    return out


@pytest.mark.parametrize("folds", [2, 3])
@pytest.mark.parametrize("reference", ["standard", "cascade"])
@pytest.mark.parametrize("seed", [1, 2])
def test_each_folds_rows_take_the_behaviours_chosen_on_the_others(folds, reference, seed):
    log, target = _log(seed)
    est = get_estimator("adaptive_ips", folds=folds, reference=reference)
    terms, rw = _terms(est, log, target)
    fold = fold_ids(log, folds)
    want = _by_hand(log.user_type, terms, fold, folds, reference)
    got = est.terms(log, target, REWARD)
    np.testing.assert_array_equal(got.num, want)
    assert est.estimate(log, target, REWARD).value == pytest.approx(rw.offset + want.mean(), rel=1e-12)
    notes = got.notes
    assert notes["folds"] == folds and set(notes["behaviours_by_fold"]) == {str(f) for f in range(folds)}
    # the folds are the users' (a user's rows in one fold), by the sorted ids' rank modulo folds
    _, inv = np.unique(log.user, return_inverse=True)
    np.testing.assert_array_equal(fold, inv % folds)


def test_a_type_the_other_folds_lack_takes_the_reference():
    log, target = _log(3)
    fold = fold_ids(log, 2)
    types = log.user_type.copy()
    lone = np.flatnonzero(fold == 0)[:40]
    types[lone] = 7  # a type only fold 0 holds
    log = LoggedData(log.query, log.shown, log.clicks, p_list=log.p_list, p_prefix=log.p_prefix, p_item=log.p_item,
                     user=log.user, user_type=types)
    for reference in ("standard", "cascade"):
        est = get_estimator("adaptive_ips", folds=2, reference=reference)
        terms, _ = _terms(est, log, target)
        got = est.terms(log, target, REWARD)
        np.testing.assert_array_equal(got.num[lone], terms[reference][lone])
        assert got.notes["behaviours_by_fold"]["0"]["7"] == reference


@pytest.mark.parametrize("folds", [2, 3])
def test_a_resample_crosses_the_folds_as_on_the_resampled_log(folds):
    """Each resample's value against the cross-fitted choice made by hand on the resampled log written out row
    by row (each user's rows as often as drawn, keeping its fold); all ones: the point estimate."""
    log, target = _log(4)
    est = get_estimator("adaptive_ips", folds=folds)
    terms, rw = _terms(est, log, target)
    inv, g = log.user_groups
    fold = fold_ids(log, folds)
    features = est.resampling_features(log.user_type, terms, inv, g, est.candidates(rw), fold)
    assert isinstance(features, CrossFitFeatures)
    num, den = resampled_values(features, np.ones((2, g)))
    np.testing.assert_allclose(num / den, _by_hand(log.user_type, terms, fold, folds).mean(), rtol=1e-12)
    rng = np.random.default_rng(5)
    counts = np.stack([np.bincount(rng.integers(0, g, g), minlength=g) for _ in range(10)]).astype(np.float64)
    num, den = resampled_values(features, counts)
    order = np.argsort(inv, kind="stable")
    starts = np.searchsorted(inv[order], np.arange(g + 1))
    for i in range(counts.shape[0]):
        rows = np.concatenate([np.tile(order[starts[c]:starts[c + 1]], int(k)) for c, k in enumerate(counts[i]) if k])
        want = _by_hand(log.user_type[rows], {b: v[rows] for b, v in terms.items()}, fold[rows], folds)
        assert den[i] == rows.size
        assert num[i] == pytest.approx(want.sum(), rel=1e-9)


def test_the_bootstrap_reselects_across_the_folds():
    """``estimate(n_boot=...)`` of the cross-fitted choice resamples with the cross-fitted features (its draws
    are :func:`resampled_values` of them), not the whole-log choice's."""
    log, target = _log(5)
    a = get_estimator("adaptive_ips", folds=2).estimate(log, target, REWARD, n_boot=200, rng=np.random.default_rng(1))
    b = get_estimator("adaptive_ips").estimate(log, target, REWARD, n_boot=200, rng=np.random.default_rng(1))
    assert a.boot_low < a.value < a.boot_high
    assert (a.boot_low, a.boot_high) != (b.boot_low, b.boot_high)


@pytest.mark.parametrize(("options", "message"), [
    ({"folds": 0}, "must be an integer >= 1, got 0"),
    ({"folds": True}, "must be an integer >= 1, got True"),
    ({"folds": 2.5}, "must be an integer >= 1, got 2.5"),
    ({"folds": 2, "behaviours": "cascade"}, "nothing is chosen on the log: leave folds at 1"),
])
def test_bad_folds_are_refused_naming_the_option(options, message):
    with pytest.raises(ConfigError, match="folds") as info:
        get_estimator("adaptive_ips", **options)
    assert message in str(info.value)


def test_fewer_users_than_folds_is_a_clear_error():
    log, target = _log(6, n=40)
    few = LoggedData(log.query, log.shown, log.clicks, p_list=log.p_list, p_prefix=log.p_prefix, p_item=log.p_item,
                     user=np.zeros(log.n, dtype=np.int64), user_type=log.user_type)
    with pytest.raises(InputError, match="2 folds .cross-fitting. need at least 2 users"):
        get_estimator("adaptive_ips", folds=2).estimate(few, target, REWARD)


def test_the_catalogue_says_how_the_choice_is_made():
    crossed = get_estimator("adaptive_ips", folds=2).assumption
    assert "cross-fitted over 2 folds" in crossed and "on the same log" not in crossed
    assert "on the same log" in get_estimator("adaptive_ips").assumption


def test_a_resample_without_the_other_folds_rows_of_a_type_takes_the_reference():
    """A type whose users in fold 1 are all left out of a resample: fold 0's rows of it take the reference there,
    as on the resampled log written out (the complement holds no row of the type)."""
    log, target = _log(7)
    inv, g = log.user_groups
    fold = fold_ids(log, 2)
    users0 = np.unique(inv[fold == 0])[:3]
    users1 = np.unique(inv[fold == 1])[:2]
    types = log.user_type.copy()
    types[np.isin(inv, np.concatenate([users0, users1]))] = 7
    log = LoggedData(log.query, log.shown, log.clicks, p_list=log.p_list, p_prefix=log.p_prefix, p_item=log.p_item,
                     user=log.user, user_type=types)
    est = get_estimator("adaptive_ips", folds=2)
    terms, rw = _terms(est, log, target)
    features = est.resampling_features(types, terms, inv, g, est.candidates(rw), fold)
    counts = np.ones((1, g))
    counts[0, users1] = 0.0
    num, den = resampled_values(features, counts)
    rows = np.flatnonzero(counts[0, inv] > 0)
    want = _by_hand(types[rows], {b: v[rows] for b, v in terms.items()}, fold[rows], 2)
    assert num[0] == pytest.approx(want.sum(), rel=1e-12) and den[0] == rows.size
    sevens = rows[types[rows] == 7]
    assert sevens.size and np.all(fold[sevens] == 0)
    np.testing.assert_array_equal(want[types[rows] == 7], terms["standard"][sevens])


def test_the_simulation_summary_prints_the_instances_assumption():
    """The counterfactual summary's catalogue entry is the configured instance's assumption (it printed the class's,
    "chosen on the same log", for fixed and cross-fitted choices too)."""
    from onlineeval.estimators import estimator_class
    from simulations.analysis import _assumption

    cls = estimator_class("adaptive_ips")
    assert "cross-fitted over 2 folds" in _assumption(cls, {"folds": 2})
    assert "fixed by the user: behaviours=cascade" in _assumption(cls, {"behaviours": "cascade"})
    assert _assumption(cls, {}) == cls.assumption
    assert _assumption(estimator_class("clipped_ips"), {"cap": 5}) == estimator_class("clipped_ips").assumption


def _nbytes(features) -> int:
    """The bytes of the arrays of :class:`ChoiceFeatures` or :class:`CrossFitFeatures`."""
    parts = [features.whole, *features.own] if isinstance(features, CrossFitFeatures) else [features]
    total = sum(c.nbytes for c in getattr(features, "cols", ()))
    for f in parts:
        total += sum(a.nbytes for a in (*f.clusters, *f.sums, *f.centres))
        total += f.dense.nbytes if f.dense is not None and not any(f.dense is s for s in f.sums) else 0
    return total


def test_the_cross_fitted_features_do_not_grow_with_the_folds():
    """The resamples' features hold the whole log's sums once and each fold's own rows' over its own clusters (the
    other folds' sums are the whole's less the fold's own): about twice the whole-log choice's bytes for any number
    of folds (a table per fold for its rows and one for the others' held 1.5 GB per target at 300,000 users and 10
    folds); the resamples the same as the choice made by hand on the resampled log."""
    log, target = _log(8)
    inv, g = log.user_groups
    est1 = get_estimator("adaptive_ips")
    terms, rw = _terms(est1, log, target)
    base = _nbytes(est1.resampling_features(log.user_type, terms, inv, g, est1.candidates(rw)))
    for folds in (2, 10):
        est = get_estimator("adaptive_ips", folds=folds)
        fold = fold_ids(log, folds)
        features = est.resampling_features(log.user_type, terms, inv, g, est.candidates(rw), fold)
        assert len(features.own) == folds
        assert _nbytes(features) <= 2.2 * base
    counts = np.stack([np.bincount(np.random.default_rng(9).integers(0, g, g), minlength=g)]).astype(np.float64)
    num, den = resampled_values(features, counts)
    order = np.argsort(inv, kind="stable")
    starts = np.searchsorted(inv[order], np.arange(g + 1))
    rows = np.concatenate([np.tile(order[starts[c]:starts[c + 1]], int(k)) for c, k in enumerate(counts[0]) if k])
    want = _by_hand(log.user_type[rows], {b: v[rows] for b, v in terms.items()}, fold[rows], 10)
    assert den[0] == rows.size and num[0] == pytest.approx(want.sum(), rel=1e-9)


def test_folds_that_split_a_cluster_are_refused():
    log, target = _log(9)
    inv, g = log.user_groups
    est = get_estimator("adaptive_ips", folds=2)
    terms, rw = _terms(est, log, target)
    with pytest.raises(ValueError, match="more than one fold"):
        est.resampling_features(log.user_type, terms, inv, g, est.candidates(rw), np.arange(log.n) % 2)
