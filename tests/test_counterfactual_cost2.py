"""The counterfactual design's cheaper serving and checkpoint steps (issue 8, round 2)
against the plain numpy computations they replace (the same numbers, bit for bit)."""

from __future__ import annotations

import math
from itertools import permutations

import numpy as np
import pytest
from scipy.stats import chisquare, norm

from simulations.policies.base import shuffle_top
from test_counterfactual_fastpaths import _plain_shuffle_top  # shuffle_top as a plain loop


@pytest.mark.parametrize("k", [1, 3, 5, 9, 25])
def test_shuffle_top_equals_the_plain_loop_and_draws_the_same(k):
    rng = np.random.default_rng(7)
    for c_top in (np.full(300, 20), rng.integers(1, 21, 300), np.full(4, 1), np.full(5, 2),
                  np.zeros(0, dtype=np.int64)):
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        got = shuffle_top(c_top, k, a)
        assert got.dtype == np.int64 and got.shape == (c_top.size, k) and got.flags.c_contiguous
        np.testing.assert_array_equal(got, _plain_shuffle_top(c_top, k, b))
        assert a.random() == b.random()  # the same draws consumed


@pytest.mark.parametrize("k", [5, 2])
def test_shuffle_top_prefixes_are_uniform_in_a_batch_of_mixed_widths(k):
    """Rows of 3, 4 and 6 shuffled ranks in one batch (the width, 6, sets the uniforms per row), k = 5 (rows
    narrower than k) and k = 2 (rows between k and the width): each ordered choice of the first min(k, c) ranks
    within z standard errors of its probability 1 / (c)_min(k, c), z Bonferroni-corrected over the cells (750 and 48)
    for a family-wise false-alarm rate of 0.001 (about 4.8 and 4.3), the counts' chi-square test of uniformity above
    p = 0.001 per width, and the slots past c in base order."""
    per = 30_000
    widths = (3, 4, 6)
    c_top = np.repeat(np.array(widths, dtype=np.int64), per)
    ranks = shuffle_top(c_top, k, np.random.default_rng(20261201 + k))
    n_cells = sum(math.perm(c, min(k, c)) for c in widths)
    z = float(norm.isf(0.001 / (2 * n_cells)))
    for c in widths:
        rows = ranks[c_top == c]
        kk = min(k, c)
        cells = {p: i for i, p in enumerate(permutations(range(c), kk))}
        counts = np.zeros(len(cells))
        for r in map(tuple, rows[:, :kk]):
            counts[cells[r]] += 1  # a rank outside 0..c-1 or a repeat is no cell: KeyError
        p = 1.0 / len(cells)
        se = np.sqrt(p * (1 - p) / per)
        assert np.all(np.abs(counts / per - p) <= z * se), (c, counts)
        assert chisquare(counts).pvalue > 0.001, (c, counts)
        np.testing.assert_array_equal(rows[:, kk:], np.broadcast_to(np.arange(kk, k), (per, k - kk)))


def test_fisher_yates_step_stays_below_its_span():
    """floor(u m) < m for the largest uniform a Generator gives (1 - 2**-53) and every span the samplers use:
    the step never swaps with a slot past the shuffled ranks."""
    u = 1.0 - 2.0**-53
    m = np.arange(1, 200_001, dtype=np.float64)
    assert np.all((u * m).astype(np.int64) == m - 1)


# ------------------------------------------------------------------ AdaptiveIPS.select
BEHAVIOURS = ("independent", "cascade", "standard")


def _old_choose(est, types, terms):
    """AdaptiveIPS.choose as it was (np.unique over the types, the reference's zero
    difference computed like the others)."""
    n = types.size
    mapping, report = {}, {}
    ref = terms[est.reference]
    for t in np.unique(types).tolist():
        rows = np.flatnonzero(types == t)
        n_u = int(rows.size)
        share = n_u / n
        ref_u = ref[rows]
        scores = {}
        for b in BEHAVIOURS:
            x = ref_u if b == est.reference else terms[b][rows]
            d = x - ref_u
            var_x = float(x.var(ddof=1)) / n_u if n_u > 1 else np.inf
            var_d = float(d.var(ddof=1)) / n_u if n_u > 1 else np.inf
            bias2 = max(0.0, float(d.mean()) ** 2 - var_d) if np.isfinite(var_d) else 0.0
            scores[b] = share * share * (bias2 + var_x)
        best = min(BEHAVIOURS, key=lambda b: (scores[b], BEHAVIOURS.index(b)))
        mapping[int(t)] = best
        report[str(int(t))] = {b: (v if np.isfinite(v) else None) for b, v in scores.items()}
    return mapping, report


def _old_select(est, types, terms):
    notes = {}
    mapping, mse = _old_choose(est, types, terms)
    notes["estimated_mse"] = mse
    uniq = np.unique(types)
    notes["behaviours"] = {str(int(t)): mapping[int(t)] for t in uniq}
    choice = np.array([BEHAVIOURS.index(mapping[int(t)]) for t in uniq], dtype=np.int64)
    if np.unique(choice).size == 1:
        return BEHAVIOURS[int(choice[0])], notes
    return choice[np.searchsorted(uniq, types)], notes


