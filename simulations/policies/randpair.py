r"""RandPair: swap a uniformly chosen pair of positions within the top ``n`` (Wang,
Golbandi, Bendersky, Metzler and Najork 2018, "Position bias estimation for unbiased
learning to rank in personal search", WSDM).

With :math:`n_e = \min(n, c)` and :math:`P = \binom{n_e}{2}` unordered pairs of distinct
positions :math:`a < b < n_e`, each swapped with probability :math:`1/P` (a query with
:math:`n_e < 2` is shown unchanged). The top :math:`L` slots of a list differ from the
base order in 0, 1 or 2 places, and

.. math::

    P(\text{top } L = \mathbf r) = \begin{cases}
        \binom{\max(n_e - L, 0)}{2} / P & \text{no mismatch (both swapped positions below } L) \\
        1[r_a \ge L,\ r_a < n_e,\ a < n_e] / P & \text{one mismatch at slot } a \\
        1[r_a = b,\ r_b = a,\ b < n_e] / P & \text{two mismatches at slots } a < b \\
        0 & \text{otherwise;}
    \end{cases}

marginals: :math:`P(j{:}j) = 1 - 2/n_e` and :math:`P(j{:}r) = 1/P` for :math:`j \ne r`
both :math:`< n_e`. Pair marginals sum the :math:`P` equally likely swaps.
"""

from __future__ import annotations

import numpy as np

from simulations.policies.base import (
    FloatArray,
    IntArray,
    TopNRankPolicy,
    identity_ranks,
    register_policy,
)

__all__ = ["RandPairPolicy"]


@register_policy
class RandPairPolicy(TopNRankPolicy):
    """Swap a uniformly random pair of positions in the top ``n`` (spec
    ``{"policy": "randpair", "n": 10}``; ``n`` defaults to ``max(k, 2)``, ``2 <= n <= m``)."""

    name = "randpair"

    def describe(self) -> str:
        return f"randpair: a uniformly random pair of positions in the top {self.n} swapped, top {self.k} shown " \
               "(Wang et al. 2018)"

    def _sample_ranks(self, c: IntArray, rng: np.random.Generator) -> IntArray:
        ne = self._n_eff(c)
        rows = ne >= 2
        a = rng.integers(0, np.maximum(ne, 1))
        b = rng.integers(0, np.maximum(ne - 1, 1))
        b = b + (b >= a)  # uniform over ordered pairs of distinct positions = uniform over unordered pairs
        width = max(self.k, int(ne.max()) if ne.size else 0)
        perm = identity_ranks(c.size, width)
        idx = np.arange(c.size)[rows]
        perm[idx, a[rows]] = b[rows]
        perm[idx, b[rows]] = a[rows]
        return perm[:, : self.k]

    def _prefix_ranks(self, ranks: IntArray, c: IntArray) -> FloatArray:
        ne = self._n_eff(c)[:, None]
        P = ne * (ne - 1) / 2.0
        j = np.arange(self.k)[None, :]
        L = j + 1
        mism = ranks != j
        cnt = np.cumsum(mism, axis=1)
        # first and second mismatch slots and their ranks
        a1 = np.argmax(mism, axis=1)[:, None]
        second = mism & (cnt == 2)
        a2 = np.argmax(second, axis=1)[:, None]
        rows = np.arange(ranks.shape[0])[:, None]
        r1 = ranks[rows, a1]
        r2 = ranks[rows, a2]
        rest = np.maximum(ne - L, 0)
        p0 = rest * (rest - 1) / 2.0
        p1 = ((r1 >= L) & (r1 < ne) & (a1 < ne)).astype(np.float64)
        p2 = ((r1 == a2) & (r2 == a1) & (a2 < ne)).astype(np.float64)
        num = np.where(cnt == 0, p0, np.where(cnt == 1, p1, np.where(cnt == 2, p2, 0.0)))
        return np.where(ne >= 2, num / np.maximum(P, 1.0), (cnt == 0).astype(np.float64))

    def _rank_marginals(self, c: int) -> FloatArray:
        ne = int(self._n_eff(c))
        out = np.eye(c, self.k)
        if ne < 2:
            return out
        P = ne * (ne - 1) / 2.0
        kk = min(ne, self.k)
        out[:ne, :kk] = 1.0 / P
        for j in range(kk):
            out[j, j] = 1.0 - (ne - 1) / P
        return out

    def _rank_support(self, c: int) -> tuple[IntArray, FloatArray]:
        ne = int(self._n_eff(c))
        if ne < 2:
            return identity_ranks(1, self.k), np.ones(1)
        a, b = np.triu_indices(ne, 1)
        width = max(self.k, ne)
        perm = identity_ranks(a.size, width)
        idx = np.arange(a.size)
        perm[idx, a] = b
        perm[idx, b] = a
        return perm[:, : self.k], np.full(a.size, 1.0 / a.size)
