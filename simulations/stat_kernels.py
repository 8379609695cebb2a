"""Compiled checkpoint statistics of the simulator (numba): the delta-method ratio estimates of the daily
checkpoints and the per-batch looks in a few passes over the population arrays, without NumPy's per-call costs.

A checkpoint reads per-user sums kept for the whole population (20,000 users in ``configs/ab.yaml``); the NumPy
path finds the active users (``np.flatnonzero(impressions > 0)``), gathers each sum (``take``), then computes
the ratio, the centred linearised values and their sums of squares, each a call of 5 to 50 us. These kernels do
the same in one branch-free pass over the population (the active users' indices) and passes over the active
users (gather with the sums; the linearised values ``x - R y`` with their sum; the centring with the sums of
squares and cross-products), with the same formulas:

- :func:`ratio_active`: :func:`onlineeval.stats.online.ratio_mean_values` of the users with impressions
  (an interleaving design's checkpoint and per-batch look);
- :func:`ab_arms`: each arm's part of :func:`onlineeval.stats.cuped._cuped_ratio_stacked` (the A/B checkpoint's
  ratios, delta-method variances and, with a pre-period, CUPED's cross-products) or of
  :func:`onlineeval.stats.online.ratio_diff_values` (without a pre-period: the A/B per-batch look);
- :func:`arm_residual`: an arm's adjusted sum of squares from its residuals (CUPED's cancellation branch).

The counterfactual design's checkpoint kernels, which call these helpers, are in
:mod:`simulations.designs.counterfactual.checkpoint`.

Numerics: every sum adds blocks of 16 terms in two lanes and the block totals in a Neumaier (compensated) sum, in
ascending user order: an error bound (about 15 eps of each block's magnitudes plus 2 eps of the result) below
NumPy's pairwise sums' (``(18 + log2(n / 128))`` eps) and its einsum dot products' (one pass, ``n`` eps; tested
against ``math.fsum``); the delta method keeps its two-pass centring (``e = x - R y``; ``e - mean(e)``; then
``sum e^2``); products, quotients and differences are NumPy's elementwise operations in its order. So the results
agree with the NumPy path to rounding, not bit for bit (the summation order differs): on 10 replicates of
``configs/ab.yaml`` every row within 1e-12 relative or 3.4e-16 absolute (tested to 1e-12 / 1e-15 on realistic
and adversarial inputs; where float64 cannot reach that, e.g. a ratio of 1e9 with varying denominators, no
further from the exact value than NumPy); counts and integer sums bit for bit. No parallel reduction and no
fastmath: the numbers do not depend on the machine's cores or the process, and ``NUMBA_DISABLE_JIT=1`` (plain
Python, slow) gives the same bits (tested).

Costs (2-core machine, load about 1): a day-14 checkpoint of ``configs/ab.yaml`` (15k of 20k users active) about
55 us for :func:`ratio_active` (NumPy path 95-105 us) and 0.3 ms for :func:`ab_arms` with CUPED (0.7-0.8 ms);
in a replicate (cold caches) per replicate: A/B checkpoints 26.3 -> 19.5 ms, per-batch looks 18.4 -> 10.5 ms,
interleaving checkpoints 13.4 -> 7.2 ms, the whole replicate 241.5 -> 204.4 ms (``benchmarks/bench_simulation.py
--stat-kernels``, best of 6 alternating rounds in one process). Each pass costs about 0.6 ns a user here, so the
kernels are bound by their passes (fusing the loops measured no faster).

Imported lazily by the code that runs replicates (the designs' checkpoints, :class:`simulations.sequential.
BatchLooks`), never by ``onlineeval power``, ``evaluate`` or ``--help``; compiled on first use and cached
(``cache=True``, as :mod:`simulations.kernels`): with an empty cache about 5 s of CPU once per machine, then about
0.3 s per process to load them (measured with a fresh ``NUMBA_CACHE_DIR``); in
:data:`simulations.executors.TASK_MODULES`, so sweep workers load them once, at start.

:data:`COMPILED` switches the callers to these kernels (True) or to their NumPy path (False: the reference the
tests compare with).
"""

from __future__ import annotations

import math
import threading
from typing import Any

import numba
import numpy as np

