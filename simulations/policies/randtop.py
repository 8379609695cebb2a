r"""RandTop-n: shuffle the base ranking's top ``n`` uniformly (Joachims, Swaminathan and
Schnabel 2017, "Unbiased learning-to-rank with biased feedback", WSDM; Wang et al. 2016,
"Learning to rank with selection bias in personal search", SIGIR).

With :math:`n_e = \min(n, c)` for a query with :math:`c` candidates, the first
:math:`n_e` base ranks are permuted uniformly at random and the positions after them keep
the base order; the top ``k`` slots are shown. Hence, with
:math:`(n_e)_{t} = n_e (n_e - 1) \cdots (n_e - t + 1)`,

.. math::

    p_{\mathrm{prefix}, j} = \frac{1}{(n_e)_{\min(j+1, n_e)}}
        \prod_{n_e \le i \le j} 1[r_i = i], \qquad
    P(\text{slot } j \text{ shows rank } r) =
    \begin{cases} 1/n_e & j, r < n_e \\ 1[r = j] & \text{otherwise,} \end{cases}

(ranks in the first :math:`n_e` slots must lie in the top :math:`n_e`) and, for two
distinct slots both inside the shuffled block, :math:`P(j{:}r, l{:}s) = 1[r \ne s] /
(n_e (n_e - 1))`; otherwise at least one slot is fixed and the pair probability is the
product of the marginals.
"""

from __future__ import annotations

import numpy as np

from simulations.policies.base import (
    FloatArray,
    IntArray,
    TopNRankPolicy,
    register_policy,
    shuffle_top,
)

__all__ = ["RandTopPolicy"]


@register_policy
class RandTopPolicy(TopNRankPolicy):
    """RandTop-n (spec ``{"policy": "randtop", "n": 10}``; ``n`` defaults to ``max(k, 2)``).

    Parameters
    ----------
    scores, k:
        As :class:`~simulations.policies.base.LoggingPolicy`.
    n:
        Size of the shuffled top, ``2 <= n <= m`` (a query with fewer candidates
        shuffles all of them).
    """

    name = "randtop"

    def describe(self) -> str:
        return f"randtop: the top {self.n} of the base ranking shuffled uniformly, top {self.k} shown " \
               "(Joachims et al. 2017; Wang et al. 2016)"

    def _sample_ranks(self, c: IntArray, rng: np.random.Generator) -> IntArray:
        return shuffle_top(self._n_eff(c), self.k, rng)

    def _sample(self, q: IntArray, rng: np.random.Generator) -> IntArray:
        # the base ranking at the drawn ranks: a rank past the candidates is only drawn at a
        # slot past them (the top n_e <= c are shuffled, the rest keep their places), and
        # ``order`` is -1 there, so no mask is needed (the same lists as RankPolicy._sample)
        ranks = self._sample_ranks(self.n_candidates[q], rng)
        return self.order.ravel().take(q[:, None] * self.m + ranks)

    def _prefix_ranks(self, ranks: IntArray, c: IntArray) -> FloatArray:
        ne = self._n_eff(c)[:, None]
        j = np.arange(self.k)[None, :]
        inside = np.where(ranks < ne, 1.0 / np.maximum(ne - j, 1), 0.0)
        factor = np.where(j < ne, inside, (ranks == j).astype(np.float64))
        return np.cumprod(factor, axis=1)

    def _rank_marginals(self, c: int) -> FloatArray:
        ne = int(self._n_eff(c))
        out = np.eye(c, self.k)
        kk = min(ne, self.k)
        out[:ne, :kk] = 1.0 / ne
        return out

    def _rank_pairs(self, c: int) -> FloatArray:
        ne = int(self._n_eff(c))
        M = self._rank_marginals(c)  # (c, k)
        out = np.einsum("rj,sl->jrls", M, M)  # independent when at least one slot is fixed
        kk = min(ne, self.k)
        if kk >= 2:
            block = np.full((ne, ne), 1.0 / (ne * (ne - 1)))
            np.fill_diagonal(block, 0.0)
            for j in range(kk):
                for l_ in range(kk):
                    if j != l_:
                        out[j, :ne, l_, :ne] = block
        for j in range(min(self.k, c)):
            out[j, :, j, :] = np.diag(M[:, j])
        return out
