"""The vectorised balanced interleaving gives exactly what the previous implementation gave.

The reference below is the previous implementation of :class:`Balanced` (our own code,
kept verbatim as two functions): a per-row stable argsort finds the first occurrence of
every document in the turn sequence, and each click's rank is found by a row compare.
The new kernel (turn-major passes, "next kept turn" pointers, blocks of rows) must give
the same shown lists, teams, credits, outcomes and random-generator consumption on
random inputs with overlapping lists, repeated documents, short (padded) lists, shown
lengths below, at and beyond the list lengths, and both credit rules.
"""

from __future__ import annotations

import numpy as np
import pytest

import onlineeval.interleaving.balanced as balanced_module
from onlineeval.interleaving._kernels import first_occurrence, mask_shared_prefix
from onlineeval.interleaving.balanced import Balanced


def reference_interleave(rankings: np.ndarray, rng: np.random.Generator, length: int) -> tuple[np.ndarray, np.ndarray]:
    _, n, K = rankings.shape
    a_first = rng.integers(0, 2, size=n, dtype=np.int8).astype(bool)
    lead = np.where(a_first[:, None], rankings[0], rankings[1])
    follow = np.where(a_first[:, None], rankings[1], rankings[0])
    seq = np.empty((n, 2 * K), dtype=np.int32)
    seq[:, 0::2] = lead
    seq[:, 1::2] = follow
    seq_team = np.empty((n, 2 * K), dtype=np.int8)
    seq_team[:, 0::2] = np.where(a_first, 0, 1)[:, None]
    seq_team[:, 1::2] = np.where(a_first, 1, 0)[:, None]
    keep = first_occurrence(seq)
    pos = np.cumsum(keep, axis=1) - 1
    sel = keep & (pos < length)
    r, c = np.nonzero(sel)
    shown = np.full((n, length), -1, dtype=np.int32)
    team = np.full((n, length), -1, dtype=np.int8)
    shown[r, pos[r, c]] = seq[r, c]
    team[r, pos[r, c]] = seq_team[r, c]
    return shown, team


def reference_credit(ranking: np.ndarray, rankings: np.ndarray, clicks: np.ndarray, prefix_credit: bool) -> np.ndarray:
    if not prefix_credit:
        clicks = mask_shared_prefix(clicks, rankings)
    n = ranking.shape[0]
    K = rankings.shape[2]
    out = np.zeros((n, 2), dtype=np.float64)
    row, slot = np.nonzero(clicks)
    if row.size == 0:
        return out
    docs = ranking[row, slot]
    ranks = np.empty((2, row.size), dtype=np.intp)
    at = np.arange(row.size)
    for i in range(2):
        eq = rankings[i][row] == docs[:, None]
        idx = eq.argmax(axis=1)
        ranks[i] = np.where(eq[at, idx], idx, K)
    new_row = np.empty(row.size, dtype=bool)
    new_row[0] = True
    np.not_equal(row[1:], row[:-1], out=new_row[1:])
    group = np.cumsum(new_row) - 1
    last = np.flatnonzero(np.append(new_row[1:], True))
    kappa = np.minimum(ranks[0, last], ranks[1, last])[group]
    for i in range(2):
        out[:, i] = np.bincount(row, weights=(ranks[i] <= kappa), minlength=n)
    return out


def random_lists(rng: np.random.Generator, n: int, k_a: int, k_b: int, pool: int) -> list[np.ndarray]:
    """Two lists per impression from a small pool (overlaps, repeats within a list), each
    cut at a random length (trailing -1)."""
    out = []
    for k in (k_a, k_b):
        lst = rng.integers(0, pool, size=(n, k)).astype(np.int64)
        lengths = rng.integers(0, k + 1, size=n)
        lengths[rng.random(n) < 0.5] = k              # half the rows full
        lst[np.arange(k)[None, :] >= lengths[:, None]] = -1
        out.append(lst)
    # every impression needs a document somewhere
    empty = (out[0][:, 0] < 0) & (out[1][:, 0] < 0)
    out[0][empty, 0] = 0
    return out


