"""The counterfactual design's compiled checkpoint: its kernels (numba) and the driver that reads the design.

:meth:`CounterfactualDesign.checkpoint <simulations.designs.counterfactual.CounterfactualDesign.checkpoint>` calls
:func:`compiled_checkpoint` while :data:`simulations.stat_kernels.COMPILED` is on (off: the design's NumPy path, the
reference). The kernels compute, in passes over the rows of the design's sums matrix without gathering it, the
active users, the logger's three metrics (:func:`~simulations.designs.counterfactual.paired.ratio_means`) and each
accumulated estimator's paired difference (:func:`~simulations.designs.counterfactual.paired.paired_differences`),
and on a due day adaptive IPS's whole-log choice (:meth:`onlineeval.estimators.AdaptiveIPS.choose`, ``pick`` and the
per-user sums of ``np.bincount``) batch chunk by batch chunk, and each difference's degrees of freedom from the
product rows (:mod:`simulations.designs.counterfactual.df_kernel`; about 20 us an estimator at 4,700 active users).
The numerics are :mod:`simulations.stat_kernels`' (blocked Neumaier sums, the two-pass centring; its helpers are
called from here): the NumPy path's numbers to 1e-12 with the same decisions and choices
(``tests/test_counterfactual_checkpoint_kernels.py``). Rows the kernels do not
take (a non-finite sum, a negative denominator, a denominator summing to 0) are computed by the NumPy path's
:func:`~simulations.designs.counterfactual.paired.paired_difference`, as there. Compiled once per machine: about
6.7 s of CPU with an empty cache.

Costs, ``configs/counterfactual.yaml`` (4,886 of 6,000 users active on day 6, five accumulated estimators; warm
caches, the 2-core machine at load 1-2, 2026-12-01): a checkpoint of a day before the last 170-240 us (NumPy path
0.7-0.8 ms), of which :func:`cf_checkpoint` 105-115 us and the Python around it about 60 (41 of them the 21
``CheckpointRow`` objects); the last day 0.9-1.0 ms (2.3-3.1 ms), adaptive IPS's choice over the 28,000 rows about
0.6-0.7 ms of it (the two passes per target over the rows' terms 0.3 ms, the chosen terms' per-user sums 0.14 ms).
:func:`cf_checkpoint` is bound by its passes over the active users (about 36 at 0.55-0.7 ns a user each: the active
users, the impressions, three per logger metric, five per paired difference), as :func:`aips_pass` by its two
passes: measured no faster were the gathers or sums of several rows in one loop (block by block: 127 against 83
us for 14 rows; two rows a loop: the same), both targets' passes in one call, the Neumaier states kept in memory
(fewer live registers), the per-user sums of all three behaviours folded into the first pass (three times slower)
or without a branch, and the rows' values by NumPy on the eight estimates at once (26 us against 11). In the
benchmark's replicates (cold caches, ``benchmarks/bench_counterfactual.py``) the checkpoints cost 0.12-0.13 us an
impression (quiet) before the kernel's rows were kept, the two types grouped in one pass and the Python trimmed,
5-10% less after (their ratio to team-draft's cost in two sets of alternating runs at load 1.2-2: 0.93 -> 0.84 and
0.94 -> 0.88; on the same design states, interleaved: 9% less on the days before the last, 10-12% on the last).

Imported lazily by the design's checkpoint (this module imports numba); in
:data:`simulations.executors.TASK_MODULES`, so sweep workers load it once, at start.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from simulations import stat_kernels as sk
from simulations.designs.base import CheckpointRow, _values
from simulations.designs.counterfactual.df_kernel import accumulated_dfs, adaptive_dfs
from simulations.designs.counterfactual.paired import PairedEstimate, paired_difference
from simulations.designs.counterfactual.serving import EarlyRefit, _one_chunk
from simulations.stat_kernels import _centre, _gather, _jit, _linear, _neumaier

__all__ = ["CF_EST", "CF_OK", "CF_SE", "aips_chunk_stats", "aips_pass", "aips_table", "aips_user_sums", "cf_checkpoint",
           "cf_paired", "cf_paired_counts", "chunk_bounds", "compiled_checkpoint", "group_rows", "int_bounds",
           "violation_counts"]

# ----------------------------------------------------------------------------- the kernels
# :class:`simulations.designs.counterfactual.design.CounterfactualDesign`'s checkpoint: the paired differences of its
# accumulated estimators (:func:`simulations.designs.counterfactual.paired.paired_differences`) and the logger's three
# metrics (:func:`~simulations.designs.counterfactual.paired.ratio_means`) from the rows of its sums matrix, and
# adaptive IPS's whole-log choice of behaviours (:meth:`onlineeval.estimators.AdaptiveIPS.choose`, ``pick``, the
# per-user sums of ``np.bincount``) on the last day. The same formulas and passes as above.

#: entries of a row of :func:`cf_checkpoint`'s and :func:`cf_paired`'s ``out``: the estimate (a logger metric: the
#: ratio), its SE (a logger metric: the variance), and 1.0 where computed (0.0: the NumPy path computes that row)
CF_EST, CF_SE, CF_OK = range(3)


@_jit
def _gather_neg(src, users, dst, n):
    """:func:`_gather` that also counts the negative gathered values: ``(sum, count)`` (counted in a loop of its
    own, which the compiler vectorises: faster than a minimum in the gathering loop)."""
    s = _gather(src, users, dst, n)
    k = 0
    for t in range(n):
        k += dst[t] < 0.0
    return s, k


@_jit
def _sum(u, n):
    """``sum u[:n]`` (summed as above)."""
    s = c = 0.0
    j = 0
    while j + 16 <= n:
        l0 = l1 = 0.0
        for t in range(j, j + 16, 2):
            l0 += u[t]
            l1 += u[t + 1]
        s, c = _neumaier(s, c, l0 + l1)
        j += 16
    l0 = 0.0
    for t in range(j, n):
        l0 += u[t]
    s, c = _neumaier(s, c, l0)
    return s + c


@_jit
def _paired_d(na, da, nb, db, ra, rb, ya, yb, n):
    """``na[:n] = (nb - rb db) / yb - (na - ra da) / ya`` (the paired difference of the linearised values, the
    NumPy path's operations in its order); returns their sum. (An elementwise loop, which the compiler vectorises,
    then the sum: 3x faster than one loop doing both.)"""
    for t in range(n):
        na[t] = (nb[t] - rb * db[t]) / yb - (na[t] - ra * da[t]) / ya
    return _sum(na, n)


@_jit
def _paired(num_a, den_a, num_b, den_b, users, n, work, o, imp, sy, ky, a_imp, b_imp):
    """One paired difference over the ``users`` (``n >= 2``) of the (P,) per-user sums into ``o`` (:data:`CF_EST`,
    :data:`CF_SE`, :data:`CF_OK`); ``CF_OK`` 0.0 (and NaN values) where the NumPy fast path's conditions fail (a
    non-finite sum, a denominator sum <= 0, a negative denominator): the caller computes that row by NumPy.
    ``a_imp`` / ``b_imp``: that denominator is the impressions, already gathered into ``imp`` (its sum ``sy``, its
    count of negative values ``ky``): not read again."""
    xa = _gather(num_a, users, work[0], n)
    xb = _gather(num_b, users, work[2], n)
    if a_imp:
        da, sa, ka = imp, sy, ky
    else:
        da = work[1]
        sa, ka = _gather_neg(den_a, users, da, n)
    if b_imp:
        db, sb, kb = imp, sy, ky
    else:
        db = work[3]
        sb, kb = _gather_neg(den_b, users, db, n)
    o[CF_EST] = np.nan
    o[CF_SE] = np.nan
    o[CF_OK] = 0.0
    finite = math.isfinite(xa) and math.isfinite(xb) and math.isfinite(sa) and math.isfinite(sb)
    if finite and sa > 0 and sb > 0 and ka == 0 and kb == 0:
        ra = xa / sa
        rb = xb / sb
        mean = _paired_d(work[0], da, work[2], db, ra, rb, sa / n, sb / n, n) / n
        dd = _centre(work[0], mean, n)
        o[CF_EST] = rb - ra
        o[CF_SE] = math.sqrt(dd / float(n * (n - 1)))
        o[CF_OK] = 1.0


@_jit
def cf_checkpoint(acc, rows, idx, work, out):
    """The counterfactual design's checkpoint statistics from its sums matrix ``acc`` (V, P) (row 0 the impressions,
    rows 1-3 the logger's observed metrics), over the users with impressions.

    ``rows`` (E, 4) int64: each accumulated estimator's rows of ``acc``: the numerator for the first target, its
    denominator, the numerator for the second target, its denominator; a denominator given as row 0 (the
    impressions: the design passes 0 for the rows of all-ones terms, which hold the same counts) is not read again.
    ``idx`` (P,) intp scratch (the active users, ascending, on return); ``work`` (5, P) or more float64 scratch;
    ``out`` (3 + E, 3) float64: rows 0-2 the logger metrics' ratio over the impressions and its delta-method
    variance (:func:`onlineeval.stats.online._delta_kernel`; ``CF_OK`` 1.0 where defined), rows ``3 + i`` estimator
    ``i``'s paired difference (:func:`_paired`). Returns ``(n_users, n_impressions)``; ``out`` is set only when
    ``n_users >= 2``."""
    imp = acc[0]
    n = 0
    n_impr = 0.0  # exact: integer counts (as NumPy's sum of them)
    for i in range(imp.shape[0]):  # the active users, without a branch
        idx[n] = i
        n += imp[i] > 0
        n_impr += imp[i]
    if n < 2:
        return n, n_impr
    users = idx[:n]
    y = work[4]
    sy, ky = _gather_neg(imp, users, y, n)
    ybar = sy / n
    for m in range(3):
        o = out[m]
        o[CF_EST] = np.nan
        o[CF_SE] = np.nan
        o[CF_OK] = 0.0
        sx = _gather(acc[1 + m], users, work[0], n)
        if sy > 0:
            r = sx / sy
            mean = _linear(work[0], r, y, n) / n
            o[CF_EST] = r
            o[CF_SE] = _centre(work[0], mean, n) / (float((n - 1) * n) * (ybar * ybar))
            o[CF_OK] = 1.0
    for i in range(rows.shape[0]):
        r = rows[i]
        _paired(acc[r[0]], acc[r[1]], acc[r[2]], acc[r[3]], users, n, work, out[3 + i], y, sy, ky, r[1] == 0,
                r[3] == 0)
    return n, n_impr


@_jit
def cf_paired(num_a, den_a, num_b, den_b, users, work, out):
    """:func:`_paired` of (P,) per-user sums over ``users`` (at least two) into ``out`` (3,); ``work`` (4, P)."""
    _paired(num_a, den_a, num_b, den_b, users, users.shape[0], work, out, work[0], 0.0, 0, False, False)


@_jit
def cf_paired_counts(num_a, num_b, imp, users, work, out):
    """:func:`cf_paired` ``(num_a, imp, num_b, imp, ...)`` with both denominators the impressions ``imp``, gathered
    once (the same values and sums, so the same bits); ``work`` (5, P)."""
    n = users.shape[0]
    y = work[4]
    sy, ky = _gather_neg(imp, users, y, n)
    _paired(num_a, imp, num_b, imp, users, n, work, out, y, sy, ky, True, True)


@_jit
def _group_terms(xa, xb, xr, r, m0, m1, m2, m3, m4, centred):
    """Row ``r``'s five quantities of :func:`_group_sums`."""
    a = xa[r]
    b = xb[r]
    z = xr[r]
    da = a - z
    db = b - z
    if centred:
        a = (a - m0) * (a - m0)
        b = (b - m1) * (b - m1)
        z = (z - m2) * (z - m2)
        da = (da - m3) * (da - m3)
        db = (db - m4) * (db - m4)
    return a, b, z, da, db


