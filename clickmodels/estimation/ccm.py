"""Click chain model (CCM, Guo et al. 2009).

At an examined slot the user clicks with probability :math:`\\alpha_{qd}`; after no click
they go on with probability :math:`\\tau_1`; after a click they are satisfied with
probability :math:`\\alpha_{qd}` (the same parameter) and go on with probability
:math:`\\tau_3` if satisfied, :math:`\\tau_2` if not [CMR15, Sec. 3.6], so
:math:`c^0 = \\tau_1`, :math:`c^1 = \\tau_2(1-\\alpha_{qd}) + \\tau_3\\alpha_{qd}`.

EM [CMR15, Sec. 4.3]. The E-step uses the exact posteriors of the cascade family; for a
click at ``r`` above the last click :math:`l` (the user went on)

.. math:: P(S_r = 1 \\mid C) = \\frac{\\alpha\\tau_3}{\\alpha\\tau_3 + (1-\\alpha)\\tau_2},

and at the last click :math:`P(S_l = 1, \\text{on} \\mid C) \\propto \\alpha\\tau_3 Q_{l+1}`,
:math:`P(S_l = 1, \\text{stop} \\mid C) \\propto \\alpha(1-\\tau_3)` (likewise for
:math:`S_l = 0` with :math:`1-\\alpha`, :math:`\\tau_2`). Because attraction and
satisfaction share :math:`\\alpha_{qd}`, its M-step pools both:

.. math::
    \\alpha_{qd} = \\frac{\\sum P(A = 1 \\mid C) + \\sum_{\\text{clicks}} P(S = 1 \\mid C)}
                       {N^{\\text{impressions}}_{qd} + N^{\\text{clicks}}_{qd}};

each :math:`\\tau` is the expected number of continuations over the expected number of
opportunities (transitions into a shown slot only).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from clickmodels.estimation._cascade import (
    CascadeFamilyFit,
    CompiledSums,
    cascade_posterior,
    compiled_em_sums,
    chain_em_data,
    prepare_slots,
)
from clickmodels.estimation._counts import pair_sum
from clickmodels.estimation._em import run_em
from clickmodels.estimation.base import (
    EMOptions,
    PairTable,
    ordered_dot,
    register_fit,
    slot_values,
    smoothed,
)
from clickmodels.logs import ClickLog

__all__ = ["CCMFit", "fit_ccm"]


@register_fit
@dataclass(frozen=True, eq=False)
class CCMFit(CascadeFamilyFit):
    """Fitted CCM: attractiveness (= satisfaction) per pair and continuations ``tau1, tau2, tau3``."""

    name: ClassVar[str] = "ccm"
    float_fields: ClassVar[tuple[str, ...]] = ("tau1", "tau2", "tau3")

    tau1: float
    tau2: float
    tau3: float

    def _continuation(self, log: ClickLog, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        t1, t2, t3 = self.tau1, self.tau2, self.tau3
        return np.full(1, t1), t2 * (1.0 - alpha) + t3 * alpha


def fit_ccm(log: ClickLog, options: EMOptions | None = None) -> CCMFit:
    """Fit CCM by EM (see the module docstring); ``options`` default :class:`EMOptions()`."""
    opt = options or EMOptions()
    d = chain_em_data(log)
    log, w, last = d.log, d.w, d.last
    clicks, shown = log.clicks, log.shown
    before, at_last, views, n_clicks = d.before, d.at_last, d.views, d.n_clicks
    skip_next = d.has_next & ~clicks
    click_next = d.has_next & clicks

    def step(state: tuple[np.ndarray, np.ndarray]) -> tuple[tuple[np.ndarray, np.ndarray], float]:
        alpha, tau = state
        t1, t2, t3 = tau
        a = slot_values(alpha, log)
        a, c0, c1 = prepare_slots(a, np.full(1, t1), t2 * (1.0 - a) + t3 * a, shown)
        post = cascade_posterior(a, c0, c1, clicks, last)
        exam = post.exam
        q = post.after_last[:, None]
        norm = post.stop_norm[:, None]
        with np.errstate(invalid="ignore", divide="ignore"):
            mid_s1 = np.where(c1 > 0, a * t3 / np.where(c1 > 0, c1, 1.0), a)
        s1_on = a * t3 * q / norm
        s0_on = (1.0 - a) * t2 * q / norm
        s1_last = a * (t3 * q + 1.0 - t3) / norm
        p_s1 = np.where(before & clicks, mid_s1, np.where(at_last, s1_last, 0.0))
        on_s1 = np.where(before & clicks, mid_s1, np.where(at_last, s1_on, 0.0))
        on_s0 = np.where(before & clicks, 1.0 - mid_s1, np.where(at_last, s0_on, 0.0))
        p_s0 = np.where(clicks, 1.0 - p_s1, 0.0)

        num_a = pair_sum(log, d.attraction(a, post) * w) + pair_sum(log, p_s1 * w, clicks)
        new_alpha = smoothed(num_a, views + n_clicks, opt.pseudo)
        exam_next = np.zeros_like(exam)
        exam_next[:, :-1] = exam[:, 1:]
        new_tau = np.array(
            [
                smoothed(np.where(skip_next, exam_next * w, 0.0).sum(), np.where(skip_next, exam * w, 0.0).sum(),
                         opt.pseudo),
                smoothed(np.where(click_next, on_s0 * w, 0.0).sum(), np.where(click_next, p_s0 * w, 0.0).sum(),
                         opt.pseudo),
                smoothed(np.where(click_next, on_s1 * w, 0.0).sum(), np.where(click_next, p_s1 * w, 0.0).sum(),
                         opt.pseudo),
            ]
        )
        return (new_alpha, new_tau), ordered_dot(post.log_lik, d.weight)

    if compiled_em_sums(d):  # the same E-step in one compiled pass (_cascade_compiled)
        sums = CompiledSums(d)

        def step(state: tuple[np.ndarray, np.ndarray]) -> tuple[tuple[np.ndarray, np.ndarray], float]:
            alpha, tau = state
            ll = sums.run(alpha, tau=(float(tau[0]), float(tau[1]), float(tau[2])))
            g, t = sums.gamma_sums, sums.tau_sums
            new_tau = np.array([smoothed(g[0], g[1], opt.pseudo), smoothed(t[0], t[1], opt.pseudo),
                                smoothed(t[2], t[3], opt.pseudo)])
            return (smoothed(sums.att + sums.sat, views + n_clicks, opt.pseudo), new_tau), ll

    init = (np.full(log.pairs.n_pairs, 0.5), np.array([0.5, 0.5, 0.5]))
    (alpha, tau), trace = run_em(d.n_sessions, opt, init, step)
    t1, t2, t3 = (float(x) for x in tau)
    table = PairTable.from_codes(log, alpha, views + n_clicks)
    return CCMFit(attractiveness=table, tau1=t1, tau2=t2, tau3=t3, trace=trace)