from onlineeval.stats._checks import check_alpha
from onlineeval.stats.cuped import _RatioArm, _ratio_diff_from_arms
from onlineeval.stats.online import _z_values

__all__ = ["COMPILED", "ratio_active", "ab_arms", "arm_residual", "ratio_mean_population", "ab_arm_parts", "Scratch",
           "scratch_of", "ratio_values", "ab_diff_values"]

#: the designs' checkpoints and the per-batch looks use these kernels (False: their NumPy path, the reference)
COMPILED = True

_jit = numba.njit(cache=True, nogil=True)

#: the arm statistics of :func:`ab_arms` (entries of ``out[arm]`` before the per-metric blocks)
N, N_ACT, SY, YBAR, SQ, QBAR, ACTIVE_MEAN, AA = range(8)
HEAD = 8
#: per-metric entries of ``out[arm]`` (the block of metric ``m`` starts at ``HEAD + m * STRIDE``)
RATIO, VAR, PRE_RATIO, UBAR, VBAR, UU, UV, UA, VV, VA = range(10)
STRIDE = 10


@_jit
def _neumaier(s, c, x):
    """Neumaier's step: ``(s, c)`` after adding ``x`` to the compensated sum ``s + c``."""
    t = s + x
    if abs(s) >= abs(x):
        c += (s - t) + x
    else:
        c += (x - t) + s
    return t, c


# The sums below add blocks of 16 consecutive terms in two lanes (even and odd terms; then ``l0 + l1``), the
# last block of fewer than 16 in one, and the block totals in a Neumaier sum: an error of at most about 15 eps of
# each block's magnitudes plus 2 eps of the result, below NumPy's pairwise bound (8 lanes of 16 terms and a tree:
# about (18 + log2(n / 128)) eps of the magnitudes; NumPy's einsum dot products accumulate in one pass, n eps).
# Each sum writes out its loop with its own fused term: one loop taking the term as a jitted function would not be
# cached (numba keys a function argument's type by its address: a cache miss and a recompilation in every process,
# checked with numba 0.68).
@_jit
def _gather(src, users, dst, n):
    """``dst[:n] = src[users[:n]]``; returns the sum of the gathered values."""
    s = c = 0.0
    j = 0
    while j + 16 <= n:
        l0 = l1 = 0.0
        for t in range(j, j + 16, 2):
            x0 = src[users[t]]
            x1 = src[users[t + 1]]
            dst[t] = x0
            dst[t + 1] = x1
            l0 += x0
            l1 += x1
        s, c = _neumaier(s, c, l0 + l1)
        j += 16
    l0 = 0.0
    for t in range(j, n):
        x0 = src[users[t]]
        dst[t] = x0
        l0 += x0
    s, c = _neumaier(s, c, l0)
    return s + c


@_jit
def _linear(u, r, y, n):
    """``u[:n] = u - r y`` (the linearised values ``x - R y``); returns their sum."""
    s = c = 0.0
    j = 0
    while j + 16 <= n:
        l0 = l1 = 0.0
        for t in range(j, j + 16, 2):
            x0 = u[t] - r * y[t]
            x1 = u[t + 1] - r * y[t + 1]
            u[t] = x0
            u[t + 1] = x1
            l0 += x0
            l1 += x1
        s, c = _neumaier(s, c, l0 + l1)
        j += 16
    l0 = 0.0
    for t in range(j, n):
        x0 = u[t] - r * y[t]
        u[t] = x0
        l0 += x0
    s, c = _neumaier(s, c, l0)
    return s + c


@_jit
def _centre(u, mean, n):
    """``u[:n] -= mean``; returns the sum of squares of the centred values."""
    s = c = 0.0
    j = 0
    while j + 16 <= n:
        l0 = l1 = 0.0
        for t in range(j, j + 16, 2):
            x0 = u[t] - mean
            x1 = u[t + 1] - mean
            u[t] = x0
            u[t + 1] = x1
            l0 += x0 * x0
            l1 += x1 * x1
        s, c = _neumaier(s, c, l0 + l1)
        j += 16
    l0 = 0.0
    for t in range(j, n):
        x0 = u[t] - mean
        u[t] = x0
        l0 += x0 * x0
    s, c = _neumaier(s, c, l0)
    return s + c


