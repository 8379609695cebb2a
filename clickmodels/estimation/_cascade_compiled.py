r"""One compiled E-step (and the M-step's sums) of the cascade-family EM fits (DCM, SDBN, DBN).

:func:`~clickmodels.estimation._cascade.cascade_posterior` and the steps of
:mod:`~clickmodels.estimation.dcm` and :mod:`~clickmodels.estimation.dbn` compute an iteration in some thirty
NumPy passes over ``(n, k)`` arrays of the log's distinct sessions (the slots' parameters, the posteriors'
tails, the examination chain, the masks, the per-pair and per-rank sums): about 150 ns per slot and iteration,
so a 10^6-impression top-10 log of randomised lists (nearly every session distinct) took 1.5-2 s per iteration
and 74.5 s (DCM) to 110 s (SDBN) per fit. :func:`cascade_em_sums` does the same arithmetic session by session in
one pass: the slot values, the tail probabilities :math:`Q_r`, the log-likelihood, the examination posterior and
the sums the M-step divides (per pair: the expected attractions, and for SDBN / DBN the expected satisfactions;
per rank: DCM's expected continuations; DBN's perseverance numerator and denominator).

The formulas are :func:`cascade_posterior`'s term by term (the same clamps ``max(x, 1e-300)`` inside the logs,
the same ``den > 0`` guard in the examination chain); only the order of the sums differs (session by session
here, NumPy's pairwise sums and ``bincount`` there), so the parameters agree to rounding (tested against the
NumPy step in ``tests/test_cascade_em_compiled.py``), not to the bit.
"""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["cascade_em_sums"]

_jit = numba.njit(cache=True, nogil=True, error_model="numpy")  # x / 0.0 is inf or NaN, as in NumPy


@_jit
def cascade_em_sums(codes, clicks, last, weight, alpha, c1_kind, lam, sigma, gamma,
                    att_num, sat_num, cont_num, gamma_sums):
    """One E-step over the distinct sessions: returns the weighted log-likelihood and fills the M-step's sums.

    ``codes`` ``(n, k)`` the slots' pair codes (``-1`` empty), ``clicks`` ``(n, k)`` bool, ``last`` ``(n,)`` the
    last click's rank (``-1`` none), ``weight`` ``(n,)`` the sessions' multiplicities; ``alpha`` ``(m,)`` the
    pairs' attractiveness. The continuation after a click at a shown slot: ``c1_kind`` 0 (DCM) ``lam[r]`` per rank;
    1 (SDBN, DBN) ``gamma (1 - sigma[pair])``; after a skip ``gamma`` (1 for DCM and SDBN); an empty slot has
    attractiveness 0 and continuations 1 (:func:`~clickmodels.estimation._cascade.prepare_slots`).

    Sums (zeroed here): ``att_num`` ``(m,)`` the weighted expected attractions per pair (the click itself down to
    the last click, :math:`\\alpha_r (1 - P(E_r \\mid C))` below it); ``sat_num`` ``(m,)`` (``c1_kind`` 1) the
    weighted satisfaction posterior at the last click, :math:`\\sigma / [(1 - c^1_l) + c^1_l Q_{l+1}]`;
    ``cont_num`` ``(k,)`` (``c1_kind`` 0) the weighted expected continuation at clicked slots with a shown slot
    below (1 above the last click, :math:`c^1_l Q_{l+1} / [(1 - c^1_l) + c^1_l Q_{l+1}]` at it);
    ``gamma_sums`` ``(2,)`` DBN's perseverance numerator :math:`\\sum P(E_{r+1} \\mid C)` and denominator
    :math:`\\sum P(E_r, S_r = 0 \\mid C)` over the slots with a shown slot below."""
    n, k = codes.shape
    att_num[:] = 0.0
    sat_num[:] = 0.0
    cont_num[:] = 0.0
    gamma_sums[:] = 0.0
    a = np.empty(k)
    c0 = np.empty(k)
    c1 = np.empty(k)
    s = np.empty(k)
    tail = np.empty(k + 1)
    exam = np.empty(k)
    total = 0.0
    for i in range(n):
        wt = weight[i]
        for r in range(k):
            code = codes[i, r]
            if code >= 0:
                a[r] = alpha[code]
                c0[r] = gamma
                if c1_kind == 0:
                    s[r] = 0.0
                    c1[r] = lam[r]
                else:
                    s[r] = sigma[code]
                    c1[r] = gamma * (1.0 - s[r])
            else:
                a[r] = 0.0
                c0[r] = 1.0
                c1[r] = 1.0
                s[r] = 0.0
        tail[k] = 1.0
        for r in range(k - 1, -1, -1):
            tail[r] = (1.0 - a[r]) * ((1.0 - c0[r]) + c0[r] * tail[r + 1])
        l = last[i]
        has = l >= 0
        li = l if has else 0
        q_after = tail[li + 1] if has else 1.0
        c1_last = c1[li]
        stop_norm = (1.0 - c1_last) + c1_last * q_after if has else 1.0
        w0 = c1_last * q_after / stop_norm if has else 1.0
        ll = 0.0
        for r in range(k):
            if r < l:
                if clicks[i, r]:
                    ll += np.log(max(a[r], 1e-300)) + np.log(max(c1[r], 1e-300))
                else:
                    ll += np.log(max(1.0 - a[r], 1e-300)) + np.log(max(c0[r], 1e-300))
        if has:
            ll += np.log(max(a[li], 1e-300)) + np.log(max(stop_norm, 1e-300))
        else:
            ll += np.log(max(tail[0], 1e-300))
        total += ll * wt
        # the examination posterior: 1 down to the last click, then the chain from w0
        e = w0
        for r in range(k):
            if r <= l:
                exam[r] = 1.0
            else:
                exam[r] = e
                nxt = tail[r + 1]
                num = c0[r] * nxt
                den = (1.0 - c0[r]) + num
                e = e * (num / den if den > 0 else 0.0)
        for r in range(k):
            code = codes[i, r]
            if code < 0:
                continue
            if r <= l:
                att_num[code] += (1.0 if clicks[i, r] else 0.0) * wt
            else:
                att_num[code] += a[r] * (1.0 - exam[r]) * wt
            below_shown = r + 1 < k and codes[i, r + 1] >= 0
            post_s = 0.0
            if c1_kind == 0:
                if clicks[i, r] and below_shown:
                    if r < l:
                        cont_num[r] += wt
                    elif r == l:
                        cont_num[r] += c1[r] * q_after / stop_norm * wt
            else:
                if r == l:
                    post_s = s[li] / stop_norm
                if clicks[i, r]:
                    sat_num[code] += post_s * wt
                if below_shown:
                    gamma_sums[0] += exam[r + 1] * wt
                    gamma_sums[1] += (exam[r] - post_s) * wt
    return total
