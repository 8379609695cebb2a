"""The compiled checkpoint's degrees of freedom of the accumulated estimators' differences (numba): what
:func:`onlineeval.estimators.intervals.clustered_df` computes from the active users' sums of the two denominators
and the weights' products (:mod:`simulations.designs.counterfactual.products`), gathered from the design's sums
matrix estimator by estimator, in one pass. The same formulas: ``CC' = diag + P W P'`` with ``P = [cross, q]``,
its traces from the ``4 x 4`` moments ``P'P`` and ``P' diag P``; the NumPy path's numbers to rounding (the rows'
intervals and p-values to 1e-12, ``tests/test_counterfactual_checkpoint_kernels.py``). Its drivers,
:func:`accumulated_dfs` and :func:`adaptive_dfs`, are called by :mod:`simulations.designs.counterfactual.checkpoint`."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulations.designs.counterfactual.products import adaptive_rows
from simulations.stat_kernels import _jit


__all__ = ["DF_ROWS", "accumulated_dfs", "adaptive_dfs", "cf_dfs", "df_arrays"]

#: the entries of a row of :func:`cf_dfs`' ``rows``: the rows of the sums matrix of the first target's (A's)
#: denominators, the second's (B's), and the products A A, A B, B B
DF_ROWS = 5


@_jit
def df_arrays(den_a, den_b, aa, ab, bb, n, sa, sb):
    """Bell and McCaffrey's degrees of freedom of ``R_B - R_A`` from the ``n >= 2`` active users' denominators of A
    and B, their products of the weights A A, A B, B B (arrays, entries ``[:n]``) and the denominators' sums ``sa``,
    ``sb``: what :func:`onlineeval.estimators.intervals.clustered_df` computes, without its common scale (the
    degrees of freedom do not depend on it; the products' sums over the squared totals stay far from float64's
    range for any weight below 1e100). ``G - 1`` where a total is not a positive number or a trace not finite."""
    g = float(n)
    if not (sa > 0.0 and sb > 0.0 and np.isfinite(sa) and np.isfinite(sb)):
        return g - 1.0
    fb, fa = 1.0 / sb, -1.0 / sa  # the target B first (+1), the baseline A (-1)
    c00, c01, c11 = fb * fb, fb * fa, fa * fa
    # P = [x0, x1, qB, qA] per user: the moments P'P (10), of P' diag P those tr(W P' diag P) reads (5), and a
    s00 = s01 = s02 = s03 = s11 = s12 = s13 = s22 = s23 = s33 = 0.0
    d02 = d13 = d22 = d23 = d33 = 0.0
    a00 = a01 = a11 = sd = sd2 = 0.0
    for t in range(n):
        p00 = c00 * bb[t]
        p01 = c01 * ab[t]
        p11 = c11 * aa[t]
        qb = den_b[t] * fb
        qa = den_a[t] * -fa
        diag = p00 + p01 + p01 + p11
        x0 = -(p00 + p01)
        x1 = -(p01 + p11)
        a00 += p00
        a01 += p01
        a11 += p11
        sd += diag
        sd2 += diag * diag
        s00 += x0 * x0
        s01 += x0 * x1
        s02 += x0 * qb
        s03 += x0 * qa
        s11 += x1 * x1
        s12 += x1 * qb
        s13 += x1 * qa
        s22 += qb * qb
        s23 += qb * qa
        s33 += qa * qa
        dq = diag * qb
        d02 += dq * x0
        d22 += dq * qb
        d23 += dq * qa
        dq = diag * qa
        d13 += dq * x1
        d33 += dq * qa
    s = np.empty((4, 4))
    s[0, 0], s[0, 1], s[0, 2], s[0, 3] = s00, s01, s02, s03
    s[1, 1], s[1, 2], s[1, 3] = s11, s12, s13
    s[2, 2], s[2, 3], s[3, 3] = s22, s23, s33
    for i in range(4):
        for j in range(i):
            s[i, j] = s[j, i]
    w = np.zeros((4, 4))  # W = [[0, I], [I, a]]
    w[0, 2] = w[1, 3] = w[2, 0] = w[3, 1] = 1.0
    w[2, 2], w[2, 3], w[3, 2], w[3, 3] = a00, a01, a01, a11
    m = np.zeros((4, 4))  # W P'P
    for i in range(4):
        for j in range(4):
            x = 0.0
            for k in range(4):
                x += w[i, k] * s[k, j]
            m[i, j] = x
    # tr(W P' diag P) = 2 (D[x0, qB] + D[x1, qA]) + a00 D[qB, qB] + 2 a01 D[qB, qA] + a11 D[qA, qA]
    twd = 2.0 * (d02 + d13) + a00 * d22 + 2.0 * a01 * d23 + a11 * d33
    tr1 = sd
    tr2 = sd2 + 2.0 * twd
    for i in range(4):
        tr1 += m[i, i]
        for k in range(4):
            tr2 += m[i, k] * m[k, i]
    if not (tr1 > 0.0 and tr2 > 0.0 and np.isfinite(tr1) and np.isfinite(tr2)):
        return g - 1.0
    return min(max(tr1 * tr1 / tr2, 1.0), g - 1.0)


@_jit
def cf_dfs(acc, users, n, rows, out):
    """Per accumulated estimator (row ``e`` of ``rows`` ``(E, DF_ROWS)``: the rows of ``acc`` of its denominators
    for A and B and of its weights' products A A, A B, B B) Bell and McCaffrey's degrees of freedom of its difference
    ``R_B - R_A`` over the ``n >= 2`` active ``users`` into ``out[e]`` (:func:`df_arrays` of the rows gathered; each
    denominator row's sum once: most share the impressions')."""
    totals = np.full(acc.shape[0], np.nan)
    work = np.empty((DF_ROWS, n))
    for e in range(rows.shape[0]):
        for c in range(DF_ROWS):
            r = rows[e, c]
            s = 0.0
            for t in range(n):
                x = acc[r, users[t]]
                work[c, t] = x
                s += x
            if c < 2:
                totals[r] = s
        out[e] = df_arrays(work[0], work[1], work[2], work[3], work[4], n, totals[rows[e, 0]], totals[rows[e, 1]])


# ----------------------------------------------------------------------------- the drivers (the checkpoint calls)
def accumulated_dfs(design: Any, users: np.ndarray) -> list[float]:
    """The degrees of freedom of each accumulated estimator's difference over the active ``users`` (:func:`cf_dfs`;
    ``G - 1`` for an estimator without weights), in the order of ``design._acc_labels``."""
    labels = design._acc_labels
    if not labels:
        return []
    e, lo = len(labels), design._block
    first, pairs = design._products.first, design._products.pairs
    rows = np.array([[lo + 2 * e + i, lo + 3 * e + i, *(first + p for p in pairs[label])]
                     for i, label in enumerate(labels)], dtype=np.int64).reshape(e, DF_ROWS)
    out = np.empty(e)
    cf_dfs(design._acc, users, users.size, rows, out)
    g1 = float(users.size - 1)
    return [g1 if label in design._unweighted else float(v) for label, v in zip(labels, out.tolist(), strict=True)]


def adaptive_dfs(design: Any, label: str, users: np.ndarray, codes: list[np.ndarray]) -> float:
    """The degrees of freedom of adaptive IPS's difference (:func:`~simulations.designs.counterfactual.products.
    adaptive_rows`' products of each user's behaviours, :func:`df_arrays`), the denominators the users' impressions."""
    rows = adaptive_rows(design._products, label, codes)
    if rows is None:
        return math.nan
    acc = design._acc
    aa, ab, bb = (np.ascontiguousarray(acc[r, users]) for r in rows)
    den = acc[0].take(users)
    total = float(den.sum())
    return float(df_arrays(den, den, aa, ab, bb, users.size, total, total))
