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

from onlineeval.interleaving._kernels import (
    check_bool,
    first_occurrence,
    mask_shared_prefix,
)
from onlineeval.interleaving.base import Interleaver, InterleavingResult
from onlineeval.interleaving.registry import register_interleaver

__all__ = ["BALANCED_COUNTER_EXAMPLE", "Balanced"]

#: ``(A, B, P(B wins))`` for one uniformly random click on the four shown documents.
BALANCED_COUNTER_EXAMPLE: tuple[tuple[int, ...], tuple[int, ...], float] = ((1, 2, 3), (2, 3, 4), 0.75)


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

    def _credit(self, result: InterleavingResult, clicks: NDArray[np.bool_]) -> NDArray[np.float64]:
        if not self.prefix_credit:
            clicks = mask_shared_prefix(clicks, result.rankings)
        n = result.n
        K = result.rankings.shape[2]
        out = np.zeros((n, 2), dtype=np.float64)
        row, slot = np.nonzero(clicks)                  # row-major: grouped by impression, slots ascending
        if row.size == 0:
            return out
        docs = result.ranking[row, slot]
        ranks = np.empty((2, row.size), dtype=np.intp)  # 0-based first-occurrence rank, K when absent
        at = np.arange(row.size)
        for i in range(2):
            eq = result.rankings[i][row] == docs[:, None]
            idx = eq.argmax(axis=1)
            ranks[i] = np.where(eq[at, idx], idx, K)
        new_row = np.empty(row.size, dtype=bool)
        new_row[0] = True
        np.not_equal(row[1:], row[:-1], out=new_row[1:])
        group = np.cumsum(new_row) - 1                  # index of the impression among the clicked ones
        last = np.flatnonzero(np.append(new_row[1:], True))   # lowest clicked slot of each impression
        kappa = np.minimum(ranks[0, last], ranks[1, last])[group]   # 0-based cut-off
        for i in range(2):
            out[:, i] = np.bincount(row, weights=(ranks[i] <= kappa), minlength=n)
        return out