@_jit
def _group_sums(xa, xb, xr, rows, n, mean, centred, state):
    """Add to the Neumaier sums ``state`` (5, 2) (sum, compensation), over the rows ``rows[:n]`` of the two
    behaviours' terms ``xa``, ``xb`` and the reference's ``xr``: ``xa``, ``xb``, ``xr``, ``xa - xr``, ``xb - xr``,
    or (``centred``) the squares of their values less ``mean`` (5,) (their means). Summed as above (blocks of 16
    rows in two lanes per quantity, the last block of fewer in one, the block totals in the Neumaier sums); the
    five quantities in one pass (ten independent chains)."""
    m0, m1, m2, m3, m4 = mean[0], mean[1], mean[2], mean[3], mean[4]
    s0, s1, s2, s3, s4 = state[0, 0], state[1, 0], state[2, 0], state[3, 0], state[4, 0]
    c0, c1, c2, c3, c4 = state[0, 1], state[1, 1], state[2, 1], state[3, 1], state[4, 1]
    j = 0
    while j + 16 <= n:
        p0 = p1 = p2 = p3 = p4 = 0.0
        q0 = q1 = q2 = q3 = q4 = 0.0
        for t in range(j, j + 16, 2):
            a, b, z, da, db = _group_terms(xa, xb, xr, rows[t], m0, m1, m2, m3, m4, centred)
            p0 += a
            p1 += b
            p2 += z
            p3 += da
            p4 += db
            a, b, z, da, db = _group_terms(xa, xb, xr, rows[t + 1], m0, m1, m2, m3, m4, centred)
            q0 += a
            q1 += b
            q2 += z
            q3 += da
            q4 += db
        s0, c0 = _neumaier(s0, c0, p0 + q0)
        s1, c1 = _neumaier(s1, c1, p1 + q1)
        s2, c2 = _neumaier(s2, c2, p2 + q2)
        s3, c3 = _neumaier(s3, c3, p3 + q3)
        s4, c4 = _neumaier(s4, c4, p4 + q4)
        j += 16
    p0 = p1 = p2 = p3 = p4 = 0.0
    for t in range(j, n):
        a, b, z, da, db = _group_terms(xa, xb, xr, rows[t], m0, m1, m2, m3, m4, centred)
        p0 += a
        p1 += b
        p2 += z
        p3 += da
        p4 += db
    s0, c0 = _neumaier(s0, c0, p0)
    s1, c1 = _neumaier(s1, c1, p1)
    s2, c2 = _neumaier(s2, c2, p2)
    s3, c3 = _neumaier(s3, c3, p3)
    s4, c4 = _neumaier(s4, c4, p4)
    state[0, 0], state[1, 0], state[2, 0], state[3, 0], state[4, 0] = s0, s1, s2, s3, s4
    state[0, 1], state[1, 1], state[2, 1], state[3, 1], state[4, 1] = c0, c1, c2, c3, c4


