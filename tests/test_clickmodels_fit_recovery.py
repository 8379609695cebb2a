"""Parameter recovery: fit 10^5 sessions simulated (with the samplers of
clickmodels.kernels) from known parameters; the error is within 4 standard errors and
shrinks from 10^4 to 10^5 sessions.

Standard errors: binomial for the closed-form cascade model; the observed Fisher
information (numerical Hessian of the independent kernel log-likelihood) for DBN, CCM,
and DCM / SDBN fitted with ``method="em"``.
PBM and UBM identify only the products :math:`\\alpha\\gamma` (scaling one up and the
other down gives the same clicks), so they are checked cell by cell on
:math:`P(C = 1 \\mid d, r[, r'])` against 4 binomial standard errors of that cell's own
CTR, a bound the pooled MLE (fewer parameters) cannot exceed in expectation.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from clickmodels import kernels
from clickmodels.estimation import fit_log
from clickmodels.logs import ClickLog, from_arrays

N_BIG, N_SMALL, K = 100_000, 10_000, 4
ALPHA = np.array([0.8, 0.6, 0.4, 0.25])
SIGMA = np.array([0.7, 0.5, 0.3, 0.6])
EXACT = {"pseudo": 0.0, "tol": 1e-11, "max_iter": 3000}


def _rankings(n: int, rng: np.random.Generator) -> np.ndarray:
    return np.argsort(rng.random((n, ALPHA.size)), axis=1)[:, :K]


def _log(docs: np.ndarray, clicks: np.ndarray) -> ClickLog:
    return from_arrays(np.zeros(len(docs), dtype=int), docs, clicks)


def _by_doc(table) -> np.ndarray:  # type: ignore[no-untyped-def]
    return table.value[np.argsort(table.doc.astype(int))]


def _chain_log(c1_doc: Callable[[np.ndarray], np.ndarray], c0: float, seed: int) -> ClickLog:
    rng = np.random.default_rng(seed)
    docs = _rankings(N_BIG, rng)
    clicks, _ = kernels.chain_sample(ALPHA[docs], c1_doc(docs), np.full(docs.shape, c0), rng, docs.shape)
    return _log(docs, clicks)


def _hessian(f: Callable[[np.ndarray], float], x: np.ndarray, h: float = 1e-4) -> np.ndarray:
    p = x.size
    H = np.empty((p, p))
    for i in range(p):
        for j in range(i, p):
            ei, ej = np.eye(p)[i] * h, np.eye(p)[j] * h
            H[i, j] = H[j, i] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej) + f(x - ei - ej)) / (4 * h * h)
    return H


def _chain_ll(log: ClickLog, alpha: np.ndarray, c1: np.ndarray, c0: float) -> float:
    p = kernels.chain_conditional(alpha[log.docs], c1, np.full(log.docs.shape, c0), log.clicks)
    return float(np.where(log.clicks, np.log(p), np.log1p(-p)).sum())


def _rmse(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.sqrt(np.mean((a - b) ** 2)))


def test_cascade_model_recovery() -> None:
    log = _chain_log(lambda d: np.zeros(d.shape), 1.0, seed=1)
    errs = []
    for n in (N_SMALL, N_BIG):
        fit = fit_log("cm", log.take(np.arange(n)), pseudo=0.0)
        est = _by_doc(fit.attractiveness)
        views = fit.attractiveness.count[np.argsort(fit.attractiveness.doc.astype(int))]
        se = np.sqrt(est * (1 - est) / views)
        assert np.all(np.abs(est - ALPHA) <= 4 * se), (n, est, se)
        errs.append(_rmse(est, ALPHA))
    assert errs[1] < errs[0]


@pytest.mark.parametrize("model", ["dbn", "ccm", "dcm", "sdbn"])
def test_chain_model_recovery_within_4_se(model: str) -> None:
    """DBN, CCM by EM; DCM and SDBN with ``method="em"`` (the exact MLE)."""
    options = dict(EXACT)
    if model == "dcm":
        lam = np.array([0.6, 0.5, 0.4])
        truth = np.concatenate([ALPHA, lam])
        log = _chain_log(lambda d: np.broadcast_to(np.append(lam, 0.5)[None, :], d.shape), 1.0, seed=6)
        options["method"] = "em"

        def params(fit) -> np.ndarray:  # type: ignore[no-untyped-def]
            # lambda at the last rank has no slot below it: not identified, not compared
            return np.concatenate([_by_doc(fit.attractiveness), fit.continuation[:3]])

        def ll(lg: ClickLog, th: np.ndarray) -> float:
            return _chain_ll(lg, th[:4], np.broadcast_to(np.append(th[4:], 0.5)[None, :], lg.docs.shape), 1.0)
    elif model == "sdbn":
        truth = np.concatenate([ALPHA, SIGMA])
        log = _chain_log(lambda d: 1 - SIGMA[d], 1.0, seed=7)
        options["method"] = "em"

        def params(fit) -> np.ndarray:  # type: ignore[no-untyped-def]
            return np.concatenate([_by_doc(fit.attractiveness), _by_doc(fit.satisfaction)])

        def ll(lg: ClickLog, th: np.ndarray) -> float:
            return _chain_ll(lg, th[:4], 1 - th[4:8][lg.docs], 1.0)
    elif model == "dbn":
        gamma = 0.8
        truth = np.concatenate([ALPHA, SIGMA, [gamma]])
        log = _chain_log(lambda d: gamma * (1 - SIGMA[d]), gamma, seed=2)

        def params(fit) -> np.ndarray:  # type: ignore[no-untyped-def]
            return np.concatenate([_by_doc(fit.attractiveness), _by_doc(fit.satisfaction), [fit.gamma]])

        def ll(lg: ClickLog, th: np.ndarray) -> float:
            return _chain_ll(lg, th[:4], th[8] * (1 - th[4:8][lg.docs]), th[8])
    else:
        tau = np.array([0.85, 0.6, 0.25])
        truth = np.concatenate([ALPHA, tau])
        log = _chain_log(lambda d: tau[1] * (1 - ALPHA[d]) + tau[2] * ALPHA[d], tau[0], seed=3)

        def params(fit) -> np.ndarray:  # type: ignore[no-untyped-def]
            return np.concatenate([_by_doc(fit.attractiveness), [fit.tau1, fit.tau2, fit.tau3]])

        def ll(lg: ClickLog, th: np.ndarray) -> float:
            a = th[:4][lg.docs]
            return _chain_ll(lg, th[:4], th[5] * (1 - a) + th[6] * a, th[4])

    errs = []
    for n in (N_SMALL, N_BIG):
        sub = log.take(np.arange(n))
        fit = fit_log(model, sub, **options)
        assert fit.trace.converged
        est = params(fit)
        errs.append(_rmse(est, truth))
        if n == N_BIG:
            cov = np.linalg.inv(-_hessian(lambda th: ll(sub, th), est))
            se = np.sqrt(np.diag(cov))
            assert np.all(se > 0) and np.all(se < 0.02)
            assert np.all(np.abs(est - truth) <= 4 * se), (est - truth) / se
    assert errs[1] < errs[0]


def _cell_check(p_true: np.ndarray, p_fit: np.ndarray, cell: np.ndarray, n_cells: int) -> float:
    """Max |error| / (binomial SE of the cell CTR) over cells; returns the RMSE of cell probs."""
    count = np.bincount(cell.ravel(), minlength=n_cells)
    true_c = np.bincount(cell.ravel(), weights=p_true.ravel(), minlength=n_cells) / np.maximum(count, 1)
    fit_c = np.bincount(cell.ravel(), weights=p_fit.ravel(), minlength=n_cells) / np.maximum(count, 1)
    used = count >= 200
    se = np.sqrt(true_c * (1 - true_c) / np.maximum(count, 1))
    assert np.all(np.abs(fit_c - true_c)[used] <= 4 * se[used])
    return _rmse(fit_c[used], true_c[used])


def test_pbm_recovery_of_click_probabilities() -> None:
    gamma = np.array([1.0, 0.7, 0.5, 0.3])
    rng = np.random.default_rng(4)
    docs = _rankings(N_BIG, rng)
    p_true = ALPHA[docs] * gamma[None, :]
    log = _log(docs, kernels.independent_sample(p_true, rng, docs.shape))
    cell = docs * K + np.arange(K)[None, :]
    errs = []
    for n in (N_SMALL, N_BIG):
        sub = log.take(np.arange(n))
        fit = fit_log("pbm", sub, **EXACT)
        assert fit.trace.converged
        errs.append(_cell_check(p_true[:n], fit.click_probs(sub), cell[:n], ALPHA.size * K))
    assert errs[1] < errs[0]


def test_ubm_recovery_of_click_probabilities() -> None:
    gamma = np.zeros((K, K))
    for r in range(K):
        for j in range(r + 1):
            gamma[r, j] = 0.95 - 0.15 * (r - (j - 1 if j else -1) - 1) - 0.05 * (j == 0) * r
    assert gamma.min() >= 0 and gamma.max() <= 1
    rng = np.random.default_rng(5)
    docs = _rankings(N_BIG, rng)
    clicks, _ = kernels.ubm_sample(ALPHA[docs], gamma, rng)
    log = _log(docs, clicks)
    errs = []
    for n in (N_SMALL, N_BIG):
        sub = log.take(np.arange(n))
        fit = fit_log("ubm", sub, **EXACT)
        assert fit.trace.converged
        prev = sub.previous_click + 1
        p_true = ALPHA[sub.docs] * gamma[np.arange(K)[None, :], prev]
        cell = (sub.docs * K + np.arange(K)[None, :]) * (K + 1) + prev
        errs.append(_cell_check(p_true, fit.conditional_click_probs(sub), cell, ALPHA.size * K * (K + 1)))
    assert errs[1] < errs[0]
