"""The EM driver shared by PBM, UBM, DBN and CCM."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from clickmodels.estimation.base import EMOptions, FitTrace

__all__ = ["run_em"]

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
    for _ in range(options.max_iter):
        state, ll = step(state)
        lls.append(ll)
        if len(lls) >= 2 and abs(lls[-1] - lls[-2]) <= options.tol * abs(lls[-2]):
            converged = True
            break
    return state, FitTrace("em", len(lls), tuple(lls), converged, n_sessions)
