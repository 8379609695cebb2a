r"""Swap interventions (Joachims, Swaminathan and Schnabel 2017, "Unbiased
learning-to-rank with biased feedback", WSDM, section 5): swap rank 1 with rank
:math:`J`, :math:`J` uniform on :math:`1..K` (:math:`J = 1`: no swap).

0-based here: slot 0 shows base rank :math:`J \in \{0, \dots, K_e - 1\}` with
:math:`K_e = \min(K, c)`, slot :math:`J` shows base rank 0, every other slot its own base
rank; the top ``k`` slots are shown (:math:`K > k` is allowed: the top document then
leaves the shown list). Because slot 0 reveals :math:`J`,

.. math::

    p_{\mathrm{prefix}, j} = \frac{1[r_0 < K_e]}{K_e}
        \prod_{1 \le i \le j} 1\bigl[r_i = (i = r_0\ ?\ 0 : i)\bigr],

and the marginals are :math:`P(0{:}r) = 1[r < K_e]/K_e`, for :math:`j \ge 1`
:math:`P(j{:}j) = 1 - 1[j < K_e]/K_e` and :math:`P(j{:}0) = 1[j < K_e]/K_e`. Pair
marginals sum the :math:`K_e` equally likely swaps.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from simulations.policies.base import (
    FloatArray,
    IntArray,
    RankPolicy,
    SpecReader,
    identity_ranks,
    int_option,
    register_policy,
)

__all__ = ["SwapPolicy"]


@register_policy
class SwapPolicy(RankPolicy):
    """Swap the top document with rank :math:`J \\sim U\\{1..K\\}` (1-based)
    (spec ``{"policy": "swap", "K": 10}``; ``K`` defaults to ``k``, ``1 <= K <= m``;
    ``K = 1`` never swaps)."""

    name = "swap"

    def __init__(self, scores: Any, k: int, K: int | None = None) -> None:
        super().__init__(scores, k)
        self.K = int_option("K", self.k if K is None else K, 1, max(self.m, 1))

    @classmethod
    def from_spec(cls, spec: Mapping[str, Any], scores: Any, k: int, path: Sequence[str | int] = ()) -> SwapPolicy:
        rd = SpecReader(spec, path)
        s = rd.scores(scores)
        m = int(np.shape(s)[1]) if np.ndim(s) == 2 else 1
        K = rd.integer("K", k, low=1, high=max(m, 1))
        rd.finish()
        return cls(s, k, K)

    def describe(self) -> str:
        return f"swap: base rank 1 swapped with rank J ~ U{{1..{self.K}}} (J = 1: no swap), top {self.k} shown " \
               "(Joachims, Swaminathan, Schnabel 2017)"

    def conventions(self) -> dict[str, Any]:
        return {**super().conventions(), "K": self.K}

    def _k_eff(self, c: Any) -> Any:
        return np.maximum(np.minimum(self.K, c), 1)

    def _swapped(self, J: IntArray) -> IntArray:
        ranks = identity_ranks(J.size, self.k)
        j = np.arange(self.k)[None, :]
        ranks = np.where(j == J[:, None], 0, ranks)
        ranks[:, 0] = J
        return ranks

    def _sample_ranks(self, c: IntArray, rng: np.random.Generator) -> IntArray:
        J = rng.integers(0, self._k_eff(c))
        return self._swapped(J.astype(np.int64))

    def _prefix_ranks(self, ranks: IntArray, c: IntArray) -> FloatArray:
        ke = self._k_eff(c)
        J = ranks[:, 0]
        ok = ranks == self._swapped(np.clip(J, 0, None))
        first = np.where(J < ke, 1.0 / ke, 0.0)
        return first[:, None] * np.cumprod(ok, axis=1)

    def _rank_marginals(self, c: int) -> FloatArray:
        ke = int(self._k_eff(c))
        out = np.eye(c, self.k)
        if c == 0:
            return out
        out[:, 0] = 0.0
        out[:ke, 0] = 1.0 / ke
        for j in range(1, min(ke, self.k, c)):
            out[j, j] = 1.0 - 1.0 / ke
            out[0, j] = 1.0 / ke
        return out

    def _rank_support(self, c: int) -> tuple[IntArray, FloatArray]:
        ke = int(self._k_eff(c))
        return self._swapped(np.arange(ke, dtype=np.int64)), np.full(ke, 1.0 / ke)
