"""Dependent click model (DCM): after a click at rank ``r`` the user goes on with probability
:math:`\\lambda_r`, after a skip always.

Closed-form estimates [CMR15, Sec. 4.2, after Guo et al. 2009], which take the last
click :math:`l_s` of a session as the point where the user stopped (the standard
simplification; all slots of a session without clicks count as examined):

.. math::
    \\alpha_{qd} = \\frac{\\sum_{s,r \\le l_s} c^{(s)}_r \\mathbb{1}[(q,d)\\text{ at } r]}
                       {|\\{s, r \\le l_s : (q,d)\\text{ at } r\\}|},\\qquad
    \\lambda_r = 1 - \\frac{|\\{s : l_s = r\\}|}{|\\{s : c^{(s)}_r = 1\\}|}
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from clickmodels.estimation._cascade import CascadeFamilyFit
from clickmodels.estimation._counts import pair_sum, rank_sum, ranks_grid
from clickmodels.estimation.base import (
    PairTable,
    placeholder_trace,
    register_fit,
    smoothed,
    with_closed_form_trace,
)
from clickmodels.logs import ClickLog

__all__ = ["DCMFit", "fit_dcm"]


@register_fit
@dataclass(frozen=True, eq=False)
class DCMFit(CascadeFamilyFit):
    """Fitted DCM: ``continuation[r]`` is :math:`\\lambda_r` (ranks beyond: last value)."""

    name: ClassVar[str] = "dcm"
    array_fields: ClassVar[tuple[str, ...]] = ("continuation",)

    continuation: np.ndarray

    def _continuation(self, log: ClickLog, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        idx = np.minimum(np.arange(log.depth), self.continuation.shape[0] - 1)
        return np.ones(1), self.continuation[idx][None, :]


def fit_dcm(log: ClickLog, *, pseudo: float = 1.0) -> DCMFit:
    """Fit DCM in closed form (``pseudo`` Beta pseudo-count, default 1)."""
    last = log.last_click
    limit = np.where(last >= 0, last, log.depth - 1)
    examined = ranks_grid(log) <= limit[:, None]
    views = pair_sum(log, 1.0, examined)
    value = smoothed(pair_sum(log, log.clicks, examined), views, pseudo)
    clicks_r = rank_sum(log, log.clicks)
    last_r = rank_sum(log, ranks_grid(log) == last[:, None])
    lam = smoothed(clicks_r - last_r, clicks_r, pseudo)
    table = PairTable.from_codes(log, value, views)
    fit = DCMFit(attractiveness=table, continuation=lam, trace=placeholder_trace(log))
    return with_closed_form_trace(fit, log)