@_jit
def _group_two(types, order, starts):
    """:func:`group_rows` of two types: the zeros counted, then one pass placing each row at its type's cursor
    (both cursors in registers, the row's chosen without a branch): 4.7 us for 4,000 rows against 10 by a pass
    per type."""
    n = types.shape[0]
    k1 = 0
    for i in range(n):
        k1 += types[i] == 0
    starts[0] = 0
    starts[1] = k1
    starts[2] = n
    counts = np.empty(2, dtype=np.int64)
    counts[0] = k1
    counts[1] = n - k1
    k0 = 0
    for i in range(n):
        one = types[i] != 0
        order[k1 if one else k0] = i
        k0 += 1 - one
        k1 += one
    return counts


@_jit
def group_rows(types, order, starts):
    """The rows grouped by type: ``order[starts[t]:starts[t + 1]]`` type ``t``'s rows, ascending. ``types`` (N,)
    integers in ``[0, T)``, ``order`` (N,) intp, ``starts`` (T + 1,) int64, both set here. Two types (the
    simulator's configs): :func:`_group_two`; up to 16 one branch-free pass over the rows per type present
    (faster than a counting sort, whose pointer updates chain through memory); else a stable counting sort.
    Returns the counts (T,)."""
    nt = starts.shape[0] - 1
    if nt == 2:
        return _group_two(types, order, starts)
    counts = np.zeros(nt, dtype=np.int64)
    if nt <= 16:
        for t in range(nt):  # branch-free passes (an increment of counts[types[i]] chains through memory)
            k = 0
            for i in range(types.shape[0]):
                k += types[i] == t
            counts[t] = k
    else:
        for i in range(types.shape[0]):
            counts[types[i]] += 1
    starts[0] = 0
    for t in range(nt):
        starts[t + 1] = starts[t] + counts[t]
    if nt <= 16:
        for t in range(nt):
            if counts[t] == 0:
                continue
            k = starts[t]
            end = starts[t + 1]
            for i in range(types.shape[0]):
                if k == end:  # (the write below is one past the type's rows until then: not past the end)
                    break
                order[k] = i
                k += types[i] == t
    else:
        fill = starts[:nt].copy()
        for i in range(types.shape[0]):
            t = types[i]
            order[fill[t]] = i
            fill[t] += 1
    return counts


