"""The counterfactual design's cheaper serving and checkpoint steps (issue 8, round 2)
against the plain numpy computations they replace (the same numbers, bit for bit)."""

from __future__ import annotations

import numpy as np
import pytest

from simulations.policies.base import _first_of_stable_argsort, shuffle_top


@pytest.mark.parametrize("k", [1, 2, 5, 8])
@pytest.mark.parametrize("ties", [False, True])
def test_first_of_stable_argsort_equals_the_stable_sort(k, ties):
    rng = np.random.default_rng(k + 10 * ties)
    keys = rng.random((500, 20))
    if ties:  # many equal keys: the stable order (lowest column first) decides
        keys = np.floor(keys * 4) / 4
    keys[:50, 12:] = 1.0 + np.arange(12, 20)  # rows whose shuffled part is shorter (padded keys)
    got = _first_of_stable_argsort(keys, k)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got, np.argsort(keys, axis=1, kind="stable")[:, :k])


def _plain_shuffle_top(c_top, k, rng):
    n = c_top.size
    width = int(c_top.max()) if n else 0
    ranks = np.broadcast_to(np.arange(k, dtype=np.int64), (n, k)).copy()
    if width < 2:
        return ranks
    keys = rng.random((n, width))
    col = np.arange(width)[None, :]
    keys = np.where(col < c_top[:, None], keys, 1.0 + col)
    perm = np.argsort(keys, axis=1, kind="stable")
    kk = min(k, width)
    ranks[:, :kk] = perm[:, :kk]
    return ranks


@pytest.mark.parametrize("k", [1, 3, 5, 9, 25])
def test_shuffle_top_equals_the_full_sort_and_draws_the_same(k):
    rng = np.random.default_rng(7)
    for c_top in (np.full(300, 20), rng.integers(1, 21, 300), np.full(4, 1), np.zeros(0, dtype=np.int64)):
        a, b = np.random.default_rng(3), np.random.default_rng(3)
        np.testing.assert_array_equal(shuffle_top(c_top, k, a), _plain_shuffle_top(c_top, k, b))
        assert a.random() == b.random()  # the same draws consumed