@_jit
def _centre_a(u, mean, a, n):
    """``u[:n] -= mean``; returns ``(u.u, u.a)`` of the centred values."""
    s0 = c0 = s1 = c1 = 0.0
    j = 0
    while j + 16 <= n:
        p0 = p1 = q0 = q1 = 0.0
        for t in range(j, j + 16, 2):
            x0 = u[t] - mean
            x1 = u[t + 1] - mean
            u[t] = x0
            u[t + 1] = x1
            p0 += x0 * x0
            p1 += x1 * x1
            q0 += x0 * a[t]
            q1 += x1 * a[t + 1]
        s0, c0 = _neumaier(s0, c0, p0 + p1)
        s1, c1 = _neumaier(s1, c1, q0 + q1)
        j += 16
    p0 = q0 = 0.0
    for t in range(j, n):
        x0 = u[t] - mean
        u[t] = x0
        p0 += x0 * x0
        q0 += x0 * a[t]
    s0, c0 = _neumaier(s0, c0, p0)
    s1, c1 = _neumaier(s1, c1, q0)
    return s0 + c0, s1 + c1


@_jit
def _centre_v(v, mean, u, a, n):
    """``v[:n] -= mean``; returns ``(v.v, u.v, v.a)`` of the centred values."""
    s0 = c0 = s1 = c1 = s2 = c2 = 0.0
    j = 0
    while j + 16 <= n:
        p0 = p1 = q0 = q1 = r0 = r1 = 0.0
        for t in range(j, j + 16, 2):
            x0 = v[t] - mean
            x1 = v[t + 1] - mean
            v[t] = x0
            v[t + 1] = x1
            p0 += x0 * x0
            p1 += x1 * x1
            q0 += u[t] * x0
            q1 += u[t + 1] * x1
            r0 += x0 * a[t]
            r1 += x1 * a[t + 1]
        s0, c0 = _neumaier(s0, c0, p0 + p1)
        s1, c1 = _neumaier(s1, c1, q0 + q1)
        s2, c2 = _neumaier(s2, c2, r0 + r1)
        j += 16
    p0 = q0 = r0 = 0.0
    for t in range(j, n):
        x0 = v[t] - mean
        v[t] = x0
        p0 += x0 * x0
        q0 += u[t] * x0
        r0 += x0 * a[t]
    s0, c0 = _neumaier(s0, c0, p0)
    s1, c1 = _neumaier(s1, c1, q0)
    s2, c2 = _neumaier(s2, c2, r0)
    return s0 + c0, s1 + c1, s2 + c2


@_jit
def _residual_ss(w, n):
    """``sum w[:n]^2`` (summed as above)."""
    s = c = 0.0
    j = 0
    while j + 16 <= n:
        l0 = l1 = 0.0
        for t in range(j, j + 16, 2):
            l0 += w[t] * w[t]
            l1 += w[t + 1] * w[t + 1]
        s, c = _neumaier(s, c, l0 + l1)
        j += 16
    l0 = 0.0
    for t in range(j, n):
        l0 += w[t] * w[t]
    s, c = _neumaier(s, c, l0)
    return s + c


@_jit
def ratio_active(num, den, imp, idx, work, out):
    """:func:`onlineeval.stats.online.ratio_mean_values`'s ratio and variance over the users with ``imp > 0``.

    ``num``, ``den``, ``imp``: (P,) float64 per-user sums; ``idx``: (P,) intp scratch (the active users,
    ascending, on return); ``work``: (3, P) float64 scratch; ``out``: (6,) float64 set to ``n`` (active users),
    the sum of their ``imp``, of their ``num`` and ``den``, the ratio ``R = sum num / sum den`` and its
    delta-method variance ``sum (e - mean e)^2 / ((n - 1) n ybar^2)`` with ``e = num - R den`` (NaN for both unless
    ``n >= 2`` and the denominators' sum is > 0)."""
    n = 0
    for i in range(imp.shape[0]):  # the active users, without a branch
        idx[n] = i
        n += imp[i] > 0
    users = idx[:n]
    out[0] = n
    out[1] = _gather(imp, users, work[2], n)
    sx = _gather(num, users, work[0], n)
    sy = _gather(den, users, work[1], n)
    out[2] = sx
    out[3] = sy
    out[4] = np.nan
    out[5] = np.nan
    if n >= 2 and sy > 0:
        r = sx / sy
        e = work[0]
        mean = _linear(e, r, work[1], n) / n
        ybar = sy / n
        out[4] = r
        out[5] = _centre(e, mean, n) / (float((n - 1) * n) * (ybar * ybar))