@_jit
def aips_pass(order, starts, ind, cas, std, reference, mean, centred, state):
    """One pass of adaptive IPS's per-type statistics over one chunk of rows (grouped by :func:`group_rows` into
    ``order``, ``starts``; ``ind``, ``cas``, ``std`` (N,) the chunk's terms of the independent, cascade and
    standard behaviours; ``reference`` the reference's index, 1 or 2): adds to ``state`` (T, 5, 2) each type's
    Neumaier sums (:func:`_group_sums`) of the two other behaviours' terms (finer first), the reference's, and
    the two differences with the reference; ``centred``: of their squares less ``mean`` (T, 5), their means
    (the second pass, as ``np.var``'s)."""
    xa = ind
    xb = std if reference == 1 else cas
    xr = cas if reference == 1 else std
    for t in range(state.shape[0]):
        lo = starts[t]
        hi = starts[t + 1]
        if hi > lo:
            _group_sums(xa, xb, xr, order[lo:hi], hi - lo, mean[t], centred, state[t])


@_jit
def aips_table(counts, sums, squares, reference, out):
    """``out`` (T, 3, 4) of :func:`aips_chunk_stats` from the two passes' Neumaier sums ``sums`` and
    ``squares`` (T, 5, 2) and the rows per type ``counts`` (T,); returns the means (T, 5) when ``squares`` is
    not yet summed (NaN for types without rows) and False if a sum is not finite."""
    ba = 0
    bb = 2 if reference == 1 else 1
    nt = counts.shape[0]
    mean = np.full((nt, 5), np.nan)
    out[:] = np.nan
    finite = True
    for t in range(nt):
        n = counts[t]
        if n == 0:
            continue
        for k in range(5):
            total = sums[t, k, 0] + sums[t, k, 1]
            finite = finite and math.isfinite(total)
            mean[t, k] = total / n
        ss = squares[t, :, 0] + squares[t, :, 1]
        for b, k, kd in ((ba, 0, 3), (bb, 1, 4)):
            out[t, b, 0] = mean[t, k]
            out[t, b, 1] = ss[k]
            out[t, b, 2] = mean[t, kd]
            out[t, b, 3] = ss[kd]
        out[t, reference, 0] = mean[t, 2]
        out[t, reference, 1] = ss[2]
    return mean, finite


