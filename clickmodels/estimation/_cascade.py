"""Kernels shared by the cascade family (CM, DCM, SDBN, DBN, CCM).

In all five models the user scans top-down; at an examined slot ``r`` the click happens
with probability :math:`\\alpha_r` and the user goes on to slot ``r+1`` with probability
:math:`c^0_r` after no click and :math:`c^1_r` after a click [CMR15, ch. 3]:

======  ===============  ==================================================
model   :math:`c^0_r`    :math:`c^1_r`
======  ===============  ==================================================
CM      1                0
DCM     1                :math:`\\lambda_r`
SDBN    1                :math:`1 - \\sigma_{qd}`
DBN     :math:`\\gamma`   :math:`\\gamma(1 - \\sigma_{qd})`
CCM     :math:`\\tau_1`   :math:`\\tau_2 (1 - \\alpha_{qd}) + \\tau_3 \\alpha_{qd}`
======  ===============  ==================================================

This is the Markov cascade chain of :mod:`clickmodels.kernels` (note the argument order
there: ``attract, cont_click, cont_skip`` = ``alpha, c1, c0``); a fitted record's exact
marginal and conditional click probabilities, and hence its log-likelihood, come from
:func:`~clickmodels.kernels.chain_examination` and
:func:`~clickmodels.kernels.chain_conditional`, the same kernels the simulator's models
use. Only what EM needs beyond them lives here: the exact posteriors given the observed
clicks (:func:`cascade_posterior`), looping over the ``k`` ranks and vectorised over
sessions. Empty slots must carry ``alpha = 0`` and ``c0 = c1 = 1``.
"""

from __future__ import annotations

from abc import abstractmethod
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np

from clickmodels import kernels
from clickmodels.estimation.base import ClickModelFit, PairTable
from clickmodels.logs import ClickLog

__all__ = [
    "CascadeFamilyFit",
    "CascadePosterior",
    "cascade_posterior",
    "prepare_slots",
]


def prepare_slots(
    alpha: np.ndarray, c0: np.ndarray, c1: np.ndarray, shown: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return new arrays with the empty-slot convention (alpha 0, continuation 1) applied."""
    return (
        np.where(shown, alpha, 0.0),
        np.where(shown, np.broadcast_to(c0, shown.shape), 1.0),
        np.where(shown, np.broadcast_to(c1, shown.shape), 1.0),
    )


class CascadePosterior(NamedTuple):
    """Posterior quantities of one E-step.

    Attributes
    ----------
    last:
        ``(n,)`` 0-based rank of the last click, ``-1`` without clicks.
    tail:
        ``(n, k+1)`` :math:`Q_r = P(\\text{no click at } r..k \\mid E_r = 1)`, ``Q_{k+1}=1``.
    after_last:
        ``(n,)`` :math:`Q_{l+1}` (1 without clicks... and at the bottom).
    stop_norm:
        ``(n,)`` :math:`(1-c^1_l) + c^1_l Q_{l+1}` (1 without clicks).
    exam:
        ``(n, k)`` :math:`P(E_r = 1 \\mid C)`.
    log_lik:
        ``(n,)`` :math:`\\log P(C)`.
    """

    last: np.ndarray
    tail: np.ndarray
    after_last: np.ndarray
    stop_norm: np.ndarray
    exam: np.ndarray
    log_lik: np.ndarray


def cascade_posterior(
    alpha: np.ndarray, c0: np.ndarray, c1: np.ndarray, clicks: np.ndarray, last: np.ndarray
) -> CascadePosterior:
    """Exact posteriors given observed clicks (all slots down to the last click are examined).

    .. math::
        Q_r = (1-\\alpha_r)\\,[(1-c^0_r) + c^0_r Q_{r+1}],\\qquad
        P(C) = \\prod_{r<l} \\alpha_r^{c_r}(1-\\alpha_r)^{1-c_r} c^{c_r}_r
               \\cdot \\alpha_l\\,[(1-c^1_l) + c^1_l Q_{l+1}]

    (:math:`P(C) = Q_1` without clicks). Below ``l`` the examination posterior follows
    :math:`P(E_{l+1} \\mid C) = c^1_l Q_{l+1} / [(1-c^1_l) + c^1_l Q_{l+1}]` and
    :math:`P(E_{r+1} \\mid C) = P(E_r \\mid C)\\, c^0_r Q_{r+1} / [(1-c^0_r) + c^0_r Q_{r+1}]`.
    """
    n, k = alpha.shape
    rows = np.arange(n)
    tail = np.ones((n, k + 1))
    for r in range(k - 1, -1, -1):
        tail[:, r] = (1.0 - alpha[:, r]) * ((1.0 - c0[:, r]) + c0[:, r] * tail[:, r + 1])
    has = last >= 0
    li = np.maximum(last, 0)
    q_after = np.where(has, tail[rows, li + 1], 1.0)
    c1_last = c1[rows, li]
    stop_norm = np.where(has, (1.0 - c1_last) + c1_last * q_after, 1.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        w = np.where(has, c1_last * q_after / stop_norm, 1.0)

    ranks = np.arange(k)[None, :]
    above = ranks <= last[:, None]
    log_terms = np.where(
        clicks, np.log(np.maximum(alpha, 1e-300)) + np.log(np.maximum(c1, 1e-300)),
        np.log(np.maximum(1.0 - alpha, 1e-300)) + np.log(np.maximum(c0, 1e-300)),
    )
    before = ranks < last[:, None]
    log_lik = np.where(before, log_terms, 0.0).sum(axis=1)
    log_lik += np.where(has, np.log(np.maximum(alpha[rows, li], 1e-300)) + np.log(np.maximum(stop_norm, 1e-300)),
                        np.log(np.maximum(tail[:, 0], 1e-300)))

    exam = np.where(above, 1.0, 0.0)
    e = w.copy()
    for r in range(k):
        start = r == last + 1
        e = np.where(start, w, e)
        below = r > last
        exam[:, r] = np.where(below, e, exam[:, r])
        nxt = tail[:, r + 1]
        num = c0[:, r] * nxt
        den = (1.0 - c0[:, r]) + num
        with np.errstate(invalid="ignore", divide="ignore"):
            step = np.where(den > 0, num / np.where(den > 0, den, 1.0), 0.0)
        e = np.where(below, e * step, e)
    return CascadePosterior(last, tail, q_after, stop_norm, exam, log_lik)


@dataclass(frozen=True, eq=False)
class CascadeFamilyFit(ClickModelFit):
    """A fitted cascade-family model; subclasses supply the continuation hook."""

    pair_fields: ClassVar[tuple[str, ...]] = ("attractiveness",)

    attractiveness: PairTable

    @abstractmethod
    def _continuation(self, log: ClickLog, alpha: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(c0, c1)`` per slot, each broadcastable to ``(n, k)``."""

    def slot_arrays(self, log: ClickLog) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(alpha, c0, c1)`` as ``(n, k)`` arrays with the empty-slot convention."""
        alpha = self.attractiveness.for_log(log)
        c0, c1 = self._continuation(log, alpha)
        return prepare_slots(alpha, c0, c1, log.shown)

    def _click_probs(self, log: ClickLog) -> np.ndarray:
        alpha, c0, c1 = self.slot_arrays(log)
        return kernels.chain_examination(alpha, c1, c0, alpha.shape) * alpha

    def _conditional_click_probs(self, log: ClickLog) -> np.ndarray:
        alpha, c0, c1 = self.slot_arrays(log)
        return kernels.chain_conditional(alpha, c1, c0, log.clicks)
