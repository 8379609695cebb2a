"""The estimators' conformance suite on every registered estimator, and the suite's own references.

- Every registered estimator (collected from the registry, so new ones are covered) passes
  every check of :mod:`onlineeval.estimators.checks`.
- The check worlds' exact values agree with clickmodels' exact probabilities (an
  independent implementation of PBM, the cascade model and DCM).
- The enumerated logging policies agree with brute-force sums and hand formulas; the
  sampler agrees with the exact probabilities within 4 standard errors.
- Deliberately broken estimators fail the checks that should catch them (the suite can fail).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
import pytest

import clickmodels
from onlineeval.errors import InputError
from onlineeval.estimators import available_estimators, estimator_class
from onlineeval.estimators.base import (
    Estimator,
    LoggedData,
    Reward,
    Target,
    Terms,
    support_violations,
)
from onlineeval.estimators.checks import (
    CheckFailed,
    check_biased,
    check_rewards,
    check_self_normalised_bounds,
    check_unbiased,
    check_world,
    estimator_checks,
    exact_event_probabilities,
    plackett_luce_policy,
    sample_log,
    uniform_policy,
)

CASES = [
    pytest.param(name, check, id=f"{name}-{check}")
    for name in available_estimators()
    for check, _ in estimator_checks(estimator_class(name))
]


@pytest.mark.parametrize(("name", "check"), CASES)
def test_conformance(name: str, check: str) -> None:
    dict(estimator_checks(estimator_class(name)))[check]()


def test_every_registered_estimator_is_collected() -> None:
    assert {c.values[0] for c in CASES} == set(available_estimators())
    assert {"ips", "snips"} <= set(available_estimators())


# ------------------------------------------------------------ exact truth vs clickmodels
def _graded(world_alpha: np.ndarray, query: np.ndarray, lists: np.ndarray) -> np.ndarray:
    """Labels that index a per-(query, doc) table as 'grades' (grade = q * m + d)."""
    return query[:, None] * world_alpha.shape[1] + lists


@pytest.mark.parametrize("family", ["pbm", "cascade", "dcm"])
def test_exact_probabilities_match_clickmodels(family: str) -> None:
    world = check_world(family)
    alpha = world.attraction
    click_table = [float(x) for x in alpha.ravel()]
    if family == "pbm":
        spec = {"name": "pbm", "examination": list(world.examination), "click": click_table}
    elif family == "cascade":
        spec = {"name": "cm", "click": click_table}
    else:
        spec = {"name": "dcm", "click": click_table, "continuation": list(world.continuation)}
    model = clickmodels.build(spec)
    # every list of every query
    pol = uniform_policy(world.n_queries, world.m, world.k)
    query = np.repeat(np.arange(world.n_queries), pol.lists.shape[0])
    lists = np.tile(pol.lists, (world.n_queries, 1))
    labels = _graded(alpha, query, lists)
    click, first = world.event_probabilities(query, lists)
    ref_click = model.click_probabilities(labels)
    cond = model.conditional_click_probabilities(labels, np.zeros(labels.shape, dtype=bool))
    ref_first = cond * np.concatenate([np.ones((cond.shape[0], 1)), np.cumprod(1 - cond, axis=1)[:, :-1]], axis=1)
    np.testing.assert_allclose(click, ref_click, rtol=0, atol=1e-14)
    np.testing.assert_allclose(first, ref_first, rtol=0, atol=1e-14)
    # and the cascade spec with stop = 1 after a click is the same model
    if family == "cascade":
        other = clickmodels.build({"name": "cascade", "click": click_table, "stop": [1.0] * len(click_table)})
        np.testing.assert_allclose(click, other.click_probabilities(labels), rtol=0, atol=1e-14)


def test_truth_by_hand() -> None:
    world = check_world("pbm")
    # query 0, ideal list = docs 0, 1, 2 (attraction .85, .6, .35); examination 1, .6, .3
    c = [0.85, 0.6 * 0.6, 0.3 * 0.35]
    per_query0 = sum(c)
    ideal = world.targets[0]
    assert ideal.rankings(np.array([0])).tolist() == [[0, 1, 2]]
    values = world.list_values(np.array([0]), ideal.rankings(np.array([0])), "clicks_per_query")
    assert values[0] == pytest.approx(per_query0, abs=1e-15)
    rr = c[0] + c[1] * (1 - c[0]) / 2 + c[2] * (1 - c[0]) * (1 - c[1]) / 3
    assert world.list_values(np.array([0]), np.array([[0, 1, 2]]), "reciprocal_rank")[0] == pytest.approx(rr, abs=1e-15)
    ab = (1 - c[0]) * (1 - c[1]) * (1 - c[2])
    assert world.list_values(np.array([0]), np.array([[0, 1, 2]]), "abandonment")[0] == pytest.approx(ab, abs=1e-15)
    # DCM by hand: E = 1, 1 - a0 (1 - l0), ...
    a = np.array([[0.85, 0.6, 0.35]])
    lam = np.array([0.5, 0.6, 0.7])
    click, _ = exact_event_probabilities("dcm", a, continuation=lam)
    e1 = 1 - 0.85 * 0.5
    e2 = e1 * (1 - 0.6 * 0.4)
    np.testing.assert_allclose(click[0], [0.85, e1 * 0.6, e2 * 0.35], atol=1e-15)
    # mixture = share-weighted PBM and cascade
    mix = check_world("mixture")
    v_mix = mix.truth(0, "reciprocal_rank")
    assert v_mix == pytest.approx(0.5 * world.truth(0, "reciprocal_rank") + 0.5 * check_world("cascade").truth(
        0, "reciprocal_rank"), abs=1e-15)


# ------------------------------------------------------------------- logging policies
def test_uniform_policy_hand_formulas() -> None:
    pol = uniform_policy(2, 5, 3)
    lists = np.array([[0, 1, 2], [4, 3, 2], [0, 0, 1], [0, 1, -1]])
    p = pol.propensities(np.array([0, 1, 0, 1]), lists)
    np.testing.assert_allclose(p.list, [1 / 60, 1 / 60, 0.0, 0.0], atol=1e-15)
    np.testing.assert_allclose(p.prefix[0], [1 / 5, 1 / 20, 1 / 60], atol=1e-15)
    np.testing.assert_allclose(p.item[:2], np.full((2, 3), 0.2), atol=1e-15)
    assert p.prefix[2, 1] == 0.0  # a repeated document is never shown
    assert p.prefix[3, 2] == 1.0 and p.item[3, 2] == 1.0  # empty slots carry 1
    np.testing.assert_allclose(pol.shown_probability(np.array([0]), np.array([[0, 4, 7]])), [[0.6, 0.6, 0.0]])
    # lists longer than k: a fourth document is never shown, an empty fourth slot is allowed
    longer = pol.propensities(np.array([0, 0]), np.array([[0, 1, 2, -1], [0, 1, 2, 3]]))
    np.testing.assert_allclose(longer.list, [1 / 60, 0.0], atol=1e-15)


def test_plackett_luce_brute_force() -> None:
    scores = np.array([[3.0, 1.0, 0.5, 2.0], [1.0, 1.0, 4.0, 0.25]])
    pol = plackett_luce_policy(scores, 3)
    m, k = 4, 3
    lists = list(itertools.permutations(range(m), k))
    for q in range(2):
        brute = {}
        for s in lists:
            prob, left = 1.0, scores[q].sum()
            for d in s:
                prob *= scores[q, d] / left
                left -= scores[q, d]
            brute[s] = prob
        assert math.isclose(sum(brute.values()), 1.0, abs_tol=1e-12)
        arr = np.array(lists)
        p = pol.propensities(np.full(len(lists), q), arr)
        np.testing.assert_allclose(p.list, [brute[s] for s in lists], rtol=1e-12)
        for j in range(k):
            pref = [sum(v for t, v in brute.items() if t[: j + 1] == s[: j + 1]) for s in lists]
            np.testing.assert_allclose(p.prefix[:, j], pref, rtol=1e-12)
            item = [sum(v for t, v in brute.items() if t[j] == s[j]) for s in lists]
            np.testing.assert_allclose(p.item[:, j], item, rtol=1e-12)
        pair = pol.pair_marginals(q)
        for j, a, l, b in itertools.product(range(k), range(m), range(k), range(m)):
            ref = sum(v for t, v in brute.items() if t[j] == a and t[l] == b)
            assert math.isclose(pair[j, a, l, b], ref, abs_tol=1e-12)
        ipm = pol.item_position_marginals(np.array([q]))[0]
        for a, j in itertools.product(range(m), range(k)):
            assert math.isclose(ipm[a, j], sum(v for t, v in brute.items() if t[j] == a), abs_tol=1e-12)
        shown = pol.shown_probability(np.array([q]), np.array([[0, 1, 2]]))[0]
        for idx, d in enumerate([0, 1, 2]):
            assert math.isclose(shown[idx], sum(v for t, v in brute.items() if d in t), abs_tol=1e-12)


def test_policy_sampling_frequencies() -> None:
    pol = plackett_luce_policy(np.array([[3.0, 1.0, 0.5, 2.0]]), 2)
    n = 60_000
    shown = pol.sample(np.zeros(n, dtype=np.int64), np.random.default_rng(4))
    codes = shown[:, 0] * 4 + shown[:, 1]
    freq = np.bincount(codes, minlength=16) / n
    exact = np.zeros(16)
    exact[pol.lists[:, 0] * 4 + pol.lists[:, 1]] = pol.probs[0]
    se = np.sqrt(exact * (1 - exact) / n)
    assert np.all(np.abs(freq - exact) <= 4 * se + 1e-12)
    again = pol.sample(np.zeros(n, dtype=np.int64), np.random.default_rng(4))
    assert np.array_equal(shown, again)


def test_bad_policy_input() -> None:
    with pytest.raises(InputError, match="query index"):
        uniform_policy(2, 5, 3).propensities(np.array([2]), np.array([[0, 1, 2]]))
    with pytest.raises(InputError, match="positive"):
        plackett_luce_policy(np.array([[1.0, 0.0, 2.0]]), 2)


@pytest.mark.parametrize("family", ["pbm", "cascade", "dcm", "mixture"])
def test_sampler_matches_exact_click_probabilities(family: str) -> None:
    world = check_world(family)
    log = sample_log(world, 200_000, np.random.default_rng(9))
    click, first = world.event_probabilities(log.query, log.shown)
    from onlineeval.estimators.base import first_click

    for name, exact, got in (("click", click, log.clicks), ("first", first, first_click(log.clicks))):
        se = np.sqrt((exact * (1 - exact)).sum(axis=0)) / log.n
        diff = np.abs(got.mean(axis=0) - exact.mean(axis=0))
        assert np.all(diff <= 4 * se), (family, name, diff / se)
    # exact logged propensities
    p = world.logger.propensities(log.query, log.shown)
    np.testing.assert_array_equal(p.list, log.p_list)
    # the query mix
    freq = np.bincount(log.query, minlength=world.n_queries) / log.n
    assert np.all(np.abs(freq - world.query_probs) <= 4 * np.sqrt(world.query_probs * (1 - world.query_probs) / log.n))


def test_deterministic_logger_violates_support_at_every_level() -> None:
    world = check_world("pbm")
    det = check_world("pbm", "deterministic").logger
    log = sample_log(world, 300, np.random.default_rng(1), logger=det)
    assert np.all(log.p_list == 1.0)
    for target in world.targets:
        for level in ("list", "prefix", "item", "any"):
            assert support_violations(log, target, level) == (300, 300), (target.name, level)
    full = sample_log(world, 300, np.random.default_rng(1))
    for level in ("list", "prefix", "item", "any"):
        assert support_violations(full, world.targets[0], level) == (0, 300)


# --------------------------------------------------------------- the suite can fail
@dataclass(frozen=True)
class _FirstSlotIPS(Estimator):
    """Wrong: reweights the whole list by the first slot's propensity only."""

    name = "broken_first_slot_ips"
    needs = ("p_prefix",)
    unbiased_under = (("any", "additive"),)

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = target.propensities(data.query, data.shown).list / data.p_prefix[:, 0]
        return Terms(num=w * reward.slot_rewards(data.clicks).sum(axis=1), weights=w)