@_jit
def _arm(den, nums, pre_den, pre_nums, has_pre, users, work, out):
    """One arm of :func:`ab_arms` over its active ``users`` (ascending); ``work``: (k + 4, P) scratch."""
    k = nums.shape[0]
    n = users.shape[0]
    y, q, a, v = work[0], work[1], work[2], work[3]
    out[N] = n
    sy = _gather(den, users, y, n)
    out[SY] = sy
    ok = sy > 0
    ybar = sy / n if ok else 1.0
    out[YBAR] = ybar
    sq_n = float((n - 1) * n) * (ybar * ybar)
    out[QBAR] = 1.0
    out[ACTIVE_MEAN] = np.nan
    out[AA] = np.nan
    okq = False
    if has_pre:
        sq = _gather(pre_den, users, q, n)
        out[SQ] = sq
        okq = sq > 0
        out[QBAR] = sq / n if okq else 1.0
        n_act = 0.0
        for j in range(n):
            a[j] = 1.0 if q[j] > 0 else 0.0
            n_act += a[j]
        out[N_ACT] = n_act
        amean = n_act / n
        out[ACTIVE_MEAN] = amean
        out[AA] = _centre(a, amean, n)
    for m in range(k):
        b = HEAD + m * STRIDE
        u = work[4 + m]
        out[b + PRE_RATIO] = np.nan
        if ok:
            r = _gather(nums[m], users, u, n) / sy
            mean = _linear(u, r, y, n) / n
            if has_pre:
                uu, ua = _centre_a(u, mean, a, n)
                out[b + UA] = ua
            else:
                uu = _centre(u, mean, n)
            out[b + RATIO] = r
            out[b + UBAR] = mean
            out[b + UU] = uu
            out[b + VAR] = uu / sq_n
        else:
            u[:n] = 0.0
            out[b + RATIO] = np.nan
            out[b + VAR] = np.nan
            out[b + UU] = 0.0
            out[b + UA] = 0.0
        if okq:
            rq = _gather(pre_nums[m], users, v, n) / sq
            vmean = _linear(v, rq, q, n) / n
            vv, uv, va = _centre_v(v, vmean, u, a, n)
            out[b + PRE_RATIO] = rq
            out[b + VBAR] = vmean
            out[b + VV] = vv
            out[b + UV] = uv
            out[b + VA] = va
        else:
            out[b + VBAR] = 0.0
            out[b + VV] = 0.0
            out[b + UV] = 0.0
            out[b + VA] = 0.0


@_jit
def ab_arms(den, nums, in_b, pre_den, pre_nums, has_pre, idx, work, out):
    """Each arm's ratios, delta-method variances and (``has_pre``) CUPED cross-products over its active users
    (``den > 0``): :func:`onlineeval.stats.cuped._ratio_arm`'s numbers to rounding.

    ``den`` (P,) impressions, ``nums`` (k, P) numerators, ``in_b`` (P,) bool, ``pre_den`` / ``pre_nums`` the
    pre-period's (read only when ``has_pre``), ``idx`` (2, P) intp scratch: on return arm A's active users
    (ascending) in ``idx[0, :n_a]``, arm B's in ``idx[1, :n_b]``; ``work`` (k + 4, P) float64 scratch. ``out``
    (2, HEAD + k * STRIDE) float64: row 0 arm A, row 1 arm B (entries :data:`N` ... :data:`AA`, then per metric
    :data:`RATIO` ... :data:`VA`); only ``N`` is set (the rest NaN) unless both arms have two users or more."""
    p = den.shape[0]
    na = 0
    nb = 0
    for i in range(p):  # both arms' active users, without a branch
        idx[0, na] = i
        idx[1, nb] = i
        active = den[i] > 0
        b = in_b[i]
        na += active and not b
        nb += active and b
    out[:] = np.nan
    out[0, N] = na
    out[1, N] = nb
    if na >= 2 and nb >= 2:
        _arm(den, nums, pre_den, pre_nums, has_pre, idx[0, :na], work, out[0])
        _arm(den, nums, pre_den, pre_nums, has_pre, idx[1, :nb], work, out[1])