@_jit
def int_bounds(a):
    """``(min, max)`` of a non-empty integer array."""
    lo = a[0]
    hi = a[0]
    for i in range(a.shape[0]):
        lo = min(lo, a[i])
        hi = max(hi, a[i])
    return lo, hi


@_jit
def chunk_bounds(types, user):
    """:func:`int_bounds` of a chunk's user types and of its users (non-empty integer arrays): one call."""
    t_lo, t_hi = int_bounds(types)
    u_lo, u_hi = int_bounds(user)
    return t_lo, t_hi, u_lo, u_hi


@_jit
def aips_user_sums(types, table, ind, cas, std, user, sums):
    """``sums += np.bincount(user, pick(choice, terms))`` with each row's behaviour ``table[types[i]]`` (0
    independent, 1 cascade, 2 standard): the same additions in the same (row) order, so from zeros the same bits."""
    for i in range(types.shape[0]):
        c = table[types[i]]
        sums[user[i]] += ind[i] if c == 0 else (cas[i] if c == 1 else std[i])


def aips_chunk_stats(grouped: list[tuple[np.ndarray, np.ndarray]], chunks: list[list[np.ndarray]],
                     counts: np.ndarray, reference: int, out: np.ndarray) -> bool:
    """Per user type the statistics of adaptive IPS's choice over a log kept in chunks: :func:`aips_pass` over
    every chunk (its rows grouped by type by :func:`group_rows`, ``grouped[c] = (order, starts)``; its terms
    ``chunks[c] = [independent, cascade, standard]``), the means, the second (centred) pass, and :func:`aips_table`
    into ``out`` (T, 3, 4) (``counts`` (T,) the rows per type over all chunks): per user type and behaviour ``b``
    the mean of its terms ``x`` over the type's rows, the sum of squares of their centred values, the mean of
    ``d = x - x_reference`` and the sum of squares of its centred values (two passes, as ``np.var``); NaN for the
    reference's ``d`` and for types without rows. False when a sum is not finite (the caller then takes the NumPy
    path)."""
    nt = counts.shape[0]
    sums, squares = np.zeros((nt, 5, 2)), np.zeros((nt, 5, 2))
    zero = np.zeros((nt, 5))
    for (order, starts), terms in zip(grouped, chunks, strict=True):
        aips_pass(order, starts, *terms, reference, zero, False, sums)
    mean, finite = aips_table(counts, sums, squares, reference, out)
    if not finite:
        return False
    for (order, starts), terms in zip(grouped, chunks, strict=True):
        aips_pass(order, starts, *terms, reference, mean, True, squares)
    aips_table(counts, sums, squares, reference, out)
    return True