@dataclass(frozen=True)
class _HonestIPS(Estimator):
    """Whole-list IPS that wrongly declares itself biased under PBM."""

    name = "honest_ips"
    needs = ("p_list",)
    biased_under = (("pbm", "additive"),)

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = target.propensities(data.query, data.shown).list / data.p_list
        return Terms(num=w * reward.slot_rewards(data.clicks).sum(axis=1), weights=w)


@dataclass(frozen=True)
class _UnboundedSN(Estimator):
    """Self-normalised in name only: the denominator is half the weight."""

    name = "unbounded_sn"
    needs = ("p_list",)
    self_normalised = True

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = target.propensities(data.query, data.shown).list / data.p_list
        return Terms(num=w * reward.slot_rewards(data.clicks).sum(axis=1), den=0.5 * w, weights=w)


def test_suite_catches_wrong_propensity() -> None:
    with pytest.raises(CheckFailed, match="unbiased"):
        check_unbiased(_FirstSlotIPS, "pbm", "additive")


def test_suite_catches_undeclared_unbiasedness() -> None:
    with pytest.raises(CheckFailed, match="bias not visible"):
        check_biased(_HonestIPS, "pbm", "additive")


def test_suite_catches_unbounded_self_normalisation() -> None:
    with pytest.raises(CheckFailed, match="outside the reward range"):
        check_self_normalised_bounds(_UnboundedSN)


