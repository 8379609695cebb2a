"""Probabilistic interleaving / multileaving: exact marginalisation against brute-force enumeration."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pytest

from onlineeval.errors import ConfigError
from onlineeval.interleaving import InterleavingResult, get_interleaver, stack_rankings


# ----------------------------------------------------------------- independent brute force
def weights(lst: list[int], docs: list[int], tau: int) -> dict[int, Fraction]:
    rank = {}
    for i, d in enumerate(lst):
        rank.setdefault(d, i + 1)
    return {d: Fraction(1, rank.get(d, len(lst) + 1) ** tau) for d in docs}


def brute_force(lists: list[list[int]], shown: list[int], clicks: list[bool],
                tau: int = 3) -> dict[tuple[int, int], Fraction]:
    """Exact P(i beats j) - P(j beats i) by enumerating every assignment of slots to rankers."""
    docs = list(dict.fromkeys(d for lst in lists for d in lst))
    w = [weights(lst, docs, tau) for lst in lists]
    m, k = len(lists), len(shown)
    total = Fraction(0)
    acc = {(i, j): Fraction(0) for i in range(m) for j in range(m)}
    for assign in itertools.product(range(m), repeat=k):
        remaining = list(docs)
        p = Fraction(1)
        for slot, a in enumerate(assign):
            d = shown[slot]
            p *= w[a][d] / sum(w[a][x] for x in remaining)
            remaining.remove(d)
        total += p
        credit = [sum(1 for s in range(k) if clicks[s] and assign[s] == i) for i in range(m)]
        for i in range(m):
            for j in range(m):
                acc[(i, j)] += p * ((credit[i] > credit[j]) - (credit[i] < credit[j]))
    return {key: v / total for key, v in acc.items()}


def as_result(lists: list[list[int]], shown: list[int]) -> InterleavingResult:
    width = max(len(lst) for lst in lists)
    mats = [np.array([lst + [-1] * (width - len(lst))]) for lst in lists]
    return InterleavingResult(np.array([shown], dtype=np.int32), np.zeros((1, len(shown)), dtype=np.int8),
                              stack_rankings(mats, min_rankers=2))


# ----------------------------------------------------------------- tests
def test_options_validated() -> None:
    with pytest.raises(ConfigError, match="tau"):
        get_interleaver("probabilistic", tau=0)
    with pytest.raises(ConfigError, match="tie_tolerance"):
        get_interleaver("probabilistic", tie_tolerance=-1)
    assert get_interleaver("probabilistic").tau == 3.0


def test_outcome_equals_brute_force_on_small_lists_including_ties() -> None:
    il = get_interleaver("probabilistic")
    rng = np.random.default_rng(0)
    cases = [
        ([1, 2, 3, 4], [1, 2, 3, 4]),      # identical: every outcome is an exact tie
        ([1, 2, 3, 4], [2, 1, 4, 3]),      # pairwise swaps: symmetric clicks tie exactly
        ([1, 2, 3, 4], [4, 3, 2, 1]),
        ([1, 2, 3], [4, 5, 6]),            # disjoint
        ([1, 2, 3, 4, 5], [3, 1]),         # unequal lengths
        ([1, 1, 2, 3], [2, 3, 1]),         # duplicate inside a list
    ]
    n_ties = 0
    for a, b in cases:
        res = il.interleave([np.array([a]), np.array([b + [-1] * (len(a) - len(b))])] if len(b) < len(a)
                            else [np.array([a]), np.array([b])], rng)
        shown = [int(d) for d in res.ranking[0] if d >= 0]
        for pattern in itertools.product([False, True], repeat=len(shown)):
            clicks = np.array([list(pattern) + [False] * (res.k - len(shown))])
            exact = brute_force([a, b], shown, list(pattern))[(1, 0)]
            got = il.expected_outcome(res, clicks)[0]
            assert abs(got - float(exact)) < 1e-12
            assert il.outcome(res, clicks)[0] == (exact > 0) - (exact < 0)
            n_ties += exact == 0 and any(pattern)
    assert n_ties > 10   # exact ties with clicks were exercised


@pytest.mark.parametrize("k", [10, 16, 20])
def test_exact_for_long_lists_against_vectorised_enumeration(k: int) -> None:
    """All 2^k assignments enumerated in numpy, probabilities from explicit remaining-set sums."""
    rng = np.random.default_rng(k)
    a = list(rng.permutation(k + 4)[:k])
    b = list(rng.permutation(k + 4)[:k])
    il = get_interleaver("probabilistic")
    res = il.interleave([np.array([a]), np.array([b])], rng)
    shown = [int(d) for d in res.ranking[0]]
    docs = list(dict.fromkeys(a + b))
    p = np.empty((2, k))
    for i, lst in enumerate((a, b)):
        w = {d: (lst.index(d) + 1 if d in lst else len(lst) + 1) ** -3.0 for d in docs}
        remaining = set(docs)
        for j, d in enumerate(shown):
            p[i, j] = w[d] / sum(w[x] for x in remaining)
            remaining.discard(d)
    click_sets = [rng.random(k) < 0.4 for _ in range(4)]
    num = np.zeros(len(click_sets))
    den = 0.0
    chunk = 2 ** 16
    for start in range(0, 2 ** k, chunk):           # all 2^k assignments, in chunks
        codes = np.arange(start, min(start + chunk, 2 ** k))
        assign = ((codes[:, None] >> np.arange(k)[None, :]) & 1).astype(np.int8)
        like = np.where(assign == 1, p[1], p[0]).prod(axis=1)
        den += like.sum()
        for c, clicks in enumerate(click_sets):
            diff = (assign * clicks).sum(1) - ((1 - assign) * clicks).sum(1)
            num[c] += (like * np.sign(diff)).sum()
    for c, clicks in enumerate(click_sets):
        got = il.expected_outcome(res, clicks[None, :])[0]
        assert abs(got - num[c] / den) < 1e-12


def test_multileave_pairwise_equals_brute_force() -> None:
    il = get_interleaver("probabilistic")
    lists = [[1, 2, 3, 4], [4, 3, 2, 1], [2, 4, 1, 3]]
    res = il.interleave([np.array([lst]) for lst in lists], np.random.default_rng(3))
    shown = [int(d) for d in res.ranking[0]]
    for pattern in [(True, False, True, False), (False, True, True, True), (True, True, True, True)]:
        exact = brute_force(lists, shown, list(pattern))
        got = il.expected_preferences(res, np.array([pattern]))[0]
        for (i, j), v in exact.items():
            assert abs(got[i, j] - float(v)) < 1e-12
        credit = il.credit(res, np.array([pattern]))[0]
        assert credit.sum() == pytest.approx(sum(pattern))


def test_sampler_matches_exact_list_distribution() -> None:
    a, b = [1, 2, 3], [3, 4, 1]
    docs = [1, 2, 3, 4]
    wa, wb = weights(a, docs, 3), weights(b, docs, 3)
    exact: dict[tuple[int, ...], float] = {}
    for perm in itertools.permutations(docs, 3):
        total = Fraction(0)
        for assign in itertools.product(range(2), repeat=3):
            remaining, pr = list(docs), Fraction(1, 8)
            for d, s in zip(perm, assign):
                w = wa if s == 0 else wb
                pr *= w[d] / sum(w[x] for x in remaining)
                remaining.remove(d)
            total += pr
        exact[perm] = float(total)
    n = 200_000
    rng = np.random.default_rng(1)
    res = get_interleaver("probabilistic").interleave([np.tile(a, (n, 1)), np.tile(b, (n, 1))], rng)
    keys, counts = np.unique(res.ranking, axis=0, return_counts=True)
    freq = {tuple(int(x) for x in key): c / n for key, c in zip(keys, counts)}
    assert set(freq) <= set(exact)
    for perm, p in exact.items():
        assert abs(freq.get(perm, 0.0) - p) < 4 * np.sqrt(p * (1 - p) / n) + 1e-12


def test_random_clicks_zero_expected_outcome() -> None:
    rng = np.random.default_rng(4)
    n, k = 100_000, 10
    a = np.argsort(rng.random((n, 25)), axis=1)[:, :k].astype(np.int32)
    b = np.sort(a, axis=1)
    il = get_interleaver("probabilistic")
    res = il.interleave([a, b], rng)
    clicks = rng.random((n, k)) < 0.15
    e = il.expected_outcome(res, clicks)
    assert abs(e.mean()) < 4 * e.std(ddof=1) / np.sqrt(n)
    o = il.outcome(res, clicks).astype(float)
    assert abs(o.mean()) < 4 * o.std(ddof=1) / np.sqrt(n)


def test_better_ranker_wins_and_identical_rankers_always_tie() -> None:
    rng = np.random.default_rng(6)
    n, k = 20_000, 10
    rel = np.linspace(0.9, 0.0, 40)
    b = np.sort(np.argsort(rng.random((n, 20)), axis=1)[:, :k], axis=1).astype(np.int32)
    a = np.where(rng.random((n, k)) < 0.5, b + 20, b).astype(np.int32)
    il = get_interleaver("probabilistic")
    res = il.interleave([a, b], rng)
    p = rel[res.ranking] * 0.7 ** np.arange(k)
    clicks = rng.random((n, k)) < p
    o = il.outcome(res, clicks).astype(float)
    assert o.mean() > 4 * o.std(ddof=1) / np.sqrt(n)
    same = il.interleave([a, a], rng)
    assert (il.outcome(same, clicks) == 0).all()


def test_structure_unequal_lengths_and_disjoint_lists() -> None:
    rng = np.random.default_rng(9)
    a = np.array([[1, 2, 3, -1, -1], [5, 6, 7, 8, 9]])
    b = np.array([[4, 5, -1, -1, -1], [9, 8, 7, 6, 5]])
    res = get_interleaver("probabilistic").interleave([a, b], rng, length=6)
    row0 = res.ranking[0]
    assert sorted(row0[row0 >= 0].tolist()) == [1, 2, 3, 4, 5] and row0[5] == -1
    assert sorted(res.ranking[1][:5].tolist()) == [5, 6, 7, 8, 9]


def test_prefix_credit_option_ignores_clicks_on_the_shared_prefix() -> None:
    rng = np.random.default_rng(12)
    n, k = 2000, 6
    a = np.tile(np.array([5, 7, 1, 2, 3, 4]), (n, 1))
    b = np.tile(np.array([5, 7, 4, 3, 2, 1]), (n, 1))          # shared prefix (5, 7)
    b[: n // 2] = np.array([5, 1, 7, 4, 3, 2])                  # shared prefix (5,) only
    on = get_interleaver("probabilistic")
    off = get_interleaver("probabilistic", prefix_credit=False)
    res = on.interleave([a, b], rng)
    clicks = rng.random((n, k)) < 0.4
    plen = np.where(np.arange(n) < n // 2, 1, 2)
    below = clicks & (np.arange(k)[None, :] >= plen[:, None])     # the clicks left, by hand
    np.testing.assert_allclose(off.credit(res, clicks), on.credit(res, below), rtol=0, atol=0)
    np.testing.assert_allclose(off.expected_outcome(res, clicks), on.expected_outcome(res, below), rtol=0, atol=0)
    np.testing.assert_array_equal(off.outcome(res, clicks), on.outcome(res, below))
    assert (on.credit(res, clicks) != off.credit(res, clicks)).any()        # the option changes something
    only_prefix = clicks & ~below
    assert (off.outcome(res, only_prefix) == 0).all() and (off.credit(res, only_prefix) == 0).all()
    with pytest.raises(ConfigError, match="prefix_credit"):
        get_interleaver("probabilistic", prefix_credit="no")


def test_identical_rankers_multileave_expected_preferences_exactly_zero() -> None:
    """Three identical rankers (an A/A multileaving test): every slot posterior is 1/3, inexact in binary, and the
    pairwise win-minus-loss probabilities must still be exactly 0. Summing the wins and the losses separately (in
    opposite orders) left ~1e-17 per impression, whose mean over a day had an SE of the same size, so the
    simulator's A/A z-test of probabilistic multileaving rejected (p = 5e-5 on a day of 600 impressions)."""
    rng = np.random.default_rng(11)
    n, k = 3000, 10
    base = np.argsort(rng.random((n, 30)), axis=1)[:, :k].astype(np.int32)
    il = get_interleaver("probabilistic_multileave")
    res = il.interleave([base, base, base], rng)
    clicks = rng.random((n, k)) < 0.35
    assert clicks.sum(axis=1).max() >= 5  # long difference distributions: the case that left rounding noise
    e = il.expected_preferences(res, clicks)
    assert not np.any(e)