@_jit
def arm_residual(den, nums, pre_den, pre_nums, users, m, row, theta1, theta2, work):
    """An arm's adjusted sum of squares of metric ``m`` from its residuals ``u / ybar - theta1 v / qbar - theta2 a``
    (``u``, ``v``, ``a`` the centred values of :func:`ab_arms`, whose ``out[arm]`` is ``row``; ``users`` the
    arm's active users, ascending; ``work`` (P,) scratch): :func:`onlineeval.stats.cuped._cuped_ratio_stacked`'s
    cancellation branch."""
    b = HEAD + m * STRIDE
    r = row[b + RATIO]
    rq = row[b + PRE_RATIO]
    ubar = row[b + UBAR]
    vbar = row[b + VBAR]
    ybar = row[YBAR]
    qbar = row[QBAR]
    amean = row[ACTIVE_MEAN]
    ok = row[SY] > 0
    okq = row[SQ] > 0
    n = users.shape[0]
    for j in range(n):
        i = users[j]
        q = pre_den[i]
        u = (nums[m, i] - r * den[i]) - ubar if ok else 0.0
        v = (pre_nums[m, i] - rq * q) - vbar if okq else 0.0
        a = (1.0 if q > 0 else 0.0) - amean
        work[j] = u / ybar - theta1 * (v / qbar) - theta2 * a
    return _residual_ss(work, n)


# ----------------------------------------------------------------------------- Python entry points
class Scratch:
    """The kernels' work arrays for a population of ``P`` users: ``idx`` (2, P) intp, ``work`` (k + 4, P) float64
    (72 bytes a user with k = 3). The designs share one per thread (:func:`scratch_of`)."""

    def __init__(self, population: int, k: int = 3) -> None:
        self.idx = np.empty((2, population), dtype=np.intp)
        self.work = np.empty((k + 4, population), dtype=np.float64)

    def rows(self, k: int) -> np.ndarray:
        if self.work.shape[0] < k + 4:
            self.work = np.empty((k + 4, self.work.shape[1]), dtype=np.float64)
        return self.work


def ratio_mean_population(num: np.ndarray, den: np.ndarray, imp: np.ndarray, scratch: Scratch
                          ) -> tuple[int, int, float, float, float]:
    """``(n_users, n_impressions, sum of den, R, variance)`` of :func:`ratio_active` over the users with
    ``imp > 0`` (NaN ratio and variance unless two users or more and a positive sum of ``den``)."""
    out = np.empty(6)
    ratio_active(num, den, imp, scratch.idx[0], scratch.work, out)
    return int(out[0]), int(out[1]), float(out[3]), float(out[4]), float(out[5])


