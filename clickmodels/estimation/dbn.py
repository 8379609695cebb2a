"""Dynamic Bayesian network model (DBN, Chapelle & Zhang 2009).

At an examined slot the user clicks with probability :math:`\\alpha_{qd}`; after a click
they are satisfied with probability :math:`\\sigma_{qd}` and stop; otherwise they go on to
the next slot with probability :math:`\\gamma` (so :math:`c^0 = \\gamma`,
:math:`c^1 = \\gamma(1-\\sigma_{qd})` in :mod:`clickmodels.estimation._cascade`).

EM [CMR15, Sec. 4.3]. With :math:`l` the last click, the E-step gives (exactly, by the
backward tail probabilities :math:`Q_r` of :func:`~clickmodels.estimation._cascade.cascade_posterior`)

.. math::
    P(A_r = 1 \\mid C) = \\begin{cases} c_r & r \\le l \\\\ \\alpha_r (1 - P(E_r=1 \\mid C)) & r > l\\end{cases},
    \\qquad
    P(S_l = 1 \\mid C) = \\frac{\\sigma_l}{\\sigma_l + (1-\\sigma_l)(1 - \\gamma + \\gamma Q_{l+1})}

(clicks above ``l`` were not satisfying). The M-step sets :math:`\\alpha_{qd}` to the mean
posterior attraction over the pair's impressions, :math:`\\sigma_{qd}` to the mean
posterior satisfaction over its clicks and

.. math::
    \\gamma = \\frac{\\sum_{s} \\sum_{r<k_s} P(E_{r+1} = 1 \\mid C)}
                   {\\sum_{s} \\sum_{r<k_s} P(E_r = 1, S_r = 0 \\mid C)}.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from clickmodels.estimation._cascade import (
    CascadeFamilyFit,
    CompiledSums,
    cascade_posterior,
    chain_em_data,
    compiled_em_sums,
    prepare_slots,
)
from clickmodels.estimation._counts import pair_sum
from clickmodels.estimation._em import run_em
from clickmodels.estimation.base import (
    EMOptions,
    FitTrace,
    PairTable,
    ordered_dot,
    register_fit,
    slot_values,
    smoothed,
)
from clickmodels.logs import ClickLog

__all__ = ["DBNFit", "fit_dbn"]


@register_fit
@dataclass(frozen=True, eq=False)
class DBNFit(CascadeFamilyFit):
    """Fitted DBN: attractiveness and satisfaction per pair, perseverance ``gamma`` (:math:`\\gamma`)."""

    name: ClassVar[str] = "dbn"
    pair_fields: ClassVar[tuple[str, ...]] = ("attractiveness", "satisfaction")
    float_fields: ClassVar[tuple[str, ...]] = ("gamma",)

    satisfaction: PairTable
    gamma: float

    def _continuation(self, log: ClickLog, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = self.gamma
        return np.full(1, g), g * (1.0 - self.satisfaction.for_log(log))


def fit_dbn(log: ClickLog, options: EMOptions | None = None) -> DBNFit:
    """Fit DBN by EM (see the module docstring); ``options`` default :class:`EMOptions()`."""
    alpha, sigma, gamma, tables_log, views, n_clicks, trace = dbn_em(log, options or EMOptions(), None)
    return DBNFit(
        attractiveness=PairTable.from_codes(tables_log, alpha, views),
        satisfaction=PairTable.from_codes(tables_log, sigma, n_clicks),
        gamma=gamma,
        trace=trace,
    )


def dbn_em(
    log: ClickLog, opt: EMOptions, gamma_fixed: float | None
) -> tuple[np.ndarray, np.ndarray, float, ClickLog, np.ndarray, np.ndarray, FitTrace]:
    """The DBN EM loop; with ``gamma_fixed`` (SDBN: 1.0) :math:`\\gamma` is not updated.

    Returns per-pair-code ``alpha``, ``sigma``, ``gamma``, the (compressed) log whose pair
    codes index them, the weighted impression and click counts per pair, and the trace.
    """
    d = chain_em_data(log)
    log, w = d.log, d.w
    clicks = log.clicks
    rows = np.arange(log.n_sessions)

    def step(state: tuple[np.ndarray, np.ndarray, float]) -> tuple[tuple[np.ndarray, np.ndarray, float], float]:
        alpha, sigma, gamma = state
        a = slot_values(alpha, log)
        s = slot_values(sigma, log)
        a, c0, c1 = prepare_slots(a, np.full(1, gamma), gamma * (1.0 - s), log.shown)
        post = cascade_posterior(a, c0, c1, clicks, d.last)
        exam = post.exam
        s_last = np.where(d.last >= 0, s[rows, np.maximum(d.last, 0)] / post.stop_norm, 0.0)
        post_s = np.where(d.at_last, s_last[:, None], 0.0)
        new_alpha = smoothed(pair_sum(log, d.attraction(a, post) * w), d.views, opt.pseudo)
        new_sigma = smoothed(pair_sum(log, post_s * w, clicks), d.n_clicks, opt.pseudo)
        exam_next = np.zeros_like(exam)
        exam_next[:, :-1] = exam[:, 1:]
        num = np.where(d.has_next, exam_next * w, 0.0).sum()
        den = np.where(d.has_next, (exam - post_s) * w, 0.0).sum()
        new_gamma = float(smoothed(num, den, opt.pseudo)) if gamma_fixed is None else gamma_fixed
        return (new_alpha, new_sigma, new_gamma), ordered_dot(post.log_lik, d.weight)

    if compiled_em_sums(d):  # the same E-step in one compiled pass (_cascade_compiled)
        sums = CompiledSums(d)

        def step(state: tuple[np.ndarray, np.ndarray, float]) -> tuple[tuple[np.ndarray, np.ndarray, float], float]:
            alpha, sigma, gamma = state
            ll = sums.run(alpha, sigma=sigma, gamma=gamma)
            new_gamma = gamma_fixed if gamma_fixed is not None else float(
                smoothed(sums.gamma_sums[0], sums.gamma_sums[1], opt.pseudo))
            return (smoothed(sums.att, d.views, opt.pseudo), smoothed(sums.sat, d.n_clicks, opt.pseudo),
                    new_gamma), ll

    m = log.pairs.n_pairs
    init = (np.full(m, 0.5), np.full(m, 0.5), 0.5 if gamma_fixed is None else gamma_fixed)
    (alpha, sigma, gamma), trace = run_em(d.n_sessions, opt, init, step)
    return alpha, sigma, gamma, log, d.views, d.n_clicks, trace