# ----------------------------------------------------------------------------- the driver
def compiled_checkpoint(design: Any, day: int) -> bool:
    """:meth:`CounterfactualDesign.checkpoint` by the compiled kernels (:func:`cf_checkpoint`: the active
    users, the logger's metrics and the accumulated estimators' paired differences in passes over the rows of
    the sums matrix, without gathering it; adaptive IPS's whole-log choice by :func:`_adaptive_choice`):
    the NumPy path's numbers to rounding (1e-12 relative, tested) and the same rows. Rows whose inputs the
    kernel does not take (a non-finite sum, a negative denominator, a denominator summing to 0) are computed
    by the NumPy path's :func:`paired_difference`, as there. False (nothing recorded) when the sums matrix is
    not the float64 C-contiguous matrix the kernel reads."""
    acc = design._acc
    if acc.dtype != np.float64 or not acc.flags.c_contiguous or any(v.base is not acc for v in design.sums.values()):
        return False
    scratch = sk.scratch_of(design)
    out = np.empty((3 + len(design._acc_labels), 3))
    n, n_impr = cf_checkpoint(acc, _kernel_rows_of(design), scratch.idx[0], scratch.rows(1), out)
    n_users, n_impressions = int(n), int(n_impr)
    if n_users < 2:  # the NumPy path's _has_data: every metric undefined
        values = [(math.nan,) * 5] * len(design.metric_names())
    else:
        users = scratch.idx[0, :n_users].copy()  # the scratch is reused by the kernels below
        values = _estimates(design, day, users, out)
    _append_rows(design.rows, design.name, design.aa, day, design.metric_names(), values, n_users, n_impressions)
    return True


def _kernel_rows_of(design: Any) -> np.ndarray:
    """:func:`_kernel_rows`, made again only when what it reads changes (the rows of all-ones denominators the
    design has decided, its compiled step): 13 us a checkpoint otherwise."""
    key = (tuple(design._unit_rows), design._step)
    kept = design.__dict__.get("_kernel_rows_kept")
    if kept is None or kept[0] != key[0] or kept[1] is not key[1]:
        kept = design._kernel_rows_kept = (key[0], key[1], _kernel_rows(design))
    return kept[2]  # type: ignore[no-any-return]


def _kernel_rows(design: Any) -> np.ndarray:
    """:func:`cf_checkpoint`'s ``rows``: per accumulated estimator its numerator and denominator rows for each
    target, a denominator of impression counts (the design's ``_count_rows``) as row 0 (read once for all)."""
    e, lo = len(design._acc_labels), design._block
    counts = design._count_rows()
    rows = [_estimator_rows(e, lo, i) for i in range(e)]
    return np.array([[r if j % 2 == 0 or r not in counts else 0 for j, r in enumerate(four)] for four in rows],
                    dtype=np.int64).reshape(e, 4)


def _estimates(design: Any, day: int, users: np.ndarray, out: np.ndarray) -> list[tuple[float, ...]]:
    """The design's ``_estimates``' five values of each metric (in its ``metric_names``' order) from
    :func:`cf_checkpoint`'s ``out`` over the active ``users`` (at least two)."""
    alpha, acc, accumulated = design.alpha, design._acc, design._acc_labels
    last = design.config.bootstrap and day == design.last_day
    ok = (out[:, CF_OK] == 1.0).tolist()
    est_, se_ = out[:, CF_EST].tolist(), out[:, CF_SE].tolist()
    dfs = accumulated_dfs(design, users)
    values: list[Any] = []
    whole = None
    for label, est in design.estimators:
        x: Any = None
        if design.whole_log[label]:
            if not design._due(day):
                values.append((math.nan,) * 5)
                continue
            if (label, design.target_names[0]) in design._row_stats:
                codes: list[np.ndarray] = []
                value = _adaptive_choice(design, label, est, users, codes)
                if value is None:
                    codes.clear()
                    x = design._row_stat_sums(label, est, users, acc[0].take(users), codes)
                    value = paired_difference(x[0], x[1], x[2], x[3], alpha)
                value.with_df(adaptive_dfs(design, label, users, codes), alpha)
            else:
                whole = design.log() if whole is None else whole
                weights: list[Any] = []
                try:
                    x = design._whole_log_sums(est, whole, users, day, weights)
                except EarlyRefit:  # a refit before the last day on a log it cannot use: undefined that day
                    values.append((math.nan,) * 5)
                    continue
                value = paired_difference(x[0], x[1], x[2], x[3], alpha)
                value.with_df(design._whole_log_df(weights, whole, users, x), alpha)
        else:
            i = 3 + accumulated.index(label)
            if ok[i]:
                value = PairedEstimate(est_[i], se_[i], alpha)
            else:  # what paired_differences gives such a row
                x = _gathered_rows(design, label, users)
                value = paired_difference(x[0], x[1], x[2], x[3], alpha)
            value.with_df(dfs[i - 3], alpha)
        if last and math.isfinite(value.estimate):
            reselect = design._reselect(label, est, users)
            if reselect is not None:  # the resamples' differences come from the rows (x gives their count only)
                x = [users]
            elif x is None:
                x = (_gathered_rows(design, label, users) if label in accumulated else
                     design._row_stat_sums(label, est, users, acc[0].take(users)))
            value = design._bootstrap(value, x, reselect, test=bool(est.clt_holds_fixed(design.reward)))
        values.append((*_values(value), value.df))
    for m in range(3):  # the logger's three metrics (ratio_means: the SE is the square root of the variance)
        values.append(_values(PairedEstimate(est_[m], math.sqrt(se_[m]), alpha, zero_se_certain=True) if ok[m] else
                              PairedEstimate(math.nan, math.nan, alpha)))
    values += [(float(count),) + (math.nan,) * 4 for count in violation_counts(design)]
    return values