CASES = [  # (k_a, k_b, pool, length)
    (10, 10, 20, 10), (10, 10, 5, 10), (5, 12, 8, 4), (12, 5, 30, 20), (1, 1, 2, 3), (3, 7, 4, 12), (20, 20, 50, 10),
    (6, 6, 3, 1),
]


@pytest.mark.parametrize(("k_a", "k_b", "pool", "length"), CASES)
@pytest.mark.parametrize("prefix_credit", [True, False])
def test_same_shown_lists_teams_and_outcomes_as_before(k_a: int, k_b: int, pool: int, length: int,
                                                       prefix_credit: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(balanced_module, "BLOCK_ROWS", 257)   # several blocks, one of them partial
    data_rng = np.random.default_rng(1000 * k_a + 10 * k_b + pool)
    n = 2_000
    a, b = random_lists(data_rng, n, k_a, k_b, pool)
    il = Balanced(prefix_credit=prefix_credit)
    rng_new, rng_old = np.random.default_rng(7), np.random.default_rng(7)
    result = il.interleave([a, b], rng_new, length=length)
    shown, team = reference_interleave(result.rankings, rng_old, length)
    np.testing.assert_array_equal(result.ranking, shown)
    np.testing.assert_array_equal(result.team, team)
    assert result.ranking.dtype == np.int32 and result.team.dtype == np.int8
    assert rng_new.random() == rng_old.random()              # the same draws were consumed
    for click_rate in (0.0, 0.1, 0.5, 1.0):
        clicks = data_rng.random(shown.shape) < click_rate
        expected = reference_credit(shown, result.rankings, clicks & (shown >= 0), prefix_credit)
        np.testing.assert_array_equal(il.credit(result, clicks), expected)
        sign = np.sign(expected[:, 1] - expected[:, 0]).astype(np.int8)
        np.testing.assert_array_equal(il.outcome(result, clicks), sign)
        prefs = il.preferences(result, clicks)
        np.testing.assert_array_equal(prefs[:, 1, 0], sign)
        np.testing.assert_array_equal(prefs[:, 0, 1], -sign)


def test_shown_list_is_the_turn_sequence_without_repeats() -> None:
    """Worked example: A = (1, 2, 3), B = (2, 3, 4) (the module's counter-example) shows 1 2 3 4 when A
    leads and 2 1 3 4 when B leads; each slot's team is the list whose turn inserted it."""
    il = Balanced()
    a = np.array([[1, 2, 3]] * 400)
    b = np.array([[2, 3, 4]] * 400)
    res = il.interleave([a, b], np.random.default_rng(3), length=4)
    a_leads = res.ranking[:, 0] == 1
    assert 100 < a_leads.sum() < 300
    np.testing.assert_array_equal(res.ranking[a_leads], [[1, 2, 3, 4]] * int(a_leads.sum()))
    # A leads: turns A1=1, B1=2, A2=2 (met), B2=3, A3=3 (met), B3=4
    np.testing.assert_array_equal(res.team[a_leads], [[0, 1, 1, 1]] * int(a_leads.sum()))
    np.testing.assert_array_equal(res.ranking[~a_leads], [[2, 1, 3, 4]] * int((~a_leads).sum()))
    # B leads: turns B1=2, A1=1, B2=3, A2=2 (met), B3=4
    np.testing.assert_array_equal(res.team[~a_leads], [[1, 0, 1, 1]] * int((~a_leads).sum()))


def test_empty_batch_and_no_clicks() -> None:
    il = Balanced()
    res = il.interleave([np.zeros((0, 3), dtype=int), np.zeros((0, 3), dtype=int)], np.random.default_rng(0))
    assert res.ranking.shape == (0, 3) and res.team.shape == (0, 3)
    res = il.interleave([np.array([[1, 2]]), np.array([[2, 1]])], np.random.default_rng(0))
    assert il.outcome(res, np.zeros((1, 2), dtype=bool)).tolist() == [0]
