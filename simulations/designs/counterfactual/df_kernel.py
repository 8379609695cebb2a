"""The compiled checkpoint's degrees of freedom of the accumulated estimators' differences (numba): what
:func:`onlineeval.estimators.intervals.clustered_df` computes from the active users' sums of the two denominators
and the weights' products (:mod:`simulations.designs.counterfactual.products`), in two passes over the users reading
the design's sums matrix without gathering it. The same formulas: ``CC' = diag + P W P'`` with ``P = [cross, q]``,
its traces from the ``4 x 4`` moments ``P'P`` and ``P' diag P``; the NumPy path's numbers to rounding (the rows'
intervals and p-values to 1e-12, ``tests/test_counterfactual_checkpoint_kernels.py``). Imported by
:mod:`simulations.designs.counterfactual.checkpoint`."""

from __future__ import annotations

import numpy as np

from simulations.stat_kernels import _jit

__all__ = ["DF_ROWS", "cf_dfs"]

#: the entries of a row of :func:`cf_dfs`' ``rows``: the rows of the sums matrix of the first target's (A's)
#: denominators, the second's (B's), and the products A A, A B, B B
DF_ROWS = 5


@_jit
def _df_one(acc, users, n, da, db, paa, pab, pbb):
    """:func:`cf_dfs` of one estimator (see there)."""
    g = float(n)
    sa = sb = 0.0
    top_a = top_b = 0.0
    for t in range(n):
        u = users[t]
        sa += acc[da, u]
        sb += acc[db, u]
        x = acc[paa, u]
        if x > top_a or x != x:
            top_a = x
        x = acc[pbb, u]
        if x > top_b or x != x:
            top_b = x
    if not (sa > 0.0 and sb > 0.0 and np.isfinite(sa) and np.isfinite(sb)):
        return g - 1.0
    fb, fa = 1.0 / sb, -1.0 / sa  # the target B first (+1), the baseline A (-1)
    tb, ta = top_b * fb * fb, top_a * fa * fa
    top = tb if tb > ta else ta
    if not (top > 0.0 and np.isfinite(top) and tb == tb and ta == ta):
        return g - 1.0
    c00, c01, c11 = fb * fb / top, fb * fa / top, fa * fa / top
    s = np.zeros((4, 4))
    d = np.zeros((4, 4))
    a00 = a01 = a11 = 0.0
    sd = sd2 = 0.0
    v = np.empty(4)
    for t in range(n):
        u = users[t]
        p00 = c00 * acc[pbb, u]
        p01 = c01 * acc[pab, u]
        p11 = c11 * acc[paa, u]
        diag = p00 + p01 + p01 + p11
        v[0] = -(p00 + p01)
        v[1] = -(p01 + p11)
        v[2] = acc[db, u] / sb
        v[3] = acc[da, u] / sa
        a00 += p00
        a01 += p01
        a11 += p11
        sd += diag
        sd2 += diag * diag
        for i in range(4):
            for j in range(i, 4):
                x = v[i] * v[j]
                s[i, j] += x
                d[i, j] += diag * x
    for i in range(4):
        for j in range(i):
            s[i, j] = s[j, i]
            d[i, j] = d[j, i]
    w = np.zeros((4, 4))
    w[0, 2] = w[1, 3] = w[2, 0] = w[3, 1] = 1.0
    w[2, 2], w[2, 3], w[3, 2], w[3, 3] = a00, a01, a01, a11
    m = np.zeros((4, 4))  # W P'P
    e = np.zeros((4, 4))  # W P' diag P
    for i in range(4):
        for j in range(4):
            x = y = 0.0
            for k in range(4):
                x += w[i, k] * s[k, j]
                y += w[i, k] * d[k, j]
            m[i, j] = x
            e[i, j] = y
    tr1 = sd
    tr2 = sd2
    for i in range(4):
        tr1 += m[i, i]
        tr2 += 2.0 * e[i, i]
        for k in range(4):
            tr2 += m[i, k] * m[k, i]
    if not (tr1 > 0.0 and tr2 > 0.0 and np.isfinite(tr1) and np.isfinite(tr2)):
        return g - 1.0
    return min(max(tr1 * tr1 / tr2, 1.0), g - 1.0)


@_jit
def cf_dfs(acc, users, n, rows, out):
    """Per accumulated estimator (row ``e`` of ``rows`` ``(E, DF_ROWS)``: the rows of ``acc`` of its denominators
    for A and B and of its weights' products A A, A B, B B) Bell and McCaffrey's degrees of freedom of its difference
    ``R_B - R_A`` over the ``n >= 2`` active ``users`` into ``out[e]``: ``G - 1`` where a denominator does not sum to
    a positive number, no weight is carried, or a sum is not finite (as the NumPy path)."""
    for e in range(rows.shape[0]):
        out[e] = _df_one(acc, users, n, rows[e, 0], rows[e, 1], rows[e, 2], rows[e, 3], rows[e, 4])
