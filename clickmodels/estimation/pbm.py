"""Position-based model (PBM): a click needs examination of the rank and attraction.

.. math:: P(C_r = 1) = \\gamma_r\\,\\alpha_{qd}

EM [CMR15, Sec. 4.3]: with :math:`a = \\alpha_{qd}`, :math:`g = \\gamma_r` at the current
parameters, a skipped slot has the posteriors

.. math::
    P(A = 1 \\mid C = 0) = \\frac{a(1-g)}{1-ag},\\qquad
    P(E = 1 \\mid C = 0) = \\frac{g(1-a)}{1-ag}

(a click implies :math:`A = E = 1`); the M-step averages them per pair and per rank.
Only the products :math:`\\gamma_r\\alpha_{qd}` are identified (scaling all
:math:`\\gamma` by ``c`` and all :math:`\\alpha` by ``1/c`` gives the same clicks).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from clickmodels.estimation._counts import compress, pair_sum, rank_sum
from clickmodels.estimation._em import examination_posteriors, run_em
from clickmodels.estimation.base import (
    ClickModelFit,
    EMOptions,
    PairTable,
    by_rank,
    register_fit,
    scale_note,
    slot_values,
    smoothed,
)
from clickmodels.logs import ClickLog

__all__ = ["PBMFit", "fit_pbm"]


@register_fit
@dataclass(frozen=True, eq=False)
class PBMFit(ClickModelFit):
    """Fitted PBM: ``attractiveness`` per pair, ``examination[r]`` per rank (a log with more ranks is refused)."""

    name: ClassVar[str] = "pbm"
    pair_fields: ClassVar[tuple[str, ...]] = ("attractiveness",)
    array_fields: ClassVar[tuple[str, ...]] = ("examination",)
    scale_free: ClassVar[tuple[str, ...]] = ("examination",)

    attractiveness: PairTable
    examination: np.ndarray

    def _click_probs(self, log: ClickLog) -> np.ndarray:
        return self.attractiveness.for_log(log) * by_rank(self.examination, log, "pbm examination")[None, :]

    def _conditional_click_probs(self, log: ClickLog) -> np.ndarray:
        return self._click_probs(log)

    def notes(self) -> dict[str, str]:
        return {"pbm_scale": scale_note("examination[r] x attractiveness", "examination[r] / examination[0]",
                                        float(np.asarray(self.examination)[0]))}


def fit_pbm(log: ClickLog, options: EMOptions | None = None) -> PBMFit:
    """Fit PBM by EM (see the module docstring); ``options`` default :class:`EMOptions()`."""
    opt = options or EMOptions()
    n_sessions = log.n_sessions
    log, weight = compress(log)
    w = weight[:, None]
    clicks, shown = log.clicks, log.shown
    views = pair_sum(log, w)
    rank_views = rank_sum(log, w)

    def step(state: tuple[np.ndarray, np.ndarray]) -> tuple[tuple[np.ndarray, np.ndarray], float]:
        alpha, gamma = state
        a = slot_values(alpha, log)
        g = gamma[None, :]
        post_a, post_e, ll = examination_posteriors(a, g, clicks, shown, weight)
        new_alpha = smoothed(pair_sum(log, post_a * w), views, opt.pseudo)
        new_gamma = smoothed(rank_sum(log, post_e * w), rank_views, opt.pseudo)
        return (new_alpha, new_gamma), ll

    init = (np.full(log.pairs.n_pairs, 0.5), np.full(log.depth, 0.5))
    (alpha, gamma), trace = run_em(n_sessions, opt, init, step)
    return PBMFit(attractiveness=PairTable.from_codes(log, alpha, views), examination=gamma, trace=trace)
