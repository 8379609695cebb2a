"""Compiled kernels of the Plackett-Luce logger (numba): its slot-by-slot sampler, the fast path of its prefix
propensities and the exponential race's quadrature of its item marginals (:mod:`simulations.policies.pl_quadrature`;
:class:`simulations.policies.plackett_luce.PlackettLucePolicy`). Out of
:mod:`simulations.policies.kernels` (the epsilon-greedy mixture's and the counterfactual step's kernels); imported
lazily by the policy, compiled on first call and cached (``cache=True``)."""

from __future__ import annotations

import numba
import numpy as np

__all__ = ["pl_prefix", "pl_race", "pl_sample"]

_jit = numba.njit(cache=True, nogil=True, error_model="numpy")


@_jit
def pl_sample(query, u, weights, order, totals, logits, out):
    """``out`` ``(n, k)``: Plackett-Luce lists drawn slot by slot by inverting the softmax over the remaining
    candidates with the uniforms ``u`` ``(n, k)`` (one per slot; row ``i`` slot ``j`` uses ``u[i, j]``).

    ``weights`` ``(Q, m)``: ``exp(logits - max)`` per query (0 for a non-candidate, whose logit is ``-inf``);
    ``order`` ``(Q, m)``: each query's candidates by descending weight (ties by column), then ``-1``; ``totals``
    ``(Q,)``: the weights summed in that order. At slot ``j`` the mass left ``T`` is the query's total less the
    weights placed above (summed again over the candidates left, in order, once it is below 1e-6 of the total, so
    the subtraction never loses more than about 1e-10 of it); the slot shows the first candidate left, in
    ``order``, whose running weight sum exceeds ``u T`` (the last one of positive weight if rounding leaves none),
    and ``-1`` when no candidate is left. When the recomputed ``T`` is below 1e-290 (logits hundreds apart) the
    row's weights are recomputed against the largest logit left, ``exp(logits - max left)``, so each slot still
    draws from its exact softmax. The reference is
    :meth:`simulations.policies.plackett_luce.PlackettLucePolicy._sample_reference` (the same operations in the
    same order)."""
    n, k = out.shape
    m = weights.shape[1]
    w = np.empty(m, dtype=np.float64)
    placed = np.zeros(m, dtype=np.bool_)
    for i in range(n):
        q = query[i]
        total = totals[q]
        first = total
        scaled = False
        for j in range(k):
            if j >= m or order[q, j] < 0:  # no candidate left
                for jj in range(j, k):
                    out[i, jj] = -1
                break
            if not total > 1e-6 * first:  # the subtraction could have lost precision: summed again
                total = 0.0
                for a in range(m):
                    c = order[q, a]
                    if c < 0:
                        break
                    if not placed[c]:
                        total += w[c] if scaled else weights[q, c]
                if not total > 1e-290:  # the weights left (nearly) underflowed: against the largest logit left
                    top = -np.inf
                    for a in range(m):
                        c = order[q, a]
                        if c < 0:
                            break
                        if not placed[c] and logits[q, c] > top:
                            top = logits[q, c]
                    total = 0.0
                    for a in range(m):
                        c = order[q, a]
                        if c < 0:
                            break
                        w[c] = 0.0 if placed[c] else np.exp(logits[q, c] - top)
                        total += w[c]
                    scaled = True
                first = total
            x = u[i, j] * total
            run = 0.0
            pick = -1
            last = -1
            for a in range(m):
                c = order[q, a]
                if c < 0:
                    break
                wc = w[c] if scaled else weights[q, c]
                if not placed[c] and wc > 0.0:
                    run += wc
                    last = c
                    if run > x:
                        pick = c
                        break
            if pick < 0:
                pick = last
            out[i, j] = pick
            placed[pick] = True
            total -= w[pick] if scaled else weights[q, pick]
        for j in range(k):  # reset the row's marks
            if out[i, j] >= 0:
                placed[out[i, j]] = False


@_jit
def pl_prefix(query, r, ranks, e, total, out, risky):
    """:meth:`simulations.policies.plackett_luce.PlackettLucePolicy._prefix`'s fast path row by row, the same
    operations in the same order: ``w_j`` the weight ``e[q, r_j]`` of a candidate slot (``ranks >= 0``) else 0,
    ``rem_j = total[q] - (w_0 + ... + w_j - w_j)`` (the running sum, then less ``w_j``, as ``cumsum - w``), the slot
    factor ``w_j / rem_j`` (a candidate with ``rem_j > 0``), 1 (an empty slot) or 0, and ``out`` their running
    product; ``risky[i]`` where a shown slot has ``rem_j < 1e-6 total`` or a candidate's weight is 0 (the caller
    recomputes those rows in log space)."""
    n, k = r.shape
    for i in range(n):
        q = query[i]
        t = total[q]
        run = 0.0
        prod = 1.0
        bad = False
        for j in range(k):
            ok = ranks[i, j] >= 0
            d = r[i, j]
            w = e[q, d if d > 0 else 0] if ok else 0.0
            run = w if j == 0 else run + w
            rem = t - (run - w)
            if ok and rem > 0:
                f = w / rem
            elif d < 0:
                f = 1.0
            else:
                f = 0.0
            prod = f if j == 0 else prod * f
            out[i, j] = prod
            if (rem < 1e-6 * t and d >= 0) or (w == 0 and ok):
                bad = True
        risky[i] = bad


@_jit
def pl_race(lg, tau, h, out):
    """``out[x, s] +=`` the trapezoidal sum over the nodes ``tau`` (step ``h``) of the exponential race's integrand
    of :mod:`simulations.policies.pl_quadrature`: ``h phi(tau + lg[x])`` times the probability that exactly ``s``
    of the other candidates arrive before ``exp(tau)``, from prefix and suffix Poisson-binomials truncated at
    ``k = out.shape[1]`` states. Node by node (memory ``O(c k)``), the same sums as
    :func:`simulations.policies.pl_quadrature._marginals_at_step` (the tested reference) in another order."""
    c, k = out.shape
    fwd = np.zeros((c + 1, k))
    bwd = np.zeros((c + 1, k))
    before = np.empty(c)
    after = np.empty(c)
    for n in range(tau.size):
        t = tau[n]
        for d in range(c):
            e = np.exp(t + lg[d])
            after[d] = np.exp(-e)
            before[d] = -np.expm1(-e)
        fwd[0, :] = 0.0
        fwd[0, 0] = 1.0
        for i in range(c):
            a = after[i]
            b = before[i]
            fwd[i + 1, 0] = fwd[i, 0] * a
            for s in range(1, k):
                fwd[i + 1, s] = fwd[i, s] * a + fwd[i, s - 1] * b
        bwd[c, :] = 0.0
        bwd[c, 0] = 1.0
        for i in range(c - 1, -1, -1):
            a = after[i]
            b = before[i]
            bwd[i, 0] = bwd[i + 1, 0] * a
            for s in range(1, k):
                bwd[i, s] = bwd[i + 1, s] * a + bwd[i + 1, s - 1] * b
        for i in range(c):
            z = t + lg[i]
            w = h * np.exp(z - np.exp(z))
            if w == 0.0:
                continue
            for s in range(k):
                acc = 0.0
                for a2 in range(s + 1):
                    acc += fwd[i, a2] * bwd[i + 1, s - a2]
                out[i, s] += w * acc
