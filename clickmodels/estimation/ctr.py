"""CTR baselines: global CTR (= the random click model), rank CTR and document CTR.

Closed-form maximum-likelihood estimates [CMR15, Sec. 4.1]:

.. math::
    \\rho = \\frac{\\sum_s \\sum_r c^{(s)}_r}{\\sum_s k_s},\\qquad
    \\rho_r = \\frac{\\sum_s c^{(s)}_r}{|S_r|},\\qquad
    \\rho_{qd} = \\frac{\\sum_{s,r: (q,d) \\text{ at } r} c^{(s)}_r}{|S_{qd}|}

where :math:`S_r` are the sessions showing a document at rank ``r`` and :math:`S_{qd}`
the impressions of document ``d`` for query ``q`` (with pseudo-counts, see
:func:`~clickmodels.estimation.base.smoothed`). Clicks are independent across slots, so
conditional and marginal click probabilities coincide.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from clickmodels.estimation._counts import pair_sum, rank_sum
from clickmodels.estimation.base import (
    ClickModelFit,
    PairTable,
    by_rank,
    interim_trace,
    register_fit,
    smoothed,
    with_closed_form_trace,
)
from clickmodels.logs import ClickLog

__all__ = ["GlobalCTRFit", "RankCTRFit", "DocCTRFit", "fit_gctr", "fit_rctr", "fit_dctr"]


class _IndependentClicks(ClickModelFit):
    def _conditional_click_probs(self, log: ClickLog) -> np.ndarray:
        return self._click_probs(log)


@register_fit
@dataclass(frozen=True, eq=False)
class GlobalCTRFit(_IndependentClicks):
    """GCTR / random click model: every shown slot is clicked with probability ``p``."""

    name: ClassVar[str] = "gctr"
    float_fields: ClassVar[tuple[str, ...]] = ("p",)

    p: float

    def _click_probs(self, log: ClickLog) -> np.ndarray:
        return np.full(log.docs.shape, self.p)


@register_fit
@dataclass(frozen=True, eq=False)
class RankCTRFit(_IndependentClicks):
    """RCTR: slot ``r`` is clicked with probability ``p[r]`` (a log with more ranks is refused)."""

    name: ClassVar[str] = "rctr"
    array_fields: ClassVar[tuple[str, ...]] = ("p",)

    p: np.ndarray

    def _click_probs(self, log: ClickLog) -> np.ndarray:
        return np.broadcast_to(by_rank(self.p, log, "rctr p")[None, :], log.docs.shape).copy()


@register_fit
@dataclass(frozen=True, eq=False)
class DocCTRFit(_IndependentClicks):
    """DCTR: a (query, document) pair is clicked with probability ``attractiveness``."""

    name: ClassVar[str] = "dctr"
    pair_fields: ClassVar[tuple[str, ...]] = ("attractiveness",)

    attractiveness: PairTable

    def _click_probs(self, log: ClickLog) -> np.ndarray:
        return self.attractiveness.for_log(log)


def fit_gctr(log: ClickLog, *, pseudo: float = 0.0) -> GlobalCTRFit:
    """Global CTR (closed form; ``pseudo`` pseudo-counts, default 0 = MLE)."""
    num = float(log.clicks.sum())
    den = float(log.shown.sum())
    ctr = float(smoothed(num, den, pseudo))
    return with_closed_form_trace(GlobalCTRFit(p=ctr, trace=interim_trace(log)), log, pseudo)


def fit_rctr(log: ClickLog, *, pseudo: float = 0.0) -> RankCTRFit:
    """Rank CTR (closed form; ``pseudo`` pseudo-counts, default 0 = MLE)."""
    ctr = smoothed(rank_sum(log, log.clicks), rank_sum(log, 1.0), pseudo)
    return with_closed_form_trace(RankCTRFit(p=ctr, trace=interim_trace(log)), log, pseudo)


def fit_dctr(log: ClickLog, *, pseudo: float = 1.0) -> DocCTRFit:
    """Document CTR per (query, document) pair (closed form; default pseudo-count 1)."""
    views = pair_sum(log, 1.0)
    value = smoothed(pair_sum(log, log.clicks), views, pseudo)
    table = PairTable.from_codes(log, value, views)
    return with_closed_form_trace(DocCTRFit(attractiveness=table, trace=interim_trace(log)), log, pseudo)
