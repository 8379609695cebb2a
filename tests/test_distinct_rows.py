"""onlineeval.rows.distinct_rows against numpy's own ``np.unique(axis=0, return_index=True, return_inverse=True)``:
the same first occurrences in the same (lexicographic, signed) order and the same group of every row, on small and
negative codes, huge sparse ids (the dense-code branch), values spanning the whole int64 range (the compaction
branch), many repeats, and one or no column; and the interleavers that group impressions by their lists with it
(optimized interleaving's draw, probabilistic interleaving's weights and posteriors) give the same lists, teams and
outcomes as computing every impression on its own (their previous code)."""

from __future__ import annotations

import numpy as np
import pytest

from onlineeval.rows import distinct_rows


def _matrices():
    rng = np.random.default_rng(20261207)
    yield rng.integers(-1, 4, (300, 5))
    yield rng.integers(-(2**40), 2**40, (200, 3))  # sparse huge ids
    yield rng.choice(np.array([-1, 5, 2**62, -(2**62)]), (250, 4))  # the whole range: codes compacted
    yield np.repeat(rng.integers(-1, 50, (40, 6)), 7, axis=0)[rng.permutation(280)]  # many repeats
    yield rng.integers(0, 3, (100, 1))
    yield np.zeros((5, 0), dtype=np.int64)
    yield rng.integers(0, 10, (1, 4))


@pytest.mark.parametrize("keys", list(_matrices()))
def test_distinct_rows_is_numpys_unique(keys: np.ndarray) -> None:
    first, code = distinct_rows(keys)
    if keys.shape[1] == 0:  # numpy's unique has no rows to sort: every row the one empty row
        assert first.tolist() == [0] and code.tolist() == [0] * keys.shape[0]
        return
    _, index, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
    assert first.tolist() == index.tolist()
    assert code.tolist() == inverse.reshape(-1).tolist()
    assert np.array_equal(keys[first][code], keys)


def test_no_rows() -> None:
    first, code = distinct_rows(np.zeros((0, 3), dtype=np.int64))
    assert first.size == 0 and code.size == 0


@pytest.mark.parametrize(("method", "m"), [("probabilistic", 2), ("probabilistic", 3), ("optimized", 2),
                                           ("optimized", 3)])
def test_grouped_interleavers_equal_impression_by_impression(method: str, m: int,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Impressions of 30 queries' lists (with short lists and shared documents) interleaved, credited and compared
    with their rows grouped by distinct_rows, and as their previous code did (probabilistic interleaving: every
    impression its own group, distinct_rows replaced by the identity; optimized interleaving: numpy's row sort,
    whose group order its per-group draws follow): the same shown lists, teams, preferences and expected outcomes,
    bit for bit, and the same generator state."""
    import onlineeval.interleaving.optimized as opt
    import onlineeval.interleaving.probabilistic as prob
    from onlineeval.interleaving import get_interleaver

    rng = np.random.default_rng(m)
    lists = [rng.permuted(np.tile(np.arange(12), (30, 1)), axis=1)[:, :8].astype(np.int32) for _ in range(m)]
    lists[0][::4, 5:] = -1  # short lists: empty slots
    query = rng.integers(0, 30, 600)
    il = get_interleaver(method)
    runs = []
    for grouped in (True, False):
        if not grouped:
            def each(keys):  # noqa: ANN001, ANN202
                n = np.asarray(keys).shape[0]
                return np.arange(n, dtype=np.int64), np.arange(n, dtype=np.int64)

            def by_sort(keys):  # noqa: ANN001, ANN202
                _, index, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
                return index, inverse.reshape(-1)
            monkeypatch.setattr(opt, "distinct_rows", by_sort)
            monkeypatch.setattr(prob, "distinct_rows", each)
        g = np.random.default_rng(7)
        result = il.interleave([x[query] for x in lists], g, length=6)
        clicks = np.random.default_rng(8).random(result.ranking.shape) < 0.3
        runs.append((result.ranking.copy(), result.team.copy(), il.preferences(result, clicks),
                     il.expected_preferences(result, clicks), g.bit_generator.state))
    (s1, t1, p1, e1, g1), (s2, t2, p2, e2, g2) = runs
    assert np.array_equal(s1, s2) and np.array_equal(t1, t2) and np.array_equal(p1, p2)
    assert e1.tobytes() == e2.tobytes() and g1 == g2
    assert (s1 >= 0).sum() > 1000 and np.abs(e1).sum() > 0


def _previous_probabilistic_interleave(il, rankings, rng, length):  # noqa: ANN001, ANN202
    """Probabilistic interleaving's draw before the distinct rows and the compacted candidates (commit a264700):
    every impression's whole universe of candidates, repeats included (weight 0), drawn by the same slot-by-slot
    loop (``_draw``, which the change left as it was), as the reference."""
    from onlineeval.interleaving.probabilistic import _draw, _universe, softmax_weights

    cat, keep = _universe(rankings)
    cat = np.where(keep, cat, -1)
    return _draw(cat, keep.copy(), softmax_weights(cat, rankings, il.tau), rng, length)


@pytest.mark.parametrize(("m", "docs", "length", "tau"), [(2, 12, 6, 3.0), (3, 9, 8, 3.0), (4, 30, 10, 1.0),
                                                          (2, 6, 10, 3.0), (3, 12, 6, 400.0)])
def test_probabilistic_draw_equals_the_previous_code(m: int, docs: int, length: int, tau: float) -> None:
    """The draw over the distinct rows' compacted candidates against the previous per-impression draw over every
    candidate column (the same loop on the previous candidates and weights), with repeats across the lists, short
    lists with empty slots, lists that run out before the slots do, and a temperature whose far ranks' weights
    underflow to 0: the same shown lists and teams, bit for bit, and the same generator state after."""
    from onlineeval.interleaving import get_interleaver
    from onlineeval.interleaving.base import stack_rankings

    il = get_interleaver("probabilistic", tau=tau)
    rng = np.random.default_rng(docs)
    depth = min(8, docs)
    lists = [rng.permuted(np.tile(np.arange(docs), (25, 1)), axis=1)[:, :depth].astype(np.int32) for _ in range(m)]
    lists[0][::3, depth // 2:] = -1
    query = rng.integers(0, 25, 900)
    stacked = stack_rankings([x[query] for x in lists], min_rankers=2)
    g1, g2 = np.random.default_rng(1), np.random.default_rng(1)
    got = il._interleave(stacked, g1, length)
    want = _previous_probabilistic_interleave(il, stacked, g2, length)
    assert np.array_equal(got[0], want[0]) and np.array_equal(got[1], want[1])
    assert g1.bit_generator.state == g2.bit_generator.state
    assert (got[0] >= 0).sum() > 2000
