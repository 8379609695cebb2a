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
    click_pattern_probabilities,
    enumerated_log,
    estimator_checks,
    expected_value,
    exact_event_probabilities,
    plackett_luce_policy,
    sample_clicks,
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
    # the joint law of the clicks (the enumeration behind the suite's exact expectations) is clickmodels' too:
    # every click pattern's probability against exp(log_likelihood) of that pattern
    from onlineeval.estimators.exact_worlds import click_patterns

    joint = click_pattern_probabilities(family, alpha[query[:, None], lists], world.examination, world.continuation)
    for i, pat in enumerate(click_patterns(world.k)):
        ref = np.exp(model.log_likelihood(labels, np.broadcast_to(pat, labels.shape)))
        np.testing.assert_allclose(joint[:, i], ref, rtol=1e-12, atol=1e-15)
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


@pytest.mark.parametrize("family", ["pbm", "cascade", "dcm"])
def test_click_pattern_probabilities(family: str) -> None:
    """The joint law of the clicks: rows sum to 1, its margins are exact_event_probabilities' (clicks and first
    clicks), and the sampler's pattern frequencies agree within 4 SE (a chi-square-free check per pattern)."""
    from onlineeval.estimators.exact_worlds import click_patterns

    rng = np.random.default_rng(4)
    alpha = rng.uniform(0.05, 0.95, (6, 3))
    exam, cont = np.array([1.0, 0.6, 0.3]), np.array([0.5, 0.6, 0.7])
    pp = click_pattern_probabilities(family, alpha, exam, cont)
    pats = click_patterns(3)
    assert pats.shape == (8, 3) and len({tuple(r) for r in pats.tolist()}) == 8
    np.testing.assert_allclose(pp.sum(axis=1), 1.0, rtol=0, atol=1e-15)
    click, first = exact_event_probabilities(family, alpha, exam, cont)
    np.testing.assert_allclose(pp @ pats, click, rtol=0, atol=1e-15)
    is_first = pats & (np.cumsum(pats, axis=1) == 1)
    np.testing.assert_allclose(pp @ is_first, first, rtol=0, atol=1e-15)
    if family == "cascade":  # two clicks are impossible
        assert np.all(pp[:, pats.sum(axis=1) > 1] == 0)
    # the sampler (an independent implementation) draws the patterns with these probabilities
    n = 400_000
    row = alpha[[2]].repeat(n, axis=0)
    drawn = sample_clicks(family, row, np.random.default_rng(12), exam, cont)
    code = drawn.astype(np.int64) @ (1 << np.arange(3))
    freq = np.bincount(code, minlength=8) / n
    se = np.sqrt(pp[2] * (1 - pp[2]) / n)
    assert np.all(np.abs(freq - pp[2]) <= 4 * se + 1e-12), (freq - pp[2]) / np.maximum(se, 1e-300)


@pytest.mark.parametrize("family", ["pbm", "cascade", "dcm", "mixture"])
def test_enumerated_log_gives_the_exact_values(family: str) -> None:
    """Every impression of a check world with its probability: they sum to 1, the queries' and the lists'
    probabilities are the world's, and the probability-weighted rewards of the rows showing a target's list, divided
    by that list's logging probability, are the target's exact value (whole-list IPS in expectation, by hand)."""
    world = check_world(family)
    log, prob = enumerated_log(world)
    assert prob.min() > 0 and abs(prob.sum() - 1) < 1e-12
    assert len({(q, *s, t, *c) for q, s, t, c in zip(log.query.tolist(), log.shown.tolist(), log.user_type.tolist(),
                                                      log.clicks.tolist(), strict=True)}) == log.n
    np.testing.assert_allclose(np.bincount(log.query, weights=prob), world.query_probs, rtol=1e-12)
    for target in world.targets:
        hits = np.all(log.shown == target.rankings(log.query), axis=1)
        for rw in check_rewards("additive", world.k) + check_rewards("first_click", world.k):
            r = rw.slot_rewards(log.clicks).sum(axis=1)
            value = rw.offset + float(prob[hits] @ (r[hits] / log.p_list[hits]))
            assert value == pytest.approx(world.truth(target, rw), rel=1e-12, abs=0)