def ab_arm_parts(den: np.ndarray, nums: np.ndarray, in_b: np.ndarray, pre: np.ndarray | None, scratch: Scratch
                 ) -> tuple[list[Any], np.ndarray, np.ndarray, Any]:
    """``(arms, users_a, users_b, residual)``: :func:`ab_arms` on ``den`` (P,) and ``nums`` (k, P) (and the
    pre-period's ``(1 + k, P)`` rows ``pre``, or None), each arm as :class:`onlineeval.stats.cuped._RatioArm`
    (``rows`` None; both None unless each arm has two users or more), its active users (views of the scratch
    arrays: valid until the next call), and ``residual(arm, m, theta1, theta2)``, :func:`arm_residual` of arm 0
    (A) or 1 (B)."""
    k = nums.shape[0]
    has_pre = pre is not None
    pre_den, pre_nums = (pre[0], pre[1:]) if pre is not None else (den, nums)
    out = np.empty((2, HEAD + k * STRIDE))
    work = scratch.rows(k)
    ab_arms(den, nums, in_b, pre_den, pre_nums, has_pre, scratch.idx, work, out)
    na, nb = int(out[0, N]), int(out[1, N])
    users = (scratch.idx[0, :na], scratch.idx[1, :nb])
    arms: list[Any] = []
    for row, n in ((out[0], na), (out[1], nb)):
        if na < 2 or nb < 2:
            arms.append(None)
            continue
        blocks = row[HEAD:].reshape(k, STRIDE)
        var = blocks[:, VAR].tolist()
        if not has_pre:
            nan = np.full(k, np.nan)
            arms.append(_RatioArm(n, blocks[:, RATIO].copy(), var, float(row[YBAR]), nan, 1.0, math.nan, 0, None, [],
                                  math.nan))
            continue
        cross = [tuple(b) for b in blocks[:, UU:].tolist()]
        arms.append(_RatioArm(n, blocks[:, RATIO].copy(), var, float(row[YBAR]), blocks[:, PRE_RATIO].copy(),
                              float(row[QBAR]), np.float64(row[ACTIVE_MEAN]), int(row[N_ACT]), None, cross,
                              float(row[AA])))

    def residual(arm: int, m: int, theta1: float, theta2: float) -> float:
        return float(arm_residual(den, nums, pre_den, pre_nums, users[arm], m, out[arm], theta1, theta2, work[0]))

    return arms, users[0], users[1], residual


# ----------------------------------------------------------------------------- the designs' statistics
_LOCAL = threading.local()


def scratch_of(design: Any) -> Scratch:
    """This thread's :class:`Scratch` for the design's population (made on first use, replaced for another
    population): one for all the designs a thread runs (a replicate's designs run in one thread, one after the
    other; the kernels' results are read before the next call), not one per design (72 bytes a user each)."""
    scratch = getattr(_LOCAL, "scratch", None)
    if scratch is None or scratch.idx.shape[1] != design.population:
        scratch = _LOCAL.scratch = Scratch(design.population)
    return scratch


def ratio_values(design: Any, numerators: list[str], denominator: str, alpha: float
                 ) -> tuple[int, int, list[Any] | None]:
    """``(n_users, n_impressions, values)``: for each of the design's sums ``numerators`` the
    :func:`onlineeval.stats.online.ratio_mean_values` of it over ``denominator`` across the users with
    impressions (an interleaving design's checkpoint and per-batch look: ``num:<pair>`` over ``compared``), or
    None for ``values`` while they are undefined (fewer than two users, or no denominator yet: the NumPy path's
    ``_has_data``). The numerators and the denominator must be 0 for users without impressions (the designs'
    sums)."""
    if not numerators:
        raise ValueError("ratio_values: no numerator")
    sums, scratch = design.sums, scratch_of(design)
    imp, den, idx, work = sums["impressions"], sums[denominator], scratch.idx[0], scratch.work
    out = np.empty(6)
    values: list[Any] | None = []
    alpha = check_alpha(alpha)
    for num in numerators:
        ratio_active(sums[num], den, imp, idx, work, out)
        if not (out[0] >= 2 and out[3] > 0):
            values = None
            break
        values.append(_z_values(out[4], math.sqrt(out[5]), 0.0, alpha))
    return int(out[0]), int(out[1]), values


def ab_diff_values(design: Any, rows: list[int], alpha: float) -> tuple[int, list[Any] | None]:
    """``(n_users, values)``: an A/B design's (``test: delta``) :func:`onlineeval.stats.online.ratio_diff_values`
    of its block's ``rows`` (1: clicks, 2: abandoned, 3: reciprocal rank; over the impressions, row 0) between
    the arms' active users, None while undefined (fewer than two users in an arm). The per-batch look."""
    block = design._block
    if any(v.base is not block for v in design.sums.values()):  # sums replaced (or copied): stack them
        block = np.stack(list(design.sums.values()))
    if len(rows) == 1:
        nums = block[rows[0]:rows[0] + 1]
    else:
        nums = np.ascontiguousarray(block[rows])
    arms, users_a, users_b, _ = ab_arm_parts(block[0], nums, design.in_b, None, scratch_of(design))
    n_users = int(users_a.size + users_b.size)
    if arms[0] is None:
        return n_users, None
    return n_users, _ratio_diff_from_arms(arms[0], arms[1], check_alpha(alpha))
