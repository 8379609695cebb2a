"""Simplified DBN (SDBN): DBN with :math:`\\gamma = 1`; the user stops only when satisfied.

Fitted by EM by default (the exact MLE: the DBN EM of :mod:`clickmodels.estimation.dbn` with
:math:`\\gamma` fixed at 1). ``method="closed_form"`` gives the closed-form estimates [CMR15,
Sec. 4.2, after Chapelle & Zhang 2009], an approximation, not the maximum-likelihood estimate: with
:math:`\\gamma=1`
every slot down to the last click :math:`l_s` is examined and the last click is the
satisfying one, so

.. math::
    \\alpha_{qd} = \\frac{\\sum_{s,r \\le l_s} c^{(s)}_r \\mathbb{1}[(q,d)\\text{ at } r]}
                       {|\\{s, r \\le l_s : (q,d)\\text{ at } r\\}|},\\qquad
    \\sigma_{qd} = \\frac{|\\{s : (q,d) \\text{ is the last click of } s\\}|}
                       {|\\{s, r : c^{(s)}_r = 1, (q,d)\\text{ at } r\\}|}

(sessions without clicks examine every slot). This treats the last click as the
satisfying one; under the model an unsatisfied user may also go on past the last click
without clicking again, so these closed forms are an approximation [CMR15, Sec. 4.2], biased
upwards in satisfaction by many standard errors on logs simulated from SDBN itself
(``tests/test_clicks_review2.py``, ``tests/test_clickmodels_em_default.py``). They are kept,
on request, for comparability with PyClick's SDBN and the literature; the saved
``fit.estimator`` and the CLI say which was used.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import ClassVar

import numpy as np

from clickmodels.estimation._cascade import LAST_CLICK_ESTIMATOR, CascadeFamilyFit, attraction_through
from clickmodels.estimation._counts import pair_sum, ranks_grid
from clickmodels.estimation.base import (
    EMOptions,
    PairTable,
    interim_trace,
    register_fit,
    smoothed,
    with_closed_form_trace,
)
from clickmodels.estimation.dbn import dbn_em
from clickmodels.logs import ClickLog
from onlineeval.errors import ConfigError, must_be_one_of

__all__ = ["SDBNFit", "fit_sdbn"]


@register_fit
@dataclass(frozen=True, eq=False)
class SDBNFit(CascadeFamilyFit):
    """Fitted SDBN: attractiveness and satisfaction per (query, document)."""

    name: ClassVar[str] = "sdbn"
    closed_form_estimator: ClassVar[str] = LAST_CLICK_ESTIMATOR.format(ref="Chapelle & Zhang 2009")
    closed_form_is_mle: ClassVar[bool] = False
    pair_fields: ClassVar[tuple[str, ...]] = ("attractiveness", "satisfaction")

    satisfaction: PairTable

    def _continuation(self, log: ClickLog, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(1), 1.0 - self.satisfaction.for_log(log)


def fit_sdbn(
    log: ClickLog, *, pseudo: float | None = None, method: str = "em", options: EMOptions | None = None
) -> SDBNFit:
    """Fit SDBN by EM (default, the exact MLE) or by the last-click closed form (``method="closed_form"``,
    an approximation biased on data from SDBN itself; see the module docstring).

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
        alpha_e, sigma_e, _, tlog, views_e, clicks_e, trace = dbn_em(log, options or EMOptions(), 1.0)
        return SDBNFit(
            attractiveness=PairTable.from_codes(tlog, alpha_e, views_e),
            satisfaction=PairTable.from_codes(tlog, sigma_e, clicks_e),
            trace=trace,
        )
    if method != "closed_form":
        raise ConfigError(("method",), must_be_one_of(("closed_form", "em"), method))
    pseudo = 1.0 if pseudo is None else pseudo
    last = log.last_click
    attr, views = attraction_through(log, last, pseudo)
    n_clicks = pair_sum(log, log.clicks)
    sat = smoothed(pair_sum(log, ranks_grid(log) == last[:, None]), n_clicks, pseudo)
    fit = SDBNFit(
        attractiveness=PairTable.from_codes(log, attr, views),
        satisfaction=PairTable.from_codes(log, sat, n_clicks),
        trace=interim_trace(log),
    )
    return with_closed_form_trace(fit, log, pseudo)