def _gathered_rows(design: Any, label: str, users: np.ndarray) -> list[np.ndarray]:
    """An accumulated estimator's per-user sums over ``users`` (the NumPy path's ``paired_differences`` arguments
    for its row): numerator and denominator for the first target, then for the second."""
    e, lo, i = len(design._acc_labels), design._block, design._acc_labels.index(label)
    return [design._acc[r].take(users) for r in _estimator_rows(e, lo, i)]


def _estimator_rows(e: int, lo: int, i: int) -> tuple[int, int, int, int]:
    """The rows of ``acc`` of the ``i``-th of the ``e`` accumulated estimators (its blocks from row ``lo``: the
    numerators for the first target, for the second, the denominators for the first, for the second): numerator
    and denominator for the first target, then for the second, as ``paired_differences`` takes them."""
    return lo + i, lo + 2 * e + i, lo + e + i, lo + 3 * e + i


def violation_counts(design: Any) -> list[int]:
    """:attr:`violations` of :attr:`support_rows` in their order: the distinct masks as the rows of one int64
    matrix (made once) times the impressions per query, one product (exact integers: the same counts)."""
    if not design.support_rows:
        return []
    kept = design.__dict__.get("_support_matrix")
    if kept is None:
        distinct: dict[int, tuple[int, np.ndarray]] = {}
        for key in design.support_rows:
            mask = design._masks[key]
            distinct.setdefault(id(mask), (len(distinct), mask))
        matrix = np.stack([np.asarray(mask, dtype=np.int64) for _, mask in distinct.values()])
        kept = design._support_matrix = (matrix, [distinct[id(design._masks[key])][0] for key in design.support_rows])
    matrix, which = kept
    counts = (matrix @ design._query_count).tolist()
    return [counts[i] for i in which]


