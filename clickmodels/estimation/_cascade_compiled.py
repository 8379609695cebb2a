r"""One compiled E-step (and the M-step's sums) of the cascade-family EM fits (DCM, SDBN, DBN, CCM).

:func:`~clickmodels.estimation._cascade.cascade_posterior` and the steps of
:mod:`~clickmodels.estimation.dcm` and :mod:`~clickmodels.estimation.dbn` compute an iteration in some thirty
NumPy passes over ``(n, k)`` arrays of the log's distinct sessions (the slots' parameters, the posteriors'
tails, the examination chain, the masks, the per-pair and per-rank sums): about 150 ns per slot and iteration,
so a 10^6-impression top-10 log of randomised lists (nearly every session distinct) took 1.5-2 s per iteration
and 74.5 s (DCM) to 110 s (SDBN) per fit. :func:`cascade_em_sums` does the same arithmetic session by session in
one pass: the slot values, the tail probabilities :math:`Q_r`, the log-likelihood, the examination posterior and
the sums the M-step divides (per pair: the expected attractions, and for SDBN / DBN / CCM the expected
satisfactions; per rank: DCM's expected continuations; DBN's perseverance and CCM's continuations' numerators and
denominators). It starts each session
at its last click: above it every slot is examined, its attraction is its click and the user went on, so those
terms are weighted counts that :class:`~clickmodels.estimation._cascade.CompiledSums` sums once per fit (and its
log-likelihood terms, count x log(parameter), once per iteration over the pairs and ranks), not per session and
iteration (on bench_dm's 10^6 log 0.060-0.072 s per iteration against 0.071-0.097 s over whole rows). CCM joined
later (2026-12-06): ``dm`` with a CCM on bench_dm's 10^6 log 9.1 s of CPU (its linearised interval included; 5.3 s
held fixed) against 102 s with the NumPy E-step, the same value to 11 digits (EM's stopping point moves with the
sums' rounding); CCM's satisfaction posterior at the clicks above the last click depends on its pair's alpha, so
:class:`~clickmodels.estimation._cascade.CompiledSums` sums those per pair each iteration, not once.

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
def cascade_em_sums(codes, clicks, last, weight, alpha, c1_kind, lam, sigma, gamma, tau,
                    att_num, sat_num, cont_num, gamma_sums, tau_sums):
    """One E-step over the distinct sessions from their last clicks down: returns the weighted log-likelihood of
    the last clicks and the slots below them (of whole rows without clicks) and fills the M-step's sums over those
    slots (the terms above the last clicks are :class:`~clickmodels.estimation._cascade.CompiledSums`'s counts).

    ``codes`` ``(n, k)`` the slots' pair codes (``-1`` empty), ``clicks`` ``(n, k)`` bool, ``last`` ``(n,)`` the
    last click's rank (``-1`` none), ``weight`` ``(n,)`` the sessions' multiplicities; ``alpha`` ``(m,)`` the
    pairs' attractiveness. The continuation after a click at a shown slot: ``c1_kind`` 0 (DCM) ``lam[r]`` per rank;
    1 (SDBN, DBN) ``gamma (1 - sigma[pair])``; 2 (CCM) ``tau[0] (1 - alpha[pair]) + tau[1] alpha[pair]`` (tau2,
    tau3); after a skip ``gamma`` (1 for DCM and SDBN, tau1 for CCM); an empty slot has attractiveness 0 and
    continuations 1 (:func:`~clickmodels.estimation._cascade.prepare_slots`).

    Sums (zeroed here): ``att_num`` ``(m,)`` the weighted expected attractions per pair below the last click,
    :math:`\\alpha_r (1 - P(E_r \\mid C))` (the clicks down to it: counts); ``sat_num`` ``(m,)`` (``c1_kind`` 1)
    the weighted satisfaction posterior at the last click, :math:`\\sigma / [(1 - c^1_l) + c^1_l Q_{l+1}]`;
    ``cont_num`` ``(k,)`` (``c1_kind`` 0) the weighted expected continuation at the last click with a shown slot
    below, :math:`c^1_l Q_{l+1} / [(1 - c^1_l) + c^1_l Q_{l+1}]` (1 at the clicks above it: counts);
    ``gamma_sums`` ``(2,)`` DBN's perseverance numerator :math:`\\sum P(E_{r+1} \\mid C)` and denominator
    :math:`\\sum P(E_r, S_r = 0 \\mid C)` over the slots from the last click down with a shown slot below (1 and
    1 above it: counts), and CCM's tau1 numerator and denominator :math:`\\sum P(E_{r+1} \\mid C)`,
    :math:`\\sum P(E_r \\mid C)` over the skips below the last click with a shown slot below (1 and 1 above it);
    ``tau_sums`` ``(4,)`` (``c1_kind`` 2) at the last click with a shown slot below: tau2's numerator
    :math:`P(S_l = 0, \\text{on} \\mid C) = (1 - \\alpha) \\tau_2 Q_{l+1} / N` and denominator
    :math:`P(S_l = 0 \\mid C)`, tau3's :math:`\\alpha \\tau_3 Q_{l+1} / N` and :math:`P(S_l = 1 \\mid C) =
    \\alpha (\\tau_3 Q_{l+1} + 1 - \\tau_3) / N` with :math:`N` the stop normaliser; for CCM ``sat_num`` is
    :math:`P(S_l = 1 \\mid C)` per pair (pooled with the attractions by the M-step; the clicks above the last click:
    :class:`~clickmodels.estimation._cascade.CompiledSums`)."""
    n, k = codes.shape
    att_num[:] = 0.0
    sat_num[:] = 0.0
    cont_num[:] = 0.0
    gamma_sums[:] = 0.0
    tau_sums[:] = 0.0
    a = np.empty(k)
    c0 = np.empty(k)
    c1 = np.empty(k)
    s = np.empty(k)
    tail = np.empty(k + 1)
    exam = np.empty(k)
    total = 0.0
    for i in range(n):
        wt = weight[i]
        l = last[i]
        has = l >= 0
        li = l if has else 0
        for r in range(li, k):  # only from the last click down (above it every term is a constant count)
            code = codes[i, r]
            if code >= 0:
                a[r] = alpha[code]
                c0[r] = gamma
                if c1_kind == 0:
                    s[r] = 0.0
                    c1[r] = lam[r]
                elif c1_kind == 2:
                    s[r] = 0.0
                    c1[r] = tau[0] * (1.0 - a[r]) + tau[1] * a[r]
                else:
                    s[r] = sigma[code]
                    c1[r] = gamma * (1.0 - s[r])
            else:
                a[r] = 0.0
                c0[r] = 1.0
                c1[r] = 1.0
                s[r] = 0.0
        tail[k] = 1.0
        for r in range(k - 1, l, -1):  # Q_r below the last click (all ranks without clicks)
            tail[r] = (1.0 - a[r]) * ((1.0 - c0[r]) + c0[r] * tail[r + 1])
        q_after = tail[li + 1] if has else 1.0
        c1_last = c1[li]
        stop_norm = (1.0 - c1_last) + c1_last * q_after if has else 1.0
        w0 = c1_last * q_after / stop_norm if has else 1.0
        if has:
            ll = np.log(max(a[li], 1e-300)) + np.log(max(stop_norm, 1e-300))
        else:
            ll = np.log(max(tail[0], 1e-300))
        total += ll * wt
        # the examination posterior below the last click: the chain from w0
        e = w0
        for r in range(l + 1, k):
            exam[r] = e
            nxt = tail[r + 1]
            num = c0[r] * nxt
            den = (1.0 - c0[r]) + num
            e = e * (num / den if den > 0 else 0.0)
        if has and codes[i, l] >= 0:  # the last click: its continuation / satisfaction posterior
            below_shown = l + 1 < k and codes[i, l + 1] >= 0
            post_s = 0.0
            if c1_kind == 0:
                if below_shown:
                    cont_num[l] += c1[l] * q_after / stop_norm * wt
            elif c1_kind == 2:
                a_l = a[l]
                s1 = a_l * (tau[1] * q_after + 1.0 - tau[1]) / stop_norm
                sat_num[codes[i, l]] += s1 * wt
                if below_shown:
                    tau_sums[0] += (1.0 - a_l) * tau[0] * q_after / stop_norm * wt
                    tau_sums[1] += (1.0 - s1) * wt
                    tau_sums[2] += a_l * tau[1] * q_after / stop_norm * wt
                    tau_sums[3] += s1 * wt
            else:
                post_s = s[l] / stop_norm
                sat_num[codes[i, l]] += post_s * wt
                if below_shown:
                    gamma_sums[0] += exam[l + 1] * wt
                    gamma_sums[1] += (1.0 - post_s) * wt
        for r in range(l + 1, k):
            code = codes[i, r]
            if code < 0:
                continue
            att_num[code] += a[r] * (1.0 - exam[r]) * wt
            if c1_kind != 0 and r + 1 < k and codes[i, r + 1] >= 0:
                gamma_sums[0] += exam[r + 1] * wt
                gamma_sums[1] += exam[r] * wt
    return total
