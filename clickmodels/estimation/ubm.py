"""User browsing model (UBM): examination depends on the rank and on the previous click.

.. math:: P(C_r = 1 \\mid C_{<r}) = \\gamma_{r, r'}\\,\\alpha_{qd}

with :math:`r'` the rank of the closest click above ``r`` (none: column 0). EM
[CMR15, Sec. 4.3, after Dupret & Piwowarski 2008] uses the posteriors of PBM with
:math:`\\gamma_r` replaced by :math:`\\gamma_{r, r'}`; :math:`r'` is observed, so the
E-step is closed form. The fitted record's conditional and marginal click probabilities
(the latter exact, by a forward recursion over the distribution of the last click above
``r``) come from the UBM kernels of :mod:`clickmodels.kernels`, as for the simulator's
:class:`clickmodels.UBM`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import ClassVar

import numpy as np

from clickmodels import kernels
from clickmodels.depth import too_deep
from clickmodels.estimation._counts import compress, pair_sum
from clickmodels.estimation._em import examination_posteriors, run_em
from clickmodels.estimation.base import (
    ClickModelFit,
    EMOptions,
    PairTable,
    register_fit,
    scale_note,
    slot_values,
    smoothed,
)
from clickmodels.logs import ClickLog
from onlineeval.errors import InputError

__all__ = ["UBMFit", "fit_ubm"]


@register_fit
@dataclass(frozen=True, eq=False)
class UBMFit(ClickModelFit):
    """Fitted UBM: ``examination[r, p + 1]`` for rank index ``r`` and previous click ``p`` (-1: none).

    Entries ``examination[r, j]`` with ``j > r`` cannot occur and are 0.
    """

    name: ClassVar[str] = "ubm"
    pair_fields: ClassVar[tuple[str, ...]] = ("attractiveness",)
    array_fields: ClassVar[tuple[str, ...]] = ("examination",)
    scale_free: ClassVar[tuple[str, ...]] = ("examination",)

    array_ndim: ClassVar[Mapping[str, int]] = {"examination": 2}

    attractiveness: PairTable
    examination: np.ndarray

    def _check(self) -> None:
        g = self.examination
        if g.shape[0] != g.shape[1]:
            raise InputError(f"params.examination: expected a square (k, k) array, got shape {g.shape}")
        if np.any(np.triu(g, 1) != 0):
            raise InputError("params.examination: entries [r][j] with j > r cannot occur and must be 0")

    def _gamma_for(self, log: ClickLog) -> np.ndarray:
        k = log.depth
        have = self.examination.shape
        if len(have) != 2 or have[0] != have[1] or have[0] < k:
            raise InputError(too_deep("ubm examination", have[0], k, fitted=True))
        return self.examination[:k, :k]

    def _conditional_click_probs(self, log: ClickLog) -> np.ndarray:
        return kernels.ubm_conditional(self.attractiveness.for_log(log), self._gamma_for(log), log.clicks)

    def notes(self) -> dict[str, str]:
        return {"ubm_scale": scale_note("examination[r][p] x attractiveness",
                                        "examination[r][p] / examination[0][0]",
                                        float(np.asarray(self.examination)[0, 0]))}

    def _click_probs(self, log: ClickLog) -> np.ndarray:
        """Exact marginals by :func:`clickmodels.kernels.ubm_probabilities` (a forward
        recursion over the distribution of the last click above each rank)."""
        return kernels.ubm_probabilities(self.attractiveness.for_log(log), self._gamma_for(log))[1]


def fit_ubm(log: ClickLog, options: EMOptions | None = None) -> UBMFit:
    """Fit UBM by EM (see the module docstring); ``options`` default :class:`EMOptions()`."""
    opt = options or EMOptions()
    n_sessions = log.n_sessions
    log, weight = compress(log)
    w = np.broadcast_to(weight[:, None], log.docs.shape)
    clicks, shown = log.clicks, log.shown
    k = log.depth
    views = pair_sum(log, w)
    cell = np.arange(k)[None, :] * k + (log.previous_click + 1)
    cell_sel = shown
    cell_views = np.bincount(cell[cell_sel], weights=w[cell_sel], minlength=k * k)

    def step(state: tuple[np.ndarray, np.ndarray]) -> tuple[tuple[np.ndarray, np.ndarray], float]:
        alpha, gamma = state
        a = slot_values(alpha, log)
        g = gamma.reshape(-1)[cell]
        post_a, post_e, ll = examination_posteriors(a, g, clicks, shown, weight)
        new_alpha = smoothed(pair_sum(log, post_a * w), views, opt.pseudo)
        num = np.bincount(cell[cell_sel], weights=(post_e * w)[cell_sel], minlength=k * k)
        new_gamma = np.tril(smoothed(num, cell_views, opt.pseudo).reshape(k, k))  # unused j > r: 0
        return (new_alpha, new_gamma), ll

    init = (np.full(log.pairs.n_pairs, 0.5), np.tril(np.full((k, k), 0.5)))
    (alpha, gamma), trace = run_em(n_sessions, opt, init, step)
    return UBMFit(attractiveness=PairTable.from_codes(log, alpha, views), examination=gamma, trace=trace)