@pytest.mark.parametrize("reference", ["standard", "cascade"])
@pytest.mark.parametrize("dtype", [np.int8, np.int64, np.uint8, np.uint64, np.int32])
def test_adaptive_ips_select_equals_the_old_code(reference, dtype):
    from onlineeval.estimators import get_estimator

    est = get_estimator("adaptive_ips", reference=reference)
    rng = np.random.default_rng(5)
    n = 3000
    for case in range(6):
        types = rng.integers(0, 4, n)
        if case == 1:
            types[:] = 2  # one type
        if case == 2:
            types[0] = 3 if dtype in (np.uint8, np.uint64) else -1  # a lone row (n_u = 1) or a negative code
        if case == 3:
            types = types * 300  # larger codes
        types = types.astype(dtype)
        terms = {b: np.where(rng.random(n) < 0.3, rng.exponential(size=n) * (1 + i), 0.0)
                 for i, b in enumerate(BEHAVIOURS)}
        if case == 4:  # the cascade terms biased for one type: choices differ by type
            terms["cascade"] = terms["cascade"] + (types == 1) * 0.5
            terms["independent"] = terms["independent"] * (types != 0)
        if case == 5:  # non-finite terms (an infinite weight, a NaN)
            terms["standard"][3], terms["cascade"][7] = np.inf, np.nan
        with np.errstate(invalid="ignore"):  # inf - inf in the non-finite case, in both versions
            got_choice, got_notes = est.select(types, terms)
            old_choice, old_notes = _old_select(est, types, terms)
        assert repr(got_notes) == repr(old_notes)  # the same floats (repr: exact), keys and order
        if isinstance(old_choice, str):
            assert got_choice == old_choice
        else:
            np.testing.assert_array_equal(got_choice, old_choice)


# ------------------------------------------------------------------ mixture sampling
def _plain_mixture_sample(policy, q, rng):
    """Each row's component by ``Generator.choice``, then each component's rows sampled by
    the component itself, in component order (nested mixtures the same way)."""
    from simulations.policies.mixture import MixturePolicy

    if not isinstance(policy, MixturePolicy):
        return policy.sample(q, rng)
    pick = rng.choice(len(policy.components), size=q.size, p=policy.weights)
    out = np.full((q.size, policy.k), -1, dtype=np.int64)
    for i, c in enumerate(policy.components):
        rows = np.flatnonzero(pick == i)
        if rows.size:
            out[rows] = _plain_mixture_sample(c, q[rows], rng)
    return out


MIXTURES = [
    {"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 8, "weight": 0.8},
        {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 6, "scores": "B", "weight": 0.2}]},
    {"policy": "mixture", "components": [
        {"policy": "deterministic", "weight": 0.5}, {"policy": "deterministic", "scores": "B", "weight": 0.3},
        {"policy": "plackett_luce", "weight": 0.2}]},
    {"policy": "mixture", "components": [{"policy": "randtop", "n": 5, "weight": 0.6},
                                         {"policy": "randpair", "weight": 0.4}]},  # no deterministic leaf
    {"policy": "epsilon_greedy", "epsilon": 0.5, "n": 4},
]


@pytest.mark.parametrize("spec", MIXTURES)
@pytest.mark.parametrize("padding", [False, True])
def test_mixture_sample_equals_sampling_each_component(spec, padding):
    from simulations.policies import build_policy

    rng = np.random.default_rng(11)
    scores = {name: rng.normal(size=(40, 10)) for name in ("A", "B")}
    if padding:  # queries with fewer candidates than slots: empty slots
        for s in scores.values():
            s[rng.random(s.shape) < 0.4] = -np.inf
            s[:, 0] = 0.0
    def with_scores(sp):  # every component ranks by A unless it names B
        sp = {**sp, "components": [with_scores(c) for c in sp["components"]]} if "components" in sp else dict(sp)
        if sp["policy"] != "mixture":
            sp.setdefault("scores", "A")
        return sp

    policy = build_policy(with_scores(spec), scores, 4)
    q = rng.integers(0, 40, 5000)
    for n in (5000, 1, 0):
        a, b = np.random.default_rng(n), np.random.default_rng(n)
        got = policy.sample(q[:n], a)
        assert got.dtype == np.int64 and got.shape == (n, 4)
        np.testing.assert_array_equal(got, _plain_mixture_sample(policy, q[:n], b))
        assert a.random() == b.random()  # the same draws consumed




def test_batch_reward_copies_and_pickles():
    """The design's reward wrapper delegates what it lacks to the reward; a copy or an unpickled one (made without
    its __init__) rebuilds without recursing into its own delegation, and still delegates."""
    import copy
    import pickle

    from onlineeval.estimators import get_reward
    from simulations.designs.counterfactual.serving import _BatchReward

    wrapped = _BatchReward(get_reward("clicks_per_query", 3))
    clicks = np.array([[True, False, True], [False, False, False]])
    for twin in (copy.copy(wrapped), copy.deepcopy(wrapped), pickle.loads(pickle.dumps(wrapped))):
        assert twin.name == wrapped.name == "clicks_per_query" and twin.kind == wrapped.kind
        np.testing.assert_array_equal(twin.slot_rewards(clicks), wrapped.slot_rewards(clicks))
    with pytest.raises(AttributeError):
        _BatchReward.__new__(_BatchReward).name
