"""Logging policies against brute-force enumeration of full permutations.

The reference (:func:`reference`) writes each policy's law over *full* permutations of
a query's candidates straight from its definition (all shuffles of the top n, all swaps,
all pairs, the Plackett-Luce product over every permutation) and derives list, prefix,
item, shown and pair probabilities by summing over the permutations. The policies
compute the same quantities in closed form or by dynamic programme, never enumerating.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from scipy.stats import norm

from onlineeval.errors import ConfigError, InputError
from onlineeval.estimators.base import DeterministicTarget, PropensityModel, Reward
from onlineeval.estimators.ips import IPS
from simulations.policies import (
    available_policies,
    build_policy,
    marginal_error_effect,
)
from simulations.policies.plackett_luce import dp_states

NEG = -np.inf
# m = 6 columns: distinct scores, ties, padding (4 candidates), two candidates only
SCORES = np.array([
    [0.3, 1.2, -0.5, 2.0, 0.0, 0.7],
    [1.0, 1.0, 0.0, 1.0, 0.0, 2.0],
    [0.5, NEG, 1.5, NEG, 0.2, 1.0],
    [NEG, 2.0, NEG, NEG, NEG, 1.0],
])
# a second ranker (mixture components): other order, other candidate set in row 2
SCORES_B = np.array([
    [2.0, 0.1, 0.4, -1.0, 1.1, 0.0],
    [0.0, 3.0, 1.0, 2.0, 0.5, 0.1],
    [0.1, 0.9, 0.3, NEG, 0.8, NEG],
    [0.2, NEG, NEG, NEG, 1.0, 0.4],
])
M = SCORES.shape[1]

SPECS = [
    {"policy": "deterministic"},
    {"policy": "plackett_luce"},
    {"policy": "plackett_luce", "temperature": 0.5},
    {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 3},
    {"policy": "epsilon_greedy", "epsilon": 0.2},
    {"policy": "epsilon_greedy", "epsilon": 1.0, "n": 5},
    {"policy": "randtop", "n": 3},
    {"policy": "randtop"},
    {"policy": "randtop", "n": 6},
    {"policy": "swap"},
    {"policy": "swap", "K": 2},
    {"policy": "swap", "K": 6},
    {"policy": "randpair", "n": 3},
    {"policy": "randpair"},
    {"policy": "randpair", "n": 6},
    {"policy": "mixture", "components": [
        {"policy": "deterministic", "scores": "A", "weight": 0.6},
        {"policy": "deterministic", "scores": "B", "weight": 0.4}]},
    {"policy": "mixture", "components": [
        {"policy": "randtop", "n": 3, "scores": "A", "weight": 0.5},
        {"policy": "plackett_luce", "temperature": 2.0, "scores": "B", "weight": 0.25},
        {"policy": "swap", "K": 3, "scores": "B", "weight": 0.25}]},
]


def _scores_for(spec: dict) -> object:
    return {"A": SCORES, "B": SCORES_B} if spec["policy"] == "mixture" else SCORES


def _spec_id(spec: dict) -> str:
    if spec["policy"] == "mixture":
        return "mixture(" + "+".join(c["policy"] for c in spec["components"]) + ")"
    return ",".join(f"{v}" for v in spec.values())


# --------------------------------------------------------------------------- the reference
def _base(row: np.ndarray) -> list[int]:
    cand = [d for d in range(row.size) if np.isfinite(row[d])]
    return sorted(cand, key=lambda d: (-row[d], d))


def _perm_law(spec: dict, row_a: np.ndarray, k: int, row_b: np.ndarray | None = None) -> dict[tuple, float]:
    """Law over full permutations of the candidates, from the policy's definition."""
    name = spec["policy"]
    base = _base(row_a)
    c = len(base)
    law: dict[tuple, float] = {}

    def add(perm: list[int], p: float) -> None:
        law[tuple(perm)] = law.get(tuple(perm), 0.0) + p

    if name == "deterministic":
        add(base, 1.0)
    elif name in ("randtop", "epsilon_greedy"):
        ne = min(spec.get("n", max(k, 2)), c)
        eps = spec.get("epsilon", 0.1) if name == "epsilon_greedy" else 1.0
        if eps < 1:
            add(base, 1.0 - eps)
        shuffles = list(itertools.permutations(range(ne)))
        for sh in shuffles:
            add([base[i] for i in sh] + base[ne:], eps / len(shuffles))
    elif name == "swap":
        ke = min(spec.get("K", k), c)
        for J in range(ke):
            perm = list(base)
            perm[0], perm[J] = perm[J], perm[0]
            add(perm, 1.0 / ke)
    elif name == "randpair":
        ne = min(spec.get("n", max(k, 2)), c)
        pairs = list(itertools.combinations(range(ne), 2))
        if not pairs:
            add(base, 1.0)
        for a, b in pairs:
            perm = list(base)
            perm[a], perm[b] = perm[b], perm[a]
            add(perm, 1.0 / len(pairs))
    elif name == "plackett_luce":
        t = spec.get("temperature", 1.0)
        cand = sorted(base)
        for perm in itertools.permutations(cand):
            p, left = 1.0, list(perm)
            for d in perm:
                p *= math.exp(row_a[d] / t) / sum(math.exp(row_a[x] / t) for x in left)
                left.remove(d)
            add(list(perm), p)
    else:
        raise AssertionError(name)
    return law


