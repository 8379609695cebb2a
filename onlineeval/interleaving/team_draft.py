"""Team-draft interleaving (Radlinski, Kurup & Joachims 2008) and its multileaving form.

Each round, the rankers pick in a uniformly random order; a ranker picks its
highest-ranked document not yet shown, and that slot is credited to it. A click is
credit for the slot's team:

.. math::

    c_i = \\sum_{j=1}^{k} [\\text{click}_j]\\,[\\text{team}_j = i],
    \\qquad o = \\operatorname{sign}(c_B - c_A).

With more than two rankers this is team-draft multileaving (Schuth et al. 2014):
pairwise preferences are the signs of the credit differences.

Equivalently, at every slot the ranker with the fewest picks so far picks, ties
broken uniformly at random; a ranker whose list has no unused document left drops
out and the others fill the remaining slots.

References
----------
F. Radlinski, M. Kurup, T. Joachims. How does clickthrough data reflect retrieval
quality? CIKM 2008.
A. Schuth, F. Sietsma, S. Whiteson, D. Lefortier, M. de Rijke. Multileaved
comparisons for fast online evaluation. CIKM 2014.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from onlineeval.interleaving._kernels import check_bool, mask_shared_prefix
from onlineeval.interleaving.base import Interleaver, InterleavingResult
from onlineeval.interleaving.registry import register_interleaver

__all__ = ["TeamDraft", "team_draft_interleave"]

#: rows per block of the two-ranker draw (keeps the per-slot arrays in cache)
BLOCK_ROWS = 32_768

_ONE = np.uint64(1)
_ZERO = np.uint64(0)


def team_draft_interleave(rankings: NDArray[np.int32], rng: np.random.Generator,
                          length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """Vectorised team-draft draw over a batch.

    One pass per shown slot, each vectorised over all impressions; each ranker keeps a
    pointer to its next unused document, advanced only on the (few) rows where the
    document just shown was that candidate.

    Parameters
    ----------
    rankings:
        ``(m, n, K)`` validated rankings, ``-1`` trailing.
    rng:
        Random generator: one coin per (slot, impression) for two rankers, one
        uniform key per (slot, ranker, impression) otherwise.
    length:
        Number of shown slots ``k``.

    Notes
    -----
    With two rankers all coins are drawn first, then rows are processed in blocks of
    :data:`BLOCK_ROWS` so the per-slot arrays stay in cache; rows are independent, so
    the result does not depend on the block size.
    """
    m, n, _ = rankings.shape
    if m != 2:
        return _team_draft_block(rankings, rng, length, None)
    coins = rng.integers(0, 2, size=(length, n), dtype=np.int8).view(bool)
    if n <= BLOCK_ROWS:
        return _team_draft_block(rankings, rng, length, coins)
    shown = np.empty((n, length), dtype=np.int32)
    team = np.empty((n, length), dtype=np.int8)
    for start in range(0, n, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, n)
        shown[start:stop], team[start:stop] = _team_draft_block(rankings[:, start:stop], rng, length,
                                                                coins[:, start:stop])
    return shown, team


def _team_draft_block(rankings: NDArray[np.int32], rng: np.random.Generator, length: int,
                      coins: NDArray[np.bool_] | None) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """The draw on one block of rows (``coins``: the two-ranker coins, ``None`` for ``m > 2``)."""
    m, n, K = rankings.shape
    width = K + 1
    # one flat array of every ranker's lists, each row with a trailing -1 so a pointer never runs off
    flat = np.empty((m, n, width), dtype=np.int32)    # written once (no fill-then-copy of a large array)
    flat[:, :, :K] = rankings
    flat[:, :, K] = -1
    flat = flat.reshape(-1)
    # ptr[i, r]: flat index of ranker i's next unused document on row r; all rankers advance together
    ptr = (np.arange(m, dtype=np.intp)[:, None] * (n * width) + np.arange(n, dtype=np.intp)[None, :] * width)
    cand = flat[ptr]                                  # (m, n) next unused document (-1: exhausted)
    ptr_flat = ptr.reshape(-1)                        # views for the (few) rows that skip shown documents
    cand_flat = cand.reshape(-1)
    shown = np.empty((n, length), dtype=np.int32)      # every column is written below
    sig = np.zeros(n, dtype=np.uint64)
    team_t = np.empty((length, n), dtype=np.int8)
    if coins is not None:
        lead = np.zeros(n, dtype=np.int32)           # picks(A) - picks(B)
    else:
        counts = np.zeros((m, n), dtype=np.int32)
        rows = np.arange(n)
    for j in range(length):
        if coins is not None:
            a0 = cand[0] >= 0
            a1 = cand[1] >= 0
            # B picks if A is out, or both are in and (B is behind, or level and the coin says B)
            pick_b = ~a0 | (a1 & ((lead > 0) | ((lead == 0) & coins[j])))
            doc = np.where(pick_b, cand[1], cand[0])
            ok = doc >= 0
            lead += ok & ~pick_b
            lead -= ok & pick_b
            team_t[j] = np.where(ok, pick_b.view(np.int8), -1)
        else:
            avail = cand >= 0
            c = np.where(avail, counts, np.iinfo(np.int32).max)
            elig = avail & (c == c.min(axis=0))
            keys = rng.random((m, n))
            keys[~elig] = -1.0
            pick = keys.argmax(axis=0)
            doc = cand[pick, rows]
            ok = doc >= 0
            counts[pick, rows] += ok
            team_t[j] = np.where(ok, pick, -1)
        shown[:, j] = doc
        # 64-bit signature of the shown set per row: a clear bit proves "not shown"
        bit = np.left_shift(_ONE, (doc & 63).astype(np.uint64))
        sig |= np.where(ok, bit, _ZERO)
        # advance every ranker whose candidate was just shown, then skip documents already shown
        adv = (cand == doc) & ok
        ptr += adv
        np.take(flat, ptr, out=cand)
        maybe = adv & (cand >= 0) & ((np.right_shift(sig, (cand & 63).astype(np.uint64)) & _ONE) != 0)
        hit = np.flatnonzero(maybe)                   # indices into the (m * n) pointers
        while hit.size:
            row = hit % n
            used = (shown[row, : j + 1] == cand_flat[hit, None]).any(axis=1)
            hit = hit[used]
            if not hit.size:
                break
            row = row[used]
            p = ptr_flat[hit] + 1
            ptr_flat[hit] = p
            nxt = flat[p]
            cand_flat[hit] = nxt
            maybe = (nxt >= 0) & ((np.right_shift(sig[row], (nxt & 63).astype(np.uint64)) & _ONE) != 0)
            hit = hit[maybe]
    return shown, np.ascontiguousarray(team_t.T)


@register_interleaver
class TeamDraft(Interleaver):
    """Team-draft interleaving; with more than two rankers, team-draft multileaving.

    Parameters
    ----------
    prefix_credit:
        If ``True`` (default, as in Radlinski et al. 2008) clicks on the top prefix that
        all input lists share count for the team that drew the slot; if ``False`` they
        are ignored (that prefix is shown identically whatever the coins, so its
        clicks carry no information and only add variance).
    """

    name = "team_draft"
    min_rankers = 2
    max_rankers = None

    def __init__(self, *, prefix_credit: bool = True) -> None:
        self.prefix_credit = check_bool(self.name, "prefix_credit", prefix_credit)

    @property
    def options(self) -> dict[str, object]:
        return {"prefix_credit": self.prefix_credit}

    def _interleave(self, rankings: NDArray[np.int32], rng: np.random.Generator,
                    length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
        return team_draft_interleave(rankings, rng, length)

    def _credit(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
        if not self.prefix_credit:
            clicks = mask_shared_prefix(clicks, result.rankings)
        m = result.m
        out = np.empty((result.n, m), dtype=np.float64)
        for i in range(m):
            out[:, i] = np.count_nonzero(clicks & (result.team == i), axis=1)
        return out

    def _preferences(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.int8]:
        credit = self._credit(result, clicks).astype(np.int32)
        return np.sign(credit[:, :, None] - credit[:, None, :]).astype(np.int8)

    def _outcome(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.int8]:
        if not self.prefix_credit:
            clicks = mask_shared_prefix(clicks, result.rankings)
        b = np.count_nonzero(clicks & (result.team == 1), axis=1)
        a = np.count_nonzero(clicks & (result.team == 0), axis=1)
        return np.sign(b - a).astype(np.int8)