def test_aa_multileaving_design_rows_are_exact_ties() -> None:
    """The simulator's A/A variant of a probabilistic-multileaving design (every ranker replaced by A): every
    pairwise row's estimate and SE are exactly 0 and its p-value 1, on every day (it was ~1e-19 +- ~1e-19)."""
    from simulations.config import config_from_mapping
    from simulations.runner import replicate_seeds, run_replicate, world_seed
    from simulations.users import UserModels
    from simulations.world import build_world

    cfg = config_from_mapping({
        "seed": 5, "replicates": 1, "workers": 1,
        "collection": {"type": "synthetic", "n_queries": 200, "candidates": 25},
        "rankers": {"depth": 6, "noise_correlation": 0.5, "A": {"noise": 1.0}, "B": {"noise": 0.7},
                    "others": {"C": {"noise": 0.9}}},
        "users": {"population": 800, "activity": {"sigma": 1.0}, "types": [
            {"name": "i", "share": 1.0, "click_model": {"name": "cascade", "preset": "informational"}}]},
        "traffic": {"days": 2, "queries_per_day": 600, "batch_hours": 24},
        "designs": [{"name": "pm", "type": "interleaving", "method": "probabilistic_multileave",
                     "rankers": ["A", "B", "C"]}],
        "analysis": {"truth_impressions": 2000, "aa": True, "null": False},
    })
    world = build_world(cfg, world_seed(cfg.seed))
    rows = run_replicate(cfg, world, UserModels.from_config(cfg.users), replicate_seeds(cfg.seed, 1)[0], 0)
    aa = [r for r in rows if r["aa"]]
    assert len(aa) == 6 and {r["day"] for r in aa} == {1, 2}
    for r in aa:
        assert (r["estimate"], r["se"], r["pvalue"]) == (0.0, 0.0, 1.0), r
    assert any(r["estimate"] != 0.0 for r in rows if not r["aa"])  # the real rankers do differ


def test_win_difference_shortcuts_equal_the_programme_bit_for_bit() -> None:
    """pairwise_win_difference computes impressions with one click as qi - qj and without a click as 0, running its
    dynamic programme on the others: the programme's own numbers on every row (the previous code), bit for bit,
    with ties (qi == qj: an A/A test's exact zeros) and zero probabilities among them."""
    from onlineeval.interleaving.probabilistic import _win_difference_dp, pairwise_win_difference

    rng = np.random.default_rng(5)
    n, k = 4000, 10
    qi = rng.random((n, k))
    qj = (1.0 - qi) * rng.random((n, k))
    qi[::11, :3] = 0.0
    qj[::7] = qi[::7]  # A/A rows: exactly 0
    clicks = rng.random((n, k)) < rng.choice([0.02, 0.1, 0.4], size=(n, 1))
    got = pairwise_win_difference(qi, qj, clicks)
    want = _win_difference_dp(qi, qj, clicks)
    assert got.tobytes() == want.tobytes()
    count = clicks.sum(axis=1)
    assert (count == 0).sum() > 100 and (count == 1).sum() > 100 and (count > 1).sum() > 100
    assert (got[::7] == 0.0).all()