def test_expected_value_of_registered_estimators() -> None:
    """expected_value on estimators with per-impression terms: the exact values (IPS, RIPS, IIPS under PBM), and a
    self-normalised IPS converges to the same value; IIPS under the cascade model misses it (its declared bias)."""
    world = check_world("pbm")
    rw = check_rewards("additive", world.k)[0]
    for name in ("ips", "snips", "rips", "iips"):
        est = estimator_class(name)()
        for target in world.targets:
            assert expected_value(est, world, target, rw) == pytest.approx(world.truth(target, rw), rel=1e-12)
    cascade = check_world("cascade")
    bias = expected_value(estimator_class("iips")(), cascade, cascade.targets[1], rw) - cascade.truth(
        cascade.targets[1], rw)
    assert abs(bias) > 0.01


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


@dataclass(frozen=True)
class _OnePercentIPS(Estimator):
    """Whole-list IPS 1% too high: what the Monte Carlo check (tolerance 4-9% of the value for IPS at 200
    replicates of 2,500 impressions) cannot see."""

    name = "one_percent_ips"
    needs = ("p_list",)
    unbiased_under = (("any", "additive"),)

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = target.propensities(data.query, data.shown).list / data.p_list
        return Terms(num=1.01 * w * reward.slot_rewards(data.clicks).sum(axis=1), weights=w)


@dataclass(frozen=True)
class _SlightlySNIPS(Estimator):
    """Self-normalised IPS whose denominator adds 0.2% of a weight per impression: it converges to 0.998 of the
    value."""

    name = "slightly_snips"
    needs = ("p_list",)
    self_normalised = True
    unbiased_under = (("pbm", "additive"),)

    def _terms(self, data: LoggedData, target: Target, reward: Reward) -> Terms:
        w = target.propensities(data.query, data.shown).list / data.p_list
        return Terms(num=w * reward.slot_rewards(data.clicks).sum(axis=1), den=w + 0.002, weights=w)


def test_suite_catches_a_one_percent_bias() -> None:
    """A 1% bias passes the Monte Carlo comparison and fails the exact expectation of the terms."""
    from onlineeval.estimators import checks

    world = check_world("pbm")
    est = _OnePercentIPS()
    for target in world.targets:  # what the suite's Monte Carlo alone concluded: within 4 SE
        rw = check_rewards("additive", world.k)[0]
        log = checks.replicate_log("pbm")
        values = checks._replicate_values(_OnePercentIPS, est, log, checks.REPLICATES, checks.REPLICATE_SIZE,
                                          target, rw, True, "x")
        bias, se = checks._mc_summary(values, world.truth(target, rw))
        assert abs(bias) <= checks.Z * se
    with pytest.raises(CheckFailed, match=r"exact expectation .* \(bias \+[0-9.e-]+, \+1\.000%\)"):
        check_unbiased(_OnePercentIPS, "pbm", "additive")
    with pytest.raises(CheckFailed, match=r"exact expectation .*, -0\.[0-9]+%\)"):
        check_unbiased(_SlightlySNIPS, "pbm", "additive")


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


@pytest.mark.parametrize("family", ["pbm", "cascade", "dcm"])
def test_clipped_ips_bias_is_its_declared_formula_exactly(family: str) -> None:
    """Clipped IPS's assumption says E[estimate] - V = -E[(w - cap)^+ R]: by enumeration of every impression, with
    the weights of the world's own lists and the rewards' exact expectations (not the estimator's terms)."""
    world = check_world(family)
    log, prob = enumerated_log(world)
    for cap in (2.0, 5.0, 40.0):
        est = estimator_class("clipped_ips")(cap=cap)
        for target in world.targets:
            hit = np.all(log.shown == target.rankings(log.query), axis=1)
            w = np.where(hit, 1.0 / log.p_list, 0.0)
            for rw in check_rewards("additive", world.k) + check_rewards("first_click", world.k):
                r = rw.offset + rw.slot_rewards(log.clicks).sum(axis=1)  # R: the whole reward (abandonment: 1 - ...)
                bias = -float(prob @ (np.maximum(w - cap, 0.0) * r))
                got = expected_value(est, world, target, rw) - world.truth(target, rw)
                assert got == pytest.approx(bias, rel=1e-9, abs=1e-12), (cap, target.name, rw.name)
                if cap >= w.max():
                    assert bias == 0.0
    top = float(1.0 / log.p_list.min())  # at or above every weight: unbiased, exactly
    rw = check_rewards("additive", world.k)[0]
    for target in world.targets:
        est = estimator_class("clipped_ips")(cap=top)
        assert expected_value(est, world, target, rw) == pytest.approx(world.truth(target, rw), rel=1e-12)
