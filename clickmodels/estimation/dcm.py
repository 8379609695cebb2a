"""Dependent click model (DCM): after a click at rank ``r`` the user goes on with probability
:math:`\\lambda_r`, after a skip always.

Closed-form estimates [CMR15, Sec. 4.2, after Guo et al. 2009], which take the last
click :math:`l_s` of a session as the point where the user stopped (the standard
simplification; all slots of a session without clicks count as examined):

.. math::
    \\alpha_{qd} = \\frac{\\sum_{s,r \\le l_s} c^{(s)}_r \\mathbb{1}[(q,d)\\text{ at } r]}
                       {|\\{s, r \\le l_s : (q,d)\\text{ at } r\\}|},\\qquad
    \\lambda_r = 1 - \\frac{|\\{s : l_s = r\\}|}{|\\{s : c^{(s)}_r = 1\\}|}

Under the model a user who goes on after the last click may simply find nothing else to
click, so these are approximations, not the maximum-likelihood estimate, and biased on logs
simulated from DCM itself: lambda too low (every last click counts as a stop; the deepest
rank's lambda comes out near 0) and attractiveness too high (the skipped slots below the last
click, examined when the user went on, are left out), each by many standard errors at usual
log sizes (``tests/test_clickmodels_em_default.py``). They are available with
``method="closed_form"`` for comparability with PyClick and the literature. The default,
``method="em"``, gives the exact MLE by EM with the
cascade-family posteriors: attraction as in DBN, and for a click at ``r`` with a shown
slot below, the expected continuation is 1 above the last click and
:math:`\\lambda_l Q_{l+1} / [(1-\\lambda_l) + \\lambda_l Q_{l+1}]` at it;
:math:`\\lambda_r` is their mean over clicks at rank ``r``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from clickmodels.estimation._cascade import (
    LAST_CLICK_ESTIMATOR,
    CascadeFamilyFit,
    CompiledSums,
    attraction_through,
    cascade_posterior,
    chain_em_data,
    compiled_em_sums,
    prepare_slots,
)
from clickmodels.estimation._counts import pair_sum, rank_sum, ranks_grid
from clickmodels.estimation._em import run_em
from clickmodels.estimation.base import (
    EMOptions,
    PairTable,
    by_rank,
    interim_trace,
    ordered_dot,
    register_fit,
    slot_values,
    smoothed,
    with_closed_form_trace,
)
from clickmodels.logs import ClickLog
from onlineeval.errors import ConfigError, must_be_one_of

__all__ = ["DCMFit", "fit_dcm"]


@register_fit
@dataclass(frozen=True, eq=False)
class DCMFit(CascadeFamilyFit):
    """Fitted DCM: ``continuation[r]`` is :math:`\\lambda_r` (a log with more ranks is refused)."""

    name: ClassVar[str] = "dcm"
    closed_form_estimator: ClassVar[str] = LAST_CLICK_ESTIMATOR.format(ref="Guo et al. 2009, CMR15 Sec. 4.2")
    closed_form_is_mle: ClassVar[bool] = False
    array_fields: ClassVar[tuple[str, ...]] = ("continuation",)

    continuation: np.ndarray

    def _continuation(self, log: ClickLog, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(1), by_rank(self.continuation, log, "dcm continuation")[None, :]

    def notes(self) -> dict[str, str]:
        k = int(np.asarray(self.continuation).shape[0])
        last = {"em": "EM leaves it at its starting value 0.5",
                "closed_form": "the closed form gives the pseudo-count's a / (n + 2a), about 0"}.get(
            self.trace.method, "its value is arbitrary")
        return {"dcm_last_rank": f"continuation[{k - 1}] (after a click at rank {k}, the deepest rank of the "
                                 f"training lists) is not identified: no document is shown below it; {last}; "
                                 f"it has no effect on lists of up to {k} ranks (deeper lists are refused)"}


def fit_dcm(
    log: ClickLog, *, pseudo: float | None = None, method: str = "em", options: EMOptions | None = None
) -> DCMFit:
    """Fit DCM by EM (default, the exact MLE) or by the last-click closed form (``method="closed_form"``,
    an approximation biased on data from DCM itself; see the module docstring).

    Parameters
    ----------
    pseudo:
        Beta pseudo-count (default 1): of the closed form, or of EM's M-steps (then it replaces
        ``options.pseudo``).
    method:
        ``"em"`` (default) or ``"closed_form"``.
    options:
        EM options (default :class:`EMOptions()`).
    """
    if method == "em" and pseudo is not None:
        options = replace(options or EMOptions(), pseudo=pseudo)
    if method == "em":
        return _fit_dcm_em(log, options or EMOptions())
    if method != "closed_form":
        raise ConfigError(("method",), must_be_one_of(("closed_form", "em"), method))
    pseudo = 1.0 if pseudo is None else pseudo
    last = log.last_click
    value, views = attraction_through(log, last, pseudo)
    clicks_r = rank_sum(log, log.clicks)
    last_r = rank_sum(log, ranks_grid(log) == last[:, None])
    lam = smoothed(clicks_r - last_r, clicks_r, pseudo)
    table = PairTable.from_codes(log, value, views)
    fit = DCMFit(attractiveness=table, continuation=lam, trace=interim_trace(log))
    return with_closed_form_trace(fit, log, pseudo)


def _fit_dcm_em(log: ClickLog, opt: EMOptions) -> DCMFit:
    d = chain_em_data(log)
    log, w = d.log, d.w
    click_next = log.clicks & d.has_next
    click_den = rank_sum(log, click_next * w)

    def step(state: tuple[np.ndarray, np.ndarray]) -> tuple[tuple[np.ndarray, np.ndarray], float]:
        alpha, lam = state
        a, c0, c1 = prepare_slots(slot_values(alpha, log), np.ones(1), lam[None, :], log.shown)
        post = cascade_posterior(a, c0, c1, log.clicks, d.last)
        # sessions whose stopping chance is 0 have no last-click continuation to share out (their entries are not
        # read: d.at_last is False there); the division is skipped rather than made 0 / 0 (a RuntimeWarning)
        norm = post.stop_norm[:, None]
        share = c1 * post.after_last[:, None]
        on_last = np.divide(share, norm, out=np.zeros(share.shape), where=norm > 0)
        cont = np.where(d.before, 1.0, np.where(d.at_last, on_last, 0.0))
        new_alpha = smoothed(pair_sum(log, d.attraction(a, post) * w), d.views, opt.pseudo)
        new_lam = smoothed(rank_sum(log, cont * w, click_next), click_den, opt.pseudo)
        return (new_alpha, new_lam), ordered_dot(post.log_lik, d.weight)

    if compiled_em_sums(d):  # the same E-step in one compiled pass (_cascade_compiled)
        sums = CompiledSums(d)

        def step(state: tuple[np.ndarray, np.ndarray]) -> tuple[tuple[np.ndarray, np.ndarray], float]:
            alpha, lam = state
            ll = sums.run(alpha, lam=lam)
            return (smoothed(sums.att, d.views, opt.pseudo), smoothed(sums.cont, click_den, opt.pseudo)), ll

    init = (np.full(log.pairs.n_pairs, 0.5), np.full(log.depth, 0.5))
    (alpha, lam), trace = run_em(d.n_sessions, opt, init, step)
    return DCMFit(attractiveness=PairTable.from_codes(log, alpha, d.views), continuation=lam, trace=trace)