def test_check_rewards() -> None:
    add = check_rewards("additive", 3)
    assert add[0].name == "clicks_per_query" and add[1].kind == "additive"
    fc = check_rewards("first_click", 3)
    assert [r.name for r in fc] == ["reciprocal_rank", "abandonment"]


def test_check_world_is_the_same_object_and_read_only() -> None:
    assert check_world("pbm") is check_world("pbm")
    with pytest.raises(ValueError):
        check_world("pbm").attraction[0, 0] = 0.5
    with pytest.raises(InputError, match="world family must be one of pbm, cascade, dcm, mixture; got 'ubm'"):
        check_world("ubm")


def test_benchmark_logger_matches_enumeration() -> None:
    """The benchmark's closed-form half-randomised logger equals epsilon-greedy (0.5) by enumeration."""
    import importlib.util
    import sys
    from pathlib import Path

    from onlineeval.estimators.checks import epsilon_greedy_policy

    path = Path(__file__).resolve().parents[1] / "benchmarks" / "bench_estimators.py"
    spec = importlib.util.spec_from_file_location("bench_estimators", path)
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench  # dataclasses look their module up while the class is built
    try:
        spec.loader.exec_module(bench)
    finally:
        sys.modules.pop(spec.name, None)
    production = np.array([[2, 0, 4], [1, 3, 0]])
    closed = bench.HalfRandomisedLogger(production, 5)
    exact = epsilon_greedy_policy(production, 5, 0.5)
    lists = np.concatenate([exact.lists, np.array([[0, 0, 1], [2, 0, 7], [-1, 0, 1]])])
    for q in range(2):
        query = np.full(lists.shape[0], q)
        a, b = closed.propensities(query, lists), exact.propensities(query, lists)
        np.testing.assert_allclose(a.list, b.list, atol=1e-15)
        valid = lists >= 0
        np.testing.assert_allclose(a.prefix[valid], b.prefix[valid], atol=1e-15)
        np.testing.assert_allclose(a.item[valid], b.item[valid], atol=1e-15)
        np.testing.assert_allclose(closed.pair_marginals(q), exact.pair_marginals(q), atol=1e-15)
        np.testing.assert_allclose(closed.item_position_marginals(np.array([q])),
                                   exact.item_position_marginals(np.array([q])), atol=1e-15)
        docs = np.array([[0, 1, 2, 3, 4, 9]])
        np.testing.assert_allclose(closed.shown_probability(np.array([q]), docs),
                                   exact.shown_probability(np.array([q]), docs), atol=1e-15)
