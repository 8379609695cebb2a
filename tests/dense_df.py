"""A test-side reference for the CLT intervals' degrees of freedom (onlineeval/estimators/intervals.py's
``working_df``): Bell and McCaffrey's Satterthwaite degrees of freedom written the slow way, by building the
``G x (rewards)`` matrix ``C`` of each reward's coefficient in every cluster's deviation and taking
``tr(CC')^2 / tr((CC')^2)`` of the dense ``G x G`` matrix. The library computes the same number from a diagonal plus
low-rank form in O(n); nothing here is shared with it."""

from __future__ import annotations

import numpy as np
import scipy.stats


def dense_df(cluster: np.ndarray, weights: list[np.ndarray], dens: list[np.ndarray],
             signs: tuple[float, ...] = (1.0, -1.0), valid: np.ndarray | None = None) -> float:
    """The degrees of freedom of ``sum_s sign_s R_s``, ``R_s = sum_i w_s,i y_i / sum_i d_s,i``, clustered by
    ``cluster`` (n,) (any labels), rewards ``y`` independent with equal variance (one per impression for list weights
    (n,), one per slot for slot weights (n, k); ``valid`` (n, k) marks the shown slots, others carry no reward)."""
    labels, inv = np.unique(cluster, return_inverse=True)
    g, n = labels.size, inv.size
    w0 = np.asarray(weights[0], dtype=float)
    k = 1 if w0.ndim == 1 else w0.shape[1]
    member = np.zeros((g, n * k))
    member[np.repeat(inv, k), np.arange(n * k)] = 1.0
    c = np.zeros((g, n * k))
    for w, d, sign in zip(weights, dens, signs, strict=False):
        w = np.asarray(w, dtype=float).reshape(n, k)
        if valid is not None and k > 1:
            w = np.where(valid, w, 0.0)
        d = np.asarray(d, dtype=float)
        share = np.bincount(inv, d, g) / d.sum()
        c += sign * (member - share[:, None]) * w.reshape(-1)[None, :] / d.sum()
    m = c @ c.T
    return float(np.trace(m) ** 2 / np.trace(m @ m))


def t_quantile(alpha: float, df: float) -> float:
    """scipy's two-sided t quantile for level ``alpha`` at ``df`` degrees of freedom."""
    return float(scipy.stats.t.ppf(1 - alpha / 2, df))
