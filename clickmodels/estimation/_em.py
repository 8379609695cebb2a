"""The EM driver shared by PBM, UBM, DBN and CCM, and the E-step shared by PBM and UBM."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

import numpy as np

from clickmodels.estimation.base import EMOptions, FitTrace, bernoulli_log_likelihood

__all__ = ["run_em", "examination_posteriors"]

S = TypeVar("S")


def run_em(
    n_sessions: int, options: EMOptions, state: S, step: Callable[[S], tuple[S, float]]
) -> tuple[S, FitTrace]:
    """Iterate ``state, ll = step(state)`` until convergence or ``options.max_iter``.

    ``step`` runs one E-step at the current parameters (returning their training
    log-likelihood ``ll``) and the M-step (returning the new parameters). The trace holds
    ``ll`` of every iteration; EM stops after iteration ``t`` when
    :math:`|LL_t - LL_{t-1}| \\le tol\\,|LL_{t-1}|`.
    """
    lls: list[float] = []
    converged = False
    for it in range(1, options.max_iter + 1):
        state, ll = step(state)
        lls.append(ll)
        change = abs(lls[-1] - lls[-2]) / abs(lls[-2]) if len(lls) >= 2 and lls[-2] != 0 else None
        if options.on_iteration is not None:
            options.on_iteration(it, options.max_iter, ll, change)
        if len(lls) >= 2 and abs(lls[-1] - lls[-2]) <= options.tol * abs(lls[-2]):
            converged = True
            break
    trace = FitTrace(
        "em", len(lls), tuple(lls), converged, n_sessions,
        pseudo=options.pseudo, tol=options.tol, max_iter=options.max_iter,
    )
    return state, trace


def examination_posteriors(
    a: np.ndarray, g: np.ndarray, clicks: np.ndarray, shown: np.ndarray, weight: np.ndarray
) -> tuple[np.ndarray, np.ndarray, float]:
    """E-step of the examination hypothesis :math:`P(C = 1) = \\gamma\\alpha` (PBM; UBM with
    :math:`\\gamma_{r, r'}`, whose previous click :math:`r'` is observed) [CMR15, Sec. 4.3].

    A click implies :math:`A = E = 1`; a skipped slot has

    .. math::
        P(A = 1 \\mid C = 0) = \\frac{\\alpha(1-\\gamma)}{1-\\alpha\\gamma},\\qquad
        P(E = 1 \\mid C = 0) = \\frac{\\gamma(1-\\alpha)}{1-\\alpha\\gamma}.

    Returns ``(post_a, post_e, ll)``: the ``(n, k)`` posteriors and the training
    log-likelihood at ``(a, g)`` weighted by the session multiplicities ``weight``.
    """
    p = a * g
    ll = float(bernoulli_log_likelihood(p, clicks, shown) @ weight)
    with np.errstate(invalid="ignore", divide="ignore"):
        skip = np.where(p < 1.0, 1.0 / np.where(p < 1.0, 1.0 - p, 1.0), 0.0)
    post_a = np.where(clicks, 1.0, a * (1.0 - g) * skip)
    post_e = np.where(clicks, 1.0, g * (1.0 - a) * skip)
    return post_a, post_e, ll