def _adaptive_choice(design: Any, label: str, est: Any, users: np.ndarray,
                     codes: list[np.ndarray] | None = None) -> PairedEstimate | None:
    """The paired difference of the design's ``_row_stat_sums`` by the compiled kernels, batch chunk by batch chunk
    (concatenating the log's 28,000 rows of configs/counterfactual.yaml cost 0.5 ms a target, more than the
    statistics): adaptive IPS's data-driven choice per user type (the rows grouped by type,
    :func:`group_rows`; each type's two passes over its rows,
    :func:`aips_chunk_stats`; :func:`_choose_behaviours`:
    :meth:`~onlineeval.estimators.AdaptiveIPS.choose`'s scores and order), the chosen terms' per-user sums
    (:func:`aips_user_sums`, chunks in order: ``np.bincount``'s bits) and their
    paired difference (:func:`cf_paired_counts`). None (the caller takes the NumPy path) for
    fixed behaviours, a cross-fitted choice (``folds > 1``), user types that are not small non-negative integers,
    users outside the population, non-finite terms, or a row the kernel does not take."""
    from onlineeval.estimators.adaptive_ips import BEHAVIOURS

    if not est.chooses_from_log or not hasattr(est, "choose") or getattr(est, "folds", 1) != 1:
        return None  # (a cross-fitted choice: the NumPy path, design._row_stat_sums)
    metas = design._row_meta
    stats_lists = [design._row_stats[(label, t)] for t in design.target_names]
    if len(metas) > design.max_chunks or any(len(chunks) != len(metas) for chunks in stats_lists):
        for chunks in (metas, *stats_lists):
            _one_chunk(chunks)
    if not metas:
        return None
    n_types = 0
    for meta in metas:
        types, user = meta["user_type"], meta["user"]
        if (types.dtype.kind not in "iu" or user.dtype.kind not in "iu" or types.ndim != 1
                or user.shape != types.shape or types.size == 0):
            return None
        t_lo, t_hi, u_lo, u_hi = chunk_bounds(types, user)
        if t_lo < 0 or t_hi >= 1 << 16 or u_lo < 0 or u_hi >= design.population:  # (np.bincount's errors)
            return None
        n_types = max(n_types, int(t_hi) + 1)
    counts = np.zeros(n_types, dtype=np.int64)
    grouped = []  # per chunk the rows grouped by type: the same for both targets
    for meta in metas:
        order, starts = np.empty(meta["user_type"].size, dtype=np.intp), np.empty(n_types + 1, dtype=np.int64)
        counts += group_rows(meta["user_type"], order, starts)
        grouped.append((order, starts))
    ref = BEHAVIOURS.index(est.reference)
    # the reward's candidate behaviours (a first-click reward: cascade and standard, AdaptiveIPS.candidates)
    allowed = tuple(BEHAVIOURS.index(b) for b in est.candidates(design.reward))
    per_target = []
    user_types = None
    for chunks in stats_lists:
        terms = [[np.ascontiguousarray(stats[b], dtype=np.float64) for b in BEHAVIOURS] for stats in chunks]
        if any(v.ndim != 1 or v.size != meta["user_type"].size for meta, chunk in zip(metas, terms, strict=True)
               for v in chunk):
            return None
        group = np.empty((n_types, 3, 4))
        if not aips_chunk_stats(grouped, terms, counts, ref, group):
            return None
        table = _choose_behaviours(group, counts, ref, allowed)
        per_user = np.zeros(design.population)
        for meta, chunk in zip(metas, terms, strict=True):
            aips_user_sums(meta["user_type"], table, *chunk, meta["user"], per_user)
        per_target.append(per_user)
        if codes is not None:  # each active user's behaviour (its type's), for the degrees of freedom
            if user_types is None:
                every = np.zeros(design.population, dtype=np.int64)
                for meta in metas:
                    every[meta["user"]] = meta["user_type"]  # (a user's rows share its type)
                user_types = every.take(users)
            codes.append(table[user_types])
    o = np.empty(3)
    imp = design._acc[0]
    cf_paired_counts(per_target[0], per_target[1], imp, users, sk.scratch_of(design).rows(1), o)
    if o[CF_OK] != 1.0:
        return None
    return PairedEstimate(o[CF_EST], o[CF_SE], design.alpha)


def _choose_behaviours(group: np.ndarray, counts: np.ndarray, ref: int,
                       allowed: tuple[int, ...] = (0, 1, 2)) -> np.ndarray:
    """Per user type the index of the behaviour of least estimated MSE among ``allowed`` (the reward's candidates,
    :meth:`~onlineeval.estimators.AdaptiveIPS.candidates`; ties: the finer one), from
    :func:`aips_chunk_stats`' per-type statistics, scored by
    :func:`onlineeval.estimators.adaptive_ips.mse_score` as :meth:`~onlineeval.estimators.AdaptiveIPS.choose` does
    (``var(ddof=1)`` the centred sum of squares over ``n_u - 1``), on finite terms. Types without rows get 0 (never
    looked up)."""
    from onlineeval.estimators.adaptive_ips import mse_score

    per_type, stats = counts.tolist(), group.tolist()
    n = sum(per_type)
    table = np.zeros(counts.size, dtype=np.int64)
    for t, n_u in enumerate(per_type):
        if n_u == 0:
            continue
        share = n_u / n
        scores = {}
        for b in allowed:
            _, ss_x, mean_d, ss_d = stats[t][b]
            var_x, var_d = (ss_x / (n_u - 1), ss_d / (n_u - 1)) if n_u > 1 else (math.nan, math.nan)
            scores[b] = mse_score(share, n_u, var_x) if b == ref else mse_score(share, n_u, var_x, var_d, mean_d)
        table[t] = min(allowed, key=lambda b: (scores[b], b))
    return table


def _append_rows(rows: list[Any], name: str, aa: bool, day: int, metrics: list[str], values: list[Any],
                 n_users: int, n_impressions: int) -> None:
    """Append one :class:`CheckpointRow` per metric (the first primary) with its five values (and its degrees of
    freedom where a sixth is given)."""
    for i, (metric, v) in enumerate(zip(metrics, values, strict=True)):
        rows.append(CheckpointRow(name, aa, day, metric, i == 0, *v[:5], n_users, n_impressions, *v[5:]))