def reference(spec: dict, q: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(P, m)`` full permutations padded with -1 and their ``(P,)`` probabilities."""
    if spec["policy"] == "mixture":
        law: dict[tuple, float] = {}
        for comp in spec["components"]:
            row = {"A": SCORES, "B": SCORES_B}[comp["scores"]][q]
            sub = {key: v for key, v in comp.items() if key not in ("weight", "scores")}
            for perm, p in _perm_law(sub, row, k).items():
                law[perm] = law.get(perm, 0.0) + comp["weight"] * p
    else:
        law = _perm_law(spec, SCORES[q], k)
    perms = np.full((len(law), M), -1, dtype=np.int64)
    for i, perm in enumerate(law):
        perms[i, : len(perm)] = perm
    return perms, np.array(list(law.values()))


def ref_list_probs(perms: np.ndarray, probs: np.ndarray, lists: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                                        np.ndarray]:
    """List, prefix and item probabilities of ``lists``: sums of the permutations'
    probabilities over those whose top j+1 (slot j) agrees."""
    k = lists.shape[1]
    prefix_law: list[dict[tuple, float]] = [{} for _ in range(k)]
    item_law: list[dict[int, float]] = [{} for _ in range(k)]
    for perm, p in zip(perms.tolist(), probs):
        for j in range(k):
            key = tuple(perm[: j + 1])
            prefix_law[j][key] = prefix_law[j].get(key, 0.0) + p
            item_law[j][perm[j]] = item_law[j].get(perm[j], 0.0) + p
    rows = lists.tolist()
    prefix = np.array([[prefix_law[j].get(tuple(r[: j + 1]), 0.0) for j in range(k)] for r in rows])
    item = np.array([[item_law[j].get(r[j], 0.0) for j in range(k)] for r in rows])
    return prefix[:, -1], prefix, item


def lists_to_check(q: int, k: int, perms: np.ndarray) -> np.ndarray:
    """Every possible top-k list of the reference, 150 random k-permutations of all columns
    (non-candidates included), and malformed lists (repeats, gaps, stray -1)."""
    rng = np.random.default_rng(100 * q + k)
    support = np.unique(perms[:, :k], axis=0)
    every = np.array(list(itertools.permutations(range(M), k)), dtype=np.int64)
    every = every[rng.choice(len(every), size=min(len(every), 150), replace=False)]
    junk = rng.integers(-1, M, size=(60, k))
    gap = support.copy()
    gap[:, rng.integers(0, k)] = -1
    rep = support.copy()
    if k > 1:
        rep[:, 1] = rep[:, 0]
    return np.concatenate([support, every, junk, gap, rep])


def _policy(spec: dict, k: int):
    return build_policy(spec, _scores_for(spec), k)


# --------------------------------------------------------------------------- exactness
@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_propensities_equal_enumeration(spec: dict) -> None:
    for k in range(1, M + 1):
        pol = _policy(spec, k)
        assert isinstance(pol, PropensityModel)
        for q in range(SCORES.shape[0]):
            perms, probs = reference(spec, q, k)
            assert probs.sum() == pytest.approx(1.0, abs=1e-12)
            lists = lists_to_check(q, k, perms)
            ref_list, ref_prefix, ref_item = ref_list_probs(perms, probs, lists)
            qs = np.full(len(lists), q)
            got = pol.propensities(qs, lists)
            np.testing.assert_allclose(got.list, ref_list, atol=1e-12, err_msg=f"list k={k} q={q}")
            np.testing.assert_allclose(got.prefix, ref_prefix, atol=1e-12, err_msg=f"prefix k={k} q={q}")
            # item: reference P(slot j shows s_j); a legitimately empty slot (-1 at j >= c for every
            # permutation) has reference probability 1, and the policy gives 1 there too
            np.testing.assert_allclose(got.item, ref_item, atol=1e-12, err_msg=f"item k={k} q={q}")

            marg = pol.item_position_marginals(np.array([q, q]))
            ref_marg = np.zeros((M, k))
            for j in range(k):
                for d in range(M):
                    ref_marg[d, j] = probs[perms[:, j] == d].sum()
            np.testing.assert_allclose(marg[0], ref_marg, atol=1e-12, err_msg=f"marginals k={k} q={q}")
            np.testing.assert_allclose(marg[1], ref_marg, atol=1e-12)

            docs = np.array([list(range(M))[j: j + k] + [-1] * (j + k - M) for j in range(M)])
            ref_shown = np.array([[probs[(perms[:, :k] == d).any(axis=1)].sum() if d >= 0 else 1.0 for d in row]
                                  for row in docs])
            got_shown = pol.shown_probability(np.full(len(docs), q), docs)
            np.testing.assert_allclose(got_shown, ref_shown, atol=1e-12, err_msg=f"shown k={k} q={q}")

            pairs = pol.pair_marginals(q)
            onehot = (perms[:, :k, None] == np.arange(M)[None, None, :]).astype(float)  # (P, k, m)
            ref_pairs = np.einsum("p,pja,plb->jalb", probs, onehot, onehot)
            np.testing.assert_allclose(pairs, ref_pairs, atol=1e-12, err_msg=f"pairs k={k} q={q}")


def test_every_registered_policy_is_covered() -> None:
    assert {s["policy"] for s in SPECS} == set(available_policies())


def test_plackett_luce_dp_equals_enumeration_larger() -> None:
    """c = 8 candidates, k = 4: DP marginals and pair marginals against the sum over all
    8*7*6*5 top-4 lists of their product-of-softmax probability (computed here)."""
    rng = np.random.default_rng(3)
    s = rng.normal(0, 1.5, size=(1, 9))
    s[0, 4] = NEG
    s[0, 6] = s[0, 2]  # a tie
    k, t = 4, 0.8
    pol = build_policy({"policy": "plackett_luce", "temperature": t}, s, k)
    cand = [d for d in range(9) if np.isfinite(s[0, d])]
    w = {d: math.exp(s[0, d] / t) for d in cand}
    ref = np.zeros((9, k))
    ref_pair = np.zeros((k, 9, k, 9))
    lists, plist = [], []
    for lst in itertools.permutations(cand, k):
        p, left = 1.0, sum(w.values())
        for d in lst:
            p *= w[d] / left
            left -= w[d]
        lists.append(lst)
        plist.append(p)
        for j, d in enumerate(lst):
            ref[d, j] += p
            for l_, e in enumerate(lst):
                ref_pair[j, d, l_, e] += p
    assert pol.marginals_exact([0])[0]
    np.testing.assert_allclose(pol.item_position_marginals([0])[0], ref, atol=1e-13)
    np.testing.assert_allclose(pol.pair_marginals(0), ref_pair, atol=1e-13)
    got = pol.propensities(np.zeros(len(lists), dtype=int), np.array(lists))
    np.testing.assert_allclose(got.list, plist, rtol=1e-10)


def test_plackett_luce_extreme_scores_stay_exact() -> None:
    """Scores 1000 apart: log-space products give P((0,1)) = 1/2 exactly where exp() would overflow."""
    pol = build_policy("plackett_luce", np.array([[1000.0, 0.0, 0.0]]), 2)
    p = pol.propensities([0, 0, 0], [[0, 1], [0, 2], [1, 2]])
    np.testing.assert_allclose(p.list, [0.5, 0.5, 0.0], atol=1e-300)
    np.testing.assert_allclose(p.prefix[:2], [[1.0, 0.5], [1.0, 0.5]])
    np.testing.assert_allclose(pol.item_position_marginals([0])[0], [[1, 0], [0, 0.5], [0, 0.5]])
    # remaining mass 1e-13 of the total after the first slot: a naive "total minus placed" loses
    # every digit there; the policy recomputes such rows in log space
    pol = build_policy("plackett_luce", np.array([[30.0, 0.0, 1.0, -np.inf]]), 3)
    z = math.exp(30) + 1 + math.e
    p = pol.propensities([0, 0], [[0, 1, 2], [0, 2, 1]])
    a, b = math.exp(30) / z / (1 + math.e), math.exp(30) / z * math.e / (1 + math.e)
    np.testing.assert_allclose(p.prefix, [[math.exp(30) / z, a, a], [math.exp(30) / z, b, b]], rtol=1e-13)
    mc = build_policy({"policy": "plackett_luce", "dp_max_states": 0, "item_method": "monte_carlo"},
                      np.array([[1000.0, 0.0, 0.0]]), 2)
    np.testing.assert_allclose(mc.item_position_marginals([0])[0], [[1, 0], [0, 0.5], [0, 0.5]])


# --------------------------------------------------------------------------- Monte Carlo marginals
def test_plackett_luce_monte_carlo_within_4se_of_dp() -> None:
    rng = np.random.default_rng(11)
    s = rng.normal(0, 1.0, size=(3, 10))
    s[1, 7:] = NEG
    k = 5
    exact = build_policy({"policy": "plackett_luce"}, s, k)
    mc = build_policy({"policy": "plackett_luce", "dp_max_states": 10, "item_method": "monte_carlo",
                       "mc_samples": 3000, "mc_seed": 5}, s, k)
    q = np.arange(3)
    assert exact.marginals_exact(q).all() and not mc.marginals_exact(q).any()
    assert "Monte Carlo" in mc.conventions()["item"]
    m_ex, m_mc, se = exact.item_position_marginals(q), mc.item_position_marginals(q), mc.marginal_se(q)
    assert np.all(np.abs(m_mc - m_ex) <= 4 * se + 1e-12)
    assert (se[:, :, 1:][m_ex[:, :, 1:] > 0] > 0).all()  # a real error bar past slot 0
    np.testing.assert_array_equal(se[:, :, 0], 0.0)  # slot 0 is exact: the first softmax
    # shown probabilities and item propensities carry their SEs too
    docs = np.tile(np.arange(k), (3, 1))
    sh_ex, sh_mc, sh_se = exact.shown_probability(q, docs), mc.shown_probability(q, docs), mc.shown_se(q, docs)
    assert np.all(np.abs(sh_mc - sh_ex) <= 4 * sh_se + 1e-12)
    lists = exact.sample(q, np.random.default_rng(2))
    it_ex, it_mc = exact.propensities(q, lists).item, mc.propensities(q, lists).item
    assert np.all(np.abs(it_mc - it_ex) <= 4 * mc.item_se(q, lists) + 1e-12)
    # list and prefix stay exact
    np.testing.assert_allclose(mc.propensities(q, lists).prefix, exact.propensities(q, lists).prefix)


def test_rao_blackwell_moments_fast_form_equals_direct() -> None:
    """The O(Rk) form (sums over the placed documents only) equals the cell-by-cell form
    on the same sampled prefixes; the fast form declines where subtraction would lose
    precision (a dominant document) and the direct form then still matches the DP."""
    from simulations.policies.plackett_luce import _rb_moments_direct, _rb_moments_fast

    rng = np.random.default_rng(4)
    for c, kk, R in [(12, 5, 500), (6, 6, 300), (30, 10, 800), (5, 2, 100)]:
        lg = rng.normal(size=c)
        pre = np.argsort(-(lg + rng.gumbel(size=(R, c))), axis=1)[:, : kk - 1]
        fast, direct = _rb_moments_fast(lg, pre, kk), _rb_moments_direct(lg, pre, kk)
        assert fast is not None
        for a, b in zip(fast, direct):
            np.testing.assert_allclose(a, b, atol=1e-13)
    lg = np.array([30.0, 0.0, 0.5, 0.0, -1.0])
    pre = np.argsort(-(lg + rng.gumbel(size=(50, 5))), axis=1)[:, :2]
    assert _rb_moments_fast(lg, pre, 3) is None
    s = lg[None, :]
    mc = build_policy({"policy": "plackett_luce", "dp_max_states": 0, "item_method": "monte_carlo",
                       "mc_samples": 500}, s, 3)
    ex = build_policy({"policy": "plackett_luce"}, s, 3)
    diff = np.abs(mc.item_position_marginals([0]) - ex.item_position_marginals([0]))
    assert np.all(diff <= 4 * mc.marginal_se([0]) + 1e-12)


def test_plackett_luce_monte_carlo_is_unbiased_over_seeds() -> None:
    """Mean over 40 independent seeds within 4 SE of the DP (the SEs shrink by sqrt(40))."""
    s = np.array([[1.0, 0.5, 0.0, -0.5, 2.0, 0.3]])
    exact = build_policy({"policy": "plackett_luce"}, s, 3).item_position_marginals([0])[0]
    base = build_policy({"policy": "plackett_luce", "dp_max_states": 0, "item_method": "monte_carlo",
                         "mc_samples": 200}, s, 3)
    draws = np.stack([base.with_mc_seed(i).item_position_marginals([0])[0] for i in range(40)])
    se = draws.std(axis=0, ddof=1) / math.sqrt(40)
    assert np.all(np.abs(draws.mean(axis=0) - exact) <= 4 * se + 1e-12)


def test_plackett_luce_pairs_above_budget_raise() -> None:
    s = np.random.default_rng(0).normal(size=(1, 30))
    pol = build_policy({"policy": "plackett_luce", "pair_max_states": 100}, s, 3)
    assert dp_states(30, 3) > 100
    with pytest.raises(ConfigError, match="pair_max_states"):
        pol.pair_marginals(0)


# --------------------------------------------------------------------------- sampling
@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_sampling_frequencies_match_exact_probabilities(spec: dict) -> None:
    k, n = 3, 12_000
    pol = _policy(spec, k)
    rng = np.random.default_rng(20261201)
    q = np.repeat(np.arange(SCORES.shape[0]), n)
    shown = pol.sample(q, rng)
    assert shown.shape == (q.size, k) and shown.dtype == np.int64
    for qq in range(SCORES.shape[0]):
        rows = shown[q == qq]
        uniq, counts = np.unique(rows, axis=0, return_counts=True)
        p = pol.propensities(np.full(len(uniq), qq), uniq).list
        assert (p > 0).all(), f"sampled a list of probability 0 for query {qq}: {uniq[p == 0][:3]}"
        perms, probs = reference(spec, qq, k)
        support, inv = np.unique(perms[:, :k], axis=0, return_inverse=True)
        p_support = np.bincount(inv.ravel(), probs)
        freq = np.zeros(len(support))
        lookup = {tuple(r): i for i, r in enumerate(support)}
        for r, cnt in zip(uniq, counts):
            freq[lookup[tuple(r)]] = cnt / n
        # 4-SE check per list; lists expected fewer than 10 times are pooled into one cell
        # (the normal approximation of a count needs a sizeable expectation)
        rare = p_support * n < 10
        freq = np.append(freq[~rare], freq[rare].sum())
        p_cell = np.append(p_support[~rare], p_support[rare].sum())
        se = np.sqrt(p_cell * (1 - p_cell) / n)
        assert np.all(np.abs(freq - p_cell) <= 4 * se + 1e-12), (qq, freq, p_cell)


@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_same_seed_same_output(spec: dict) -> None:
    scores = _scores_for(spec)
    before = {key: v.copy() for key, v in scores.items()} if isinstance(scores, dict) else scores.copy()
    pol = _policy(spec, 3)
    q = np.array([0, 1, 2, 3, 0, 1] * 50)
    a = pol.sample(q, np.random.default_rng(7))
    b = pol.sample(q, np.random.default_rng(7))
    np.testing.assert_array_equal(a, b)
    c = pol.sample(q, np.random.default_rng(8))
    assert spec["policy"] == "deterministic" or not np.array_equal(a, c)
    lists = a.copy()
    pol.propensities(q, lists)
    np.testing.assert_array_equal(lists, a)  # the caller's data untouched
    if isinstance(scores, dict):
        for key in scores:
            np.testing.assert_array_equal(scores[key], before[key])
    else:
        np.testing.assert_array_equal(scores, before)


def test_monte_carlo_marginals_do_not_depend_on_the_batch() -> None:
    s = np.random.default_rng(1).normal(size=(4, 12))
    spec = {"policy": "plackett_luce", "dp_max_states": 0, "item_method": "monte_carlo", "mc_seed": 3}
    a = build_policy(spec, s, 4).item_position_marginals([2])[0]
    b = build_policy(spec, s, 4).item_position_marginals([0, 3, 2, 1])[2]
    np.testing.assert_array_equal(a, b)
    c = build_policy({**spec, "mc_seed": 4}, s, 4).item_position_marginals([2])[0]
    assert not np.array_equal(a, c)


# --------------------------------------------------------------------------- errors
@pytest.mark.parametrize(("spec", "path", "words"), [
    ({"policy": "greedy"}, ("policy",), "allowed: deterministic"),
    ({"policy": "epsilon_greedy", "epsilon": 1.5}, ("epsilon",), "[0, 1]"),
    ({"policy": "epsilon_greedy", "epsilon": "0.1"}, ("epsilon",), "number"),
    ({"policy": "randtop", "n": 1}, ("n",), "2..6"),
    ({"policy": "randpair", "n": 7}, ("n",), "2..6"),
    ({"policy": "swap", "K": 0}, ("K",), "1..6"),
    ({"policy": "plackett_luce", "temperature": 0}, ("temperature",), "(0, inf]"),
    ({"policy": "plackett_luce", "mc_samples": 1}, ("mc_samples",), ">= 2"),
    ({"policy": "randtop", "shuffle": 3}, ("shuffle",), "allowed: n, policy"),
    ({"policy": "deterministic", "scores": "A"}, ("scores",), "one unnamed matrix"),
])
def test_bad_specs_name_the_key(spec: dict, path: tuple, words: str) -> None:
    with pytest.raises(ConfigError) as err:
        build_policy(spec, SCORES, 3, path=("design", "logging_policy"))
    assert err.value.key_path == ("design", "logging_policy", *path)
    assert words in str(err.value)


def test_bad_mixture_specs() -> None:
    both = {"A": SCORES, "B": SCORES_B}
    comp = [{"policy": "deterministic", "scores": "A", "weight": 0.5},
            {"policy": "plackett_luce", "scores": "B", "temperature": -1, "weight": 0.5}]
    with pytest.raises(ConfigError) as err:
        build_policy({"policy": "mixture", "components": comp}, both, 3, path=("logging",))
    assert err.value.key_path == ("logging", "components", 1, "temperature")
    comp[1]["temperature"] = 1.0
    comp[1]["weight"] = 0.6
    with pytest.raises(ConfigError, match="sum to 1"):
        build_policy({"policy": "mixture", "components": comp}, both, 3)
    comp[1]["scores"] = "C"
    with pytest.raises(ConfigError, match="allowed: A, B") as err:
        build_policy({"policy": "mixture", "components": comp}, both, 3)
    assert err.value.key_path == ("components", 1, "scores")
    with pytest.raises(ConfigError, match="non-empty list"):
        build_policy({"policy": "mixture", "components": []}, both, 3)
    with pytest.raises(ConfigError) as err:
        build_policy({"policy": "deterministic"}, both, 3)
    assert err.value.key_path == ("scores",)


def test_bad_inputs() -> None:
    with pytest.raises(ConfigError) as err:
        build_policy("randtop", SCORES, 7)
    assert err.value.key_path == ("k",)
    bad = SCORES.copy()
    bad[1, 2] = np.nan
    with pytest.raises(InputError, match="NaN"):
        build_policy("randtop", bad, 3)
    bad[1, 2] = np.inf
    with pytest.raises(InputError, match=r"\+inf"):
        build_policy("randtop", bad, 3)
    pol = build_policy("randtop", SCORES, 3)
    with pytest.raises(InputError, match="outside 0..3"):
        pol.propensities([4], [[0, 1, 2]])
    with pytest.raises(InputError, match="shape"):
        pol.propensities([0], [[0, 1]])
    with pytest.raises(InputError, match=r"0\.\.5"):
        pol.propensities([0], [[0, 1, 6]])
    with pytest.raises(InputError, match="query_one"):
        pol.pair_marginals(1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="Generator"):
        pol.sample([0], 3)  # type: ignore[arg-type]


# --------------------------------------------------------------------------- describe / conventions
@pytest.mark.parametrize("spec", SPECS, ids=_spec_id)
def test_describe_and_conventions(spec: dict) -> None:
    pol = _policy(spec, 3)
    conv = pol.conventions()
    assert conv["policy"] == spec["policy"] and conv["k"] == 3
    assert spec["policy"] in pol.describe()
    import json
    import pickle

    json.dumps(conv)
    # pickles (process executors ship policies to workers) and gives the same numbers after
    lists = pol.sample(np.arange(4), np.random.default_rng(3))
    back = pickle.loads(pickle.dumps(pol))
    np.testing.assert_array_equal(back.propensities(np.arange(4), lists).prefix,
                                  pol.propensities(np.arange(4), lists).prefix)


# --------------------------------------------------------------------------- Monte Carlo error effect
def _pl_prefix_law(s: np.ndarray, length: int) -> tuple[list[tuple], np.ndarray]:
    cand = [d for d in range(s.size) if np.isfinite(s[d])]
    out, p_out = [], []
    for pre in itertools.permutations(cand, length):
        p, left = 1.0, sum(math.exp(s[d]) for d in cand)
        for d in pre:
            p *= math.exp(s[d]) / left
            left -= math.exp(s[d])
        out.append(pre)
        p_out.append(p)
    return out, np.array(p_out)


def test_marginal_error_effect_matches_delta_method() -> None:
    """The re-draw spread of item-level IPS equals the delta-method SD computed from the
    exact covariance of the Rao-Blackwellised draws (enumerated prefixes), within the
    sampling error of an SD over 300 re-draws plus the first-order term's slack."""
    s = np.array([[1.0, 0.2, -0.3, 0.8, 0.0]])
    k, R, draws = 3, 2000, 300
    pol = build_policy({"policy": "plackett_luce", "dp_max_states": 0, "item_method": "monte_carlo",
                        "mc_samples": R}, s, k)
    exact = build_policy({"policy": "plackett_luce"}, s, k)
    rng = np.random.default_rng(5)
    n = 4000
    q = np.zeros(n, dtype=np.int64)
    shown = exact.sample(q, rng)
    clicks = rng.random((n, k)) < np.array([0.5, 0.3, 0.2])
    target = DeterministicTarget(np.array([[3, 0, 1]]), "B")
    eff = marginal_error_effect(pol, q, shown, clicks, target, np.random.default_rng(9), draws=draws)
    # delta method: V = sum_{d,j} A_dj / M_dj, A_dj = mean_i 1[s_ij = d, target has d at j] r_ij
    A = np.zeros((5, k))
    hit = shown == target.lists[0][None, :]
    for j in range(k):
        np.add.at(A[:, j], shown[:, j], (hit[:, j] & clicks[:, j]) / n)
    M_true = exact.item_position_marginals([0])[0]
    grad = np.where(A > 0, -A / np.where(M_true > 0, M_true, 1.0) ** 2, 0.0)
    # exact covariance of one Rao-Blackwellised draw: v_dj(prefix) = 1[d not in prefix[:j]] w_d / rest
    prefixes, pp = _pl_prefix_law(s[0], k - 1)
    w = np.exp(s[0])
    vs = np.zeros((len(prefixes), 5, k))
    for i, pre in enumerate(prefixes):
        for j in range(k):
            rest = [d for d in range(5) if d not in pre[:j]]
            vs[i, rest, j] = w[rest] / w[rest].sum()
    mean = np.einsum("p,pdj->dj", pp, vs)
    np.testing.assert_allclose(mean, M_true, atol=1e-12)  # the draw is unbiased
    g = np.einsum("pdj,dj->p", vs - mean, grad)
    delta_sd = math.sqrt(float(pp @ g**2) / R)
    # tolerance: 4 SE of the SD of the re-draws (from their own fourth moment), plus the delta method's
    # next term: with M_hat = M (1 + e), e of SD s, A / M_hat = (A / M)(1 - e + e^2 - e^3 ...) has SD
    # (A / M) s (1 + 4 s^2 + ...) (normal e), so 4 max s^2 over the entries used (exact from the enumerated
    # law: 3e-4 here). Band 16.1% (was 16.4% + an unexplained 0.05); measured -2.3% (z -0.6); a 1.2x error of
    # the re-draws' SD fails (+17%), barely: 300 re-draws
    x = eff.redraws
    m4 = float(np.mean((x - x.mean()) ** 4))
    sd_se = math.sqrt(max(m4 - eff.sd**4 * (draws - 3) / (draws - 1), 0.0) / draws) / (2 * eff.sd)
    var_v = np.einsum("p,pdj->dj", pp, (vs - mean) ** 2)
    s2 = float(np.max(var_v[grad != 0] / R / M_true[grad != 0] ** 2))
    assert abs(eff.sd / delta_sd - 1) <= 4 * sd_se / eff.sd + 4 * s2, (eff.sd, delta_sd, sd_se, s2)
    assert eff.redraws.shape == (draws,) and eff.exact_share == 0.0
    assert eff.sd < eff.sampling_se  # 2000 draws: MC error well under the sampling error here
    assert eff.ratio == pytest.approx(eff.sd / eff.sampling_se)


def test_marginal_error_effect_is_zero_when_exact_or_list_level() -> None:
    s = np.array([[1.0, 0.2, -0.3, 0.8, 0.0]])
    rng = np.random.default_rng(1)
    exact = build_policy({"policy": "plackett_luce"}, s, 3)
    q = np.zeros(500, dtype=np.int64)
    shown = exact.sample(q, rng)
    clicks = rng.random((500, 3)) < 0.3
    target = DeterministicTarget(np.array([[0, 3, 1]]))
    eff = marginal_error_effect(exact, q, shown, clicks, target, rng, draws=5)
    assert eff.sd == 0.0 and eff.exact_share == 1.0
    np.testing.assert_array_equal(eff.redraws, eff.value)
    # list-level IPS reads only p_list, which is exact even when the marginals are Monte Carlo
    mc = build_policy({"policy": "plackett_luce", "dp_max_states": 0, "item_method": "monte_carlo"}, s, 3)
    eff = marginal_error_effect(mc, q, shown, clicks, target, rng, estimator=IPS(), draws=5,
                                reward=Reward("clicks", "additive"))
    assert eff.sd == 0.0 and eff.exact_share == 0.0


# --------------------------------------------------------------------------- at scale (no enumeration possible)
BIG_SPECS = [
    {"policy": "deterministic"},
    {"policy": "plackett_luce", "temperature": 0.7},
    {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 10},
    {"policy": "randtop", "n": 12},
    {"policy": "swap", "K": 10},
    {"policy": "randpair", "n": 10},
]


@pytest.mark.parametrize("spec", BIG_SPECS, ids=_spec_id)
def test_item_frequencies_match_marginals_at_100_candidates(spec: dict) -> None:
    """100 columns (90 candidates), k = 10: slot-document frequencies of 20,000 draws
    within z SE of the item marginals, z Bonferroni-corrected over the ~900 cells for a
    family-wise false-alarm rate of 0.001 (about 4.9; cells expected < 10 times pooled
    per slot; for Monte Carlo marginals their own SE is added), and the marginals are consistent:
    each slot sums to 1, the shown probability is their sum over slots, and each filled
    slot's pair marginals sum to the marginals."""
    rng = np.random.default_rng(8)
    s = rng.normal(size=(2, 100))
    s[:, 90:] = NEG
    k, n = 10, 20_000
    pol = build_policy(spec, s, k)
    q = np.ones(n, dtype=np.int64)
    shown = pol.sample(q, np.random.default_rng(12))
    marg = pol.item_position_marginals([1])[0]
    mse = pol.marginal_se([1])[0]
    np.testing.assert_allclose(marg.sum(axis=0), 1.0, atol=1e-12)
    docs = np.tile(np.arange(k), (10, 1)) + 10 * np.arange(10)[:, None]
    np.testing.assert_allclose(pol.shown_probability(np.ones(10, dtype=int), docs), marg.sum(axis=1)[docs],
                               atol=1e-12)
    z = float(norm.isf(0.001 / (2 * 90 * k)))
    for j in range(k):
        freq = np.bincount(shown[:, j], minlength=100) / n
        p = marg[:, j]
        rare = p * n < 10
        f_cell = np.append(freq[~rare], freq[rare].sum())
        p_cell = np.append(p[~rare], p[rare].sum())
        se_mc = np.append(mse[~rare, j], np.sqrt(np.square(mse[rare, j]).sum()))
        se = np.sqrt(p_cell * (1 - p_cell) / n + se_mc**2)
        assert np.all(np.abs(f_cell - p_cell) <= z * se + 1e-12), (j, np.max(np.abs(f_cell - p_cell) / (se + 1e-15)))
    if spec["policy"] != "plackett_luce":  # PL pairs at 90 candidates are above the DP budget
        pairs = pol.pair_marginals(1)
        np.testing.assert_allclose(pairs.sum(axis=3)[:, :, 3], marg.T, atol=1e-12)
        np.testing.assert_allclose(pairs.sum(axis=(1, 3)), 1.0, atol=1e-12)
    else:  # 90 candidates, k = 10: above the subset DP, the exponential race's quadrature (exact, SE 0)
        assert pol.marginals_exact([1])[0] and "quadrature" in pol.table(1).method and not mse.any()
    got = pol.propensities(q[:500], shown[:500])
    np.testing.assert_array_equal(got.list, got.prefix[:, -1])
    assert (got.list > 0).all() and (got.item > 0).all()


def test_logger_support_check_in_the_estimators() -> None:
    """The estimators' support check reads a policy as the logger: a target that shows
    a document outside RandTop-3's top 3 violates item and 'any' support."""
    from onlineeval.estimators.base import LoggedData, support_violations

    pol = build_policy({"policy": "randtop", "n": 3}, SCORES, 3)
    q = np.array([0, 1, 0])
    shown = pol.sample(q, np.random.default_rng(0))
    p = pol.propensities(q, shown)
    data = LoggedData(q, shown, np.zeros_like(shown, dtype=bool), p_list=p.list, p_prefix=p.prefix,
                      p_item=p.item, logger=pol)
    inside = DeterministicTarget(np.array([[5, 1, 3], [0, 5, 1], [2, 5, 0], [1, 5, -1]]))
    outside = DeterministicTarget(np.array([[4, 1, 3], [0, 5, 1], [2, 5, 0], [1, 5, -1]]))  # doc 4: base rank 4
    assert support_violations(data, inside, "item") == (0, 3)
    assert support_violations(data, outside, "item") == (2, 3)
    assert support_violations(data, outside, "any") == (2, 3)
