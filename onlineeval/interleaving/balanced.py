"""Balanced interleaving (Joachims 2003).

A coin decides which list leads; the shown list then alternates ``A_1, B_1, A_2,
B_2, ...`` (or ``B_1, A_1, ...``), skipping documents already shown. Credit: let
``d*`` be the lowest-ranked clicked document of the shown list and

.. math::

    \\kappa = \\min\\{\\, r : d^* \\in A_{1..r} \\text{ or } d^* \\in B_{1..r} \\,\\},
    \\qquad h_X = |\\{\\text{clicked } d \\in X_{1..\\kappa}\\}|,
    \\qquad o = \\operatorname{sign}(h_B - h_A).

Known behaviour (documented, not a bug of this implementation): balanced
interleaving is biased under random clicks. With ``A = (d1, d2, d3)`` and
``B = (d2, d3, d4)`` both coins show ``d1 d2 d3 d4`` or ``d2 d1 d3 d4``, and a single
uniformly random click makes B win with probability 3/4 (Chapelle et al. 2012;
Hofmann et al. 2011). See :data:`BALANCED_COUNTER_EXAMPLE`.

When one list is exhausted the other continues (Joachims' loop stops there; we fill
the shown list up to ``k``). Team labels record which list inserted each document.

References
----------
T. Joachims. Evaluating retrieval performance using clickthrough data. In Text
Mining, 2003.
O. Chapelle, T. Joachims, F. Radlinski, Y. Yue. Large-scale validation and analysis
of interleaved search evaluation. ACM TOIS 30(1), 2012.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray

from onlineeval.interleaving._kernels import check_bool, mask_shared_prefix
from onlineeval.interleaving.base import Interleaver, InterleavingResult
from onlineeval.interleaving.registry import register_interleaver

__all__ = ["BALANCED_COUNTER_EXAMPLE", "BLOCK_ROWS", "Balanced", "balanced_interleave"]

#: impressions per block of the draw (keeps the per-turn arrays in cache)
BLOCK_ROWS = 32_768

#: ``(A, B, P(B wins))`` for one uniformly random click on the four shown documents.
BALANCED_COUNTER_EXAMPLE: tuple[tuple[int, ...], tuple[int, ...], float] = ((1, 2, 3), (2, 3, 4), 0.75)


def balanced_interleave(rankings: NDArray[np.int32], rng: np.random.Generator,
                        length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """Vectorised balanced draw over a batch.

    The shown list is the turn sequence ``L_1, F_1, L_2, F_2, ...`` (``L`` the leading
    list, chosen by one coin per impression, ``F`` the other) without empty turns and
    without documents met at an earlier turn, cut at ``length``. Every pass is over one
    turn and vectorised over impressions, on turn-major arrays: a turn's document is
    compared with each earlier turn's (``2K`` turns: ``K(2K - 1)`` comparisons of whole
    columns, no per-impression sort), then each shown slot follows a "next kept turn"
    pointer. Rows are independent, so blocks of :data:`BLOCK_ROWS` give the same result.

    Parameters
    ----------
    rankings:
        ``(2, n, K)`` validated rankings, ``-1`` trailing.
    rng:
        Random generator: one coin per impression (``A`` leads when it is 1).
    length:
        Number of shown slots ``k``.
    """
    _, n, _ = rankings.shape
    a_first = rng.integers(0, 2, size=n, dtype=np.int8).astype(bool)
    shown = np.empty((n, length), dtype=np.int32)
    team = np.empty((n, length), dtype=np.int8)
    for start in range(0, n, BLOCK_ROWS):
        stop = min(start + BLOCK_ROWS, n)
        shown[start:stop], team[start:stop] = _balanced_block(rankings[:, start:stop], a_first[start:stop], length)
    return shown, team


def _balanced_block(rankings: NDArray[np.int32], a_first: NDArray[np.bool_],
                    length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
    """The draw on one block of impressions (see :func:`balanced_interleave`)."""
    _, n, K = rankings.shape
    W = 2 * K
    # turn-major: seq[p] is turn p's document per impression; rows W, W + 1 are sentinels (-1)
    seq = np.empty((W + 2, n), dtype=np.int32)
    lead_a = a_first[None, :]
    seq[0:W:2] = np.where(lead_a, rankings[0].T, rankings[1].T)
    seq[1:W:2] = np.where(lead_a, rankings[1].T, rankings[0].T)
    seq[W:] = -1
    # keep[p]: turn p brings a document not met at an earlier turn
    keep = np.zeros((W, n), dtype=bool)
    count = np.zeros(n, dtype=np.int32)
    hit = np.empty(n, dtype=bool)
    eq = np.empty(n, dtype=bool)
    used = W
    for p in range(W):
        if p % 2 == 0 and p and count.min() >= length:
            used = p                                # every impression has its `length` documents
            break
        x = seq[p]
        hit.fill(False)
        for q in range(p):
            np.equal(seq[q], x, out=eq)
            hit |= eq
        k = keep[p]
        np.greater_equal(x, 0, out=k)
        k &= ~hit
        count += k
    # nxt[p]: flat index (turn * n + impression) of the first kept turn >= p, else of the sentinel
    cols = np.arange(n, dtype=np.int64)
    nxt = np.empty((W + 2, n), dtype=np.int64)
    nxt[W] = W * n + cols
    nxt[W + 1] = nxt[W]
    for p in range(W - 1, -1, -1):
        np.copyto(nxt[p], nxt[p + 1])
        if p < used:
            np.copyto(nxt[p], p * n + cols, where=keep[p])
    # each turn's team: the leader's on even turns, the follower's on odd ones
    lead_team = (~a_first).astype(np.int8)
    teams = np.empty((W + 2, n), dtype=np.int8)
    teams[0:W:2] = lead_team
    teams[1:W:2] = 1 - lead_team
    teams[W:] = -1
    seq_flat, nxt_flat, team_flat = seq.reshape(-1), nxt.reshape(-1), teams.reshape(-1)
    shown_t = np.empty((length, n), dtype=np.int32)
    team_t = np.empty((length, n), dtype=np.int8)
    at = nxt[0].copy()
    for j in range(length):
        np.take(seq_flat, at, out=shown_t[j])
        np.take(team_flat, at, out=team_t[j])
        at += n                                     # the turn after the one just shown ...
        np.take(nxt_flat, at, out=at)               # ... and on to the next kept one
    return shown_t.T, team_t.T


@register_interleaver
class Balanced(Interleaver):
    """Balanced interleaving of two rankers.

    Parameters
    ----------
    prefix_credit:
        If ``True`` (default, Joachims 2003) clicks on the top prefix shared by both
        lists count in ``h_A`` and ``h_B`` (equally); if ``False`` they are ignored.
    """

    name = "balanced"
    min_rankers = 2
    max_rankers = 2

    def __init__(self, *, prefix_credit: bool = True) -> None:
        self.prefix_credit = check_bool(self.name, "prefix_credit", prefix_credit)

    @property
    def options(self) -> dict[str, object]:
        return {"prefix_credit": self.prefix_credit}

    def _interleave(self, rankings: NDArray[np.int32], rng: np.random.Generator,
                    length: int) -> tuple[NDArray[np.int32], NDArray[np.int8]]:
        return balanced_interleave(rankings, rng, length)

    def _credit(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
        n = result.n
        out = np.zeros((n, 2), dtype=np.float64)
        found = self._in_prefix(result, clicks)
        if found is None:
            return out
        row, in_prefix = found
        for i in range(2):
            out[:, i] = np.bincount(row, weights=in_prefix[i], minlength=n)
        return out

    def _outcome(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.int8]:
        found = self._in_prefix(result, clicks)
        if found is None:
            return np.zeros(result.n, dtype=np.int8)
        row, in_prefix = found
        diff = np.bincount(row, weights=in_prefix[1].astype(np.int64) - in_prefix[0], minlength=result.n)
        return np.sign(diff).astype(np.int8)

    def _in_prefix(self, result: InterleavingResult,
                   clicks: NDArray[np.bool_]) -> tuple[NDArray[np.intp], NDArray[np.bool_]] | None:
        """Impression of each click and whether the clicked document is in ``X_{1..kappa}``
        for ``X = A, B`` (``(2, clicks)``); ``None`` without any click."""
        if not self.prefix_credit:
            clicks = mask_shared_prefix(clicks, result.rankings)
        K = result.rankings.shape[2]
        k = clicks.shape[1]
        flat = np.flatnonzero(clicks)                   # row-major: grouped by impression, slots ascending
        if flat.size == 0:
            return None
        row = flat // k
        docs = result.ranking.reshape(-1).take(flat)
        ranks = np.empty((2, flat.size), dtype=np.intp)  # 0-based first-occurrence rank, K when absent
        for i in range(2):
            eq = np.take(result.rankings[i], row, axis=0) == docs[:, None]
            ranks[i] = np.where(eq.any(axis=1), eq.argmax(axis=1), K)
        new_row = np.empty(row.size, dtype=bool)
        new_row[0] = True
        np.not_equal(row[1:], row[:-1], out=new_row[1:])
        group = np.cumsum(new_row) - 1                  # index of the impression among the clicked ones
        last = np.flatnonzero(np.append(new_row[1:], True))   # lowest clicked slot of each impression
        kappa = np.minimum(ranks[0, last], ranks[1, last])[group]   # 0-based cut-off
        return row, ranks <= kappa
