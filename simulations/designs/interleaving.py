"""Interleaving designs: every impression shows an interleaving of A's and B's lists.

Per impression the interleaver's outcome is +1 (B preferred), -1 (A preferred) or 0.
Impressions without a click are not comparisons and are left out; with ``w``, ``l``,
``t`` the wins, losses and ties of B over the impressions with at least one click,

.. math::

    \\Delta_{AB} = \\frac{w + t/2}{w + l + t} - \\frac12 = \\frac{(w - l)/2}{w + l + t},

positive when B is preferred (Chapelle, Joachims, Radlinski, Yue 2012, with B as the
candidate). The test is clustered by user: per user ``num = (w_u - l_u) / 2`` and
``den = w_u + l_u + t_u``, and :math:`\\Delta_{AB} = \\sum num / \\sum den` with its
delta-method standard error over users.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from simulations.designs.base import Design, register_design
from simulations.traffic import Batch

__all__ = ["InterleavingDesign"]


@register_design("interleaving")
class InterleavingDesign(Design):
    accumulators = ("num", "compared", "wins", "losses")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from onlineeval.interleaving import get_interleaver

        self.interleaver = get_interleaver(self.config.method or "", **self.config.options)

    def _process(self, batch: Batch) -> None:
        q = batch.query
        shown = self.interleaver.interleave(
            [self.ranking_a[q], self.ranking_b[q]], self.rng, length=self.ranking_a.shape[1]
        )
        clicks = self._clicks(batch, np.asarray(shown.ranking))
        outcome = np.asarray(self.interleaver.outcome(shown, clicks), dtype=np.float64)
        compared = clicks.any(axis=1).astype(np.float64)
        self._add("num", batch.user, outcome / 2.0)
        self._add("compared", batch.user, compared)
        self._add("wins", batch.user, (outcome > 0).astype(np.float64))
        self._add("losses", batch.user, (outcome < 0).astype(np.float64))

    def _estimates(self, users: np.ndarray, sums: dict[str, np.ndarray]) -> dict[str, Any]:
        from onlineeval.stats import ratio_mean

        return {"delta_ab": ratio_mean(sums["num"], sums["compared"], alpha=self.alpha)}
