"""The EM driver shared by PBM, UBM, DBN and CCM, and the E-step shared by PBM and UBM."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from clickmodels.estimation.base import EMOptions, FitTrace, bernoulli_log_likelihood, ordered_dot

__all__ = ["run_em", "examination_posteriors"]

S = TypeVar("S")


def run_em(
    n_sessions: int, options: EMOptions, state: S, step: Callable[[S], tuple[S, float]]
) -> tuple[S, FitTrace]:
    """Iterate ``state, ll = step(state)`` until convergence or ``options.max_iter`` E-steps.

    ``step`` runs one E-step at the current parameters (returning their training
    log-likelihood ``ll``) and the M-step (returning the new parameters): the EM map
    :math:`F`. ``state`` is a tuple of arrays of probabilities (each M-step's
    :func:`~clickmodels.estimation.base.smoothed` estimates).

    Plain EM (``options.accelerate`` False) runs :math:`\\theta_{t+1} = F(\\theta_t)` and stops
    after iteration ``t`` when :math:`|LL_t - LL_{t-1}| \\le tol\\,|LL_{t-1}|`; the trace
    holds ``ll`` of every iteration. EM converges linearly, as slowly as the fraction of
    information the hidden variables miss: where the likelihood is flat (a model that
    fits the log poorly, e.g. DCM on position-based clicks) a step changes the
    log-likelihood by less than ``tol`` while the parameters are still far from the
    maximum (DCM's continuation 0.07 apart from two starts at tol 1e-7 on 2 x 10^5
    sessions of ``benchmarks/bench_dm.py``'s log).

    Accelerated EM (``options.accelerate``, the default) is SQUAREM (Varadhan and Roland,
    *Simple and globally convergent methods for accelerating the convergence of any EM
    algorithm*, Scand. J. Statist. 35, 2008; step length S3): from :math:`\\theta_0`,
    :math:`\\theta_1 = F(\\theta_0)`, :math:`\\theta_2 = F(\\theta_1)`,
    :math:`r = \\theta_1 - \\theta_0`, :math:`v = \\theta_2 - \\theta_1 - r`,
    :math:`s = \\min(-\\lVert r\\rVert / \\lVert v\\rVert, -1)` and the extrapolated
    :math:`\\theta' = \\theta_0 - 2 s r + s^2 v` (clipped into [0, 1]; :math:`s = -1` gives
    :math:`\\theta_2`); the cycle's next start is :math:`F(\\theta')` when the objective at
    :math:`\\theta'` is at least that at :math:`\\theta_1` (``ll`` plus the pseudo-counts'
    Beta log-density :math:`a \\sum (\\log p + \\log(1 - p))` that the M-step maximises
    with it; plain ``ll`` when ``pseudo`` is 0), else :math:`\\theta_2` (the EM path), so the
    objective never decreases from one cycle's start to the next. Its fixed points are EM's; each cycle costs three
    E-steps. The stopping rule compares the log-likelihoods at consecutive cycles' starts
    (the trace holds them; ``iterations`` counts E-steps, bounded by ``max_iter``): an
    accelerated cycle's change is small only near the maximum. On the log above it stops
    after 28 E-steps with the two starts 2e-5 apart (plain EM: 45 E-steps, 0.07; plain EM
    to tol 1e-12, 178 E-steps: the same maximum to 6e-6).
    """
    if not options.accelerate:
        return _plain(n_sessions, options, state, step)
    lls: list[float] = []
    converged = False
    e_steps = reported = 0
    theta = state
    while True:
        start = theta
        theta, ll = step(start)  # F(theta_0), and the log-likelihood at the cycle's start
        e_steps += 1
        lls.append(ll)
        reported = e_steps
        if _stop(lls, e_steps, options):
            converged = _converged(lls, options)
            break
        first = theta
        theta, ll_1 = step(first)  # F(theta_1)
        e_steps += 1
        if e_steps >= options.max_iter:
            break
        x0, x1, x2 = _flat(start), _flat(first), _flat(theta)
        r = x1 - x0
        v = x2 - x1 - r
        norm_v = float(np.sqrt(ordered_dot(v, v)))  # not BLAS: see ordered_dot
        if not norm_v > 0.0:  # a fixed point (or no step at all): the EM path
            continue
        s = min(-float(np.sqrt(ordered_dot(r, r))) / norm_v, -1.0)  # the S3 step length
        inside = (x1 > 0.0) & (x1 < 1.0)
        raw = x0 - 2.0 * s * r + s * s * v
        if options.pseudo > 0:
            # the Beta log-density is -inf on 0 and 1: a parameter the M-step left inside (0, 1) must stay inside,
            # the step length halved towards -1 (theta_2, inside) until it does
            for _ in range(30):
                if s == -1.0 or np.all((raw[inside] > 0.0) & (raw[inside] < 1.0)):
                    break
                s = (s - 1.0) / 2.0 if s < -1.0 - 1e-3 else -1.0
                raw = x0 - 2.0 * s * r + s * s * v
        jump = _unflat(np.clip(raw, 0.0, 1.0), start)
        after, ll_jump = step(jump)
        e_steps += 1
        # the penalty over the parameters the M-step left inside (0, 1): a jump still on 0 or 1 there has
        # objective -inf (leaving its log-density out would accept a worse point)
        if _objective(jump, ll_jump, options.pseudo, inside) >= _objective(first, ll_1, options.pseudo, inside):
            theta = after
        if e_steps >= options.max_iter:
            break
    if options.on_iteration is not None and reported != e_steps:
        # out of E-steps within a cycle: the progress display hears of the last one (with the last log-likelihood
        # recorded: the cycle's others are not recorded)
        options.on_iteration(e_steps, options.max_iter, lls[-1], _change(lls))
    trace = FitTrace(
        "em", e_steps, tuple(lls), converged, n_sessions,
        pseudo=options.pseudo, tol=options.tol, max_iter=options.max_iter, accelerated=True,
    )
    return theta, trace


def _converged(lls: list[float], options: EMOptions) -> bool:
    return len(lls) >= 2 and abs(lls[-1] - lls[-2]) <= options.tol * abs(lls[-2])


def _change(lls: list[float]) -> float | None:
    """The last relative log-likelihood change (``None`` before two entries or after a 0)."""
    return abs(lls[-1] - lls[-2]) / abs(lls[-2]) if len(lls) >= 2 and lls[-2] != 0 else None


def _stop(lls: list[float], e_steps: int, options: EMOptions) -> bool:
    """Report the iteration to ``options.on_iteration``; whether EM stops here (converged or out of E-steps)."""
    if options.on_iteration is not None:
        options.on_iteration(e_steps, options.max_iter, lls[-1], _change(lls))
    return _converged(lls, options) or e_steps >= options.max_iter


def _plain(n_sessions: int, options: EMOptions, state: S, step: Callable[[S], tuple[S, float]]) -> tuple[S, FitTrace]:
    lls: list[float] = []
    converged = False
    for it in range(1, options.max_iter + 1):
        state, ll = step(state)
        lls.append(ll)
        if _stop(lls, it, options):
            converged = _converged(lls, options)
            break
    trace = FitTrace(
        "em", len(lls), tuple(lls), converged, n_sessions,
        pseudo=options.pseudo, tol=options.tol, max_iter=options.max_iter, accelerated=False,
    )
    return state, trace


def _flat(state: Any) -> np.ndarray:
    return np.concatenate([np.ravel(np.asarray(x, dtype=np.float64)) for x in state])


def _unflat(x: np.ndarray, like: Any) -> Any:
    out, at = [], 0
    for part in like:
        shape = np.shape(part)
        size = int(np.prod(shape))
        out.append(x[at:at + size].reshape(shape))
        at += size
    return tuple(out)


def _objective(state: Any, ll: float, pseudo: float, inside: np.ndarray | None = None) -> float:
    """What EM's M-step with ``pseudo`` pseudo-counts increases: ``ll`` plus ``pseudo`` times the sum of
    :math:`\\log p + \\log(1 - p)` over the parameters ``inside`` (a mask of the flattened state; default: those
    strictly inside (0, 1) -- those at 0 or 1 are fixed cells: UBM's unused gammas, SDBN's gamma); a parameter of
    the mask at 0 or 1 gives -inf; NaN compares as not larger."""
    if pseudo == 0:
        return ll
    x = _flat(state)
    p = x[(x > 0.0) & (x < 1.0)] if inside is None else x[inside]
    with np.errstate(divide="ignore"):
        total = float(np.sum(np.log(p) + np.log1p(-p)))
    return ll + pseudo * total


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
    ll = ordered_dot(bernoulli_log_likelihood(p, clicks, shown), weight)
    with np.errstate(invalid="ignore", divide="ignore"):
        skip = np.where(p < 1.0, 1.0 / np.where(p < 1.0, 1.0 - p, 1.0), 0.0)
    post_a = np.where(clicks, 1.0, a * (1.0 - g) * skip)
    post_e = np.where(clicks, 1.0, g * (1.0 - a) * skip)
    return post_a, post_e, ll
