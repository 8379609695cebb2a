"""Cascade model (CM): the user scans down until the first click and stops there.

Closed-form MLE [CMR15, Sec. 4.2, after Craswell et al. 2008]: only the slots down to
the first click are known to be examined, so

.. math::
    \\alpha_{qd} = \\frac{\\sum_{s} \\mathbb{1}[(q,d) \\text{ is the first click of } s]}
                       {|\\{s, r : (q,d) \\text{ at rank } r \\le f_s\\}|}

with :math:`f_s` the first clicked rank (the whole list when there is no click). Clicks
below the first one are impossible under CM; their conditional probability is 0 and the
log-likelihood charges them ``log(PROB_EPS)``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from clickmodels.estimation._cascade import CascadeFamilyFit, attraction_through
from clickmodels.estimation.base import (
    PairTable,
    interim_trace,
    register_fit,
    with_closed_form_trace,
)
from clickmodels.logs import ClickLog

__all__ = ["CascadeFit", "fit_cm"]


@register_fit
@dataclass(frozen=True, eq=False)
class CascadeFit(CascadeFamilyFit):
    """Fitted cascade model: continuation 1 after a skip, 0 after a click."""

    name: ClassVar[str] = "cm"

    def _continuation(self, log: ClickLog, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        return np.ones(1), np.zeros(1)


def fit_cm(log: ClickLog, *, pseudo: float = 1.0) -> CascadeFit:
    """Fit CM in closed form (``pseudo`` Beta pseudo-count, default 1)."""
    value, views = attraction_through(log, log.first_click, pseudo)
    table = PairTable.from_codes(log, value, views)
    return with_closed_form_trace(CascadeFit(attractiveness=table, trace=interim_trace(log)), log, pseudo)
