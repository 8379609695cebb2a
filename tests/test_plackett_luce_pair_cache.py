"""A Plackett-Luce policy keeps the pair marginals it computed (a dynamic programme per query), up to
PAIR_CACHE_BYTES: the pseudoinverse asks once per target, and with its own store of decompositions full (1,000
queries of 20 candidates) it asked the policy again for every query of the second target (1,719 programmes for
one replicate of configs/counterfactual.yaml with that logger, 999 now). The kept arrays are the computed ones,
read-only;
beyond the bound a query's are computed on every call (the same numbers); a pickled policy (a worker's copy)
does not carry them; a re-seeded copy (exact pairs: no Monte Carlo) keeps them. The values themselves are checked
against brute-force enumeration in the policies' own tests."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from simulations.policies.plackett_luce import PlackettLucePolicy


def _policy() -> PlackettLucePolicy:
    return PlackettLucePolicy(np.random.default_rng(8).normal(size=(4, 9)), 3, 0.7)


def _counted(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls: list[int] = []
    original = PlackettLucePolicy._compute_pairs

    def compute(self, q):
        calls.append(q)
        return original(self, q)

    monkeypatch.setattr(PlackettLucePolicy, "_compute_pairs", compute)
    return calls


def test_pairs_are_computed_once_per_query_and_read_only(monkeypatch) -> None:
    calls = _counted(monkeypatch)
    pol = _policy()
    first = [pol.pair_marginals(q) for q in range(4)]
    again = [pol.pair_marginals(q) for q in range(4)]
    assert calls == [0, 1, 2, 3]
    fresh = PlackettLucePolicy(pol.scores, 3, 0.7)
    for q in range(4):
        assert again[q] is first[q] and not first[q].flags.writeable
        np.testing.assert_array_equal(first[q], fresh._compute_pairs(q))
    with pytest.raises(ValueError):
        first[0][0, 0, 0, 0] = 1.0


def test_beyond_the_bound_a_query_is_computed_on_every_call(monkeypatch) -> None:
    calls = _counted(monkeypatch)
    pol = _policy()
    one = pol.pair_marginals(0).nbytes
    monkeypatch.setattr(PlackettLucePolicy, "PAIR_CACHE_BYTES", one)  # room for one query
    a = pol.pair_marginals(0)
    b1, b2 = pol.pair_marginals(1), pol.pair_marginals(1)
    assert calls == [0, 1, 1] and pol.pair_marginals(0) is a
    np.testing.assert_array_equal(b1, b2)


def test_a_pickled_copy_leaves_them_and_a_reseeded_copy_keeps_them(monkeypatch) -> None:
    calls = _counted(monkeypatch)
    pol = _policy()
    kept = pol.pair_marginals(2)
    copy = pickle.loads(pickle.dumps(pol))
    assert copy._pair_cache == {} and copy._pair_bytes == 0
    np.testing.assert_array_equal(copy.pair_marginals(2), kept)
    assert calls == [2, 2]
    assert pol.with_mc_seed(5).pair_marginals(2) is kept and calls == [2, 2]
